/* Convolution algorithms in plans: planners that may choose reach budgets the default algorithms
 * cannot, the plans they choose run within the planned peak, every policy under the same algorithms
 * trains bit-identically, and training under leaner algorithms stays close to the default's. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "testutil.h"
#include "train/data.h"

#define BATCH 8
#define SIDE 64
#define STEPS 2

/* VGG-16 at 64x64: its first layers' copies take 1 MiB an image; an 8 MiB chunk cap lets the fast
 * algorithm copy the whole batch and the lean one a single image, as at 224x224 and batch 256. There the
 * convolutions bind the smallest budgets; here VGG-16's 4096-wide classifier would, on a CPU without Winograd
 * kernels (oneDNN 2.6 has them for AVX-512 only): fc7's 64 MiB weight gradient outweighs every convolution's
 * direct-kernel copies at batch 8, and no algorithm could lower the budget. So the classifier is 512 wide, and
 * the convolutions bind the budgets on every CPU, as at full size. */
typedef struct env {
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    vdnn_dataset_t *ds;
    vdnn_op_info *info;
    vdnn_layer_algos *algos;
} env;

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    vdnn_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/models/vgg16.cfg", VDNN_SOURCE_DIR);
    char *text = vt_read_file(path, NULL);
    if (!e || !text) return -1;
    /* fc6 and fc7: "outputs=4096" to "outputs=512 " (same length, trailing blank ignored). */
    for (char *at = text; (at = strstr(at, "outputs=4096")) != NULL;) memcpy(at, "outputs=512 ", 12);
    const int parsed = vdnn_graph_parse(text, path, &e->g, &err);
    free(text);
    if (parsed) return -1;
    if (vdnn_graph_resolve(e->g, (vdnn_shape){BATCH, 3, SIDE, SIDE}, 10, &err)) return -1;
    vdnn_cpu_options co = {.threads = 2, .conv_chunk_bytes = 8 << 20};
    if (vdnn_backend_cpu_create(&co, &e->be, &err)) return -1;
    if (vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, 3, SIDE, SIDE}, 10, 5, &e->ds, &err)) return -1;
    e->info = calloc((size_t)e->g->n_layers, sizeof *e->info);
    e->algos = calloc((size_t)e->g->n_layers, sizeof *e->algos);
    if (!e->info || !e->algos) return -1;
    if (vdnn_plan_query_ops(e->g, e->be, true, e->info, &err)) return -1;
    if (vdnn_plan_query_algos(e->g, e->be, true, e->algos, NULL, &err)) return -1;
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    free(e->info);
    free(e->algos);
    vdnn_dataset_free(e->ds);
    vdnn_backend_destroy(e->be);
    vdnn_graph_free(e->g);
    free(e);
    return 0;
}

static vdnn_plan_request request(const env *e, vdnn_policy pol, size_t budget, int force_algo)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = pol;
    rq.memory.budget = budget;
    rq.memory.conv_algo = force_algo;
    rq.algos = e->algos;
    return rq;
}

static size_t min_budget(const env *e, int force_algo)
{
    vdnn_plan_request rq = request(e, VDNN_POLICY_NONE, SIZE_MAX, force_algo);
    size_t mb = 0;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_min_budget(e->g, e->info, &rq, &mb, &err), err);
    return mb;
}

static vdnn_plan_t *plan(const env *e, vdnn_policy pol, size_t budget, int force_algo)
{
    vdnn_plan_request rq = request(e, pol, budget, force_algo);
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(e->g, e->info, &rq, &p, &err), err);
    return p;
}

static int non_default(const vdnn_plan_t *p)
{
    int n = 0;
    for (int l = 1; l < p->n_layers; l++) n += p->algo[l] != 0;
    return n;
}

typedef struct run {
    vdnn_checkpoint ck;
    float loss[STEPS];
    int non_default;
} run;

