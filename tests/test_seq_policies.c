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

#include "exec/net.h"
#include "testutil.h"
#include "train/data.h"

#define BATCH 4
#define SEQ 32
#define STEPS 2

/* A deterministic English-like text: words drawn from a short list, so the file has a byte distribution to learn. */
static const char *const words[] = {"the ", "memory ", "of ", "a ", "network ", "is ", "swapped ", "to ", "host ",
                                    "and ", "back, ", "or ", "recomputed. ", "Attention\n"};

static void env_open(vt_text_env *e)
{
    vt_text_env_open(e, "gpt-mini", BATCH, SEQ, STEPS, words, sizeof words / sizeof words[0], 7, 4000);
}

static bool adamw_on; /* the optimizer of train_run's nets (set by each test before it trains) */
static float clip_on;  /* their clip_grad_norm (0: none) */

static void train_run(const vt_text_env *e, vdnn_policy pol, size_t budget, vt_text_run *r)
{
    memset(r, 0, sizeof *r);
    vdnn_net_options cfg = vt_text_options(e, pol, budget, 3);
    if (adamw_on) {
        cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
        cfg.weight_decay = 0.01f;
    }
    cfg.clip_grad_norm = clip_on;
    cfg.memory.offload_params = budget == 1; /* the caller's way of asking for homed parameters */
    if (budget == 1) cfg.memory.budget = SIZE_MAX;
    vdnn_net_t *net = vt_text_train(e, &cfg, 0.1f, r);
    /* Evaluation runs too (token-wise counts), within the arena. */
    int ok = -1;
    double ls = 0;
    vdnn_error err;
    vt_assert_ok(vdnn_net_eval_batch(net, e->ds->images, e->ds->labels, BATCH, &ok, &ls, &err), err);
    assert_true(ok >= 0 && ok <= BATCH * SEQ);
    assert_true(isfinite(ls) && ls > 0);
    vdnn_net_free(net);
}

/* The least budget, in steps of 1/400 of peak from 90% up, at which pol's plan for train_run's nets fits (peak where
 * none below it does). */
static size_t least_fitting(const vt_text_env *e, vdnn_policy pol, size_t peak)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory = vt_text_options(e, pol, peak, 3).memory;
    rq.memory.poison = false;
    rq.memory.optimizer_moments = adamw_on ? 2 : 1;
    rq.memory.clip_grads = clip_on > 0;
    rq.profile = &e->prof;
    for (int k = 360; k < 400; k++) {
        rq.memory.budget = peak / 400 * (size_t)k;
        vdnn_plan_t *p = NULL;
        vdnn_error err;
        vt_assert_ok(vdnn_plan_build(e->g, e->info, &rq, &p, &err), err);
        const bool fits = p->feasible;
        vdnn_plan_free(p);
        if (fits) return rq.memory.budget;
    }
    return peak;
}

static void test_policies_bitwise(void **state)
{
    (void)state;
    adamw_on = false;
    vt_text_env e;
    env_open(&e);
    vt_text_run ref;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    vt_text_policies_bitwise(&e, "gpt-mini", train_run, &ref);
    vdnn_checkpoint_release(&ref.ck);
    vt_text_env_close(&e);
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
    vt_text_env e;
    env_open(&e);
    vt_text_run ref, r;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    adamw_on = false;
    vt_text_run sgd;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &sgd);
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
        train_run(&e, runs[k].pol, runs[k].budget, &r);
        char head[96];
        snprintf(head, sizeof head, "gpt-mini AdamW/%s: against none", runs[k].what);
        vt_text_assert_same_run(&e, head, &ref, &r);
        print_message("gpt-mini AdamW %-50s peak %zu (none %zu)\n", runs[k].what, r.train_peak, ref.train_peak);
        vdnn_checkpoint_release(&r.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&sgd.ck);
    adamw_on = false;
    vt_text_env_close(&e);
}

/* Gradient clipping by global norm: the norm is summed in layer order from gradients that every plan computes bit for
 * bit alike, so the clipped steps are too; and clipping acts (the parameters differ from unclipped training). */
