/* The sequence ops on CUDA: token and position embeddings and layer normalization on own kernels, linear on cuBLAS,
 * causal attention as cuBLAS strided-batched GEMMs over the heads of each sequence around a causal softmax kernel.
 * Shapes, flags and aux are the CPU backend's (cpu_ops_seq.c, cpu_ops_dnnl_layernorm.c), so plans made with either
 * backend's op info hold. 16-bit maps (bf16, fp16) run the GEMMs on tensor cores with fp32 accumulation (the fp32
 * master weights rounded into a copy in the workspace, weight gradients written in fp32, as fc), attention's scores
 * in fp32 before the softmax rounds the probabilities once, and the kernels compute in float.
 * cuBLAS is column-major: a row-major matrix M (r x c, leading dimension ld) is the column-major M^T with the same
 * ld, so each row-major product C = A B is asked as C^T = B^T A^T. */
#include "backend/cuda/cuda_internal.h"
#include "backend/op_check.h"
#include "backend/seq_shapes.h"
#include "backend/cuda/cuda_kernels_seq.h"

#include <math.h>

static cudaStream_t compute(cuda_backend *b) { return b->stream[VDNN_QUEUE_COMPUTE]; }

static vdnn_status need(const void *p, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    if (p) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda %s: %s is NULL", vdnn_layer_kind_name(d->kind), what);
}

static vdnn_status kernel(cudaError_t e, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    return vdnn_cuda_check(e, err, "cuda %s: %s", vdnn_layer_kind_name(d->kind), what);
}

/* ---- token embedding ---- */

static vdnn_status embed_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    if (d->n_inputs != 1 || x.c != 1 || x.w != 1 || y.n != x.n || y.c != 1 || y.h != x.h || y.w != d->p.filters ||
        d->p.vocab < 1)
        return vdnn_seq_shape_fail(d, "expected token ids Bx1xTx1 to Bx1xTxF with F outputs= and a vocabulary", err);
    vdnn_status st = vdnn_op_check_token_ids(d, err);
    if (st) return st;
    *info = (vdnn_op_info){.bwd_needs_x = true};
    return VDNN_OK;
}

static vdnn_status embed_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->w, d, "w", err);
    if (st) return st;
    return kernel(vdnn_cuda_k_embed_fwd(compute(b), vdnn_cuda_type_of(d), a->y, a->x[0], a->w, vdnn_seq_rows(d->in[0]),
                                        d->p.filters, d->p.vocab),
                  d, "forward kernel", err);
}

static vdnn_status embed_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const size_t rows = vdnn_seq_rows(d->in[0]);
    /* Token ids are not differentiable: their gradient is zero. */
    if (a->dx[0]) {
        vdnn_status st = vdnn_cuda_check(cudaMemsetAsync(a->dx[0], 0, rows * vdnn_cuda_esize(d), compute(b)), err,
                                         "cuda embed: cudaMemsetAsync of dx");
        if (st) return st;
    }
    if (!a->dw) return VDNN_OK;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->dy, d, "dy", err);
    if (st) return st;
    return kernel(vdnn_cuda_k_embed_bwd(compute(b), vdnn_cuda_type_of(d), a->dw, a->x[0], a->dy, rows, d->p.filters,
                                        d->p.vocab),
                  d, "backward kernel", err);
}

const cuda_op_impl vdnn_cuda_op_embed = {.query = embed_query, .forward = embed_forward, .backward = embed_backward};

/* ---- learned position embedding ---- */

static vdnn_status pos_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    if (d->n_inputs != 1 || !vdnn_cuda_same_shape(d->in[0], d->out) || d->in[0].c != 1 || d->in[0].h > d->p.context)
        return vdnn_seq_shape_fail(d, "expected Bx1xTxF to the same, T at most context=", err);
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status pos_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->w, d, "w", err);
    if (st) return st;
    const size_t tf = (size_t)d->in[0].h * (size_t)d->in[0].w;
    return kernel(vdnn_cuda_k_pos_fwd(compute(b), vdnn_cuda_type_of(d), a->y, a->x[0], a->w, d->in[0].n, tf), d,
                  "forward kernel", err);
}

