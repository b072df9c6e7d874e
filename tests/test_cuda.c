/* Tests of the CUDA backend: every op forward and backward against the CPU backend on the same inputs (every
 * conv candidate algorithm too), memory, queues and events, conv algorithm lists, lenet training under each
 * policy including um (bitwise equal parameters in deterministic mode), and the refusal of a Unified Memory pool
 * larger than the free device memory. Without a usable GPU every GPU test is skipped with the reason; option
 * checks still run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"

#ifdef VDNN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#endif

/* Why the GPU tests are skipped ("" when a GPU is usable). Set once in main. */
static char skip_reason[1024];

/* ---------------- without a GPU too ---------------- */

static void test_create_or_reason(void **state)
{
    vdnn_backend_t *be = (vdnn_backend_t *)&be;
    vdnn_error err;
    vdnn_status st = vdnn_backend_cuda_create(0, 0, &be, &err);
    if (skip_reason[0]) {
        /* The CLI prints this one line and falls back to the CPU. */
        vt_assert_error(st, err, VDNN_ERR_NO_DEVICE, "no GPU");
        assert_null(be);
        assert_null(strchr(err.msg, '\n'));
        return;
    }
    vt_assert_ok(st, err);
    assert_string_equal(be->ops->name, "cuda");
    vdnn_backend_destroy(be);
}

#ifdef VDNN_HAVE_CUDA

static void test_bad_options(void **state)
{
    vdnn_backend_t *be = (vdnn_backend_t *)&be;
    vdnn_error err;
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.device = -1;
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "device -1");
    assert_null(be);
    vdnn_cuda_options_default(&o);
    o.tf32 = 5;
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "tf32");
    vdnn_cuda_options_default(&o);
    setenv("VDNN_CONV_WS_LIMIT", "lots", 1);
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "VDNN_CONV_WS_LIMIT='lots'");
    unsetenv("VDNN_CONV_WS_LIMIT");
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, NULL, &err), err, VDNN_ERR_INVALID_ARG, "NULL output");
    /* Not a CUDA backend. */
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    assert_false(vdnn_cuda_settings(be, NULL));
    vdnn_op_desc d = {.kind = VDNN_LAYER_CONV};
    int n = 7;
    vt_assert_error(vdnn_cuda_conv_algos(be, &d, VDNN_CONV_FWD, false, NULL, 0, &n, &err), err, VDNN_ERR_INVALID_ARG,
                    "not a CUDA backend");
    assert_int_equal(n, 0);
    vdnn_backend_destroy(be);
}

/* ---------------- helpers ---------------- */

#define GPU_OR_SKIP()                     \
    do {                                  \
        if (skip_reason[0]) skip();       \
    } while (0)

static vdnn_backend_t *gpu(void)
{
    /* Strict FP32 so results can be compared with the CPU at FP32 tolerances. */
    setenv("VDNN_NO_TF32", "1", 1);
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cuda_create(0, 0, &be, &err), err);
    vdnn_cuda_options o;
    assert_true(vdnn_cuda_settings(be, &o));
    assert_int_equal(o.tf32, 0);
    return be;
}

static vdnn_backend_t *cpu(void)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    return be;
}

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void *dev(vdnn_backend_t *be, size_t bytes)
{
    void *p = NULL;
    vdnn_error err;
    vt_assert_ok(be->ops->dev_alloc(be, bytes, &p, &err), err);
    assert_non_null(p);
    return p;
}

static void up(vdnn_backend_t *be, void *d, const void *h, size_t bytes)
{
    vdnn_error err;
    vt_assert_ok(be->ops->upload(be, d, h, bytes, &err), err);
}

static void down(vdnn_backend_t *be, void *h, const void *d, size_t bytes)
{
    vdnn_error err;
    vt_assert_ok(be->ops->download(be, h, d, bytes, &err), err);
}

/* |got - ref| <= rtol * (|ref| + max |ref|): relative to each value, with the tensor's scale as the floor
 * (values near zero come out of sums of large terms). rtol 0 asks for equal values (-0 equals +0: libraries
 * differ on the sign of relu's zeros). NaN never passes. */
static void expect_close(const char *what, const float *got, const float *ref, size_t n, double rtol)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)ref[i]));
    size_t bad = 0, worst = 0;
    double worst_err = -1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        bool ok = rtol == 0 ? got[i] == ref[i] : e <= rtol * (fabs((double)ref[i]) + scale);
        if (!ok) bad++;
        if (!ok && (isnan(e) || e > worst_err)) {
            worst_err = isnan(e) ? INFINITY : e;
            worst = i;
        }
    }
    if (bad)
        fail_msg("%s: %zu of %zu values differ (rtol %g, scale %g); e.g. [%zu] cuda %.9g vs cpu %.9g", what, bad, n, rtol,
                 scale, worst, (double)got[worst], (double)ref[worst]);
}

/* ---------------- memory, queues, events ---------------- */

