/* RELU on CUDA: cuDNN activation; backward reads y (not x), so forward may run in place. */
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct relu_state {
    cudnnTensorDescriptor_t t;
    cudnnActivationDescriptor_t act;
} relu_state;

static vdnn_status relu_check(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: %d inputs (needs exactly 1)", d->n_inputs);
    if (!vdnn_cuda_same_shape(d->in[0], d->out))
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
    /* cuDNN allows dx == dy for activation backward, so the gradient may run in place too. */
    *info = (vdnn_op_info){.bwd_needs_y = true, .inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status relu_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    relu_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "relu: out of memory");
    vdnn_status st = relu_check(&op->d, err);
    if (!st) st = vdnn_cuda_tensor(&s->t, op->d.out, "relu data", err);
    if (!st) st = VDNN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&s->act), err, "relu: cudnnCreateActivationDescriptor");
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnSetActivationDescriptor(s->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), err,
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
    vdnn_status st = vdnn_cuda_need_io(a, "relu", err);
    if (st) return st;
    /* In place (x == y) is allowed with identical descriptors. */
    return VDNN_CUDNN_CHECK(cudnnActivationForward(b->cudnn, s->act, &one, s->t, a->x[0], &zero, s->t, a->y), err,
                            "cudnnActivationForward (relu)");
}

static vdnn_status relu_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    if (!a->y || !a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "relu backward: NULL %s", a->y ? "dy" : "y");
    /* y stands in for x: x itself may be gone (in place), and relu's derivative is the same read from either. */
    return VDNN_CUDNN_CHECK(cudnnActivationBackward(b->cudnn, s->act, &one, s->t, a->y, s->t, a->dy, s->t, a->y, &zero,
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
