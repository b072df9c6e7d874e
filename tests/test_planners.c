/* The profile-guided planners on the zoo: plans that recompute (chosen by a planner or forced) train
 * bit-identically to in-core with the planned arena, every plan said to fit really fits, auto is never
 * slower in simulation than another planner, the lower bound holds, and planning stays fast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/policy.h"
#include "plan/simulate.h"
#include "testutil.h"
#include "train/data.h"

#define STEPS_MAX 3

typedef struct net_case {
    const char *model;
    int c, h, w, batch, steps;   /* small input, trained */
    int big_h, big_batch;        /* a larger input, planned only (0: none) */
    int expect_rc;               /* at the training budget, pooch (1), auto (2) and recompute (4) recompute */
} net_case;

/* The small inputs are test_policies' (the smallest each net allows); at those the parameters dominate
 * memory, so the planners are also judged at an input where the feature maps do. */
static const net_case all_cases[] = {
    {"lenet", 1, 28, 28, 4, 3, 28, 256, 7},      {"alexnet", 3, 63, 63, 2, 2, 224, 32, 7},
    {"overfeat", 3, 71, 71, 2, 2, 231, 16, 0},   {"googlenet", 3, 32, 32, 2, 2, 224, 16, 2},
    {"vgg16", 3, 32, 32, 2, 2, 224, 8, 7},       {"vgg19", 3, 32, 32, 2, 2, 224, 8, 7},
    {"resnet18", 3, 32, 32, 4, 3, 224, 16, 7},   {"resnet50", 3, 32, 32, 2, 2, 224, 8, 6},
    {"resnet101", 3, 32, 32, 2, 2, 0, 0, 6},     {"resnet152", 3, 32, 32, 2, 2, 0, 0, 6},
};
static const char *quick_models[] = {"lenet", "resnet18", "googlenet"};

static const vdnn_policy planners[] = {VDNN_POLICY_RECOMPUTE, VDNN_POLICY_DYN, VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
#define N_PLANNERS 4

static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Planning runs on the calling thread alone: its CPU time does not depend on what else the machine runs. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Roofline estimates: an H100-like device on PCIe gen5, and a slow device on a slow link. */
static void estimate(const vdnn_graph_t *g, bool slow, vdnn_profile *prof)
{
    vdnn_error err;
    if (slow) vt_assert_ok(vdnn_profile_estimate(g, 1e12, 1e11, 2e9, prof, &err), err);
    else vt_assert_ok(vdnn_profile_estimate(g, 4e13, 2e12, 16e9, prof, &err), err);
}

static vdnn_op_info *query_ops(const vdnn_graph_t *g, vdnn_backend_t *be)
{
    vdnn_error err;
    vdnn_op_info *info = calloc((size_t)g->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(g, be, true, info, &err), err);
    return info;
}

static vdnn_plan_t *plan_at(const vdnn_graph_t *g, const vdnn_op_info *info, vdnn_policy pol, size_t budget,
                            size_t host_budget, const vdnn_profile *prof)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = pol;
    rq.memory.budget = budget;
    rq.memory.host_budget = host_budget;
    rq.profile = prof;
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(g, info, &rq, &p, &err), err);
    return p;
}

static size_t min_budget(const vdnn_graph_t *g, const vdnn_op_info *info)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    size_t mb = 0;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_min_budget(g, info, &rq, &mb, &err), err);
    return mb;
}

/* The smallest peak of Chen's plans with kept checkpoints (every spacing but 1, which is in-core): what the
 * recompute planner needs to recompute at all (it swaps its checkpoints only where none of these fits). Recomputing
 * brings a layer's forward workspace back during backward, so on nets whose parameters dominate these peaks may
 * exceed in-core's, by how much depending on the convolutions' workspaces (oneDNN's layouts on this CPU's ISA). */
static size_t chen_kept_min_peak(const vdnn_graph_t *g, const vdnn_op_info *info)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_analyze(g, info, &rq, &p, &err), err);
    size_t best = SIZE_MAX;
    const int n = vdnn_chen_candidates(p);
    for (int k = 2; k <= n; k++) {
        vdnn_chen_classes(p, g, k, false);
        vt_assert_ok(vdnn_plan_finalize(p, &err), err);
        if (p->peak_device_bytes < best) best = p->peak_device_bytes;
    }
    vdnn_plan_free(p);
    return best;
}

