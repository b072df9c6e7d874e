/* ONNX ops with a sliding window: Conv, MaxPool and AveragePool, sharing the kernel, stride and pad rules, and
 * the Pad they can fold in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx_ops.h"

typedef struct window {
    int kh, kw, sh, sw, ph, pw;
} window;

static vdnn_status read_pairs(onnx_map *x, const char *name, int64_t def, int64_t lo, int64_t *v, int want)
{
    int n;
    vdnn_status st = onnx_attr_ints(x, name, v, 4, &n);
    if (st) return st;
    if (!n)
        for (int i = 0; i < want; i++) v[i] = def;
    else if (n != want)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "%s has %d values (vdnn maps 2-D windows only, which need %d)",
                         name, n, want);
    for (int i = 0; i < want; i++)
        if (v[i] < lo || v[i] > VDNN_ONNX_MAX_DIM)
            return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "%s value %lld is not supported (vdnn takes %lld to %ld)",
                             name, (long long)v[i], (long long)lo, VDNN_ONNX_MAX_DIM);
    return VDNN_OK;
}

/* Padding from auto_pad SAME_*: symmetric and independent of the input size only at stride 1 with odd kernels. */
static vdnn_status same_pads(onnx_map *x, const char *mode, window *w)
{
    if (w->sh != 1 || w->sw != 1 || w->kh % 2 == 0 || w->kw % 2 == 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "auto_pad=%s with stride %dx%d and kernel %dx%d is not supported (the padding would depend "
                         "on the input size or be asymmetric); export with explicit pads",
                         mode, w->sh, w->sw, w->kh, w->kw);
    w->ph = (w->kh - 1) / 2;
    w->pw = (w->kw - 1) / 2;
    return VDNN_OK;
}

/* kernel_shape (or the weight's kh x kw when kernel > 0), strides, dilations, auto_pad and pads. */
static vdnn_status read_window(onnx_map *x, const int64_t *kernel, window *w)
{
    int64_t k[4], s[4], d[4], p[4];
    int nk;
    vdnn_status st = onnx_attr_ints(x, "kernel_shape", k, 4, &nk);
    if (st) return st;
    if (kernel && nk && (nk != 2 || k[0] != kernel[0] || k[1] != kernel[1]))
        return onnx_fail(x, VDNN_ERR_PARSE, "kernel_shape does not match the weight's %lldx%lld",
                         (long long)kernel[0], (long long)kernel[1]);
    if (!kernel && !nk) return onnx_fail(x, VDNN_ERR_PARSE, "kernel_shape is missing");
    if (!kernel && (st = read_pairs(x, "kernel_shape", 1, 1, k, 2))) return st;
    if (kernel && (kernel[0] < 1 || kernel[1] < 1 || kernel[0] > VDNN_ONNX_MAX_DIM || kernel[1] > VDNN_ONNX_MAX_DIM))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "a %lldx%lld kernel is not supported", (long long)kernel[0],
                         (long long)kernel[1]);
    if (kernel) memcpy(k, kernel, 2 * sizeof *k);
    if ((st = read_pairs(x, "strides", 1, 1, s, 2)) || (st = read_pairs(x, "dilations", 1, 1, d, 2)) ||
        (st = read_pairs(x, "pads", 0, 0, p, 4)))
        return st;
    if (d[0] != 1 || d[1] != 1)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "dilations [%lld, %lld] are not supported (vdnn's windows are not dilated)", (long long)d[0],
                         (long long)d[1]);
    if (p[0] != p[2] || p[1] != p[3])
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "asymmetric pads [%lld, %lld, %lld, %lld] are not supported (vdnn pads both ends of an "
                         "axis equally)",
                         (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
    *w = (window){(int)k[0], (int)k[1], (int)s[0], (int)s[1], (int)p[0], (int)p[1]};
    char mode[16];
    if ((st = onnx_attr_string(x, "auto_pad", "NOTSET", mode, sizeof mode))) return st;
    if (!strcmp(mode, "NOTSET")) return VDNN_OK;
    if (onnx_has_attr(x, "pads")) return onnx_fail(x, VDNN_ERR_PARSE, "has both pads and auto_pad=%s", mode);
    if (!strcmp(mode, "VALID")) return VDNN_OK;
    if (!strcmp(mode, "SAME_UPPER") || !strcmp(mode, "SAME_LOWER")) return same_pads(x, mode, w);
    return onnx_fail(x, VDNN_ERR_PARSE, "auto_pad '%s' is not an ONNX padding mode", mode);
}

