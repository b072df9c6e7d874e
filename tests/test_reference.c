/* The CPU runtime against PyTorch (tests/reference/allops.bin, see its README.md): every op's output and
 * gradients from the reference inputs (each op run as the op harness runs it, op_exec.c), one training step,
 * the remaining SGD steps, and the offloading policies, which must reproduce policy none bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"
#include "op_exec.h"
#include "ref_file.h"
#include "testutil.h"

#define REF_DIR VDNN_SOURCE_DIR "/tests/reference/"
#define MAX_SNAPS 64
#define MAX_STEPS 8

/* ---- the reference file ---- */

/* A layer's reference array by suffix: "<layer><suffix>". */
static float *ref_layer(vt_ref_file *rf, const char *layer, const char *suffix, size_t count)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s", layer, suffix);
    return vt_ref_f32(rf, name, count);
}

/* BN statistics as the runtime stores them: running mean then running variance. */
static void ref_stats(vt_ref_file *rf, const char *prefix, const char *layer, size_t count, float *out)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s.running_mean", prefix, layer);
    memcpy(out, vt_ref_f32(rf, name, count / 2), count / 2 * sizeof *out);
    snprintf(name, sizeof name, "%s%s.running_var", prefix, layer);
    memcpy(out + count / 2, vt_ref_f32(rf, name, count / 2), count / 2 * sizeof *out);
}

/* ---- comparison ---- */

typedef struct tol {
    double atol, rtol;
} tol;

/* PyTorch and oneDNN sum in different orders, which leaves differences of a few float ulps (up to
 * 1.2e-6 at step 0, 2.4e-7 after three steps on this machine). The bounds are 5 and 20 times tighter
 * than README.md suggests: its looser ones would miss e.g. a biased variance in the BN running-variance
 * update (off by 9e-5 after one step, 2.2e-4 after three). */
static const tol TOL_STEP0 = {2e-6, 2e-5};
static const tol TOL_FINAL = {5e-6, 5e-5};

typedef struct checker {
    bool verbose;
    size_t bad;                 /* tensors with an element outside the tolerance */
    const char *group;
    double group_abs, group_rel, group_used;
} checker;

static void group_begin(checker *c, const char *name)
{
    c->group = name;
    c->group_abs = c->group_rel = c->group_used = 0;
    if (c->verbose) printf("[%s]\n", name);
}

static void group_end(checker *c)
{
    if (c->verbose)
        printf("[%s] max abs %.3g, max rel %.3g, %.0f%% of tolerance\n", c->group, c->group_abs, c->group_rel,
               100 * c->group_used);
}

/* |got - want| <= atol + rtol*|want| everywhere; rel is reported against max(|want|, 1e-3). */
static void check(checker *c, const char *what, const float *got, const float *want, size_t n, tol t)
{
    double max_abs = 0, max_rel = 0, used = 0;
    size_t n_bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double w = fabs((double)want[i]);
        bool ok = d <= t.atol + t.rtol * w; /* false for NaN */
        if (d / (t.atol + t.rtol * w) > used) used = d / (t.atol + t.rtol * w);
        if (!ok && n_bad++ == 0) first = i;
        if (isnan(d)) d = INFINITY;
        if (d > max_abs) max_abs = d;
        if (d / (w > 1e-3 ? w : 1e-3) > max_rel) max_rel = d / (w > 1e-3 ? w : 1e-3);
    }
    if (max_abs > c->group_abs) c->group_abs = max_abs;
    if (max_rel > c->group_rel) c->group_rel = max_rel;
    if (used > c->group_used) c->group_used = used;
    if (c->verbose)
        printf("  %-30s %5zu values  max abs %.3g  max rel %.3g  (%.0f%% of tolerance)\n", what, n, max_abs, max_rel,
               100 * used);
    if (n_bad) {
        c->bad++;
        if (c->verbose)
            printf("  MISMATCH %s: %zu of %zu values outside %g + %g*|want|; first [%zu] got %.9g want %.9g\n", what,
                   n_bad, n, t.atol, t.rtol, first, (double)got[first], (double)want[first]);
    }
}

/* ---- shared state ---- */

