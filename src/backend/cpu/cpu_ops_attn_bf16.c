/* Causal attention with bf16 maps on any CPU: the fp32 ops' arithmetic (cpu_ops_seq.c: oneDNN GEMMs, the same
 * softmax and its gradient) a block of query rows at a time, the heads shared among the threads (each thread runs
 * whole heads in a part of the workspace of its own, so a head's numbers do not depend on the thread count). Unlike the other sequence ops (cpu_ops_widen.c), these
 * never widen a head's whole T x T probabilities: a block of rows of them (and of their gradient) is widened, used
 * and rounded, while the head's queries, keys or values (T x D each) are held in fp32. So the workspace grows with
 * T, not T^2, and at long context the bf16 probabilities, half the fp32 ones' bytes, are what a plan holds. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Rows of a head's probabilities widened at a time: as many as fit this many bytes of floats. */
#define ROW_BLOCK_BYTES ((size_t)4 << 20)

static int block_rows(const cpu_backend *be, int t)
{
    const size_t cap = be->opt.widen_group_bytes ? be->opt.widen_group_bytes : ROW_BLOCK_BYTES;
    const size_t r = cap / ((size_t)t * sizeof(float));
    return r < 1 ? 1 : r > (size_t)t ? t : (int)r;
}

/* rows x cols bf16 values, each row ld values after the last, into (or from) rows of cols contiguous floats. */
static void widen_rows(float *dst, const uint16_t *src, int rows, int cols, size_t ld)
{
#pragma omp parallel for if ((long)rows * cols > CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) vdnn_cpu_bf16_widen_run(dst + (size_t)r * (size_t)cols, src + (size_t)r * ld, (size_t)cols);
}

static void narrow_rows(uint16_t *dst, size_t ld, const float *src, int rows, int cols)
{
#pragma omp parallel for if ((long)rows * cols > CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) vdnn_cpu_bf16_round_run(dst + (size_t)r * ld, src + (size_t)r * (size_t)cols, (size_t)cols);
}

/* Workspace regions in floats, taken in order after aligning it. */
typedef struct ws_cut {
    char *base;
    size_t used;
} ws_cut;

static float *take(ws_cut *c, size_t floats)
{
    return (float *)(c->base + vdnn_cpu_ws_take(&c->used, floats * sizeof(float)));
}

/* A thread takes whole heads where its part of the workspace is at most this large (contexts up to about 512);
 * past it the heads go one at a time, every thread in each head's GEMMs, which are then large enough to share, and
 * the workspace stays one head's at long context. */
#define HEAD_PART_MAX_BYTES ((size_t)2 << 20)

/* Below, with the ops. */
static void probs_parts(const cpu_backend *be, const vdnn_attn_dims *ad, size_t fwd[3], size_t bwd[6]);
static size_t part_bytes(const size_t *floats, int n);

/* Threads the heads are shared among: the backend's, at most one a head; one where a head's part is large. */
static int slots(const cpu_backend *be, const vdnn_attn_dims *ad)
{
    const int heads = ad->b * ad->h, threads = be->base.threads > 0 ? be->base.threads : 1;
    size_t fwd[3], bwd[6];
    probs_parts(be, ad, fwd, bwd);
    if (part_bytes(bwd, 6) > HEAD_PART_MAX_BYTES) return 1;
    return threads < heads ? threads : heads;
}

/* One thread's part of the workspace: the regions of floats[0..n), 64-byte aligned. */
static size_t part_bytes(const size_t *floats, int n)
{
    size_t used = 0;
    for (int i = 0; i < n; i++) (void)vdnn_cpu_ws_take(&used, floats[i] * sizeof(float));
    return used;
}

static size_t bytes_of(const cpu_backend *be, const vdnn_attn_dims *ad, const size_t *floats, int n)
{
    return (size_t)slots(be, ad) * part_bytes(floats, n) + CPU_WS_SLACK;
}

/* The calling thread's part of an aligned workspace. */
static ws_cut my_part(char *ws, size_t part) { return (ws_cut){ws + (size_t)omp_get_thread_num() * part, 0}; }

/* ---- probabilities: P = causal softmax(Q K^T / sqrt(D)) ---- */

