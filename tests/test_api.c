/* The public API (vdnn/vdnn.h) as a caller sees it: versions, option checks naming fields and ranges, models
 * shared by nets of different sizes, backends by name, plans and their texts, simulation, profiles, nets'
 * parameters and checkpoints, the training loop's progress, and a plan made alone equal to a net's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vdnn/vdnn.h>

#include "testutil.h"

#define MODEL_DIR VDNN_SOURCE_DIR "/models/"

static const char tiny[] = "[net]\nname=tiny\ninput=1x8x8\nclasses=3\n"
                           "[conv1]\ntype=conv\nfilters=4\nsize=3\npad=1\n"
                           "[relu1]\ntype=relu\n"
                           "[pool1]\ntype=maxpool\nsize=2\n"
                           "[fc]\ntype=fc\noutputs=classes\n"
                           "[loss]\ntype=softmax\n";

static void test_version(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", VDNN_VERSION_MAJOR, VDNN_VERSION_MINOR, VDNN_VERSION_PATCH);
    assert_string_equal(vdnn_version(), want);
}

static void test_memory_options_name_fields_and_ranges(void **state)
{
    (void)state;
    vdnn_memory_options m = vdnn_memory_options_default();
    assert_int_equal(m.policy, VDNN_POLICY_NONE);
    assert_true(m.budget == SIZE_MAX && m.host_budget == SIZE_MAX);
    assert_int_equal(m.micro_batches, 1);
    assert_int_equal(m.conv_algo, VDNN_ALGO_DEFAULT);
    vdnn_error err;
    vt_assert_ok(vdnn_memory_options_check(&m, &err), err);
    m.micro_batches = 0;
    vt_assert_error(vdnn_memory_options_check(&m, &err), err, VDNN_ERR_INVALID_ARG, "memory.micro_batches: 0 is out of range (1 to 4096)");
    m = vdnn_memory_options_default();
    m.budget = 0;
    vt_assert_error(vdnn_memory_options_check(&m, &err), err, VDNN_ERR_INVALID_ARG, "memory.budget");
    m = vdnn_memory_options_default();
    m.policy = (vdnn_policy)42;
    vt_assert_error(vdnn_memory_options_check(&m, &err), err, VDNN_ERR_INVALID_ARG, "memory.policy: 42 is out of range");
    m = vdnn_memory_options_default();
    m.link_bandwidth_h2d = -1;
    vt_assert_error(vdnn_memory_options_check(&m, &err), err, VDNN_ERR_INVALID_ARG, "memory.link_bandwidth_h2d");
    vdnn_policy p;
    assert_true(vdnn_policy_parse("auto", &p) && p == VDNN_POLICY_AUTO);
    assert_string_equal(vdnn_policy_name(VDNN_POLICY_POOCH), "pooch");
    assert_false(vdnn_policy_parse("fastest", &p));
}

static void test_model_layers_and_errors(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = NULL;
    vt_assert_ok(vdnn_model_parse(tiny, "tiny.cfg", &m, &err), err);
    assert_string_equal(vdnn_model_name(m), "tiny");
    assert_int_equal(vdnn_model_layer_count(m), 6);
    vdnn_shape def;
    int classes;
    vdnn_model_defaults(m, &def, &classes);
    assert_true(def.c == 1 && def.h == 8 && def.w == 8 && classes == 3);
    vdnn_backend_t *cpu = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_layer_info li[6];
    vt_assert_ok(vdnn_model_layers(m, (vdnn_shape){5, 1, 8, 8}, 0, cpu, li, &err), err);
    assert_string_equal(li[0].type, "input");
    assert_string_equal(li[1].name, "conv1");
    assert_true(li[1].out.n == 5 && li[1].out.c == 4 && li[1].out.h == 8);
    assert_int_equal(li[1].weights, 4 * 9);
    assert_true(li[3].out.h == 4 && li[3].aux_bytes > 0);
    assert_int_equal(li[4].weights, 3 * 4 * 4 * 4);
    assert_int_equal(li[4].out.c, 3);
    /* Another size leaves the model as it was: each call resolves its own copy. */
    vt_assert_ok(vdnn_model_layers(m, (vdnn_shape){2, 1, 16, 16}, 7, NULL, li, &err), err);
    assert_true(li[1].out.n == 2 && li[1].out.h == 16 && li[4].out.c == 7 && li[1].aux_bytes == 0);
    vt_assert_error(vdnn_model_layers(m, (vdnn_shape){100000000, 1, 8, 8}, 0, NULL, li, &err), err,
                    VDNN_ERR_INVALID_ARG, "batch: 100000000 is out of range (1 to 1000000)");
    vdnn_model_t *bad = NULL;
    vt_assert_error(vdnn_model_parse("[net]\n[c]\ntype=convv\n", "bad.cfg", &bad, &err), err, VDNN_ERR_PARSE,
                    "bad.cfg:3");
    assert_null(bad);
    vt_assert_error(vdnn_model_load("/nonexistent/x.cfg", &bad, &err), err, VDNN_ERR_IO, "/nonexistent/x.cfg");
    vdnn_backend_free(cpu);
    vdnn_model_free(m);
}

