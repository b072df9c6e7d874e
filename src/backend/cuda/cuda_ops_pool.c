/* MAXPOOL and AVGPOOL on CUDA: cuDNN pooling (maps of any type), in batch chunks where a tensor would exceed cuDNN's
 * size. cuDNN's max-pooling backward finds the maxima again from x and y instead of keeping indices, so max pooling
 * reports bwd_needs_x and bwd_needs_y and no aux; average pooling's backward is an own gather kernel and needs
 * neither. */
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/op_check.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct pool_state {
    cuda_chunks ch;
    cuda_chunk_tensor x, y;
    cudnnPoolingDescriptor_t pd;
    bool max;
    vdnn_cuda_pool_geom g;
} pool_state;

static void pool_free(pool_state *s)
{
    vdnn_cuda_chunk_tensor_free(&s->x);
    vdnn_cuda_chunk_tensor_free(&s->y);
    if (s->pd) cudnnDestroyPoolingDescriptor(s->pd);
    s->pd = NULL;
}

static vdnn_status pool_build(cuda_backend *b, const vdnn_op_desc *d, pool_state *s, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_pool(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    s->max = d->kind == VDNN_LAYER_MAXPOOL;
    s->g = (vdnn_cuda_pool_geom){d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.h, d->out.w,
                                 p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w};
    /* Max backward in CUDNN_POOLING_MAX scatters with atomics where windows overlap: on an H100, 3x3 stride-2
     * pooling gave a few different dx values from run to run, which would break bitwise equality across
     * memory policies. The deterministic mode always.
     * Average: PyTorch's count_include_pad=True divides by the whole window. */
    cudnnPoolingMode_t mode = !s->max ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_MAX_DETERMINISTIC;
    st = vdnn_cuda_chunks(b, d, s->max ? "maxpool" : "avgpool", &s->ch, err);
    if (!st) st = vdnn_cuda_chunk_tensor(&s->x, d->in[0], d->dtype, &s->ch, "pool input", err);
    if (!st) st = vdnn_cuda_chunk_tensor(&s->y, d->out, d->dtype, &s->ch, "pool output", err);
    if (!st) st = VDNN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&s->pd), err, "pool: cudnnCreatePoolingDescriptor");
    /* NaN propagates (as in PyTorch), so --poison shows reads of dead memory. */
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(s->pd, mode, CUDNN_PROPAGATE_NAN, p->kernel_h, p->kernel_w,
                                                          p->pad_h, p->pad_w, p->stride_h, p->stride_w),
                              err, "pool: cudnnSetPooling2dDescriptor (kernel %dx%d, pad %dx%d, stride %dx%d)",
                              p->kernel_h, p->kernel_w, p->pad_h, p->pad_w, p->stride_h, p->stride_w);
    int n, c, h, w;
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(s->pd, s->x.full, &n, &c, &h, &w), err,
                              "pool: cudnnGetPooling2dForwardOutputDim");
    if (!st && (n != s->ch.per || c != d->out.c || h != d->out.h || w != d->out.w))
        st = vdnn_fail(err, VDNN_ERR_SHAPE, "pool: cuDNN computes output %dx%dx%dx%d, the layer says %dx%dx%dx%d", n, c, h,
                       w, d->out.n, d->out.c, d->out.h, d->out.w);
    return st;
}

static vdnn_status pool_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_pool(d, err);
    if (st) return st;
    bool max = d->kind == VDNN_LAYER_MAXPOOL;
    cuda_chunks ch;
    st = vdnn_cuda_chunks(b, d, max ? "maxpool" : "avgpool", &ch, err);
    if (!st) *info = (vdnn_op_info){.bwd_needs_x = max, .bwd_needs_y = max};
    return st;
}

static vdnn_status pool_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    pool_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "pool: out of memory");
    vdnn_status st = pool_build(b, &op->d, s, err);
    if (st) {
        pool_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void pool_destroy(cuda_backend *b, vdnn_op *op)
{
    if (!op->state) return;
    pool_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status pool_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    pool_state *s = op->state;
    const char *name = s->max ? "maxpool" : "avgpool";
    vdnn_status st = vdnn_cuda_need_io(a, name, err);
    if (st) return st;
    const size_t xs = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.in[0]);
    const size_t ys = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.out);
    const vdnn_op_desc *d = &op->d;
    for (int i = 0; !st && i < s->ch.count; i++)
        st = VDNN_CUDNN_CHECK(cudnnPoolingForward(b->cudnn, s->pd, &one, vdnn_cuda_chunk_desc(&s->x, &s->ch, i),
                                                  vdnn_cuda_at(d, a->x[0], i * xs), &zero,
                                                  vdnn_cuda_chunk_desc(&s->y, &s->ch, i), vdnn_cuda_at(d, a->y, i * ys)),
                              err, "cudnnPoolingForward (%s, chunk %d of %d)", name, i + 1, s->ch.count);
    return st;
}

static vdnn_status pool_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    pool_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK; /* no parameters: nothing else to compute */
    if (!a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: dy is NULL", s->max ? "maxpool" : "avgpool");
    if (!s->max)
        return vdnn_cuda_check(vdnn_cuda_k_avgpool_bwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->dx[0],
                                                       a->dy, s->g),
                               err, "avgpool backward kernel");
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "maxpool backward: NULL %s (cuDNN finds the maxima again from x and y)",
                         a->x[0] ? "y" : "x");
    const size_t xs = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.in[0]);
    const size_t ys = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.out);
    vdnn_status st = VDNN_OK;
    const vdnn_op_desc *d = &op->d;
    for (int i = 0; !st && i < s->ch.count; i++) {
        cudnnTensorDescriptor_t x = vdnn_cuda_chunk_desc(&s->x, &s->ch, i), y = vdnn_cuda_chunk_desc(&s->y, &s->ch, i);
        st = VDNN_CUDNN_CHECK(cudnnPoolingBackward(b->cudnn, s->pd, &one, y, vdnn_cuda_at(d, a->y, i * ys), y,
                                                   vdnn_cuda_at(d, a->dy, i * ys), x, vdnn_cuda_at(d, a->x[0], i * xs),
                                                   &zero, x, vdnn_cuda_at(d, a->dx[0], i * xs)),
                              err, "cudnnPoolingBackward (maxpool, chunk %d of %d)", i + 1, s->ch.count);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_pool = {
    .query = pool_query,
    .create = pool_create,
    .destroy = pool_destroy,
    .forward = pool_forward,
    .backward = pool_backward,
};