static void test_memory_and_queues(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t n = 1 << 20;
    float *d = dev(be, n * sizeof(float));
    float *d2 = dev(be, n * sizeof(float));
    void *z = dev(be, 0);
    float *h = NULL;
    vt_assert_ok(be->ops->host_alloc(be, n * sizeof(float), (void **)&h, &err), err);
    size_t fr = be->ops->dev_free_bytes(be);
    assert_true(fr > 0 && fr < SIZE_MAX);

    /* Blocking round trip. */
    float *src = floats(n), *back = floats(n);
    for (size_t i = 0; i < n; i++) src[i] = (float)i * 0.5f;
    up(be, d, src, n * sizeof(float));
    down(be, back, d, n * sizeof(float));
    assert_memory_equal(src, back, n * sizeof(float));

    /* The queues: compute fills, D2H waits for it through an event, copies into pinned memory. */
    vdnn_event *ev = NULL, *done = NULL;
    vt_assert_ok(be->ops->event_create(be, &ev, &err), err);
    vt_assert_ok(be->ops->event_create(be, &done, &err), err);
    /* A wait on a never-recorded event is no wait at all. */
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_D2H, ev, &err), err);
    vt_assert_ok(be->ops->fill(be, d, 3.0f, n, &err), err);
    vt_assert_ok(be->ops->accumulate(be, d, d, n, &err), err); /* 6 */
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_COMPUTE, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_D2H, ev, &err), err);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, h, d, n * sizeof(float), VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, done, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_sync(be, done, &err), err);
    for (size_t i = 0; i < n; i++)
        if (h[i] != 6.0f) fail_msg("D2H after event: h[%zu] = %g, want 6", i, (double)h[i]);

    /* H2D on its queue, compute waits for it, then works on the data. */
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, d2, h, n * sizeof(float), VDNN_COPY_H2D, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_H2D, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, ev, &err), err);
    vt_assert_ok(be->ops->accumulate(be, d2, d, n, &err), err); /* 7 */
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_COMPUTE, d, d2, n * sizeof(float), VDNN_COPY_D2D, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    down(be, back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (back[i] != 7.0f) fail_msg("H2D + wait + accumulate: [%zu] = %g, want 7", i, (double)back[i]);
    vt_assert_ok(be->ops->scale(be, d, 0.5f, n, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    down(be, back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (back[i] != 3.5f) fail_msg("scale: [%zu] = %g, want 3.5", i, (double)back[i]);

    /* Poison is NaN everywhere. */
    vt_assert_ok(be->ops->poison(be, d, 1000 * sizeof(float), &err), err);
    down(be, back, d, 1000 * sizeof(float));
    for (size_t i = 0; i < 1000; i++) assert_true(isnan(back[i]));

    /* Bad calls. */
    vt_assert_error(be->ops->copy_async(be, (vdnn_queue_id)7, h, d, 4, VDNN_COPY_D2H, &err), err, VDNN_ERR_INVALID_ARG,
                    "no queue 7");
    vt_assert_error(be->ops->copy_async(be, VDNN_QUEUE_D2H, NULL, d, 4, VDNN_COPY_D2H, &err), err,
                    VDNN_ERR_INVALID_ARG, "NULL destination");
    vt_assert_error(be->ops->event_record(be, NULL, VDNN_QUEUE_COMPUTE, &err), err, VDNN_ERR_INVALID_ARG, "NULL event");
    void *huge = NULL;
    vt_assert_error(be->ops->dev_alloc(be, (size_t)1 << 50, &huge, &err), err, VDNN_ERR_NO_MEMORY, "cudaMalloc");
    assert_null(huge);
    /* The failed allocation left nothing behind that breaks later work. */
    vt_assert_ok(be->ops->fill(be, d, 2.0f, 16, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);

    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, done);
    be->ops->host_free(be, h);
    be->ops->dev_free(be, d);
    be->ops->dev_free(be, d2);
    be->ops->dev_free(be, z);
    free(src);
    free(back);
    vdnn_backend_destroy(be);
}

static void test_elementwise_vs_cpu(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *g = gpu(), *c = cpu();
    vdnn_error err;
    const size_t n = 100003;
    float *w = floats(n), *dw = floats(n), *v = floats(n), *out_g = floats(n), *out_c = floats(n), *vg = floats(n),
          *vc = floats(n);
    vt_fill_uniform(w, n, 1, -1, 1);
    vt_fill_uniform(dw, n, 2, -1, 1);
    vt_fill_uniform(v, n, 3, -1, 1);
    vdnn_backend_t *bes[2] = {g, c};
    float *outs[2] = {out_g, out_c}, *vs[2] = {vg, vc};
    for (int k = 0; k < 2; k++) {
        vdnn_backend_t *be = bes[k];
        float *dW = dev(be, n * 4), *dD = dev(be, n * 4), *dV = dev(be, n * 4);
        up(be, dW, w, n * 4);
        up(be, dD, dw, n * 4);
        up(be, dV, v, n * 4);
        vt_assert_ok(be->ops->sgd_update(be, dW, dD, dV, n, 0.1f, 0.9f, 5e-4f, &err), err);
        vt_assert_ok(be->ops->accumulate(be, dD, dW, n, &err), err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        down(be, outs[k], dD, n * 4);
        down(be, vs[k], dV, n * 4);
        be->ops->dev_free(be, dW);
        be->ops->dev_free(be, dD);
        be->ops->dev_free(be, dV);
    }
    /* The GPU may fuse multiply-adds: equal to rounding. */
    expect_close("sgd momentum", vg, vc, n, 1e-6);
    expect_close("sgd + accumulate", out_g, out_c, n, 1e-6);
    free(w), free(dw), free(v), free(out_g), free(out_c), free(vg), free(vc);
    vdnn_backend_destroy(g);
    vdnn_backend_destroy(c);
}

/* ---------------- ops against the CPU backend ---------------- */

static vdnn_shape shp(int n, int c, int h, int w) { return (vdnn_shape){n, c, h, w}; }

static vdnn_op_desc one_input(vdnn_layer_kind k, vdnn_shape in, vdnn_shape out)
{
    vdnn_op_desc d;
    memset(&d, 0, sizeof d);
    d.kind = k;
    d.n_inputs = 1;
    d.in[0] = in;
    d.out = out;
    d.training = true;
    return d;
}

static vdnn_op_desc conv_d(vdnn_shape in, int filters, int k, int s, int p, int groups, int bias)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_CONV, in, shp(in.n, filters, (in.h + 2 * p - k) / s + 1, (in.w + 2 * p - k) / s + 1));
    d.p.kernel_h = d.p.kernel_w = k;
    d.p.stride_h = d.p.stride_w = s;
    d.p.pad_h = d.p.pad_w = p;
    d.p.groups = groups;
    d.p.filters = filters;
    d.p.bias = bias;
    return d;
}

static vdnn_op_desc pool_d(vdnn_layer_kind kind, vdnn_shape in, int k, int s, int p)
{
    vdnn_op_desc d = one_input(kind, in, shp(in.n, in.c, (in.h + 2 * p - k) / s + 1, (in.w + 2 * p - k) / s + 1));
    d.p.kernel_h = d.p.kernel_w = k;
    d.p.stride_h = d.p.stride_w = s;
    d.p.pad_h = d.p.pad_w = p;
    return d;
}

static vdnn_op_desc lrn_d(vdnn_shape in, int size, float alpha, float beta, float k)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_LRN, in, in);
    d.p.lrn_size = size, d.p.lrn_alpha = alpha, d.p.lrn_beta = beta, d.p.lrn_k = k;
    return d;
}

static vdnn_op_desc bn_d(vdnn_shape in, bool training)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_BATCHNORM, in, in);
    d.p.bn_eps = 1e-5f;
    d.p.bn_momentum = 0.1f;
    d.training = training;
    return d;
}

