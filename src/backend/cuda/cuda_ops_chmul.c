/* CHANNEL_MUL on CUDA: y[n,c,:] = x[n,c,:] * s[n,c] (squeeze-and-excitation's scaling) on own kernels; backward
 * sums ds per plane in double before dx = dy * s may overwrite dy. The same contract as the CPU backend's. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels_layers.h"
#include "backend/op_check.h"

static vdnn_status chmul_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_channel_mul(d, err);
    if (!st) *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_inplace_ok = true};
    return st;
}

static vdnn_status chmul_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    return vdnn_op_check_channel_mul(&op->d, err);
}

static vdnn_status chmul_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->x[0] || !a->x[1] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "channel_mul forward: NULL %s", !a->y ? "output" : "input");
    const vdnn_shape s = op->d.in[0];
    const size_t planes = (size_t)s.n * (size_t)s.c, hw = (size_t)s.h * (size_t)s.w;
    return vdnn_cuda_check(vdnn_cuda_k_chmul(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->y, a->x[0], a->x[1], planes, hw), err,
                           "channel_mul forward kernel (%zu planes of %zu)", planes, hw);
}

static vdnn_status chmul_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0] && !a->dx[1]) return VDNN_OK;
    if (!a->dy || !a->x[0] || !a->x[1])
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "channel_mul backward: NULL %s", !a->dy ? "dy" : "x");
    const vdnn_shape s = op->d.in[0];
    const size_t planes = (size_t)s.n * (size_t)s.c, hw = (size_t)s.h * (size_t)s.w;
    cudaStream_t q = b->stream[VDNN_QUEUE_COMPUTE];
    vdnn_status st = VDNN_OK;
    /* In stream order: ds has read dy before dx may overwrite it. */
    if (a->dx[1])
        st = vdnn_cuda_check(vdnn_cuda_k_chmul_scale_grad(q, vdnn_cuda_type_of(&op->d), a->dx[1], a->dy, a->x[0], planes, hw), err,
                             "channel_mul scale gradient kernel (%zu planes of %zu)", planes, hw);
    if (!st && a->dx[0])
        st = vdnn_cuda_check(vdnn_cuda_k_chmul(q, vdnn_cuda_type_of(&op->d), a->dx[0], a->dy, a->x[1], planes, hw), err,
                             "channel_mul input gradient kernel (%zu planes of %zu)", planes, hw);
    return st;
}

const cuda_op_impl vdnn_cuda_op_channel_mul = {
    .query = chmul_query,
    .create = chmul_create,
    .forward = chmul_forward,
    .backward = chmul_backward,
};