static void test_backends_by_name(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_backend_t *be = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 2, &be, &err), err);
    assert_string_equal(vdnn_backend_name(be), "cpu");
    assert_int_equal(vdnn_backend_threads(be), 2);
    size_t free_b = 0, total_b = 0;
    vdnn_backend_memory(be, &free_b, &total_b);
    assert_true(free_b == SIZE_MAX && total_b == SIZE_MAX);
    assert_null(vdnn_backend_fallback(be));
    vdnn_backend_free(be);
    be = NULL;
    vt_assert_error(vdnn_backend_open("tpu", 0, &be, &err), err, VDNN_ERR_INVALID_ARG, "'tpu'");
    vt_assert_error(vdnn_backend_open("cuda:x", 0, &be, &err), err, VDNN_ERR_INVALID_ARG, "'cuda:x'");
    vt_assert_error(vdnn_backend_open("cpu", -1, &be, &err), err, VDNN_ERR_INVALID_ARG, "threads: -1 is out of range");
    assert_null(be);
    /* auto always opens something; off CUDA it says why. */
    vt_assert_ok(vdnn_backend_open("auto", 1, &be, &err), err);
    if (strcmp(vdnn_backend_name(be), "cuda")) assert_non_null(vdnn_backend_fallback(be));
    vdnn_backend_free(be);
}

static vdnn_model_t *zoo(const char *name)
{
    vdnn_model_t *m = NULL;
    vdnn_error err;
    char path[512];
    snprintf(path, sizeof path, MODEL_DIR "%s.cfg", name);
    vt_assert_ok(vdnn_model_load(path, &m, &err), err);
    return m;
}

/* The text of a plan, through the caller's buffer: sized first, then filled; a short buffer is cut and ended. */
static char *plan_text(const vdnn_plan_t *p, bool json)
{
    vdnn_error err;
    size_t n = 0, n2 = 0;
    vt_assert_ok(json ? vdnn_plan_json(p, NULL, 0, &n, &err) : vdnn_plan_table(p, NULL, 0, &n, &err), err);
    assert_true(n > 100);
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    char small[16];
    vt_assert_ok(json ? vdnn_plan_json(p, small, sizeof small, &n2, &err) : vdnn_plan_table(p, small, sizeof small, &n2, &err), err);
    assert_int_equal(n2, n);
    assert_int_equal(strlen(small), sizeof small - 1);
    vt_assert_ok(json ? vdnn_plan_json(p, buf, n + 1, NULL, &err) : vdnn_plan_table(p, buf, n + 1, NULL, &err), err);
    assert_int_equal(strlen(buf), n);
    assert_memory_equal(buf, small, sizeof small - 1);
    return buf;
}

