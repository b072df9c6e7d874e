/* torchvision's resnet18, resnet50, vgg16, googlenet, mobilenet_v2 and mobilenet_v3_small, exported by
 * tests/data/onnx/make_torchvision.py (run by this test into the build directory: their weights are too large to
 * commit), against PyTorch on the CPU backend: eval-mode logits, the parameters and batch-norm statistics after one
 * SGD step, the export round trip (the stepped net exported, checked by onnx.checker and loaded into torchvision's
 * model by tests/data/onnx/check_torchvision_export.py, whose logits equal vdnn_net_forward's), and training under
 * policy auto at half the in-core peak (or the least above it where auto plans) bit for bit like policy none.
 *
 *     test_torchvision [NET...]     (default: all six; VDNN_TEST_QUICK=1: mobilenet_v3_small)
 *
 * Exits 77 (CTest's SKIP_RETURN_CODE) when the interpreter VDNN_TORCH_PYTHON lacks torch, torchvision or onnx. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "ref_file.h"
#include "testutil.h"

#define OUT_DIR VDNN_BINARY_DIR "/torchvision"
#define SCRIPT VDNN_SOURCE_DIR "/tests/data/onnx/make_torchvision.py"
#define EXPORT_SCRIPT VDNN_SOURCE_DIR "/tests/data/onnx/check_torchvision_export.py"
#define STEPS 2

/* Tolerances. vdnn and PyTorch both compute in float32, in other summation orders; the references also hold
 * PyTorch's float64 results from the same float32 parameters and batch (make_torchvision.py). Each result of vdnn
 * may be EXACT_FACTOR times as far from the float64 one as PyTorch's float32 result is, and always a floor: how
 * close float32 gets depends on the net and on luck (resnet50's eval-mode logits: 8.5e-5 off float64 in PyTorch;
 * its training-mode loss: 1.4e-7 relative with PyTorch's oneDNN convolutions, 5e-6 with its own), so
 * PyTorch's error alone can be too small a yardstick.
 * - Eval-mode logits, compared as log-probabilities (the logits up to the softmax's shift per sample): floor
 *   LOGIT_FLOOR of the largest logit (at least 1); a mapping mistake (a wrong window, a missed statistic, a gate
 *   left out) moves them by 1e-2 or more.
 * - The step's loss (training mode): floor LOSS_FLOOR, relative.
 * - One SGD step: every parameter's update (lr times its gradient), relative to the largest update in the net:
 *   floor UPDATE_FLOOR. Training-mode batch norm over 2 images makes deep nets ill-conditioned in float32, and an
 *   activation input within rounding of a kink (ReLU's 0) lands on either side and moves every gradient below it
 *   by percents: the batches keep such inputs 1e-6 from kinks where one can be found (make_torchvision.py).
 * - Running statistics after the step's forward, relative to the tensor's largest value: floor STATS_FLOOR.
 * The convolutions run oneDNN's direct kernels here: its Winograd kernels (vdnn's default for 3x3 stride-1 layers
 * of 8x8 and larger) round coarser, by more than that margin. */
#define EXACT_FACTOR 3.0
#define LOGIT_FLOOR 1e-5
#define LOSS_FLOOR 5e-5
#define UPDATE_FLOOR 1e-4
#define STATS_FLOOR 1e-5

typedef struct tv_case {
    const char *name;
    vdnn_backend_t *be;
    /* Results, for the table printed at the end. */
    bool ran;
    size_t params;
    int batch, side, auto_batch;
    double logit_diff, logit_scale, loss_diff;
    double logit_torch64;          /* PyTorch's float32 log-probabilities against its float64 ones */
    double export_diff;            /* the export round trip: max |vdnn's logit - PyTorch's| on the exported file */
    double export_scale, export_torch64; /* its largest logit; PyTorch's float32 logits against its float64 ones */
    double param_diff;             /* largest |vdnn's parameter - PyTorch's float32 one| after the step */
    double update_err, torch_err;  /* worst tensor's update error against float64: vdnn's, PyTorch's float32 */
    double stats_err, torch_stats_err;
    bool has_stats;
    size_t none_peak, auto_peak;
    int auto_recompute, auto_swap, auto_homed;
} tv_case;

