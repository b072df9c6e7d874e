/* CONV on the CPU: oneDNN convolution forward, backward-data and backward-weights in the layouts oneDNN prefers, copied from and to our plain nchw/oihw tensors a chunk of images at a time; fp32 or bf16 maps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Why blocked layouts: on plain nchw oneDNN 2.6 only offers its im2col+GEMM
 * convolution, several times slower than the direct JIT kernels it picks for
 * format_tag any (nChw16c and friends), most of all backward-weights of a
 * few-channel first layer. The copies in and out are cheap next to that. They
 * live in the op's workspace, so the planner counts them:
 *   forward:  [src][weights][dst][scratchpad]
 *   backward: [dy][weights or dweights][dx or x][bias gradient][scratchpad]
 * Why chunks: copies of whole feature maps would make the workspace as large as
 * the maps themselves (6 GiB for VGG-16's second layer at batch 256). So the
 * batch is cut into chunks whose copies stay under a cap, and the copies hold
 * one chunk. Backward-weights runs over every chunk first, then backward-data,
 * so the weight gradient and the weights copy share a region; each chunk's
 * weight gradient is added into dw by a summing copy. The chunk size is a
 * function of the layer and the algorithm alone, never of the budget, so every
 * plan computes the same sums in the same order. Once dy has been read for the
 * weights, a convolution whose input and output have one shape may write dx
 * over dy, a chunk at a time (that chunk's dy is copied into the workspace, or
 * its dx computed there, before the chunk is overwritten).
 * A piece whose layout is already plain takes no room and the primitive uses
 * the arena tensor in place. The workspace is used from its first 64-byte
 * boundary (CPU_WS_SLACK).
 * bf16: maps are bf16; the weights copy rounds the fp32 master weights to bf16
 * on the way (it always exists then, the types differing), and backward-weights
 * writes an fp32 weight gradient, accumulated in fp32 by oneDNN.
 * bf16 with Winograd: oneDNN 2.6 has no bf16 Winograd, and its fp32 Winograd beats
 * its direct bf16 kernels on 3x3 stride-1 layers of 8x8 and more (bench/results/
 * bf16-ops.md). So there the primitives compute in fp32: the copies widen the bf16
 * maps into fp32 blocked layouts and round the outputs back (once, as the contract
 * says), and the weights are the master weights rounded to bf16 values first, in
 * the workspace, so every bf16 algorithm sees the same weights. */

/* The primitives and copies for chunks of `mb` images. */
typedef struct conv_part {
    int mb;
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
    cpu_dnnl_reorder f_src, f_wei, f_dst;      /* x -> src, w -> weights, dst -> y */
    cpu_dnnl_reorder d_dy, d_wei, d_dx;        /* dy -> D, w -> W, S -> dx */
    cpu_dnnl_reorder w_x, w_dy, w_dw;          /* x -> S, dy -> D, W -> dw */
    cpu_dnnl_reorder w_dw_add;                 /* W -> dw, adding (chunks after the first) */
    bool dy_shared;                            /* backward-weights may read the dy copy backward-data made */
} conv_part;

typedef struct conv_state {
    conv_part part[2];                         /* n_full chunks of part[0].mb images, then part[1] (mb 0: none) */
    int n_full;
    bool winograd;                             /* built with oneDNN's Winograd kernels */
    bool bwd_inplace;                          /* backward may write dx over dy */
    bool stream_ok;                            /* forward may write y over x (the source is copied first) */
    size_t in_img, out_img;                    /* bytes per image of x and y */
    size_t f_off[5], f_bytes;                  /* src, weights, dst, scratchpad, rounded weights */
    size_t b_off[6], b_bytes;                  /* D, W, S, bias gradient, scratchpad, rounded weights */
    bool round_w;                              /* bf16 maps, fp32 kernels: the weights rounded to bf16 first */
} conv_state;

/* The CPU's convolution algorithms: the kernel family, and the cap on the bytes one copy holds. */
typedef struct conv_algo {
    const char *name;
    bool winograd;
    size_t chunk_cap;
} conv_algo;

