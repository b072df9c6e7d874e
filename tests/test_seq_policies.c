/* gpt-mini (docs/sequence.md) trained a few steps from a text file under every policy and planner that runs on the
 * CPU, with freed and offloaded memory poisoned: every parameter, momentum and loss bit for bit as under none, and
 * the arena's high-water mark the planned peak. The planners plan midway between the smallest budget any plan
 * reaches and in-core's need, where they have to choose what to swap and what to recompute. Also the text loader's
 * splits and its errors. */
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

#define BATCH 4
#define SEQ 32
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
    char path[256];
} env;

/* A deterministic English-like text: words drawn from a short list, so the file has a byte distribution to learn. */
static void write_text(const char *path, size_t bytes)
{
    static const char *words[] = {"the ", "memory ", "of ", "a ", "network ", "is ", "swapped ", "to ", "host ",
                                  "and ", "back, ", "or ", "recomputed. ", "Attention\n"};
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t s = 7;
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
    snprintf(e->path, sizeof e->path, "/tmp/vdnn_test_seq_%d.txt", (int)getpid());
    write_text(e->path, 4000);
    e->g = vt_load_zoo("gpt-mini");
    vt_assert_ok(vdnn_graph_resolve(e->g, (vdnn_shape){BATCH, 1, SEQ, 1}, 256, &err), err);
    vt_assert_ok(vdnn_profile_estimate(e->g, 4e13, 2e12, 16e9, &e->prof, &err), err);
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &e->be, &err), err);
    char spec[300];
    snprintf(spec, sizeof spec, "text:%s", e->path);
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, SEQ, 1}, 0, 0, &e->ds, &err), err);
    assert_true(e->ds->count >= BATCH * STEPS);
}

static void env_close(env *e)
{
    vdnn_profile_release(&e->prof);
    vdnn_dataset_free(e->ds);
    vdnn_backend_destroy(e->be);
    vdnn_graph_free(e->g);
    remove(e->path);
}

static bool adamw_on; /* the optimizer of train_run's nets (set by each test before it trains) */
static float clip_on;  /* their clip_grad_norm (0: none) */

static vdnn_net_options config(const env *e, vdnn_policy pol, size_t budget, bool poison)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = BATCH;
    cfg.in_c = 1;
    cfg.in_h = SEQ;
    cfg.in_w = 1;
    cfg.classes = 256;
    cfg.memory.policy = pol;
    cfg.memory.budget = budget;
    cfg.memory.poison = poison;
    cfg.seed = 3;
    cfg.profile = &e->prof;
    if (adamw_on) {
        cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
        cfg.weight_decay = 0.01f;
    }
    cfg.clip_grad_norm = clip_on;
    return cfg;
}

static int count_class(const vdnn_plan_t *p, vdnn_tensor_class c)
{
    int n = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) n += p->st[i].cls == c;
    return n;
}

static void train_run(const env *e, vdnn_policy pol, size_t budget, bool poison, run_result *r)
{
    vdnn_net_options cfg = config(e, pol, budget, poison);
    cfg.memory.offload_params = budget == 1; /* the caller's way of asking for homed parameters */
    if (budget == 1) cfg.memory.budget = SIZE_MAX;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(e->g, e->be, &cfg, &net, &err), err);
    const vdnn_plan_t *p = net->plan_train;
    assert_true(p->feasible);
    for (int s = 0; s < STEPS; s++) {
        const float *x = e->ds->images + (size_t)s * BATCH * SEQ;
        const int32_t *y = e->ds->labels + (size_t)s * BATCH * SEQ;
        vt_assert_ok(vdnn_net_train_step(net, x, y, 0.1f, &r->loss[s], &err), err);
        if (!isfinite(r->loss[s]))
            fail_msg("gpt-mini/%s: step %d loss %g", vdnn_policy_name(pol), s, (double)r->loss[s]);
    }
    r->train_peak = p->peak_device_bytes;
    r->n_swap = count_class(p, VDNN_CLASS_SWAP);
    r->n_recompute = count_class(p, VDNN_CLASS_RECOMPUTE);
    if (net->arena.high_water != r->train_peak)
        fail_msg("gpt-mini/%s: arena high-water %zu != planned training peak %zu", vdnn_policy_name(pol),
                 net->arena.high_water, r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    /* Evaluation runs too (token-wise counts), within the arena. */
    int ok = -1;
    double ls = 0;
    vt_assert_ok(vdnn_net_eval_batch(net, e->ds->images, e->ds->labels, BATCH, &ok, &ls, &err), err);
    assert_true(ok >= 0 && ok <= BATCH * SEQ);
    assert_true(isfinite(ls) && ls > 0);
    vdnn_net_free(net);
}

static size_t min_budget(const env *e, const vdnn_op_info *info)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.profile = &e->prof;
    size_t mb = 0;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_min_budget(e->g, info, &rq, &mb, &err), err);
    return mb;
}