static const char *const all_nets[] = {"resnet18", "resnet50", "vgg16", "googlenet", "mobilenet_v2",
                                       "mobilenet_v3_small"};
static const char *const quick_nets[] = {"mobilenet_v3_small"};

static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

/* Runs the script for these nets; its exit status (77: no PyTorch). */
static int generate(const char *const *nets, int n)
{
    char cmd[2048];
    int len = snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", VDNN_TORCH_PYTHON, SCRIPT, OUT_DIR);
    for (int i = 0; i < n; i++) len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", nets[i]);
    fflush(stdout);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

typedef struct loaded {
    vdnn_graph_t *g;
    vt_ref_file ref;
    const float *input;
    const int32_t *labels;
    float lr;
    int n, c, h, w;
} loaded;

static void load(const tv_case *tc, loaded *l)
{
    char path[512];
    vdnn_error err;
    snprintf(path, sizeof path, OUT_DIR "/%s.onnx", tc->name);
    vt_assert_ok(vdnn_graph_load(path, &l->g, &err), err);
    snprintf(path, sizeof path, OUT_DIR "/%s.ref", tc->name);
    vt_ref_load(path, &l->ref);
    vt_ref_array *in = vt_ref_find(&l->ref, "input");
    if (!in || in->ndim != 4) fail_msg("%s: no 4-D input in the reference", path);
    l->n = (int)in->dims[0], l->c = (int)in->dims[1], l->h = (int)in->dims[2], l->w = (int)in->dims[3];
    l->input = in->data;
    l->labels = vt_ref_get(&l->ref, "labels", VT_REF_I32, (size_t)l->n)->data;
    l->lr = *vt_ref_f32(&l->ref, "meta.lr", 1);
}

static void unload(loaded *l)
{
    vdnn_graph_free(l->g);
    vt_ref_free(&l->ref);
}

static vdnn_net_options net_options(const loaded *l, vdnn_policy pol, size_t budget, bool plain_sgd)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = l->n, cfg.in_c = l->c, cfg.in_h = l->h, cfg.in_w = l->w;
    cfg.classes = l->g->default_classes;
    cfg.memory.policy = pol;
    cfg.memory.budget = budget;
    cfg.seed = 7;
    if (plain_sgd) cfg.momentum = 0.0f, cfg.weight_decay = 0.0f;
    if (plain_sgd) cfg.memory.conv_algo = 1; /* the direct kernels where the default is Winograd's (see the tolerances) */
    return cfg;
}

static vdnn_net_t *make_net(const loaded *l, vdnn_backend_t *be, vdnn_policy pol, size_t budget, bool plain_sgd)
{
    const vdnn_net_options cfg = net_options(l, pol, budget, plain_sgd);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(l->g, be, &cfg, &net, &err), err);
    return net;
}

/* Log-softmax of n rows of k logits, in double. */
static void log_softmax(const float *z, int n, int k, double *out)
{
    for (int s = 0; s < n; s++) {
        const float *r = z + (size_t)s * (size_t)k;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < k; j++) mx = fmax(mx, r[j]);
        for (int j = 0; j < k; j++) sum += exp((double)r[j] - mx);
        for (int j = 0; j < k; j++) out[(size_t)s * (size_t)k + j] = (double)r[j] - mx - log(sum);
    }
}

