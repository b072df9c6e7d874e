/* Every zoo net trained a few steps under none, all and conv: swapping must not change a single bit, the
 * measured arena high-water must equal the planned peak, and a too small budget must fail up front. In the
 * precision VDNN_TEST_PRECISION names (CTest: test_policies in fp32, test_policies_bf16 in bf16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#include "testutil.h"
#include "train/data.h"

#define STEPS_MAX 3

typedef struct net_case {
    const char *model;
    int c, h, w, batch, steps;
} net_case;

/* The smallest inputs each net allows (see the comments at the top of each .cfg), so that the
 * deep ones stay within the time budget on two cores. */
static const net_case all_cases[] = {
    {"lenet", 1, 28, 28, 4, 3},     {"alexnet", 3, 63, 63, 2, 2},   {"overfeat", 3, 71, 71, 2, 2},
    {"googlenet", 3, 32, 32, 2, 2}, {"vgg16", 3, 32, 32, 2, 2},     {"vgg19", 3, 32, 32, 2, 2},
    {"resnet18", 3, 32, 32, 4, 3},  {"resnet50", 3, 32, 32, 2, 2},  {"resnet101", 3, 32, 32, 2, 2},
    {"resnet152", 3, 32, 32, 2, 2},
};
static const char *quick_models[] = {"lenet", "resnet18", "googlenet"};

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[STEPS_MAX];
    size_t train_peak, eval_peak, high_water;
} run_result;

static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

static void config(const net_case *nc, vdnn_policy pol, size_t budget, bool poison, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = nc->batch;
    cfg->in_c = nc->c;
    cfg->in_h = nc->h;
    cfg->in_w = nc->w;
    cfg->classes = 10;
    cfg->memory.policy = pol;
    cfg->memory.budget = budget;
    cfg->memory.poison = poison;
    cfg->memory.precision = (vdnn_precision)vt_test_precision();
    cfg->seed = 11;
}

/* Trains nc->steps steps on consecutive synthetic batches; fills the export, the losses and the
 * measured high-water after training and again after one evaluation batch. */
