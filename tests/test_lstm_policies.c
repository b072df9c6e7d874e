/* lstm-lm (docs/sequence.md, "LSTM") trained a few steps from a text file under every policy and planner that runs
 * on the CPU, with freed and offloaded memory poisoned: every parameter, momentum and loss bit for bit as under none,
 * and the arena's high-water mark the planned peak. The planners plan midway between the smallest budget any plan
 * reaches and in-core's need, where they choose which chunks' state to keep, swap or recompute. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/net_impl.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "testutil.h"
#include "train/data.h"
#include "train/net_checkpoint.h"

#define BATCH 32
#define SEQ 128 /* lstm-lm's file length: its four chunks of 32 steps */
#define STEPS 2

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[STEPS];
    size_t train_peak;
    int n_swap, n_recompute;
} run_result;

typedef struct env {
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    vdnn_dataset_t *ds;
    vdnn_profile prof;
    vdnn_op_info *info;
    char path[256];
} env;

/* Text with a byte distribution to learn: words drawn from a short list. */
static void write_text(const char *path, size_t bytes)
{
    static const char *words[] = {"the ", "cell ", "state ", "of ", "a ", "chunk ", "is ", "swapped ", "to ",
                                  "host ", "or ", "recomputed. ", "Recurrence\n"};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t s = 11;
    for (size_t n = 0; n < bytes;) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(s >> 33) % (sizeof words / sizeof words[0])];
        n += fwrite(w, 1, strlen(w), f);
    }
    fclose(f);
}

static void env_open(env *e)
{
    vdnn_error err;
    memset(e, 0, sizeof *e);
    snprintf(e->path, sizeof e->path, "/tmp/vdnn_test_lstm_%d.txt", (int)getpid());
    write_text(e->path, 60000);
    e->g = vt_load_zoo("lstm-lm");
    vt_assert_ok(vdnn_graph_resolve(e->g, (vdnn_shape){BATCH, 1, SEQ, 1}, 256, &err), err);
    vt_assert_ok(vdnn_profile_estimate(e->g, 4e13, 2e12, 16e9, &e->prof, &err), err);
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &e->be, &err), err);
    char spec[300];
    snprintf(spec, sizeof spec, "text:%s", e->path);
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, SEQ, 1}, 0, 0, &e->ds, &err), err);
    assert_true(e->ds->count >= BATCH * STEPS);
    e->info = calloc((size_t)e->g->n_layers, sizeof *e->info);
    assert_non_null(e->info);
    vt_assert_ok(vdnn_plan_query_ops(e->g, e->be, true, e->info, &err), err);
}

static void env_close(env *e)
{
    free(e->info);
    vdnn_profile_release(&e->prof);
    vdnn_dataset_free(e->ds);
    vdnn_backend_destroy(e->be);
    vdnn_graph_free(e->g);
    remove(e->path);
}

static int count_class(const vdnn_plan_t *p, vdnn_tensor_class c)
{
    int n = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) n += p->st[i].cls == c;
    return n;
}

static void train_run(const env *e, vdnn_policy pol, size_t budget, run_result *r)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = BATCH;
    cfg.in_c = 1;
    cfg.in_h = SEQ;
    cfg.in_w = 1;
    cfg.classes = 256;
    cfg.memory.policy = pol;
    cfg.memory.budget = budget;
    cfg.memory.poison = true;
    cfg.seed = 5;
    cfg.profile = &e->prof;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(e->g, e->be, &cfg, &net, &err), err);
    const vdnn_plan_t *p = net->plan_train;
    assert_true(p->feasible);
    for (int s = 0; s < STEPS; s++) {
        const float *x = e->ds->images + (size_t)s * BATCH * SEQ;
        const int32_t *y = e->ds->labels + (size_t)s * BATCH * SEQ;
        vt_assert_ok(vdnn_net_train_step(net, x, y, 0.5f, &r->loss[s], &err), err);
        if (!isfinite(r->loss[s]))
            fail_msg("lstm-lm/%s: step %d loss %g", vdnn_policy_name(pol), s, (double)r->loss[s]);
    }
    r->train_peak = p->peak_device_bytes;
    r->n_swap = count_class(p, VDNN_CLASS_SWAP);
    r->n_recompute = count_class(p, VDNN_CLASS_RECOMPUTE);
    if (net->arena.high_water != r->train_peak)
        fail_msg("lstm-lm/%s: arena high-water %zu != planned training peak %zu", vdnn_policy_name(pol),
                 net->arena.high_water, r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
}

/* The first of (midway, three quarters, in-core) between the smallest budget and in-core where pol finds a plan. */
static size_t planner_budget(const env *e, vdnn_policy pol, size_t least, size_t peak)
{
    const size_t budgets[3] = {(least + peak) / 2, (least + 3 * peak) / 4, peak};
    vdnn_error err;
    for (int b = 0; b < 3; b++) {
        vdnn_plan_request rq = vdnn_plan_request_default();
        rq.memory.policy = pol;
        rq.memory.budget = budgets[b];
        rq.profile = &e->prof;
        vdnn_plan_t *p = NULL;
        vt_assert_ok(vdnn_plan_build(e->g, e->info, &rq, &p, &err), err);
        const bool fits = p->feasible;
        vdnn_plan_free(p);
        if (fits) return budgets[b];
    }
    return peak;
}

static void test_lstm_policies_bitwise(void **state)
{
    (void)state;
    env e;
    env_open(&e);
    vdnn_error err;
    run_result ref;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    /* The loss starts near ln 256 (uniform bytes) and a step lowers it. */
    assert_true(ref.loss[0] > 5.0f && ref.loss[0] < 6.0f && ref.loss[1] < ref.loss[0]);
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.profile = &e.prof;
    size_t least = 0;
    vt_assert_ok(vdnn_plan_min_budget(e.g, e.info, &rq, &least, &err), err);
    assert_true(least < ref.train_peak);
    const vdnn_policy pols[] = {VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_RECOMPUTE, VDNN_POLICY_DYN,
                                VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        const bool planner = pols[k] != VDNN_POLICY_ALL && pols[k] != VDNN_POLICY_CONV;
        const size_t budget = planner ? planner_budget(&e, pols[k], least, ref.train_peak) : SIZE_MAX;
        run_result r;
        memset(&r, 0, sizeof r);
        train_run(&e, pols[k], budget, &r);
        char head[96];
        snprintf(head, sizeof head, "lstm-lm/%s: against policy none", vdnn_policy_name(pols[k]));
        vt_assert_same_checkpoint(head, &ref.ck, &r.ck);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&ref.loss[s], &r.loss[s], sizeof(float)))
                fail_msg("%s: step %d loss %.9g, none gave %.9g", head, s, (double)r.loss[s], (double)ref.loss[s]);
        print_message("lstm-lm b%d t%d %-9s budget %zu: peak %zu (none %zu, %.0f%%), %d swapped, %d recomputed\n",
                      BATCH, SEQ, vdnn_policy_name(pols[k]), planner ? budget : 0, r.train_peak, ref.train_peak,
                      100.0 * (double)r.train_peak / (double)ref.train_peak, r.n_swap, r.n_recompute);
        /* conv swaps convolution inputs only: an LSTM has none. */
        if (pols[k] != VDNN_POLICY_CONV && r.train_peak >= ref.train_peak)
            fail_msg("lstm-lm/%s: peak %zu is not below none's %zu", vdnn_policy_name(pols[k]), r.train_peak,
                     ref.train_peak);
        vdnn_checkpoint_release(&r.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_policies_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