static vdnn_op_desc fc_d(vdnn_shape in, int outputs, int bias)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_FC, in, shp(in.n, outputs, 1, 1));
    d.p.filters = outputs;
    d.p.bias = bias;
    return d;
}

static vdnn_op_desc multi_d(vdnn_layer_kind kind, int k, const vdnn_shape *in, vdnn_shape out)
{
    vdnn_op_desc d = one_input(kind, in[0], out);
    d.n_inputs = k;
    for (int i = 0; i < k; i++) d.in[i] = in[i];
    return d;
}

/* Host tensors of one op call; inputs filled by make_inputs, outputs by run(). */
typedef struct op_io {
    float *x[VDNN_MAX_INPUTS], *w, *b, *stats, *dy;
    int32_t *labels;
    bool want_dx[VDNN_MAX_INPUTS];
    size_t nx[VDNN_MAX_INPUTS], ny, nw, nb, nstats;
    /* results */
    float *y, *dx[VDNN_MAX_INPUTS], *dw, *db, *stats_after, *aux;
    size_t aux_bytes;
    float loss;
} op_io;

static void sizes(const vdnn_op_desc *d, op_io *io)
{
    for (int i = 0; i < d->n_inputs; i++) io->nx[i] = vdnn_shape_count(d->in[i]);
    io->ny = vdnn_shape_count(d->out);
    vdnn_shape in = d->in[0];
    switch (d->kind) {
    case VDNN_LAYER_CONV:
        io->nw = (size_t)d->p.filters * (size_t)(in.c / d->p.groups) * (size_t)d->p.kernel_h * (size_t)d->p.kernel_w;
        io->nb = d->p.bias ? (size_t)d->p.filters : 0;
        break;
    case VDNN_LAYER_FC:
        io->nw = (size_t)d->p.filters * (size_t)in.c * (size_t)in.h * (size_t)in.w;
        io->nb = d->p.bias ? (size_t)d->p.filters : 0;
        break;
    case VDNN_LAYER_BATCHNORM:
        io->nw = io->nb = (size_t)in.c;
        io->nstats = 2 * (size_t)in.c;
        break;
    default: break;
    }
}

static void make_inputs(const vdnn_op_desc *d, uint64_t seed, op_io *io)
{
    memset(io, 0, sizeof *io);
    sizes(d, io);
    for (int i = 0; i < d->n_inputs; i++) {
        io->x[i] = floats(io->nx[i]);
        vt_fill_uniform(io->x[i], io->nx[i], seed + 10 + (uint64_t)i, -1, 1);
        io->want_dx[i] = true;
    }
    io->dy = floats(io->ny);
    vt_fill_uniform(io->dy, io->ny, seed + 1, -1, 1);
    if (io->nw) {
        io->w = floats(io->nw);
        if (d->kind == VDNN_LAYER_BATCHNORM) vt_fill_uniform(io->w, io->nw, seed + 2, 0.5f, 1.5f);
        else vt_fill_uniform(io->w, io->nw, seed + 2, -0.5f, 0.5f);
    }
    if (io->nb) {
        io->b = floats(io->nb);
        vt_fill_uniform(io->b, io->nb, seed + 3, -0.5f, 0.5f);
    }
    if (io->nstats) {
        int c = d->in[0].c;
        io->stats = floats(io->nstats);
        vt_fill_uniform(io->stats, (size_t)c, seed + 4, -0.5f, 0.5f);
        vt_fill_uniform(io->stats + c, (size_t)c, seed + 5, 0.5f, 1.5f);
    }
    if (d->kind == VDNN_LAYER_SOFTMAX_XENT) {
        int n = d->out.n, k = (int)(io->ny / (size_t)n);
        io->labels = calloc((size_t)n, sizeof *io->labels);
        assert_non_null(io->labels);
        for (int i = 0; i < n; i++) io->labels[i] = (int32_t)((i * 7 + 3) % k);
        /* Logits spread like a real classifier's. */
        for (size_t i = 0; i < io->nx[0]; i++) io->x[0][i] *= 4.0f;
    }
}

static void free_io(op_io *io, bool inputs)
{
    for (int i = 0; i < VDNN_MAX_INPUTS; i++) {
        if (inputs) free(io->x[i]);
        free(io->dx[i]);
    }
    if (inputs) {
        free(io->w), free(io->b), free(io->stats), free(io->dy), free(io->labels);
    }
    free(io->y), free(io->dw), free(io->db), free(io->stats_after), free(io->aux);
}

static void *dev_copy(vdnn_backend_t *be, const void *h, size_t bytes)
{
    if (!h || !bytes) return NULL;
    void *d = dev(be, bytes);
    up(be, d, h, bytes);
    return d;
}

static void *dev_poisoned(vdnn_backend_t *be, size_t bytes)
{
    if (!bytes) return NULL;
    void *d = dev(be, bytes);
    vdnn_error err;
    /* NaN: a value an op fails to write shows up as a mismatch. */
    vt_assert_ok(be->ops->poison(be, d, bytes, &err), err);
    return d;
}

static void *host_copy(vdnn_backend_t *be, const void *d, size_t bytes)
{
    if (!d || !bytes) return NULL;
    void *h = malloc(bytes);
    assert_non_null(h);
    down(be, h, d, bytes);
    return h;
}

/* Runs forward (and backward when training) of one op on `be` the way the executor does: x and y are passed
 * to backward only when op_query says they are needed. `in` holds the inputs; results go to `out`. */
