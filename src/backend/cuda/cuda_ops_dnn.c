/* MAXPOOL, AVGPOOL, RELU and LRN on CUDA with cuDNN. cuDNN's backward passes recompute from x and y instead of
 * keeping indices, so these ops report bwd_needs_x / bwd_needs_y and no aux. Average pooling's backward is an own
 * gather kernel, which needs neither. */
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

static const float one = 1.0f, zero = 0.0f;

static bool same_shape(vdnn_shape a, vdnn_shape b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

static vdnn_status need_io(const vdnn_op_args *a, const char *name, vdnn_error *err)
{
    if (!a->x[0] || !a->y) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: NULL %s", name, a->x[0] ? "output" : "input");
    return VDNN_OK;
}

/* ---------------- pooling ---------------- */

typedef struct pool_state {
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t pd;
    bool max;
    vdnn_cuda_pool_geom g;
} pool_state;

static vdnn_status pool_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    const char *name = d->kind == VDNN_LAYER_MAXPOOL ? "maxpool" : "avgpool";
    if (d->kind != VDNN_LAYER_MAXPOOL && d->kind != VDNN_LAYER_AVGPOOL)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "pool: layer kind %d is not a pooling", (int)d->kind);
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %d inputs (needs exactly 1)", name, d->n_inputs);
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
        2 * p->pad_h > p->kernel_h || 2 * p->pad_w > p->kernel_w)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "%s: kernel %dx%d, stride %dx%d, pad %dx%d out of range (pad at most half the kernel)", name,
                         p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
    int oh = vdnn_cuda_window_out(in.h, p->kernel_h, p->stride_h, p->pad_h);
    int ow = vdnn_cuda_window_out(in.w, p->kernel_w, p->stride_w, p->pad_w);
    if (out.n != in.n || out.c != in.c || out.h != oh || out.w != ow || oh < 1 || ow < 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: output %dx%dx%dx%d does not match input %dx%dx%dx%d (expected %dx%dx%dx%d)",
                         name, out.n, out.c, out.h, out.w, in.n, in.c, in.h, in.w, in.n, in.c, oh, ow);
    return VDNN_OK;
}

static void pool_free(pool_state *s)
{
    vdnn_cuda_tensor_free(&s->x);
    vdnn_cuda_tensor_free(&s->y);
    if (s->pd) cudnnDestroyPoolingDescriptor(s->pd);
    s->pd = NULL;
}

static vdnn_status pool_build(cuda_backend *b, const vdnn_op_desc *d, pool_state *s, vdnn_error *err)
{
    vdnn_status st = pool_check(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    s->max = d->kind == VDNN_LAYER_MAXPOOL;
    s->g = (vdnn_cuda_pool_geom){d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.h, d->out.w,
                                 p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w};
    /* Max backward may scatter with atomics where windows overlap; the deterministic mode avoids that.
     * Average: PyTorch's count_include_pad=True divides by the whole window. */
    cudnnPoolingMode_t mode = !s->max ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                              : b->opt.deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                     : CUDNN_POOLING_MAX;
    st = vdnn_cuda_tensor(&s->x, d->in[0], "pool input", err);
    if (!st) st = vdnn_cuda_tensor(&s->y, d->out, "pool output", err);
    if (!st) st = vdnn_cudnn_check(cudnnCreatePoolingDescriptor(&s->pd), err, "pool: cudnnCreatePoolingDescriptor");
    /* NaN propagates (as in PyTorch), so --poison shows reads of dead memory. */
    if (!st)
        st = vdnn_cudnn_check(cudnnSetPooling2dDescriptor(s->pd, mode, CUDNN_PROPAGATE_NAN, p->kernel_h, p->kernel_w,
                                                          p->pad_h, p->pad_w, p->stride_h, p->stride_w),
                              err, "pool: cudnnSetPooling2dDescriptor (kernel %dx%d, pad %dx%d, stride %dx%d)",
                              p->kernel_h, p->kernel_w, p->pad_h, p->pad_w, p->stride_h, p->stride_w);
    int n, c, h, w;
    if (!st)
        st = vdnn_cudnn_check(cudnnGetPooling2dForwardOutputDim(s->pd, s->x, &n, &c, &h, &w), err,
                              "pool: cudnnGetPooling2dForwardOutputDim");
    if (!st && (n != d->out.n || c != d->out.c || h != d->out.h || w != d->out.w))
        st = vdnn_fail(err, VDNN_ERR_SHAPE, "pool: cuDNN computes output %dx%dx%dx%d, the layer says %dx%dx%dx%d", n, c, h,
                       w, d->out.n, d->out.c, d->out.h, d->out.w);
    return st;
}

static vdnn_status pool_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = pool_check(d, err);
    if (st) return st;
    bool max = d->kind == VDNN_LAYER_MAXPOOL;
    *info = (vdnn_op_info){.bwd_needs_x = max, .bwd_needs_y = max};
    return VDNN_OK;
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
    vdnn_status st = need_io(a, name, err);
    if (st) return st;
    return vdnn_cudnn_check(cudnnPoolingForward(b->cudnn, s->pd, &one, s->x, a->x[0], &zero, s->y, a->y), err,
                            "cudnnPoolingForward (%s)", name);
}

static vdnn_status pool_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    pool_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK; /* no parameters: nothing else to compute */
    if (!a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: dy is NULL", s->max ? "maxpool" : "avgpool");
    if (!s->max)
        return vdnn_cuda_check(vdnn_cuda_k_avgpool_bwd(b->stream[VDNN_QUEUE_COMPUTE], a->dx[0], a->dy, s->g), err,
                               "avgpool backward kernel");
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "maxpool backward: NULL %s (cuDNN finds the maxima again from x and y)",
                         a->x[0] ? "y" : "x");
    return vdnn_cudnn_check(cudnnPoolingBackward(b->cudnn, s->pd, &one, s->y, a->y, s->y, a->dy, s->x, a->x[0], &zero,
                                                 s->x, a->dx[0]),
                            err, "cudnnPoolingBackward (maxpool)");
}

