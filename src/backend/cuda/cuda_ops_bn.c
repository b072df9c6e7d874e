/* BATCHNORM on CUDA: cuDNN spatial batch normalization. Training keeps cuDNN's saved batch mean and inverse standard
 * deviation in aux for backward (each at a 256-byte boundary), and cuDNN updates the running statistics itself with
 * PyTorch's rule (factor = momentum, the variance unbiased). With 16-bit maps cuDNN keeps gamma, beta and every
 * statistic in fp32 (its derived BN descriptor), as the backend contract wants. */
#include <stdint.h>
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

typedef struct bn_state {
    cudnnTensorDescriptor_t x;  /* x, y, dy and dx share it */
    cudnnTensorDescriptor_t bn; /* 1xCx1x1: gamma, beta, means, variances */
} bn_state;

static vdnn_status bn_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n,
                         out.c, out.h, out.w, in.n, in.c, in.h, in.w);
    if (!(p->bn_eps >= 0.f) || !(p->bn_momentum >= 0.f && p->bn_momentum <= 1.f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm: eps %g must be >= 0 and momentum %g in [0, 1]",
                         (double)p->bn_eps, (double)p->bn_momentum);
    if ((double)p->bn_eps < CUDNN_BN_MIN_EPSILON)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "batchnorm: eps %g is below cuDNN's minimum %g", (double)p->bn_eps,
                         (double)CUDNN_BN_MIN_EPSILON);
    /* Like PyTorch: the unbiased variance of a single value per channel is undefined. */
    if (d->training && (size_t)in.n * (size_t)in.h * (size_t)in.w < 2)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: training needs more than 1 value per channel (input %dx%dx%dx%d)",
                         in.n, in.c, in.h, in.w);
    return VDNN_OK;
}

/* Where the second half of aux (inverse standard deviations) starts, in floats: the first 256-byte boundary after
 * the C means, since cuDNN is handed both halves as separate arrays. */
static size_t bn_aux_second(int c) { return vdnn_cuda_align((size_t)c * sizeof(float)) / sizeof(float); }

/* The running variance follows the C running means in the net's statistics buffer (the layout checkpoints and the
 * CPU backend share), so it sits at a 256-byte boundary only when 4*C is a multiple of 256. Otherwise cuDNN gets
 * an aligned copy in the backend's scratch, copied back when cuDNN wrote it. */
static bool var_aligned(const float *var) { return ((uintptr_t)var % VDNN_CUDA_ALIGN) == 0; }

static vdnn_status var_stage(cuda_backend *b, float *var, int c, bool in, float **use, vdnn_error *err)
{
    *use = var;
    if (!var || var_aligned(var)) return VDNN_OK;
    if ((size_t)c * sizeof(float) > VDNN_CUDA_SUM_SCRATCH_BYTES)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "batchnorm: %d channels do not fit the backend's scratch", c);
    *use = (float *)b->sum_scratch;
    if (!in) return VDNN_OK;
    return vdnn_cuda_check(cudaMemcpyAsync(*use, var, (size_t)c * sizeof(float), cudaMemcpyDeviceToDevice,
                                           b->stream[VDNN_QUEUE_COMPUTE]),
                           err, "batchnorm: staging the running variance");
}

static vdnn_status var_unstage(cuda_backend *b, float *var, const float *used, int c, vdnn_error *err)
{
    if (!var || used == var) return VDNN_OK;
    return vdnn_cuda_check(cudaMemcpyAsync(var, used, (size_t)c * sizeof(float), cudaMemcpyDeviceToDevice,
                                           b->stream[VDNN_QUEUE_COMPUTE]),
                           err, "batchnorm: storing the running variance");
}

static void bn_free(bn_state *s)
{
    vdnn_cuda_tensor_free(&s->x);
    vdnn_cuda_tensor_free(&s->bn);
}

static vdnn_status bn_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = bn_check(d, err);
    if (st) return st;
    *info = (vdnn_op_info){
        .aux_bytes = d->training ? bn_aux_second(d->in[0].c) * sizeof(float) + (size_t)d->in[0].c * sizeof(float) : 0,
        .bwd_needs_x = d->training,
    };
    return VDNN_OK;
}