typedef struct ctx {
    vt_ref_file ref;
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    int batch, steps, classes;
    vdnn_shape input;
    float lr, momentum, wd;
    const float *images;
    const int32_t *labels;
    bool fused; /* parameters updated inside each layer's backward (the default); gradients not readable */
} ctx;

/* The reference draws step t's dropout mask from seed 1000 + t. */
static uint64_t ref_dropout_seed(uint64_t run_seed, int64_t step, int layer)
{
    (void)run_seed;
    (void)layer;
    return 1000 + (uint64_t)step;
}

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    vt_ref_load(REF_DIR "allops.bin", &c->ref);
    c->batch = *(int32_t *)vt_ref_get(&c->ref, "meta.batch", VT_REF_I32, 1)->data;
    c->steps = *(int32_t *)vt_ref_get(&c->ref, "meta.steps", VT_REF_I32, 1)->data;
    assert_in_range(c->steps, 1, MAX_STEPS);
    const float *sgd = vt_ref_f32(&c->ref, "meta.sgd", 3);
    c->lr = sgd[0];
    c->momentum = sgd[1];
    c->wd = sgd[2];
    const uint64_t *seeds = vt_ref_get(&c->ref, "meta.dropout_seed", VT_REF_U64, (size_t)c->steps)->data;
    for (int t = 0; t < c->steps; t++) assert_int_equal(seeds[t], ref_dropout_seed(0, t, 0));
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(REF_DIR "allops.cfg", &c->g, &err), err);
    c->input = c->g->default_input;
    c->input.n = c->batch;
    c->classes = c->g->default_classes;
    assert_int_equal(c->input.c, 3);
    assert_int_equal(c->classes, 5);
    vt_assert_ok(vdnn_graph_resolve(c->g, c->input, c->classes, &err), err);
    c->images = vt_ref_f32(&c->ref, "data.out", vdnn_shape_count(c->input));
    c->labels = vt_ref_get(&c->ref, "labels", VT_REF_I32, (size_t)c->batch)->data;
    vdnn_cpu_options opt = {0};
    vt_assert_ok(vdnn_backend_cpu_create(&opt, &c->be, &err), err);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    vdnn_backend_destroy(c->be);
    vdnn_graph_free(c->g);
    vt_ref_free(&c->ref);
    free(c);
    return 0;
}

/* ---- every op on its own, fed the reference inputs ---- */

static void copy_ref(float *dst, vt_ref_file *rf, const char *layer, const char *suffix, size_t count)
{
    if (count) memcpy(dst, ref_layer(rf, layer, suffix, count), count * sizeof *dst);
}

/* Runs forward and backward of layer l alone on the reference input and output gradient; compares
 * its output, BN statistics, loss and parameter gradients, and adds its input gradients to dsum. */
