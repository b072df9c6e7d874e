/* Op descriptions for the tests: one builder per layer kind. */
#include "op_desc.h"

#include <string.h>

vdnn_shape vt_shape(int n, int c, int h, int w) { return (vdnn_shape){n, c, h, w}; }

vdnn_op_desc vt_op(vdnn_layer_kind kind, vdnn_shape in, vdnn_shape out)
{
    vdnn_op_desc d;
    memset(&d, 0, sizeof d); /* whole-struct compares (deduplication) need the padding zeroed too */
    d.kind = kind;
    d.n_inputs = 1;
    d.in[0] = in;
    d.out = out;
    d.training = true;
    return d;
}

vdnn_op_desc vt_relu(vdnn_shape in) { return vt_op(VDNN_LAYER_RELU, in, in); }
vdnn_op_desc vt_gap(vdnn_shape in) { return vt_op(VDNN_LAYER_GAP, in, vt_shape(in.n, in.c, 1, 1)); }

vdnn_op_desc vt_flatten(vdnn_shape in)
{
    return vt_op(VDNN_LAYER_FLATTEN, in, vt_shape(in.n, in.c * in.h * in.w, 1, 1));
}

vdnn_op_desc vt_xent(int n, int classes)
{
    return vt_op(VDNN_LAYER_SOFTMAX_XENT, vt_shape(n, classes, 1, 1), vt_shape(n, classes, 1, 1));
}

static void window(vdnn_op_desc *d, int kh, int kw, int sh, int sw, int ph, int pw)
{
    d->p.kernel_h = kh, d->p.kernel_w = kw, d->p.stride_h = sh, d->p.stride_w = sw, d->p.pad_h = ph, d->p.pad_w = pw;
    d->out.h = vdnn_window_out(d->in[0].h, kh, sh, ph, d->p.ceil_mode);
    d->out.w = vdnn_window_out(d->in[0].w, kw, sw, pw, d->p.ceil_mode);
}

vdnn_op_desc vt_conv_rect(vdnn_shape in, int filters, int kh, int kw, int sh, int sw, int ph, int pw, int groups,
                          int bias)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_CONV, in, vt_shape(in.n, filters, 0, 0));
    window(&d, kh, kw, sh, sw, ph, pw);
    d.p.groups = groups, d.p.filters = filters, d.p.bias = bias;
    return d;
}

vdnn_op_desc vt_conv(vdnn_shape in, int filters, int k, int stride, int pad, int groups, int bias)
{
    return vt_conv_rect(in, filters, k, k, stride, stride, pad, pad, groups, bias);
}

vdnn_op_desc vt_pool_rect(vdnn_layer_kind kind, vdnn_shape in, int kh, int kw, int sh, int sw, int ph, int pw)
{
    vdnn_op_desc d = vt_op(kind, in, vt_shape(in.n, in.c, 0, 0));
    window(&d, kh, kw, sh, sw, ph, pw);
    return d;
}

vdnn_op_desc vt_pool(vdnn_layer_kind kind, vdnn_shape in, int k, int stride, int pad)
{
    return vt_pool_rect(kind, in, k, k, stride, stride, pad, pad);
}

vdnn_op_desc vt_pool_win(vdnn_layer_kind kind, vdnn_shape in, int kh, int kw, int sh, int sw, int ph, int pw,
                         bool ceil_mode, bool exclude_pad)
{
    vdnn_op_desc d = vt_op(kind, in, vt_shape(in.n, in.c, 0, 0));
    d.p.ceil_mode = ceil_mode, d.p.exclude_pad = exclude_pad;
    window(&d, kh, kw, sh, sw, ph, pw);
    return d;
}

vdnn_op_desc vt_lrn(vdnn_shape in, int size, float alpha, float beta, float k)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_LRN, in, in);
    d.p.lrn_size = size, d.p.lrn_alpha = alpha, d.p.lrn_beta = beta, d.p.lrn_k = k;
    return d;
}

vdnn_op_desc vt_bn(vdnn_shape in, bool training)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_BATCHNORM, in, in);
    d.p.bn_eps = 1e-5f, d.p.bn_momentum = 0.1f;
    d.training = training;
    return d;
}

vdnn_op_desc vt_fc(vdnn_shape in, int outputs, int bias)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_FC, in, vt_shape(in.n, outputs, 1, 1));
    d.p.filters = outputs, d.p.bias = bias;
    return d;
}

vdnn_op_desc vt_dropout(vdnn_shape in, float p, bool training)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_DROPOUT, in, in);
    d.p.dropout_p = p;
    d.training = training;
    return d;
}

vdnn_op_desc vt_act(vdnn_layer_kind kind, vdnn_shape in) { return vt_op(kind, in, in); }

vdnn_op_desc vt_hardsigmoid(vdnn_shape in, float alpha, float beta)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_HARDSIGMOID, in, in);
    d.p.alpha = alpha, d.p.beta = beta;
    return d;
}

vdnn_op_desc vt_clip(vdnn_shape in, float lo, float hi)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_CLIP, in, in);
    d.p.clip_lo = lo, d.p.clip_hi = hi;
    return d;
}

vdnn_op_desc vt_channel_mul(vdnn_shape in)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_CHANNEL_MUL, in, in);
    d.n_inputs = 2;
    d.in[1] = vt_shape(in.n, in.c, 1, 1);
    return d;
}