#define CONV_DEFAULT_CHUNK_BYTES ((size_t)256 << 20)

static size_t fast_cap(const cpu_backend *be)
{
    return be->opt.conv_chunk_bytes ? be->opt.conv_chunk_bytes : CONV_DEFAULT_CHUNK_BYTES;
}

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

/* Winograd F(4x4, 3x3) needs a quarter of the direct kernels' multiplications; it measured about
 * twice as fast on ResNet's 16x16 and 8x8 layers, but slower below 8x8 (and its workspace grows with
 * channels while there is little spatial work to save). */
static bool winograd_fits(const vdnn_op_desc *d)
{
    const vdnn_layer_params *p = &d->p;
    /* bf16 keeps few-channel inputs on its direct kernels: fp32 Winograd was 3-4x slower than them on VGG-16's
     * first layer (3 channels; bf16-ops.md). fp32 keeps its old choice, and so its results. */
    return p->kernel_h == 3 && p->kernel_w == 3 && p->stride_h == 1 && p->stride_w == 1 && p->groups == 1 &&
           d->out.h >= 8 && d->out.w >= 8 && (d->dtype == VDNN_DTYPE_F32 || d->in[0].c >= 16);
}

/* The type the primitives compute in: the maps', except Winograd, which oneDNN 2.6 has in fp32 only. */
static vdnn_dtype compute_type(const vdnn_op_desc *d, bool winograd) { return winograd ? VDNN_DTYPE_F32 : d->dtype; }

/* Images per chunk: the most whose largest copy (channels padded to a block of 16, in the compute type) fits the cap. */
static int chunk_images(const vdnn_op_desc *d, bool winograd, size_t cap)
{
    vdnn_shape in = d->in[0], out = d->out;
    size_t ci = (size_t)(in.c + 15) / 16 * 16, co = (size_t)(out.c + 15) / 16 * 16;
    size_t per_image = vdnn_dtype_size(compute_type(d, winograd)) *
                       max_sz(ci * (size_t)in.h * in.w, co * (size_t)out.h * out.w);
    size_t k = per_image ? cap / per_image : (size_t)in.n;
    if (k < 1) k = 1;
    return k < (size_t)in.n ? (int)k : in.n;
}

static vdnn_status part_build(cpu_backend *be, const vdnn_op_desc *d, int mb, bool winograd, bool add, bool make,
                              conv_part *s, vdnn_error *err);
static void part_free(conv_part *s);
static vdnn_status conv_build_algo(cpu_backend *be, const vdnn_op_desc *d, const conv_algo *a, bool make, conv_state *s,
                                   vdnn_error *err);
static void conv_free(conv_state *s);

/* The candidates for d, default first, without duplicates of the same kernel and chunk size. */
static int conv_algo_list(cpu_backend *be, const vdnn_op_desc *d, conv_algo *out)
{
    bool wino = winograd_fits(d);
    if (wino) { /* oneDNN implements Winograd for some channel counts only */
        conv_part probe = {0};
        vdnn_error ignored = {0};
        wino = part_build(be, d, chunk_images(d, true, fast_cap(be)), true, false, false, &probe, &ignored) == VDNN_OK;
        part_free(&probe);
    }
    const size_t cap = fast_cap(be);
    /* bf16 takes the fp32 Winograd kernels by default only where their workspace stays within the chunk cap: on
     * large layers their fp32 copies and transforms would cost what bf16 saves (VGG-16 at batch 256, 224x224:
     * conv5_3's backward workspace 950 MB, the in-core peak 0.64 of fp32's instead of 0.55); there they stay a
     * candidate the planners may choose. */
    bool wino_first = wino && d->dtype == VDNN_DTYPE_F32;
    if (wino && !wino_first) {
        conv_state probe = {0};
        vdnn_error ignored = {0};
        const conv_algo w = {"winograd", true, cap};
        wino_first = conv_build_algo(be, d, &w, false, &probe, &ignored) == VDNN_OK && probe.f_bytes <= cap &&
                     probe.b_bytes <= cap;
        conv_free(&probe);
    }
    const conv_algo all[4] = {{"fast", wino_first, cap}, {wino_first ? "direct" : "winograd", wino && !wino_first, cap},
                              {"lean", wino_first, cap / 16}, {wino_first ? "lean-direct" : "lean-winograd",
                                                               wino && !wino_first, cap / 16}};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        bool dup = false;
        for (int j = 0; j < n; j++)
            dup |= out[j].winograd == all[i].winograd &&
                   chunk_images(d, out[j].winograd, out[j].chunk_cap) == chunk_images(d, all[i].winograd, all[i].chunk_cap);
        if (!dup) out[n++] = all[i];
    }
    return n;
}

