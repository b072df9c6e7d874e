/* The op harness's case table: hand-picked shapes and every distinct layer of the zoo. */
#include "op_cases.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_desc.h"
#include "testutil.h"

#define S vt_shape
#define MAXP VDNN_LAYER_MAXPOOL
#define AVGP VDNN_LAYER_AVGPOOL

/* Per-element finite differences cost two forward passes per checked element: only for small tensors. */
#define SMALL_ELEMS 8192

double vt_op_rtol(vdnn_layer_kind kind)
{
    switch (kind) {
    case VDNN_LAYER_CLIP:
    case VDNN_LAYER_RELU:
    case VDNN_LAYER_DROPOUT:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_FLATTEN: return 0;
    case VDNN_LAYER_GAP:
    case VDNN_LAYER_HARDSIGMOID:
    case VDNN_LAYER_CHANNEL_MUL:
    case VDNN_LAYER_SOFTMAX_XENT: return 1e-6;
    /* Own CUDA kernels against oneDNN's: expf and its polynomial differ by a few units in the last place. */
    case VDNN_LAYER_SIGMOID:
    case VDNN_LAYER_HARDSWISH:
    case VDNN_LAYER_SILU: return 1e-5;
    default: return 1e-4;
    }
}

double vt_op_ref_rtol(vdnn_layer_kind kind)
{
    switch (kind) {
    case VDNN_LAYER_RELU:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_FLATTEN: return 0;
    case VDNN_LAYER_DROPOUT:
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_GAP:
    case VDNN_LAYER_SIGMOID:
    case VDNN_LAYER_HARDSIGMOID:
    case VDNN_LAYER_HARDSWISH:
    case VDNN_LAYER_SILU:
    case VDNN_LAYER_CLIP:
    case VDNN_LAYER_CHANNEL_MUL:
    case VDNN_LAYER_SOFTMAX_XENT: return 1e-6;
    default: return 1e-4;
    }
}

double vt_op_rtol_dtype(vdnn_layer_kind kind, vdnn_dtype t)
{
    if (t == VDNN_DTYPE_F32) return vt_op_rtol(kind);
    switch (kind) {
    case VDNN_LAYER_RELU:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_FLATTEN: return 0;
    default: return t == VDNN_DTYPE_BF16 ? VT_BF16_RTOL : VT_F16_RTOL;
    }
}

static uint64_t name_seed(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h >> 16;
}

static bool is_small(const vdnn_op_desc *d)
{
    size_t nw, nb, ns, most = vdnn_shape_count(d->out);
    vt_op_param_counts(d, &nw, &nb, &ns);
    for (int i = 0; i < d->n_inputs; i++)
        if (vdnn_shape_count(d->in[i]) > most) most = vdnn_shape_count(d->in[i]);
    return most <= SMALL_ELEMS && nw <= SMALL_ELEMS;
}

static void add(vt_op_cases *cs, const char *name, vdnn_op_desc d)
{
    for (int i = 0; i < cs->n; i++)
        if (!memcmp(&cs->c[i].d, &d, sizeof d)) return;
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 64;
        cs->c = realloc(cs->c, (size_t)cs->cap * sizeof *cs->c);
        assert_non_null(cs->c);
    }
    vt_op_case *c = &cs->c[cs->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->d = d;
    c->small = is_small(&d);
    c->seed = name_seed(name);
}