static void check_one_op(ctx *c, checker *ck, int l, float **dsum)
{
    const vdnn_graph_t *g = c->g;
    const vdnn_layer *ly = &g->layers[l];
    vdnn_op_desc d;
    vdnn_op_desc_from_layer(g, l, true, &d);
    vt_op_data in;
    vt_op_data_alloc(&in, ly->name, &d);
    for (int i = 0; i < ly->n_inputs; i++) {
        const vdnn_layer *src = &g->layers[ly->inputs[i]];
        copy_ref(in.x[i], &c->ref, src->name, ".out", in.nx[i]);
    }
    copy_ref(in.w, &c->ref, ly->name, ".weight", in.nw);
    copy_ref(in.b, &c->ref, ly->name, ".bias", in.nb);
    if (in.nstats) ref_stats(&c->ref, "", ly->name, in.nstats, in.stats);
    /* The loss layer starts backward from the labels, every other from the reference dy. */
    if (in.labels) memcpy(in.labels, c->labels, (size_t)c->batch * sizeof *in.labels);
    else copy_ref(in.dy, &c->ref, ly->name, ".out.grad", in.ny);
    in.seed = ref_dropout_seed(0, 0, l);
    vt_op_result r;
    const vt_call call = {.update_stats = true, .backward = true};
    vt_op_run(c->be, &in, &call, &r);

    char what[128];
    snprintf(what, sizeof what, "%s.out", ly->name);
    check(ck, what, r.y, ref_layer(&c->ref, ly->name, ".out", in.ny), in.ny, TOL_STEP0);
    if (ly->kind == VDNN_LAYER_BATCHNORM) {
        const size_t C = (size_t)ly->out.c;
        float after[64];
        assert_true(r.info.aux_bytes == 2 * C * sizeof(float) && 2 * C <= 64);
        snprintf(what, sizeof what, "%s aux (batch mean)", ly->name);
        check(ck, what, r.aux, ref_layer(&c->ref, ly->name, ".batch_mean", C), C, TOL_STEP0);
        snprintf(what, sizeof what, "%s aux (batch var)", ly->name);
        check(ck, what, r.aux + C, ref_layer(&c->ref, ly->name, ".batch_var", C), C, TOL_STEP0);
        ref_stats(&c->ref, "step0.", ly->name, 2 * C, after);
        snprintf(what, sizeof what, "%s.stats after forward", ly->name);
        check(ck, what, r.stats, after, 2 * C, TOL_STEP0);
    }
    if (in.labels) check(ck, "loss", &r.loss, vt_ref_f32(&c->ref, "loss.value", 1), 1, TOL_STEP0);
    for (int i = 0; i < ly->n_inputs; i++)
        for (size_t k = 0; k < in.nx[i]; k++) dsum[ly->inputs[i]][k] += r.dx[i][k];
    if (in.nw) {
        snprintf(what, sizeof what, "%s.weight.grad", ly->name);
        check(ck, what, r.dw, ref_layer(&c->ref, ly->name, ".weight.grad", in.nw), in.nw, TOL_STEP0);
    }
    if (in.nb) {
        snprintf(what, sizeof what, "%s.bias.grad", ly->name);
        check(ck, what, r.db, ref_layer(&c->ref, ly->name, ".bias.grad", in.nb), in.nb, TOL_STEP0);
    }
    vt_op_result_free(&r);
    vt_op_data_free(&in);
}

/* Returns the number of tensors out of tolerance. */
static size_t check_ops(ctx *c, bool verbose)
{
    checker ck = {.verbose = verbose};
    const vdnn_graph_t *g = c->g;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(c->g, c->input, c->classes, &err), err);
    float **dsum = calloc((size_t)g->n_layers, sizeof *dsum);
    assert_non_null(dsum);
    for (int l = 0; l < g->n_layers; l++) {
        dsum[l] = calloc(vdnn_shape_count(g->layers[l].out), sizeof(float));
        assert_non_null(dsum[l]);
    }
    group_begin(&ck, "ops alone, step 0: outputs, BN statistics, loss, parameter gradients");
    for (int l = 1; l < g->n_layers; l++) check_one_op(c, &ck, l, dsum);
    group_end(&ck);
    /* Every layer but the loss: the sum over its consumers of the input gradients they returned. */
    group_begin(&ck, "ops alone, step 0: gradients of layer outputs");
    for (int l = 0; l < g->n_layers - 1; l++) {
        const vdnn_layer *ly = &g->layers[l];
        char what[128];
        snprintf(what, sizeof what, "%s.out.grad", ly->name);
        size_t n = vdnn_shape_count(ly->out);
        check(&ck, what, dsum[l], ref_layer(&c->ref, ly->name, ".out.grad", n), n, TOL_STEP0);
    }
    group_end(&ck);
    for (int l = 0; l < g->n_layers; l++) free(dsum[l]);
    free(dsum);
    return ck.bad;
}

/* ---- the net trained through the public API ---- */

typedef struct snap {
    char name[112];
    size_t n;
    float *v;
} snap;

typedef struct run_result {
    float loss[MAX_STEPS];
    int n;
    snap s[MAX_SNAPS];
} run_result;

static void snap_take(vdnn_net_t *net, run_result *r, const char *prefix, const char *name, size_t n)
{
    vdnn_error err;
    assert_true(r->n < MAX_SNAPS);
    snap *s = &r->s[r->n++];
    snprintf(s->name, sizeof s->name, "%s%s", prefix, name);
    s->n = n;
    s->v = malloc(n * sizeof(float));
    assert_non_null(s->v);
    vt_assert_ok(vdnn_net_get(net, name, s->v, n, &err), err);
}

