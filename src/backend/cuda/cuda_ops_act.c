/* The element-wise activations on CUDA (sigmoid, hard-sigmoid, hard-swish, SiLU, clip, GELU): own kernels, one launch
 * per pass. Sigmoid, hard-sigmoid and clip read their slope from y, so forward may run in place; hard-swish,
 * SiLU and GELU read x. The same contract as the CPU backend's. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels_layers.h"
#include "backend/op_check.h"

static bool from_y(vdnn_layer_kind k)
{
    return k != VDNN_LAYER_HARDSWISH && k != VDNN_LAYER_SILU && k != VDNN_LAYER_GELU;
}

/* The kernels' activation and its two parameters. */
static vdnn_cuda_act act_of(const vdnn_op_desc *d, float *a, float *b)
{
    *a = *b = 0.0f;
    switch (d->kind) {
    case VDNN_LAYER_SIGMOID: return VDNN_CUDA_ACT_SIGMOID;
    case VDNN_LAYER_HARDSIGMOID: *a = d->p.alpha, *b = d->p.beta; return VDNN_CUDA_ACT_HARDSIGMOID;
    case VDNN_LAYER_HARDSWISH: return VDNN_CUDA_ACT_HARDSWISH;
    case VDNN_LAYER_SILU: return VDNN_CUDA_ACT_SILU;
    case VDNN_LAYER_GELU: return VDNN_CUDA_ACT_GELU;
    default: *a = d->p.clip_lo, *b = d->p.clip_hi; return VDNN_CUDA_ACT_CLIP;
    }
}

static vdnn_status act_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_act(d, err);
    if (st) return st;
    const bool y = from_y(d->kind);
    *info = (vdnn_op_info){.bwd_needs_x = !y, .bwd_needs_y = y, .inplace_ok = y, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status act_create(cuda_backend *b, vdnn_op *op, vdnn_error *err) { return vdnn_op_check_act(&op->d, err); }

static vdnn_status act_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    vdnn_status st = vdnn_cuda_need_io(a, name, err);
    if (st) return st;
    float p, q;
    const vdnn_cuda_act act = act_of(&op->d, &p, &q);
    const size_t n = vdnn_shape_count(op->d.out);
    return vdnn_cuda_check(vdnn_cuda_k_act_fwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), act, a->y, a->x[0], n, p, q), err,
                           "%s forward kernel (%zu values)", name, n);
}

static vdnn_status act_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    if (!a->dx[0]) return VDNN_OK;
    const bool y = from_y(op->d.kind);
    const float *v = y ? a->y : a->x[0];
    if (!v || !a->dy)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: NULL %s", name, a->dy ? (y ? "y" : "x") : "dy");
    float p, q;
    const vdnn_cuda_act act = act_of(&op->d, &p, &q);
    const size_t n = vdnn_shape_count(op->d.out);
    return vdnn_cuda_check(vdnn_cuda_k_act_bwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), act, a->dx[0], v, a->dy, n, p, q), err,
                           "%s backward kernel (%zu values)", name, n);
}

const cuda_op_impl vdnn_cuda_op_act = {
    .query = act_query,
    .create = act_create,
    .forward = act_forward,
    .backward = act_backward,
};
