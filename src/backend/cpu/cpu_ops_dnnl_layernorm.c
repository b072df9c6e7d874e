/* LAYERNORM on the CPU: oneDNN layer normalization over the last dimension (w) of plain rows, fp32 maps, or bf16
 * maps where the CPU has AVX-512 BF16 (elsewhere they reach it widened: cpu_ops_widen.c); statistics, scale and
 * shift fp32 in both. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Forward in training leaves each row's mean and variance in aux (rows means, then rows variances), which backward
 * reads instead of summing again. oneDNN's backward always writes the input gradient, so when dx is not wanted (a
 * layer norm right after the data) it goes to the workspace:
 *   backward: [dx when not wanted][scratchpad] */
typedef struct ln_state {
    cpu_dnnl_step fwd, bwd;
    size_t rows, dx_bytes, b_scratch;
} ln_state;

static vdnn_status ln_build(cpu_backend *be, const vdnn_op_desc *d, bool make, ln_state *s, vdnn_error *err)
{
    const vdnn_shape in = d->in[0], out = d->out;
    if (d->dtype != VDNN_DTYPE_F32 && (d->dtype != VDNN_DTYPE_BF16 || !be->bf16))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "layernorm: only fp32 or bf16 maps on the CPU (no %s path)",
                         vdnn_dtype_name(d->dtype));
    if (d->n_inputs != 1 || in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "layernorm: output %dx%dx%dx%d differs from input %dx%dx%dx%d (one "
                         "input)", out.n, out.c, out.h, out.w, in.n, in.c, in.h, in.w);
    if (!(d->p.bn_eps > 0.0f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "layernorm: eps %g must be above 0", (double)d->p.bn_eps);
    s->rows = (size_t)in.n * (size_t)in.c * (size_t)in.h;
    const dnnl_dim_t dims[2] = {(dnnl_dim_t)s->rows, in.w};
    dnnl_memory_desc_t md;
    vdnn_status st = vdnn_cpu_dnnl_md_of(&md, 2, dims, d->dtype, dnnl_ab, "layernorm: data descriptor", err);
    if (st) return st;
    const unsigned flags = dnnl_use_scale | dnnl_use_shift;
    dnnl_layer_normalization_desc_t ld;
    const dnnl_prop_kind_t prop = d->training ? dnnl_forward_training : dnnl_forward_inference;
    st = vdnn_cpu_dnnl_check(dnnl_layer_normalization_forward_desc_init(&ld, prop, &md, NULL, d->p.bn_eps, flags),
                             "layernorm: forward descriptor", err);
    if (!st && d->training)
        st = vdnn_cpu_dnnl_step_init(be, &ld, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                                                   DNNL_ARG_MEAN, DNNL_ARG_VARIANCE},
                                     6, &s->fwd, "layernorm forward", err);
    if (!st && !d->training)
        st = vdnn_cpu_dnnl_step_init(be, &ld, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT}, 4,
                                     &s->fwd, "layernorm forward", err);
    if (st || !d->training) return st;
    st = vdnn_cpu_dnnl_check(dnnl_layer_normalization_backward_desc_init(&ld, dnnl_backward, &md, &md, NULL,
                                                                         d->p.bn_eps, flags),
                             "layernorm: backward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ld, &s->fwd, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST,
                                                   DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_DIFF_SRC,
                                                   DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT},
                                     9, &s->bwd, "layernorm backward", err);
    if (st) return st;
    size_t used = 0;
    vdnn_cpu_ws_take(&used, s->rows * (size_t)in.w * vdnn_dtype_size(d->dtype));
    s->b_scratch = vdnn_cpu_ws_take(&used, s->bwd.scratch_bytes);
    s->dx_bytes = used + CPU_WS_SLACK;
    return VDNN_OK;
}

static void ln_free(ln_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status ln_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    ln_state s = {0};
    vdnn_status st = ln_build(be, d, false, &s, err);
    if (!st)
        *info = (vdnn_op_info){
            .aux_bytes = d->training ? 2 * s.rows * sizeof(float) : 0,
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = s.dx_bytes,
            .bwd_needs_x = d->training,
        };
    ln_free(&s);
    return st;
}

static vdnn_status ln_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    ln_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "layernorm: out of memory");
    vdnn_status st = ln_build(be, &op->d, true, s, err);
    if (st) {
        ln_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void ln_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    ln_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status ln_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    ln_state *s = op->state;
    if (!a->x[0] || !a->y || !a->w || !a->b || (op->d.training && !a->aux))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "layernorm forward: x, y, w, b%s must be given",
                         op->d.training ? " and aux" : "");
    void *ptrs[] = {(void *)a->x[0], a->y, (void *)a->w, (void *)a->b, a->aux, a->aux ? a->aux + s->rows : NULL};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "layernorm forward", err);
}

static vdnn_status ln_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    ln_state *s = op->state;
    if (!a->dx[0] && !a->dw && !a->db) return VDNN_OK;
    if (!op->d.training) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "layernorm backward: made for inference");
    /* oneDNN 2.6 asks for the shift in backward too, though the gradients do not depend on it. */
    if (!a->x[0] || !a->aux || !a->dy || !a->w || !a->b || !a->dw || !a->db || (!a->dx[0] && !a->ws))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "layernorm backward: x, aux, dy, w, b, dw, db and dx or the "
                         "workspace must be given");
    char *ws = vdnn_cpu_ws_align(a->ws);
    void *dx = a->dx[0] ? (void *)a->dx[0] : (void *)ws;
    void *ptrs[] = {(void *)a->x[0], a->aux, a->aux + s->rows, (void *)a->dy, (void *)a->w, (void *)a->b, dx, a->dw,
                    a->db};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, ws ? ws + s->b_scratch : NULL, "layernorm backward", err);
}

const cpu_op_impl vdnn_cpu_op_layernorm = {
    .query = ln_query,
    .create = ln_create,
    .destroy = ln_destroy,
    .forward = ln_forward,
    .backward = ln_backward,
};
