/* RELU on CUDA: own element-wise kernels (cuDNN's activation API is deprecated in cuDNN 9, and this needs none of
 * it) over maps of any type; backward reads y (not x), so forward may run in place. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

static vdnn_status relu_check(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: %d inputs (needs exactly 1)", d->n_inputs);
    if (!vdnn_cuda_same_shape(d->in[0], d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: output %dx%dx%dx%d differs from input %dx%dx%dx%d", d->out.n,
                         d->out.c, d->out.h, d->out.w, d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w);
    return VDNN_OK;
}

static vdnn_status relu_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = relu_check(d, err);
    if (st) return st;
    /* Backward reads y (y > 0 exactly where x > 0), so forward may overwrite x; the kernels read each element
     * before writing it, so the gradient may run in place too. */
    *info = (vdnn_op_info){.bwd_needs_y = true, .inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status relu_create(cuda_backend *b, vdnn_op *op, vdnn_error *err) { return relu_check(&op->d, err); }

static vdnn_status relu_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = vdnn_cuda_need_io(a, "relu", err);
    if (st) return st;
    size_t n = vdnn_shape_count(op->d.out);
    return vdnn_cuda_check(vdnn_cuda_k_relu_fwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->y, a->x[0], n),
                           err, "relu forward kernel (%zu values)", n);
}

static vdnn_status relu_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    if (!a->y || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "relu backward: NULL %s", a->y ? "dy" : "y");
    /* y stands in for x: x itself may be gone (in place), and relu's derivative is the same read from either. */
    size_t n = vdnn_shape_count(op->d.out);
    return vdnn_cuda_check(vdnn_cuda_k_relu_bwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->dx[0], a->y,
                                                a->dy, n),
                           err, "relu backward kernel (%zu values)", n);
}

const cuda_op_impl vdnn_cuda_op_relu = {
    .query = relu_query,
    .create = relu_create,
    .forward = relu_forward,
    .backward = relu_backward,
};