static void add_conv(vt_op_cases *cs)
{
    add(cs, "conv 3x3 s1 p1", vt_conv(S(2, 3, 6, 6), 4, 3, 1, 1, 1, 1));
    add(cs, "conv 5x5 s2 p0 (floored output)", vt_conv(S(2, 3, 10, 10), 4, 5, 2, 0, 1, 1));
    add(cs, "conv 1x1 no bias", vt_conv(S(2, 8, 5, 5), 6, 1, 1, 0, 1, 0));
    add(cs, "conv 7x7 s2 p3", vt_conv(S(1, 3, 12, 12), 4, 7, 2, 3, 1, 1));
    add(cs, "conv 5x5 s1 p2", vt_conv(S(2, 2, 7, 7), 3, 5, 1, 2, 1, 1));
    add(cs, "conv 11x11 s4 p2 (AlexNet conv1 shape)", vt_conv(S(1, 3, 23, 23), 2, 11, 4, 2, 1, 1));
    add(cs, "conv groups=2", vt_conv(S(2, 4, 6, 6), 6, 3, 1, 1, 2, 1));
    add(cs, "conv depthwise s2", vt_conv(S(2, 4, 7, 7), 4, 3, 2, 1, 4, 1));
    add(cs, "conv depthwise x2 multiplier no bias", vt_conv(S(1, 3, 5, 5), 6, 3, 1, 1, 3, 0));
    add(cs, "conv 3x1 s2x1 p1x0", vt_conv_rect(S(2, 3, 7, 6), 4, 3, 1, 2, 1, 1, 0, 1, 1));
    add(cs, "conv 1x7 p0x3", vt_conv_rect(S(1, 2, 5, 9), 3, 1, 7, 1, 1, 0, 3, 1, 1));
    /* 16 channels of 10x10: on cpu-chunked the batch of 5 runs as chunks of 2+2+1 images (1 in the lean ones). */
    add(cs, "conv 3x3 s1 p1 16->16 batch 5", vt_conv(S(5, 16, 10, 10), 16, 3, 1, 1, 1, 1));
    add(cs, "conv 3x3 s2 p1 16->16 batch 5 no bias", vt_conv(S(5, 16, 10, 10), 16, 3, 2, 1, 1, 0));
    /* odd shapes */
    add(cs, "conv 1x1 on 1x1x1x1", vt_conv(S(1, 1, 1, 1), 1, 1, 1, 0, 1, 1));
    add(cs, "conv 3x3 p1 on a 1x1 map", vt_conv(S(2, 3, 1, 1), 5, 3, 1, 1, 1, 1));
    add(cs, "conv 1x3 on a single row", vt_conv_rect(S(2, 3, 1, 7), 4, 1, 3, 1, 1, 0, 1, 1, 1));
    add(cs, "conv 3x3 p2 (output larger than input)", vt_conv(S(1, 2, 4, 4), 3, 3, 1, 2, 1, 1));
    add(cs, "conv 5x5 over the whole map", vt_conv(S(2, 3, 5, 5), 7, 5, 1, 0, 1, 1));
    add(cs, "conv 1x1 s2 (shortcut)", vt_conv(S(2, 6, 7, 7), 8, 1, 2, 0, 1, 0));
    add(cs, "conv 2x2 s3 (stride beyond kernel)", vt_conv(S(1, 3, 8, 8), 4, 2, 3, 0, 1, 1));
    add(cs, "conv 5->7 channels", vt_conv(S(3, 5, 5, 6), 7, 3, 1, 1, 1, 1));
    add(cs, "conv groups=3 6->9", vt_conv(S(2, 6, 5, 5), 9, 3, 1, 1, 3, 1));
    add(cs, "conv 3x2 s2x3 p1x1 on 7x11", vt_conv_rect(S(1, 3, 7, 11), 4, 3, 2, 2, 3, 1, 1, 1, 1));
    /* larger */
    add(cs, "conv 3x3 16->32 @28", vt_conv(S(4, 16, 28, 28), 32, 3, 1, 1, 1, 1));
    add(cs, "conv 3x3 64->64 @28", vt_conv(S(2, 64, 28, 28), 64, 3, 1, 1, 1, 1));
    add(cs, "conv 7x7 s2 p3 3->16 @56 no bias", vt_conv(S(2, 3, 56, 56), 16, 7, 2, 3, 1, 0));
    add(cs, "conv 1x1 32->64 @14", vt_conv(S(4, 32, 14, 14), 64, 1, 1, 0, 1, 1));
    add(cs, "conv 3x3 groups=4 32->64 @14", vt_conv(S(2, 32, 14, 14), 64, 3, 1, 1, 4, 1));
    add(cs, "conv depthwise s2 16 @14 no bias", vt_conv(S(2, 16, 14, 14), 16, 3, 2, 1, 16, 0));
    add(cs, "conv 5x5 p2 8->16 @16", vt_conv(S(4, 8, 16, 16), 16, 5, 1, 2, 1, 1));
    add(cs, "conv 11x11 s4 p2 3->16 @63", vt_conv(S(2, 3, 63, 63), 16, 11, 4, 2, 1, 1));
    add(cs, "conv 3x3 3->8 @32", vt_conv(S(4, 3, 32, 32), 8, 3, 1, 1, 1, 1));
    /* Big enough to run threaded: a reproducible candidate must still give the same bits run after run. */
    add(cs, "conv 3x3 8->16 @12", vt_conv(S(4, 8, 12, 12), 16, 3, 1, 1, 1, 1));
    add(cs, "conv 3x3 s2 groups=2 8->8 @12", vt_conv(S(4, 8, 12, 12), 8, 3, 2, 1, 2, 1));
}