/* Eval-mode log-probabilities against PyTorch's log-softmax of its float32 and float64 logits. */
static void check_logits(tv_case *tc, loaded *l, vdnn_net_t *net)
{
    const int k = l->g->classes;
    const size_t n = (size_t)l->n * (size_t)k;
    const float *z32 = vt_ref_f32(&l->ref, "logits", n), *z64 = vt_ref_f32(&l->ref, "logits64", n);
    vdnn_error err;
    float *probs = malloc(n * sizeof *probs);
    assert_non_null(probs);
    vt_assert_ok(vdnn_net_predict(net, l->input, l->n, probs, &err), err);
    double *p32 = malloc(n * sizeof *p32), *p64 = malloc(n * sizeof *p64);
    assert_true(p32 && p64);
    log_softmax(z32, l->n, k, p32);
    log_softmax(z64, l->n, k, p64);
    double worst = 0, worst64 = 0, torch64 = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double got = log((double)probs[i]);
        if (!(fabs(got - p32[i]) <= worst)) worst = fabs(got - p32[i]); /* NaN wins */
        if (!(fabs(got - p64[i]) <= worst64)) worst64 = fabs(got - p64[i]);
        torch64 = fmax(torch64, fabs(p32[i] - p64[i]));
        scale = fmax(scale, fabs(z64[i]));
    }
    free(p32), free(p64), free(probs);
    tc->logit_diff = worst, tc->logit_scale = scale, tc->logit_torch64 = torch64;
    const double tol = fmax(EXACT_FACTOR * torch64, LOGIT_FLOOR * fmax(1.0, scale));
    if (!(worst64 <= tol))
        fail_msg("%s: eval-mode log-probabilities are %.3g off PyTorch's float64 ones, beyond %.3g (PyTorch's "
                 "float32 ones: %.3g off; logits up to %.3g)",
                 tc->name, worst64, tol, torch64, scale);
}

static bool is_stats(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && !strcmp(name + n - 6, ".stats");
}

/* max |a - b| (a, b NULL: 0) and where; a NaN counts as infinitely far. */
static double max_diff(const double *a, const float *b, size_t n, size_t *at)
{
    double m = 0;
    for (size_t k = 0; k < n; k++) {
        const double d = fabs(a[k] - (double)b[k]);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d, *at = k;
    }
    return m;
}

/* One tensor after the step: vdnn's and PyTorch's float32 values against the float64 step's, as updates (or, for
 * statistics, values) relative to `scale`; fails beyond EXACT_FACTOR times PyTorch's error or the floor. */
static void check_tensor(tv_case *tc, const vdnn_param_init *pi, const float *got, const float *want32,
                         const float *exact, double scale)
{
    const bool stats = is_stats(pi->name);
    const size_t n = pi->count;
    tc->has_stats |= stats;
    double *v = malloc(n * sizeof *v), *t = malloc(n * sizeof *t);
    assert_true(v && t);
    for (size_t k = 0; k < n; k++) {
        v[k] = (double)got[k] - (stats ? 0.0 : pi->values[k]);
        t[k] = (double)want32[k] - (stats ? 0.0 : pi->values[k]);
    }
    size_t at = 0, at32 = 0;
    const double err = max_diff(v, exact, n, &at) / scale, err32 = max_diff(t, exact, n, &at32) / scale;
    const double tol = fmax(EXACT_FACTOR * err32, stats ? STATS_FLOOR : UPDATE_FLOOR);
    double *worst = stats ? &tc->stats_err : &tc->update_err, *worst32 = stats ? &tc->torch_stats_err : &tc->torch_err;
    if (!(err <= *worst)) *worst = err;
    *worst32 = fmax(*worst32, err32);
    if (!(err <= tol))
        fail_msg("%s: after one step, %s of '%s' (%s) [%zu] is %.9g, the float64 step's %.9g: %.3g of %s %.3g, "
                 "beyond %g (PyTorch's float32 step: %.3g)",
                 tc->name, stats ? "the value" : "the update", pi->name, pi->source, at, v[at], (double)exact[at], err,
                 stats ? "its largest" : "the largest update", scale, tol, err32);
    free(v), free(t);
}

/* The reference's "<prefix><source>" of an initial value's storage. */
static const float *ref_step(loaded *l, const char *prefix, const vdnn_param_init *pi)
{
    char name[192];
    snprintf(name, sizeof name, "%s%s", prefix, pi->source);
    return vt_ref_f32(&l->ref, name, pi->count);
}

