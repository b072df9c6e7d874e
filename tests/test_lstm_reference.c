/* LSTM layers against PyTorch's nn.LSTM (tests/reference/lstm-tiny.bin, written by make_lstm_reference.py): a tiny
 * LSTM language model, one layer with a projection, through the library with each LSTM layer as one node and in
 * chunks of 3 steps (the last of 2): the logits, the step-0 loss and every parameter gradient, three SGD steps'
 * losses and final parameters, and three AdamW steps'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net.h"
#include "exec/net_impl.h"
#include "ref_file.h"
#include "testutil.h"

#define REF_DIR VDNN_SOURCE_DIR "/tests/reference/"
#define MAX_STEPS 8
#define MAX_VALUES 4096

/* PyTorch and OpenBLAS sum in other orders, and the recurrence carries each step's rounding into the next: at most
 * 4.9e-7 of a tensor's scale here (lstm2.params.weight.grad in chunks; 3.9e-7 as one node). The bound is relative to
 * the tensor's largest value, as in test_gpt_reference. */
#define TOL_STEP0 2e-6
#define TOL_FINAL 2e-6
/* AdamW divides by sqrt(v) + eps and so magnifies the rounding of small gradients (as in test_gpt_reference): at
 * most 2.1e-7 of scale here (head.bias). */
#define TOL_ADAMW 1e-5

typedef struct ctx {
    vt_ref_file ref;
    vdnn_backend_t *be;
    int batch, steps;
    float lr, momentum;
    const float *tokens;
    const int32_t *labels;
} ctx;

static size_t bad;

/* |got - want| <= tol * (max |want| + 1e-6) everywhere. */
static void check(const char *model, const char *what, const float *got, const float *want, size_t n, double tol)
{
    double scale = 1e-6, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d)) d = INFINITY;
        if (d > worst) worst = d, at = i;
    }
    const bool ok = worst <= tol * scale;
    if (!ok || getenv("VDNN_TEST_VERBOSE"))
        printf("  %s %s %-28s %5zu values, max |want| %.3g, worst error %.3g of scale%s\n", ok ? "  " : "!!", model,
               what, n, scale, worst / scale, ok ? "" : " (MISMATCH)");
    if (!ok) {
        printf("     first worst [%zu]: got %.9g want %.9g\n", at, (double)got[at], (double)want[at]);
        bad++;
    }
}

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    vt_ref_load(REF_DIR "lstm-tiny.bin", &c->ref);
    c->batch = *(int32_t *)vt_ref_get(&c->ref, "meta.batch", VT_REF_I32, 1)->data;
    c->steps = *(int32_t *)vt_ref_get(&c->ref, "meta.steps", VT_REF_I32, 1)->data;
    assert_in_range(c->steps, 1, MAX_STEPS);
    const float *sgd = vt_ref_f32(&c->ref, "meta.sgd", 3);
    c->lr = sgd[0];
    c->momentum = sgd[1];
    vdnn_cpu_options opt = {.threads = 1};
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&opt, &c->be, &err), err);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    vdnn_backend_destroy(c->be);
    vt_ref_free(&c->ref);
    free(c);
    return 0;
}

static vdnn_graph_t *load(ctx *c, const char *model)
{
    char path[512];
    snprintf(path, sizeof path, REF_DIR "%s.cfg", model);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    vdnn_shape in = g->default_input;
    in.n = c->batch;
    vt_assert_ok(vdnn_graph_resolve(g, in, 0, &err), err);
    c->tokens = vt_ref_f32(&c->ref, "data.out", vdnn_shape_count(in));
    c->labels = vt_ref_get(&c->ref, "labels", VT_REF_I32, vdnn_graph_label_count(g))->data;
    return g;
}

static vdnn_net_t *net_of(ctx *c, const vdnn_graph_t *g, bool adamw)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = c->batch;
    cfg.in_c = g->input.c;
    cfg.in_h = g->input.h;
    cfg.in_w = g->input.w;
    cfg.classes = g->classes;
    cfg.momentum = c->momentum;
    cfg.weight_decay = 0;
    cfg.memory.poison = true;
    if (adamw) {
        const float *hp = vt_ref_f32(&c->ref, "meta.adamw", 5);
        cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
        cfg.beta1 = hp[1];
        cfg.beta2 = hp[2];
        cfg.eps = hp[3];
        cfg.weight_decay = hp[4];
    }
    const vdnn_net_extras x = {.keep_weight_grads = true};
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create_ex(g, c->be, &cfg, &x, &net, &err), err);
    /* PyTorch's initial parameters, under vdnn's names (an lstm layer's "<layer>.params.weight", on its first
     * chunk, which the others read). */
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        const size_t count[2] = {ly->n_weight, ly->n_bias};
        const char *suffix[2] = {"weight", "bias"};
        char pre[96];
        vdnn_layer_param_prefix(g, l, pre, sizeof pre);
        for (int k = 0; k < 2; k++) {
            if (!count[k]) continue;
            char name[160];
            snprintf(name, sizeof name, "%s.%s", pre, suffix[k]);
            vt_assert_ok(vdnn_net_set(net, name, vt_ref_f32(&c->ref, name, count[k]), count[k], &err), err);
        }
    }
    return net;
}