static void run(vdnn_backend_t *be, const vdnn_op_desc *d, const op_io *in, op_io *out, uint64_t seed)
{
    vdnn_error err;
    vdnn_op_info info;
    vdnn_op *op = NULL;
    vt_assert_ok(be->ops->op_query(be, d, &info, &err), err);
    vt_assert_ok(be->ops->op_create(be, d, &op, &err), err);
    const bool xent = d->kind == VDNN_LAYER_SOFTMAX_XENT;

    float *X[VDNN_MAX_INPUTS] = {0}, *DX[VDNN_MAX_INPUTS] = {0};
    for (int i = 0; i < d->n_inputs; i++) X[i] = dev_copy(be, in->x[i], in->nx[i] * 4);
    float *Y = dev_poisoned(be, in->ny * 4), *W = dev_copy(be, in->w, in->nw * 4), *B = dev_copy(be, in->b, in->nb * 4);
    float *S = dev_copy(be, in->stats, in->nstats * 4), *AUX = dev_poisoned(be, info.aux_bytes);
    size_t ws_bytes = info.fwd_ws_bytes > info.bwd_ws_bytes ? info.fwd_ws_bytes : info.bwd_ws_bytes;
    float *WS = ws_bytes ? dev(be, ws_bytes) : NULL;
    float *DY = dev_copy(be, in->dy, in->ny * 4);
    int32_t *L = xent ? dev_copy(be, in->labels, (size_t)d->out.n * sizeof(int32_t)) : NULL;
    float *LOSS = xent ? dev_poisoned(be, sizeof(float)) : NULL;

    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < d->n_inputs; i++) a.x[i] = X[i];
    a.y = Y, a.w = W, a.b = B, a.stats = S, a.update_stats = true, a.aux = AUX, a.ws = WS;
    a.labels = L, a.loss = LOSS, a.seed = seed;
    vt_assert_ok(be->ops->op_forward(be, op, &a, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    out->y = host_copy(be, Y, in->ny * 4);
    out->stats_after = host_copy(be, S, in->nstats * 4);
    out->aux = host_copy(be, AUX, info.aux_bytes);
    out->aux_bytes = info.aux_bytes;
    if (LOSS) down(be, &out->loss, LOSS, sizeof(float));

    float *DW = NULL, *DB = NULL;
    if (d->training && d->kind != VDNN_LAYER_INPUT) {
        memset(&a, 0, sizeof a);
        for (int i = 0; i < d->n_inputs; i++) {
            if (info.bwd_needs_x) a.x[i] = X[i];
            if (in->want_dx[i]) a.dx[i] = DX[i] = dev_poisoned(be, in->nx[i] * 4);
        }
        if (info.bwd_needs_y) a.y = Y;
        DW = dev_poisoned(be, in->nw * 4);
        DB = dev_poisoned(be, in->nb * 4);
        a.w = W, a.b = B, a.stats = S, a.aux = AUX, a.ws = WS, a.dw = DW, a.db = DB, a.labels = L, a.seed = seed;
        a.dy = xent ? NULL : DY; /* softmax_xent's gradient comes from the labels */
        vt_assert_ok(be->ops->op_backward(be, op, &a, &err), err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        for (int i = 0; i < d->n_inputs; i++) out->dx[i] = host_copy(be, DX[i], in->nx[i] * 4);
        out->dw = host_copy(be, DW, in->nw * 4);
        out->db = host_copy(be, DB, in->nb * 4);
    }

    for (int i = 0; i < VDNN_MAX_INPUTS; i++) {
        be->ops->dev_free(be, X[i]);
        be->ops->dev_free(be, DX[i]);
    }
    void *all[] = {Y, W, B, S, AUX, WS, DY, L, LOSS, DW, DB};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->ops->dev_free(be, all[i]);
    be->ops->op_destroy(be, op);
}

typedef struct equiv_case {
    const char *name;
    vdnn_op_desc d;
    double rtol;             /* 0: bitwise */
    int no_dx;               /* input whose gradient is not wanted, or -1 */
} equiv_case;

/* Runs t on the GPU with its candidate algorithm gpu_algo and on the CPU with the CPU's one, and compares. */
static void check_case_algo(vdnn_backend_t *g, vdnn_backend_t *c, const equiv_case *t, uint64_t seed, int gpu_algo)
{
    op_io in, og, oc;
    make_inputs(&t->d, seed, &in);
    if (t->no_dx >= 0) in.want_dx[t->no_dx] = false;
    memset(&og, 0, sizeof og);
    memset(&oc, 0, sizeof oc);
    vdnn_op_desc dg = t->d;
    dg.algo = gpu_algo;
    run(g, &dg, &in, &og, seed * 31 + 5);
    run(c, &t->d, &in, &oc, seed * 31 + 5);
    char what[160];
#define CMP(field, count, label)                                        \
    do {                                                                \
        snprintf(what, sizeof what, "%s: %s", t->name, label);          \
        if (oc.field) expect_close(what, og.field, oc.field, (count), t->rtol); \
    } while (0)
    CMP(y, in.ny, "y");
    if (t->d.training) {
        for (int i = 0; i < t->d.n_inputs; i++) {
            snprintf(what, sizeof what, "%s: dx[%d]", t->name, i);
            if (in.want_dx[i]) expect_close(what, og.dx[i], oc.dx[i], in.nx[i], t->rtol);
        }
        CMP(dw, in.nw, "dw");
        CMP(db, in.nb, "db");
    }
    if (t->d.kind == VDNN_LAYER_BATCHNORM && t->d.training) {
        CMP(stats_after, in.nstats, "running statistics");
        /* aux: both hold the batch mean first; then the CPU keeps the variance, cuDNN 1/sqrt(var + eps). */
        int ch = t->d.in[0].c;
        assert_int_equal(og.aux_bytes, 2 * (size_t)ch * 4);
        snprintf(what, sizeof what, "%s: batch mean", t->name);
        expect_close(what, og.aux, oc.aux, (size_t)ch, t->rtol);
        float *var = floats((size_t)ch);
        for (int i = 0; i < ch; i++) var[i] = 1.0f / (og.aux[ch + i] * og.aux[ch + i]) - t->d.p.bn_eps;
        snprintf(what, sizeof what, "%s: batch variance", t->name);
        expect_close(what, var, oc.aux + ch, (size_t)ch, 1e-4);
        free(var);
    }
    if (t->d.kind == VDNN_LAYER_SOFTMAX_XENT) {
        snprintf(what, sizeof what, "%s: loss", t->name);
        expect_close(what, &og.loss, &oc.loss, 1, 1e-6);
    }
#undef CMP
    free_io(&og, false);
    free_io(&oc, false);
    free_io(&in, true);
}

static void check_case(vdnn_backend_t *g, vdnn_backend_t *c, const equiv_case *t, uint64_t seed)
{
    check_case_algo(g, c, t, seed, 0);
}

static void test_ops_vs_cpu(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *g = gpu(), *c = cpu();
    const double tol = 1e-4; /* FP32 against FP32, different summation orders and algorithms */
    vdnn_op_desc relu = one_input(VDNN_LAYER_RELU, shp(4, 16, 14, 14), shp(4, 16, 14, 14));
    vdnn_op_desc gap = one_input(VDNN_LAYER_GAP, shp(4, 64, 7, 7), shp(4, 64, 1, 1));
    vdnn_op_desc flat = one_input(VDNN_LAYER_FLATTEN, shp(4, 16, 3, 3), shp(4, 144, 1, 1));
    vdnn_op_desc drop = one_input(VDNN_LAYER_DROPOUT, shp(4, 16, 8, 8), shp(4, 16, 8, 8));
    drop.p.dropout_p = 0.5f;
    vdnn_op_desc drop_eval = drop;
    drop_eval.training = false;
    vdnn_op_desc drop3 = one_input(VDNN_LAYER_DROPOUT, shp(2, 3, 5, 7), shp(2, 3, 5, 7));
    drop3.p.dropout_p = 0.3f;
    vdnn_op_desc xent = one_input(VDNN_LAYER_SOFTMAX_XENT, shp(8, 10, 1, 1), shp(8, 10, 1, 1));
    vdnn_op_desc xent1k = one_input(VDNN_LAYER_SOFTMAX_XENT, shp(4, 1000, 1, 1), shp(4, 1000, 1, 1));
    const vdnn_shape cat_in[3] = {shp(2, 8, 7, 7), shp(2, 16, 7, 7), shp(2, 4, 7, 7)};
    const vdnn_shape add_in[3] = {shp(2, 16, 14, 14), shp(2, 16, 14, 14), shp(2, 16, 14, 14)};
    const equiv_case cases[] = {
        {"conv 3x3 s1 p1", conv_d(shp(4, 16, 28, 28), 32, 3, 1, 1, 1, 1), tol, -1},
        {"conv 7x7 s2 p3", conv_d(shp(2, 3, 56, 56), 16, 7, 2, 3, 1, 0), tol, -1},
        {"conv 1x1", conv_d(shp(4, 32, 14, 14), 64, 1, 1, 0, 1, 1), tol, -1},
        {"conv grouped", conv_d(shp(2, 32, 14, 14), 64, 3, 1, 1, 4, 1), tol, -1},
        {"conv depthwise s2", conv_d(shp(2, 16, 14, 14), 16, 3, 2, 1, 16, 0), tol, -1},
        {"conv 5x5 p2", conv_d(shp(4, 8, 16, 16), 16, 5, 1, 2, 1, 1), tol, -1},
        {"conv 11x11 s4 p2", conv_d(shp(2, 3, 63, 63), 16, 11, 4, 2, 1, 1), tol, -1},
        {"conv without dx", conv_d(shp(4, 3, 32, 32), 8, 3, 1, 1, 1, 1), tol, 0},
        {"maxpool 3x3 s2 p1", pool_d(VDNN_LAYER_MAXPOOL, shp(4, 16, 28, 28), 3, 2, 1), tol, -1},
        {"maxpool 2x2 s2", pool_d(VDNN_LAYER_MAXPOOL, shp(4, 8, 28, 28), 2, 2, 0), tol, -1},
        {"maxpool 3x3 s2 overlapping", pool_d(VDNN_LAYER_MAXPOOL, shp(2, 16, 27, 27), 3, 2, 0), tol, -1},
        {"avgpool 3x3 s1 p1", pool_d(VDNN_LAYER_AVGPOOL, shp(2, 16, 14, 14), 3, 1, 1), tol, -1},
        {"avgpool 2x2 s2", pool_d(VDNN_LAYER_AVGPOOL, shp(2, 8, 8, 8), 2, 2, 0), tol, -1},
        {"avgpool 7x7", pool_d(VDNN_LAYER_AVGPOOL, shp(2, 32, 7, 7), 7, 1, 0), tol, -1},
        {"relu", relu, 0, -1},
        {"lrn 5 alexnet", lrn_d(shp(2, 32, 13, 13), 5, 1e-4f, 0.75f, 2.0f), tol, -1},
        {"lrn 5 strong", lrn_d(shp(2, 16, 9, 9), 5, 0.5f, 0.75f, 1.0f), tol, -1},
        {"lrn 3", lrn_d(shp(2, 8, 5, 5), 3, 0.3f, 0.6f, 1.5f), tol, -1},
        {"batchnorm train", bn_d(shp(4, 16, 14, 14), true), tol, -1},
        {"batchnorm train without dx", bn_d(shp(4, 8, 7, 7), true), tol, 0},
        {"batchnorm inference", bn_d(shp(4, 16, 14, 14), false), tol, -1},
        {"fc 4d input", fc_d(shp(4, 16, 4, 4), 10, 1), tol, -1},
        {"fc no bias", fc_d(shp(8, 256, 1, 1), 100, 0), tol, -1},
        {"fc without dx", fc_d(shp(3, 20, 1, 1), 7, 1), tol, 0},
        {"concat", multi_d(VDNN_LAYER_CONCAT, 3, cat_in, shp(2, 28, 7, 7)), 0, 1},
        {"add", multi_d(VDNN_LAYER_ADD, 3, add_in, add_in[0]), 0, -1},
        {"gap", gap, 1e-6, -1},
        {"flatten", flat, 0, -1},
        {"dropout", drop, 0, -1},
        {"dropout odd size", drop3, 0, -1},
        {"dropout eval", drop_eval, 0, -1},
        {"softmax_xent", xent, 1e-6, -1},
        {"softmax_xent 1000 classes", xent1k, 1e-6, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(g, c, &cases[i], 100 + i);
    vdnn_backend_destroy(g);
    vdnn_backend_destroy(c);
}

/* The device's dropout mask is vdnn_dropout_keep's, element for element. */
static void test_dropout_mask(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t n = 3 * 1000 * 1000 + 7;
    vdnn_op_desc d = one_input(VDNN_LAYER_DROPOUT, shp(1, (int)n, 1, 1), shp(1, (int)n, 1, 1));
    d.p.dropout_p = 0.25f;
    vdnn_op *op = NULL;
    vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
    float *x = dev(be, n * 4);
    vt_assert_ok(be->ops->fill(be, x, 1.0f, n, &err), err);
    const uint64_t seed = 0x1234567887654321ULL;
    vdnn_op_args a = {.x = {x}, .y = x, .seed = seed}; /* in place */
    vt_assert_ok(be->ops->op_forward(be, op, &a, &err), err);
    float *y = floats(n);
    down(be, y, x, n * 4);
    const float scale = 1.0f / (1.0f - 0.25f);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = vdnn_dropout_keep(seed, i, 0.25f);
        kept += keep;
        if (y[i] != (keep ? scale : 0.0f)) fail_msg("dropout mask differs at %zu: %g (keep %d)", i, (double)y[i], keep);
    }
    assert_true(kept > n * 7 / 10 && kept < n * 8 / 10);
    free(y);
    be->ops->dev_free(be, x);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

static void test_op_errors(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    vdnn_op *op = NULL;
    vdnn_op_info info;
    vdnn_op_desc d = conv_d(shp(2, 4, 8, 8), 8, 3, 1, 1, 1, 1);
    d.out.h = 5;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "conv: output");
    d = lrn_d(shp(2, 4, 8, 8), 4, 1e-4f, 0.75f, 2.0f);
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_UNSUPPORTED, "size 4");
    d = lrn_d(shp(2, 4, 8, 8), 17, 1e-4f, 0.75f, 2.0f);
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_UNSUPPORTED, "cuDNN's range");
    assert_null(op);
    d = one_input(VDNN_LAYER_INPUT, shp(1, 1, 1, 1), shp(1, 1, 1, 1));
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "input");
    /* An inference conv has no backward. */
    d = conv_d(shp(2, 4, 8, 8), 8, 3, 1, 1, 1, 0);
    d.training = false;
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_int_equal(info.bwd_ws_bytes, 0);
    vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
    float *p = dev(be, 4096 * 4);
    vdnn_op_args a = {.x = {p}, .dy = p, .dw = p};
    vt_assert_error(be->ops->op_backward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "inference");
    vdnn_op_args f = {.x = {p}, .w = NULL, .y = p};
    vt_assert_error(be->ops->op_forward(be, op, &f, &err), err, VDNN_ERR_INVALID_ARG, "NULL weights");
    be->ops->op_destroy(be, op);
    /* Max pooling is honest about what its backward reads. */
    d = pool_d(VDNN_LAYER_MAXPOOL, shp(2, 4, 8, 8), 2, 2, 0);
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_true(info.bwd_needs_x && info.bwd_needs_y);
    assert_int_equal(info.aux_bytes, 0);
    be->ops->dev_free(be, p);
    vdnn_backend_destroy(be);
}