/* One plain SGD step (dropout off, as in PyTorch's): the loss, every parameter's update and the running
 * statistics against PyTorch's float64 step, within what float32 allows on this net. */
static void check_step(tv_case *tc, loaded *l, vdnn_net_t *net)
{
    const vdnn_graph_t *g = l->g;
    float loss;
    vdnn_error err;
    vt_assert_ok(vdnn_net_train_step(net, l->input, l->labels, l->lr, &loss, &err), err);
    const double loss32 = *vt_ref_f32(&l->ref, "step.loss", 1), loss64 = *vt_ref_f32(&l->ref, "step64.loss", 1);
    tc->loss_diff = fabs((double)loss - loss64);
    if (!(tc->loss_diff <= fmax(EXACT_FACTOR * fabs(loss32 - loss64), LOSS_FLOOR * fabs(loss64))))
        fail_msg("%s: the step's loss is %.9g, the float64 step's %.9g (PyTorch's float32 step: %.9g)", tc->name,
                 (double)loss, loss64, loss32);
    /* The largest update first, then one tensor at a time (vgg16's parameters are 553 MB). */
    double max_update = 0;
    for (int i = 0; i < g->n_init; i++) {
        const vdnn_param_init *pi = &g->init[i];
        if (is_stats(pi->name)) continue;
        const float *exact = ref_step(l, "step64.", pi);
        for (size_t k = 0; k < pi->count; k++) max_update = fmax(max_update, fabs(exact[k]));
    }
    for (int i = 0; i < g->n_init; i++) {
        const vdnn_param_init *pi = &g->init[i];
        const float *want = ref_step(l, "step.", pi), *exact = ref_step(l, "step64.", pi);
        float *got = malloc(pi->count * sizeof *got + 1);
        assert_non_null(got);
        vt_assert_ok(vdnn_net_get(net, pi->name, got, pi->count, &err), err);
        double scale = max_update;
        if (is_stats(pi->name)) {
            scale = 0;
            for (size_t k = 0; k < pi->count; k++) scale = fmax(scale, fabs(exact[k]));
        } else {
            for (size_t k = 0; k < pi->count; k++)
                tc->param_diff = fmax(tc->param_diff, fabs((double)got[k] - want[k]));
        }
        check_tensor(tc, pi, got, want, exact, scale);
        free(got);
    }
}

/* The export round trip: a net imported and trained STEPS steps is exported by vdnn_net_export_onnx; the script
 * checks the file with onnx.checker, loads its initializers into torchvision's model and writes that model's
 * eval-mode logits on the same batch, which must equal vdnn_net_forward's within check_logits' tolerance (the
 * same float32 rounding; here on the logits themselves, which forward returns). The steps are small (lr
 * EXPORT_LR): check_step's lr 0.1 on these untrained nets at batch 2 throws some of them far off (resnet50's
 * eval logits reach 1e14), where a comparison says nothing. They still move every parameter, and the batch-norm
 * running statistics by a tenth of the way to the batch's. */