static void train_run(vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_dataset_t *ds, const net_case *nc,
                      vdnn_policy pol, size_t budget, bool poison, run_result *r)
{
    vdnn_net_options cfg;
    config(nc, pol, budget, poison, &cfg);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    assert_int_equal(net->plan_train->policy, pol);
    assert_true(net->plan_train->feasible);
    const size_t img = (size_t)nc->c * nc->h * nc->w;
    for (int s = 0; s < nc->steps; s++) {
        const float *x = ds->images + img * (size_t)(s * nc->batch);
        const int32_t *y = ds->labels + s * nc->batch;
        vt_assert_ok(vdnn_net_train_step(net, x, y, 0.05f, &r->loss[s], &err), err);
        if (!isfinite(r->loss[s])) fail_msg("%s/%s: step %d loss %g", nc->model, vdnn_policy_name(pol), s, (double)r->loss[s]);
    }
    r->train_peak = net->plan_train->peak_device_bytes;
    r->eval_peak = net->plan_eval->peak_device_bytes;
    r->high_water = net->arena.high_water;
    /* The planned peak is what training really touched: not a byte more, not a byte less. */
    if (r->high_water != r->train_peak)
        fail_msg("%s/%s: arena high-water %zu != planned training peak %zu", nc->model, vdnn_policy_name(pol),
                 r->high_water, r->train_peak);
    /* Evaluation fits in what training needs, so the arena is exactly the training plan's peak. */
    assert_true(r->eval_peak <= r->train_peak);
    assert_true(net->dev_bytes == r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    /* One evaluation batch then raises the mark to the evaluation plan's peak at most: the arena size. */
    int ok = -1;
    double ls = 0;
    vt_assert_ok(vdnn_net_eval_batch(net, ds->images, ds->labels, nc->batch, &ok, &ls, &err), err);
    assert_true(ok >= 0 && ok <= nc->batch);
    assert_true(isfinite(ls));
    assert_true(net->arena.high_water == net->dev_bytes);
    vdnn_net_free(net);
}

static void assert_same_export(const net_case *nc, vdnn_policy pol, const run_result *want, const run_result *got)
{
    char head[96];
    snprintf(head, sizeof head, "%s/%s: against policy none", nc->model, vdnn_policy_name(pol));
    vt_assert_same_checkpoint(head, &want->ck, &got->ck);
    for (int s = 0; s < nc->steps; s++)
        if (memcmp(&want->loss[s], &got->loss[s], sizeof(float)))
            fail_msg("%s/%s: step %d loss %.9g, none gave %.9g", nc->model, vdnn_policy_name(pol), s,
                     (double)got->loss[s], (double)want->loss[s]);
}

/* A plan's device need as vdnn_net_create computes it: training and evaluation plans share the arena. */
static size_t need_of(const run_result *r) { return r->train_peak > r->eval_peak ? r->train_peak : r->eval_peak; }

/* vdnn_net_create must refuse `budget` before allocating anything, naming the smallest budget that
 * works as "... is SIZE (N bytes) with memory.policy P"; returns N and P. */
static void expect_budget_failure(vdnn_graph_t *g, vdnn_backend_t *be, const net_case *nc, vdnn_policy pol,
                                  size_t budget, size_t *named, vdnn_policy *named_pol)
{
    vdnn_net_options cfg;
    config(nc, pol, budget, false, &cfg);
    vdnn_net_t *net = (vdnn_net_t *)&cfg; /* must come back NULL */
    vdnn_error err;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "smallest budget that works is");
    assert_null(net);
    const char *at = strstr(err.msg, "smallest budget that works is");
    const char *paren = strchr(at, '(');
    unsigned long long n = 0;
    char pname[32] = "";
    if (!paren || sscanf(paren, "(%llu bytes) with memory.policy %31s", &n, pname) != 2 || !vdnn_policy_parse(pname, named_pol))
        fail_msg("%s/%s: cannot read the smallest budget from: %s", nc->model, vdnn_policy_name(pol), err.msg);
    *named = (size_t)n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const vdnn_policy swapping[] = {VDNN_POLICY_ALL, VDNN_POLICY_CONV};
#define N_SWAPPING 2

static void run_case(const net_case *nc)
{
    double t0 = now();
    vdnn_error err;
    vdnn_graph_t *g = vt_load_zoo(nc->model);
    vdnn_backend_t *be = NULL;
    /* One compute thread: the policies must agree bit for bit at any thread count, and on a loaded
     * two-core machine idle OpenMP workers spinning beside the copy threads cost minutes. */
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    vdnn_dataset_t *ds = NULL;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, nc->c, nc->h, nc->w}, 10, 5, &ds, &err),
                 err);
    assert_true(ds->count >= nc->batch * nc->steps);

    run_result ref, r[N_SWAPPING];
    memset(&ref, 0, sizeof ref);
    memset(r, 0, sizeof r);
    train_run(g, be, ds, nc, VDNN_POLICY_NONE, SIZE_MAX, false, &ref);

    /* Each swapping policy's need, planned as vdnn_net_create plans: the training plan, and the
     * evaluation plan above the training plan's persistent state, share the arena. */
    size_t need[N_SWAPPING], none_need = need_of(&ref), smallest = none_need;
    vdnn_op_info *info = calloc((size_t)g->n_layers, sizeof *info);
    assert_non_null(info);
    /* Nets resolve copies of the model: the plans here need it resolved as theirs were. */
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){nc->batch, nc->c, nc->h, nc->w}, 10, &err), err);
    g->dtype = vt_test_precision();
    vt_assert_ok(vdnn_plan_query_ops(g, be, true, info, &err), err);
    for (int k = 0; k < N_SWAPPING; k++) {
        vdnn_plan_request rq = vdnn_plan_request_default();
        rq.memory.policy = swapping[k];
        vdnn_plan_t *p = NULL;
        vt_assert_ok(vdnn_plan_build(g, info, &rq, &p, &err), err);
        need[k] = p->peak_device_bytes > ref.eval_peak ? p->peak_device_bytes : ref.eval_peak;
        assert_true(p->feasible);
        assert_true(p->host_bytes > 0);
        assert_true(p->bytes_moved > 0);
        /* A static policy's plan does not depend on the budget: one byte less and it does not fit. */
        rq.memory.budget = p->peak_device_bytes - 1;
        vdnn_plan_t *q = NULL;
        vt_assert_ok(vdnn_plan_build(g, info, &rq, &q, &err), err);
        assert_false(q->feasible);
        assert_true(q->peak_device_bytes == p->peak_device_bytes);
        vdnn_plan_free(q);
        vdnn_plan_free(p);
        if (need[k] >= ref.train_peak)
            fail_msg("%s/%s: needs %zu bytes, not less than none's peak %zu", nc->model, vdnn_policy_name(swapping[k]),
                     need[k], ref.train_peak);
        if (need[k] < smallest) smallest = need[k];
    }
    free(info);
    size_t named;
    vdnn_policy named_pol;
    for (int k = 0; k < N_SWAPPING; k++) {
        /* At exactly its need, with every freed or offloaded byte poisoned, swapping changes no bit. */
        train_run(g, be, ds, nc, swapping[k], need[k], true, &r[k]);
        assert_true(need_of(&r[k]) == need[k]);
        assert_same_export(nc, swapping[k], &ref, &r[k]);
    }
    /* none one byte below its need: the named budget is at most what every static policy needs, and
     * a net with the named policy really fits in it. */
    expect_budget_failure(g, be, nc, VDNN_POLICY_NONE, none_need - 1, &named, &named_pol);
    if (named > smallest)
        fail_msg("%s: the error names %zu bytes (--policy %s), but --policy %s needs only %zu", nc->model, named,
                 vdnn_policy_name(named_pol), smallest == need[0] ? "all" : "conv", smallest);
    vdnn_net_options cfg;
    config(nc, named_pol, named, false, &cfg);
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    assert_true(net->dev_bytes <= named);
    vdnn_net_free(net);
    print_message("%-10s %s %dx%dx%dx%d peak: none %zu, all %zu (%.1f%%), conv %zu (%.1f%%); %.1f s\n", nc->model,
                  vdnn_dtype_name(g->dtype), nc->batch, nc->c, nc->h, nc->w, ref.train_peak, r[0].train_peak,
                  100.0 * (double)r[0].train_peak / (double)ref.train_peak, r[1].train_peak,
                  100.0 * (double)r[1].train_peak / (double)ref.train_peak, now() - t0);
    vdnn_checkpoint_release(&ref.ck);
    for (int k = 0; k < N_SWAPPING; k++) vdnn_checkpoint_release(&r[k].ck);
    vdnn_dataset_free(ds);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

static void test_case(void **state)
{
    net_case nc = *(const net_case *)*state;
    if (quick()) {
        /* Under the sanitizers: the smallest batch and two steps. */
        nc.batch = 2;
        nc.steps = 2;
    }
    run_case(&nc);
}

int main(void)
{
    vt_test_precision(); /* an unknown name fails, a type this CPU lacks skips, before any case */
    struct CMUnitTest tests[sizeof all_cases / sizeof all_cases[0]];
    int n = 0;
    for (size_t i = 0; i < sizeof all_cases / sizeof all_cases[0]; i++) {
        bool take = !quick();
        for (size_t k = 0; k < sizeof quick_models / sizeof quick_models[0]; k++)
            take |= !strcmp(all_cases[i].model, quick_models[k]);
        if (!take) continue;
        tests[n] = (struct CMUnitTest){all_cases[i].model, test_case, NULL, NULL, (void *)&all_cases[i]};
        n++;
    }
    /* VDNN_TEST_FILTER=resnet* runs a subset (cmocka's glob). */
    if (getenv("VDNN_TEST_FILTER")) cmocka_set_test_filter(getenv("VDNN_TEST_FILTER"));
    return _cmocka_run_group_tests("policies", tests, (size_t)n, NULL, NULL);
}