/* ---------------- conv algorithms ---------------- */

static void test_conv_algorithms(void **state)
{
    GPU_OR_SKIP();
    setenv("VDNN_DETERMINISTIC", "1", 1);
    vdnn_backend_t *be = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    vdnn_error err;
    vdnn_cuda_options o;
    assert_true(vdnn_cuda_settings(be, &o));
    assert_int_equal(o.deterministic, 1);
    assert_int_equal(o.benchmark, 0);
    vdnn_op_desc d = conv_d(shp(8, 64, 28, 28), 64, 3, 1, 1, 1, 1);
    vdnn_op_info info;
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    vdnn_op *op = NULL;
    vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
    for (int pass = 0; pass < VDNN_CONV_PASS_COUNT; pass++) {
        vdnn_conv_algo list[VDNN_CONV_MAX_ALGOS], timed[VDNN_CONV_MAX_ALGOS], chosen;
        int n = 0, nt = 0;
        vt_assert_ok(vdnn_cuda_conv_algos(be, &d, (vdnn_conv_pass)pass, false, list, VDNN_CONV_MAX_ALGOS, &n, &err), err);
        assert_true(n >= 1);
        for (int i = 0; i < n; i++) {
            assert_true(list[i].deterministic);
            assert_false(list[i].tensor_cores);
            assert_true(list[i].time_ms < 0);
            assert_true(list[i].name[0] != '\0');
        }
        vt_assert_ok(vdnn_cuda_conv_algos(be, &d, (vdnn_conv_pass)pass, true, timed, VDNN_CONV_MAX_ALGOS, &nt, &err), err);
        assert_true(nt >= 1);
        for (int i = 0; i < nt; i++) assert_true(timed[i].time_ms >= 0);
        for (int i = 1; i < nt; i++) assert_true(timed[i].time_ms >= timed[i - 1].time_ms);
        assert_true(vdnn_cuda_conv_chosen(be, op, (vdnn_conv_pass)pass, &chosen));
        assert_true(chosen.deterministic);
        /* The op runs within what op_query told the planner. */
        size_t budget = pass == VDNN_CONV_FWD ? info.fwd_ws_bytes : info.bwd_ws_bytes;
        assert_true(chosen.ws_bytes <= budget);
        assert_int_equal(chosen.algo, list[0].algo);
        printf("conv 3x3 64->64 @28x28 b8 pass %d: %d candidates, chosen %s (%zu bytes), fastest measured %s %.3f ms\n",
               pass, n, chosen.name, chosen.ws_bytes, timed[0].name, timed[0].time_ms);
    }
    /* A cap of 1 returns one entry. */
    vdnn_conv_algo one;
    int n1 = 0;
    vt_assert_ok(vdnn_cuda_conv_algos(be, &d, VDNN_CONV_FWD, false, &one, 1, &n1, &err), err);
    assert_int_equal(n1, 1);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

/* Every candidate op_algos offers for a conv: query with d.algo = i reports candidate i's info, the op created
 * with it needs exactly that workspace, and its forward and backward match the CPU's. Other ops offer one. */
static void test_conv_candidates_vs_cpu(void **state)
{
    GPU_OR_SKIP();
    unsetenv("VDNN_DETERMINISTIC");
    unsetenv("VDNN_CUDNN_BENCHMARK");
    vdnn_backend_t *g = gpu(), *c = cpu();
    vdnn_error err;
    const vdnn_op_desc convs[] = {
        conv_d(shp(4, 16, 28, 28), 32, 3, 1, 1, 1, 1), conv_d(shp(8, 64, 28, 28), 64, 3, 1, 1, 1, 1),
        conv_d(shp(2, 3, 56, 56), 16, 7, 2, 3, 1, 0),  conv_d(shp(4, 32, 14, 14), 64, 1, 1, 0, 1, 1),
        conv_d(shp(2, 32, 14, 14), 64, 3, 1, 1, 4, 1), conv_d(shp(4, 8, 16, 16), 16, 5, 1, 2, 1, 1),
        conv_d(shp(2, 3, 63, 63), 16, 11, 4, 2, 1, 1),
    };
    const int n_convs = (int)(sizeof convs / sizeof convs[0]);
    int several = 0;
    for (int k = 0; k < n_convs; k++) {
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vt_assert_ok(g->ops->op_algos(g, &convs[k], algos, &n, &err), err);
        assert_true(n >= 1 && n <= VDNN_MAX_ALGOS);
        assert_string_equal(algos[0].name, "fastest");
        several += n > 1;
        size_t least_fwd = SIZE_MAX, least_bwd = SIZE_MAX;
        for (int i = 0; i < n; i++) {
            least_fwd = algos[i].info.fwd_ws_bytes < least_fwd ? algos[i].info.fwd_ws_bytes : least_fwd;
            least_bwd = algos[i].info.bwd_ws_bytes < least_bwd ? algos[i].info.bwd_ws_bytes : least_bwd;
        }
        for (int i = 0; i < n; i++) {
            vdnn_op_desc d = convs[k];
            d.algo = i;
            for (int j = 0; j < i; j++) {
                assert_string_not_equal(algos[i].name, algos[j].name);
                if (algos[i].numerics >= 0) assert_int_not_equal(algos[i].numerics, algos[j].numerics);
            }
            vdnn_op_info info;
            vt_assert_ok(g->ops->op_query(g, &d, &info, &err), err);
            assert_int_equal(info.fwd_ws_bytes, algos[i].info.fwd_ws_bytes);
            assert_int_equal(info.bwd_ws_bytes, algos[i].info.bwd_ws_bytes);
            assert_int_equal(info.aux_bytes, algos[i].info.aux_bytes);
            assert_true(info.bwd_needs_x == algos[i].info.bwd_needs_x && info.bwd_needs_y == algos[i].info.bwd_needs_y);
            /* The planner sizes the workspace from query: the op needs exactly that. */
            vdnn_op *op = NULL;
            vt_assert_ok(g->ops->op_create(g, &d, &op, &err), err);
            vdnn_conv_algo ch[VDNN_CONV_PASS_COUNT];
            for (int pass = 0; pass < VDNN_CONV_PASS_COUNT; pass++)
                assert_true(vdnn_cuda_conv_chosen(g, op, (vdnn_conv_pass)pass, &ch[pass]));
            assert_int_equal(ch[VDNN_CONV_FWD].ws_bytes, info.fwd_ws_bytes);
            size_t bwd = ch[VDNN_CONV_BWD_DATA].ws_bytes > ch[VDNN_CONV_BWD_FILTER].ws_bytes ? ch[VDNN_CONV_BWD_DATA].ws_bytes
                                                                                              : ch[VDNN_CONV_BWD_FILTER].ws_bytes;
            assert_int_equal(bwd, info.bwd_ws_bytes);
            g->ops->op_destroy(g, op);
            if (!strcmp(algos[i].name, "no-workspace")) assert_true(info.fwd_ws_bytes == 0 && info.bwd_ws_bytes == 0);
            if (!strcmp(algos[i].name, "no-workspace") || !strcmp(algos[i].name, "least-workspace"))
                assert_true(info.fwd_ws_bytes == least_fwd && info.bwd_ws_bytes == least_bwd);
            printf("conv %d candidate %d %-16s fwd %-26s %9zu B, bwd-data %-20s bwd-filter %-22s %9zu B, numerics %d\n", k,
                   i, algos[i].name, ch[0].name, info.fwd_ws_bytes, ch[1].name, ch[2].name, info.bwd_ws_bytes,
                   algos[i].numerics);
            char name[96];
            snprintf(name, sizeof name, "conv %d, candidate %.23s", k, algos[i].name);
            const equiv_case t = {name, convs[k], 1e-4, -1};
            check_case_algo(g, c, &t, 300 + 8 * (uint64_t)k + (uint64_t)i, i);
        }
        vdnn_op_desc bad = convs[k];
        vdnn_op_info info;
        bad.algo = n;
        vt_assert_error(g->ops->op_query(g, &bad, &info, &err), err, VDNN_ERR_INVALID_ARG, "algorithm");
        bad.algo = -1;
        vt_assert_error(g->ops->op_query(g, &bad, &info, &err), err, VDNN_ERR_INVALID_ARG, "algorithm");
    }
    /* The point of the candidates: some layer can trade speed for workspace. */
    assert_true(several > 0);

    /* An op with one way to run. */
    vdnn_op_desc relu = one_input(VDNN_LAYER_RELU, shp(2, 4, 8, 8), shp(2, 4, 8, 8));
    vdnn_op_algo one[VDNN_MAX_ALGOS];
    int n1 = 0;
    vt_assert_ok(g->ops->op_algos(g, &relu, one, &n1, &err), err);
    assert_int_equal(n1, 1);
    assert_string_equal(one[0].name, "default");
    relu.algo = 1;
    vdnn_op_info info;
    vt_assert_error(g->ops->op_query(g, &relu, &info, &err), err, VDNN_ERR_INVALID_ARG, "one algorithm");
    vdnn_backend_destroy(g);

    /* Deterministic mode pins one reproducible candidate. */
    setenv("VDNN_DETERMINISTIC", "1", 1);
    g = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    for (int k = 0; k < n_convs; k++) {
        vt_assert_ok(g->ops->op_algos(g, &convs[k], one, &n1, &err), err);
        assert_int_equal(n1, 1);
        assert_true(one[0].numerics >= 0);
    }
    vdnn_backend_destroy(g);
    vdnn_backend_destroy(c);
}

/* ---------------- training ---------------- */

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[4];
    int correct;
    double eval_loss;
    int offloads;
    size_t managed_bytes;
} run_result;