static vdnn_status pos_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->dy, d, "dy", err);
    if (st) return st;
    const size_t tf = (size_t)d->in[0].h * (size_t)d->in[0].w, n = (size_t)d->in[0].n * tf;
    /* dw first: dx may be written over dy (both on the compute queue, in order). */
    if (a->dw)
        st = kernel(vdnn_cuda_k_pos_bwd(compute(b), vdnn_cuda_type_of(d), a->dw, a->dy, d->in[0].n, tf,
                                        (size_t)d->p.context * (size_t)d->in[0].w),
                    d, "backward kernel", err);
    if (!st && a->dx[0] && a->dx[0] != a->dy)
        st = vdnn_cuda_check(cudaMemcpyAsync(a->dx[0], a->dy, n * vdnn_cuda_esize(d), cudaMemcpyDeviceToDevice, compute(b)),
                             err, "cuda pos_embed: copy of dy to dx");
    return st;
}

const cuda_op_impl vdnn_cuda_op_pos_embed = {.query = pos_query, .forward = pos_forward, .backward = pos_backward};

/* ---- layer normalization over the last dimension ----
 * Training keeps each row's mean and (biased) variance in aux, rows means then rows variances, as the CPU. The scale
 * and shift gradients sum in two passes through the backend's reduction scratch (deterministic, no atomics). */

static vdnn_status ln_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    if (d->n_inputs != 1 || !vdnn_cuda_same_shape(d->in[0], d->out))
        return vdnn_seq_shape_fail(d, "expected one input shaped like the output", err);
    /* The parameter gradients' partial sums take two doubles per feature in the backend's reduction scratch. */
    if ((size_t)d->in[0].w * 2 * sizeof(double) > VDNN_CUDA_SUM_SCRATCH_BYTES)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda layernorm: %d features (at most %zu)", d->in[0].w,
                         VDNN_CUDA_SUM_SCRATCH_BYTES / (2 * sizeof(double)));
    if (!(d->p.bn_eps > 0.0f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda layernorm: eps %g must be above 0", (double)d->p.bn_eps);
    *info = (vdnn_op_info){.aux_bytes = d->training ? 2 * vdnn_seq_rows(d->in[0]) * sizeof(float) : 0,
                           .bwd_needs_x = d->training};
    return VDNN_OK;
}

static vdnn_status ln_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->x[0] || !a->y || !a->w || !a->b || (d->training && !a->aux))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda layernorm forward: x, y, w, b%s must be given",
                         d->training ? " and aux" : "");
    const size_t rows = vdnn_seq_rows(d->in[0]);
    float *mean = d->training ? a->aux : NULL, *var = d->training ? a->aux + rows : NULL;
    return kernel(vdnn_cuda_k_ln_fwd(compute(b), vdnn_cuda_type_of(d), a->y, a->x[0], a->w, a->b, mean, var, rows,
                                     d->in[0].w, d->p.bn_eps),
                  d, "forward kernel", err);
}

static vdnn_status ln_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0] && !a->dw && !a->db) return VDNN_OK;
    if (!d->training) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda layernorm backward: made for inference");
    if (!a->x[0] || !a->aux || !a->dy || (a->dx[0] && !a->w))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda layernorm backward: x, aux, dy (and w for dx) must be given");
    const size_t rows = vdnn_seq_rows(d->in[0]);
    return kernel(vdnn_cuda_k_ln_bwd(compute(b), vdnn_cuda_type_of(d), b->sum_scratch, VDNN_CUDA_SUM_SCRATCH_BYTES,
                                     a->dx[0], a->dw, a->db, a->x[0], a->aux, a->aux + rows, a->dy, a->w, rows,
                                     d->in[0].w, d->p.bn_eps),
                  d, "backward kernels", err);
}