static void add_pool(vt_op_cases *cs)
{
    add(cs, "maxpool 3x3 s2", vt_pool(MAXP, S(2, 3, 9, 9), 3, 2, 0));
    add(cs, "maxpool 3x3 s2 (floored)", vt_pool(MAXP, S(1, 2, 8, 8), 3, 2, 0));
    add(cs, "maxpool 2x2 s2", vt_pool(MAXP, S(2, 3, 8, 8), 2, 2, 0));
    add(cs, "maxpool 3x3 s2 p1", vt_pool(MAXP, S(2, 2, 8, 8), 3, 2, 1));
    add(cs, "maxpool 3x3 s1 p1", vt_pool(MAXP, S(1, 2, 6, 6), 3, 1, 1));
    add(cs, "maxpool 3x2 s2x1", vt_pool_rect(MAXP, S(1, 2, 7, 5), 3, 2, 2, 1, 0, 0));
    add(cs, "maxpool 1x1 s1 (identity)", vt_pool(MAXP, S(2, 3, 4, 5), 1, 1, 0));
    add(cs, "maxpool 4x4 over the whole map", vt_pool(MAXP, S(2, 3, 4, 4), 4, 1, 0));
    add(cs, "maxpool 2x2 s2 p1", vt_pool(MAXP, S(1, 3, 5, 5), 2, 2, 1));
    add(cs, "maxpool 3x3 s2 on 5x7", vt_pool(MAXP, S(2, 5, 5, 7), 3, 2, 0));
    add(cs, "maxpool 1x2 s1 on a single row", vt_pool_rect(MAXP, S(2, 3, 1, 6), 1, 2, 1, 1, 0, 0));
    add(cs, "avgpool 3x3 s1 p1", vt_pool(AVGP, S(2, 3, 6, 6), 3, 1, 1));
    add(cs, "avgpool 2x2 s2", vt_pool(AVGP, S(2, 2, 6, 6), 2, 2, 0));
    add(cs, "avgpool 5x5 s3", vt_pool(AVGP, S(1, 2, 11, 11), 5, 3, 0));
    add(cs, "avgpool 3x2 s2 p1x1", vt_pool_rect(AVGP, S(1, 2, 7, 6), 3, 2, 2, 2, 1, 1));
    add(cs, "avgpool 7x7 over the whole map", vt_pool(AVGP, S(2, 8, 7, 7), 7, 1, 0));
    add(cs, "avgpool 3x3 s2 p1 on 7x9", vt_pool(AVGP, S(2, 3, 7, 9), 3, 2, 1));
    add(cs, "avgpool 2x2 s2 p1 (padding counted)", vt_pool(AVGP, S(1, 2, 5, 5), 2, 2, 1));
    add(cs, "maxpool 3x3 s2 p1 16 @28", vt_pool(MAXP, S(4, 16, 28, 28), 3, 2, 1));
    add(cs, "maxpool 2x2 s2 8 @28", vt_pool(MAXP, S(4, 8, 28, 28), 2, 2, 0));
    add(cs, "maxpool 3x3 s2 overlapping @27", vt_pool(MAXP, S(2, 16, 27, 27), 3, 2, 0));
    add(cs, "avgpool 3x3 s1 p1 @14", vt_pool(AVGP, S(2, 16, 14, 14), 3, 1, 1));
    add(cs, "avgpool 2x2 s2 @8", vt_pool(AVGP, S(2, 8, 8, 8), 2, 2, 0));
    add(cs, "avgpool 7x7 32 @7", vt_pool(AVGP, S(2, 32, 7, 7), 7, 1, 0));
}

/* ceil_mode windows and padding left out of averages: PyTorch's rules, run on the backends' own window loops. */
static void add_pool_windows(vt_op_cases *cs)
{
    add(cs, "maxpool 3x3 s2 ceil on 8x8", vt_pool_win(MAXP, S(2, 3, 8, 8), 3, 3, 2, 2, 0, 0, true, false));
    add(cs, "maxpool 2x2 s2 ceil on 7x7", vt_pool_win(MAXP, S(2, 3, 7, 7), 2, 2, 2, 2, 0, 0, true, false));
    add(cs, "maxpool 3x3 s2 p1 ceil on 6x6 (last window clipped)",
        vt_pool_win(MAXP, S(1, 2, 6, 6), 3, 3, 2, 2, 1, 1, true, false));
    /* Ceil would add a window starting in the right padding: PyTorch drops it, and the windows are floor's. */
    add(cs, "maxpool 2x2 s2 p1 ceil on 5x5 (same as floor)", vt_pool_win(MAXP, S(1, 2, 5, 5), 2, 2, 2, 2, 1, 1, true, false));
    add(cs, "maxpool 3x3 s1 p1 ceil (GoogLeNet branch)", vt_pool_win(MAXP, S(2, 4, 5, 5), 3, 3, 1, 1, 1, 1, true, false));
    add(cs, "maxpool 3x2 s2x1 ceil on 6x5", vt_pool_win(MAXP, S(2, 3, 6, 5), 3, 2, 2, 1, 0, 0, true, false));
    add(cs, "maxpool 3x3 s2 ceil 16 @28", vt_pool_win(MAXP, S(4, 16, 28, 28), 3, 3, 2, 2, 0, 0, true, false));
    add(cs, "avgpool 3x3 s2 ceil on 8x8", vt_pool_win(AVGP, S(2, 3, 8, 8), 3, 3, 2, 2, 0, 0, true, false));
    add(cs, "avgpool 3x3 s2 p1 ceil on 6x6 (padding counted)",
        vt_pool_win(AVGP, S(2, 3, 6, 6), 3, 3, 2, 2, 1, 1, true, false));
    add(cs, "avgpool 3x3 s2 p1 ceil on 6x6 (padding left out)",
        vt_pool_win(AVGP, S(2, 3, 6, 6), 3, 3, 2, 2, 1, 1, true, true));
    add(cs, "avgpool 3x3 s1 p1 (padding left out)", vt_pool_win(AVGP, S(2, 3, 5, 6), 3, 3, 1, 1, 1, 1, false, true));
    add(cs, "avgpool 2x2 s2 ceil on 7x5", vt_pool_win(AVGP, S(1, 2, 7, 5), 2, 2, 2, 2, 0, 0, true, false));
    add(cs, "avgpool 3x2 s2x1 p1x0 ceil on 6x7 (padding left out)",
        vt_pool_win(AVGP, S(2, 2, 6, 7), 3, 2, 2, 1, 1, 0, true, true));
    add(cs, "avgpool 3x3 s2 p1 ceil 16 @28", vt_pool_win(AVGP, S(4, 16, 28, 28), 3, 3, 2, 2, 1, 1, true, false));
}

