/* MAXPOOL and AVGPOOL on the CPU: oneDNN pooling (fp32 or bf16 maps); max pooling keeps its argmax workspace in aux for backward. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"
#include "backend/op_check.h"

typedef struct pool_state {
    cpu_dnnl_step fwd;     /* training: max pooling writes the workspace */
    cpu_dnnl_step fwd_inf; /* max pooling without aux (nothing to keep for backward) */
    cpu_dnnl_step bwd;
    bool max;
} pool_state;

static vdnn_status pool_build(cpu_backend *be, const vdnn_op_desc *d, bool make, pool_state *s, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_pool(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    s->max = d->kind == VDNN_LAYER_MAXPOOL;
    /* PyTorch's avg_pool2d default count_include_pad=True divides by the full window. */
    dnnl_alg_kind_t alg = s->max ? dnnl_pooling_max : dnnl_pooling_avg_include_padding;
    dnnl_memory_desc_t src, dst;
    const dnnl_dim_t src_dims[4] = {in.n, in.c, in.h, in.w};
    const dnnl_dim_t dst_dims[4] = {out.n, out.c, out.h, out.w};
    st = vdnn_cpu_dnnl_md_of(&src, 4, src_dims, d->dtype, dnnl_nchw, "pool: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md_of(&dst, 4, dst_dims, d->dtype, dnnl_nchw, "pool: destination descriptor", err);
    if (st) return st;
    const dnnl_dims_t strides = {p->stride_h, p->stride_w};
    const dnnl_dims_t kernel = {p->kernel_h, p->kernel_w};
    const dnnl_dims_t dilation = {0, 0};
    const dnnl_dims_t pad = {p->pad_h, p->pad_w};
    const int fwd_args[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};

    dnnl_pooling_v2_desc_t pd;
    st = vdnn_cpu_dnnl_check(dnnl_pooling_v2_forward_desc_init(&pd, dnnl_forward_training, alg, &src, &dst, strides,
                                                               kernel, dilation, pad, pad),
                             "pool: forward descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_step_init(be, &pd, NULL, make, fwd_args, 3, &s->fwd, "pool forward", err);
    if (!st && s->max) {
        st = vdnn_cpu_dnnl_check(dnnl_pooling_v2_forward_desc_init(&pd, dnnl_forward_inference, alg, &src, &dst,
                                                                   strides, kernel, dilation, pad, pad),
                                 "pool: inference descriptor", err);
        if (!st) st = vdnn_cpu_dnnl_step_init(be, &pd, NULL, make, fwd_args, 2, &s->fwd_inf, "pool inference", err);
    }
    if (!st)
        st = vdnn_cpu_dnnl_check(
            dnnl_pooling_v2_backward_desc_init(&pd, alg, &src, &dst, strides, kernel, dilation, pad, pad),
            "pool: backward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &pd, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WORKSPACE, DNNL_ARG_DIFF_SRC}, 3,
                                     &s->bwd, "pool backward", err);
    return st;
}

static void pool_free(pool_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->fwd_inf);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status pool_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    pool_state s = {0};
    vdnn_status st = pool_build(be, d, false, &s, err);
    if (!st) {
        size_t fws = s.fwd.scratch_bytes > s.fwd_inf.scratch_bytes ? s.fwd.scratch_bytes : s.fwd_inf.scratch_bytes;
        *info = (vdnn_op_info){
            .aux_bytes = vdnn_cpu_dnnl_arg_bytes(&s.fwd, DNNL_ARG_WORKSPACE),
            .fwd_ws_bytes = fws,
            .bwd_ws_bytes = s.bwd.scratch_bytes,
        };
    }
    pool_free(&s);
    return st;
}

static vdnn_status pool_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    pool_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "pool: out of memory");
    vdnn_status st = pool_build(be, &op->d, true, s, err);
    if (st) {
        pool_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void pool_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    pool_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status pool_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    pool_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y, a->aux};
    /* Without aux there is nothing to keep for backward: evaluation passes. */
    if (s->max && !a->aux) return vdnn_cpu_dnnl_step_run(be, &s->fwd_inf, ptrs, a->ws, "maxpool inference", err);
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, s->max ? "maxpool forward" : "avgpool forward", err);
}

static vdnn_status pool_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    pool_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK; /* no parameters: nothing else to compute */
    void *ptrs[] = {(void *)a->dy, a->aux, a->dx[0]};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, a->ws, s->max ? "maxpool backward" : "avgpool backward", err);
}

const cpu_op_impl vdnn_cpu_op_pool = {
    .query = pool_query,
    .create = pool_create,
    .destroy = pool_destroy,
    .forward = pool_forward,
    .backward = pool_backward,
};