/* The convolution's descriptors with format_tag any where oneDNN picks the layout. dwei: the weight gradient's
 * (fp32 also when the weights the primitives read are bf16). */
typedef struct conv_mds {
    const dnnl_memory_desc_t *src, *wei, *dwei, *bias, *dst;
    const dnnl_dim_t *strides, *pad;
} conv_mds;

static void part_free(conv_part *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
    cpu_dnnl_reorder *rs[] = {&s->f_src, &s->f_wei, &s->f_dst, &s->d_dy, &s->d_wei,
                              &s->d_dx,  &s->w_x,   &s->w_dy,  &s->w_dw, &s->w_dw_add};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) vdnn_cpu_dnnl_reorder_fini(rs[i]);
}

static void conv_free(conv_state *s)
{
    part_free(&s->part[0]);
    part_free(&s->part[1]);
}

/* Forward, backward-data and backward-weights primitives for one kernel family. */
static vdnn_status conv_prims(cpu_backend *be, const conv_mds *m, dnnl_alg_kind_t alg, bool make, conv_part *s,
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
        st = vdnn_cpu_dnnl_check(dnnl_convolution_backward_weights_desc_init(&cd, alg, m->src, m->dwei, m->bias, m->dst,
                                                                             m->strides, m->pad, m->pad),
                                 "conv: backward-weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &cd, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 4,
            &s->bwd_weights, "conv backward-weights", err);
    return st;
}