const cuda_op_impl vdnn_cuda_op_layernorm = {.query = ln_query, .forward = ln_forward, .backward = ln_backward};

/* ---- linear over the last dimension: Y = X W^T + b, W Fout x Fin as PyTorch's nn.Linear ---- */

static size_t linear_weights(const vdnn_op_desc *d) { return (size_t)d->p.filters * (size_t)d->in[0].w; }

static vdnn_status linear_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    if (d->n_inputs != 1 || y.n != x.n || y.c != x.c || y.h != x.h || y.w != d->p.filters)
        return vdnn_seq_shape_fail(d, "expected BxCxTxFin to BxCxTxFout with Fout outputs=", err);
    if (vdnn_seq_rows(x) > (size_t)INT32_MAX || linear_weights(d) > (size_t)INT32_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda linear: %zu rows of %d to %d exceed cuBLAS's int sizes",
                         vdnn_seq_rows(x), x.w, d->p.filters);
    /* The bias gradient is a per-column sum kernel: no workspace, unlike the CPU's GEMV against ones; 16-bit maps hold
     * the weights rounded to their type. */
    const size_t wc = vdnn_cuda_weights_copy_bytes(d, linear_weights(d));
    *info = (vdnn_op_info){.bwd_needs_x = true, .fwd_ws_bytes = wc, .bwd_ws_bytes = wc};
    return VDNN_OK;
}

static vdnn_status linear_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->w, d, "w", err);
    if (!st && d->p.bias) st = need(a->b, d, "b", err);
    if (st) return st;
    const int rows = (int)vdnn_seq_rows(d->in[0]), fin = d->in[0].w, fout = d->p.filters;
    const void *w;
    /* Y^T (fout x rows) = W (W^T stored: op T) X^T (as stored). */
    st = vdnn_cuda_weights_for(b, d, a, linear_weights(d), &w, "cuda linear forward", err);
    if (!st)
        st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_T, CUBLAS_OP_N, fout, rows, fin, 1.0f, w, fin, a->x[0], fin, a->y,
                            d->dtype, fout, "cuda linear forward", err);
    if (!st && d->p.bias)
        st = kernel(vdnn_cuda_k_bias_add(compute(b), vdnn_cuda_type_of(d), a->y, a->b, rows, fout, 1), d, "bias kernel",
                    err);
    return st;
}

static vdnn_status linear_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->dy, d, "dy", err);
    if (st) return st;
    const int rows = (int)vdnn_seq_rows(d->in[0]), fin = d->in[0].w, fout = d->p.filters;
    if (a->dx[0]) {
        if ((st = need(a->w, d, "w", err))) return st;
        const void *w;
        /* dX^T (fin x rows) = W^T (as stored) dY^T (as stored). */
        st = vdnn_cuda_weights_for(b, d, a, linear_weights(d), &w, "cuda linear backward-data", err);
        if (!st)
            st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_N, fin, rows, fout, 1.0f, w, fin, a->dy, fout,
                                a->dx[0], d->dtype, fin, "cuda linear backward-data", err);
        if (st) return st;
    }
    if (a->dw) {
        if ((st = need(a->x[0], d, "x", err))) return st;
        /* dW^T (fin x fout) = X^T (as stored) dY (dY^T stored: op T), in fp32 whatever the maps' type. */
        st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_T, fin, fout, rows, 1.0f, a->x[0], fin, a->dy, fout, a->dw,
                            VDNN_DTYPE_F32, fin, "cuda linear backward-weights", err);
        if (st) return st;
    }
    if (a->db && d->p.bias)
        st = kernel(vdnn_cuda_k_bias_grad(compute(b), vdnn_cuda_type_of(d), b->sum_scratch, VDNN_CUDA_SUM_SCRATCH_BYTES,
                                          a->db, a->dy, rows, fout, 1),
                    d, "bias gradient kernel", err);
    return st;
}