static void test_plan_summary_tensors_and_texts(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = zoo("lenet");
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_ALL;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_create(m, NULL, NULL, (vdnn_shape){16, 1, 28, 28}, 10, &mem, &p, &err), err);
    vdnn_plan_summary s;
    vt_assert_ok(vdnn_plan_summarize(p, &s, &err), err);
    assert_string_equal(s.model, "lenet");
    assert_true(s.training && s.feasible && s.policy == VDNN_POLICY_ALL);
    assert_true(s.input.n == 16 && s.classes == 10 && s.micro_batches == 1);
    assert_true(s.peak_device_bytes >= s.max_live_bytes && s.max_live_bytes > s.persistent_bytes);
    assert_true(s.avg_device_bytes <= s.peak_device_bytes);
    assert_true(s.bytes_moved > 0 && s.host_bytes > 0);
    assert_int_equal(s.min_budget_bytes, s.peak_device_bytes); /* a static policy needs its peak at any budget */
    assert_true(s.simulated_s > 0 && s.lower_bound_s > 0 && s.lower_bound_s <= s.simulated_s * 1.000001);
    int swapped = 0;
    for (int i = 0; i < s.tensors; i++) {
        vdnn_tensor_info t;
        vt_assert_ok(vdnn_plan_tensor(p, i, &t, &err), err);
        assert_true(t.name[0] && t.bytes > 0 && t.layer >= 0);
        swapped += !strcmp(t.cls, "swap");
        if (!strcmp(t.cls, "swap")) assert_int_equal(t.class_id, VDNN_CLASS_SWAP);
    }
    assert_true(swapped > 0);
    vdnn_tensor_info t;
    vt_assert_error(vdnn_plan_tensor(p, s.tensors, &t, &err), err, VDNN_ERR_INVALID_ARG, "out of range");
    char *json = plan_text(p, true), *table = plan_text(p, false);
    assert_non_null(strstr(json, "\"policy\": \"all\""));
    assert_non_null(strstr(table, "peak device memory"));
    free(json);
    free(table);

    /* A budget too small is no error: the plan says so and names the smallest budget known. */
    vdnn_plan_t *q = NULL;
    mem.policy = VDNN_POLICY_AUTO;
    mem.budget = 1 << 20;
    vt_assert_ok(vdnn_plan_create(m, NULL, NULL, (vdnn_shape){16, 1, 28, 28}, 10, &mem, &q, &err), err);
    vdnn_plan_summary sq;
    vt_assert_ok(vdnn_plan_summarize(q, &sq, &err), err);
    assert_false(sq.feasible);
    assert_true(sq.min_budget_bytes > sq.budget && sq.min_budget_bytes <= s.peak_device_bytes);
    vdnn_plan_free(q);
    q = NULL;
    mem.micro_batches = 3;
    vt_assert_error(vdnn_plan_create(m, NULL, NULL, (vdnn_shape){16, 1, 28, 28}, 10, &mem, &q, &err), err,
                    VDNN_ERR_INVALID_ARG, "memory.micro_batches");
    assert_null(q);
    vdnn_plan_free(p);
    vdnn_model_free(m);
}