/* The primitives and copies for chunks of mb images; add: also the summing weight-gradient copy. */
static vdnn_status part_build(cpu_backend *be, const vdnn_op_desc *d, int mb, bool winograd, bool add, bool make,
                              conv_part *s, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    int g = p->groups;
    s->mb = mb;
    dnnl_memory_desc_t src, wei, bia, dst, src_any, wei_any, dwei_any, dst_any;
    const vdnn_dtype t = d->dtype, ct = compute_type(d, winograd);
    const dnnl_dim_t src_dims[4] = {mb, in.c, in.h, in.w};
    const dnnl_dim_t dst_dims[4] = {mb, out.c, out.h, out.w};
    const dnnl_dim_t bias_dims[1] = {p->filters};
    /* PyTorch's (filters, C/groups, kh, kw) is oihw, or goihw with the group outermost. */
    const dnnl_dim_t w_dims[4] = {p->filters, in.c, p->kernel_h, p->kernel_w};
    const dnnl_dim_t gw_dims[5] = {g, p->filters / g, in.c / g, p->kernel_h, p->kernel_w};
    vdnn_status st = vdnn_cpu_dnnl_md_of(&src, 4, src_dims, t, dnnl_nchw, "conv: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md_of(&dst, 4, dst_dims, t, dnnl_nchw, "conv: destination descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&bia, 1, bias_dims, dnnl_a, "conv: bias descriptor", err);
    if (!st)
        st = g == 1 ? vdnn_cpu_dnnl_md(&wei, 4, w_dims, dnnl_oihw, "conv: weights descriptor", err)
                    : vdnn_cpu_dnnl_md(&wei, 5, gw_dims, dnnl_goihw, "conv: weights descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md_of(&src_any, 4, src_dims, ct, dnnl_format_tag_any, "conv: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md_of(&dst_any, 4, dst_dims, ct, dnnl_format_tag_any, "conv: destination descriptor", err);
    if (!st)
        st = g == 1 ? vdnn_cpu_dnnl_md_of(&wei_any, 4, w_dims, ct, dnnl_format_tag_any, "conv: weights descriptor", err)
                    : vdnn_cpu_dnnl_md_of(&wei_any, 5, gw_dims, ct, dnnl_format_tag_any, "conv: weights descriptor", err);
    if (!st)
        st = g == 1 ? vdnn_cpu_dnnl_md(&dwei_any, 4, w_dims, dnnl_format_tag_any, "conv: weight gradient descriptor", err)
                    : vdnn_cpu_dnnl_md(&dwei_any, 5, gw_dims, dnnl_format_tag_any, "conv: weight gradient descriptor", err);
    if (st) return st;
    const dnnl_dims_t strides = {p->stride_h, p->stride_w};
    /* Same padding on both sides: oneDNN then floors the output size exactly as PyTorch does. */
    const dnnl_dims_t pad = {p->pad_h, p->pad_w};
    const conv_mds mds = {&src_any, &wei_any, &dwei_any, p->bias ? &bia : NULL, &dst_any, strides, pad};
    st = conv_prims(be, &mds, winograd ? dnnl_convolution_winograd : dnnl_convolution_direct, make, s, err);
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
    if (!st && add) st = vdnn_cpu_dnnl_reorder_init_ex(be, w_dw, &wei, make, true, &s->w_dw_add, rw, err);
    if (st) return st;
    s->dy_shared = d_dy && w_dy && dnnl_memory_desc_equal(d_dy, w_dy);
    return VDNN_OK;
}

static size_t conv_weights(const vdnn_op_desc *d)
{
    const vdnn_layer_params *p = &d->p;
    return (size_t)p->filters * (size_t)(d->in[0].c / p->groups) * (size_t)p->kernel_h * (size_t)p->kernel_w;
}

/* The weights the primitives' copies read: the master weights, or (round_w) them rounded to bf16 into ws at off. */
static const float *conv_weights_in(const conv_state *s, const vdnn_op_desc *d, const float *w, char *ws, size_t off)
{
    if (!s->round_w) return w;
    float *r = (float *)(ws + off);
    vdnn_cpu_bf16_round(r, w, conv_weights(d));
    return r;
}

/* The primitives, copies and workspace layout of a checked layer under algorithm a. */
static vdnn_status conv_build_algo(cpu_backend *be, const vdnn_op_desc *d, const conv_algo *a, bool make, conv_state *s,
                                   vdnn_error *err)
{
    vdnn_status st;
    const int n = d->in[0].n, k = chunk_images(d, a->winograd, a->chunk_cap);
    s->n_full = n / k;
    s->winograd = a->winograd;
    s->round_w = a->winograd && d->dtype != VDNN_DTYPE_F32;
    s->in_img = (size_t)d->in[0].c * d->in[0].h * d->in[0].w * vdnn_cpu_esize(d);
    s->out_img = (size_t)d->out.c * d->out.h * d->out.w * vdnn_cpu_esize(d);
    const bool chunked = k < n;
    st = part_build(be, d, k, a->winograd, chunked, make, &s->part[0], err);
    if (!st && n % k) st = part_build(be, d, n % k, a->winograd, true, make, &s->part[1], err);
    if (st) return st;

    size_t used = 0, scratch = 0, fb[3] = {0}, bb[3] = {0};
    for (int i = 0; i < 2; i++) {
        const conv_part *q = &s->part[i];
        if (!q->mb) continue;
        const cpu_dnnl_reorder *rs[] = {&q->f_src, &q->f_wei, &q->f_dst, &q->d_dy, &q->d_wei,
                                        &q->d_dx,  &q->w_x,   &q->w_dy,  &q->w_dw, &q->w_dw_add};
        for (size_t j = 0; j < sizeof rs / sizeof rs[0]; j++) scratch = max_sz(scratch, rs[j]->scratch_bytes);
        scratch = max_sz(scratch, max_sz(q->fwd.scratch_bytes, max_sz(q->bwd_data.scratch_bytes, q->bwd_weights.scratch_bytes)));
        fb[0] = max_sz(fb[0], q->f_src.bytes);
        /* Weights copies are made from the master weights, weight gradients copied out to dw: the workspace holds
         * the primitive's side only. */
        fb[1] = max_sz(fb[1], q->f_wei.to_bytes);
        fb[2] = max_sz(fb[2], q->f_dst.bytes);
        bb[0] = max_sz(bb[0], max_sz(q->d_dy.bytes, q->w_dy.bytes));
        /* A chunk after the first writes its weight gradient here even when dw's layout is plain. */
        bb[1] = max_sz(bb[1], max_sz(q->d_wei.to_bytes, max_sz(q->w_dw.from_bytes, q->w_dw_add.from_bytes)));
        bb[2] = max_sz(bb[2], max_sz(q->d_dx.bytes, q->w_x.bytes));
    }
    s->f_off[0] = vdnn_cpu_ws_take(&used, fb[0]);
    s->f_off[1] = vdnn_cpu_ws_take(&used, fb[1]);
    s->f_off[2] = vdnn_cpu_ws_take(&used, fb[2]);
    s->f_off[3] = vdnn_cpu_ws_take(&used, scratch);
    const size_t w_bytes = s->round_w ? conv_weights(d) * sizeof(float) : 0;
    s->f_off[4] = vdnn_cpu_ws_take(&used, w_bytes);
    s->f_bytes = used ? used + CPU_WS_SLACK : 0;

    used = 0;
    s->b_off[0] = vdnn_cpu_ws_take(&used, bb[0]);
    s->b_off[1] = vdnn_cpu_ws_take(&used, bb[1]);
    s->b_off[2] = vdnn_cpu_ws_take(&used, bb[2]);
    s->b_off[3] = vdnn_cpu_ws_take(&used, chunked && d->p.bias ? (size_t)d->p.filters * sizeof(float) : 0);
    s->b_off[4] = vdnn_cpu_ws_take(&used, scratch);
    s->b_off[5] = vdnn_cpu_ws_take(&used, w_bytes);
    s->b_bytes = used ? used + CPU_WS_SLACK : 0;
    /* dx over dy needs dy copied out, or dx computed into the workspace, in every part. */
    const vdnn_shape in = d->in[0], out = d->out;
    s->bwd_inplace = in.c == out.c && in.h == out.h && in.w == out.w;
    for (int i = 0; i < 2; i++)
        if (s->part[i].mb && !s->part[i].d_dy.bytes && !s->part[i].d_dx.bytes) s->bwd_inplace = false;
    /* y over x, a chunk at a time, needs every chunk of x read into the workspace before its y is written. */
    s->stream_ok = s->bwd_inplace;
    for (int i = 0; i < 2; i++)
        if (s->part[i].mb && !s->part[i].f_src.bytes) s->stream_ok = false;
    return VDNN_OK;
}

/* Checks the layer and finds the candidate d->algo names. */
static vdnn_status conv_pick(cpu_backend *be, const vdnn_op_desc *d, conv_algo *a, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    conv_algo algos[VDNN_MAX_ALGOS];
    int n_algos = conv_algo_list(be, d, algos);
    if (d->algo < 0 || d->algo >= n_algos)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv: algorithm %d (this layer has %d)", d->algo, n_algos);
    *a = algos[d->algo];
    return VDNN_OK;
}

/* What the planner needs to know of a layer under algorithm a, without making primitives. */
static vdnn_status conv_info(cpu_backend *be, const vdnn_op_desc *d, const conv_algo *a, vdnn_op_info *info,
                             vdnn_error *err)
{
    conv_state s = {0};
    vdnn_status st = conv_build_algo(be, d, a, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.f_bytes,
            .bwd_ws_bytes = s.b_bytes,
            .bwd_needs_x = true, /* for the weight gradient */
            .bwd_inplace_ok = s.bwd_inplace,
            .stream_ok = s.stream_ok,
            .chunk_images = s.part[0].mb,
        };
    }
    conv_free(&s);
    return st;
}

