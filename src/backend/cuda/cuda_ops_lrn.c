/* LRN on CUDA: cuDNN cross-channel local response normalization (PyTorch LocalResponseNorm), in batch chunks where a
 * tensor would exceed cuDNN's size; backward reads x and y. 16-bit maps run own kernels instead (cuDNN's LRN is not
 * documented for bf16), whose backward recomputes the window sums from x and reads no y. */
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct lrn_state {
    cuda_chunks ch;
    cuda_chunk_tensor t; /* x, y, dy and dx share it */
    cudnnLRNDescriptor_t ld;
} lrn_state;

static vdnn_status lrn_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: %d inputs (needs exactly 1)", d->n_inputs);
    if (!vdnn_cuda_same_shape(d->in[0], d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: output %dx%dx%dx%d differs from input %dx%dx%dx%d", d->out.n,
                         d->out.c, d->out.h, d->out.w, d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w);
    /* Only odd windows are centred the same way by cuDNN and PyTorch (as on the CPU backend). */
    if (p->lrn_size < 1 || p->lrn_size % 2 == 0)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "lrn: size %d (must be odd and positive)", p->lrn_size);
    if (!(p->lrn_k > 0.f) || !(p->lrn_alpha >= 0.f) || !(p->lrn_beta >= 0.f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn: k=%g alpha=%g beta=%g (need k > 0, alpha >= 0, beta >= 0)",
                         (double)p->lrn_k, (double)p->lrn_alpha, (double)p->lrn_beta);
    if (p->lrn_size > CUDNN_LRN_MAX_N || p->lrn_k < CUDNN_LRN_MIN_K || p->lrn_beta < CUDNN_LRN_MIN_BETA)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "lrn: size %d, k=%g, beta=%g outside cuDNN's range (size <= %d, k >= %g, beta >= %g)",
                         p->lrn_size, (double)p->lrn_k, (double)p->lrn_beta, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K,
                         CUDNN_LRN_MIN_BETA);
    return VDNN_OK;
}

static void lrn_free(lrn_state *s)
{
    vdnn_cuda_chunk_tensor_free(&s->t);
    if (s->ld) cudnnDestroyLRNDescriptor(s->ld);
    s->ld = NULL;
}

static vdnn_status lrn_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    cuda_chunks ch;
    vdnn_status st = lrn_check(d, err);
    if (!st) st = vdnn_cuda_chunks(b, d, "lrn", &ch, err);
    if (!st) *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = !vdnn_cuda_half(d)};
    return st;
}

static vdnn_status lrn_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    const vdnn_layer_params *p = &op->d.p;
    lrn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "lrn: out of memory");
    vdnn_status st = lrn_check(&op->d, err);
    if (!st && vdnn_cuda_half(&op->d)) { /* own kernels: nothing of cuDNN's to set up */
        op->state = s;
        return VDNN_OK;
    }
    if (!st) st = vdnn_cuda_chunks(b, &op->d, "lrn", &s->ch, err);
    if (!st) st = vdnn_cuda_chunk_tensor(&s->t, op->d.out, op->d.dtype, &s->ch, "lrn data", err);
    if (!st) st = VDNN_CUDNN_CHECK(cudnnCreateLRNDescriptor(&s->ld), err, "lrn: cudnnCreateLRNDescriptor");
    /* cuDNN, like PyTorch, divides alpha by the window size. */
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnSetLRNDescriptor(s->ld, (unsigned)p->lrn_size, p->lrn_alpha, p->lrn_beta, p->lrn_k),
                              err, "lrn: cudnnSetLRNDescriptor (size %d, alpha %g, beta %g, k %g)", p->lrn_size,
                              (double)p->lrn_alpha, (double)p->lrn_beta, (double)p->lrn_k);
    if (st) {
        lrn_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void lrn_destroy(cuda_backend *b, vdnn_op *op)
{
    if (!op->state) return;
    lrn_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_cuda_lrn_geom lrn_geom(const vdnn_op_desc *d)
{
    const vdnn_shape s = d->in[0];
    return (vdnn_cuda_lrn_geom){s.n, s.c, (size_t)s.h * (size_t)s.w, d->p.lrn_size, d->p.lrn_alpha, d->p.lrn_beta,
                                d->p.lrn_k};
}

static vdnn_status lrn_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    vdnn_status st = vdnn_cuda_need_io(a, "lrn", err);
    if (st) return st;
    if (vdnn_cuda_half(&op->d))
        return vdnn_cuda_check(vdnn_cuda_k_lrn_fwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->y, a->x[0],
                                                   lrn_geom(&op->d)),
                               err, "lrn forward kernel");
    const size_t step = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.out);
    for (int i = 0; !st && i < s->ch.count; i++) {
        cudnnTensorDescriptor_t t = vdnn_cuda_chunk_desc(&s->t, &s->ch, i);
        st = VDNN_CUDNN_CHECK(cudnnLRNCrossChannelForward(b->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, t,
                                                          a->x[0] + i * step, &zero, t, a->y + i * step),
                              err, "cudnnLRNCrossChannelForward (chunk %d of %d)", i + 1, s->ch.count);
    }
    return st;
}

static vdnn_status lrn_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    if (vdnn_cuda_half(&op->d)) {
        if (!a->x[0] || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn backward: NULL %s", a->x[0] ? "dy" : "x");
        return vdnn_cuda_check(vdnn_cuda_k_lrn_bwd(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(&op->d), a->dx[0],
                                                   a->x[0], a->dy, lrn_geom(&op->d)),
                               err, "lrn backward kernel");
    }
    if (!a->x[0] || !a->y || !a->dy)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn backward: NULL %s", !a->x[0] ? "x" : !a->y ? "y" : "dy");
    const size_t step = (size_t)s->ch.per * vdnn_cuda_image_values(op->d.out);
    vdnn_status st = VDNN_OK;
    for (int i = 0; !st && i < s->ch.count; i++) {
        cudnnTensorDescriptor_t t = vdnn_cuda_chunk_desc(&s->t, &s->ch, i);
        const size_t o = i * step;
        st = VDNN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(b->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, t,
                                                           a->y + o, t, a->dy + o, t, a->x[0] + o, &zero, t,
                                                           a->dx[0] + o),
                              err, "cudnnLRNCrossChannelBackward (chunk %d of %d)", i + 1, s->ch.count);
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_lrn = {
    .query = lrn_query,
    .create = lrn_create,
    .destroy = lrn_destroy,
    .forward = lrn_forward,
    .backward = lrn_backward,
};