/* The element-wise activations and the per-channel scaling (MobileNet, EfficientNet, squeeze-and-excitation). */
static void add_act(vt_op_cases *cs)
{
    static const vdnn_layer_kind smooth[] = {VDNN_LAYER_SIGMOID, VDNN_LAYER_HARDSWISH, VDNN_LAYER_SILU};
    char name[96];
    for (int k = 0; k < 3; k++) {
        const char *kn = vdnn_layer_kind_name(smooth[k]);
        snprintf(name, sizeof name, "%s", kn);
        add(cs, name, vt_act(smooth[k], S(2, 3, 5, 5)));
        snprintf(name, sizeof name, "%s on 3x5x1x7", kn);
        add(cs, name, vt_act(smooth[k], S(3, 5, 1, 7)));
        snprintf(name, sizeof name, "%s on one value", kn);
        add(cs, name, vt_act(smooth[k], S(1, 1, 1, 1)));
        snprintf(name, sizeof name, "%s @14", kn);
        add(cs, name, vt_act(smooth[k], S(4, 16, 14, 14)));
    }
    add(cs, "hardsigmoid (PyTorch's 1/6, 1/2)", vt_hardsigmoid(S(2, 3, 5, 5), 1.0f / 6.0f, 0.5f));
    add(cs, "hardsigmoid (ONNX's default 0.2, 0.5) on 3x5x1x7", vt_hardsigmoid(S(3, 5, 1, 7), 0.2f, 0.5f));
    add(cs, "hardsigmoid alpha -0.25 beta 0.4", vt_hardsigmoid(S(1, 4, 3, 3), -0.25f, 0.4f));
    add(cs, "hardsigmoid @14", vt_hardsigmoid(S(4, 16, 14, 14), 1.0f / 6.0f, 0.5f));
    add(cs, "clip 0..6 (relu6)", vt_clip(S(2, 3, 5, 5), 0.0f, 6.0f));
    add(cs, "clip -0.5..0.75 on 3x5x1x7", vt_clip(S(3, 5, 1, 7), -0.5f, 0.75f));
    add(cs, "clip 0..6 on one value", vt_clip(S(1, 1, 1, 1), 0.0f, 6.0f));
    add(cs, "clip 0..6 @14", vt_clip(S(4, 16, 14, 14), 0.0f, 6.0f));
    add(cs, "channel_mul", vt_channel_mul(S(2, 3, 5, 5)));
    add(cs, "channel_mul on 1x1 maps", vt_channel_mul(S(2, 8, 1, 1)));
    add(cs, "channel_mul on 3x5x1x7", vt_channel_mul(S(3, 5, 1, 7)));
    add(cs, "channel_mul on one value", vt_channel_mul(S(1, 1, 1, 1)));
    add(cs, "channel_mul @14", vt_channel_mul(S(4, 16, 14, 14)));
}

