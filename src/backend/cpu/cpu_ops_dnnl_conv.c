/* CONV on the CPU: oneDNN convolution forward, backward-data and backward-weights on plain nchw/oihw tensors. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

typedef struct conv_state {
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
} conv_state;

static vdnn_status conv_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: %d inputs (needs exactly 1)", d->n_inputs);
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv: kernel %dx%d, stride %dx%d, pad %dx%d out of range",
                         p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
    if (p->groups < 1 || p->filters < 1 || in.c % p->groups || p->filters % p->groups)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: %d input channels and %d filters do not split into %d groups",
                         in.c, p->filters, p->groups);
    int oh = vdnn_cpu_window_out(in.h, p->kernel_h, p->stride_h, p->pad_h);
    int ow = vdnn_cpu_window_out(in.w, p->kernel_w, p->stride_w, p->pad_w);
    if (out.n != in.n || out.c != p->filters || out.h != oh || out.w != ow || oh < 1 || ow < 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: output %dx%dx%dx%d does not match input %dx%dx%dx%d (expected %dx%dx%dx%d)",
                         out.n, out.c, out.h, out.w, in.n, in.c, in.h, in.w, in.n, p->filters, oh, ow);
    return VDNN_OK;
}

static vdnn_status conv_build(cpu_backend *be, const vdnn_op_desc *d, bool make, conv_state *s, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    int g = p->groups;
    dnnl_memory_desc_t src, wei, bia, dst;
    const dnnl_dim_t src_dims[4] = {in.n, in.c, in.h, in.w};
    const dnnl_dim_t dst_dims[4] = {out.n, out.c, out.h, out.w};
    const dnnl_dim_t bias_dims[1] = {p->filters};
    /* PyTorch's (filters, C/groups, kh, kw) is oihw, or goihw with the group outermost. */
    const dnnl_dim_t w_dims[4] = {p->filters, in.c, p->kernel_h, p->kernel_w};
    const dnnl_dim_t gw_dims[5] = {g, p->filters / g, in.c / g, p->kernel_h, p->kernel_w};
    st = vdnn_cpu_dnnl_md(&src, 4, src_dims, dnnl_nchw, "conv: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&dst, 4, dst_dims, dnnl_nchw, "conv: destination descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&bia, 1, bias_dims, dnnl_a, "conv: bias descriptor", err);
    if (!st)
        st = g == 1 ? vdnn_cpu_dnnl_md(&wei, 4, w_dims, dnnl_oihw, "conv: weights descriptor", err)
                    : vdnn_cpu_dnnl_md(&wei, 5, gw_dims, dnnl_goihw, "conv: weights descriptor", err);
    if (st) return st;
    const dnnl_dims_t strides = {p->stride_h, p->stride_w};
    /* Same padding on both sides: oneDNN then floors the output size exactly as PyTorch does. */
    const dnnl_dims_t pad = {p->pad_h, p->pad_w};
    const dnnl_memory_desc_t *bias = p->bias ? &bia : NULL;

    dnnl_convolution_desc_t cd;
    st = vdnn_cpu_dnnl_check(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                                                 &src, &wei, bias, &dst, strides, pad, pad),
                             "conv: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &cd, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, 4,
                                     &s->fwd, "conv forward", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &src, &wei,
                                                                          &dst, strides, pad, pad),
                                 "conv: backward-data descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &cd, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, 3,
                                     &s->bwd_data, "conv backward-data", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &src, &wei,
                                                                             bias, &dst, strides, pad, pad),
                                 "conv: backward-weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &cd, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 4,
            &s->bwd_weights, "conv backward-weights", err);
    return st;
}

static void conv_free(conv_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

static vdnn_status conv_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    conv_state s = {0};
    vdnn_status st = conv_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = max_sz(s.bwd_data.scratch_bytes, s.bwd_weights.scratch_bytes),
            .bwd_needs_x = true, /* for the weight gradient */
        };
    }
    conv_free(&s);
    return st;
}

static vdnn_status conv_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "conv: out of memory");
    vdnn_status st = conv_build(be, &op->d, true, s, err);
    if (st) {
        conv_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void conv_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    conv_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status conv_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL bias");
    void *ptrs[] = {(void *)a->x[0], (void *)a->w, (void *)a->b, a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "conv forward", err);
}

static vdnn_status conv_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL bias gradient");
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        void *ptrs[] = {(void *)a->dy, (void *)a->w, a->dx[0]};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_data, ptrs, a->ws, "conv backward-data", err);
    }
    if (!st) {
        void *ptrs[] = {(void *)a->x[0], (void *)a->dy, a->dw, a->db};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_weights, ptrs, a->ws, "conv backward-weights", err);
    }
    return st;
}

const cpu_op_impl vdnn_cpu_op_conv = {
    .query = conv_query,
    .create = conv_create,
    .destroy = conv_destroy,
    .forward = conv_forward,
    .backward = conv_backward,
};