static void train_lenet(vdnn_backend_t *be, vdnn_policy pol, int steps, run_result *r)
{
    vdnn_error err;
    vdnn_graph_t *g = NULL;
    vt_assert_ok(vdnn_graph_load(VDNN_SOURCE_DIR "/models/lenet.cfg", &g, &err), err);
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = 8;
    cfg.in_c = 1, cfg.in_h = 28, cfg.in_w = 28;
    cfg.classes = 10;
    cfg.memory.policy = pol;
    cfg.seed = 7;
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    r->offloads = 0;
    r->managed_bytes = net->managed_bytes;
    assert_true((net->managed != NULL) == (pol == VDNN_POLICY_UM));
    for (int i = 0; i < net->plan_train->n_actions; i++) r->offloads += net->plan_train->actions[i].kind == VDNN_ACT_OFFLOAD;
    float *images = floats(8 * 28 * 28);
    int32_t labels[8];
    for (int s = 0; s < steps; s++) {
        vt_fill_uniform(images, 8 * 28 * 28, 1000 + (uint64_t)s, 0, 1);
        for (int i = 0; i < 8; i++) labels[i] = (int32_t)((i * 3 + s) % 10);
        vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, &r->loss[s], &err), err);
    }
    /* A short evaluation batch: inference ops, padding, fetching the probabilities. */
    vt_assert_ok(vdnn_net_eval_batch(net, images, labels, 5, &r->correct, &r->eval_loss, &err), err);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
    vdnn_graph_free(g);
    free(images);
}

