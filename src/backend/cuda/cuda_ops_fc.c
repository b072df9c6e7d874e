/* FC on CUDA: cuBLAS SGEMM on x viewed as (N, K) with PyTorch's row-major (out, in) weights; bias by own kernels.
 * cuBLAS is column-major, so each row-major product A*B is computed as the column-major B^T*A^T. */
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

static vdnn_status fc_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = fc_check(d, err);
    if (st) return st;
    /* cuBLAS keeps its own workspace (part of the backend's fixed overhead, not the plan's). */
    *info = (vdnn_op_info){.bwd_needs_x = true}; /* for the weight gradient */
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
    /* y (N,O) = x (N,K) W^T; column-major: y^T (O,N) = W (O,K, stored as KxO: op T) * x^T (K,N). */
    vdnn_status st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, o, n, k, &one, a->w, k, a->x[0],
                                                   k, &zero, a->y, o),
                                       err, "fc forward: cublasSgemm (%dx%d by %dx%d)", n, k, k, o);
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_add(b->stream[VDNN_QUEUE_COMPUTE], a->y, a->b, n, o, 1), err,
                             "fc forward: bias kernel");
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
        /* dx (N,K) = dy (N,O) W (O,K); column-major: dx^T (K,N) = W^T (K,O: as stored) * dy^T (O,N: as stored). */
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, o, &one, a->w, k, a->dy, o, &zero,
                                           a->dx[0], k),
                               err, "fc backward-data: cublasSgemm");
    }
    /* dW (O,K) = dy^T (O,N) x (N,K); column-major: dW^T (K,O) = x^T (K,N: as stored) * dy (N,O: stored O x N, op T). */
    if (!st)
        st = vdnn_cublas_check(cublasSgemm(b->cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, o, n, &one, a->x[0], k, a->dy, o,
                                           &zero, a->dw, k),
                               err, "fc backward-weights: cublasSgemm");
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_grad(b->stream[VDNN_QUEUE_COMPUTE], b->sum_scratch,
                                                   VDNN_CUDA_SUM_SCRATCH_BYTES, a->db, a->dy, n, o, 1), err,
                             "fc backward: bias gradient kernel");
    return st;
}

const cuda_op_impl vdnn_cuda_op_fc = {
    .query = fc_query,
    .create = fc_create,
    .destroy = fc_destroy,
    .forward = fc_forward,
    .backward = fc_backward,
};
