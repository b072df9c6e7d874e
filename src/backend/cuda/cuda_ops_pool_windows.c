/* MAXPOOL and AVGPOOL on CUDA, whichever windows they have: cuDNN's pooling (cuda_ops_pool.c) where its symmetric
 * windows are the layer's, own kernels with PyTorch's rules where ceil_mode adds a last window clipped at the border
 * or average pooling leaves padding out of its divisor. The own kernels keep max pooling's argmax in aux, so
 * backward needs neither x nor y, and they take whole batches (64-bit indices, no chunks). */
#include <stdint.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels_layers.h"
#include "backend/op_check.h"

/* NULL: the own kernels (this file's functions); else cuDNN's pooling. */
static const cuda_op_impl *pick(const vdnn_op_desc *d)
{
    return vdnn_pool_own_windows(d) ? NULL : &vdnn_cuda_op_pool;
}

static vdnn_status win_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const cuda_op_impl *impl = pick(d);
    if (impl) return impl->query(b, d, info, err);
    vdnn_status st = vdnn_op_check_pool(d, err);
    if (st) return st;
    const bool max = d->kind == VDNN_LAYER_MAXPOOL;
    *info = (vdnn_op_info){.aux_bytes = max ? vdnn_shape_count(d->out) * sizeof(int32_t) : 0};
    return VDNN_OK;
}

/* The op keeps the implementation picked for its description: forward and backward then go straight to it. */
static vdnn_status win_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    const cuda_op_impl *impl = pick(&op->d);
    if (!impl) return vdnn_op_check_pool(&op->d, err);
    op->impl = impl;
    return impl->create ? impl->create(b, op, err) : VDNN_OK;
}

static vdnn_cuda_pool_geom geom(const vdnn_op_desc *d)
{
    const vdnn_layer_params *p = &d->p;
    return (vdnn_cuda_pool_geom){d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.h, d->out.w, p->kernel_h,
                                 p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w};
}

static vdnn_status win_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    vdnn_status st = vdnn_cuda_need_io(a, name, err);
    if (st) return st;
    const bool max = op->d.kind == VDNN_LAYER_MAXPOOL;
    /* Without aux (evaluation) max pooling keeps no argmax. */
    return vdnn_cuda_check(vdnn_cuda_k_pool_win_fwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), max, a->y, max ? (int32_t *)a->aux : NULL,
                                                    a->x[0], geom(&op->d), op->d.p.exclude_pad),
                           err, "%s forward kernel (own windows)", name);
}

static vdnn_status win_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    const bool max = op->d.kind == VDNN_LAYER_MAXPOOL;
    if (!a->dx[0]) return VDNN_OK;
    if (!a->dy || (max && !a->aux))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: NULL %s", name, a->dy ? "argmax (aux)" : "dy");
    return vdnn_cuda_check(vdnn_cuda_k_pool_win_bwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), max, a->dx[0], a->dy,
                                                    (const int32_t *)a->aux, geom(&op->d), op->d.p.exclude_pad),
                           err, "%s backward kernel (own windows)", name);
}

const cuda_op_impl vdnn_cuda_op_pooling = {
    .query = win_query,
    .create = win_create,
    .forward = win_forward,
    .backward = win_backward,
};