static double simulated(const vdnn_plan_t *p, const vdnn_graph_t *g, const vdnn_profile *prof)
{
    vdnn_timeline tl;
    vdnn_error err;
    vt_assert_ok(vdnn_simulate(p, g, prof, &tl, &err), err);
    double t = tl.iteration_s;
    vdnn_timeline_release(&tl);
    return t;
}

static int count_class(const vdnn_plan_t *p, vdnn_tensor_class c)
{
    int n = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) n += p->st[i].cls == c;
    return n;
}

/* ---- Training: recomputation changes no bit ---- */

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[STEPS_MAX];
    size_t train_peak, eval_peak;
    int n_recompute, n_swap;
    double sim_s; /* the training plan's simulated iteration */
} run_result;

typedef struct train_env {
    const net_case *nc;
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    vdnn_backend_ops ops; /* the CPU backend's, with a faster poison */
    vdnn_dataset_t *ds;
    vdnn_profile prof;
} train_env;

/* The same NaN pattern as the CPU backend's poison, written by doubling copies: the backend's byte loop
 * would take most of this program's time on the nets with large fully connected layers. */
static vdnn_status fast_poison(vdnn_backend_t *be, void *dst, size_t bytes, vdnn_error *err)
{
    (void)be;
    (void)err;
    const float qnan = NAN;
    unsigned char *p = dst;
    size_t n = bytes < sizeof qnan ? bytes : sizeof qnan;
    memcpy(p, &qnan, n);
    while (n < bytes) {
        size_t k = n < bytes - n ? n : bytes - n;
        memcpy(p + n, p, k);
        n += k;
    }
    return VDNN_OK;
}

static void config(const train_env *e, vdnn_policy pol, size_t budget, bool poison, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = e->nc->batch;
    cfg->in_c = e->nc->c;
    cfg->in_h = e->nc->h;
    cfg->in_w = e->nc->w;
    cfg->classes = 10;
    cfg->memory.policy = pol;
    cfg->memory.budget = budget;
    cfg->memory.poison = poison;
    cfg->memory.precision = (vdnn_precision)vt_test_precision();
    cfg->seed = 11;
    cfg->profile = &e->prof;
}

/* Makes the net run its (changed) training plan: room for the storages recompute workspaces added,
 * and a larger arena (parameters carried over) if the plan needs one. */
static void install_train_plan(vdnn_net_t *net)
{
    vdnn_error err;
    const vdnn_plan_t *p = net->plan_train;
    int n_st = p->n_storages > net->plan_eval->n_storages ? p->n_storages : net->plan_eval->n_storages;
    char **ptr = realloc(net->ptr, sizeof *ptr * (size_t)n_st);
    assert_non_null(ptr);
    net->ptr = ptr;
    assert_int_equal(p->n_events + 1, net->n_events);
    assert_true(p->host_bytes <= net->host_bytes);
    size_t need = p->peak_device_bytes > net->plan_eval->peak_device_bytes ? p->peak_device_bytes
                                                                           : net->plan_eval->peak_device_bytes;
    if (need <= net->dev_bytes) return;
    vdnn_checkpoint ck;
    vt_assert_ok(vdnn_net_export(net, &ck, &err), err);
    vdnn_backend_t *be = net->be;
    be->ops->dev_free(be, net->dev);
    net->dev = NULL;
    vt_assert_ok(be->ops->dev_alloc(be, need, &net->dev, &err), err);
    net->dev_bytes = need;
    vdnn_arena_release(&net->arena);
    vdnn_arena_init(&net->arena, net->dev, need);
    vt_assert_ok(vdnn_arena_take(&net->arena, 0, p->persistent_bytes, -1, &err), err);
    if (net->opt.memory.poison) vt_assert_ok(be->ops->poison(be, net->dev, need, &err), err);
    vt_assert_ok(vdnn_net_import(net, &ck, "export", &err), err);
    vdnn_checkpoint_release(&ck);
}

/* Chen's checkpoints every k-th saved map (kept), the rest recomputed; k = 0: every map but the first. */
static void force_recompute(vdnn_net_t *net, int k)
{
    vdnn_error err;
    vdnn_plan_t *p = net->plan_train;
    int n = vdnn_chen_candidates(p);
    vdnn_chen_classes(p, net->g, k > 0 ? k : n + 1, false);
    vt_assert_ok(vdnn_plan_finalize(p, &err), err);
    install_train_plan(net);
}

/* Trains nc->steps steps on consecutive synthetic batches (force_k >= 0: with that forced classification
 * instead of the policy's) and fills the export and the losses. The arena's high-water mark after training
 * must be the planned training peak. */