static void same_parameters(const char *what, const vdnn_checkpoint *a, const vdnn_checkpoint *b)
{
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        assert_string_equal(a->tensors[i].name, b->tensors[i].name);
        assert_int_equal(a->tensors[i].count, b->tensors[i].count);
        if (memcmp(a->tensors[i].data, b->tensors[i].data, a->tensors[i].count * sizeof(float)))
            fail_msg("%s: tensor %s differs", what, a->tensors[i].name);
    }
}

static void test_training_policies(void **state)
{
    GPU_OR_SKIP();
    setenv("VDNN_DETERMINISTIC", "1", 1);
    vdnn_backend_t *be = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    const int steps = 3;
    const vdnn_policy pols[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_UM};
    enum { N_POLS = 4 };
    run_result r[N_POLS];
    for (int p = 0; p < N_POLS; p++) {
        memset(&r[p], 0, sizeof r[p]);
        train_lenet(be, pols[p], steps, &r[p]);
        for (int s = 0; s < steps; s++) assert_true(isfinite(r[p].loss[s]));
    }
    assert_int_equal(r[0].offloads, 0);
    assert_true(r[1].offloads > 0);
    assert_true(r[2].offloads > 0);
    /* um migrates what all copies, through managed memory. */
    assert_int_equal(r[3].offloads, r[1].offloads);
    assert_true(r[3].managed_bytes > 0 && r[1].managed_bytes == 0);
    for (int p = 1; p < N_POLS; p++) {
        char what[64];
        snprintf(what, sizeof what, "policy %s vs none", vdnn_policy_name(pols[p]));
        same_parameters(what, &r[p].ck, &r[0].ck);
        assert_memory_equal(r[p].loss, r[0].loss, sizeof(float) * (size_t)steps);
        assert_int_equal(r[p].correct, r[0].correct);
        assert_true(r[p].eval_loss == r[0].eval_loss);
    }
    /* Run to run, too. */
    run_result again;
    memset(&again, 0, sizeof again);
    train_lenet(be, VDNN_POLICY_ALL, steps, &again);
    same_parameters("second run", &again.ck, &r[0].ck);

    /* The CPU backend trains the same net to the same losses, up to FP32 rounding. */
    vdnn_backend_t *c = cpu();
    run_result rc;
    memset(&rc, 0, sizeof rc);
    train_lenet(c, VDNN_POLICY_NONE, steps, &rc);
    for (int s = 0; s < steps; s++) {
        double tol = s == 0 ? 1e-4 : 1e-2;
        if (!(fabs((double)r[0].loss[s] - (double)rc.loss[s]) <= tol * fmax(1.0, fabs((double)rc.loss[s]))))
            fail_msg("step %d: cuda loss %.7f vs cpu %.7f", s, (double)r[0].loss[s], (double)rc.loss[s]);
    }
    assert_true(fabs(r[0].eval_loss - rc.eval_loss) <= 1e-2 * fmax(1.0, rc.eval_loss));

    for (int p = 0; p < N_POLS; p++) vdnn_checkpoint_release(&r[p].ck);
    vdnn_checkpoint_release(&again.ck);
    vdnn_checkpoint_release(&rc.ck);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
}