static vdnn_status conv_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    conv_algo a;
    vdnn_status st = conv_pick(be, d, &a, err);
    return st ? st : conv_info(be, d, &a, info, err);
}

static vdnn_status conv_algos(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_algo *out, int *n, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    conv_algo algos[VDNN_MAX_ALGOS];
    const int count = conv_algo_list(be, d, algos);
    *n = 0;
    for (int i = 0; i < count; i++) {
        memset(&out[i], 0, sizeof out[i]);
        snprintf(out[i].name, sizeof out[i].name, "%s", algos[i].name);
        /* Results depend on the kernel family and on how the weight gradient is summed over chunks. */
        out[i].numerics = (algos[i].winograd ? 1 << 24 : 0) | chunk_images(d, algos[i].winograd, algos[i].chunk_cap);
        st = conv_info(be, d, &algos[i], &out[i].info, err);
        if (st) return st;
        *n = i + 1;
    }
    return VDNN_OK;
}

static vdnn_status conv_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "conv: out of memory");
    conv_algo a;
    vdnn_status st = conv_pick(be, &op->d, &a, err);
    if (!st) st = conv_build_algo(be, &op->d, &a, true, s, err);
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

/* Chunk c: its part and its first image. */
static conv_part *chunk_part(conv_state *s, int c, size_t *first)
{
    *first = (size_t)c * (size_t)s->part[0].mb;
    return c < s->n_full ? &s->part[0] : &s->part[1];
}