static void train_run(train_env *e, vdnn_policy pol, size_t budget, bool poison, int force_k, run_result *r)
{
    const net_case *nc = e->nc;
    vdnn_net_options cfg;
    config(e, pol, budget, poison, &cfg);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(e->g, e->be, &cfg, &net, &err), err);
    if (force_k >= 0) force_recompute(net, force_k);
    const vdnn_plan_t *p = net->plan_train;
    assert_true(p->feasible);
    assert_true(p->peak_device_bytes <= budget);
    const size_t img = (size_t)nc->c * nc->h * nc->w;
    for (int s = 0; s < nc->steps; s++) {
        const float *x = e->ds->images + img * (size_t)(s * nc->batch);
        const int32_t *y = e->ds->labels + s * nc->batch;
        vt_assert_ok(vdnn_net_train_step(net, x, y, 0.05f, &r->loss[s], &err), err);
        if (!isfinite(r->loss[s])) fail_msg("%s/%s: step %d loss %g", nc->model, vdnn_policy_name(pol), s, (double)r->loss[s]);
    }
    r->train_peak = p->peak_device_bytes;
    r->eval_peak = net->plan_eval->peak_device_bytes;
    r->n_recompute = count_class(p, VDNN_CLASS_RECOMPUTE);
    r->n_swap = count_class(p, VDNN_CLASS_SWAP);
    r->sim_s = simulated(p, e->g, &e->prof);
    if (net->arena.high_water != r->train_peak)
        fail_msg("%s/%s: arena high-water %zu != planned training peak %zu", nc->model, vdnn_policy_name(pol),
                 net->arena.high_water, r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
}

static void assert_same_export(const net_case *nc, const char *what, const run_result *want, const run_result *got)
{
    char head[96];
    snprintf(head, sizeof head, "%s/%s: against policy none", nc->model, what);
    vt_assert_same_checkpoint(head, &want->ck, &got->ck);
    for (int s = 0; s < nc->steps; s++)
        if (memcmp(&want->loss[s], &got->loss[s], sizeof(float)))
            fail_msg("%s/%s: step %d loss %.9g, none gave %.9g", nc->model, what, s, (double)got->loss[s],
                     (double)want->loss[s]);
}

static void env_open(train_env *e, const net_case *nc)
{
    vdnn_error err;
    memset(e, 0, sizeof *e);
    e->nc = nc;
    e->g = vt_load_zoo(nc->model);
    vt_assert_ok(vdnn_graph_resolve(e->g, (vdnn_shape){nc->batch, nc->c, nc->h, nc->w}, 10, &err), err);
    e->g->dtype = vt_test_precision();
    estimate(e->g, false, &e->prof);
    vdnn_cpu_options co = {.threads = 1}; /* one thread: no OpenMP barriers to wait at on a busy machine */
    vt_assert_ok(vdnn_backend_cpu_create(&co, &e->be, &err), err);
    e->ops = *e->be->ops;
    e->ops.poison = fast_poison;
    e->be->ops = &e->ops;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, nc->c, nc->h, nc->w}, 10, 5, &e->ds, &err),
                 err);
    assert_true(e->ds->count >= nc->batch * nc->steps);
}

static void env_close(train_env *e)
{
    vdnn_profile_release(&e->prof);
    vdnn_dataset_free(e->ds);
    vdnn_backend_destroy(e->be);
    vdnn_graph_free(e->g);
}

/* recompute, dyn, pooch and auto midway between the smallest budget any plan reaches and in-core's
 * need, auto also at that smallest budget (where only swap + recompute mixes fit), all with freed and
 * offloaded memory poisoned: parameters, momentum, BN statistics and losses as in-core, bit for bit,
 * and auto's plan no slower in simulation than the others'. */
