/* LRN on the CPU: oneDNN local response normalization across channels forward (PyTorch LocalResponseNorm), hand-written backward; fp32 or bf16 maps. */
#include <math.h>
#include <stdlib.h>

#include <omp.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Spatial positions one thread treats at a time: a short contiguous run per channel vectorises. */
#define LRN_CHUNK 16

/* Why the backward is ours: on nchw oneDNN 2.6 only has its reference LRN backward
 * (an order of magnitude slower than the forward), and its fast forward would keep
 * a workspace twice the size of x alive until backward that the reference never reads.
 * So forward runs oneDNN's inference primitive (no aux) and backward recomputes the
 * window sums from x. */
typedef struct lrn_state {
    cpu_dnnl_step fwd;
} lrn_state;

/* Per-thread backward scratch: the scale d^-beta and dy*x*d^(-beta-1) for one chunk; bf16 adds the chunk's x, dy
 * and dx as floats (the same arithmetic then runs on them). */
static size_t lrn_thread_floats(int c, bool half) { return (half ? 5 : 2) * (size_t)c * LRN_CHUNK; }
static size_t lrn_thread_bytes(int c, bool half) { return lrn_thread_floats(c, half) * sizeof(float); }

static vdnn_status lrn_build(cpu_backend *be, const vdnn_op_desc *d, bool make, lrn_state *s, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n, out.c,
                         out.h, out.w, in.n, in.c, in.h, in.w);
    /* oneDNN centres an even window differently from PyTorch, so only odd sizes mean the same thing. */
    if (p->lrn_size < 1 || p->lrn_size % 2 == 0)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "lrn: size %d (must be odd and positive)", p->lrn_size);
    if (!(p->lrn_k > 0.f) || !(p->lrn_alpha >= 0.f) || !(p->lrn_beta >= 0.f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn: k=%g alpha=%g beta=%g (need k > 0, alpha >= 0, beta >= 0)",
                         (double)p->lrn_k, (double)p->lrn_alpha, (double)p->lrn_beta);
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    vdnn_status st = vdnn_cpu_dnnl_md_of(&md, 4, dims, d->dtype, dnnl_nchw, "lrn: data descriptor", err);
    if (st) return st;
    /* oneDNN's across-channel LRN divides alpha by the window size, as PyTorch does. */
    dnnl_lrn_desc_t ld;
    st = vdnn_cpu_dnnl_check(dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, dnnl_lrn_across_channels, &md,
                                                        p->lrn_size, p->lrn_alpha, p->lrn_beta, p->lrn_k),
                             "lrn: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ld, NULL, make, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, 2, &s->fwd,
                                     "lrn forward", err);
    return st;
}

static vdnn_status lrn_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    lrn_state s = {0};
    vdnn_status st = lrn_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = (size_t)omp_get_max_threads() * lrn_thread_bytes(d->in[0].c, vdnn_cpu_is_bf16(d)),
            .bwd_needs_x = true,
        };
    }
    vdnn_cpu_dnnl_step_fini(&s.fwd);
    return st;
}

static vdnn_status lrn_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    lrn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "lrn: out of memory");
    vdnn_status st = lrn_build(be, &op->d, true, s, err);
    if (st) {
        vdnn_cpu_dnnl_step_fini(&s->fwd);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void lrn_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    lrn_state *s = op->state;
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    free(s);
    op->state = NULL;
}

static vdnn_status lrn_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "lrn forward", err);
}

/* One image, positions [p0, p0+len) of every channel. With d_j = k + alpha/size * sum_{win(j)} x^2:
 * dx_c = dy_c d_c^-beta - 2 alpha beta / size * x_c * sum_{j: c in win(j)} dy_j x_j d_j^(-beta-1). */
