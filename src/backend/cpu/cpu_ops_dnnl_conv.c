/* CONV on the CPU: oneDNN convolution forward, backward-data and backward-weights in the layouts oneDNN prefers, copied from and to our plain nchw/oihw tensors. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Why blocked layouts: on plain nchw oneDNN 2.6 only offers its im2col+GEMM
 * convolution, several times slower than the direct JIT kernels it picks for
 * format_tag any (nChw16c and friends), most of all backward-weights of a
 * few-channel first layer. The copies in and out are cheap next to that. They
 * live in the op's workspace, so the planner counts them:
 *   forward:  [src][weights][dst][scratchpad]
 *   backward: [dy][weights or dweights][dx or x][scratchpad]
 * backward-data runs first, so backward-weights reuses its regions (and its copy
 * of dy when both chose the same layout). A piece whose layout is already plain
 * takes no room and the primitive uses the arena tensor in place. The workspace is
 * used from its first 64-byte boundary (CPU_WS_SLACK). */
typedef struct conv_state {
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
    cpu_dnnl_reorder f_src, f_wei, f_dst;      /* x -> src, w -> weights, dst -> y */
    cpu_dnnl_reorder d_dy, d_wei, d_dx;        /* dy -> D, w -> W, S -> dx */
    cpu_dnnl_reorder w_x, w_dy, w_dw;          /* x -> S, dy -> D, W -> dw */
    bool dy_shared;                            /* backward-weights reads the dy copy backward-data made */
    bool winograd;                             /* built with oneDNN's Winograd kernels (see conv_build) */
    size_t f_off[4], f_bytes;                  /* src, weights, dst, scratchpad */
    size_t b_off[4], b_bytes;                  /* D, W, S, scratchpad */
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

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* The convolution's descriptors with format_tag any where oneDNN picks the layout. */
typedef struct conv_mds {
    const dnnl_memory_desc_t *src, *wei, *bias, *dst;
    const dnnl_dim_t *strides, *pad;
} conv_mds;

static void conv_free(conv_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
    cpu_dnnl_reorder *rs[] = {&s->f_src, &s->f_wei, &s->f_dst, &s->d_dy, &s->d_wei,
                              &s->d_dx,  &s->w_x,   &s->w_dy,  &s->w_dw};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) vdnn_cpu_dnnl_reorder_fini(rs[i]);
}

/* Forward, backward-data and backward-weights primitives for one algorithm. */
static vdnn_status conv_prims(cpu_backend *be, const conv_mds *m, dnnl_alg_kind_t alg, bool make, conv_state *s,
                              vdnn_error *err)
{
    dnnl_convolution_desc_t cd;
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, m->src,
                                                                            m->wei, m->bias, m->dst, m->strides,
                                                                            m->pad, m->pad),
                                         "conv: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &cd, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, 4,
                                     &s->fwd, "conv forward", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_convolution_backward_data_desc_init(&cd, alg, m->src, m->wei, m->dst, m->strides,
                                                                          m->pad, m->pad),
                                 "conv: backward-data descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &cd, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, 3,
                                     &s->bwd_data, "conv backward-data", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_convolution_backward_weights_desc_init(&cd, alg, m->src, m->wei, m->bias, m->dst,
                                                                             m->strides, m->pad, m->pad),
                                 "conv: backward-weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &cd, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 4,
            &s->bwd_weights, "conv backward-weights", err);
    return st;
}