/* A thread's regions, in floats: forward Q, K, a block of scores; backward Q, K, dQ, dK, a block of P and of dS. */
static void probs_parts(const cpu_backend *be, const vdnn_attn_dims *ad, size_t fwd[3], size_t bwd[6])
{
    const size_t td = (size_t)ad->t * (size_t)ad->dh, blk = (size_t)block_rows(be, ad->t) * (size_t)ad->t;
    fwd[0] = fwd[1] = td, fwd[2] = blk;
    bwd[0] = bwd[1] = bwd[2] = bwd[3] = td, bwd[4] = bwd[5] = blk;
}

static vdnn_status probs_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_attn_probs_dims(d, &ad, err);
    if (st) return st;
    size_t fwd[3], bwd[6];
    probs_parts(be, &ad, fwd, bwd);
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = true, .fwd_ws_bytes = bytes_of(be, &ad, fwd, 3),
                           .bwd_ws_bytes = bytes_of(be, &ad, bwd, 6)};
    return VDNN_OK;
}

/* Head h of sample b: where its queries start in qkv (keys F further, values 2F). */
static size_t head_at(const vdnn_attn_dims *ad, int b, int h)
{
    return (size_t)b * (size_t)ad->t * 3 * (size_t)ad->f + (size_t)(ad->h0 + h) * (size_t)ad->dh;
}

static vdnn_status probs_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    if (!st) st = vdnn_cpu_attn_probs_dims(d, &ad, err);
    if (st) return st;
    const int t = ad.t, dh = ad.dh, rb = block_rows(be, t);
    const size_t ld = 3 * (size_t)ad.f;
    const float scale = 1.0f / sqrtf((float)dh);
    size_t fwd[3], bwd[6];
    probs_parts(be, &ad, fwd, bwd);
    char *ws = vdnn_cpu_ws_align(a->ws);
    const size_t part = part_bytes(fwd, 3);
    const uint16_t *qkv = (const uint16_t *)a->x[0];
#pragma omp parallel for schedule(static) num_threads(slots(be, &ad))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        ws_cut c = my_part(ws, part);
        float *q = take(&c, fwd[0]), *k = take(&c, fwd[1]), *s = take(&c, fwd[2]);
        widen_rows(q, qkv + head_at(&ad, b, h), t, dh, ld);
        widen_rows(k, qkv + head_at(&ad, b, h) + ad.f, t, dh, ld);
        uint16_t *p = (uint16_t *)a->y + ((size_t)b * (size_t)ad.h + (size_t)h) * (size_t)t * (size_t)t;
        for (int r0 = 0; r0 < t; r0 += rb) {
            const int rows = t - r0 < rb ? t - r0 : rb, cols = r0 + rows; /* later keys are masked */
            vdnn_cpu_sgemm(false, true, rows, cols, dh, scale, q + (size_t)r0 * dh, dh,
                        k, dh, 0.0f, s, t);
#pragma omp parallel for if ((long)rows * cols > CPU_PAR_MIN)
            for (int i = 0; i < rows; i++) vdnn_cpu_causal_softmax_row(s + (size_t)i * (size_t)t, r0 + i + 1, t);
            (void)vdnn_cpu_convert(&be->base, p + (size_t)r0 * (size_t)t, VDNN_DTYPE_BF16, s, VDNN_DTYPE_F32,
                                   (size_t)rows * (size_t)t, NULL);
        }
    }
    return VDNN_OK;
}

static vdnn_status probs_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0]) return VDNN_OK;
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    if (!st) st = vdnn_cpu_attn_probs_dims(d, &ad, err);
    if (st) return st;
    const int t = ad.t, dh = ad.dh, rb = block_rows(be, t);
    const size_t ld = 3 * (size_t)ad.f, tt = (size_t)t * (size_t)t;
    const float scale = 1.0f / sqrtf((float)dh);
    size_t fwd[3], bwd[6];
    probs_parts(be, &ad, fwd, bwd);
    char *ws = vdnn_cpu_ws_align(a->ws);
    const size_t part = part_bytes(bwd, 6);
    const uint16_t *qkv = (const uint16_t *)a->x[0];
    uint16_t *dqkv = (uint16_t *)a->dx[0];
    /* Values get no gradient from the probabilities (attn_mix gives theirs), nor do other groups' heads. */
    vdnn_cpu_attn_zero_unowned(dqkv, &ad, 2 * (size_t)ad.f, (size_t)ad.f, sizeof(uint16_t));
