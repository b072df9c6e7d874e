/* The sequence references' shared checks (seq_reference.h): one place for the tolerance rule and the training loops. */
#include "seq_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define REF_DIR VDNN_SOURCE_DIR "/tests/reference/"

void vt_seq_ref_load(vt_seq_ref *r, const char *name)
{
    memset(r, 0, sizeof *r);
    char path[512];
    snprintf(path, sizeof path, REF_DIR "%s.bin", name);
    vt_ref_load(path, &r->file);
    r->batch = *(int32_t *)vt_ref_get(&r->file, "meta.batch", VT_REF_I32, 1)->data;
    r->steps = *(int32_t *)vt_ref_get(&r->file, "meta.steps", VT_REF_I32, 1)->data;
    assert_in_range(r->steps, 1, VT_SEQ_MAX_STEPS);
    r->momentum = vdnn_net_options_default().momentum;
    if (vt_ref_find(&r->file, "meta.sgd")) {
        const float *sgd = vt_ref_f32(&r->file, "meta.sgd", 3);
        r->lr = sgd[0];
        r->momentum = sgd[1];
    }
    r->adamw = vt_ref_f32(&r->file, "meta.adamw", 5);
}

void vt_seq_ref_free(vt_seq_ref *r)
{
    vt_ref_free(&r->file);
}

vdnn_graph_t *vt_seq_ref_graph(vt_seq_ref *r, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, REF_DIR "%s.cfg", name);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    vdnn_shape in = g->default_input;
    in.n = r->batch;
    vt_assert_ok(vdnn_graph_resolve(g, in, 0, &err), err);
    r->tokens = vt_ref_f32(&r->file, "data.out", vdnn_shape_count(in));
    r->labels = vt_ref_get(&r->file, "labels", VT_REF_I32, vdnn_graph_label_count(g))->data;
    return g;
}

void vt_seq_check_scaled(vt_seq_ref *r, const char *what, const float *got, const float *want, size_t n, double tol,
                         double scale)
{
    double worst = 0;
    size_t at = 0;
    if (scale <= 0) {
        scale = 1e-6;
        for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    }
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d)) d = INFINITY;
        if (d > worst) worst = d, at = i;
    }
    const bool ok = worst <= tol * scale;
    if (!ok || getenv("VDNN_TEST_VERBOSE"))
        printf("  %s %s%s%-28s %5zu values, scale %.3g, worst error %.3g of scale%s\n", ok ? "  " : "!!",
               r->model ? r->model : "", r->model ? " " : "", what, n, scale, worst / scale, ok ? "" : " (MISMATCH)");
    if (!ok) {
        printf("     first worst [%zu]: got %.9g want %.9g\n", at, (double)got[at], (double)want[at]);
        r->bad++;
    }
}

void vt_seq_check(vt_seq_ref *r, const char *what, const float *got, const float *want, size_t n, double tol)
{
    vt_seq_check_scaled(r, what, got, want, n, tol, 0);
}

vdnn_net_options vt_seq_options(const vt_seq_ref *r, const vdnn_graph_t *g, bool adamw)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = r->batch;
    cfg.in_c = g->input.c;
    cfg.in_h = g->input.h;
    cfg.in_w = g->input.w;
    cfg.classes = g->classes;
    cfg.momentum = r->momentum;
    cfg.weight_decay = 0;
    cfg.memory.poison = true;
    if (adamw) {
        cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
        cfg.beta1 = r->adamw[1];
        cfg.beta2 = r->adamw[2];
        cfg.eps = r->adamw[3];
        cfg.weight_decay = r->adamw[4];
    }
    return cfg;
}

vdnn_net_t *vt_seq_net(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                       bool keep_grads)
{
    const vdnn_net_extras x = {.keep_weight_grads = keep_grads};
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create_ex(g, be, cfg, &x, &net, &err), err);
    /* PyTorch's initial parameters, under vdnn's names (an lstm layer's "<layer>.params.weight", on its first chunk,
     * which the others read). */
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
            vt_assert_ok(vdnn_net_set(net, name, vt_ref_f32(&r->file, name, count[k]), count[k], &err), err);
        }
    }
    return net;
}

void vt_seq_check_params(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, const char *prefix, const char *suffix,
                         double tol, bool keys_bias_noise)
{
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
            float *buf = malloc(counts[k] * sizeof(float));
            assert_non_null(buf);
            vt_assert_ok(vdnn_net_get(net, name, buf, counts[k], &err), err);
            const float *ref_v = vt_ref_f32(&r->file, want, counts[k]);
            if (keys_bias_noise && k == 1 && strstr(ly->name, ".qkv")) {
                const size_t f = counts[k] / 3; /* the queries' and values' thirds */
                vt_seq_check_scaled(r, want, buf, ref_v, f, tol, r->param_scale);
                vt_seq_check_scaled(r, want, buf + 2 * f, ref_v + 2 * f, f, tol, r->param_scale);
            } else {
                vt_seq_check_scaled(r, want, buf, ref_v, counts[k], tol, r->param_scale);
            }
            free(buf);
        }
    }
}

void vt_seq_check_logits(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, const char *what, double tol)
{
    const size_t n = (size_t)r->batch * (size_t)g->input.h * (size_t)g->classes;
    float *logits = malloc(n * sizeof *logits);
    assert_non_null(logits);
    vdnn_error err;
    vt_assert_ok(vdnn_net_forward(net, r->tokens, r->batch, logits, &err), err);
    vt_seq_check(r, what, logits, vt_ref_f32(&r->file, "head.out", n), n, tol);
    free(logits);
}

void vt_seq_train(vt_seq_ref *r, const vdnn_graph_t *g, vdnn_net_t *net, float lr, const char *losses, const char *label,
                  double loss_tol, double grad_tol)
{
    const float *want = vt_ref_f32(&r->file, losses, (size_t)r->steps);
    vdnn_error err;
    for (int t = 0; t < r->steps; t++) {
        float loss = 0;
        vt_assert_ok(vdnn_net_train_step(net, r->tokens, r->labels, lr, &loss, &err), err);
        char what[96];
        snprintf(what, sizeof what, "%s at step %d", label, t);
        vt_seq_check(r, what, &loss, &want[t], 1, loss_tol);
        if (t == 0 && grad_tol > 0) vt_seq_check_params(r, g, net, "", ".grad", grad_tol, false);
    }
}

void vt_seq_assert_good(vt_seq_ref *r)
{
    if (r->bad) fail_msg("%zu tensors differ from PyTorch's", r->bad);
}
