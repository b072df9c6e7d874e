/* Fused causal attention on the CPU (fp32; bf16 maps reach it widened, cpu_ops_widen.c): softmax(Q K^T / sqrt(D)) V
 * from qkv {B,1,T,3F} to {B,1,T,F}, with no T x T tensor. Each head goes a block of query rows at a time: the block's
 * scores against the keys up to its last row (the causal part alone), their softmax, then P V. Backward recomputes
 * a block's probabilities the same way, bit for bit, and from dP = dO V^T forms dS = P (dP - rowsum(P dP)) within the
 * block (a row's keys all lie in it), then dQ for the block's rows and dK, dV summed over the blocks. It keeps
 * nothing between the passes (no aux) and reads only qkv and dO: what it saves a plan is the probabilities, B x H x T
 * x T, for two more GEMMs in backward. The heads are shared among the threads, each head's GEMMs on one thread in a
 * workspace part of its own (the same numbers at any thread count). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/seq_shapes.h"

/* A block's scores (and in backward its dP) at most this many floats: 256 KiB, cache-sized, at any context. */
#define FUSED_BLOCK_FLOATS ((size_t)1 << 16)

typedef vdnn_fused_dims fused_dims;

static vdnn_status fused_dims_of(const vdnn_op_desc *d, fused_dims *m, vdnn_error *err)
{
    if (d->dtype != VDNN_DTYPE_F32)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "attention: %s maps reach the fp32 op only widened",
                         vdnn_dtype_name(d->dtype));
    return vdnn_fused_dims_of(d, FUSED_BLOCK_FLOATS, false, m, err);
}

static int fused_threads(const cpu_backend *be, const fused_dims *m)
{
    const int heads = m->b * m->h, threads = be->base.threads > 0 ? be->base.threads : 1;
    return threads < heads ? threads : heads;
}

/* Floats of one thread's part of the workspace: a block's scores, and in backward its dP beside them. */
static size_t part_floats(const fused_dims *m, bool backward)
{
    return (backward ? 2 : 1) * (size_t)m->rows * (size_t)m->t;
}

static vdnn_status fused_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    fused_dims m = {0};
    vdnn_status st = fused_dims_of(d, &m, err);
    if (st) return st;
    const size_t threads = (size_t)fused_threads(be, &m);
    *info = (vdnn_op_info){.bwd_needs_x = true,
                           .fwd_ws_bytes = threads * part_floats(&m, false) * sizeof(float),
                           .bwd_ws_bytes = threads * part_floats(&m, true) * sizeof(float)};
    return VDNN_OK;
}

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

/* The probabilities of query rows r0 .. r0+rows-1 of head (b, h) against keys 0 .. r0+rows-1, in p (rows x that
 * many keys, zeros past each row's own), as forward and backward both compute them. Returns the keys. */
static int block_probs(const fused_dims *m, const float *qkv, int b, int h, int r0, int rows, float scale, float *p)
{
    const int ld = 3 * m->f, keys = r0 + rows;
    const float *q = qkv + (size_t)b * (size_t)m->t * (size_t)ld + (size_t)h * (size_t)m->dh;
    vdnn_cpu_sgemm(false, true, rows, keys, m->dh, scale, q + (size_t)r0 * (size_t)ld, ld, q + m->f, ld, 0.0f, p, keys);
    for (int i = 0; i < rows; i++) vdnn_cpu_causal_softmax_row(p + (size_t)i * (size_t)keys, r0 + i + 1, keys);
    return keys;
}

/* A pass's dimensions and buffers: qkv, the workspace, and y (forward) or dy (backward). */
static vdnn_status fused_begin(const vdnn_op *op, const vdnn_op_args *a, bool backward, fused_dims *m, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = fused_dims_of(d, m, err);
    if (!st) st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = backward ? vdnn_cpu_need(a->dy, d, "dy", err) : vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    return st;
}