#pragma omp parallel for schedule(static) num_threads(slots(be, &ad))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        ws_cut c = my_part(ws, part);
        float *q = take(&c, bwd[0]), *k = take(&c, bwd[1]), *dq = take(&c, bwd[2]), *dk = take(&c, bwd[3]);
        float *p = take(&c, bwd[4]), *ds = take(&c, bwd[5]);
        const size_t at = head_at(&ad, b, h), pat = ((size_t)b * (size_t)ad.h + (size_t)h) * tt;
        widen_rows(q, qkv + at, t, dh, ld);
        widen_rows(k, qkv + at + ad.f, t, dh, ld);
        memset(dk, 0, (size_t)t * (size_t)dh * sizeof(float));
        for (int r0 = 0; r0 < t; r0 += rb) {
            const int rows = t - r0 < rb ? t - r0 : rb, cols = r0 + rows;
            const size_t n = (size_t)rows * (size_t)t;
            (void)vdnn_cpu_convert(&be->base, p, VDNN_DTYPE_F32, (const uint16_t *)a->y + pat + (size_t)r0 * t,
                                   VDNN_DTYPE_BF16, n, NULL);
            (void)vdnn_cpu_convert(&be->base, ds, VDNN_DTYPE_F32, (const uint16_t *)a->dy + pat + (size_t)r0 * t,
                                   VDNN_DTYPE_BF16, n, NULL);
            /* dS in place of dP. */
            for (int i = 0; i < rows; i++) {
                float *sr = ds + (size_t)i * (size_t)t;
                vdnn_cpu_causal_softmax_grad_row(p + (size_t)i * (size_t)t, sr, sr, r0 + i + 1, t);
            }
            vdnn_cpu_sgemm(false, false, rows, dh, cols, scale, ds, t, k, dh, 0.0f,
                        dq + (size_t)r0 * dh, dh);
            vdnn_cpu_sgemm(true, false, cols, dh, rows, scale, ds, t, q + (size_t)r0 * dh,
                        dh, 1.0f, dk, dh);
        }
        narrow_rows(dqkv + at, ld, dq, t, dh);
        narrow_rows(dqkv + at + ad.f, ld, dk, t, dh);
    }
    return VDNN_OK;
}

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

const cpu_op_impl vdnn_cpu_op_attn_probs_bf16 = {probs_query, no_create, no_destroy, probs_forward, probs_backward,
                                                 NULL};

/* ---- mix: O = P V, a head's D columns of the output ---- */

/* A thread's regions, in floats: forward V, a block of P and of O; backward V, dV, a block of dO, of P and of dP. */
static void mix_parts(const cpu_backend *be, const vdnn_attn_dims *ad, size_t fwd[3], size_t bwd[5])
{
    const size_t td = (size_t)ad->t * (size_t)ad->dh, rb = (size_t)block_rows(be, ad->t);
    fwd[0] = td, fwd[1] = rb * (size_t)ad->t, fwd[2] = rb * (size_t)ad->dh;
    bwd[0] = bwd[1] = td, bwd[2] = rb * (size_t)ad->dh, bwd[3] = bwd[4] = rb * (size_t)ad->t;
}

static vdnn_status mix_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_attn_mix_dims(d, &ad, err);
    if (st) return st;
    size_t fwd[3], bwd[5];
    mix_parts(be, &ad, fwd, bwd);
    *info = (vdnn_op_info){.bwd_needs_x = true, .fwd_ws_bytes = bytes_of(be, &ad, fwd, 3),
                           .bwd_ws_bytes = bytes_of(be, &ad, bwd, 5)};
    return VDNN_OK;
}

static vdnn_status mix_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x[0]", err);
    if (!st) st = vdnn_cpu_need(a->x[1], d, "x[1]", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    if (!st) st = vdnn_cpu_attn_mix_dims(d, &ad, err);
    if (st) return st;
    const int t = ad.t, dh = ad.dh, rb = block_rows(be, t);
    const size_t ld = 3 * (size_t)ad.f;
    size_t fwd[3], bwd[5];
    mix_parts(be, &ad, fwd, bwd);
    char *ws = vdnn_cpu_ws_align(a->ws);
    const size_t part = part_bytes(fwd, 3);
#pragma omp parallel for schedule(static) num_threads(slots(be, &ad))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        ws_cut c = my_part(ws, part);
        float *v = take(&c, fwd[0]), *p = take(&c, fwd[1]), *o = take(&c, fwd[2]);
        widen_rows(v, (const uint16_t *)a->x[1] + head_at(&ad, b, h) + 2 * (size_t)ad.f, t, dh, ld);
        const uint16_t *pb = (const uint16_t *)a->x[0] + ((size_t)b * (size_t)ad.h + (size_t)h) * (size_t)t * t;
        uint16_t *y = (uint16_t *)a->y + (size_t)b * (size_t)t * (size_t)ad.w + (size_t)h * (size_t)dh;
        for (int r0 = 0; r0 < t; r0 += rb) {
            /* Every column, as the fp32 op: the mix does not assume its probabilities are causal. */
            const int rows = t - r0 < rb ? t - r0 : rb;
            (void)vdnn_cpu_convert(&be->base, p, VDNN_DTYPE_F32, pb + (size_t)r0 * t, VDNN_DTYPE_BF16,
                                   (size_t)rows * (size_t)t, NULL);
            vdnn_cpu_sgemm(false, false, rows, dh, t, 1.0f, p, t, v, dh, 0.0f, o, dh);
            narrow_rows(y + (size_t)r0 * (size_t)ad.w, (size_t)ad.w, o, rows, dh);
        }
    }
    return VDNN_OK;
}