static void add_norm(vt_op_cases *cs)
{
    add(cs, "relu", vt_relu(S(2, 3, 5, 5)));
    add(cs, "relu on 3x5x1x7", vt_relu(S(3, 5, 1, 7)));
    add(cs, "relu on one value", vt_relu(S(1, 1, 1, 1)));
    add(cs, "relu @14", vt_relu(S(4, 16, 14, 14)));
    add(cs, "lrn size 5 (strong alpha)", vt_lrn(S(2, 7, 3, 3), 5, 0.5f, 0.75f, 2.0f));
    add(cs, "lrn size 3 beta 1 k 1", vt_lrn(S(1, 4, 3, 4), 3, 1.0f, 1.0f, 1.0f));
    add(cs, "lrn AlexNet constants", vt_lrn(S(2, 6, 3, 3), 5, 1e-4f, 0.75f, 2.0f));
    /* 35 positions per channel: whole and partial blocks of the CPU backward's spatial tiling. */
    add(cs, "lrn size 5 on 5x7", vt_lrn(S(2, 8, 5, 7), 5, 0.8f, 0.75f, 1.5f));
    add(cs, "lrn size 7 beta 0.6", vt_lrn(S(1, 9, 4, 5), 7, 0.8f, 0.6f, 1.0f));
    add(cs, "lrn size 1", vt_lrn(S(2, 3, 2, 2), 1, 0.5f, 0.75f, 1.0f));
    add(cs, "lrn size 7 over 3 channels", vt_lrn(S(2, 3, 3, 3), 7, 0.5f, 0.75f, 1.0f));
    add(cs, "lrn 5 AlexNet @13", vt_lrn(S(2, 32, 13, 13), 5, 1e-4f, 0.75f, 2.0f));
    add(cs, "lrn 5 strong @9", vt_lrn(S(2, 16, 9, 9), 5, 0.5f, 0.75f, 1.0f));
    add(cs, "lrn 3 @5", vt_lrn(S(2, 8, 5, 5), 3, 0.3f, 0.6f, 1.5f));
    add(cs, "batchnorm training", vt_bn(S(4, 3, 4, 4), true));
    add(cs, "batchnorm training 1x1 spatial", vt_bn(S(6, 5, 1, 1), true));
    add(cs, "batchnorm inference", vt_bn(S(2, 3, 4, 4), false));
    add(cs, "batchnorm training batch 1", vt_bn(S(1, 3, 3, 3), true));
    add(cs, "batchnorm training 1 channel", vt_bn(S(4, 1, 3, 5), true));
    add(cs, "batchnorm training 7 channels on 2x5", vt_bn(S(3, 7, 2, 5), true));
    vdnn_op_desc bn = vt_bn(S(3, 4, 3, 2), true);
    bn.p.bn_momentum = 0.25f, bn.p.bn_eps = 1e-3f;
    add(cs, "batchnorm training momentum 0.25 eps 1e-3", bn);
    add(cs, "batchnorm training @14", vt_bn(S(4, 16, 14, 14), true));
    add(cs, "batchnorm training @7", vt_bn(S(4, 8, 7, 7), true));
    add(cs, "batchnorm inference @14", vt_bn(S(4, 16, 14, 14), false));
    add(cs, "batchnorm training 16 @8 batch 8", vt_bn(S(8, 16, 8, 8), true));
    add(cs, "lrn 5 @6", vt_lrn(S(4, 8, 6, 6), 5, 1e-2f, 0.75f, 2.0f));
}