const cuda_op_impl vdnn_cuda_op_linear = {.query = linear_query, .forward = linear_forward, .backward = linear_backward};

/* ---- causal attention ----
 * qkv {B,1,T,3F}: head h of each token reads columns h*D .. h*D+D-1 of its query, key and value (D = F/H);
 * probabilities {B,H,T,T}. Each sequence's heads are one strided-batched GEMM (heads D columns apart in qkv and
 * in the output, T*T values apart in the probabilities); the sequences are a loop. With 16-bit maps a sequence's
 * scores are written in fp32 to the forward workspace and the softmax rounds the probabilities once; backward's dS
 * is rounded to the maps' type for the tensor-core GEMMs (as autocast's matmul backward reads it). */

static size_t seq_values(const vdnn_attn_dims *ad) { return (size_t)ad->t * 3 * (size_t)ad->f; } /* qkv of a sequence */
static long long tt(const vdnn_attn_dims *ad) { return (long long)ad->t * ad->t; }
static size_t heads_tt(const vdnn_attn_dims *ad) { return (size_t)ad->h * (size_t)tt(ad); }

/* C = alpha op(A) op(B) for each head of one sequence, column-major, A and B a head apart by sa and sb; A and B of the
 * maps' type, C of type ct. */
static vdnn_status gemm_heads(cuda_backend *b, const vdnn_op_desc *d, const vdnn_attn_dims *ad, cublasOperation_t ta,
                              cublasOperation_t tb, int m, int n, int k, float alpha, const void *A, int lda,
                              long long sa, const void *B, int ldb, long long sb, void *C, vdnn_dtype ct, int ldc,
                              long long sc, const char *what, vdnn_error *err)
{
    return vdnn_cuda_gemm_batched(b, d->dtype, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, C, ct, ldc, sc, ad->h, what,
                                  err);
}

/* Zeroes `width` values of each of the rows rows of a row-major matrix of leading dimension ld from column col. */
static vdnn_status zero_columns(cuda_backend *b, const vdnn_op_desc *d, void *p, size_t rows, int ld, int col, int width,
                                const char *what, vdnn_error *err)
{
    const size_t es = vdnn_cuda_esize(d);
    return vdnn_cuda_check(cudaMemset2DAsync(vdnn_cuda_at(d, p, (size_t)col), (size_t)ld * es, 0, (size_t)width * es,
                                             rows, compute(b)),
                           err, "cuda %s: cudaMemset2DAsync", what);
}

static vdnn_status probs_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_attn_dims ad;
    if (d->n_inputs != 1) return vdnn_seq_shape_fail(d, "takes one input (qkv)", err);
    vdnn_status st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    if (ad.h != vdnn_attn_op_heads(d)) return vdnn_seq_shape_fail(d, "the output's channels are not its heads", err);
    /* Backward forms dS = P (dP - rowsum(P dP)) for the heads of one sequence at a time in its workspace; 16-bit
     * maps' forward, one sequence's scores in fp32. */
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = true,
                           .fwd_ws_bytes = vdnn_cuda_half(d) ? heads_tt(&ad) * sizeof(float) : 0,
                           .bwd_ws_bytes = heads_tt(&ad) * vdnn_cuda_esize(d)};
    return VDNN_OK;
}