static vdnn_status mix_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0] && !a->dx[1]) return VDNN_OK;
    vdnn_attn_dims ad;
    vdnn_status st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    if (!st && a->dx[0]) st = vdnn_cpu_need(a->x[1], d, "x[1]", err);
    if (!st && a->dx[1]) st = vdnn_cpu_need(a->x[0], d, "x[0]", err);
    if (!st) st = vdnn_cpu_attn_mix_dims(d, &ad, err);
    if (st) return st;
    const int t = ad.t, dh = ad.dh, rb = block_rows(be, t);
    const size_t ld = 3 * (size_t)ad.f, tt = (size_t)t * (size_t)t;
    size_t fwd[3], bwd[5];
    mix_parts(be, &ad, fwd, bwd);
    char *ws = vdnn_cpu_ws_align(a->ws);
    const size_t part = part_bytes(bwd, 5);
    uint16_t *dqkv = (uint16_t *)a->dx[1];
    /* Queries and keys get no gradient from the mix (attn_probs gives theirs), nor do other groups' values. */
    if (dqkv) vdnn_cpu_attn_zero_unowned(dqkv, &ad, 0, 2 * (size_t)ad.f, sizeof(uint16_t));
#pragma omp parallel for schedule(static) num_threads(slots(be, &ad))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        ws_cut c = my_part(ws, part);
        float *v = take(&c, bwd[0]), *dv = take(&c, bwd[1]), *dout = take(&c, bwd[2]);
        float *p = take(&c, bwd[3]), *dp = take(&c, bwd[4]);
        const size_t vat = head_at(&ad, b, h) + 2 * (size_t)ad.f, pat = ((size_t)b * (size_t)ad.h + (size_t)h) * tt;
        const uint16_t *dy = (const uint16_t *)a->dy + (size_t)b * (size_t)t * (size_t)ad.w + (size_t)h * dh;
        if (a->dx[0]) widen_rows(v, (const uint16_t *)a->x[1] + vat, t, dh, ld);
        if (dqkv) memset(dv, 0, (size_t)t * (size_t)dh * sizeof(float));
        for (int r0 = 0; r0 < t; r0 += rb) {
            const int rows = t - r0 < rb ? t - r0 : rb;
            widen_rows(dout, dy + (size_t)r0 * (size_t)ad.w, rows, dh, (size_t)ad.w);
            if (a->dx[0]) {
                vdnn_cpu_sgemm(false, true, rows, t, dh, 1.0f, dout, dh, v, dh, 0.0f, dp, t);
                (void)vdnn_cpu_convert(&be->base, (uint16_t *)a->dx[0] + pat + (size_t)r0 * t, VDNN_DTYPE_BF16, dp,
                                       VDNN_DTYPE_F32, (size_t)rows * (size_t)t, NULL);
            }
            if (dqkv) {
                (void)vdnn_cpu_convert(&be->base, p, VDNN_DTYPE_F32, (const uint16_t *)a->x[0] + pat + (size_t)r0 * t,
                                       VDNN_DTYPE_BF16, (size_t)rows * (size_t)t, NULL);
                vdnn_cpu_sgemm(true, false, t, dh, rows, 1.0f, p, t, dout, dh, 1.0f, dv, dh);
            }
        }
        if (dqkv) narrow_rows(dqkv + vat, ld, dv, t, dh);
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_attn_mix_bf16 = {mix_query, no_create, no_destroy, mix_forward, mix_backward, NULL};
