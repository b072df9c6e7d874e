/* The sequence ops on CUDA (fp32; written without a GPU, never run on one: docs/cuda.md): token and position
 * embeddings and layer normalization on own kernels, linear on cuBLAS SGEMM, causal attention as cuBLAS
 * strided-batched GEMMs over the heads of each sequence around a causal softmax kernel. Shapes, flags and aux are
 * the CPU backend's (cpu_ops_seq.c, cpu_ops_dnnl_layernorm.c), so plans made with either backend's op info hold.
 * cuBLAS is column-major: a row-major matrix M (r x c, leading dimension ld) is the column-major M^T with the same
 * ld, so each row-major product C = A B is asked as C^T = B^T A^T. */
#include "backend/cuda/cuda_internal.h"
#include "backend/seq_shapes.h"
#include "backend/cuda/cuda_kernels_seq.h"

#include <math.h>

static const float one = 1.0f, zero = 0.0f;

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
    return kernel(vdnn_cuda_k_embed_fwd(compute(b), a->y, a->x[0], a->w, vdnn_seq_rows(d->in[0]), d->p.filters, d->p.vocab),
                  d, "forward kernel", err);
}

static vdnn_status embed_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const size_t rows = vdnn_seq_rows(d->in[0]);
    /* Token ids are not differentiable: their gradient is zero. */
    if (a->dx[0]) {
        vdnn_status st = vdnn_cuda_check(cudaMemsetAsync(a->dx[0], 0, rows * sizeof(float), compute(b)), err,
                                         "cuda embed: cudaMemsetAsync of dx");
        if (st) return st;
    }
    if (!a->dw) return VDNN_OK;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->dy, d, "dy", err);
    if (st) return st;
    return kernel(vdnn_cuda_k_embed_bwd(compute(b), a->dw, a->x[0], a->dy, rows, d->p.filters, d->p.vocab), d,
                  "backward kernel", err);
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
    return kernel(vdnn_cuda_k_pos_fwd(compute(b), a->y, a->x[0], a->w, d->in[0].n, tf), d, "forward kernel", err);
}

static vdnn_status pos_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->dy, d, "dy", err);
    if (st) return st;
    const size_t tf = (size_t)d->in[0].h * (size_t)d->in[0].w, n = (size_t)d->in[0].n * tf;
    /* dw first: dx may be written over dy (both on the compute queue, in order). */
    if (a->dw)
        st = kernel(vdnn_cuda_k_pos_bwd(compute(b), a->dw, a->dy, d->in[0].n, tf,
                                        (size_t)d->p.context * (size_t)d->in[0].w),
                    d, "backward kernel", err);
    if (!st && a->dx[0] && a->dx[0] != a->dy)
        st = vdnn_cuda_check(cudaMemcpyAsync(a->dx[0], a->dy, n * sizeof(float), cudaMemcpyDeviceToDevice, compute(b)),
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
    return kernel(vdnn_cuda_k_ln_fwd(compute(b), a->y, a->x[0], a->w, a->b, mean, var, rows, d->in[0].w, d->p.bn_eps),
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
    return kernel(vdnn_cuda_k_ln_bwd(compute(b), b->sum_scratch, VDNN_CUDA_SUM_SCRATCH_BYTES, a->dx[0], a->dw, a->db,
                                     a->x[0], a->aux, a->aux + rows, a->dy, a->w, rows, d->in[0].w, d->p.bn_eps),
                  d, "backward kernels", err);
}

const cuda_op_impl vdnn_cuda_op_layernorm = {.query = ln_query, .forward = ln_forward, .backward = ln_backward};

/* ---- linear over the last dimension: Y = X W^T + b, W Fout x Fin as PyTorch's nn.Linear ---- */

static vdnn_status linear_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    if (d->n_inputs != 1 || y.n != x.n || y.c != x.c || y.h != x.h || y.w != d->p.filters)
        return vdnn_seq_shape_fail(d, "expected BxCxTxFin to BxCxTxFout with Fout outputs=", err);
    if (vdnn_seq_rows(x) > (size_t)INT32_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda linear: %zu rows exceed cuBLAS's int sizes", vdnn_seq_rows(x));
    /* The bias gradient is a per-column sum kernel: no workspace, unlike the CPU's GEMV against ones. */
    *info = (vdnn_op_info){.bwd_needs_x = true};
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
    /* Y^T (fout x rows) = W (W^T stored: op T) X^T (as stored). */
    st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, fout, rows, fin, &one, a->w, fin, a->x[0],
                                       fin, &zero, a->y, fout),
                           err, "cuda linear forward: cublasSgemm (%d rows of %d to %d)", rows, fin, fout);
    if (!st && d->p.bias)
        st = kernel(vdnn_cuda_k_bias_add(compute(b), VDNN_CUDA_F32, a->y, a->b, rows, fout, 1), d, "bias kernel", err);
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
        /* dX^T (fin x rows) = W^T (as stored) dY^T (as stored). */
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_N, fin, rows, fout, &one, a->w, fin, a->dy,
                                           fout, &zero, a->dx[0], fin),
                               err, "cuda linear backward-data: cublasSgemm");
        if (st) return st;
    }
    if (a->dw) {
        if ((st = need(a->x[0], d, "x", err))) return st;
        /* dW^T (fin x fout) = X^T (as stored) dY (dY^T stored: op T). */
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_T, fin, fout, rows, &one, a->x[0], fin,
                                           a->dy, fout, &zero, a->dw, fin),
                               err, "cuda linear backward-weights: cublasSgemm");
        if (st) return st;
    }
    if (a->db && d->p.bias)
        st = kernel(vdnn_cuda_k_bias_grad(compute(b), VDNN_CUDA_F32, b->sum_scratch, VDNN_CUDA_SUM_SCRATCH_BYTES, a->db,
                                          a->dy, rows, fout, 1),
                    d, "bias gradient kernel", err);
    return st;
}