static void test_simulate_and_profiles(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = zoo("lenet");
    const vdnn_shape in = {8, 1, 28, 28};
    vdnn_profile_t *slow = NULL, *back = NULL;
    /* A slow link: swapping every map stalls. */
    vt_assert_ok(vdnn_profile_estimate_model(m, in, 10, 1e12, 1e11, 1e8, 2e8, &slow, &err), err);
    vdnn_profile_summary ps;
    vdnn_profile_summarize(slow, &ps);
    assert_false(ps.measured);
    assert_true(ps.d2h_bytes_per_s == 1e8 && ps.h2d_bytes_per_s == 2e8 && ps.forward_s > 0 && ps.backward_s > 0);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_ALL;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_create(m, NULL, slow, in, 10, &mem, &p, &err), err);
    vdnn_timeline_t *t = NULL;
    vt_assert_ok(vdnn_plan_simulate(p, NULL, &t, &err), err);
    vdnn_timeline_summary ts;
    vdnn_timeline_summarize(t, &ts);
    assert_true(ts.iteration_s >= ts.compute_s && ts.compute_s > 0 && ts.stall_s > 0 && ts.d2h_s > 0);
    vdnn_plan_summary s;
    vt_assert_ok(vdnn_plan_summarize(p, &s, &err), err);
    assert_true(fabs(s.simulated_s - ts.iteration_s) <= 1e-12 * ts.iteration_s);

    char dir[256], path[512], svg[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/slow.json", dir);
    snprintf(svg, sizeof svg, "%s/memory.svg", dir);
    vt_assert_ok(vdnn_profile_save(slow, path, &err), err);
    vt_assert_ok(vdnn_profile_load(path, m, in, 10, &back, &err), err);
    vdnn_profile_summary pb;
    vdnn_profile_summarize(back, &pb);
    assert_true(pb.forward_s == ps.forward_s && pb.h2d_bytes_per_s == ps.h2d_bytes_per_s);
    vdnn_profile_t *other = NULL;
    vt_assert_error(vdnn_profile_load(path, m, (vdnn_shape){16, 1, 28, 28}, 10, &other, &err), err,
                    VDNN_ERR_MISMATCH, path);
    assert_null(other);
    const vdnn_timeline_t *tl[1] = {t};
    const char *names[1] = {"all"};
    vt_assert_ok(vdnn_svg_memory(svg, "title", NULL, tl, names, 1, SIZE_MAX, &err), err);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    vt_assert_ok(vdnn_trace_write(path, tl, names, 1, &err), err);
    vt_rmdir(dir);
    vdnn_timeline_free(t);
    vdnn_plan_free(p);
    vdnn_profile_free(slow);
    vdnn_profile_free(back);
    vdnn_model_free(m);
}

static vdnn_net_t *tiny_net(const vdnn_model_t *m, vdnn_backend_t *be, int batch, uint64_t seed)
{
    vdnn_net_options o = vdnn_net_options_default();
    o.batch = batch;
    o.seed = seed;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(m, be, &o, &net, &err), err);
    return net;
}

static void fill_batch(float *x, int32_t *y, int n, uint64_t seed)
{
    vt_fill_uniform(x, (size_t)n * 64, seed, -1, 1);
    for (int i = 0; i < n; i++) y[i] = (int32_t)((seed + (uint64_t)i) % 3);
}

