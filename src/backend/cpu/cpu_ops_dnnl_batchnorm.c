/* BATCHNORM on the CPU: oneDNN batch normalization (batch or running statistics) plus PyTorch's running-stat update. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

typedef struct bn_state {
    cpu_dnnl_step fwd;
    cpu_dnnl_step bwd; /* training only */
    int c;
    size_t m;          /* values per channel: N*H*W */
    size_t hw;
} bn_state;

static vdnn_status bn_build(cpu_backend *be, const vdnn_op_desc *d, bool make, bn_state *s, vdnn_error *err)
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
    s->c = in.c;
    s->hw = (size_t)in.h * (size_t)in.w;
    s->m = (size_t)in.n * s->hw;
    /* Like PyTorch: the unbiased variance of a single value per channel is undefined. */
    if (d->training && s->m < 2)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: training needs more than 1 value per channel (input %dx%dx%dx%d)",
                         in.n, in.c, in.h, in.w);
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    vdnn_status st = vdnn_cpu_dnnl_md(&md, 4, dims, dnnl_nchw, "batchnorm: data descriptor", err);
    if (st) return st;
    /* Separate scale and shift arguments take gamma and beta straight from the parameter arena. */
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    if (!d->training) flags |= dnnl_use_global_stats;
    dnnl_batch_normalization_desc_t bd;
    st = vdnn_cpu_dnnl_check(dnnl_batch_normalization_forward_desc_init(
                                 &bd, d->training ? dnnl_forward_training : dnnl_forward_inference, &md, p->bn_eps, flags),
                             "batchnorm: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &bd, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN,
                                                   DNNL_ARG_VARIANCE, DNNL_ARG_DST},
                                     6, &s->fwd, "batchnorm forward", err);
    if (st || !d->training) return st;
    st = vdnn_cpu_dnnl_check(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &md, &md, p->bn_eps, flags),
                             "batchnorm: backward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &bd, &s->fwd, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST,
                                                   DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DIFF_SRC,
                                                   DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT},
                                     9, &s->bwd, "batchnorm backward", err);
    return st;
}

static void bn_free(bn_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status bn_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    bn_state s = {0};
    vdnn_status st = bn_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .aux_bytes = d->training ? 2 * (size_t)s.c * sizeof(float) : 0,
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = s.bwd.scratch_bytes,
            .bwd_needs_x = d->training,
        };
    }
    bn_free(&s);
    return st;
}

static vdnn_status bn_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    bn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "batchnorm: out of memory");
    vdnn_status st = bn_build(be, &op->d, true, s, err);
    if (st) {
        bn_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void bn_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    bn_free(op->state);
    free(op->state);
    op->state = NULL;
}

/* PyTorch's rule: running = (1-m)*running + m*batch, the variance unbiased. */
static void update_running(const bn_state *s, float momentum, const float *batch, float *running)
{
    const int c = s->c;
    const double unbias = (double)s->m / (double)(s->m - 1);
    for (int i = 0; i < c; i++) {
        running[i] = (float)((1.0 - momentum) * running[i] + (double)momentum * batch[i]);
        running[c + i] = (float)((1.0 - momentum) * running[c + i] + (double)momentum * batch[c + i] * unbias);
    }
}

static vdnn_status bn_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    if (!op->d.training) {
        if (!a->stats) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm inference: NULL running statistics");
        void *ptrs[] = {(void *)a->x[0], (void *)a->w, (void *)a->b, a->stats, a->stats + s->c, a->y};
        return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "batchnorm inference", err);
    }
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: NULL aux (batch statistics)");
    if (a->update_stats && !a->stats)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: update_stats with NULL running statistics");
    void *ptrs[] = {(void *)a->x[0], (void *)a->w, (void *)a->b, a->aux, a->aux + s->c, a->y};
    vdnn_status st = vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "batchnorm forward", err);
    if (!st && a->update_stats) update_running(s, op->d.p.bn_momentum, a->aux, a->stats);
    return st;
}

/* dgamma and dbeta alone, for a batchnorm right on the data where no dx is wanted:
 * oneDNN's backward always writes dx and there is no buffer for it. */
static void param_grads(const bn_state *s, float eps, int n, const vdnn_op_args *a)
{
    const int c = s->c;
    const size_t hw = s->hw;
    const float *x = a->x[0], *dy = a->dy, *mean = a->aux, *var = a->aux + c;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; i++) {
            const float *xp = x + ((size_t)i * c + ch) * hw, *dp = dy + ((size_t)i * c + ch) * hw;
            for (size_t j = 0; j < hw; j++) {
                sdy += dp[j];
                sdyx += (double)dp[j] * ((double)xp[j] - mean[ch]);
            }
        }
        a->db[ch] = (float)sdy;
        a->dw[ch] = (float)(sdyx / sqrt((double)var[ch] + eps));
    }
}

static vdnn_status bn_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    if (!op->d.training)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: op was created for inference (running statistics)");
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL aux (batch statistics)");
    if (!a->x[0] || !a->dy || !a->w || !a->dw || !a->db)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL %s",
                         !a->x[0] ? "x" : !a->dy ? "dy" : !a->w ? "gamma" : !a->dw ? "dgamma" : "dbeta");
    if (!a->dx[0]) {
        param_grads(s, op->d.p.bn_eps, op->d.in[0].n, a);
        return VDNN_OK;
    }
    /* oneDNN wants beta bound in backward although no gradient depends on it;
     * gamma has the same shape and stands in when the caller passes no beta. */
    const float *beta = a->b ? a->b : a->w;
    void *ptrs[] = {(void *)a->x[0], a->aux,   a->aux + s->c, (void *)a->dy, (void *)a->w,
                    (void *)beta,    a->dx[0], a->dw,         a->db};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, a->ws, "batchnorm backward", err);
}

const cpu_op_impl vdnn_cpu_op_batchnorm = {
    .query = bn_query,
    .create = bn_create,
    .destroy = bn_destroy,
    .forward = bn_forward,
    .backward = bn_backward,
};