const cuda_op_impl vdnn_cuda_op_linear = {.query = linear_query, .forward = linear_forward, .backward = linear_backward};

/* ---- causal attention ----
 * qkv {B,1,T,3F}: head h of each token reads columns h*D .. h*D+D-1 of its query, key and value (D = F/H);
 * probabilities {B,H,T,T}. Each sequence's heads are one strided-batched GEMM (heads D columns apart in qkv and
 * in the output, T*T values apart in the probabilities); the sequences are a loop. */

static size_t seq_values(const vdnn_attn_dims *ad) { return (size_t)ad->t * 3 * (size_t)ad->f; } /* qkv of a sequence */
static long long tt(const vdnn_attn_dims *ad) { return (long long)ad->t * ad->t; }

/* C = alpha op(A) op(B) for each head of one sequence, column-major, A and B a head apart by sa and sb. */
static vdnn_status gemm_heads(cuda_backend *b, const vdnn_attn_dims *ad, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, float alpha, const float *A, int lda, long long sa, const float *B, int ldb,
                              long long sb, float *C, int ldc, long long sc, const char *what, vdnn_error *err)
{
    return vdnn_cublas_check(cublasSgemmStridedBatched(b->cublas, ta, tb, m, n, k, &alpha, A, lda, sa, B, ldb, sb, &zero,
                                                       C, ldc, sc, ad->h),
                             err, "cuda %s: cublasSgemmStridedBatched (%d heads of %dx%dx%d)", what, ad->h, m, n, k);
}

