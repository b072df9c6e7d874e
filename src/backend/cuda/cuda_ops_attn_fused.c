/* Fused causal attention on CUDA: softmax(Q K^T / sqrt(D)) V from qkv {B,1,T,3F} to {B,1,T,F} with no T x T tensor,
 * as the CPU's (cpu_ops_attn_fused.c). Each sequence goes a block of query rows at a time: the block's scores
 * against the keys up to its last row, for every head in one strided-batched GEMM, the causal softmax kernel over
 * them, then P V. Backward recomputes a block's probabilities the same way, forms dS = P (dP - rowsum(P dP)) within
 * the block (a row's keys all lie in it), then dQ for the block's rows and dK, dV summed over the blocks. It keeps
 * nothing between the passes and reads only qkv and dO. 16-bit maps: the scores in fp32, the probabilities and dS
 * rounded to the maps' type for the tensor-core GEMMs (as the unfused ops round them), a sequence's qkv gradient
 * summed in fp32 in the workspace and rounded once. cuBLAS is column-major: a row-major R x C matrix with leading
 * dimension ld is the column-major C x R one, so each product C = A B is asked as C^T = B^T A^T. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels_seq.h"
#include "backend/seq_shapes.h"

#include <math.h>

/* A block's scores, every head's, at most this many floats (64 MiB; or the backend's tensor_values, the largest
 * tensor it makes, where that is lower: the op harness lowers it to run several blocks): GPT-2's 12 heads take 1,365
 * rows a block. */
#define FUSED_BLOCK_VALUES ((size_t)1 << 24)

typedef vdnn_fused_dims fused_dims;

static cudaStream_t compute(cuda_backend *b) { return b->stream[VDNN_QUEUE_COMPUTE]; }

static vdnn_status fused_dims_of(const cuda_backend *b, const vdnn_op_desc *d, fused_dims *m, vdnn_error *err)
{
    const size_t cap = b->opt.tensor_values < FUSED_BLOCK_VALUES ? b->opt.tensor_values : FUSED_BLOCK_VALUES;
    return vdnn_fused_dims_of(d, cap, true, m, err);
}

/* Where a pass's buffers lie in its workspace: the block's fp32 scores, the probabilities in the maps' type (16-bit
 * maps; fp32 maps take them in place of the scores), in backward dP (dS in its place) and, for 16-bit maps, a
 * sequence's qkv gradient in fp32. */
typedef struct fused_ws {
    size_t scores, probs, dp, acc, bytes;
} fused_ws;

static fused_ws ws_layout(const vdnn_op_desc *d, const fused_dims *m, bool backward)
{
    const size_t block = (size_t)m->h * (size_t)m->rows * (size_t)m->t, es = vdnn_cuda_esize(d);
    const bool half = vdnn_cuda_half(d);
    fused_ws l = {0};
    size_t at = vdnn_cuda_align(block * sizeof(float));
    l.probs = half ? at : 0;
    if (half) at += vdnn_cuda_align(block * es);
    if (backward) {
        l.dp = at;
        at += vdnn_cuda_align(block * es);
        l.acc = at;
        if (half) at += vdnn_cuda_align((size_t)m->t * 3 * (size_t)m->f * sizeof(float));
    }
    l.bytes = at;
    return l;
}

static vdnn_status fused_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    fused_dims m;
    vdnn_status st = fused_dims_of(b, d, &m, err);
    if (st) return st;
    *info = (vdnn_op_info){.bwd_needs_x = true,
                           .fwd_ws_bytes = ws_layout(d, &m, false).bytes,
                           .bwd_ws_bytes = ws_layout(d, &m, true).bytes};
    return VDNN_OK;
}

static vdnn_status need(const void *p, const char *what, vdnn_error *err)
{
    return p ? VDNN_OK : vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda attention: %s is NULL", what);
}

static vdnn_status kernel(cudaError_t e, const char *what, vdnn_error *err)
{
    return vdnn_cuda_check(e, err, "cuda attention: %s", what);
}

/* One block of query rows r0 .. r0+rows-1 of sequence s: the pointers its products read and write. */
typedef struct fused_block {
    int r0, rows, keys;
    const void *q, *k, *v; /* the sequence's queries, keys and values at head 0 (heads dh columns apart) */
} fused_block;