static const float *snap_find(const run_result *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->s[i].name, name)) return r->s[i].v;
    fail_msg("no snapshot '%s'", name);
    return NULL;
}

static void run_free(run_result *r)
{
    for (int i = 0; i < r->n; i++) free(r->s[i].v);
    r->n = 0;
}

/* Parameters, gradients, momentum and statistics: storage names and counts, in plan order. */
static int param_storages(const vdnn_graph_t *g, char names[][112], size_t *counts, int max)
{
    int n = 0;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        const struct {
            size_t count;
            const char *suffix;
        } parts[] = {{ly->n_weight, ".weight"},          {ly->n_bias, ".bias"},      {ly->n_stats, ".stats"},
                     {ly->n_weight, ".weight.grad"},     {ly->n_bias, ".bias.grad"},
                     {ly->n_weight, ".weight.momentum"}, {ly->n_bias, ".bias.momentum"}};
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            if (!parts[k].count) continue;
            assert_true(n < max);
            snprintf(names[n], 112, "%s%s", ly->name, parts[k].suffix);
            counts[n++] = parts[k].count;
        }
    }
    return n;
}

/* A net at the reference sizes and hyperparameters, loaded with the reference's initial parameters and
 * statistics and zero momentum. */
static vdnn_net_t *ref_net(ctx *c, vdnn_policy pol, bool poison)
{
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = c->batch;
    cfg.in_c = c->input.c;
    cfg.in_h = c->input.h;
    cfg.in_w = c->input.w;
    cfg.classes = c->classes;
    cfg.memory.policy = pol;
    cfg.memory.poison = poison;
    cfg.momentum = c->momentum;
    cfg.weight_decay = c->wd;
    const vdnn_net_extras x = {.dropout_seed = ref_dropout_seed, .keep_weight_grads = !c->fused};
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create_ex(c->g, c->be, &cfg, &x, &net, &err), err);
    assert_int_equal(net->plan_train->policy, pol);
    if (pol != VDNN_POLICY_NONE) assert_true(net->plan_train->bytes_moved > 0);

    char names[MAX_SNAPS][112];
    size_t counts[MAX_SNAPS];
    int n = param_storages(c->g, names, counts, MAX_SNAPS);
    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        float *buf = calloc(counts[i], sizeof(float)); /* zero momentum */
        assert_non_null(buf);
        const size_t len = strlen(name);
        if (len > 6 && !strcmp(name + len - 6, ".stats")) {
            char layer[112];
            snprintf(layer, sizeof layer, "%.*s", (int)(len - 6), name);
            ref_stats(&c->ref, "", layer, counts[i], buf);
        } else if ((len > 7 && !strcmp(name + len - 7, ".weight")) || (len > 5 && !strcmp(name + len - 5, ".bias"))) {
            memcpy(buf, vt_ref_f32(&c->ref, name, counts[i]), counts[i] * sizeof(float));
        }
        if (!strstr(name, ".grad")) vt_assert_ok(vdnn_net_set(net, name, buf, counts[i], &err), err);
        free(buf);
    }
    return net;
}

/* Trains meta.steps steps on the reference batch and records the losses and every persistent tensor
 * after step 0 ("step0:") and after the last step ("final:"). */
static void train_run(ctx *c, vdnn_policy pol, bool poison, run_result *r)
{
    vdnn_net_t *net = ref_net(c, pol, poison);
    vdnn_error err;
    char names[MAX_SNAPS][112];
    size_t counts[MAX_SNAPS];
    int n = param_storages(c->g, names, counts, MAX_SNAPS);
    memset(r, 0, sizeof *r);
    for (int t = 0; t < c->steps; t++) {
        vt_assert_ok(vdnn_net_train_step(net, c->images, c->labels, c->lr, &r->loss[t], &err), err);
        if (t == 0)
            for (int i = 0; i < n; i++)
                if (!c->fused || !strstr(names[i], ".grad")) snap_take(net, r, "step0:", names[i], counts[i]);
    }
    for (int i = 0; i < n; i++)
        if (!c->fused || !strstr(names[i], ".grad")) snap_take(net, r, "final:", names[i], counts[i]);
    vdnn_net_free(net);
}