vdnn_op_desc vt_multi(vdnn_layer_kind kind, int n, const vdnn_shape *in)
{
    vdnn_op_desc d = vt_op(kind, in[0], in[0]);
    d.n_inputs = n;
    for (int i = 0; i < n; i++) d.in[i] = in[i];
    if (kind == VDNN_LAYER_CONCAT)
        for (int i = 1; i < n; i++) d.out.c += in[i].c;
    if (kind == VDNN_LAYER_FEAT_CAT)
        for (int i = 1; i < n; i++) d.out.w += in[i].w;
    return d;
}

vdnn_op_desc vt_embed(int b, int t, int vocab, int width)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_EMBED, vt_shape(b, 1, t, 1), vt_shape(b, 1, t, width));
    d.p.vocab = vocab, d.p.filters = width;
    return d;
}

vdnn_op_desc vt_pos_embed(vdnn_shape in, int context)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_POS_EMBED, in, in);
    d.p.context = context;
    return d;
}

vdnn_op_desc vt_layernorm(vdnn_shape in)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_LAYERNORM, in, in);
    d.p.bn_eps = 1e-5f;
    return d;
}

vdnn_op_desc vt_linear(vdnn_shape in, int outputs, int bias)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_LINEAR, in, vt_shape(in.n, in.c, in.h, outputs));
    d.p.filters = outputs, d.p.bias = bias;
    return d;
}

vdnn_op_desc vt_attn_probs(int b, int t, int width, int heads)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_ATTN_PROBS, vt_shape(b, 1, t, 3 * width), vt_shape(b, heads, t, t));
    d.p.heads = heads;
    return d;
}

vdnn_op_desc vt_attn_mix(int b, int t, int width, int heads)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_ATTN_MIX, vt_shape(b, heads, t, t), vt_shape(b, 1, t, width));
    d.n_inputs = 2;
    d.in[1] = vt_shape(b, 1, t, 3 * width);
    return d;
}

vdnn_op_desc vt_attn(int b, int t, int width, int heads)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_ATTN, vt_shape(b, 1, t, 3 * width), vt_shape(b, 1, t, width));
    d.p.heads = heads;
    return d;
}

vdnn_op_desc vt_attn_group(vdnn_layer_kind kind, int b, int t, int width, int heads, int h0, int n)
{
    vdnn_op_desc d = kind == VDNN_LAYER_ATTN_PROBS ? vt_attn_probs(b, t, width, n) : vt_attn_mix(b, t, width, n);
    if (kind == VDNN_LAYER_ATTN_MIX) d.out.w = width / heads * n;
    d.p.heads = heads;
    d.p.head0 = h0;
    d.p.head_count = n;
    return d;
}

vdnn_op_desc vt_xent_seq(int b, int t, int vocab)
{
    return vt_op(VDNN_LAYER_SOFTMAX_XENT, vt_shape(b, 1, t, vocab), vt_shape(b, 1, t, vocab));
}

vdnn_op_desc vt_lstm(int b, int s, int h, int proj, int in, int tin, int ldx, int step0, int prev)
{
    const int pw = proj ? proj : h;
    vdnn_op_desc d = vt_op(VDNN_LAYER_LSTM, vt_shape(b, 1, tin, ldx), vt_shape(b, 1, s, pw + h));
    d.p.filters = h, d.p.proj = proj, d.p.lstm_in = in, d.p.step0 = step0;
    d.n_inputs = prev ? 2 : 1;
    if (prev) d.in[1] = vt_shape(b, 1, prev, pw + h);
    return d;
}

vdnn_op_desc vt_seq_cat(int b, int n, const int *steps, int w, int cols)
{
    vdnn_op_desc d = vt_op(VDNN_LAYER_SEQ_CAT, vt_shape(b, 1, steps[0], w), vt_shape(b, 1, 0, cols));
    d.n_inputs = n;
    d.p.filters = cols;
    for (int i = 0; i < n; i++) {
        d.in[i] = vt_shape(b, 1, steps[i], w);
        d.out.h += steps[i];
    }
    return d;
}

void vt_op_param_counts(const vdnn_op_desc *d, size_t *nw, size_t *nb, size_t *nstats)
{
    *nw = *nb = *nstats = 0;
    const vdnn_shape in = d->in[0];
    if (d->kind == VDNN_LAYER_CONV) {
        *nw = (size_t)d->p.filters * (size_t)(in.c / d->p.groups) * (size_t)d->p.kernel_h * (size_t)d->p.kernel_w;
        *nb = d->p.bias ? (size_t)d->p.filters : 0;
    } else if (d->kind == VDNN_LAYER_FC) {
        *nw = (size_t)d->p.filters * (size_t)in.c * (size_t)in.h * (size_t)in.w;
        *nb = d->p.bias ? (size_t)d->p.filters : 0;
    } else if (d->kind == VDNN_LAYER_EMBED) {
        *nw = (size_t)d->p.vocab * (size_t)d->p.filters;
    } else if (d->kind == VDNN_LAYER_POS_EMBED) {
        *nw = (size_t)d->p.context * (size_t)in.w;
    } else if (d->kind == VDNN_LAYER_LINEAR) {
        *nw = (size_t)d->p.filters * (size_t)in.w;
        *nb = d->p.bias ? (size_t)d->p.filters : 0;
    } else if (d->kind == VDNN_LAYER_LAYERNORM) {
        *nw = *nb = (size_t)in.w;
    } else if (d->kind == VDNN_LAYER_BATCHNORM) {
        *nw = *nb = (size_t)in.c;
        *nstats = 2 * (size_t)in.c;
    } else if (d->kind == VDNN_LAYER_LSTM) {
        vdnn_lstm_param_counts(&d->p, nw, nb);
    }
}

bool vt_op_has_backward(const vdnn_op_desc *d) { return d->training || d->kind == VDNN_LAYER_DROPOUT; }