static void set_window(vdnn_layer *L, const window *w)
{
    L->p.kernel_h = w->kh;
    L->p.kernel_w = w->kw;
    L->p.stride_h = w->sh;
    L->p.stride_w = w->sw;
    L->p.pad_h = w->ph;
    L->p.pad_w = w->pw;
}

vdnn_status onnx_map_conv(onnx_map *x)
{
    const onnx_value *in;
    const Onnx__TensorProto *wt, *bt = NULL;
    vdnn_status st = onnx_input_padded(x, 0, &in);
    if (!st) st = onnx_input_const(x, 1, &wt);
    if (!st && onnx_has_input(x, 2)) st = onnx_input_const(x, 2, &bt);
    if (st) return st;
    char dims[64];
    onnx_dims_str(wt, dims, sizeof dims);
    if (wt->n_dims != 4)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "weight '%s' is %s: vdnn maps 2-D convolutions only (M x C x kH x kW)",
                         vdnn_onnx_str(wt->name), dims);
    if (wt->dims[0] < 1 || wt->dims[0] > VDNN_ONNX_MAX_COUNT || wt->dims[1] < 1)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "weight '%s' is %s", vdnn_onnx_str(wt->name), dims);
    window w;
    int64_t groups;
    if ((st = read_window(x, wt->dims + 2, &w))) return st;
    if ((st = onnx_attr_int(x, "group", 1, 1, VDNN_ONNX_MAX_COUNT, &groups))) return st;
    w.ph += in->pad_h;
    w.pw += in->pad_w;
    int filters = (int)wt->dims[0];
    if (filters % groups)
        return onnx_fail(x, VDNN_ERR_PARSE, "group=%lld does not divide the %d filters", (long long)groups, filters);
    int layer;
    if ((st = onnx_add_layer(x, VDNN_LAYER_CONV, &in->layer, 1, 4, &layer))) return st;
    vdnn_layer *L = &x->g->layers[layer];
    set_window(L, &w);
    L->p.filters = filters;
    L->p.groups = (int)groups;
    L->p.bias = bt != NULL;
    st = onnx_init_from(x, layer, ".weight", wt);
    if (!st && bt) st = onnx_init_from(x, layer, ".bias", bt);
    return st;
}

/* With ceil_mode, ONNX's output size is ceil((in + pads - k) / stride) + 1; PyTorch's, vdnn's, drops a last window
 * that would start in the right padding. Where the two differ the file's network is not one vdnn can run. */
static vdnn_status check_ceil(onnx_map *x, int in_layer, const window *w)
{
    vdnn_shape s;
    vdnn_status st = onnx_shape(x, in_layer, &s);
    if (st) return st;
    const int in[2] = {s.h, s.w}, k[2] = {w->kh, w->kw}, stride[2] = {w->sh, w->sw}, pad[2] = {w->ph, w->pw};
    for (int a = 0; a < 2; a++) {
        long span = (long)in[a] + 2L * pad[a] - k[a];
        if (span < 0) continue; /* too small for the window: the shape check says so */
        long onnx = (span + stride[a] - 1) / stride[a] + 1;
        int vdnn = vdnn_window_out(in[a], k[a], stride[a], pad[a], true);
        if (onnx != vdnn)
            return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                             "ceil_mode=1 on %s %d gives %ld outputs by ONNX's formula, but its last window would "
                             "start in the padding, which PyTorch and vdnn drop (%d outputs)",
                             a ? "width" : "height", in[a], onnx, vdnn);
    }
    return VDNN_OK;
}

/* ceil_mode, then the window; vdnn's pools also need pads of at most half the window (as the .cfg reader).
 * Average pooling folds a preceding Pad in: its zeros count in every window, as vdnn's padding does when it is
 * counted. */