static void add_fc_and_friends(vt_op_cases *cs)
{
    add(cs, "fc from 4x3x3", vt_fc(S(3, 4, 3, 3), 5, 1));
    add(cs, "fc no bias", vt_fc(S(4, 10, 1, 1), 3, 0));
    add(cs, "fc 1 output", vt_fc(S(2, 6, 1, 1), 1, 1));
    add(cs, "fc one value to one", vt_fc(S(1, 1, 1, 1), 1, 1));
    add(cs, "fc from 7x3x5", vt_fc(S(2, 7, 3, 5), 9, 1));
    add(cs, "fc from 16x4x4", vt_fc(S(4, 16, 4, 4), 10, 1));
    add(cs, "fc 256->100 no bias", vt_fc(S(8, 256, 1, 1), 100, 0));
    add(cs, "fc 20->7", vt_fc(S(3, 20, 1, 1), 7, 1));
    add(cs, "fc from 16x4x4 batch 8", vt_fc(S(8, 16, 4, 4), 10, 1));
    /* bf16 takes oneDNN's blocked weights from a batch of 128 on, plain ones below (cpu_ops_dnnl_fc.c). */
    add(cs, "fc 48->20 batch 128", vt_fc(S(128, 48, 1, 1), 20, 1));
    add(cs, "dropout training", vt_dropout(S(2, 3, 4, 4), 0.3f, true));
    add(cs, "dropout inference", vt_dropout(S(2, 3, 4, 4), 0.3f, false));
    add(cs, "dropout on 2x3x5x7", vt_dropout(S(2, 3, 5, 7), 0.3f, true));
    add(cs, "dropout p 0.4 on 2x3x4x5", vt_dropout(S(2, 3, 4, 5), 0.4f, true));
    add(cs, "dropout p 0 (identity)", vt_dropout(S(2, 3, 3, 3), 0.0f, true));
    add(cs, "dropout p 0.9", vt_dropout(S(2, 4, 5, 5), 0.9f, true));
    add(cs, "dropout p 0.5 @8", vt_dropout(S(4, 16, 8, 8), 0.5f, true));
    add(cs, "dropout inference @8", vt_dropout(S(4, 16, 8, 8), 0.5f, false));
    const vdnn_shape cat[3] = {S(2, 2, 3, 3), S(2, 3, 3, 3), S(2, 1, 3, 3)};
    add(cs, "concat of 2", vt_multi(VDNN_LAYER_CONCAT, 2, cat));
    add(cs, "concat of 3", vt_multi(VDNN_LAYER_CONCAT, 3, cat));
    const vdnn_shape cat213[3] = {S(2, 2, 3, 3), S(2, 1, 3, 3), S(2, 3, 3, 3)};
    add(cs, "concat of 2+1+3 channels", vt_multi(VDNN_LAYER_CONCAT, 3, cat213));
    const vdnn_shape cat7[3] = {S(2, 8, 7, 7), S(2, 16, 7, 7), S(2, 4, 7, 7)};
    add(cs, "concat of 3 @7", vt_multi(VDNN_LAYER_CONCAT, 3, cat7));
    const vdnn_shape ones[VDNN_MAX_INPUTS] = {S(3, 1, 1, 1), S(3, 1, 1, 1), S(3, 1, 1, 1), S(3, 1, 1, 1),
                                              S(3, 1, 1, 1), S(3, 1, 1, 1), S(3, 1, 1, 1), S(3, 1, 1, 1)};
    add(cs, "concat of 8 single values", vt_multi(VDNN_LAYER_CONCAT, VDNN_MAX_INPUTS, ones));
    /* feat_cat: rows side by side along the last dimension (attention's head groups joined). */
    const vdnn_shape fc3[3] = {S(2, 1, 5, 4), S(2, 1, 5, 2), S(2, 1, 5, 6)};
    add(cs, "feat_cat of 4+2+6", vt_multi(VDNN_LAYER_FEAT_CAT, 3, fc3));
    const vdnn_shape fc2[2] = {S(3, 2, 4, 1), S(3, 2, 4, 3)};
    add(cs, "feat_cat of 1+3 on 2 channels", vt_multi(VDNN_LAYER_FEAT_CAT, 2, fc2));
    add(cs, "feat_cat of 8 single values", vt_multi(VDNN_LAYER_FEAT_CAT, VDNN_MAX_INPUTS, ones));
    const vdnn_shape same[VDNN_MAX_INPUTS] = {S(2, 3, 4, 4), S(2, 3, 4, 4), S(2, 3, 4, 4), S(2, 3, 4, 4),
                                              S(2, 3, 4, 4), S(2, 3, 4, 4), S(2, 3, 4, 4), S(2, 3, 4, 4)};
    add(cs, "add of 2", vt_multi(VDNN_LAYER_ADD, 2, same));
    add(cs, "add of 3", vt_multi(VDNN_LAYER_ADD, 3, same));
    add(cs, "add of 8", vt_multi(VDNN_LAYER_ADD, VDNN_MAX_INPUTS, same));
    const vdnn_shape two[2] = {S(2, 3, 2, 2), S(2, 3, 2, 2)};
    add(cs, "add of 2 on 2x2 maps", vt_multi(VDNN_LAYER_ADD, 2, two));
    const vdnn_shape add14[3] = {S(2, 16, 14, 14), S(2, 16, 14, 14), S(2, 16, 14, 14)};
    add(cs, "add of 3 @14", vt_multi(VDNN_LAYER_ADD, 3, add14));
    add(cs, "gap", vt_gap(S(2, 3, 4, 4)));
    add(cs, "gap on a 1x1 map", vt_gap(S(2, 5, 1, 1)));
    add(cs, "gap on 4x5", vt_gap(S(2, 3, 4, 5)));
    add(cs, "gap 1 channel on 3x5", vt_gap(S(3, 1, 3, 5)));
    add(cs, "gap 64 @7", vt_gap(S(4, 64, 7, 7)));
    add(cs, "flatten", vt_flatten(S(2, 3, 4, 4)));
    add(cs, "flatten of 1x1 maps", vt_flatten(S(2, 7, 1, 1)));
    add(cs, "flatten of 2x3 maps", vt_flatten(S(2, 2, 2, 3)));
    add(cs, "flatten 16 @3", vt_flatten(S(4, 16, 3, 3)));
    add(cs, "softmax_xent", vt_xent(4, 5));
    add(cs, "softmax_xent 2 classes batch 1", vt_xent(1, 2));
    add(cs, "softmax_xent 7 classes", vt_xent(4, 7));
    add(cs, "softmax_xent 10 classes", vt_xent(8, 10));
    add(cs, "softmax_xent 1000 classes", vt_xent(4, 1000));
}

/* Sequence ops, B x T x F as Bx1xTxF (docs/sequence.md): small shapes for finite differences element by element,
 * and gpt-mini's at batch 2 (the zoo adds the rest). */