static void test_nets_share_a_model_params_and_checkpoints(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = NULL;
    vdnn_backend_t *be = NULL;
    vt_assert_ok(vdnn_model_parse(tiny, "tiny.cfg", &m, &err), err);
    vt_assert_ok(vdnn_backend_open("cpu", 1, &be, &err), err);
    /* One model, two nets at different batches, the model freed before they train. */
    vdnn_net_t *a = tiny_net(m, be, 4, 7), *b = tiny_net(m, be, 8, 7);
    vdnn_model_free(m);
    float x[8 * 64], probs[8 * 3];
    int32_t y[8];
    fill_batch(x, y, 8, 1);
    float la = 0, lb = 0;
    vt_assert_ok(vdnn_net_train_step(a, x, y, 0.1f, &la, &err), err);
    vt_assert_ok(vdnn_net_train_step(b, x, y, 0.1f, &lb, &err), err);
    assert_true(isfinite(la) && isfinite(lb) && la > 0 && lb > 0);
    vdnn_net_stats st;
    vdnn_net_get_stats(b, &st);
    assert_true(st.batch == 8 && st.input.n == 8 && st.step == 1 && st.classes == 3 && st.last_step_s > 0);
    vdnn_plan_summary ps;
    vt_assert_ok(vdnn_plan_summarize(vdnn_net_plan(b), &ps, &err), err);
    assert_int_equal(st.peak_device_bytes, ps.peak_device_bytes);

    /* Parameters by name, and their sizes checked. */
    const int n = vdnn_net_param_count(a);
    assert_int_equal(n, 8); /* conv1 and fc: weight and bias, and the momentum of each */
    vdnn_param_info pi;
    vt_assert_ok(vdnn_net_param_info(a, 0, &pi, &err), err);
    assert_string_equal(pi.name, "conv1.weight");
    assert_string_equal(pi.layer, "conv1");
    assert_int_equal(pi.count, 36);
    vt_assert_error(vdnn_net_param_info(a, n, &pi, &err), err, VDNN_ERR_INVALID_ARG, "out of range");
    float w[36], w2[36];
    vt_assert_ok(vdnn_net_get(a, "conv1.weight", w, 36, &err), err);
    for (int i = 0; i < 36; i++) w[i] = 0.01f * (float)i;
    vt_assert_ok(vdnn_net_set(a, "conv1.weight", w, 36, &err), err);
    vt_assert_ok(vdnn_net_get(a, "conv1.weight", w2, 36, &err), err);
    assert_memory_equal(w, w2, sizeof w);
    vt_assert_error(vdnn_net_get(a, "conv1.weight", w, 35, &err), err, VDNN_ERR_INVALID_ARG, "36 values, not 35");
    vt_assert_error(vdnn_net_get(a, "conv9.weight", w, 36, &err), err, VDNN_ERR_INVALID_ARG, "conv9.weight");

    /* Inference: probabilities sum to one; evaluation counts what they predict. */
    vt_assert_ok(vdnn_net_predict(a, x, 3, probs, &err), err);
    int predicted_right = 0;
    for (int i = 0; i < 3; i++) {
        const float *p = probs + 3 * i;
        assert_true(fabsf(p[0] + p[1] + p[2] - 1.0f) < 1e-5f);
        int best = p[1] > p[0] ? 1 : 0;
        best = p[2] > p[best] ? 2 : best;
        predicted_right += best == y[i];
    }
    int correct = -1;
    vt_assert_ok(vdnn_net_eval_batch(a, x, y, 3, &correct, NULL, &err), err);
    assert_int_equal(correct, predicted_right);
    vt_assert_error(vdnn_net_predict(a, x, 5, probs, &err), err, VDNN_ERR_INVALID_ARG, "5 images is out of range (1 to 4)");

    /* A checkpoint carries parameters, momentum and the step to a net of the same model. */
    char dir[256], path[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.ckpt", dir);
    vt_assert_ok(vdnn_net_save(a, path, &err), err);
    vdnn_model_t *m2 = NULL;
    vt_assert_ok(vdnn_model_parse(tiny, "tiny.cfg", &m2, &err), err);
    vdnn_net_t *c = tiny_net(m2, be, 4, 99);
    float wc[36];
    vt_assert_ok(vdnn_net_load(c, path, &err), err);
    vt_assert_ok(vdnn_net_get(c, "conv1.weight", wc, 36, &err), err);
    assert_memory_equal(wc, w, sizeof w);
    vdnn_net_stats sc;
    vdnn_net_get_stats(c, &sc);
    assert_true(sc.step == 1 && sc.seed == 7);
    /* Another class count is another model; a damaged file is refused, naming it. */
    vdnn_net_options o5 = vdnn_net_options_default();
    o5.batch = 4;
    o5.classes = 5;
    vdnn_net_t *d = NULL;
    vt_assert_ok(vdnn_net_create(m2, be, &o5, &d, &err), err);
    vt_assert_error(vdnn_net_load(d, path, &err), err, VDNN_ERR_MISMATCH, path);
    char junk[512];
    vt_write_file(dir, "junk.ckpt", "not a checkpoint", 16, junk, sizeof junk);
    vt_assert_error(vdnn_net_load(c, junk, &err), err, VDNN_ERR_FORMAT, junk);
    vdnn_net_free(c);
    vdnn_net_free(d);
    vdnn_model_free(m2);
    vt_rmdir(dir);
    vdnn_net_free(a);
    vdnn_net_free(b);
    vdnn_backend_free(be);
}

typedef struct progress_log {
    int calls;
    long last_step;
    double last_loss;
} progress_log;

static void on_progress(void *ctx, const vdnn_progress *p)
{
    progress_log *l = ctx;
    l->calls++;
    assert_true(p->step > l->last_step && p->total == 6 && p->lr > 0 && p->images_per_sec > 0);
    l->last_step = p->step;
    l->last_loss = p->loss;
}

static void test_training_loop_reports_progress(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = zoo("lenet");
    vdnn_backend_t *be = NULL;
    vdnn_dataset_t *train = NULL, *test = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &be, &err), err);
    const vdnn_shape syn = {0, 1, 28, 28};
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, syn, 10, 3, &train, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TEST, syn, 10, 3, &test, &err), err);
    const vdnn_shape ds = vdnn_dataset_shape(train);
    assert_true(ds.n == 1024 && ds.c == 1 && ds.h == 28 && vdnn_dataset_classes(train) == 10);
    assert_true(vdnn_dataset_labels(train)[0] >= 0 && vdnn_dataset_labels(train)[0] < 10);
    vdnn_net_options no = vdnn_net_options_default();
    no.batch = 8;
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(m, be, &no, &net, &err), err);
    vdnn_train_options o = vdnn_train_options_default();
    assert_true(o.epochs == 2 && o.lr == 0.05 && !strcmp(o.lr_schedule, "cosine") && o.evaluate);
    progress_log log = {0, 0, 0};
    o.steps = 6;
    o.log_every = 2;
    o.progress = on_progress;
    o.progress_ctx = &log;
    vdnn_timeline_t *last = NULL;
    o.record_last = &last;
    vdnn_train_result r;
    vt_assert_ok(vdnn_train_run(net, train, test, &o, &r, &err), err);
    assert_int_equal(log.calls, 3);
    assert_int_equal(log.last_step, 6);
    assert_true(r.steps == 6 && r.steps_run == 6 && r.final_loss == log.last_loss);
    assert_true(r.test_accuracy >= 0 && r.test_accuracy <= 1);
    assert_non_null(last);
    vdnn_timeline_summary ts;
    vdnn_timeline_summarize(last, &ts);
    assert_true(ts.compute_s > 0);
    double acc = -1;
    vt_assert_ok(vdnn_net_evaluate(net, test, &acc, NULL, &err), err);
    assert_true(acc == r.test_accuracy);
    o.lr_schedule = "sawtooth";
    vt_assert_error(vdnn_train_run(net, train, NULL, &o, &r, &err), err, VDNN_ERR_INVALID_ARG, "lr_schedule: ");
    vdnn_timeline_free(last);
    vdnn_net_free(net);
    vdnn_dataset_free(train);
    vdnn_dataset_free(test);
    vdnn_backend_free(be);
    vdnn_model_free(m);
}