static vdnn_status pool(onnx_map *x, vdnn_layer_kind kind, bool include_pad)
{
    int64_t ceil_mode;
    const onnx_value *in;
    window w;
    bool avg = kind == VDNN_LAYER_AVGPOOL;
    vdnn_status st = avg ? onnx_input_padded(x, 0, &in) : onnx_input_layer(x, 0, 4, &in);
    if (!st) st = onnx_attr_int(x, "ceil_mode", 0, 0, 1, &ceil_mode);
    if (!st) st = read_window(x, NULL, &w);
    if (st) return st;
    /* Without pads of its own, count_include_pad changes nothing: a Pad's zeros are values and always count. */
    const bool exclude = avg && !include_pad && (w.ph || w.pw);
    if (exclude && (in->pad_h || in->pad_w))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "count_include_pad=0 with pads %dx%d after a Pad is not supported (the Pad's zeros count in "
                         "the average, its own padding would not)",
                         w.ph, w.pw);
    w.ph += in->pad_h;
    w.pw += in->pad_w;
    if (2 * w.ph > w.kh || 2 * w.pw > w.kw)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "pads %dx%d are more than half the %dx%d window", w.ph, w.pw, w.kh,
                         w.kw);
    if (ceil_mode && (st = check_ceil(x, in->layer, &w))) return st;
    int layer;
    if ((st = onnx_add_layer(x, kind, &in->layer, 1, 4, &layer))) return st;
    vdnn_layer *L = &x->g->layers[layer];
    set_window(L, &w);
    L->p.ceil_mode = (int)ceil_mode;
    L->p.exclude_pad = exclude;
    return VDNN_OK;
}

vdnn_status onnx_map_maxpool(onnx_map *x)
{
    int64_t order;
    vdnn_status st = onnx_attr_int(x, "storage_order", 0, 0, 1, &order); /* only orders the unused indices */
    return st ? st : pool(x, VDNN_LAYER_MAXPOOL, false);
}

vdnn_status onnx_map_avgpool(onnx_map *x)
{
    int64_t include;
    vdnn_status st = onnx_attr_int(x, "count_include_pad", 0, 0, 1, &include);
    return st ? st : pool(x, VDNN_LAYER_AVGPOOL, include);
}

/* Zero padding of H and W, equal at both ends, as PyTorch writes it before an average pooling with
 * count_include_pad; the Conv or AveragePool that reads it folds it into its own pads. */
vdnn_status onnx_map_pad(onnx_map *x)
{
    const onnx_value *in;
    const Onnx__TensorProto *t;
    char mode[16];
    int64_t p[8], *v = NULL;
    size_t n = 0;
    int np = 0;
    float value = 0.0f;
    double dvalue = 0.0;
    vdnn_status st = onnx_input_layer(x, 0, 4, &in);
    if (!st) st = onnx_attr_string(x, "mode", "constant", mode, sizeof mode);
    if (!st && x->m->opset < 11) {
        if (!(st = onnx_attr_ints(x, "pads", p, 8, &np))) st = onnx_attr_float(x, "value", 0.0f, &value);
        dvalue = value;
    } else if (!st) {
        if (onnx_has_attr(x, "pads") || onnx_has_attr(x, "value"))
            return onnx_fail(x, VDNN_ERR_PARSE, "pads and value are inputs, not attributes, from opset 11 on");
        if (!(st = onnx_input_const(x, 1, &t))) st = onnx_const_ints(x, t, &v, &n);
        np = !st && n == 8 ? 8 : 0;
        for (int i = 0; i < np; i++) p[i] = v[i];
        free(v);
        if (!st && onnx_has_input(x, 2) && !(st = onnx_input_const(x, 2, &t))) st = onnx_const_scalar(x, t, &dvalue);
    }
    if (st) return st;
    if (strcmp(mode, "constant") || dvalue != 0.0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "mode '%s' with value %g is not supported (only zero padding)", mode,
                         dvalue);
    if (np != 8 || p[0] || p[1] || p[4] || p[5] || p[2] != p[6] || p[3] != p[7] || p[2] < 0 || p[3] < 0 ||
        p[2] > VDNN_ONNX_MAX_DIM || p[3] > VDNN_ONNX_MAX_DIM)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "only padding H and W equally at both ends is supported (pads must be [0, 0, h, w, 0, 0, h, "
                         "w])");
    onnx_value out = *in;
    out.pad_h = (int)p[2];
    out.pad_w = (int)p[3];
    return onnx_bind(x, 0, &out);
}