static void test_clip_policies_bitwise(void **state)
{
    (void)state;
    /* SGD, then AdamW: the clipped updates wait for the norm in update steps, homed parameters fetched for them. */
    for (int opt = 0; opt < 2; opt++) {
    adamw_on = opt == 1;
    vt_text_env e;
    env_open(&e);
    vt_text_run ref, plain, r;
    clip_on = 0;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &plain);
    clip_on = 0.05f; /* far below gpt-mini's first gradients' norm */
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    assert_true(memcmp(&ref.loss[STEPS - 1], &plain.loss[STEPS - 1], sizeof(float)) != 0);
    /* Budget 1: parameters (and moments) homed in host memory (train_run). recompute's and dyn's least is about 89%
     * of none's in fp32 (every gradient live at backward's end), 98-99.5% in bf16 (the fp32 parameters, gradients and
     * moments a larger share): they run at the least budget where both fit; auto at 75% homes the parameters by
     * itself. */
    const size_t lr = least_fitting(&e, VDNN_POLICY_RECOMPUTE, ref.train_peak);
    const size_t ld = least_fitting(&e, VDNN_POLICY_DYN, ref.train_peak);
    const size_t near = lr > ld ? lr : ld;
    assert_true(near < ref.train_peak);
    const struct {
        vdnn_policy pol;
        size_t budget;
    } runs[] = {{VDNN_POLICY_ALL, SIZE_MAX},
                {VDNN_POLICY_RECOMPUTE, near},
                {VDNN_POLICY_DYN, near},
                {VDNN_POLICY_AUTO, (ref.train_peak * 3) / 4},
                {VDNN_POLICY_NONE, 1},
                {VDNN_POLICY_ALL, 1},
                {VDNN_POLICY_RECOMPUTE, 1},
                {VDNN_POLICY_DYN, 1}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        train_run(&e, runs[k].pol, runs[k].budget, &r);
        char head[128];
        snprintf(head, sizeof head, "gpt-mini clipped %s/%s%s at %zu: against none", adamw_on ? "AdamW" : "SGD",
                 vdnn_policy_name(runs[k].pol), runs[k].budget == 1 ? "+offload_params" : "", runs[k].budget);
        vt_text_assert_same_run(&e, head, &ref, &r);
        print_message("gpt-mini clipped %-5s %-9s%-16s peak %zu (none %zu), %d swapped, %d recomputed\n",
                      adamw_on ? "AdamW" : "SGD", vdnn_policy_name(runs[k].pol),
                      runs[k].budget == 1 ? " offload_params" : "", r.train_peak, ref.train_peak, r.n_swap,
                      r.n_recompute);
        vdnn_checkpoint_release(&r.ck);
    }
    clip_on = 0;
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&plain.ck);
    vt_text_env_close(&e);
    }
    adamw_on = false;
}

/* e's model replaced by m (resolved alike), with its profile and op info made anew. */
static void env_use_graph(vt_text_env *e, vdnn_graph_t *m)
{
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(m, e->g->input, e->g->classes, &err), err);
    m->dtype = e->g->dtype;
    vdnn_graph_free(e->g);
    e->g = m;
    vdnn_profile_release(&e->prof);
    vt_assert_ok(vdnn_profile_estimate(e->g, 4e13, 2e12, 16e9, &e->prof, &err), err);
    free(e->info);
    e->info = calloc((size_t)e->g->n_layers, sizeof *e->info);
    assert_non_null(e->info);
    vt_assert_ok(vdnn_plan_query_ops(e->g, e->be, true, e->info, &err), err);
}

/* Attention in head groups (vdnn_model_with_head_groups, --head-groups): each group's probabilities a tensor of their
 * own. The same numbers as the whole attention bit for bit (each group runs its heads' own GEMMs, and the gradient
 * parts it adds elsewhere are exact zeros), and every policy and planner on the grouped graph bit for bit as none
 * on it; a group's probabilities are what the planners swap or recompute. */
static void test_head_groups_bitwise(void **state)
{
    (void)state;
    adamw_on = false;
    clip_on = 0;
    vt_text_env e;
    env_open(&e);
    vt_text_run whole, ref;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &whole);
    vdnn_graph_t *grouped = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_with_head_groups(e.g, 4, &grouped, &err), err);
    env_use_graph(&e, grouped);
    int probs = 0;
    for (int l = 1; l < e.g->n_layers; l++)
        if (e.g->layers[l].kind == VDNN_LAYER_ATTN_PROBS) {
            assert_int_equal(e.g->layers[l].out.c, 1); /* gpt-mini's 4 heads, one a group */
            probs++;
        }
    assert_int_equal(probs, 4 * 4);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    vt_text_assert_same_run(&e, "gpt-mini in 4 head groups against whole attention", &whole, &ref);
    vt_text_policies_bitwise(&e, "gpt-mini (head groups)", train_run, &ref);
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&whole.ck);
    vt_text_env_close(&e);
}