/* A caller feeding vdnn_net_train_step the batches vdnn_dataset_order gives (the Python package does) trains as
 * vdnn_train_run does, bit for bit, across an epoch's end where the order is drawn again. */
static void test_dataset_order_is_the_loops(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = NULL;
    vdnn_backend_t *be = NULL;
    vdnn_dataset_t *ds = NULL;
    vt_assert_ok(vdnn_model_parse(tiny, "tiny.cfg", &m, &err), err);
    vt_assert_ok(vdnn_backend_open("cpu", 1, &be, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, 8, 8}, 3, 5, &ds, &err), err);
    const int n = vdnn_dataset_shape(ds).n, batch = 256, per_epoch = n / batch, steps = per_epoch + 2;
    vdnn_net_options no = vdnn_net_options_default();
    no.batch = batch;
    no.seed = 9;
    vdnn_net_t *loop = NULL, *fed = NULL;
    vt_assert_ok(vdnn_net_create(m, be, &no, &loop, &err), err);
    vt_assert_ok(vdnn_net_create(m, be, &no, &fed, &err), err);
    vdnn_train_options o = vdnn_train_options_default();
    o.steps = steps;
    o.lr_schedule = "constant";
    o.lr = 0.1;
    o.evaluate = false;
    vdnn_train_result r;
    vt_assert_ok(vdnn_train_run(loop, ds, NULL, &o, &r, &err), err);
    int32_t *order = malloc(sizeof *order * (size_t)n), y[256];
    float *x = malloc(sizeof *x * 64 * batch);
    assert_true(order && x);
    for (int s = 0; s < steps; s++) {
        vt_assert_ok(vdnn_dataset_order(ds, no.seed, s / per_epoch, order, &err), err);
        for (int i = 0; i < batch; i++) {
            const int32_t k = order[(s % per_epoch) * batch + i];
            memcpy(x + (size_t)i * 64, vdnn_dataset_images(ds) + (size_t)k * 64, sizeof *x * 64);
            y[i] = vdnn_dataset_labels(ds)[k];
        }
        vt_assert_ok(vdnn_net_train_step(fed, x, y, 0.1f, NULL, &err), err);
    }
    for (int i = 0; i < vdnn_net_param_count(loop); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(loop, i, &pi, &err), err);
        float *a = malloc(sizeof *a * pi.count), *b = malloc(sizeof *b * pi.count);
        assert_true(a && b);
        vt_assert_ok(vdnn_net_get(loop, pi.name, a, pi.count, &err), err);
        vt_assert_ok(vdnn_net_get(fed, pi.name, b, pi.count, &err), err);
        assert_memory_equal(a, b, sizeof *a * pi.count);
        free(a);
        free(b);
    }
    vt_assert_error(vdnn_dataset_order(ds, 1, -1, order, &err), err, VDNN_ERR_INVALID_ARG, "epoch: -1 is out of range");
    free(order);
    free(x);
    vdnn_net_free(loop);
    vdnn_net_free(fed);
    vdnn_dataset_free(ds);
    vdnn_backend_free(be);
    vdnn_model_free(m);
}

