/* RELU on the CPU: oneDNN eltwise ReLU whose backward reads the output, so forward may run in place. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

typedef struct relu_state {
    cpu_dnnl_step fwd, bwd;
} relu_state;

static vdnn_status relu_build(cpu_backend *be, const vdnn_op_desc *d, bool make, relu_state *s, vdnn_error *err)
{
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "relu: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n, out.c,
                         out.h, out.w, in.n, in.c, in.h, in.w);
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    vdnn_status st = vdnn_cpu_dnnl_md(&md, 4, dims, dnnl_nchw, "relu: data descriptor", err);
    if (st) return st;
    /* The _use_dst_for_bwd variant lets backward read y, so x may be overwritten in place. */
    const dnnl_alg_kind_t alg = dnnl_eltwise_relu_use_dst_for_bwd;
    dnnl_eltwise_desc_t ed;
    st = vdnn_cpu_dnnl_check(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_training, alg, &md, 0.f, 0.f),
                             "relu: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ed, NULL, make, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, 2, &s->fwd,
                                     "relu forward", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_eltwise_backward_desc_init(&ed, alg, &md, &md, 0.f, 0.f),
                                 "relu: backward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ed, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DST, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC}, 3, &s->bwd,
                                     "relu backward", err);
    return st;
}

static void relu_free(relu_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status relu_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    relu_state s = {0};
    vdnn_status st = relu_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = s.bwd.scratch_bytes,
            .bwd_needs_y = true,
            .inplace_ok = true,
            .bwd_inplace_ok = true, /* element-wise: oneDNN allows diff_src == diff_dst */
        };
    }
    relu_free(&s);
    return st;
}

static vdnn_status relu_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    relu_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "relu: out of memory");
    vdnn_status st = relu_build(be, &op->d, true, s, err);
    if (st) {
        relu_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void relu_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    relu_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status relu_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "relu forward", err);
}

static vdnn_status relu_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    relu_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    void *ptrs[] = {a->y, (void *)a->dy, a->dx[0]};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, a->ws, "relu backward", err);
}

const cpu_op_impl vdnn_cpu_op_relu = {
    .query = relu_query,
    .create = relu_create,
    .destroy = relu_destroy,
    .forward = relu_forward,
    .backward = relu_backward,
};