/* Every feature map and gradient map as the net itself computes it in step 0: the executor copies the
 * chosen storage out just before freeing its block (net->fetch_storage), one fresh net per storage.
 * A map shared by in-place layers then holds the last one's output. Returns the count out of tolerance. */
static size_t check_net_tensors(ctx *c, bool verbose)
{
    checker ck = {.verbose = verbose};
    vdnn_error err;
    group_begin(&ck, "net, step 0: layer outputs and their gradients, read from the plan's storages");
    const int L = c->g->n_layers;
    for (int l = 0; l < L; l++) {
        for (int grad = 0; grad < 2; grad++) {
            vdnn_net_t *net = ref_net(c, VDNN_POLICY_NONE, false);
            const vdnn_plan_t *p = net->plan_train;
            const int st = grad ? p->ls[l].grad : p->ls[l].out;
            bool shown = st >= 0;
            for (int k = l + 1; k < L && shown && !grad; k++) shown = p->ls[k].out != st;
            /* A gradient map that backward reuses in place for its input's gradient ends up holding that one. */
            for (int k = 0; k < l && shown && grad; k++) shown = p->ls[k].grad != st;
            const vdnn_layer *ly = &c->g->layers[l];
            const size_t n = vdnn_shape_count(ly->out);
            if (shown) {
                assert_false(p->st[st].persistent);
                assert_int_equal(p->st[st].bytes, n * sizeof(float));
                float *buf = malloc(n * sizeof(float));
                assert_non_null(buf);
                for (size_t i = 0; i < n; i++) buf[i] = NAN;
                net->fetch_storage = st;
                net->fetch_dst = buf;
                float loss;
                vt_assert_ok(vdnn_net_train_step(net, c->images, c->labels, c->lr, &loss, &err), err);
                char what[256];
                snprintf(what, sizeof what, "%s%s (storage %s)", ly->name, grad ? ".out.grad" : ".out", p->st[st].name);
                check(&ck, what, buf, ref_layer(&c->ref, ly->name, grad ? ".out.grad" : ".out", n), n, TOL_STEP0);
                free(buf);
            }
            vdnn_net_free(net);
        }
    }
    group_end(&ck);
    return ck.bad;
}

/* Compares snapshot "<snap_prefix><p><suffix>" with reference "<ref_prefix><p><suffix>" for every
 * weight and bias p; with wd_sum, the reference is instead "<p>.grad" + wd*"<p>" (the momentum after
 * the first update from zero). */
static void check_params(ctx *c, checker *ck, const run_result *r, const char *snap_prefix, const char *ref_prefix,
                         const char *suffix, bool wd_sum, tol t)
{
    char name[160], want_name[160];
    for (int l = 1; l < c->g->n_layers; l++) {
        const vdnn_layer *ly = &c->g->layers[l];
        const char *kinds[] = {".weight", ".bias"};
        const size_t cnt[] = {ly->n_weight, ly->n_bias};
        for (int k = 0; k < 2; k++) {
            if (!cnt[k]) continue;
            snprintf(name, sizeof name, "%s%s%s%s", snap_prefix, ly->name, kinds[k], suffix);
            snprintf(want_name, sizeof want_name, "%s%s%s%s", ref_prefix, ly->name, kinds[k], wd_sum ? "" : suffix);
            const float *want = vt_ref_f32(&c->ref, want_name, cnt[k]);
            float *sum = NULL;
            if (wd_sum) {
                sum = malloc(cnt[k] * sizeof(float));
                assert_non_null(sum);
                snprintf(want_name, sizeof want_name, "%s%s.grad", ly->name, kinds[k]);
                const float *gr = vt_ref_f32(&c->ref, want_name, cnt[k]);
                for (size_t i = 0; i < cnt[k]; i++) sum[i] = gr[i] + c->wd * want[i];
                want = sum;
            }
            check(ck, name + strlen(snap_prefix), snap_find(r, name), want, cnt[k], t);
            free(sum);
        }
    }
}