static void test_policies_bitwise(void **state)
{
    (void)state;
    adamw_on = false;
    env e;
    env_open(&e);
    vdnn_error err;

    run_result ref;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, &ref);
    vdnn_op_info *info = calloc((size_t)e.g->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(e.g, e.be, true, info, &err), err);
    const size_t least = min_budget(&e, info);
    free(info);
    assert_true(least < ref.train_peak);

    const vdnn_policy pols[] = {VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_RECOMPUTE, VDNN_POLICY_DYN,
                                VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        const bool planner = pols[k] != VDNN_POLICY_ALL && pols[k] != VDNN_POLICY_CONV;
        /* Midway for the planners (where a planner finds nothing there, three quarters of the way, else the peak). */
        const size_t budgets[3] = {(least + ref.train_peak) / 2, (least + 3 * ref.train_peak) / 4, ref.train_peak};
        size_t budget = SIZE_MAX;
        for (int b = 0; planner && b < 3; b++) {
            vdnn_plan_request rq = vdnn_plan_request_default();
            rq.memory.policy = pols[k];
            rq.memory.budget = budgets[b];
            rq.profile = &e.prof;
            vdnn_op_info *qi = calloc((size_t)e.g->n_layers, sizeof *qi);
            assert_non_null(qi);
            vt_assert_ok(vdnn_plan_query_ops(e.g, e.be, true, qi, &err), err);
            vdnn_plan_t *p = NULL;
            vt_assert_ok(vdnn_plan_build(e.g, qi, &rq, &p, &err), err);
            const bool fits = p->feasible;
            vdnn_plan_free(p);
            free(qi);
            budget = budgets[b];
            if (fits) break;
        }
        run_result r;
        memset(&r, 0, sizeof r);
        train_run(&e, pols[k], budget, true, &r);
        char head[96];
        snprintf(head, sizeof head, "gpt-mini/%s: against policy none", vdnn_policy_name(pols[k]));
        vt_assert_same_checkpoint(head, &ref.ck, &r.ck);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&ref.loss[s], &r.loss[s], sizeof(float)))
                fail_msg("%s: step %d loss %.9g, none gave %.9g", head, s, (double)r.loss[s], (double)ref.loss[s]);
        print_message("gpt-mini b%d t%d %-9s budget %zu: peak %zu (none %zu, %.0f%%), %d swapped, %d recomputed\n",
                      BATCH, SEQ, vdnn_policy_name(pols[k]), planner ? budget : 0, r.train_peak, ref.train_peak,
                      100.0 * (double)r.train_peak / (double)ref.train_peak, r.n_swap, r.n_recompute);
        if (pols[k] != VDNN_POLICY_CONV && r.train_peak >= ref.train_peak)
            fail_msg("gpt-mini/%s: peak %zu is not below none's %zu", vdnn_policy_name(pols[k]), r.train_peak,
                     ref.train_peak);
        vdnn_checkpoint_release(&r.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    env_close(&e);
}

/* The text loader: sequences with next-byte targets, a held-out last tenth, and clear errors. */
static void test_text_loader(void **state)
{
    (void)state;
    char path[256], spec[300];
    snprintf(path, sizeof path, "/tmp/vdnn_test_text_%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 1000; i++) fputc('a' + i % 26, f);
    fclose(f);
    snprintf(spec, sizeof spec, "text:%s", path);
    vdnn_dataset_t *tr = NULL, *te = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, 8, 1}, 0, 0, &tr, &err), err);
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, (vdnn_shape){0, 1, 8, 1}, 0, 0, &te, &err), err);
    /* 900 training bytes: (900 - 1) / 8 = 112 sequences; 100 held out: 12. */
    assert_int_equal(tr->count, 112);
    assert_int_equal(te->count, 12);
    assert_int_equal(tr->labels_per, 8);
    assert_int_equal(tr->classes, 256);
    for (int i = 0; i < 8 * 112; i++) {
        assert_true(tr->images[i] == (float)('a' + i % 26));
        assert_int_equal(tr->labels[i], 'a' + (i + 1) % 26);
    }
    assert_true(te->images[0] == (float)('a' + 900 % 26));
    vdnn_dataset_free(tr);
    vdnn_dataset_free(te);
    /* Too short for one sequence in the held-out tenth at 64 tokens (needs 650 bytes). */
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, 128, 1}, 0, 0, &tr, &err), err,
                    VDNN_ERR_FORMAT, "too short for one sequence of 128 tokens");
    f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, 8, 1}, 0, 0, &tr, &err), err,
                    VDNN_ERR_FORMAT, "the file is empty");
    remove(path);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, (vdnn_shape){0, 1, 8, 1}, 0, 0, &tr, &err), err,
                    VDNN_ERR_IO, "cannot open it");
    vt_assert_error(vdnn_dataset_open("text:", VDNN_SPLIT_TEST, (vdnn_shape){0, 1, 8, 1}, 0, 0, &tr, &err), err,
                    VDNN_ERR_INVALID_ARG, "no file given");
    /* A directory of its own (what /tmp holds depends on the machine): no text file in it. */
    char dir[64] = "/tmp/vdnn_test_textdir_XXXXXX", dspec[80];
    assert_non_null(mkdtemp(dir));
    snprintf(dspec, sizeof dspec, "text:%s", dir);
    vt_assert_error(vdnn_dataset_open(dspec, VDNN_SPLIT_TEST, (vdnn_shape){0, 1, 8, 1}, 0, 0, &tr, &err), err,
                    VDNN_ERR_FORMAT, "holds no text file");
    rmdir(dir);
}