static vdnn_status bn_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    bn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "batchnorm: out of memory");
    vdnn_status st = bn_check(&op->d, err);
    if (!st) st = vdnn_cuda_tensor(&s->x, op->d.in[0], op->d.dtype, "batchnorm data", err);
    if (!st) st = VDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->bn), err, "batchnorm: cudnnCreateTensorDescriptor");
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(s->bn, s->x, CUDNN_BATCHNORM_SPATIAL), err,
                              "batchnorm: cudnnDeriveBNTensorDescriptor");
    if (st) {
        bn_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void bn_destroy(cuda_backend *b, vdnn_op *op)
{
    if (!op->state) return;
    bn_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status bn_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    const int c = d->in[0].c;
    const float one = 1.0f, zero = 0.0f;
    if (!a->x[0] || !a->y || !a->w || !a->b)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: NULL %s",
                         !a->x[0] ? "input" : !a->y ? "output" : !a->w ? "gamma" : "beta");
    if (a->reduce)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "batchnorm forward: synchronized batch norm (--sync-bn) runs on the CPU backend only; use "
                         "--no-sync-bn on GPUs");
    if (!d->training) {
        if (!a->stats) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm inference: NULL running statistics");
        float *var;
        vdnn_status st = var_stage(b, a->stats + c, c, true, &var, err);
        if (st) return st;
        return VDNN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(b->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                                        s->x, a->x[0], s->x, a->y, s->bn, a->w, a->b,
                                                                        a->stats, var, (double)d->p.bn_eps),
                                err, "cudnnBatchNormalizationForwardInference");
    }
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: NULL aux (batch statistics)");
    if (a->update_stats && !a->stats)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: update_stats with NULL running statistics");
    /* Running statistics: both pointers NULL leaves them alone (a recomputation must not count twice). */
    float *run_mean = a->update_stats ? a->stats : NULL;
    float *run_var = NULL;
    vdnn_status st = var_stage(b, a->update_stats ? a->stats + c : NULL, c, true, &run_var, err);
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(b->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, s->x,
                                                                     a->x[0], s->x, a->y, s->bn, a->w, a->b,
                                                                     (double)d->p.bn_momentum, run_mean, run_var,
                                                                     (double)d->p.bn_eps, a->aux, a->aux + bn_aux_second(c)),
                              err, "cudnnBatchNormalizationForwardTraining");
    if (!st && a->update_stats) st = var_unstage(b, a->stats + c, run_var, c, err);
    return st;
}

static vdnn_status bn_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    const vdnn_shape in = d->in[0];
    const float one = 1.0f, zero = 0.0f;
    if (!d->training)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: op was created for inference (running statistics)");
    if (a->reduce)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "batchnorm backward: synchronized batch norm (--sync-bn) runs on the CPU backend only; use "
                         "--no-sync-bn on GPUs");
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL aux (batch statistics)");
    if (!a->x[0] || !a->dy || !a->w || !a->dw || !a->db)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL %s",
                         !a->x[0] ? "x" : !a->dy ? "dy" : !a->w ? "gamma" : !a->dw ? "dgamma" : "dbeta");
    if (!a->dx[0])
        /* cuDNN's backward always writes dx; with no buffer for it, the parameter gradients alone. */
        return vdnn_cuda_check(vdnn_cuda_k_bn_param_grad(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(d), b->sum_scratch,
                                                         VDNN_CUDA_SUM_SCRATCH_BYTES, a->dw, a->db, a->x[0], a->dy,
                                                         a->aux, a->aux + bn_aux_second(in.c), in.n, in.c,
                                                         (size_t)in.h * (size_t)in.w),
                               err, "batchnorm backward: parameter gradient kernel");
    return VDNN_CUDNN_CHECK(cudnnBatchNormalizationBackward(b->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                            s->x, a->x[0], s->x, a->dy, s->x, a->dx[0], s->bn, a->w,
                                                            a->dw, a->db, (double)d->p.bn_eps, a->aux,
                                                            a->aux + bn_aux_second(in.c)),
                            err, "cudnnBatchNormalizationBackward");
}

const cuda_op_impl vdnn_cuda_op_batchnorm = {
    .query = bn_query,
    .create = bn_create,
    .destroy = bn_destroy,
    .forward = bn_forward,
    .backward = bn_backward,
};
