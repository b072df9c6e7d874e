/* vdnn from C: load a model, print its memory plan under a budget, train a few steps on synthetic data.
 * Build against an installed vdnn:  cc train_plan.c $(pkg-config --cflags --libs vdnn) -o train_plan */
#include <stdio.h>

#include <vdnn/vdnn.h>

static int fail(const vdnn_error *e) { return fprintf(stderr, "train_plan: %s\n", e->msg), 1; }

int main(int argc, char **argv)
{
    vdnn_error err;
    vdnn_model_t *model;
    vdnn_backend_t *cpu;
    vdnn_plan_t *plan;
    vdnn_dataset_t *data;
    vdnn_net_t *net;
    vdnn_plan_summary s;
    vdnn_net_options o = vdnn_net_options_default(); /* lenet at batch 16, the model's input and classes */
    o.batch = 16;
    o.memory.policy = VDNN_POLICY_AUTO;             /* keep, swap or recompute: whatever fits fastest */
    vdnn_parse_size(argc > 2 ? argv[2] : "11MiB", &o.memory.budget);
    if (vdnn_model_load(argc > 1 ? argv[1] : "models/lenet.cfg", &model, &err)) return fail(&err);
    if (vdnn_backend_open("cpu", 0, &cpu, &err)) return fail(&err);
    vdnn_shape in;
    int classes;
    vdnn_model_defaults(model, &in, &classes);
    in.n = o.batch;
    if (vdnn_plan_create(model, cpu, NULL, in, classes, &o.memory, &plan, &err)) return fail(&err);
    if (vdnn_plan_summarize(plan, &s, &err)) return fail(&err);
    char a[32], b[32];
    printf("plan: %s, policy %s, peak %s under a %s budget (%s), %zu bytes moved per step\n", s.model,
           vdnn_policy_name(s.policy), vdnn_format_bytes(s.peak_device_bytes, a, sizeof a),
           vdnn_format_bytes(s.budget, b, sizeof b), s.feasible ? "fits" : "does not fit", s.bytes_moved);
    if (vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, in, classes, 1, &data, &err)) return fail(&err);
    if (vdnn_net_create(model, cpu, &o, &net, &err)) return fail(&err);
    const size_t image = (size_t)in.c * in.h * in.w;
    for (int step = 0; step < 3; step++) {
        float loss;
        const size_t first = (size_t)step * o.batch;
        if (vdnn_net_train_step(net, vdnn_dataset_images(data) + first * image, vdnn_dataset_labels(data) + first,
                                0.05f, &loss, &err))
            return fail(&err);
        printf("step %d: loss %.4f\n", step + 1, loss);
    }
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    printf("measured peak %zu bytes, planned %zu\n", st.peak_device_bytes, s.peak_device_bytes);
    vdnn_net_free(net);
    vdnn_dataset_free(data);
    vdnn_plan_free(plan);
    vdnn_backend_free(cpu);
    vdnn_model_free(model);
    return st.peak_device_bytes == s.peak_device_bytes ? 0 : 1;
}