/* Fused attention (vdnn_model_with_fused_attentions, --attention fused or auto): one op a block, no probabilities
 * tensor, for the attentions `which` names (NULL: every one). Its numbers are the materialized attention's up to
 * float sums (the same parameters to start: every other layer keeps its place for seeding), its in-core peak lower,
 * and every policy and planner on the fused graph bit for bit as none on it. */
static void fused_case(const bool *which, int n_fused, const char *model)
{
    adamw_on = false;
    clip_on = 0;
    vt_text_env e;
    env_open(&e);
    vt_text_run whole, ref;
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &whole);
    vdnn_graph_t *fused = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_with_fused_attentions(e.g, which, which ? 4 : 0, &fused, &err), err);
    env_use_graph(&e, fused);
    int attn = 0, probs = 0, mixes = 0;
    for (int l = 1; l < e.g->n_layers; l++) {
        probs += e.g->layers[l].kind == VDNN_LAYER_ATTN_PROBS;
        mixes += e.g->layers[l].kind == VDNN_LAYER_ATTN_MIX;
        attn += e.g->layers[l].kind == VDNN_LAYER_ATTN;
    }
    assert_int_equal(attn, n_fused);
    assert_int_equal(probs, 4 - n_fused);
    assert_int_equal(mixes, 4 - n_fused);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    if (!(ref.train_peak < whole.train_peak))
        fail_msg("%s: in-core peak %zu, materialized %zu", model, ref.train_peak, whole.train_peak);
    assert_int_equal(ref.ck.n_tensors, whole.ck.n_tensors);
    /* The same model to a checkpoint: it resumes either way. */
    assert_true(ref.ck.model_hash == whole.ck.model_hash);
    /* bf16: the materialized probabilities are rounded to bf16 maps, the fused ones stay fp32 in the workspace. */
    const bool half = e.g->dtype == VDNN_DTYPE_BF16;
    const double tol = half ? 2e-3 : 1e-5, ptol = half ? 1e-2 : 1e-5; /* losses; parameters (two steps of lr 0.1) */
    for (int s = 0; s < e.steps; s++)
        if (!(fabs((double)ref.loss[s] - whole.loss[s]) <= tol * fabs((double)whole.loss[s])))
            fail_msg("%s: step %d: fused loss %.9g, materialized %.9g", model, s, ref.loss[s], whole.loss[s]);
    for (int t = 0; t < ref.ck.n_tensors; t++) {
        const vdnn_ckpt_tensor *a = &ref.ck.tensors[t], *b = vdnn_checkpoint_find(&whole.ck, a->name);
        assert_non_null(b);
        assert_int_equal(a->count, b->count);
        double scale = 0, worst = 0;
        for (size_t i = 0; i < a->count; i++) {
            scale = fmax(scale, fabs((double)b->data[i]));
            worst = fmax(worst, fabs((double)a->data[i] - (double)b->data[i]));
        }
        if (!(worst <= ptol * scale + 1e-7))
            fail_msg("%s: %s: fused differs by %g (largest value %g)", model, a->name, worst, scale);
    }
    vt_text_policies_bitwise(&e, model, train_run, &ref);
    /* Head groups have nothing to group in a fused attention, nor does a model without attention fuse. */
    vdnn_graph_t *g2 = NULL;
    if (!which) {
        assert_int_equal(vdnn_model_with_head_groups(e.g, 2, &g2, &err), VDNN_ERR_INVALID_ARG);
        assert_int_equal(vdnn_model_with_fused_attention(e.g, &g2, &err), VDNN_ERR_INVALID_ARG);
        assert_non_null(strstr(err.msg, "no attention"));
    }
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&whole.ck);
    vt_text_env_close(&e);
}

static void test_fused_attention_bitwise(void **state)
{
    (void)state;
    fused_case(NULL, 4, "gpt-mini (fused attention)");
}

/* Some attentions fused and the rest materialized, as --attention auto may choose: the first and the last. */
static void test_some_fused_attention_bitwise(void **state)
{
    (void)state;
    const bool which[4] = {true, false, false, true};
    fused_case(which, 2, "gpt-mini (attentions 0 and 3 fused)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_loader),
        cmocka_unit_test(test_policies_bitwise),
        cmocka_unit_test(test_adamw_policies_bitwise),
        cmocka_unit_test(test_clip_policies_bitwise),
        cmocka_unit_test(test_head_groups_bitwise),
        cmocka_unit_test(test_fused_attention_bitwise),
        cmocka_unit_test(test_some_fused_attention_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