#define EXPORT_LR 1e-3f
static void check_export(tv_case *tc, loaded *l)
{
    char path[512], cmd[2048];
    vdnn_error err;
    vdnn_net_t *net = make_net(l, tc->be, VDNN_POLICY_NONE, SIZE_MAX, true);
    for (int s = 0; s < STEPS; s++)
        vt_assert_ok(vdnn_net_train_step(net, l->input, l->labels, EXPORT_LR, NULL, &err), err);
    snprintf(path, sizeof path, OUT_DIR "/%s.exported.onnx", tc->name);
    vt_assert_ok(vdnn_net_export_onnx(net, path, &err), err);
    const size_t nx = (size_t)l->n * (size_t)l->c * (size_t)l->h * (size_t)l->w;
    snprintf(path, sizeof path, OUT_DIR "/%s.exported_input.f32", tc->name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(l->input, sizeof *l->input, nx, f) != nx || fclose(f)) fail_msg("cannot write %s", path);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", VDNN_TORCH_PYTHON, EXPORT_SCRIPT, OUT_DIR, tc->name);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0) fail_msg("%s: %s failed (status %d)", tc->name, EXPORT_SCRIPT, rc);
    const int k = l->g->classes;
    const size_t n = (size_t)l->n * (size_t)k;
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    vt_assert_ok(vdnn_net_forward(net, l->input, l->n, got, &err), err);
    vt_ref_file ref;
    snprintf(path, sizeof path, OUT_DIR "/%s.exported.ref", tc->name);
    vt_ref_load(path, &ref);
    const float *z32 = vt_ref_f32(&ref, "logits", n), *z64 = vt_ref_f32(&ref, "logits64", n);
    double worst = 0, worst64 = 0, torch64 = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - z32[i]), d64 = fabs((double)got[i] - z64[i]);
        if (!(d <= worst)) worst = d; /* NaN wins */
        if (!(d64 <= worst64)) worst64 = d64;
        torch64 = fmax(torch64, fabs((double)z32[i] - z64[i]));
        scale = fmax(scale, fabs(z64[i]));
    }
    tc->export_diff = worst, tc->export_scale = scale, tc->export_torch64 = torch64;
    fprintf(stderr, "%s: export round trip: logits up to %.3g, vdnn - PyTorch %.3g, PyTorch float32 - float64 %.3g\n",
            tc->name, scale, worst, torch64);
    const double tol = fmax(EXACT_FACTOR * torch64, LOGIT_FLOOR * fmax(1.0, scale));
    if (!(worst64 <= tol))
        fail_msg("%s: PyTorch's logits from the exported file are %.3g off vdnn's (float64: %.3g, beyond %.3g; "
                 "logits up to %.3g)",
                 tc->name, worst, worst64, tol, scale);
    vt_ref_free(&ref);
    free(got);
    vdnn_net_free(net);
}

/* A net trained STEPS steps on l's batch (dropout as exported, momentum and weight decay as vdnn's defaults);
 * the training plan's peak, and its storages recomputed, swapped and homed in host memory. */
static vdnn_net_t *train_policy(const loaded *l, vdnn_backend_t *be, vdnn_policy pol, size_t budget, size_t *peak,
                                int classes[3])
{
    vdnn_net_t *net = make_net(l, be, pol, budget, false);
    vdnn_error err;
    for (int s = 0; s < STEPS; s++) vt_assert_ok(vdnn_net_train_step(net, l->input, l->labels, 0.01f, NULL, &err), err);
    const vdnn_plan_t *p = net->plan_train;
    *peak = p->peak_device_bytes;
    classes[0] = classes[1] = classes[2] = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) {
        classes[0] += p->st[i].cls == VDNN_CLASS_RECOMPUTE;
        classes[1] += p->st[i].cls == VDNN_CLASS_SWAP;
    }
    for (int i = 0; i < p->n_storages; i++) classes[2] += p->st[i].homed;
    return net;
}

/* The batch of the policy comparison: the reference's, but 20 for vgg16, whose fully connected layers' weights,
 * gradients and momentum (1.15 GiB whatever the plan) exceed half of the in-core peak below that. */
static int auto_batch(const tv_case *tc, const loaded *l) { return strcmp(tc->name, "vgg16") ? l->n : 20; }

/* Half of none's peak where auto plans there; else the smallest budget auto plans at, as the refusal names it: how
 * small a plan gets depends on the convolutions' workspaces, which depend on the ISA oneDNN uses (resnet18 at batch 2
 * needs 59% of none's peak with AVX2's). Still below none's peak, so auto must swap, recompute or home. */
