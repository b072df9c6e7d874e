/* RELU on the CPU: oneDNN eltwise ReLU forward (fp32 or bf16 maps), which also keeps one bit per element (output > 0) for a hand-written backward, so backward needs neither x nor y. */
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Why a bit mask: backward only needs to know where the output was positive. Keeping that as 1 bit per
 * element instead of the output itself (32 bits) lets the plan drop the output after forward: it is
 * neither swapped nor recomputed for the backward pass. dx is dy where the bit is set and +0 elsewhere,
 * exactly what oneDNN's backward computes from y. */
typedef struct relu_state {
    cpu_dnnl_step fwd;
} relu_state;

static size_t mask_words(const vdnn_op_desc *d) { return (vdnn_shape_count(d->out) + 63) / 64; }

static vdnn_status relu_build(cpu_backend *be, const vdnn_op_desc *d, bool make, relu_state *s, vdnn_error *err)
{
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n, out.c,
                         out.h, out.w, in.n, in.c, in.h, in.w);
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    vdnn_status st = vdnn_cpu_dnnl_md_of(&md, 4, dims, d->dtype, dnnl_nchw, "relu: data descriptor", err);
    if (st) return st;
    dnnl_eltwise_desc_t ed;
    st = vdnn_cpu_dnnl_check(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_training, dnnl_eltwise_relu, &md, 0.f, 0.f),
                             "relu: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ed, NULL, make, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, 2, &s->fwd,
                                     "relu forward", err);
    return st;
}

static void relu_free(relu_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
}

static vdnn_status relu_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    relu_state s = {0};
    vdnn_status st = relu_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .aux_bytes = mask_words(d) * sizeof(uint64_t),
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .inplace_ok = true,
            .bwd_inplace_ok = true, /* element-wise */
        };
    }
    relu_free(&s);
    return st;
}

static vdnn_status relu_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    relu_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "relu: out of memory");
    vdnn_status st = relu_build(be, &op->d, true, s, err);
    if (st) {
        relu_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void relu_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    relu_free(op->state);
    free(op->state);
    op->state = NULL;
}

/* Mask word w of y, bit i for y[base + i] > 0. bf16 y > 0: sign clear, not zero, not NaN, i.e. bits 0x0001 ...
 * 0x7f80, infinity included. A whole word at a time where the CPU has AVX-512 (every one that runs bf16), the same
 * bits as the portable loops below: one compare a lane, NaN false either way. */
CPU_BF16_TARGET static uint64_t mask_word_bf16(const uint16_t *y, size_t base, size_t end)
{
    if (end - base == 64) {
        const __m512i one = _mm512_set1_epi16(1), lim = _mm512_set1_epi16(0x7f80);
        const __mmask32 lo = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(_mm512_loadu_si512(y + base), one), lim);
        const __mmask32 hi = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(_mm512_loadu_si512(y + base + 32), one), lim);
        return (uint64_t)lo | (uint64_t)hi << 32;
    }
    uint64_t bits = 0;
    for (size_t i = base; i < end; i++) bits |= (uint64_t)((uint16_t)(y[i] - 1u) < 0x7f80u) << (i - base);
    return bits;
}

CPU_BF16_TARGET static uint64_t mask_word_f32_avx512(const float *y, size_t base)
{
    uint64_t bits = 0;
    for (int q = 0; q < 4; q++)
        bits |= (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(y + base + 16 * q), _mm512_setzero_ps(), _CMP_GT_OQ)
                << (16 * q);
    return bits;
}

/* dx from dy: the values where the bit is set (their bits), +0 elsewhere; dx may be dy. Masked loads a word at a
 * time, the last partial word value by value. */
CPU_BF16_TARGET static void relu_bwd_bf16(const uint64_t *mask, const uint16_t *dy, uint16_t *dx, long n)
{
    const long words = n / 64;
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long w = 0; w < words; w++) {
        const uint64_t m = mask[w];
        const long i = w * 64;
        const __m512i a = _mm512_maskz_loadu_epi16((__mmask32)m, dy + i);
        const __m512i b = _mm512_maskz_loadu_epi16((__mmask32)(m >> 32), dy + i + 32);
        _mm512_storeu_si512(dx + i, a);
        _mm512_storeu_si512(dx + i + 32, b);
    }
    for (long i = words * 64; i < n; i++) dx[i] = (mask[i >> 6] >> (i & 63)) & 1 ? dy[i] : 0;
}

CPU_BF16_TARGET static void relu_bwd_f32_avx512(const uint64_t *mask, const float *dy, float *dx, long n)
{
    const long words = n / 64;
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long w = 0; w < words; w++) {
        const uint64_t m = mask[w];
        for (int q = 0; q < 4; q++) {
            const long i = w * 64 + 16 * q;
            _mm512_storeu_ps(dx + i, _mm512_maskz_loadu_ps((__mmask16)(m >> (16 * q)), dy + i));
        }
    }
    for (long i = words * 64; i < n; i++) dx[i] = (mask[i >> 6] >> (i & 63)) & 1 ? dy[i] : 0.0f;
}

static vdnn_status relu_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y};
    vdnn_status st = vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "relu forward", err);
    if (st || !a->aux) return st; /* evaluation keeps no mask */
    const float *y = a->y;
    const uint16_t *yh = (const uint16_t *)a->y;
    const bool half = vdnn_cpu_is_bf16(&op->d), avx512 = be->bf16;
    uint64_t *mask = (uint64_t *)a->aux;
    const size_t n = vdnn_shape_count(op->d.out);
    const long words = (long)mask_words(&op->d);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long w = 0; w < words; w++) {
        uint64_t bits = 0;
        const size_t base = (size_t)w * 64, end = base + 64 < n ? base + 64 : n;
        if (half)
            bits = mask_word_bf16(yh, base, end);
        else if (avx512 && end - base == 64)
            bits = mask_word_f32_avx512(y, base);
        else
            for (size_t i = base; i < end; i++) bits |= (uint64_t)(y[i] > 0.0f) << (i - base);
        mask[w] = bits;
    }
    return VDNN_OK;
}

static vdnn_status relu_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    if (!a->aux || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "relu backward: NULL %s", a->aux ? "dy" : "mask (aux)");
    const uint64_t *mask = (const uint64_t *)a->aux;
    const long n = (long)vdnn_shape_count(op->d.out);
    if (vdnn_cpu_is_bf16(&op->d)) {
        relu_bwd_bf16(mask, (const uint16_t *)a->dy, (uint16_t *)a->dx[0], n);
        return VDNN_OK;
    }
    const float *dy = a->dy;
    float *dx = a->dx[0];
    /* be->bf16: AVX-512 BF16 found (and not switched off), so AVX-512F and BW are there. */
    if (be->bf16) {
        relu_bwd_f32_avx512(mask, dy, dx, n);
        return VDNN_OK;
    }
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) dx[i] = (mask[i >> 6] >> (i & 63)) & 1 ? dy[i] : 0.0f;
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_relu = {
    .query = relu_query,
    .create = relu_create,
    .destroy = relu_destroy,
    .forward = relu_forward,
    .backward = relu_backward,
};