static fused_block block_at(const vdnn_op_desc *d, const fused_dims *m, const void *qkv, int s, int r0)
{
    const size_t ld = 3 * (size_t)m->f;
    const void *q = vdnn_cuda_at(d, qkv, (size_t)s * (size_t)m->t * ld);
    const int rows = m->t - r0 < m->rows ? m->t - r0 : m->rows;
    return (fused_block){r0, rows, r0 + rows, q, vdnn_cuda_at(d, q, (size_t)m->f), vdnn_cuda_at(d, q, 2 * (size_t)m->f)};
}

/* The block's probabilities, every head's, rows x keys each (row-major, heads keys * rows apart), in p: the maps'
 * type, the scores themselves for fp32 maps. */
static vdnn_status block_probs(cuda_backend *b, const vdnn_op_desc *d, const fused_dims *m, const fused_block *k,
                               float *scores, void *p, vdnn_error *err)
{
    const int ld = 3 * m->f;
    const long long per = (long long)k->keys * k->rows;
    /* P^T (keys x rows) = K Q^T: K is the stored K^T taken transposed, the block's Q^T as stored. */
    vdnn_status st = vdnn_cuda_gemm_batched(b, d->dtype, CUBLAS_OP_T, CUBLAS_OP_N, k->keys, k->rows, m->dh,
                                            1.0f / sqrtf((float)m->dh), k->k, ld, m->dh,
                                            vdnn_cuda_at(d, k->q, (size_t)k->r0 * (size_t)ld), ld, m->dh, scores,
                                            VDNN_DTYPE_F32, k->keys, per, m->h, "cuda attention (scores)", err);
    if (st) return st;
    return kernel(vdnn_cuda_k_causal_softmax_rows(compute(b), vdnn_cuda_type_of(d), p, scores,
                                                  (size_t)m->h * (size_t)k->rows, k->keys, k->rows, k->r0),
                  "causal softmax kernel", err);
}

static vdnn_status fused_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    fused_dims m;
    vdnn_status st = fused_dims_of(b, d, &m, err);
    if (!st) st = need(a->x[0], "x", err);
    if (!st) st = need(a->y, "y", err);
    if (!st) st = need(a->ws, "the workspace", err);
    if (st) return st;
    const fused_ws l = ws_layout(d, &m, false);
    float *scores = (float *)((char *)a->ws + l.scores);
    void *p = vdnn_cuda_half(d) ? (char *)a->ws + l.probs : (void *)scores;
    for (int s = 0; s < m.b && !st; s++)
        for (int r0 = 0; r0 < m.t && !st; r0 += m.rows) {
            const fused_block k = block_at(d, &m, a->x[0], s, r0);
            st = block_probs(b, d, &m, &k, scores, p, err);
            void *o = vdnn_cuda_at(d, a->y, ((size_t)s * (size_t)m.t + (size_t)r0) * (size_t)m.f);
            /* O^T (dh x rows) = V^T (as stored) P^T (as stored). */
            if (!st)
                st = vdnn_cuda_gemm_batched(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_N, m.dh, k.rows, k.keys, 1.0f, k.v,
                                            3 * m.f, m.dh, p, k.keys, (long long)k.keys * k.rows, o, d->dtype, m.f,
                                            m.dh, m.h, "cuda attention (output)", err);
        }
    return st;
}