static void test_train(void **state)
{
    const net_case *nc = *state;
    double t0 = now();
    train_env e;
    env_open(&e, nc);
    run_result ref, r;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, false, -1, &ref);
    vdnn_op_info *info = query_ops(e.g, e.be);
    size_t mb = min_budget(e.g, info);
    const size_t chen_peak = chen_kept_min_peak(e.g, info);
    free(info);
    assert_true(mb < ref.train_peak);
    size_t mid = mb + (ref.train_peak - mb) / 2;
    if (mid < ref.eval_peak) mid = ref.eval_peak;
    /* The recompute planner recomputes where one of Chen's plans with kept checkpoints fits (VGG-16 and -19 at 32x32:
     * with AVX-512's convolution workspaces, not with AVX2's, whose smallest such peaks are 9-11% above in-core's). */
    int expect_rc = nc->expect_rc;
    if (chen_peak > mid) {
        expect_rc &= ~4;
        if (nc->expect_rc & 4)
            print_message("%s: recompute not expected to recompute: Chen's plans with kept checkpoints need %zu bytes "
                          "at least, above %zu\n", nc->model, chen_peak, mid);
    }
    int recomputing_runs = 0;
    char line[512];
    int len = snprintf(line, sizeof line, "%-10s none %zu, min %zu (%.2f%%), at %zu:", nc->model, ref.train_peak, mb,
                       100.0 * (double)mb / (double)ref.train_peak, mid);
    /* auto at the smallest budget too, except on the deepest nets (the others cover those plans). */
    const int runs = nc->big_h ? N_PLANNERS + 1 : N_PLANNERS;
    double sim[N_PLANNERS];
    for (int k = 0; k < runs; k++) {
        const vdnn_policy pol = k < N_PLANNERS ? planners[k] : VDNN_POLICY_AUTO;
        const size_t budget = k < N_PLANNERS ? mid : (mb > ref.eval_peak ? mb : ref.eval_peak);
        char what[32];
        snprintf(what, sizeof what, "%s%s", vdnn_policy_name(pol), k < N_PLANNERS ? "" : "@min");
        memset(&r, 0, sizeof r);
        train_run(&e, pol, budget, true, -1, &r);
        assert_same_export(nc, what, &ref, &r);
        if (k < N_PLANNERS) sim[k] = r.sim_s;
        const int flag = pol == VDNN_POLICY_POOCH ? 1 : pol == VDNN_POLICY_AUTO ? 2 : pol == VDNN_POLICY_RECOMPUTE ? 4 : 0;
        if ((expect_rc & flag) && k < N_PLANNERS && r.n_recompute == 0)
            fail_msg("%s/%s: the plan at %zu bytes recomputes nothing", nc->model, what, budget);
        recomputing_runs += r.n_recompute > 0;
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %zu (%drc %dsw)", what, r.train_peak, r.n_recompute,
                        r.n_swap);
        vdnn_checkpoint_release(&r.ck);
    }
    /* Where recomputation is expected, some plan trained with it (and gave in-core's bits). */
    if (nc->expect_rc && !recomputing_runs) fail_msg("%s: no planner's plan recomputes at %zu bytes", nc->model, mid);
    /* The plans the nets ran: auto's is the fastest in simulation. */
    for (int k = 0; k < N_PLANNERS - 1; k++)
        if (sim[N_PLANNERS - 1] > sim[k])
            fail_msg("%s: auto's plan takes %.9g s, %s's %.9g s", nc->model, sim[N_PLANNERS - 1], vdnn_policy_name(planners[k]),
                     sim[k]);
    print_message("%s; %.1f s\n", line, now() - t0);
    vdnn_checkpoint_release(&ref.ck);
    env_close(&e);
}

/* Every saved map but every third recomputed, then every map but the first: long chains recomputed
 * recursively, from kept checkpoints, at the first backward step that needs them. */
static void test_forced(void **state)
{
    const net_case *nc = *state;
    train_env e;
    env_open(&e, nc);
    run_result ref, r;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, false, -1, &ref);
    static const int ks[2] = {3, 0};
    for (int i = 0; i < 2; i++) {
        memset(&r, 0, sizeof r);
        train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, ks[i], &r);
        char what[32];
        snprintf(what, sizeof what, "forced k=%d", ks[i]);
        assert_true(r.n_recompute > 0);
        assert_int_equal(r.n_swap, 0);
        assert_same_export(nc, what, &ref, &r);
        print_message("%-10s %s: %d recomputed, peak %zu (none %zu)\n", nc->model, what, r.n_recompute, r.train_peak,
                      ref.train_peak);
        vdnn_checkpoint_release(&r.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    env_close(&e);
}

/* ---- Planning: feasibility, auto against the others, lower bound, time ---- */

