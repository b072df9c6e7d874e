/* LRN on the CPU: oneDNN local response normalization across channels forward (PyTorch LocalResponseNorm), hand-written backward; bf16 maps run a hand-written forward too. */
#include <math.h>
#include <stdlib.h>

#include <immintrin.h>
#include <omp.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Spatial positions one thread treats at a time: a short contiguous run per channel vectorises. */
#define LRN_CHUNK 16

/* Why the backward is ours: on nchw oneDNN 2.6 only has its reference LRN backward
 * (an order of magnitude slower than the forward), and its fast forward would keep
 * a workspace twice the size of x alive until backward that the reference never reads.
 * So forward runs oneDNN's inference primitive (no aux) and backward recomputes the
 * window sums from x. For bf16 on nchw oneDNN has only its reference forward (35 to 100
 * times slower than its fp32 one on AlexNet's layers), so bf16 runs the window sums of
 * the backward forwards as well. bf16 chunks are loaded into floats packed LRN_CHUNK
 * apart and the fp32 arithmetic runs on them. */
typedef struct lrn_state {
    cpu_dnnl_step fwd;             /* fp32 only */
} lrn_state;

/* Per-thread scratch, in floats. Backward: the scale d^-beta and dy*x*d^(-beta-1) for one chunk, and for bf16 the
 * chunk's x, dy and dx as floats. bf16 forward: the chunk's x and y. */