/* Zeroes `width` values of each of the rows rows of a row-major matrix of leading dimension ld from column col. */
static vdnn_status zero_columns(cuda_backend *b, float *p, size_t rows, int ld, int col, int width, const char *what,
                                vdnn_error *err)
{
    return vdnn_cuda_check(cudaMemset2DAsync(p + col, (size_t)ld * sizeof(float), 0, (size_t)width * sizeof(float),
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
    /* Backward forms dS = P (dP - rowsum(P dP)) for the heads of one sequence at a time in its workspace. */
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = true,
                           .bwd_ws_bytes = (size_t)ad.h * (size_t)tt(&ad) * sizeof(float)};
    return VDNN_OK;
}

static vdnn_status probs_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->y, d, "y", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    const float scale = 1.0f / sqrtf((float)ad.dh);
    for (int s = 0; s < ad.b && !st; s++) {
        const float *q = a->x[0] + (size_t)s * seq_values(&ad) + (size_t)ad.h0 * (size_t)ad.dh, *k = q + ad.f;
        float *p = a->y + (size_t)s * (size_t)ad.h * (size_t)tt(&ad);
        /* P^T (t x t) = K Q^T: K is the stored K^T taken transposed, Q^T as stored. */
        st = gemm_heads(b, &ad, CUBLAS_OP_T, CUBLAS_OP_N, t, t, ad.dh, scale, k, ld, ad.dh, q, ld, ad.dh, p, t, tt(&ad),
                        "attn_probs forward", err);
    }
    if (!st)
        st = kernel(vdnn_cuda_k_causal_softmax(compute(b), a->y, (size_t)ad.b * (size_t)ad.h * (size_t)t, t), d,
                    "causal softmax kernel", err);
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
    st = ad.w != ad.f ? zero_columns(b, a->dx[0], (size_t)ad.b * (size_t)t, ld, 0, ld, "attn_probs backward", err)
                      : zero_columns(b, a->dx[0], (size_t)ad.b * (size_t)t, ld, 2 * ad.f, ad.f, "attn_probs backward", err);
    for (int s = 0; s < ad.b && !st; s++) {
        const size_t pat = (size_t)s * (size_t)ad.h * (size_t)tt(&ad);
        const size_t off = (size_t)s * seq_values(&ad) + (size_t)ad.h0 * (size_t)ad.dh;
        st = kernel(vdnn_cuda_k_causal_softmax_bwd(compute(b), a->ws, a->y + pat, a->dy + pat,
                                                   (size_t)ad.h * (size_t)t, t),
                    d, "softmax gradient kernel", err);
        const float *q = a->x[0] + off, *k = q + ad.f;
        float *dq = a->dx[0] + off, *dk = dq + ad.f;
        /* dQ^T (dh x t) = K^T (as stored) dS^T (dS as stored). */
        if (!st)
            st = gemm_heads(b, &ad, CUBLAS_OP_N, CUBLAS_OP_N, ad.dh, t, t, scale, k, ld, ad.dh, a->ws, t, tt(&ad), dq, ld,
                            ad.dh, "attn_probs backward (queries)", err);
        /* dK^T (dh x t) = Q^T (as stored) dS (dS^T as stored, taken transposed). */
        if (!st)
            st = gemm_heads(b, &ad, CUBLAS_OP_N, CUBLAS_OP_T, ad.dh, t, t, scale, q, ld, ad.dh, a->ws, t, tt(&ad), dk, ld,
                            ad.dh, "attn_probs backward (keys)", err);
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
        const float *p = a->x[0] + (size_t)s * (size_t)ad.h * (size_t)tt(&ad);
        const float *v = a->x[1] + (size_t)s * seq_values(&ad) + 2 * (size_t)ad.f + (size_t)ad.h0 * (size_t)ad.dh;
        float *o = a->y + (size_t)s * (size_t)t * (size_t)ad.w;
        /* O^T (dh x t) = V^T (as stored) P^T (as stored). */
        st = gemm_heads(b, &ad, CUBLAS_OP_N, CUBLAS_OP_N, ad.dh, t, t, 1.0f, v, ld, ad.dh, p, t, tt(&ad), o, ad.w, ad.dh,
                        "attn_mix forward", err);
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
        st = zero_columns(b, a->dx[1], (size_t)ad.b * (size_t)t, ld, 0, ad.w != ad.f ? ld : 2 * ad.f,
                          "attn_mix backward", err);
    for (int s = 0; s < ad.b && !st; s++) {
        const size_t pat = (size_t)s * (size_t)ad.h * (size_t)tt(&ad);
        const size_t vat = (size_t)s * seq_values(&ad) + 2 * (size_t)ad.f + (size_t)ad.h0 * (size_t)ad.dh;
        const float *dout = a->dy + (size_t)s * (size_t)t * (size_t)ad.w;
        /* dP^T (t x t) = V dO^T: V is the stored V^T taken transposed, dO^T as stored. */
        if (a->dx[0])
            st = gemm_heads(b, &ad, CUBLAS_OP_T, CUBLAS_OP_N, t, t, ad.dh, 1.0f, a->x[1] + vat, ld, ad.dh, dout, ad.w,
                            ad.dh, a->dx[0] + pat, t, tt(&ad), "attn_mix backward (probabilities)", err);
        /* dV^T (dh x t) = dO^T (as stored) P (P^T as stored, taken transposed). */
        if (!st && a->dx[1])
            st = gemm_heads(b, &ad, CUBLAS_OP_N, CUBLAS_OP_T, ad.dh, t, t, 1.0f, dout, ad.w, ad.dh, a->x[0] + pat, t,
                            tt(&ad), a->dx[1] + vat, ld, ad.dh, "attn_mix backward (values)", err);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_attn_mix = {.query = mix_query, .forward = mix_forward, .backward = mix_backward};