/* STEPS steps with poisoned free memory; the arena's high-water mark must be the planned peak. */
static void train(const env *e, vdnn_policy pol, size_t budget, int algo, run *r)
{
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = BATCH, cfg.in_c = 3, cfg.in_h = SIDE, cfg.in_w = SIDE, cfg.classes = 10;
    cfg.memory.policy = pol, cfg.memory.budget = budget, cfg.memory.poison = true, cfg.seed = 5, cfg.memory.conv_algo = algo;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(e->g, e->be, &cfg, &net, &err), err);
    const size_t img = 3 * SIDE * SIDE;
    for (int s = 0; s < STEPS; s++)
        vt_assert_ok(vdnn_net_train_step(net, e->ds->images + img * (size_t)(s * BATCH), e->ds->labels + s * BATCH,
                                         0.05f, &r->loss[s], &err),
                     err);
    if (net->arena.high_water != net->plan_train->peak_device_bytes)
        fail_msg("%s: arena high-water %zu != planned peak %zu", vdnn_policy_name(pol), net->arena.high_water,
                 net->plan_train->peak_device_bytes);
    r->non_default = non_default(net->plan_train);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
}

/* Largest difference between two runs' tensors, relative to the largest magnitude of each tensor,
 * over the parameters (momentum false) or the momentum buffers (true). */
static double max_rel_diff(const run *a, const run *b, int bitwise, bool momentum)
{
    assert_int_equal(a->ck.n_tensors, b->ck.n_tensors);
    double worst = 0;
    for (int i = 0; i < a->ck.n_tensors; i++) {
        const vdnn_ckpt_tensor *x = &a->ck.tensors[i], *y = &b->ck.tensors[i];
        assert_int_equal(x->count, y->count);
        if ((strstr(x->name, ".momentum") != NULL) != momentum) continue;
        if (bitwise && memcmp(x->data, y->data, x->count * sizeof(float)))
            fail_msg("tensor %s differs bitwise", x->name);
        double scale = 1e-6, d = 0;
        for (size_t k = 0; k < x->count; k++) scale = fmax(scale, fabs(x->data[k]));
        for (size_t k = 0; k < x->count; k++) d = fmax(d, fabs((double)x->data[k] - y->data[k]));
        if (getenv("VDNN_TEST_VERBOSE")) print_message("  %s: %.3g of %.3g\n", x->name, d, scale);
        worst = fmax(worst, d / scale);
    }
    return worst;
}

static void test_candidates(void **state)
{
    const env *e = *state;
    int convs = 0;
    for (int l = 1; l < e->g->n_layers; l++) {
        assert_true(e->algos[l].n >= 1);
        assert_memory_equal(&e->algos[l].a[0].info, &e->info[l], sizeof e->info[l]);
        if (e->g->layers[l].kind != VDNN_LAYER_CONV) {
            assert_int_equal(e->algos[l].n, 1);
            continue;
        }
        convs++;
        /* The first layers copy less with a leaner candidate. */
        size_t least = SIZE_MAX;
        for (int k = 0; k < e->algos[l].n; k++)
            if (e->algos[l].a[k].info.bwd_ws_bytes < least) least = e->algos[l].a[k].info.bwd_ws_bytes;
        if (e->g->layers[l].out.h == SIDE) assert_true(least < e->algos[l].a[0].info.bwd_ws_bytes);
    }
    assert_int_equal(convs, 13);
}