static const vdnn_policy all_policies[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL,  VDNN_POLICY_CONV, VDNN_POLICY_RECOMPUTE,
                                           VDNN_POLICY_DYN,  VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
#define N_POLICIES 7

typedef struct budget_result {
    double t[N_POLICIES];       /* simulated seconds, or -1: infeasible */
    double plan_s[N_POLICIES];  /* planning seconds (CPU) */
    double lower;
} budget_result;

/* Plans every policy at one budget and checks the properties every plan must have. */
static void check_budget(const char *what, const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_profile *prof,
                         size_t budget, size_t host_budget, budget_result *out)
{
    double best_other = INFINITY;
    int best_pol = -1;
    for (int k = 0; k < N_POLICIES; k++) {
        const vdnn_policy pol = all_policies[k];
        double t0 = cpu_now();
        vdnn_plan_t *p = plan_at(g, info, pol, budget, host_budget, prof);
        out->plan_s[k] = cpu_now() - t0;
        const bool fits = p->peak_device_bytes <= budget && p->host_bytes <= host_budget;
        if (p->feasible != fits)
            fail_msg("%s/%s: feasible=%d, but peak %zu / budget %zu, host %zu / host budget %zu", what, vdnn_policy_name(pol),
                     p->feasible, p->peak_device_bytes, budget, p->host_bytes, host_budget);
        if (pol == VDNN_POLICY_AUTO) out->lower = vdnn_plan_lower_bound(p, g, prof);
        out->t[k] = p->feasible ? simulated(p, g, prof) : -1;
        if (pol != VDNN_POLICY_AUTO && p->feasible && out->t[k] < best_other) {
            best_other = out->t[k];
            best_pol = k;
        }
        vdnn_plan_free(p);
    }
    const double t_auto = out->t[N_POLICIES - 1];
    if (best_pol >= 0 && t_auto < 0)
        fail_msg("%s: auto finds no plan, %s does (%.6g s)", what, vdnn_policy_name(all_policies[best_pol]), best_other);
    if (best_pol >= 0 && t_auto > best_other)
        fail_msg("%s: auto's plan takes %.9g s, %s's %.9g s", what, t_auto, vdnn_policy_name(all_policies[best_pol]),
                 best_other);
    for (int k = 0; k < N_POLICIES; k++)
        if (out->t[k] >= 0 && out->lower > out->t[k] * (1 + 1e-9)) /* sums in another order */
            fail_msg("%s: lower bound %.9g s above %s's feasible plan (%.9g s)", what, out->lower,
                     vdnn_policy_name(all_policies[k]), out->t[k]);
}

static void print_row(const char *what, const budget_result *r)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%-34s lb %8.3f", what, r->lower * 1e3);
    for (int k = 0; k < N_POLICIES; k++) {
        if (r->t[k] < 0) len += snprintf(line + len, sizeof line - (size_t)len, " %9s", "-");
        else len += snprintf(line + len, sizeof line - (size_t)len, " %9.3f", r->t[k] * 1e3);
    }
    print_message("%s\n", line);
}

/* Which budgets and devices one input is planned at. */
enum { B_MID = 1, B_MIN = 2, B_SHARES = 4, B_HOST = 8 };

/* At one input, on a fast and a slow device: midway between in-core's need and the smallest budget any
 * plan reaches (B_MID), that smallest budget (B_MIN), 90, 70 and 50% of in-core's need (B_SHARES), and
 * midway with a host budget that holds half of what vDNN_all swaps (B_HOST). */
static void plan_budgets(const net_case *nc, vdnn_graph_t *g, vdnn_backend_t *be, int h, int batch, int fast_set,
                         int slow_set, double *max_plan_s)
{
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, nc->c, h, h}, 10, &err), err);
    vdnn_op_info *info = query_ops(g, be);
    vdnn_plan_t *p = plan_at(g, info, VDNN_POLICY_NONE, SIZE_MAX, SIZE_MAX, NULL);
    const size_t none = p->peak_device_bytes;
    vdnn_plan_free(p);
    p = plan_at(g, info, VDNN_POLICY_ALL, SIZE_MAX, SIZE_MAX, NULL);
    const size_t all_host = p->host_bytes;
    vdnn_plan_free(p);
    const size_t mb = min_budget(g, info);
    assert_true(mb <= none);
    for (int slow = 0; slow < 2; slow++) {
        const int set = slow ? slow_set : fast_set;
        size_t budgets[7], host_budgets[7];
        int n = 0;
        if (set & B_MID) budgets[n++] = mb + (none - mb) / 2;
        if (set & B_MIN) budgets[n++] = mb;
        if (set & B_SHARES) {
            budgets[n++] = none / 10 * 9;
            budgets[n++] = none / 10 * 7;
            budgets[n++] = none / 2;
        }
        for (int b = 0; b < n; b++) host_budgets[b] = SIZE_MAX;
        if (set & B_HOST) {
            budgets[n] = mb + (none - mb) / 2;
            host_budgets[n++] = all_host / 2;
        }
        vdnn_profile prof;
        estimate(g, slow, &prof);
        for (int b = 0; b < n; b++) {
            char what[96];
            snprintf(what, sizeof what, "%s %dx%d b%d %s %.1f%%%s", nc->model, h, h, batch, slow ? "slow" : "fast",
                     100.0 * (double)budgets[b] / (double)none, host_budgets[b] != SIZE_MAX ? " host/2" : "");
            budget_result r = {.lower = 0};
            check_budget(what, g, info, &prof, budgets[b], host_budgets[b], &r);
            for (int k = 0; k < N_POLICIES; k++)
                if (r.plan_s[k] > max_plan_s[k]) max_plan_s[k] = r.plan_s[k];
            print_row(what, &r);
        }
        vdnn_profile_release(&prof);
    }
    free(info);
}