static void lrn_bwd_chunk(const vdnn_layer_params *p, int C, size_t hw, const float *x, const float *dy, float *dx,
                          size_t len, float *scale, float *t)
{
    const int h = p->lrn_size / 2; /* odd size: the window is symmetric */
    const float an = p->lrn_alpha / (float)p->lrn_size, k = p->lrn_k, beta = p->lrn_beta;
    const bool b34 = beta == 0.75f; /* AlexNet's beta: d^-0.75 without powf */
    float acc[LRN_CHUNK];
    for (int c = 0; c < C; c++) {
        for (size_t q = 0; q < len; q++) acc[q] = 0.f;
        int lo = c - h < 0 ? 0 : c - h, hi = c + h >= C ? C - 1 : c + h;
        for (int j = lo; j <= hi; j++) {
            const float *xj = x + (size_t)j * hw;
            for (size_t q = 0; q < len; q++) acc[q] += xj[q] * xj[q];
        }
        const float *xc = x + (size_t)c * hw, *dyc = dy + (size_t)c * hw;
        float *sc = scale + (size_t)c * LRN_CHUNK, *tc = t + (size_t)c * LRN_CHUNK;
        for (size_t q = 0; q < len; q++) {
            float d = k + an * acc[q];
            sc[q] = b34 ? 1.f / sqrtf(d * sqrtf(d)) : powf(d, -beta);
            tc[q] = dyc[q] * xc[q] * sc[q] / d;
        }
    }
    const float f = 2.f * an * beta;
    for (int c = 0; c < C; c++) {
        for (size_t q = 0; q < len; q++) acc[q] = 0.f;
        int lo = c - h < 0 ? 0 : c - h, hi = c + h >= C ? C - 1 : c + h;
        for (int j = lo; j <= hi; j++)
            for (size_t q = 0; q < len; q++) acc[q] += t[(size_t)j * LRN_CHUNK + q];
        const float *xc = x + (size_t)c * hw, *dyc = dy + (size_t)c * hw, *sc = scale + (size_t)c * LRN_CHUNK;
        float *dxc = dx + (size_t)c * hw;
        for (size_t q = 0; q < len; q++) dxc[q] = dyc[q] * sc[q] - f * xc[q] * acc[q];
    }
}

/* bf16: chunk [p0, p0+len) of every channel of one image, through float copies packed LRN_CHUNK apart. */
static void lrn_bwd_chunk_bf16(const vdnn_layer_params *p, int C, size_t hw, const uint16_t *x, const uint16_t *dy,
                               uint16_t *dx, size_t len, float *f)
{
    const size_t plane = (size_t)C * LRN_CHUNK;
    float *xf = f + 2 * plane, *dyf = xf + plane, *dxf = dyf + plane;
    for (int c = 0; c < C; c++) {
        vdnn_cpu_bf16_load(xf + (size_t)c * LRN_CHUNK, x + (size_t)c * hw, len);
        vdnn_cpu_bf16_load(dyf + (size_t)c * LRN_CHUNK, dy + (size_t)c * hw, len);
    }
    lrn_bwd_chunk(p, C, LRN_CHUNK, xf, dyf, dxf, len, f, f + plane);
    for (int c = 0; c < C; c++) vdnn_cpu_bf16_store(dx + (size_t)c * hw, dxf + (size_t)c * LRN_CHUNK, len);
}

static vdnn_status lrn_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    if (!a->x[0] || !a->dy || !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn backward: NULL %s",
                         !a->x[0] ? "x" : !a->dy ? "dy" : "ws (scratch)");
    const vdnn_shape s = op->d.in[0];
    const int C = s.c;
    const size_t hw = (size_t)s.h * (size_t)s.w, chunks = (hw + LRN_CHUNK - 1) / LRN_CHUNK;
    const long total = (long)((size_t)s.n * chunks);
    /* The scratch was sized for this many threads when the op was queried. */
    const bool half = vdnn_cpu_is_bf16(&op->d);
    int nt = (int)(op->info.bwd_ws_bytes / lrn_thread_bytes(C, half));
    if (nt < 1) nt = 1;
    const vdnn_layer_params *p = &op->d.p;
#pragma omp parallel num_threads(nt)
    {
        float *scale = a->ws + (size_t)omp_get_thread_num() * lrn_thread_floats(C, half);
        float *t = scale + (size_t)C * LRN_CHUNK;
#pragma omp for schedule(static)
        for (long it = 0; it < total; it++) {
            size_t n = (size_t)it / chunks, p0 = ((size_t)it % chunks) * LRN_CHUNK;
            size_t len = hw - p0 < LRN_CHUNK ? hw - p0 : LRN_CHUNK, off = n * (size_t)C * hw + p0;
            if (half)
                lrn_bwd_chunk_bf16(p, C, hw, (const uint16_t *)a->x[0] + off, (const uint16_t *)a->dy + off,
                                   (uint16_t *)a->dx[0] + off, len, scale);
            else
                lrn_bwd_chunk(p, C, hw, a->x[0] + off, a->dy + off, a->dx[0] + off, len, scale, t);
        }
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_lrn = {
    .query = lrn_query,
    .create = lrn_create,
    .destroy = lrn_destroy,
    .forward = lrn_forward,
    .backward = lrn_backward,
};