static void add_seq(vt_op_cases *cs)
{
    add(cs, "embed vocab 11 width 6", vt_embed(2, 5, 11, 6));
    add(cs, "embed one token", vt_embed(1, 1, 3, 4));
    add(cs, "pos_embed 5 of context 7", vt_pos_embed(S(2, 1, 5, 6), 7));
    add(cs, "pos_embed full context", vt_pos_embed(S(3, 1, 4, 3), 4));
    add(cs, "layernorm 8", vt_layernorm(S(2, 1, 5, 8)));
    add(cs, "layernorm 1 token of 33", vt_layernorm(S(1, 1, 1, 33)));
    add(cs, "linear 6->10", vt_linear(S(2, 1, 5, 6), 10, 1));
    add(cs, "linear 7->3 no bias", vt_linear(S(1, 1, 4, 7), 3, 0));
    add(cs, "linear on 4-channel rows", vt_linear(S(2, 4, 3, 5), 6, 1));
    add(cs, "attn_probs 2 heads", vt_attn_probs(2, 5, 8, 2));
    add(cs, "attn_probs 1 head 1 token", vt_attn_probs(1, 1, 4, 1));
    add(cs, "attn_probs 3 heads of 1", vt_attn_probs(1, 6, 3, 3));
    add(cs, "attn_mix 2 heads", vt_attn_mix(2, 5, 8, 2));
    add(cs, "attn_mix 3 heads of 1", vt_attn_mix(1, 6, 3, 3));
    /* Head groups: the op computes heads h0 .. h0+n-1 of H, reading their columns of qkv. */
    add(cs, "attn_probs heads 2-3 of 4", vt_attn_group(VDNN_LAYER_ATTN_PROBS, 2, 5, 8, 4, 2, 2));
    add(cs, "attn_probs head 0 of 3", vt_attn_group(VDNN_LAYER_ATTN_PROBS, 1, 6, 6, 3, 0, 1));
    add(cs, "attn_probs head 2 of 3", vt_attn_group(VDNN_LAYER_ATTN_PROBS, 1, 6, 6, 3, 2, 1));
    add(cs, "attn_mix heads 2-3 of 4", vt_attn_group(VDNN_LAYER_ATTN_MIX, 2, 5, 8, 4, 2, 2));
    add(cs, "attn_mix head 1 of 3", vt_attn_group(VDNN_LAYER_ATTN_MIX, 1, 6, 6, 3, 1, 1));
    /* Fused attention: one block of query rows; 300 tokens go in two (218 rows, then 82), each meeting the keys up to
     * its last row. */
    add(cs, "attention 2 heads", vt_attn(2, 5, 8, 2));
    add(cs, "attention 1 head 1 token", vt_attn(1, 1, 4, 1));
    add(cs, "attention 3 heads of 1", vt_attn(1, 6, 3, 3));
    add(cs, "attention 300 tokens in two blocks", vt_attn(1, 300, 4, 2));
    add(cs, "gelu", vt_act(VDNN_LAYER_GELU, S(2, 1, 5, 7)));
    add(cs, "softmax_xent over tokens", vt_xent_seq(2, 5, 7));
    add(cs, "softmax_xent one token", vt_xent_seq(3, 1, 4));
    add(cs, "dropout on tokens", vt_dropout(S(2, 1, 5, 6), 0.25f, true));
    const vdnn_shape two[2] = {S(2, 1, 5, 6), S(2, 1, 5, 6)};
    add(cs, "add of tokens (residual)", vt_multi(VDNN_LAYER_ADD, 2, two));
    /* gpt-mini's shapes (width 128, 4 heads, context 64), batch 2 */
    add(cs, "gpt-mini attn_probs", vt_attn_probs(2, 64, 128, 4));
    add(cs, "gpt-mini attn_mix", vt_attn_mix(2, 64, 128, 4));
    add(cs, "gpt-mini attention fused", vt_attn(2, 64, 128, 4));
    add(cs, "gpt-mini linear fc", vt_linear(S(2, 1, 64, 128), 512, 1));
    add(cs, "gpt-mini layernorm", vt_layernorm(S(2, 1, 64, 128)));
    add(cs, "gpt-mini softmax_xent", vt_xent_seq(2, 64, 256));
    /* GPT-2's vocabulary: the CPU's loss runs 5 rows of it at a time, so nine blocks and a tail of 2. */
    add(cs, "softmax_xent gpt2 vocabulary, 47 tokens", vt_xent_seq(1, 47, 50257));
    /* LSTM chunks (docs/sequence.md, "LSTM"): the whole sequence from zero state; steps 2..4 of a longer input;
     * a chunk reading the previous layer's chunk rows [h | c] and a previous chunk's state; a projection. */
    add(cs, "lstm 4 steps hidden 3", vt_lstm(2, 4, 3, 0, 5, 4, 5, 0, 0));
    add(cs, "lstm steps 2..4 of 6 with state", vt_lstm(2, 3, 4, 0, 3, 6, 3, 2, 2));
    add(cs, "lstm over chunk rows with state", vt_lstm(2, 3, 3, 0, 4, 3, 7, 0, 3));
    add(cs, "lstmp proj 2 with state", vt_lstm(2, 4, 5, 2, 3, 4, 3, 0, 1));
    add(cs, "lstmp proj 3 over chunk rows", vt_lstm(1, 2, 4, 3, 3, 2, 7, 0, 2));
    add(cs, "lstm one step batch 3", vt_lstm(3, 1, 6, 0, 2, 1, 2, 0, 1));
    const int steps[3] = {2, 3, 1};
    add(cs, "seq_cat of h columns", vt_seq_cat(2, 3, steps, 7, 4));
    add(cs, "seq_cat whole rows", vt_seq_cat(1, 2, steps, 3, 3));
    /* lstm-lm's chunk at batch 2 (the zoo adds its others) */
    add(cs, "lstm-lm chunk", vt_lstm(2, 32, 256, 0, 256, 32, 512, 0, 32));
    /* lstm-long's chunk at batch 8: with 16-bit maps its fp32 copies of the batch exceed the other widened ops'
     * bound, so it has a "grouped" candidate (groups of 4) besides the default (the batch whole). */
    add(cs, "lstm-long chunk batch 8", vt_lstm(8, 128, 256, 0, 256, 128, 512, 0, 128));
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The zoo's nets are sized for 224x224 images; their layers keep every kernel, stride, padding and channel
 * count at the smallest input side from 32 up that the net resolves at, batch 2 (the whole zoo at the speed of
 * two CPU cores). full: at the nets' own input size, batch 1 (for machines with cores to spare). */
static void add_zoo_model(vt_op_cases *cs, const char *model, bool full)
{
    vdnn_graph_t *g = vt_load_zoo(model);
    vdnn_shape in = g->default_input;
    in.n = full ? 1 : 2;
    vdnn_error err;
    int side = in.h < 32 || full ? in.h : 32;
    bool seq = false;
    for (int l = 1; l < g->n_layers; l++) seq |= g->layers[l].kind == VDNN_LAYER_EMBED;
    bool lstm = false;
    for (int l = 1; l < g->n_layers; l++) lstm |= g->layers[l].kind == VDNN_LAYER_LSTM;
    if (seq) {
        /* A sequence model (docs/sequence.md): its input is 1xTx1; 16 tokens keep every width and head. A chunked
         * LSTM's graph holds its chunks for the file's length: it keeps that. */
        if (!full && !lstm) in.h = 16;
        vt_assert_ok(vdnn_graph_resolve(g, in, g->default_classes, &err), err);
        side = in.h;
    }
    while (!seq && side <= in.h) {
        vdnn_shape s = in;
        s.h = s.w = side;
        if (vdnn_graph_resolve(g, s, g->default_classes, &err) == VDNN_OK) break;
        side++;
    }
    if (!seq && side > in.h) fail_msg("zoo %s: resolves at no input side from 32 to %d", model, in.h);
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, true, &d);
        char name[96];
        snprintf(name, sizeof name, "zoo %s@%d %s", model, side, g->layers[l].name);
        add(cs, name, d);
    }
    vdnn_graph_free(g);
}