/* AdamW's two moments are optimizer state like momentum: counted by the plan, swapped with the policies' maps
 * untouched, homed in host memory with the parameters (offload_params), and every bit as under none. */
static void test_adamw_policies_bitwise(void **state)
{
    (void)state;
    adamw_on = true;
    env e;
    env_open(&e);
    run_result ref, r;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, &ref);
    adamw_on = false;
    run_result sgd;
    memset(&sgd, 0, sizeof sgd);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, &sgd);
    /* Two moments a parameter instead of one: the parameters' bytes more. */
    assert_true(ref.train_peak - sgd.train_peak == 867328 * sizeof(float));
    adamw_on = true;
    const struct {
        vdnn_policy pol;
        size_t budget; /* 1: offload_params */
        const char *what;
    } runs[] = {{VDNN_POLICY_ALL, SIZE_MAX, "all"}, {VDNN_POLICY_AUTO, (ref.train_peak * 3) / 4, "auto at 75%"},
                {VDNN_POLICY_NONE, 1, "none, parameters and moments homed in host memory"}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        memset(&r, 0, sizeof r);
        train_run(&e, runs[k].pol, runs[k].budget, true, &r);
        char head[96];
        snprintf(head, sizeof head, "gpt-mini AdamW/%s: against none", runs[k].what);
        vt_assert_same_checkpoint(head, &ref.ck, &r.ck);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&ref.loss[s], &r.loss[s], sizeof(float)))
                fail_msg("%s: step %d loss %.9g, none gave %.9g", head, s, (double)r.loss[s], (double)ref.loss[s]);
        print_message("gpt-mini AdamW %-50s peak %zu (none %zu)\n", runs[k].what, r.train_peak, ref.train_peak);
        vdnn_checkpoint_release(&r.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&sgd.ck);
    adamw_on = false;
    env_close(&e);
}

/* Gradient clipping by global norm: the norm is summed in layer order from gradients that every plan computes bit for
 * bit alike, so the clipped steps are too; and clipping acts (the parameters differ from unclipped training). */
static void test_clip_policies_bitwise(void **state)
{
    (void)state;
    /* SGD, then AdamW: the clipped updates wait for the norm in update steps, homed parameters fetched for them. */
    for (int opt = 0; opt < 2; opt++) {
    adamw_on = opt == 1;
    env e;
    env_open(&e);
    run_result ref, plain, r;
    memset(&plain, 0, sizeof plain);
    clip_on = 0;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, &plain);
    clip_on = 0.05f; /* far below gpt-mini's first gradients' norm */
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, true, &ref);
    assert_true(memcmp(&ref.loss[STEPS - 1], &plain.loss[STEPS - 1], sizeof(float)) != 0);
    /* Budget 1: parameters (and moments) homed in host memory (train_run). recompute's least is about 89% of
     * none's (and dyn's, every gradient live at backward's end); auto at 75% homes the parameters by itself. */
    const struct {
        vdnn_policy pol;
        size_t budget;
    } runs[] = {{VDNN_POLICY_ALL, SIZE_MAX},
                {VDNN_POLICY_RECOMPUTE, (ref.train_peak * 19) / 20},
                {VDNN_POLICY_DYN, (ref.train_peak * 19) / 20},
                {VDNN_POLICY_AUTO, (ref.train_peak * 3) / 4},
                {VDNN_POLICY_NONE, 1},
                {VDNN_POLICY_ALL, 1},
                {VDNN_POLICY_RECOMPUTE, 1},
                {VDNN_POLICY_DYN, 1}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        memset(&r, 0, sizeof r);
        train_run(&e, runs[k].pol, runs[k].budget, true, &r);
        char head[128];
        snprintf(head, sizeof head, "gpt-mini clipped %s/%s%s at %zu: against none", adamw_on ? "AdamW" : "SGD",
                 vdnn_policy_name(runs[k].pol), runs[k].budget == 1 ? "+offload_params" : "", runs[k].budget);
        vt_assert_same_checkpoint(head, &ref.ck, &r.ck);
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&ref.loss[s], &r.loss[s], sizeof(float)))
                fail_msg("%s: step %d loss %.9g, none gave %.9g", head, s, (double)r.loss[s], (double)ref.loss[s]);
        print_message("gpt-mini clipped %-5s %-9s%-16s peak %zu (none %zu), %d swapped, %d recomputed\n",
                      adamw_on ? "AdamW" : "SGD", vdnn_policy_name(runs[k].pol),
                      runs[k].budget == 1 ? " offload_params" : "", r.train_peak, ref.train_peak, r.n_swap,
                      r.n_recompute);
        vdnn_checkpoint_release(&r.ck);
    }
    clip_on = 0;
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&plain.ck);
    env_close(&e);
    }
    adamw_on = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_loader),
        cmocka_unit_test(test_policies_bitwise),
        cmocka_unit_test(test_adamw_policies_bitwise),
        cmocka_unit_test(test_clip_policies_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