static void check_stats(ctx *c, checker *ck, const run_result *r, const char *snap_prefix, const char *ref_prefix,
                        tol t)
{
    char name[160];
    for (int l = 1; l < c->g->n_layers; l++) {
        const vdnn_layer *ly = &c->g->layers[l];
        if (!ly->n_stats) continue;
        float *want = malloc(ly->n_stats * sizeof(float));
        assert_non_null(want);
        ref_stats(&c->ref, ref_prefix, ly->name, ly->n_stats, want);
        snprintf(name, sizeof name, "%s%s.stats", snap_prefix, ly->name);
        check(ck, name + strlen(snap_prefix), snap_find(r, name), want, ly->n_stats, t);
        free(want);
    }
}

/* Returns the number of tensors out of tolerance. */
static size_t check_training(ctx *c, const run_result *r, bool verbose)
{
    checker ck = {.verbose = verbose};
    group_begin(&ck, "net: loss of every step (loss.value, train.loss)");
    check(&ck, "loss of step 0 (loss.value)", &r->loss[0], vt_ref_f32(&c->ref, "loss.value", 1), 1, TOL_STEP0);
    const float *losses = vt_ref_f32(&c->ref, "train.loss", (size_t)c->steps);
    for (int t = 0; t < c->steps; t++) {
        char name[64];
        snprintf(name, sizeof name, "loss of step %d", t);
        check(&ck, name, &r->loss[t], &losses[t], 1, t == 0 ? TOL_STEP0 : TOL_FINAL);
    }
    group_end(&ck);
    group_begin(&ck, "net, step 0: parameter gradients (the \"<p>.grad\" storages)");
    check_params(c, &ck, r, "step0:", "", ".grad", false, TOL_STEP0);
    group_end(&ck);
    group_begin(&ck, "net, step 0: momentum = grad + wd*w");
    check_params(c, &ck, r, "step0:", "", ".momentum", true, TOL_STEP0);
    group_end(&ck);
    group_begin(&ck, "net, step 0: BN running statistics");
    check_stats(c, &ck, r, "step0:", "step0.", TOL_STEP0);
    group_end(&ck);
    group_begin(&ck, "net, after the last step: parameters");
    check_params(c, &ck, r, "final:", "final.", "", false, TOL_FINAL);
    group_end(&ck);
    group_begin(&ck, "net, after the last step: momentum");
    check_params(c, &ck, r, "final:", "final.", ".momentum", false, TOL_FINAL);
    group_end(&ck);
    group_begin(&ck, "net, after the last step: BN running statistics");
    check_stats(c, &ck, r, "final:", "final.", TOL_FINAL);
    group_end(&ck);
    return ck.bad;
}

/* ---- tests ---- */

/* The masks PyTorch used are the ones vdnn_dropout_keep draws for seed 1000 + step. */
static void test_dropout_masks_match(void **state)
{
    ctx *c = *state;
    int checked = 0;
    for (int l = 1; l < c->g->n_layers; l++) {
        const vdnn_layer *ly = &c->g->layers[l];
        if (ly->kind != VDNN_LAYER_DROPOUT) continue;
        const size_t n = vdnn_shape_count(ly->out);
        const float *mask = ref_layer(&c->ref, ly->name, ".mask", (size_t)c->steps * n);
        for (int t = 0; t < c->steps; t++)
            for (size_t i = 0; i < n; i++)
                if ((mask[(size_t)t * n + i] == 1.0f) !=
                    vdnn_dropout_keep(ref_dropout_seed(0, t, l), i, ly->p.dropout_p))
                    fail_msg("%s.mask[%d][%zu] is %g, vdnn_dropout_keep disagrees", ly->name, t, i,
                             (double)mask[(size_t)t * n + i]);
        checked++;
    }
    assert_int_equal(checked, 1);
}

static void test_ops_match_pytorch(void **state)
{
    ctx *c = *state;
    assert_int_equal(check_ops(c, true), 0);
}

static void test_net_tensors_match_pytorch(void **state)
{
    ctx *c = *state;
    assert_int_equal(check_net_tensors(c, true), 0);
}

static void test_training_matches_pytorch(void **state)
{
    ctx *c = *state;
    run_result r;
    train_run(c, VDNN_POLICY_NONE, false, &r);
    assert_int_equal(check_training(c, &r, true), 0);
    run_free(&r);
}