/* Every parameter storage of g against the reference "<prefix><name><suffix>". */
static void check_params(ctx *c, const char *model, const vdnn_graph_t *g, vdnn_net_t *net, const char *prefix,
                         const char *suffix, double tol)
{
    float *buf = malloc(MAX_VALUES * sizeof(float));
    assert_non_null(buf);
    vdnn_error err;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        const size_t counts[2] = {ly->n_weight, ly->n_bias};
        const char *parts[2] = {".weight", ".bias"};
        char pre[96];
        vdnn_layer_param_prefix(g, l, pre, sizeof pre);
        for (int k = 0; k < 2; k++) {
            if (!counts[k]) continue;
            char name[160], want[200];
            snprintf(name, sizeof name, "%s%s%s", pre, parts[k], suffix);
            snprintf(want, sizeof want, "%s%s", prefix, name);
            assert_true(counts[k] <= MAX_VALUES);
            vt_assert_ok(vdnn_net_get(net, name, buf, counts[k], &err), err);
            check(model, want, buf, vt_ref_f32(&c->ref, want, counts[k]), counts[k], tol);
        }
    }
    free(buf);
}

static void sgd_run(ctx *c, const char *model)
{
    vdnn_graph_t *g = load(c, model);
    vdnn_net_t *net = net_of(c, g, false);
    vdnn_error err;
    /* The logits first, in evaluation mode (no state kept for backward). */
    const size_t nl = (size_t)c->batch * (size_t)g->input.h * (size_t)g->classes;
    float *logits = malloc(nl * sizeof *logits);
    assert_non_null(logits);
    vt_assert_ok(vdnn_net_forward(net, c->tokens, c->batch, logits, &err), err);
    check(model, "head.out (logits)", logits, vt_ref_f32(&c->ref, "head.out", nl), nl, TOL_STEP0);
    free(logits);
    const float *losses = vt_ref_f32(&c->ref, "meta.losses", (size_t)c->steps);
    for (int t = 0; t < c->steps; t++) {
        float loss = 0;
        vt_assert_ok(vdnn_net_train_step(net, c->tokens, c->labels, c->lr, &loss, &err), err);
        char what[64];
        snprintf(what, sizeof what, "loss at step %d", t);
        check(model, what, &loss, &losses[t], 1, TOL_STEP0);
        if (t == 0) check_params(c, model, g, net, "", ".grad", TOL_STEP0);
    }
    check_params(c, model, g, net, "final.", "", TOL_FINAL);
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void adamw_run(ctx *c, const char *model)
{
    vdnn_graph_t *g = load(c, model);
    vdnn_net_t *net = net_of(c, g, true);
    vdnn_error err;
    const float lr = vt_ref_f32(&c->ref, "meta.adamw", 5)[0];
    const float *losses = vt_ref_f32(&c->ref, "adamw.losses", (size_t)c->steps);
    for (int t = 0; t < c->steps; t++) {
        float loss = 0;
        vt_assert_ok(vdnn_net_train_step(net, c->tokens, c->labels, lr, &loss, &err), err);
        char what[64];
        snprintf(what, sizeof what, "AdamW loss at step %d", t);
        check(model, what, &loss, &losses[t], 1, TOL_STEP0);
    }
    check_params(c, model, g, net, "adamw.final.", "", TOL_ADAMW);
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void test_sgd_matches_pytorch(void **state)
{
    bad = 0;
    sgd_run(*state, "lstm-tiny");
    sgd_run(*state, "lstm-tiny-chunks");
    if (bad) fail_msg("%zu tensors differ from PyTorch's", bad);
}

static void test_adamw_matches_pytorch(void **state)
{
    bad = 0;
    adamw_run(*state, "lstm-tiny");
    adamw_run(*state, "lstm-tiny-chunks");
    if (bad) fail_msg("%zu tensors differ from PyTorch's", bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_pytorch),
        cmocka_unit_test(test_adamw_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