static size_t auto_budget(const loaded *l, vdnn_backend_t *be, size_t none_peak)
{
    size_t budget = none_peak / 2;
    const vdnn_net_options cfg = net_options(l, VDNN_POLICY_AUTO, budget, false);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    const vdnn_status st = vdnn_net_create(l->g, be, &cfg, &net, &err);
    vdnn_net_free(net);
    if (st == VDNN_OK) return budget;
    if (st != VDNN_ERR_BUDGET) vt_assert_ok(st, err);
    const char *at = strstr(err.msg, "the smallest budget that works is");
    at = at ? strchr(at, '(') : NULL;
    unsigned long long least = 0;
    if (!at || sscanf(at, "(%llu bytes", &least) != 1) fail_msg("no smallest budget in: %s", err.msg);
    if (least >= none_peak) fail_msg("auto's smallest budget %llu is not below none's peak %zu", least, none_peak);
    return (size_t)least;
}

/* Policy auto at half of none's peak (or the least above it where auto plans, auto_budget) against none, every
 * parameter, momentum and statistic bit for bit. The tensors are compared one at a time, not as two whole
 * checkpoints: vgg16's are 1.1 GB each. */
static void check_auto(tv_case *tc, const loaded *l)
{
    /* The reference's images and labels, repeated up to the batch. */
    loaded big = *l;
    big.n = auto_batch(tc, l);
    const size_t image = (size_t)l->c * (size_t)l->h * (size_t)l->w;
    float *x = malloc((size_t)big.n * image * sizeof *x);
    int32_t *y = malloc((size_t)big.n * sizeof *y);
    assert_true(x && y);
    for (int i = 0; i < big.n; i++) {
        memcpy(x + (size_t)i * image, l->input + (size_t)(i % l->n) * image, image * sizeof *x);
        y[i] = l->labels[i % l->n];
    }
    big.input = x, big.labels = y;
    tc->auto_batch = big.n;
    int classes[3];
    vdnn_checkpoint none;
    vdnn_error err;
    vdnn_net_t *net = train_policy(&big, tc->be, VDNN_POLICY_NONE, SIZE_MAX, &tc->none_peak, classes);
    vt_assert_ok(vdnn_net_export(net, &none, &err), err);
    vdnn_net_free(net);
    net = train_policy(&big, tc->be, VDNN_POLICY_AUTO, auto_budget(&big, tc->be, tc->none_peak), &tc->auto_peak,
                       classes);
    tc->auto_recompute = classes[0], tc->auto_swap = classes[1], tc->auto_homed = classes[2];
    for (int t = 0; t < none.n_tensors; t++) {
        const vdnn_ckpt_tensor *want = &none.tensors[t];
        float *got = malloc(want->count * sizeof *got + 1);
        assert_non_null(got);
        vt_assert_ok(vdnn_net_get(net, want->name, got, want->count, &err), err);
        for (size_t k = 0; k < want->count; k++)
            if (memcmp(&got[k], &want->data[k], sizeof *got))
                fail_msg("%s: '%s'[%zu] is %.9g after %d steps under auto below none's peak, %.9g under none",
                         tc->name, want->name, k, (double)got[k], STEPS, (double)want->data[k]);
        free(got);
    }
    vdnn_net_free(net);
    vdnn_checkpoint_release(&none);
    free(x), free(y);
}

static void test_net(void **state)
{
    tv_case *tc = *state;
    loaded l;
    load(tc, &l);
    tc->batch = l.n, tc->side = l.h;
    tc->params = 0;
    for (int i = 0; i < l.g->n_init; i++)
        if (!is_stats(l.g->init[i].name)) tc->params += l.g->init[i].count;
    /* PyTorch's step runs without dropout: the masks come from another generator. */
    float drop[64];
    int nd = 0;
    for (int i = 0; i < l.g->n_layers && nd < 64; i++)
        if (l.g->layers[i].kind == VDNN_LAYER_DROPOUT) drop[nd++] = l.g->layers[i].p.dropout_p, l.g->layers[i].p.dropout_p = 0;
    vdnn_net_t *net = make_net(&l, tc->be, VDNN_POLICY_NONE, SIZE_MAX, true);
    check_logits(tc, &l, net);
    check_step(tc, &l, net);
    vdnn_net_free(net);
    check_export(tc, &l);
    nd = 0;
    for (int i = 0; i < l.g->n_layers && nd < 64; i++)
        if (l.g->layers[i].kind == VDNN_LAYER_DROPOUT) l.g->layers[i].p.dropout_p = drop[nd++];
    /* The references are no longer needed (vgg16's are 1.1 GB): keep the batch alone. */
    const size_t nx = (size_t)l.n * (size_t)l.c * (size_t)l.h * (size_t)l.w;
    float *x = malloc(nx * sizeof *x);
    int32_t *y = malloc((size_t)l.n * sizeof *y);
    assert_true(x && y);
    memcpy(x, l.input, nx * sizeof *x);
    memcpy(y, l.labels, (size_t)l.n * sizeof *y);
    vt_ref_free(&l.ref);
    l.input = x, l.labels = y;
    check_auto(tc, &l);
    tc->ran = true;
    free(x), free(y);
    unload(&l);
}