/* Offloading and recomputing nothing must change no bit, even with freed memory poisoned. */
static void test_policies_bitwise_equal(void **state)
{
    ctx *c = *state;
    run_result base, other;
    train_run(c, VDNN_POLICY_NONE, false, &base);
    const vdnn_policy pols[] = {VDNN_POLICY_ALL, VDNN_POLICY_CONV};
    for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
        train_run(c, pols[p], true, &other);
        assert_int_equal(other.n, base.n);
        for (int t = 0; t < c->steps; t++)
            if (memcmp(&other.loss[t], &base.loss[t], sizeof(float)))
                fail_msg("policy %s: loss of step %d is %.9g, policy none %.9g", vdnn_policy_name(pols[p]), t,
                         (double)other.loss[t], (double)base.loss[t]);
        for (int i = 0; i < base.n; i++) {
            assert_string_equal(other.s[i].name, base.s[i].name);
            for (size_t k = 0; k < base.s[i].n; k++)
                if (memcmp(&other.s[i].v[k], &base.s[i].v[k], sizeof(float)))
                    fail_msg("policy %s: %s[%zu] is %.9g, policy none %.9g", vdnn_policy_name(pols[p]),
                             other.s[i].name, k, (double)other.s[i].v[k], (double)base.s[i].v[k]);
        }
        printf("policy %s with --poison: %d tensors and %d losses bitwise equal to policy none\n",
               vdnn_policy_name(pols[p]), base.n, c->steps);
        run_free(&other);
    }
    run_free(&base);
}

/* Updating each layer's parameters right after its backward (the default, which frees weight gradients
 * early) gives bitwise the same parameters, momentum and statistics as one update step at the end. */
static void test_fused_update_bitwise_equal(void **state)
{
    ctx *c = *state;
    run_result base, fused;
    train_run(c, VDNN_POLICY_NONE, false, &base);
    c->fused = true;
    train_run(c, VDNN_POLICY_NONE, true, &fused);
    c->fused = false;
    int compared = 0;
    for (int t = 0; t < c->steps; t++) assert_memory_equal(&fused.loss[t], &base.loss[t], sizeof(float));
    for (int i = 0; i < fused.n; i++) {
        const float *want = snap_find(&base, fused.s[i].name);
        assert_non_null(want);
        if (memcmp(fused.s[i].v, want, fused.s[i].n * sizeof(float)))
            fail_msg("fused update: %s differs from the separate update step", fused.s[i].name);
        compared++;
    }
    assert_true(compared > 10);
    printf("fused update: %d tensors and %d losses bitwise equal to a separate update step\n", compared, c->steps);
    run_free(&base);
    run_free(&fused);
}

/* The comparisons can fail: one reference weight off by 1e-2 must be caught by both. */
static void test_perturbed_reference_is_caught(void **state)
{
    ctx *c = *state;
    const vdnn_layer *first = NULL;
    for (int l = 1; l < c->g->n_layers && !first; l++)
        if (c->g->layers[l].n_weight) first = &c->g->layers[l];
    assert_non_null(first);
    float *w = ref_layer(&c->ref, first->name, ".weight", first->n_weight);
    const float saved = w[0];
    w[0] += 1e-2f;
    size_t bad_ops = check_ops(c, false);
    size_t bad_maps = check_net_tensors(c, false);
    run_result r;
    train_run(c, VDNN_POLICY_NONE, false, &r);
    size_t bad_train = check_training(c, &r, false);
    run_free(&r);
    w[0] = saved;
    printf("%s.weight[0] + 1e-2: out of tolerance: %zu op tensors, %zu net feature/gradient maps, %zu training "
           "tensors\n", first->name, bad_ops, bad_maps, bad_train);
    assert_true(bad_ops > 0);
    assert_true(bad_maps > 0);
    assert_true(bad_train > 0);
    assert_int_equal(check_ops(c, false), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dropout_masks_match),
        cmocka_unit_test(test_ops_match_pytorch),
        cmocka_unit_test(test_net_tensors_match_pytorch),
        cmocka_unit_test(test_training_matches_pytorch),
        cmocka_unit_test(test_policies_bitwise_equal),
        cmocka_unit_test(test_fused_update_bitwise_equal),
        cmocka_unit_test(test_perturbed_reference_is_caught),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
