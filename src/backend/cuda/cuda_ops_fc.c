/* FC on CUDA: cuBLAS SGEMM on x viewed as (N, K) with PyTorch's row-major (out, in) weights; bias by own kernels.
 * cuBLAS is column-major, so each row-major product A*B is computed as the column-major B^T*A^T. 16-bit maps:
 * cublasGemmEx with fp32 accumulation (tensor cores); the fp32 master weights are rounded into a copy of the maps'
 * type in the workspace before each product that reads them, and the weight gradient is written in fp32 directly. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

static const float one = 1.0f, zero = 0.0f;

static vdnn_status fc_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "fc: %d inputs (needs exactly 1)", d->n_inputs);
    if (p->filters < 1 || out.n != in.n || out.c != p->filters || out.h != 1 || out.w != 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "fc: output %dx%dx%dx%d does not match %d outputs for input %dx%dx%dx%d",
                         out.n, out.c, out.h, out.w, p->filters, in.n, in.c, in.h, in.w);
    size_t k = (size_t)in.c * (size_t)in.h * (size_t)in.w;
    if (k > (size_t)INT32_MAX || (size_t)p->filters * k > (size_t)INT32_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "fc: %d x %zu weights exceed cuBLAS's int sizes", p->filters, k);
    return VDNN_OK;
}

/* Bytes of the 16-bit weights copy (0 for fp32 maps). */
static size_t weights_copy_bytes(const vdnn_op_desc *d)
{
    if (!vdnn_cuda_half(d)) return 0;
    return vdnn_cuda_align((size_t)d->p.filters * vdnn_cuda_image_values(d->in[0]) * vdnn_cuda_esize(d));
}

static vdnn_status fc_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = fc_check(d, err);
    if (st) return st;
    /* cuBLAS keeps its own workspace (part of the backend's fixed overhead, not the plan's). */
    const size_t wc = weights_copy_bytes(d);
    *info = (vdnn_op_info){.bwd_needs_x = true, .fwd_ws_bytes = wc, .bwd_ws_bytes = wc}; /* x: for the weight gradient */
    return VDNN_OK;
}

static cudaDataType_t blas_type(const vdnn_op_desc *d)
{
    return d->dtype == VDNN_DTYPE_BF16 ? CUDA_R_16BF : d->dtype == VDNN_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The weights rounded to the maps' type in the workspace, for the next product on the compute queue. */
static vdnn_status weights_copy(cuda_backend *b, const vdnn_op_desc *d, const vdnn_op_args *a, const char *what,
                                vdnn_error *err)
{
    if (!a->ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL workspace (%zu bytes needed)", what, weights_copy_bytes(d));
    const size_t nw = (size_t)d->p.filters * vdnn_cuda_image_values(d->in[0]);
    return vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], a->ws, vdnn_cuda_type_of(d), a->w,
                                               VDNN_CUDA_F32, nw, 0),
                           err, "%s: weights copy kernel", what);
}

/* C = op(A) op(B) with A, B of the maps' type and C of type ct, accumulated in fp32. */
static vdnn_status gemm_ex(cuda_backend *b, const vdnn_op_desc *d, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const void *A, int lda, const void *B, int ldb, void *C, cudaDataType_t ct,
                           int ldc, const char *what, vdnn_error *err)
{
    const cudaDataType_t t = blas_type(d);
    return vdnn_cublas_check(cublasGemmEx(b->cublas, ta, tb, m, n, k, &one, A, t, lda, B, t, ldb, &zero, C, ct, ldc,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             err, "%s: cublasGemmEx (%s, fp32 accumulation)", what, vdnn_dtype_name(d->dtype));
}

static vdnn_status fc_create(cuda_backend *b, vdnn_op *op, vdnn_error *err) { return fc_check(&op->d, err); }

static void fc_destroy(cuda_backend *b, vdnn_op *op) {}

static void dims(const vdnn_op_desc *d, int *n, int *k, int *o)
{
    *n = d->in[0].n;
    *k = d->in[0].c * d->in[0].h * d->in[0].w;
    *o = d->p.filters;
}

static vdnn_status fc_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->x[0] || !a->w || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL %s", !a->x[0] ? "input" : !a->w ? "weights" : "output");
    if (d->p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL bias");
    int n, k, o;
    dims(d, &n, &k, &o);
    vdnn_status st;
    /* y (N,O) = x (N,K) W^T; column-major: y^T (O,N) = W (O,K, stored as KxO: op T) * x^T (K,N). */
    if (vdnn_cuda_half(d)) {
        st = weights_copy(b, d, a, "fc forward", err);
        if (!st)
            st = gemm_ex(b, d, CUBLAS_OP_T, CUBLAS_OP_N, o, n, k, a->ws, k, a->x[0], k, a->y, blas_type(d), o,
                         "fc forward", err);
    } else {
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, o, n, k, &one, a->w, k, a->x[0], k,
                                           &zero, a->y, o),
                               err, "fc forward: cublasSgemm (%dx%d by %dx%d)", n, k, k, o);
    }
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_add(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(d), a->y, a->b, n, o, 1),
                             err, "fc forward: bias kernel");
    return st;
}

static vdnn_status fc_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights gradient");
    if (d->p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL bias gradient");
    if (!a->x[0] || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL %s", a->x[0] ? "dy" : "x");
    int n, k, o;
    dims(d, &n, &k, &o);
    vdnn_status st = VDNN_OK;
    const bool half = vdnn_cuda_half(d);
    if (a->dx[0]) {
        if (!a->w) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights");
        /* dx (N,K) = dy (N,O) W (O,K); column-major: dx^T (K,N) = W^T (K,O: as stored) * dy^T (O,N: as stored). */
        if (half) {
            st = weights_copy(b, d, a, "fc backward-data", err);
            if (!st)
                st = gemm_ex(b, d, CUBLAS_OP_N, CUBLAS_OP_N, k, n, o, a->ws, k, a->dy, o, a->dx[0], blas_type(d), k,
                             "fc backward-data", err);
        } else {
            st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, o, &one, a->w, k, a->dy, o,
                                               &zero, a->dx[0], k),
                                   err, "fc backward-data: cublasSgemm");
        }
    }
    /* dW (O,K) = dy^T (O,N) x (N,K); column-major: dW^T (K,O) = x^T (K,N: as stored) * dy (N,O: stored O x N, op T). */
    if (!st && half)
        st = gemm_ex(b, d, CUBLAS_OP_N, CUBLAS_OP_T, k, o, n, a->x[0], k, a->dy, o, a->dw, CUDA_R_32F, k,
                     "fc backward-weights", err);
    else if (!st)
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, o, n, &one, a->x[0], k, a->dy, o,
                                           &zero, a->dw, k),
                               err, "fc backward-weights: cublasSgemm");
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_grad(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(d), b->sum_scratch,
                                                   VDNN_CUDA_SUM_SCRATCH_BYTES, a->db, a->dy, n, o, 1),
                             err, "fc backward: bias gradient kernel");
    return st;
}

const cuda_op_impl vdnn_cuda_op_fc = {
    .query = fc_query,
    .create = fc_create,
    .destroy = fc_destroy,
    .forward = fc_forward,
    .backward = fc_backward,
};