static vdnn_status probs_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const bool half = vdnn_cuda_half(d);
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st && half) st = need(a->ws, d, "the workspace", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    const float scale = 1.0f / sqrtf((float)ad.dh);
    for (int s = 0; s < ad.b && !st; s++) {
        const void *q = vdnn_cuda_at(d, a->x[0], (size_t)s * seq_values(&ad) + (size_t)ad.h0 * (size_t)ad.dh);
        const void *k = vdnn_cuda_at(d, q, (size_t)ad.f);
        void *p = vdnn_cuda_at(d, a->y, (size_t)s * heads_tt(&ad));
        /* P^T (t x t) = K Q^T: K is the stored K^T taken transposed, Q^T as stored. fp32 maps: the scores in place,
         * the softmax over every sequence after the loop. */
        st = gemm_heads(b, d, &ad, CUBLAS_OP_T, CUBLAS_OP_N, t, t, ad.dh, scale, k, ld, ad.dh, q, ld, ad.dh,
                        half ? a->ws : p, VDNN_DTYPE_F32, t, tt(&ad), "cuda attn_probs forward", err);
        if (!st && half)
            st = kernel(vdnn_cuda_k_causal_softmax(compute(b), vdnn_cuda_type_of(d), p, a->ws, (size_t)ad.h * (size_t)t, t),
                        d, "causal softmax kernel", err);
    }
    if (!st && !half)
        st = kernel(vdnn_cuda_k_causal_softmax(compute(b), VDNN_CUDA_F32, a->y, a->y, (size_t)ad.b * (size_t)ad.h * (size_t)t,
                                               t),
                    d, "causal softmax kernel", err);
    return st;
}

static vdnn_status probs_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0]) return VDNN_OK;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->dy, d, "dy", err);
    if (!st) st = need(a->ws, d, "the workspace", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    const float scale = 1.0f / sqrtf((float)ad.dh);
    /* Values get no gradient from the probabilities (attn_mix gives theirs), nor do other groups' heads. */
    st = ad.w != ad.f ? zero_columns(b, d, a->dx[0], (size_t)ad.b * (size_t)t, ld, 0, ld, "attn_probs backward", err)
                      : zero_columns(b, d, a->dx[0], (size_t)ad.b * (size_t)t, ld, 2 * ad.f, ad.f, "attn_probs backward",
                                     err);
    for (int s = 0; s < ad.b && !st; s++) {
        const size_t pat = (size_t)s * heads_tt(&ad);
        const size_t off = (size_t)s * seq_values(&ad) + (size_t)ad.h0 * (size_t)ad.dh;
        st = kernel(vdnn_cuda_k_causal_softmax_bwd(compute(b), vdnn_cuda_type_of(d), a->ws, vdnn_cuda_at(d, a->y, pat),
                                                   vdnn_cuda_at(d, a->dy, pat), (size_t)ad.h * (size_t)t, t),
                    d, "softmax gradient kernel", err);
        const void *q = vdnn_cuda_at(d, a->x[0], off), *k = vdnn_cuda_at(d, q, (size_t)ad.f);
        void *dq = vdnn_cuda_at(d, a->dx[0], off), *dk = vdnn_cuda_at(d, dq, (size_t)ad.f);
        /* dQ^T (dh x t) = K^T (as stored) dS^T (dS as stored). */
        if (!st)
            st = gemm_heads(b, d, &ad, CUBLAS_OP_N, CUBLAS_OP_N, ad.dh, t, t, scale, k, ld, ad.dh, a->ws, t, tt(&ad), dq,
                            d->dtype, ld, ad.dh, "cuda attn_probs backward (queries)", err);
        /* dK^T (dh x t) = Q^T (as stored) dS (dS^T as stored, taken transposed). */
        if (!st)
            st = gemm_heads(b, d, &ad, CUBLAS_OP_N, CUBLAS_OP_T, ad.dh, t, t, scale, q, ld, ad.dh, a->ws, t, tt(&ad), dk,
                            d->dtype, ld, ad.dh, "cuda attn_probs backward (keys)", err);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_attn_probs = {.query = probs_query, .forward = probs_forward, .backward = probs_backward};

static vdnn_status mix_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_attn_dims ad;
    if (d->n_inputs != 2) return vdnn_seq_shape_fail(d, "takes two inputs (probabilities, then qkv)", err);
    vdnn_status st = vdnn_attn_dims_of(d, d->in[1], d->in[0], &ad, err);
    if (st) return st;
    const vdnn_shape y = d->out;
    if (y.n != ad.b || y.c != 1 || y.h != ad.t || y.w != ad.w)
        return vdnn_seq_shape_fail(d, "expected output Bx1xTxF (its heads' share of F)", err);
    *info = (vdnn_op_info){.bwd_needs_x = true};
    return VDNN_OK;
}

static vdnn_status mix_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->x[0], d, "x[0]", err);
    if (!st) st = need(a->x[1], d, "x[1]", err);
    if (!st) st = need(a->y, d, "y", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[1], d->in[0], &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    for (int s = 0; s < ad.b && !st; s++) {
        const void *p = vdnn_cuda_at(d, a->x[0], (size_t)s * heads_tt(&ad));
        const void *v =
            vdnn_cuda_at(d, a->x[1], (size_t)s * seq_values(&ad) + 2 * (size_t)ad.f + (size_t)ad.h0 * (size_t)ad.dh);
        void *o = vdnn_cuda_at(d, a->y, (size_t)s * (size_t)t * (size_t)ad.w);
        /* O^T (dh x t) = V^T (as stored) P^T (as stored). */
        st = gemm_heads(b, d, &ad, CUBLAS_OP_N, CUBLAS_OP_N, ad.dh, t, t, 1.0f, v, ld, ad.dh, p, t, tt(&ad), o, d->dtype,
                        ad.w, ad.dh, "cuda attn_mix forward", err);
    }
    return st;
}