/* Choosing algorithms reaches a smaller budget; at it auto and dyn find plans the defaults cannot. */
static void test_smaller_budgets(void **state)
{
    const env *e = *state;
    const size_t fixed = min_budget(e, 0), choose = min_budget(e, VDNN_ALGO_CHOOSE);
    print_message("smallest budget: %zu with the default algorithms, %zu choosing\n", fixed, choose);
    assert_true(choose < fixed);
    vdnn_plan_t *p = plan(e, VDNN_POLICY_AUTO, choose, VDNN_ALGO_CHOOSE);
    assert_true(p->feasible);
    assert_true(p->peak_device_bytes <= choose);
    assert_true(non_default(p) > 0);
    assert_true(vdnn_plan_algos_change_numerics(p));
    vdnn_plan_free(p);
    /* The default algorithms with the parameters on the device do not fit; auto then homes the parameters in
     * host memory (tests/test_offload_params.c), which does. */
    p = plan(e, VDNN_POLICY_AUTO, choose, 0);
    assert_true(!p->feasible || p->offload_params);
    assert_int_equal(non_default(p), 0);
    vdnn_plan_free(p);

    /* dyn's most memory-saving configuration is vDNN_all with the leanest algorithms. */
    vdnn_plan_t *lean_all = plan(e, VDNN_POLICY_ALL, SIZE_MAX, VDNN_ALGO_LEANEST);
    vdnn_plan_t *fast_all = plan(e, VDNN_POLICY_ALL, SIZE_MAX, 0);
    assert_true(lean_all->peak_device_bytes < fast_all->peak_device_bytes);
    p = plan(e, VDNN_POLICY_DYN, lean_all->peak_device_bytes, VDNN_ALGO_CHOOSE);
    assert_true(p->feasible);
    assert_true(non_default(p) > 0);
    vdnn_plan_free(p);
    p = plan(e, VDNN_POLICY_DYN, lean_all->peak_device_bytes, 0);
    assert_false(p->feasible);
    vdnn_plan_free(p);
    vdnn_plan_free(lean_all);
    vdnn_plan_free(fast_all);

    /* With room to spare nothing changes: the defaults are the fastest. */
    p = plan(e, VDNN_POLICY_AUTO, SIZE_MAX, VDNN_ALGO_CHOOSE);
    assert_int_equal(non_default(p), 0);
    vdnn_plan_free(p);
}

/* Under the same algorithms every policy trains bit-identically; a plan with leaner algorithms runs
 * within its planned peak and stays within float rounding of the defaults. */
static void test_training(void **state)
{
    const env *e = *state;
    run none_lean = {0}, all_lean = {0}, none_fast = {0}, chosen = {0};
    const int lean = VDNN_ALGO_LEANEST;
    train(e, VDNN_POLICY_NONE, SIZE_MAX, lean, &none_lean);
    vdnn_plan_t *p = plan(e, VDNN_POLICY_ALL, SIZE_MAX, lean);
    train(e, VDNN_POLICY_ALL, p->peak_device_bytes, lean, &all_lean);
    vdnn_plan_free(p);
    max_rel_diff(&none_lean, &all_lean, 1, false);
    max_rel_diff(&none_lean, &all_lean, 1, true);
    for (int s = 0; s < STEPS; s++) assert_memory_equal(&none_lean.loss[s], &all_lean.loss[s], sizeof(float));

    train(e, VDNN_POLICY_NONE, SIZE_MAX, 0, &none_fast);
    train(e, VDNN_POLICY_AUTO, min_budget(e, VDNN_ALGO_CHOOSE), VDNN_ALGO_CHOOSE, &chosen);
    assert_true(chosen.non_default > 0);
    /* Weights move by lr * momentum, so rounding shows little in them; the gradient sums in the momentum
     * buffers of deep layers cancel to a few 1e-5 from terms a thousand times larger, so the order of the
     * sums shows there as a part in a hundred. A chunk lost or read from poisoned memory would be O(1). */
    double dw = max_rel_diff(&none_fast, &chosen, 0, false), dm = max_rel_diff(&none_fast, &chosen, 0, true);
    print_message("largest difference from the default algorithms, of a tensor's largest value: %.3g in the "
                  "parameters, %.3g in the momentum\n", dw, dm);
    assert_true(dw < 1e-5);
    assert_true(dm < 0.05);
    assert_true(fabsf(chosen.loss[STEPS - 1] - none_fast.loss[STEPS - 1]) < 1e-4f * fabsf(none_fast.loss[STEPS - 1]));
    vdnn_checkpoint_release(&none_lean.ck);
    vdnn_checkpoint_release(&all_lean.ck);
    vdnn_checkpoint_release(&none_fast.ck);
    vdnn_checkpoint_release(&chosen.ck);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_smaller_budgets),
        cmocka_unit_test(test_training),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