static size_t lrn_bwd_floats(int c, bool half) { return (half ? 5 : 2) * (size_t)c * LRN_CHUNK; }
static size_t lrn_fwd_floats(int c) { return 2 * (size_t)c * LRN_CHUNK; }

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
    if (vdnn_cpu_is_bf16(d)) return VDNN_OK; /* runs no oneDNN primitive */
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
        const bool half = vdnn_cpu_is_bf16(d);
        const size_t threads = (size_t)omp_get_max_threads();
        *info = (vdnn_op_info){
            .fwd_ws_bytes = half ? threads * lrn_fwd_floats(d->in[0].c) * sizeof(float) : s.fwd.scratch_bytes,
            .bwd_ws_bytes = threads * lrn_bwd_floats(d->in[0].c, half) * sizeof(float),
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

/* acc[q] = sum of x_j^2 over the window of channel c, at positions [0, len) (channels `stride` apart). */
static void window_squares(int C, int h, int c, size_t stride, const float *x, size_t len, float *acc)
{
    for (size_t q = 0; q < len; q++) acc[q] = 0.f;
    int lo = c - h < 0 ? 0 : c - h, hi = c + h >= C ? C - 1 : c + h;
    for (int j = lo; j <= hi; j++) {
        const float *xj = x + (size_t)j * stride;
#pragma omp simd
        for (size_t q = 0; q < len; q++) acc[q] += xj[q] * xj[q];
    }
}

/* d^-beta; AlexNet's beta 0.75 without powf. */
static inline float neg_pow(float d, float beta, bool b34) { return b34 ? 1.f / sqrtf(d * sqrtf(d)) : powf(d, -beta); }

/* One image, positions [p0, p0+len) of every channel. With d_j = k + alpha/size * sum_{win(j)} x^2:
 * dx_c = dy_c d_c^-beta - 2 alpha beta / size * x_c * sum_{j: c in win(j)} dy_j x_j d_j^(-beta-1). */
static void lrn_bwd_chunk(const vdnn_layer_params *p, int C, size_t hw, const float *x, const float *dy, float *dx,
                          size_t len, float *scale, float *t)
{
    const int h = p->lrn_size / 2; /* odd size: the window is symmetric */
    const float an = p->lrn_alpha / (float)p->lrn_size, k = p->lrn_k, beta = p->lrn_beta;
    const bool b34 = beta == 0.75f;
    float acc[LRN_CHUNK];
    for (int c = 0; c < C; c++) {
        window_squares(C, h, c, hw, x, len, acc);
        const float *xc = x + (size_t)c * hw, *dyc = dy + (size_t)c * hw;
        float *sc = scale + (size_t)c * LRN_CHUNK, *tc = t + (size_t)c * LRN_CHUNK;
        for (size_t q = 0; q < len; q++) {
            float d = k + an * acc[q];
            sc[q] = neg_pow(d, beta, b34);
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

/* The C rows of a bf16 chunk (rows hw apart, len <= LRN_CHUNK = 16 values: one masked vector each) as floats packed
 * LRN_CHUNK apart, and back, rounded as vdnn_cpu_bf16_store rounds. */
CPU_BF16_TARGET static inline void load_rows(float *f, const uint16_t *h, int C, size_t hw, size_t len)
{
    const __mmask16 m = (__mmask16)((1u << len) - 1u);
    for (int c = 0; c < C; c++) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + (size_t)c * hw));
        _mm512_storeu_ps(f + (size_t)c * LRN_CHUNK, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

CPU_BF16_TARGET static inline void store_rows(uint16_t *h, const float *f, int C, size_t hw, size_t len)
{
    const __mmask16 m = (__mmask16)((1u << len) - 1u);
    for (int c = 0; c < C; c++)
        _mm256_mask_storeu_epi16(h + (size_t)c * hw, m, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(f + (size_t)c * LRN_CHUNK)));
}

/* One chunk, by element offset `off` of its first value, with the thread's scratch f. */
typedef void (*lrn_chunk_fn)(const vdnn_op *op, const vdnn_op_args *a, size_t off, size_t len, float *f);

CPU_BF16_TARGET static void fwd_chunk_bf16(const vdnn_op *op, const vdnn_op_args *a, size_t off, size_t len, float *f)
{
    const vdnn_layer_params *p = &op->d.p;
    const int C = op->d.in[0].c, h = p->lrn_size / 2;
    const size_t hw = (size_t)op->d.in[0].h * (size_t)op->d.in[0].w;
    const float an = p->lrn_alpha / (float)p->lrn_size, k = p->lrn_k, beta = p->lrn_beta;
    float *xf = f, *yf = f + (size_t)C * LRN_CHUNK, acc[LRN_CHUNK];
    load_rows(xf, (const uint16_t *)a->x[0] + off, C, hw, len);
    for (int c = 0; c < C; c++) {
        window_squares(C, h, c, LRN_CHUNK, xf, len, acc);
        const float *xc = xf + (size_t)c * LRN_CHUNK;
        float *yc = yf + (size_t)c * LRN_CHUNK;
        if (beta == 0.75f) {
            /* AlexNet's: one vector of d^-0.75 (sqrtf's errno check keeps plain C scalar); the 14-bit reciprocal
             * square root is far inside bf16's 8 bits. Lanes past len hold zeros and are not stored. */
            const __mmask16 m = (__mmask16)((1u << len) - 1u);
            const __m512 d = _mm512_add_ps(_mm512_set1_ps(k), _mm512_mul_ps(_mm512_set1_ps(an), _mm512_maskz_loadu_ps(m, acc)));
            const __m512 s = _mm512_rsqrt14_ps(_mm512_mul_ps(d, _mm512_sqrt_ps(d)));
            _mm512_mask_storeu_ps(yc, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xc), s));
        } else {
            for (size_t q = 0; q < len; q++) yc[q] = xc[q] * neg_pow(k + an * acc[q], beta, false);
        }
    }
    store_rows((uint16_t *)a->y + off, yf, C, hw, len);
}

static void bwd_chunk(const vdnn_op *op, const vdnn_op_args *a, size_t off, size_t len, float *f)
{
    const int C = op->d.in[0].c;
    const size_t hw = (size_t)op->d.in[0].h * (size_t)op->d.in[0].w, plane = (size_t)C * LRN_CHUNK;
    lrn_bwd_chunk(&op->d.p, C, hw, a->x[0] + off, a->dy + off, a->dx[0] + off, len, f, f + plane);
}

CPU_BF16_TARGET static void bwd_chunk_bf16(const vdnn_op *op, const vdnn_op_args *a, size_t off, size_t len, float *f)
{
    const int C = op->d.in[0].c;
    const size_t hw = (size_t)op->d.in[0].h * (size_t)op->d.in[0].w, plane = (size_t)C * LRN_CHUNK;
    float *xf = f + 2 * plane, *dyf = xf + plane, *dxf = dyf + plane;
    load_rows(xf, (const uint16_t *)a->x[0] + off, C, hw, len);
    load_rows(dyf, (const uint16_t *)a->dy + off, C, hw, len);
    lrn_bwd_chunk(&op->d.p, C, LRN_CHUNK, xf, dyf, dxf, len, f, f + plane);
    store_rows((uint16_t *)a->dx[0] + off, dxf, C, hw, len);
}

/* fn over every chunk of every image, in parallel; each thread's scratch is `floats` floats of ws, sized for as many
 * threads as there were when the op was queried (ws_bytes). */
static void for_chunks(const vdnn_op *op, const vdnn_op_args *a, size_t ws_bytes, size_t floats, lrn_chunk_fn fn)
{
    const vdnn_shape s = op->d.in[0];
    const size_t hw = (size_t)s.h * (size_t)s.w, chunks = (hw + LRN_CHUNK - 1) / LRN_CHUNK;
    const long total = (long)((size_t)s.n * chunks);
    int nt = (int)(ws_bytes / (floats * sizeof(float)));
    if (nt < 1) nt = 1;
#pragma omp parallel num_threads(nt)
    {
        float *f = a->ws + (size_t)omp_get_thread_num() * floats;
#pragma omp for schedule(static)
        for (long it = 0; it < total; it++) {
            size_t n = (size_t)it / chunks, p0 = ((size_t)it % chunks) * LRN_CHUNK;
            size_t len = hw - p0 < LRN_CHUNK ? hw - p0 : LRN_CHUNK;
            fn(op, a, n * (size_t)s.c * hw + p0, len, f);
        }
    }
}

static vdnn_status lrn_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    if (vdnn_cpu_is_bf16(&op->d)) {
        if (!a->x[0] || !a->y || !a->ws)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn forward: NULL %s",
                             !a->x[0] ? "x" : !a->y ? "y" : "ws (scratch)");
        for_chunks(op, a, op->info.fwd_ws_bytes, lrn_fwd_floats(op->d.in[0].c), fwd_chunk_bf16);
        return VDNN_OK;
    }
    void *ptrs[] = {(void *)a->x[0], a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "lrn forward", err);
}

static vdnn_status lrn_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    if (!a->x[0] || !a->dy || !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn backward: NULL %s",
                         !a->x[0] ? "x" : !a->dy ? "dy" : "ws (scratch)");
    const bool half = vdnn_cpu_is_bf16(&op->d);
    for_chunks(op, a, op->info.bwd_ws_bytes, lrn_bwd_floats(op->d.in[0].c, half), half ? bwd_chunk_bf16 : bwd_chunk);
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_lrn = {
    .query = lrn_query,
    .create = lrn_create,
    .destroy = lrn_destroy,
    .forward = lrn_forward,
    .backward = lrn_backward,
};