static vdnn_status conv_build(cpu_backend *be, const vdnn_op_desc *d, bool make, conv_state *s, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    int g = p->groups;
    dnnl_memory_desc_t src, wei, bia, dst, src_any, wei_any, dst_any;
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
    if (!st) st = vdnn_cpu_dnnl_md(&src_any, 4, src_dims, dnnl_format_tag_any, "conv: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&dst_any, 4, dst_dims, dnnl_format_tag_any, "conv: destination descriptor", err);
    if (!st)
        st = g == 1 ? vdnn_cpu_dnnl_md(&wei_any, 4, w_dims, dnnl_format_tag_any, "conv: weights descriptor", err)
                    : vdnn_cpu_dnnl_md(&wei_any, 5, gw_dims, dnnl_format_tag_any, "conv: weights descriptor", err);
    if (st) return st;
    const dnnl_dims_t strides = {p->stride_h, p->stride_w};
    /* Same padding on both sides: oneDNN then floors the output size exactly as PyTorch does. */
    const dnnl_dims_t pad = {p->pad_h, p->pad_w};
    const dnnl_memory_desc_t *bias = p->bias ? &bia : NULL;
    const conv_mds mds = {&src_any, &wei_any, bias, &dst_any, strides, pad};

    /* Winograd F(4x4, 3x3) needs a quarter of the direct kernels' multiplications; it
     * measured about twice as fast on ResNet's 16x16 and 8x8 layers, but slower below 8x8
     * (and its workspace grows with channels while there is little spatial work to save). */
    if (p->kernel_h == 3 && p->kernel_w == 3 && p->stride_h == 1 && p->stride_w == 1 && g == 1 && out.h >= 8 &&
        out.w >= 8) {
        vdnn_error wino_err = {0};
        if (conv_prims(be, &mds, dnnl_convolution_winograd, make, s, &wino_err) == VDNN_OK) s->winograd = true;
        else conv_free(s); /* not implemented for these channels: fall back to direct */
    }
    if (!s->winograd) st = conv_prims(be, &mds, dnnl_convolution_direct, make, s, err);
    if (st) return st;

    const char *rw = "conv: layout copy";
    const dnnl_memory_desc_t *f_src = vdnn_cpu_dnnl_arg_md(&s->fwd, DNNL_ARG_SRC);
    const dnnl_memory_desc_t *f_wei = vdnn_cpu_dnnl_arg_md(&s->fwd, DNNL_ARG_WEIGHTS);
    const dnnl_memory_desc_t *f_dst = vdnn_cpu_dnnl_arg_md(&s->fwd, DNNL_ARG_DST);
    const dnnl_memory_desc_t *d_dy = vdnn_cpu_dnnl_arg_md(&s->bwd_data, DNNL_ARG_DIFF_DST);
    const dnnl_memory_desc_t *d_wei = vdnn_cpu_dnnl_arg_md(&s->bwd_data, DNNL_ARG_WEIGHTS);
    const dnnl_memory_desc_t *d_dx = vdnn_cpu_dnnl_arg_md(&s->bwd_data, DNNL_ARG_DIFF_SRC);
    const dnnl_memory_desc_t *w_x = vdnn_cpu_dnnl_arg_md(&s->bwd_weights, DNNL_ARG_SRC);
    const dnnl_memory_desc_t *w_dy = vdnn_cpu_dnnl_arg_md(&s->bwd_weights, DNNL_ARG_DIFF_DST);
    const dnnl_memory_desc_t *w_dw = vdnn_cpu_dnnl_arg_md(&s->bwd_weights, DNNL_ARG_DIFF_WEIGHTS);
    st = vdnn_cpu_dnnl_reorder_init(be, &src, f_src, make, &s->f_src, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &wei, f_wei, make, &s->f_wei, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, f_dst, &dst, make, &s->f_dst, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &dst, d_dy, make, &s->d_dy, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &wei, d_wei, make, &s->d_wei, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, d_dx, &src, make, &s->d_dx, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &src, w_x, make, &s->w_x, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &dst, w_dy, make, &s->w_dy, rw, err);
    if (!st) st = vdnn_cpu_dnnl_reorder_init(be, w_dw, &wei, make, &s->w_dw, rw, err);
    if (st) return st;
    s->dy_shared = d_dy && w_dy && dnnl_memory_desc_equal(d_dy, w_dy);

    size_t used = 0, scratch = s->fwd.scratch_bytes;
    s->f_off[0] = vdnn_cpu_ws_take(&used, s->f_src.bytes);
    s->f_off[1] = vdnn_cpu_ws_take(&used, s->f_wei.bytes);
    s->f_off[2] = vdnn_cpu_ws_take(&used, s->f_dst.bytes);
    scratch = max_sz(scratch, max_sz(s->f_src.scratch_bytes, max_sz(s->f_wei.scratch_bytes, s->f_dst.scratch_bytes)));
    s->f_off[3] = vdnn_cpu_ws_take(&used, scratch);
    s->f_bytes = used ? used + CPU_WS_SLACK : 0;

    used = 0;
    scratch = max_sz(s->bwd_data.scratch_bytes, s->bwd_weights.scratch_bytes);
    const cpu_dnnl_reorder *rs[] = {&s->d_dy, &s->d_wei, &s->d_dx, &s->w_x, &s->w_dy, &s->w_dw};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) scratch = max_sz(scratch, rs[i]->scratch_bytes);
    s->b_off[0] = vdnn_cpu_ws_take(&used, max_sz(s->d_dy.bytes, s->w_dy.bytes));
    s->b_off[1] = vdnn_cpu_ws_take(&used, max_sz(s->d_wei.bytes, s->w_dw.bytes));
    s->b_off[2] = vdnn_cpu_ws_take(&used, max_sz(s->d_dx.bytes, s->w_x.bytes));
    s->b_off[3] = vdnn_cpu_ws_take(&used, scratch);
    s->b_bytes = used ? used + CPU_WS_SLACK : 0;
    return VDNN_OK;
}