/* The branchy net of issue 13 (dense concat joins, a residual block over a dropout branch, a grouped conv, LRN,
 * padded average pooling, two pooled heads concatenated): at a budget where auto must choose, the plan made
 * alone (`vdnn plan`'s call) is the plan a net trains with (`vdnn train`'s), and training measures its peak.
 * They used to differ: without a profile the command planned with one estimate and the net with another. */
/* A backend freed while nets use it closes with the last of them, and a profile is read by vdnn_net_create only:
 * callers whose objects go in no set order (Python's garbage at exit) free them first. The nets train on, and
 * the same steps give the same loss as a net whose backend outlived it (ASan sees any use after free). */
static void test_backend_and_profile_freed_before_their_nets(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = NULL;
    vt_assert_ok(vdnn_model_parse(tiny, "tiny", &m, &err), err);
    float x[4 * 64];
    int32_t y[4] = {0, 1, 2, 1};
    vt_fill_uniform(x, 4 * 64, 9, -1, 1);
    float loss[2][2]; /* [run][net]: run 1 frees the backend while its nets live */
    for (int run = 0; run < 2; run++) {
        vdnn_backend_t *be = NULL;
        vt_assert_ok(vdnn_backend_open("cpu", 1, &be, &err), err);
        vdnn_profile_t *prof = NULL;
        vt_assert_ok(vdnn_profile_estimate_model(m, (vdnn_shape){4, 1, 8, 8}, 0, 1e9, 1e9, 1e9, 1e9, &prof, &err), err);
        vdnn_net_options o = vdnn_net_options_default();
        o.batch = 4;
        o.profile = prof;
        vdnn_net_t *nets[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) vt_assert_ok(vdnn_net_create(m, be, &o, &nets[k], &err), err);
        vdnn_profile_free(prof);
        if (run == 1) vdnn_backend_free(be);
        for (int k = 0; k < 2; k++) {
            vt_assert_ok(vdnn_net_train_step(nets[k], x, y, 0.1f, NULL, &err), err);
            vt_assert_ok(vdnn_net_train_step(nets[k], x, y, 0.1f, &loss[run][k], &err), err);
        }
        vdnn_net_free(nets[0]);
        float more = NAN;
        vt_assert_ok(vdnn_net_train_step(nets[1], x, y, 0.1f, &more, &err), err);
        assert_true(isfinite(more));
        vdnn_net_free(nets[1]);
        if (run == 0) vdnn_backend_free(be);
    }
    assert_true(isfinite(loss[0][0]) && loss[0][1] == loss[0][0] && loss[1][0] == loss[0][0] &&
                loss[1][1] == loss[0][0]);
    vdnn_model_free(m);
}