static vdnn_status mix_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0] && !a->dx[1]) return VDNN_OK;
    vdnn_status st = need(a->dy, d, "dy", err);
    if (!st && a->dx[0]) st = need(a->x[1], d, "x[1]", err);
    if (!st && a->dx[1]) st = need(a->x[0], d, "x[0]", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[1], d->in[0], &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    /* Queries and keys get no gradient from the mix (attn_probs gives theirs), nor do other groups' values. */
    if (a->dx[1])
        st = zero_columns(b, d, a->dx[1], (size_t)ad.b * (size_t)t, ld, 0, ad.w != ad.f ? ld : 2 * ad.f,
                          "attn_mix backward", err);
    for (int s = 0; s < ad.b && !st; s++) {
        const size_t pat = (size_t)s * heads_tt(&ad);
        const size_t vat = (size_t)s * seq_values(&ad) + 2 * (size_t)ad.f + (size_t)ad.h0 * (size_t)ad.dh;
        const void *dout = vdnn_cuda_at(d, a->dy, (size_t)s * (size_t)t * (size_t)ad.w);
        /* dP^T (t x t) = V dO^T: V is the stored V^T taken transposed, dO^T as stored. */
        if (a->dx[0])
            st = gemm_heads(b, d, &ad, CUBLAS_OP_T, CUBLAS_OP_N, t, t, ad.dh, 1.0f, vdnn_cuda_at(d, a->x[1], vat), ld,
                            ad.dh, dout, ad.w, ad.dh, vdnn_cuda_at(d, a->dx[0], pat), d->dtype, t, tt(&ad),
                            "cuda attn_mix backward (probabilities)", err);
        /* dV^T (dh x t) = dO^T (as stored) P (P^T as stored, taken transposed). */
        if (!st && a->dx[1])
            st = gemm_heads(b, d, &ad, CUBLAS_OP_N, CUBLAS_OP_T, ad.dh, t, t, 1.0f, dout, ad.w, ad.dh,
                            vdnn_cuda_at(d, a->x[0], pat), t, tt(&ad), vdnn_cuda_at(d, a->dx[1], vat), d->dtype, ld,
                            ad.dh, "cuda attn_mix backward (values)", err);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_attn_mix = {.query = mix_query, .forward = mix_forward, .backward = mix_backward};
