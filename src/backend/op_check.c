/* Shape and type checks of the ops every backend validates the same way. */
#include "backend/op_check.h"

#include <math.h>

vdnn_status vdnn_op_check_concat(const vdnn_op_desc *d, vdnn_error *err)
{
    const bool feat = d->kind == VDNN_LAYER_FEAT_CAT;
    const char *name = vdnn_layer_kind_name(d->kind);
    long sum = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        vdnn_shape s = d->in[i];
        if (feat ? s.n != d->out.n || s.c != d->out.c || s.h != d->out.h
                 : s.n != d->out.n || s.h != d->out.h || s.w != d->out.w)
            return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: input %d is %dx%dx%dx%d but the output is %dx%dx%dx%d (%s)", name,
                             i, s.n, s.c, s.h, s.w, d->out.n, d->out.c, d->out.h, d->out.w,
                             feat ? "widths add up" : "channels add up");
        sum += feat ? s.w : s.c;
    }
    if (sum != (feat ? d->out.w : d->out.c))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: input %s sum to %ld but the output has %d", name,
                         feat ? "widths" : "channels", sum, feat ? d->out.w : d->out.c);
    return VDNN_OK;
}

void vdnn_op_concat_rows(const vdnn_op_desc *d, size_t *rows, size_t *joined, size_t len[VDNN_MAX_INPUTS])
{
    const bool feat = d->kind == VDNN_LAYER_FEAT_CAT;
    const size_t hw = (size_t)d->out.h * (size_t)d->out.w;
    *rows = feat ? (size_t)d->out.n * (size_t)d->out.c * (size_t)d->out.h : (size_t)d->out.n;
    *joined = feat ? (size_t)d->out.w : (size_t)d->out.c * hw;
    for (int i = 0; i < d->n_inputs; i++) len[i] = feat ? (size_t)d->in[i].w : (size_t)d->in[i].c * hw;
}

vdnn_status vdnn_op_check_add(const vdnn_op_desc *d, vdnn_error *err)
{
    for (int i = 0; i < d->n_inputs; i++) {
        vdnn_shape s = d->in[i];
        if (s.n != d->out.n || s.c != d->out.c || s.h != d->out.h || s.w != d->out.w)
            return vdnn_fail(err, VDNN_ERR_SHAPE, "add: input %d is %dx%dx%dx%d but the output is %dx%dx%dx%d", i, s.n,
                             s.c, s.h, s.w, d->out.n, d->out.c, d->out.h, d->out.w);
    }
    return VDNN_OK;
}

vdnn_status vdnn_op_check_dtypes(vdnn_dtype a, vdnn_dtype b, const char *what, vdnn_error *err)
{
    if (!vdnn_dtype_valid(a) || !vdnn_dtype_valid(b))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: unknown data type %d", what, (int)(vdnn_dtype_valid(a) ? b : a));
    return VDNN_OK;
}

static bool same_shape(vdnn_shape a, vdnn_shape b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

vdnn_status vdnn_op_check_act(const vdnn_op_desc *d, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(d->kind);
    const vdnn_layer_params *p = &d->p;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %d inputs (needs exactly 1)", name, d->n_inputs);
    if (!same_shape(d->in[0], d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: output %dx%dx%dx%d differs from input %dx%dx%dx%d", name, d->out.n,
                         d->out.c, d->out.h, d->out.w, d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w);
    if (d->kind == VDNN_LAYER_HARDSIGMOID && !(isfinite(p->alpha) && isfinite(p->beta)))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "hardsigmoid: alpha %g, beta %g (must be finite)", (double)p->alpha,
                         (double)p->beta);
    if (d->kind == VDNN_LAYER_CLIP && !(isfinite(p->clip_lo) && isfinite(p->clip_hi) && p->clip_lo < p->clip_hi))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "clip: bounds %g and %g (must be finite, the first below the "
                         "second)", (double)p->clip_lo, (double)p->clip_hi);
    return VDNN_OK;
}

vdnn_status vdnn_op_check_channel_mul(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->n_inputs != 2)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "channel_mul: %d inputs (needs the maps and the scales)", d->n_inputs);
    vdnn_shape x = d->in[0], s = d->in[1];
    if (!same_shape(x, d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "channel_mul: output %dx%dx%dx%d differs from input %dx%dx%dx%d",
                         d->out.n, d->out.c, d->out.h, d->out.w, x.n, x.c, x.h, x.w);
    if (s.n != x.n || s.c != x.c || s.h != 1 || s.w != 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "channel_mul: scales %dx%dx%dx%d, expected %dx%dx1x1 (one per channel)",
                         s.n, s.c, s.h, s.w, x.n, x.c);
    return VDNN_OK;
}

vdnn_status vdnn_op_check_pool(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    const char *name = vdnn_layer_kind_name(d->kind);
    if (d->kind != VDNN_LAYER_MAXPOOL && d->kind != VDNN_LAYER_AVGPOOL)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "pool: layer kind %d is not a pooling", (int)d->kind);
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %d inputs (needs exactly 1)", name, d->n_inputs);
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
        2 * p->pad_h > p->kernel_h || 2 * p->pad_w > p->kernel_w)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "%s: kernel %dx%d, stride %dx%d, pad %dx%d out of range (pad at most half the kernel)", name,
                         p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
    int oh = vdnn_window_out(in.h, p->kernel_h, p->stride_h, p->pad_h, p->ceil_mode);
    int ow = vdnn_window_out(in.w, p->kernel_w, p->stride_w, p->pad_w, p->ceil_mode);
    if (out.n != in.n || out.c != in.c || out.h != oh || out.w != ow || oh < 1 || ow < 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE,
                         "%s: output %dx%dx%dx%d does not match input %dx%dx%dx%d (expected %dx%dx%dx%d%s)", name,
                         out.n, out.c, out.h, out.w, in.n, in.c, in.h, in.w, in.n, in.c, oh, ow,
                         p->ceil_mode ? ", ceil mode" : "");
    return VDNN_OK;
}

bool vdnn_pool_own_windows(const vdnn_op_desc *d)
{
    const vdnn_layer_params *p = &d->p;
    bool grown = p->ceil_mode && (vdnn_window_out(d->in[0].h, p->kernel_h, p->stride_h, p->pad_h, true) !=
                                      vdnn_window_out(d->in[0].h, p->kernel_h, p->stride_h, p->pad_h, false) ||
                                  vdnn_window_out(d->in[0].w, p->kernel_w, p->stride_w, p->pad_w, true) !=
                                      vdnn_window_out(d->in[0].w, p->kernel_w, p->stride_w, p->pad_w, false));
    bool excluded = d->kind == VDNN_LAYER_AVGPOOL && p->exclude_pad && (p->pad_h || p->pad_w);
    return grown || excluded;
}

vdnn_status vdnn_op_check_token_ids(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->kind != VDNN_LAYER_EMBED || d->dtype == VDNN_DTYPE_F32) return VDNN_OK;
    /* The largest integer below which every integer is exact: 2^8 in bf16, 2^11 in fp16. */
    const int exact = d->dtype == VDNN_DTYPE_BF16 ? 256 : 2048;
    if (d->p.vocab <= exact + 1) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                     "embed: a vocabulary of %d tokens in %s maps (their ids are exact only up to %d); use fp32",
                     d->p.vocab, vdnn_dtype_name(d->dtype), exact);
}