static int n_chunks(const conv_state *s) { return s->n_full + (s->part[1].mb ? 1 : 0); }

static vdnn_status conv_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL bias");
    if (!a->x[0] || !a->w || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL %s buffer",
                         !a->x[0] ? "source" : !a->w ? "weights" : "destination");
    if (s->f_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL workspace (%zu bytes needed)", s->f_bytes);
    const vdnn_stream *sm = a->stream;
    if (sm && (!s->stream_ok || !sm->x_read || a->x[0] != a->y))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: a streamed input %s",
                         !s->stream_ok ? "asked of a layer that cannot stream it" : "needs x_read and y over x");
    if (!sm && a->x[0] == a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: y over x without a streamed input");
    char *ws = vdnn_cpu_ws_align(a->ws);
    void *scratch = ws + s->f_off[3];
    vdnn_status st = VDNN_OK;
    const float *w = conv_weights_in(s, &op->d, a->w, ws, s->f_off[4]);
    for (int c = 0; !st && c < n_chunks(s); c++) {
        size_t first;
        conv_part *q = chunk_part(s, c, &first);
        const char *x = (const char *)a->x[0] + first * s->in_img;
        char *y = (char *)a->y + first * s->out_img;
        void *src = piece(&q->f_src, ws, s->f_off[0], x);
        void *wei = piece(&q->f_wei, ws, s->f_off[1], w);
        void *dst = piece(&q->f_dst, ws, s->f_off[2], y);
        st = vdnn_cpu_dnnl_reorder_run(be, &q->f_src, x, src, scratch, "conv forward: source copy", err);
        /* The chunk of x is in the workspace now; once it is saved, y's chunk may take its place. */
        if (!st && sm) st = sm->x_read(sm->ctx, c, err);
        /* Both parts may want the same weights layout, but the copy is cheap next to a chunk's work. */
        if (!st && (c == 0 || c == s->n_full))
            st = vdnn_cpu_dnnl_reorder_run(be, &q->f_wei, w, wei, scratch, "conv forward: weights copy", err);
        if (!st) {
            void *ptrs[] = {src, wei, (void *)a->b, dst};
            st = vdnn_cpu_dnnl_step_run(be, &q->fwd, ptrs, scratch, "conv forward", err);
        }
        if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &q->f_dst, dst, y, scratch, "conv forward: output copy", err);
    }
    return st;
}