static void test_plan_alone_is_the_nets_plan(void **state)
{
    (void)state;
    vdnn_error err;
    vdnn_model_t *m = NULL;
    vt_assert_ok(vdnn_model_load(VDNN_SOURCE_DIR "/tests/data/branchy.cfg", &m, &err), err);
    vdnn_backend_t *be = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 0, &be, &err), err);
    vdnn_net_options o = vdnn_net_options_default();
    o.batch = 16;
    o.memory.policy = VDNN_POLICY_AUTO;
    o.memory.conv_algo = VDNN_ALGO_DEFAULT;
    /* An eighth of the way from the least budget any plan needs to in-core's peak (both move with the CPU's op info):
     * a plan that fits by moving maps. */
    vdnn_memory_options core = o.memory;
    core.policy = VDNN_POLICY_NONE;
    vdnn_plan_t *alone = NULL;
    vdnn_plan_summary s;
    size_t least = 0;
    for (int k = 0; k < 2; k++) {
        vt_assert_ok(vdnn_plan_create(m, be, NULL, (vdnn_shape){16, 3, 40, 36}, 0, k ? &core : &o.memory, &alone,
                                      &err), err);
        vt_assert_ok(vdnn_plan_summarize(alone, &s, &err), err);
        if (!k) least = s.min_budget_bytes; /* auto's, unlimited */
        vdnn_plan_free(alone);
        alone = NULL;
    }
    assert_true(least < s.peak_device_bytes);
    o.memory.budget = least + (s.peak_device_bytes - least) / 8;
    vt_assert_ok(vdnn_plan_create(m, be, NULL, (vdnn_shape){16, 3, 40, 36}, 0, &o.memory, &alone, &err), err);
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(m, be, &o, &net, &err), err);
    char *a = plan_text(alone, true), *b = plan_text(vdnn_net_plan(net), true);
    assert_string_equal(a, b);
    vt_assert_ok(vdnn_plan_summarize(alone, &s, &err), err);
    assert_true(s.feasible && s.peak_device_bytes <= o.memory.budget && s.bytes_moved > 0);
    float *x = malloc(sizeof *x * 16 * 3 * 40 * 36);
    int32_t y[16];
    assert_non_null(x);
    vt_fill_uniform(x, 16 * 3 * 40 * 36, 4, 0, 1);
    for (int i = 0; i < 16; i++) y[i] = i % 10;
    vt_assert_ok(vdnn_net_train_step(net, x, y, 0.01f, NULL, &err), err);
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    assert_int_equal(st.peak_device_bytes, s.peak_device_bytes);
    free(x);
    free(a);
    free(b);
    vdnn_net_free(net);
    vdnn_plan_free(alone);
    vdnn_backend_free(be);
    vdnn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_memory_options_name_fields_and_ranges),
        cmocka_unit_test(test_model_layers_and_errors),
        cmocka_unit_test(test_backends_by_name),
        cmocka_unit_test(test_plan_summary_tensors_and_texts),
        cmocka_unit_test(test_simulate_and_profiles),
        cmocka_unit_test(test_nets_share_a_model_params_and_checkpoints),
        cmocka_unit_test(test_training_loop_reports_progress),
        cmocka_unit_test(test_dataset_order_is_the_loops),
        cmocka_unit_test(test_plan_alone_is_the_nets_plan),
        cmocka_unit_test(test_backend_and_profile_freed_before_their_nets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