/* A block's gradients, into dq (the sequence's qkv gradient at its queries, leading dimension ldg, of type gt). */
static vdnn_status block_backward(cuda_backend *b, const vdnn_op_desc *d, const fused_dims *m, const fused_block *k,
                                  const fused_ws *l, void *ws, const void *dout, void *dq, vdnn_dtype gt, int ldg,
                                  vdnn_error *err)
{
    const int ld = 3 * m->f;
    const long long per = (long long)k->keys * k->rows;
    const float scale = 1.0f / sqrtf((float)m->dh);
    float *scores = (float *)((char *)ws + l->scores);
    void *p = vdnn_cuda_half(d) ? (char *)ws + l->probs : (void *)scores, *ds = (char *)ws + l->dp;
    size_t ge = vdnn_dtype_size(gt);
    void *dk = (char *)dq + (size_t)m->f * ge, *dv = (char *)dq + 2 * (size_t)m->f * ge;
    const void *dor = vdnn_cuda_at(d, dout, (size_t)k->r0 * (size_t)m->f);
    vdnn_status st = block_probs(b, d, m, k, scores, p, err);
    /* dV^T (dh x keys) += dO^T (as stored) P (P^T as stored, taken transposed). */
    if (!st)
        st = vdnn_cuda_gemm_batched_add(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_T, m->dh, k->keys, k->rows, 1.0f, dor, m->f,
                                        m->dh, p, k->keys, per, dv, gt, ldg, m->dh, m->h, "cuda attention (values)", err);
    /* dP^T (keys x rows) = V dO^T: V is the stored V^T taken transposed, dO^T as stored. */
    if (!st)
        st = vdnn_cuda_gemm_batched(b, d->dtype, CUBLAS_OP_T, CUBLAS_OP_N, k->keys, k->rows, m->dh, 1.0f, k->v, ld,
                                    m->dh, dor, m->f, m->dh, ds, d->dtype, k->keys, per, m->h,
                                    "cuda attention (probabilities' gradient)", err);
    if (!st)
        st = kernel(vdnn_cuda_k_causal_softmax_bwd_rows(compute(b), vdnn_cuda_type_of(d), ds, p, ds,
                                                        (size_t)m->h * (size_t)k->rows, k->keys, k->rows, k->r0),
                    "softmax gradient kernel", err);
    /* dQ^T (dh x rows) = scale K^T (as stored) dS^T (dS as stored), the block's rows written once. */
    if (!st)
        st = vdnn_cuda_gemm_batched(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_N, m->dh, k->rows, k->keys, scale, k->k, ld,
                                    m->dh, ds, k->keys, per, (char *)dq + (size_t)k->r0 * (size_t)ldg * ge, gt, ldg,
                                    m->dh, m->h, "cuda attention (queries)", err);
    /* dK^T (dh x keys) += scale Q^T (the block's, as stored) dS (dS^T as stored, taken transposed). */
    if (!st)
        st = vdnn_cuda_gemm_batched_add(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_T, m->dh, k->keys, k->rows, scale,
                                        vdnn_cuda_at(d, k->q, (size_t)k->r0 * (size_t)ld), ld, m->dh, ds, k->keys, per,
                                        dk, gt, ldg, m->dh, m->h, "cuda attention (keys)", err);
    return st;
}

static vdnn_status fused_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0]) return VDNN_OK;
    fused_dims m;
    vdnn_status st = fused_dims_of(b, d, &m, err);
    if (!st) st = need(a->x[0], "x", err);
    if (!st) st = need(a->dy, "dy", err);
    if (!st) st = need(a->ws, "the workspace", err);
    if (st) return st;
    const fused_ws l = ws_layout(d, &m, true);
    const bool half = vdnn_cuda_half(d);
    const size_t seq = (size_t)m.t * 3 * (size_t)m.f;
    /* dK and dV are sums over the blocks: fp32 maps sum in dx itself, 16-bit maps in fp32 a sequence at a time. */
    if (!half)
        st = vdnn_cuda_check(cudaMemsetAsync(a->dx[0], 0, (size_t)m.b * seq * sizeof(float), compute(b)), err,
                             "cuda attention backward: cudaMemsetAsync");
    for (int s = 0; s < m.b && !st; s++) {
        void *acc = half ? (char *)a->ws + l.acc : vdnn_cuda_at(d, a->dx[0], (size_t)s * seq);
        if (half)
            st = vdnn_cuda_check(cudaMemsetAsync(acc, 0, seq * sizeof(float), compute(b)), err,
                                 "cuda attention backward: cudaMemsetAsync");
        const void *dout = vdnn_cuda_at(d, a->dy, (size_t)s * (size_t)m.t * (size_t)m.f);
        for (int r0 = 0; r0 < m.t && !st; r0 += m.rows) {
            const fused_block k = block_at(d, &m, a->x[0], s, r0);
            st = block_backward(b, d, &m, &k, &l, a->ws, dout, acc, VDNN_DTYPE_F32, 3 * m.f, err);
        }
        if (!st && half)
            st = kernel(vdnn_cuda_k_convert(compute(b), vdnn_cuda_at(d, a->dx[0], (size_t)s * seq), vdnn_cuda_type_of(d),
                                            acc, VDNN_CUDA_F32, seq, 0),
                        "qkv gradient rounding kernel", err);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_attn_fused = {.query = fused_query, .forward = fused_forward,
                                              .backward = fused_backward};