static vdnn_status conv_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL bias gradient");
    const vdnn_stream *sm = a->stream;
    if (sm && (!s->stream_ok || !sm->x_chunk))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: a streamed input %s",
                         !s->stream_ok ? "asked of a layer that cannot stream it" : "needs x_chunk");
    if ((!a->x[0] && !sm) || !a->dy || (a->dx[0] && !a->w))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL %s buffer",
                         !a->x[0] && !sm ? "source" : !a->dy ? "output gradient" : "weights");
    if (s->b_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL workspace (%zu bytes needed)", s->b_bytes);
    if (a->dx[0] == a->dy && !s->bwd_inplace)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: dx over dy asked of a layer that cannot");
    char *ws = vdnn_cpu_ws_align(a->ws);
    void *scratch = ws + s->b_off[4];
    vdnn_status st = VDNN_OK;
    float *db_chunk = (float *)(ws + s->b_off[3]);
    for (int c = 0; !st && c < n_chunks(s); c++) {
        size_t first;
        conv_part *q = chunk_part(s, c, &first);
        const float *xc_f = NULL;
        if (sm) st = sm->x_chunk(sm->ctx, c, &xc_f, err);
        if (st) break;
        const char *xc = sm ? (const char *)xc_f : (const char *)a->x[0] + first * s->in_img;
        const char *dyc = (const char *)a->dy + first * s->out_img;
        void *x = piece(&q->w_x, ws, s->b_off[2], xc);
        void *dy = piece(&q->w_dy, ws, s->b_off[0], dyc);
        /* The first chunk writes dw and db; later ones write into the workspace and are added. */
        void *dw = c == 0 ? piece(&q->w_dw, ws, s->b_off[1], a->dw) : ws + s->b_off[1];
        float *db = c == 0 ? a->db : db_chunk;
        st = vdnn_cpu_dnnl_reorder_run(be, &q->w_x, xc, x, scratch, "conv backward-weights: source copy", err);
        if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &q->w_dy, dyc, dy, scratch, "conv backward-weights: dy copy", err);
        if (!st) {
            void *ptrs[] = {x, dy, dw, db};
            st = vdnn_cpu_dnnl_step_run(be, &q->bwd_weights, ptrs, scratch, "conv backward-weights", err);
        }
        if (st) break;
        if (c == 0) {
            st = vdnn_cpu_dnnl_reorder_run(be, &q->w_dw, dw, a->dw, scratch, "conv backward-weights: dw copy", err);
        } else {
            st = vdnn_cpu_dnnl_reorder_run(be, &q->w_dw_add, dw, a->dw, scratch, "conv backward-weights: dw sum", err);
            if (op->d.p.bias)
                for (int f = 0; f < op->d.p.filters; f++) a->db[f] += db_chunk[f];
        }
    }
    if (st || !a->dx[0]) return st;
    /* With one chunk, backward-data can reuse the dy copy backward-weights left. */
    const bool have_dy = n_chunks(s) == 1 && s->part[0].dy_shared;
    const float *w = conv_weights_in(s, &op->d, a->w, ws, s->b_off[5]);
    for (int c = 0; !st && c < n_chunks(s); c++) {
        size_t first;
        conv_part *q = chunk_part(s, c, &first);
        const char *dyc = (const char *)a->dy + first * s->out_img;
        char *dxc = (char *)a->dx[0] + first * s->in_img;
        void *dy = piece(&q->d_dy, ws, s->b_off[0], dyc);
        void *wei = piece(&q->d_wei, ws, s->b_off[1], w);
        void *dx = piece(&q->d_dx, ws, s->b_off[2], dxc);
        if (!have_dy) st = vdnn_cpu_dnnl_reorder_run(be, &q->d_dy, dyc, dy, scratch, "conv backward-data: dy copy", err);
        if (!st && (c == 0 || c == s->n_full))
            st = vdnn_cpu_dnnl_reorder_run(be, &q->d_wei, w, wei, scratch, "conv backward-data: weights copy", err);
        if (!st) {
            void *ptrs[] = {dy, wei, dx};
            st = vdnn_cpu_dnnl_step_run(be, &q->bwd_data, ptrs, scratch, "conv backward-data", err);
        }
        if (!st) st = vdnn_cpu_dnnl_reorder_run(be, &q->d_dx, dx, dxc, scratch, "conv backward-data: dx copy", err);
    }
    return st;
}

const cpu_op_impl vdnn_cpu_op_conv = {
    .query = conv_query,
    .create = conv_create,
    .destroy = conv_destroy,
    .forward = conv_forward,
    .backward = conv_backward,
    .algos = conv_algos,
};