static void test_plan(void **state)
{
    const net_case *nc = *state;
    double t0 = now();
    vdnn_graph_t *g = vt_load_zoo(nc->model);
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    double max_plan_s[N_POLICIES] = {0};
    print_message("%-34s %11s %9s %9s %9s %9s %9s %9s %9s (simulated ms)\n", "net input batch device budget", "lower",
                  "none", "all", "conv", "recompute", "dyn", "pooch", "auto");
    /* At the small input the parameters take most of the memory: the budgets that matter lie between
     * the smallest and in-core's need. The midway budget on the fast device is also judged by
     * test_train; the deepest nets (planned for seconds each) are left at that. */
    if (nc->big_h) plan_budgets(nc, g, be, nc->h, nc->batch, B_MID | B_MIN | B_HOST, B_MIN, max_plan_s);
    else plan_budgets(nc, g, be, nc->h, nc->batch, B_MIN, B_MID, max_plan_s);
    if (nc->big_h && !quick())
        plan_budgets(nc, g, be, nc->big_h, nc->big_batch, B_MID | B_MIN | B_SHARES | B_HOST, B_MID | B_SHARES, max_plan_s);
    char line[256];
    int len = 0;
    for (int k = 0; k < N_POLICIES; k++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %.2f", vdnn_policy_name(all_policies[k]), max_plan_s[k]);
    print_message("%-10s longest planning (CPU s):%s; %.1f s\n", nc->model, line, now() - t0);
    /* Each planner within seconds even for the deepest nets (about 10 s is the aim; the bound leaves
     * room for slower machines). */
    for (int k = 0; k < N_POLICIES; k++)
        if (max_plan_s[k] > 30)
            fail_msg("%s/%s: planning took %.1f s", nc->model, vdnn_policy_name(all_policies[k]), max_plan_s[k]);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

int main(void)
{
    const bool fp32 = vt_test_precision() == VDNN_DTYPE_F32;
    enum { N_CASES = sizeof all_cases / sizeof all_cases[0] };
    struct CMUnitTest tests[3 * N_CASES];
    static char names[3 * N_CASES][48];
    int n = 0;
    for (int kind = 0; kind < 3; kind++) {
        for (size_t i = 0; i < N_CASES; i++) {
            bool take = !quick();
            for (size_t k = 0; k < sizeof quick_models / sizeof quick_models[0]; k++)
                take |= !strcmp(all_cases[i].model, quick_models[k]);
            /* Forcing recomputation everywhere would take minutes on the deep nets: the others cover them. */
            if (kind == 1 && (i > 0 && strcmp(all_cases[i].model, "resnet18") && strcmp(all_cases[i].model, "googlenet")))
                take = false;
            /* In 16-bit precisions, the trained cases: the planning-only ones plan the same way at any size. */
            if (kind == 2 && !fp32) take = false;
            if (!take) continue;
            static const char *kinds[3] = {"train", "forced", "plan"};
            snprintf(names[n], sizeof names[n], "%s_%s", kinds[kind], all_cases[i].model);
            void (*fn)(void **) = kind == 0 ? test_train : kind == 1 ? test_forced : test_plan;
            tests[n] = (struct CMUnitTest){names[n], fn, NULL, NULL, (void *)&all_cases[i]};
            n++;
        }
    }
    /* VDNN_TEST_FILTER=plan_* runs a subset (cmocka's glob). */
    if (getenv("VDNN_TEST_FILTER")) cmocka_set_test_filter(getenv("VDNN_TEST_FILTER"));
    return _cmocka_run_group_tests("planners", tests, (size_t)n, NULL, NULL);
}