static vdnn_status fused_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fused_dims m = {0};
    vdnn_status st = fused_begin(op, a, false, &m, err);
    if (st) return st;
    const int ld = 3 * m.f;
    const float scale = 1.0f / sqrtf((float)m.dh);
    const size_t part = part_floats(&m, false);
#pragma omp parallel for schedule(static) num_threads(fused_threads(be, &m))
    for (int bh = 0; bh < m.b * m.h; bh++) {
        const int b = bh / m.h, h = bh % m.h;
        float *p = a->ws + (size_t)omp_get_thread_num() * part;
        const float *v = a->x[0] + (size_t)b * (size_t)m.t * (size_t)ld + 2 * (size_t)m.f + (size_t)h * (size_t)m.dh;
        float *o = a->y + (size_t)b * (size_t)m.t * (size_t)m.f + (size_t)h * (size_t)m.dh;
        for (int r0 = 0; r0 < m.t; r0 += m.rows) {
            const int rows = m.t - r0 < m.rows ? m.t - r0 : m.rows;
            const int keys = block_probs(&m, a->x[0], b, h, r0, rows, scale, p);
            vdnn_cpu_sgemm(false, false, rows, m.dh, keys, 1.0f, p, keys, v, ld, 0.0f, o + (size_t)r0 * (size_t)m.f,
                           m.f);
        }
    }
    return VDNN_OK;
}

static vdnn_status fused_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    fused_dims m = {0};
    vdnn_status st = fused_begin(op, a, true, &m, err);
    if (st) return st;
    const int ld = 3 * m.f;
    const float scale = 1.0f / sqrtf((float)m.dh);
    const size_t part = part_floats(&m, true);
    /* dK and dV are sums over the blocks. */
    memset(a->dx[0], 0, vdnn_shape_count(op->d.in[0]) * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(fused_threads(be, &m))
    for (int bh = 0; bh < m.b * m.h; bh++) {
        const int b = bh / m.h, h = bh % m.h;
        float *p = a->ws + (size_t)omp_get_thread_num() * part, *ds = p + part / 2;
        const size_t at = (size_t)b * (size_t)m.t * (size_t)ld + (size_t)h * (size_t)m.dh;
        const float *q = a->x[0] + at, *k = q + m.f, *v = q + 2 * (size_t)m.f;
        float *dq = a->dx[0] + at, *dk = dq + m.f, *dv = dq + 2 * (size_t)m.f;
        const float *dout = a->dy + (size_t)b * (size_t)m.t * (size_t)m.f + (size_t)h * (size_t)m.dh;
        for (int r0 = 0; r0 < m.t; r0 += m.rows) {
            const int rows = m.t - r0 < m.rows ? m.t - r0 : m.rows;
            const int keys = block_probs(&m, a->x[0], b, h, r0, rows, scale, p);
            const float *dor = dout + (size_t)r0 * (size_t)m.f;
            /* dV += P^T dO; dP = dO V^T, then dS in its place. */
            vdnn_cpu_sgemm(true, false, keys, m.dh, rows, 1.0f, p, keys, dor, m.f, 1.0f, dv, ld);
            vdnn_cpu_sgemm(false, true, rows, keys, m.dh, 1.0f, dor, m.f, v, ld, 0.0f, ds, keys);
            for (int i = 0; i < rows; i++) {
                const size_t r = (size_t)i * (size_t)keys;
                vdnn_cpu_causal_softmax_grad_row(p + r, ds + r, ds + r, r0 + i + 1, keys);
            }
            /* S = scale Q K^T: dQ = scale dS K for the block's rows, dK += scale dS^T Q. */
            vdnn_cpu_sgemm(false, false, rows, m.dh, keys, scale, ds, keys, k, ld, 0.0f, dq + (size_t)r0 * (size_t)ld,
                           ld);
            vdnn_cpu_sgemm(true, false, keys, m.dh, rows, scale, ds, keys, q + (size_t)r0 * (size_t)ld, ld, 1.0f, dk,
                           ld);
        }
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_attn_fused = {fused_query, no_create, no_destroy, fused_forward, fused_backward, NULL};