/* A managed pool larger than the free device memory is refused before anything is allocated. The net is a chain
 * of 3x3 convolutions on 16x256x256 maps at batch 256: each map is 1 GiB and swapped, so the pool grows 1 GiB
 * per layer, and there are 8 layers more than the device has free GiB. Never allocated: on a shared GPU that
 * much Unified Memory could hang the device. */
static void test_um_oversubscription_refused(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t free0 = be->ops->dev_free_bytes(be);
    assert_true(free0 > 0 && free0 < SIZE_MAX);
    const int layers = (int)(free0 >> 30) + 8;
    size_t cap = 256 + (size_t)layers * 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "[net]\nname=um_big\ninput=16x256x256\nclasses=10\n");
    for (int l = 0; l < layers; l++)
        len += (size_t)snprintf(text + len, cap - len, "[conv%d]\ntype=conv\nfilters=16\nsize=3\npad=1\nbias=0\n", l);
    len += (size_t)snprintf(text + len, cap - len, "[gap]\ntype=gap\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n");
    assert_true(len < cap);
    vdnn_graph_t *g = NULL;
    vt_assert_ok(vdnn_graph_parse(text, "um_big.cfg", &g, &err), err);
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = 256;
    cfg.in_c = 16, cfg.in_h = 256, cfg.in_w = 256;
    cfg.classes = 10;
    cfg.memory.policy = VDNN_POLICY_UM;
    vdnn_net_t *net = (vdnn_net_t *)&net;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "memory.allow_oversubscribe");
    assert_null(net);
    printf("%d layers, free %zu bytes: %s\n", layers, free0, err.msg);
    /* Nothing was allocated (some slack for what cuDNN's heuristics may load). */
    const size_t free1 = be->ops->dev_free_bytes(be);
    if (free1 + ((size_t)256 << 20) < free0) fail_msg("free device memory went from %zu to %zu bytes", free0, free1);
    vdnn_graph_free(g);
    free(text);
    vdnn_backend_destroy(be);
}

#endif /* VDNN_HAVE_CUDA */

int main(void)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_status st = vdnn_backend_cuda_create(0, 0, &be, &err);
    if (st == VDNN_ERR_NO_DEVICE) {
        snprintf(skip_reason, sizeof skip_reason, "%s", err.msg);
        printf("SKIP: %s\n", skip_reason);
    } else if (st == VDNN_OK) {
        vdnn_backend_destroy(be);
    } /* any other failure is left for the tests to report */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_or_reason),
#ifdef VDNN_HAVE_CUDA
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_memory_and_queues),
        cmocka_unit_test(test_elementwise_vs_cpu),
        cmocka_unit_test(test_ops_vs_cpu),
        cmocka_unit_test(test_dropout_mask),
        cmocka_unit_test(test_op_errors),
        cmocka_unit_test(test_conv_algorithms),
        cmocka_unit_test(test_conv_candidates_vs_cpu),
        cmocka_unit_test(test_training_policies),
        cmocka_unit_test(test_um_oversubscription_refused),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
