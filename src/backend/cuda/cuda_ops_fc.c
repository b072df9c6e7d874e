/* FC on CUDA: cuBLAS SGEMM on x viewed as (N, K) with PyTorch's row-major (out, in) weights; bias by own kernels.
 * cuBLAS is column-major, so each row-major product A*B is computed as the column-major B^T*A^T. 16-bit maps:
 * cublasGemmEx with fp32 accumulation (tensor cores); the fp32 master weights are rounded into a copy of the maps'
 * type in the workspace before each product that reads them, and the weight gradient is written in fp32 directly. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

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

static size_t weight_values(const vdnn_op_desc *d) { return (size_t)d->p.filters * vdnn_cuda_image_values(d->in[0]); }

static vdnn_status fc_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = fc_check(d, err);
    if (st) return st;
    /* cuBLAS keeps its own workspace (part of the backend's fixed overhead, not the plan's). */
    const size_t wc = vdnn_cuda_weights_copy_bytes(d, weight_values(d));
    *info = (vdnn_op_info){.bwd_needs_x = true, .fwd_ws_bytes = wc, .bwd_ws_bytes = wc}; /* x: for the weight gradient */
    return VDNN_OK;
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
    const void *w;
    /* y (N,O) = x (N,K) W^T; column-major: y^T (O,N) = W (O,K, stored as KxO: op T) * x^T (K,N). */
    vdnn_status st = vdnn_cuda_weights_for(b, d, a, weight_values(d), &w, "fc forward", err);
    if (!st)
        st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_T, CUBLAS_OP_N, o, n, k, 1.0f, w, k, a->x[0], k, a->y, d->dtype, o,
                            "fc forward", err);
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
    if (a->dx[0]) {
        if (!a->w) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights");
        const void *w;
        /* dx (N,K) = dy (N,O) W (O,K); column-major: dx^T (K,N) = W^T (K,O: as stored) * dy^T (O,N: as stored). */
        st = vdnn_cuda_weights_for(b, d, a, weight_values(d), &w, "fc backward-data", err);
        if (!st)
            st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_N, k, n, o, 1.0f, w, k, a->dy, o, a->dx[0], d->dtype,
                                k, "fc backward-data", err);
    }
    /* dW (O,K) = dy^T (O,N) x (N,K); column-major: dW^T (K,O) = x^T (K,N: as stored) * dy (N,O: stored O x N, op T);
     * in fp32 whatever the maps' type. */
    if (!st)
        st = vdnn_cuda_gemm(b, d->dtype, CUBLAS_OP_N, CUBLAS_OP_T, k, o, n, 1.0f, a->x[0], k, a->dy, o, a->dw,
                            VDNN_DTYPE_F32, k, "fc backward-weights", err);
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