const cuda_op_impl vdnn_cuda_op_pool = {
    .query = pool_query,
    .create = pool_create,
    .destroy = pool_destroy,
    .forward = pool_forward,
    .backward = pool_backward,
};

/* ---------------- relu ---------------- */

typedef struct relu_state {
    cudnnTensorDescriptor_t t;
    cudnnActivationDescriptor_t act;
} relu_state;

static vdnn_status relu_check(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: %d inputs (needs exactly 1)", d->n_inputs);
    if (!same_shape(d->in[0], d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: output %dx%dx%dx%d differs from input %dx%dx%dx%d", d->out.n,
                         d->out.c, d->out.h, d->out.w, d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w);
    return VDNN_OK;
}

static void relu_free(relu_state *s)
{
    vdnn_cuda_tensor_free(&s->t);
    if (s->act) cudnnDestroyActivationDescriptor(s->act);
    s->act = NULL;
}

static vdnn_status relu_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = relu_check(d, err);
    if (st) return st;
    /* Backward reads y (y > 0 exactly where x > 0), so forward may overwrite x. */
    *info = (vdnn_op_info){.bwd_needs_y = true, .inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status relu_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    relu_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "relu: out of memory");
    vdnn_status st = relu_check(&op->d, err);
    if (!st) st = vdnn_cuda_tensor(&s->t, op->d.out, "relu data", err);
    if (!st) st = vdnn_cudnn_check(cudnnCreateActivationDescriptor(&s->act), err, "relu: cudnnCreateActivationDescriptor");
    if (!st)
        st = vdnn_cudnn_check(cudnnSetActivationDescriptor(s->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), err,
                              "relu: cudnnSetActivationDescriptor");
    if (st) {
        relu_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void relu_destroy(cuda_backend *b, vdnn_op *op)
{
    if (!op->state) return;
    relu_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status relu_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    vdnn_status st = need_io(a, "relu", err);
    if (st) return st;
    /* In place (x == y) is allowed with identical descriptors. */
    return vdnn_cudnn_check(cudnnActivationForward(b->cudnn, s->act, &one, s->t, a->x[0], &zero, s->t, a->y), err,
                            "cudnnActivationForward (relu)");
}

static vdnn_status relu_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    if (!a->y || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "relu backward: NULL %s", a->y ? "dy" : "y");
    /* y stands in for x: x itself may be gone (in place), and relu's derivative is the same read from either. */
    return vdnn_cudnn_check(cudnnActivationBackward(b->cudnn, s->act, &one, s->t, a->y, s->t, a->dy, s->t, a->y, &zero,
                                                    s->t, a->dx[0]),
                            err, "cudnnActivationBackward (relu)");
}

const cuda_op_impl vdnn_cuda_op_relu = {
    .query = relu_query,
    .create = relu_create,
    .destroy = relu_destroy,
    .forward = relu_forward,
    .backward = relu_backward,
};

/* ---------------- lrn ---------------- */

typedef struct lrn_state {
    cudnnTensorDescriptor_t t;
    cudnnLRNDescriptor_t ld;
} lrn_state;

static vdnn_status lrn_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: %d inputs (needs exactly 1)", d->n_inputs);
    if (!same_shape(d->in[0], d->out))
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
    vdnn_cuda_tensor_free(&s->t);
    if (s->ld) cudnnDestroyLRNDescriptor(s->ld);
    s->ld = NULL;
}

static vdnn_status lrn_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = lrn_check(d, err);
    if (st) return st;
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = true};
    return VDNN_OK;
}

static vdnn_status lrn_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    const vdnn_layer_params *p = &op->d.p;
    lrn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "lrn: out of memory");
    vdnn_status st = lrn_check(&op->d, err);
    if (!st) st = vdnn_cuda_tensor(&s->t, op->d.out, "lrn data", err);
    if (!st) st = vdnn_cudnn_check(cudnnCreateLRNDescriptor(&s->ld), err, "lrn: cudnnCreateLRNDescriptor");
    /* cuDNN, like PyTorch, divides alpha by the window size. */
    if (!st)
        st = vdnn_cudnn_check(cudnnSetLRNDescriptor(s->ld, (unsigned)p->lrn_size, p->lrn_alpha, p->lrn_beta, p->lrn_k),
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

static vdnn_status lrn_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    vdnn_status st = need_io(a, "lrn", err);
    if (st) return st;
    return vdnn_cudnn_check(cudnnLRNCrossChannelForward(b->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, s->t,
                                                        a->x[0], &zero, s->t, a->y),
                            err, "cudnnLRNCrossChannelForward");
}

static vdnn_status lrn_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    if (!a->x[0] || !a->y || !a->dy)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn backward: NULL %s", !a->x[0] ? "x" : !a->y ? "y" : "dy");
    return vdnn_cudnn_check(cudnnLRNCrossChannelBackward(b->cudnn, s->ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, s->t, a->y,
                                                         s->t, a->dy, s->t, a->x[0], &zero, s->t, a->dx[0]),
                            err, "cudnnLRNCrossChannelBackward");
}

const cuda_op_impl vdnn_cuda_op_lrn = {
    .query = lrn_query,
    .create = lrn_create,
    .destroy = lrn_destroy,
    .forward = lrn_forward,
    .backward = lrn_backward,
};