static void print_table(const tv_case *cs, int n)
{
    printf("\n%-19s %9s %11s %9s %19s %10s %10s %19s %19s %19s %5s %10s %10s  %s\n", "net", "params", "input",
           "logits up", "logit diff (pt64)", "loss diff", "param diff", "update err vdnn/pt", "stats err vdnn/pt",
           "export diff (up to)", "batch", "none peak", "auto peak", "auto's plan");
    for (int i = 0; i < n; i++) {
        const tv_case *c = &cs[i];
        if (!c->ran) {
            printf("%-19s (failed)\n", c->name);
            continue;
        }
        char in[32], stats[32];
        snprintf(in, sizeof in, "%dx3x%dx%d", c->batch, c->side, c->side);
        snprintf(stats, sizeof stats, "%.2e/%.2e", c->stats_err, c->torch_stats_err);
        printf("%-19s %9zu %11s %9.3g %9.2e (%.2e) %10.2e %10.2e %9.2e/%.2e %19s %9.2e (%7.3g) %5d %7.1fMiB %8.1fMiB  %d "
               "recomputed, %d swapped, %d homed\n",
               c->name, c->params, in, c->logit_scale, c->logit_diff, c->logit_torch64, c->loss_diff, c->param_diff, c->update_err,
               c->torch_err, c->has_stats ? stats : "-", c->export_diff, c->export_scale, c->auto_batch, (double)c->none_peak / (1 << 20),
               (double)c->auto_peak / (1 << 20), c->auto_recompute, c->auto_swap, c->auto_homed);
    }
}

int main(int argc, char **argv)
{
    const char *const *nets = quick() ? quick_nets : all_nets;
    int n = quick() ? 1 : 6;
    if (argc > 1) nets = (const char *const *)argv + 1, n = argc - 1;
    int rc = generate(nets, n);
    if (rc == 77) {
        printf("SKIPPED: %s cannot run %s (it needs python3-torch, python3-torchvision and python3-onnx)\n",
               VDNN_TORCH_PYTHON, SCRIPT);
        return VT_EXIT_SKIPPED;
    }
    if (rc != 0) {
        fprintf(stderr, "test_torchvision: %s failed (exit status %d)\n", SCRIPT, rc);
        return 1;
    }
    vdnn_cpu_options co = {.threads = 0};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    if (vdnn_backend_cpu_create(&co, &be, &err)) {
        fprintf(stderr, "test_torchvision: the CPU backend: %s\n", err.msg);
        return 1;
    }
    tv_case *cs = calloc((size_t)n, sizeof *cs);
    struct CMUnitTest *tests = calloc((size_t)n, sizeof *tests);
    if (!cs || !tests) return 1;
    for (int i = 0; i < n; i++) {
        cs[i] = (tv_case){.name = nets[i], .be = be};
        tests[i] = (struct CMUnitTest){nets[i], test_net, NULL, NULL, &cs[i]};
    }
    int failed = _cmocka_run_group_tests("torchvision", tests, (size_t)n, NULL, NULL);
    print_table(cs, n);
    vdnn_backend_destroy(be);
    free(tests), free(cs);
    return failed ? 1 : 0;
}