static void add_zoo(vt_op_cases *cs, bool full)
{
    DIR *dir = opendir(VDNN_SOURCE_DIR "/models");
    assert_non_null(dir);
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg")) continue;
        assert_true(n < 64);
        names[n] = strndup(e->d_name, len - 4);
        assert_non_null(names[n++]);
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        /* biglstm's 75 M parameters per layer would take the double reference minutes, lstm-long's 32 chunks of 128
         * steps a dozen seconds; lstm-lm (the same op, lstm-long's widths) stands for them. */
        if (!full && (!strcmp(names[i], "biglstm") || !strcmp(names[i], "lstm-long"))) {
            free(names[i]);
            continue;
        }
        add_zoo_model(cs, names[i], full);
        free(names[i]);
    }
}

void vt_op_cases_build(vt_op_cases *cs, bool quick)
{
    memset(cs, 0, sizeof *cs);
    add_conv(cs);
    add_pool(cs);
    add_pool_windows(cs);
    add_norm(cs);
    add_act(cs);
    add_fc_and_friends(cs);
    add_seq(cs);
    if (!quick) {
        add(cs, "dropout over 3000007 values", vt_dropout(S(1, 3000007, 1, 1), 0.25f, true));
        const char *full = getenv("VDNN_TEST_ZOO_FULL");
        add_zoo(cs, full && *full && strcmp(full, "0"));
    }
}

void vt_op_cases_free(vt_op_cases *cs)
{
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}