static vdnn_status conv_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    conv_state s = {0};
    vdnn_status st = conv_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.f_bytes,
            .bwd_ws_bytes = s.b_bytes,
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
    /* The planner sized the workspace from query; building the primitives must not need more. */
    if (!st && (s->f_bytes > op->info.fwd_ws_bytes || s->b_bytes > op->info.bwd_ws_bytes))
        st = vdnn_fail(err, VDNN_ERR_BACKEND, "conv: primitives need %zu/%zu workspace bytes, query said %zu/%zu",
                       s->f_bytes, s->b_bytes, op->info.fwd_ws_bytes, op->info.bwd_ws_bytes);
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

/* The buffer a primitive uses for a tensor: its copy in ws when the layouts differ, else the tensor itself. */
static void *piece(const cpu_dnnl_reorder *r, void *ws, size_t off, const void *plain)
{
    return r->bytes ? (char *)ws + off : (void *)plain;
}

static vdnn_status conv_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL bias");
    if (!a->x[0] || !a->w || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL %s buffer",
                         !a->x[0] ? "source" : !a->w ? "weights" : "destination");
    if (s->f_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL workspace (%zu bytes needed)", s->f_bytes);
    char *ws = vdnn_cpu_ws_align(a->ws);
    void *scratch = ws + s->f_off[3];
    void *src = piece(&s->f_src, ws, s->f_off[0], a->x[0]);
    void *wei = piece(&s->f_wei, ws, s->f_off[1], a->w);
    void *dst = piece(&s->f_dst, ws, s->f_off[2], a->y);
    vdnn_status st = vdnn_cpu_dnnl_reorder_run(be, &s->f_src, a->x[0], src, scratch, "conv forward: source copy", err);
    if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &s->f_wei, a->w, wei, scratch, "conv forward: weights copy", err);
    if (!st) {
        void *ptrs[] = {src, wei, (void *)a->b, dst};
        st = vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, scratch, "conv forward", err);
    }
    if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &s->f_dst, dst, a->y, scratch, "conv forward: output copy", err);
    return st;
}

static vdnn_status conv_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL bias gradient");
    if (!a->x[0] || !a->dy || (a->dx[0] && !a->w))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL %s buffer",
                         !a->x[0] ? "source" : !a->dy ? "output gradient" : "weights");
    if (s->b_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL workspace (%zu bytes needed)", s->b_bytes);
    char *ws = vdnn_cpu_ws_align(a->ws);
    void *scratch = ws + s->b_off[3];
    vdnn_status st = VDNN_OK;
    bool have_dy = false;
    if (a->dx[0]) {
        void *dy = piece(&s->d_dy, ws, s->b_off[0], a->dy);
        void *wei = piece(&s->d_wei, ws, s->b_off[1], a->w);
        void *dx = piece(&s->d_dx, ws, s->b_off[2], a->dx[0]);
        st = vdnn_cpu_dnnl_reorder_run(be, &s->d_dy, a->dy, dy, scratch, "conv backward-data: dy copy", err);
        if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &s->d_wei, a->w, wei, scratch, "conv backward-data: weights copy", err);
        if (!st) {
            void *ptrs[] = {dy, wei, dx};
            st = vdnn_cpu_dnnl_step_run(be, &s->bwd_data, ptrs, scratch, "conv backward-data", err);
        }
        if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &s->d_dx, dx, a->dx[0], scratch, "conv backward-data: dx copy", err);
        have_dy = s->dy_shared;
    }
    if (st) return st;
    void *x = piece(&s->w_x, ws, s->b_off[2], a->x[0]);
    void *dy = piece(&s->w_dy, ws, s->b_off[0], a->dy);
    void *dw = piece(&s->w_dw, ws, s->b_off[1], a->dw);
    st = vdnn_cpu_dnnl_reorder_run(be, &s->w_x, a->x[0], x, scratch, "conv backward-weights: source copy", err);
    if (!st && !have_dy)
        st = vdnn_cpu_dnnl_reorder_run(be, &s->w_dy, a->dy, dy, scratch, "conv backward-weights: dy copy", err);
    if (!st) {
        void *ptrs[] = {x, dy, dw, a->db};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_weights, ptrs, scratch, "conv backward-weights", err);
    }
    if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &s->w_dw, dw, a->dw, scratch, "conv backward-weights: dw copy", err);
    return st;
}

const cpu_op_impl vdnn_cpu_op_conv = {
    .query = conv_query,
    .create = conv_create,
    .destroy = conv_destroy,
    .forward = conv_forward,
    .backward = conv_backward,
};
