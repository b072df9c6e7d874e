/* ONNX's element-wise activations and products: Sigmoid, HardSigmoid, HardSwish, Clip, and Mul as x * sigmoid(x)
 * (SiLU), x * HardSigmoid(x) (hard-swish, as PyTorch exports it before opset 14) or a per-channel scale
 * (squeeze-and-excitation). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "graph/onnx_ops.h"

static vdnn_status unary(onnx_map *x, vdnn_layer_kind kind, int *layer)
{
    const onnx_value *in;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    return st ? st : onnx_add_layer(x, kind, &in->layer, 1, in->rank, layer);
}

vdnn_status onnx_map_sigmoid(onnx_map *x)
{
    int layer;
    return unary(x, VDNN_LAYER_SIGMOID, &layer);
}

vdnn_status onnx_map_hardswish(onnx_map *x)
{
    int layer;
    return unary(x, VDNN_LAYER_HARDSWISH, &layer);
}

vdnn_status onnx_map_hardsigmoid(onnx_map *x)
{
    float alpha, beta;
    vdnn_status st = onnx_attr_float(x, "alpha", 0.2f, &alpha);
    if (!st) st = onnx_attr_float(x, "beta", 0.5f, &beta);
    if (st) return st;
    if (!isfinite(alpha) || !isfinite(beta))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "alpha=%g beta=%g is not supported (only finite values)",
                         (double)alpha, (double)beta);
    int layer;
    if ((st = unary(x, VDNN_LAYER_HARDSIGMOID, &layer))) return st;
    x->g->layers[layer].p.alpha = alpha;
    x->g->layers[layer].p.beta = beta;
    return VDNN_OK;
}

/* A bound of Clip: an attribute before opset 11, an optional constant input from 11 on. */
static vdnn_status clip_bound(onnx_map *x, const char *name, int input, bool *given, double *v)
{
    *given = false;
    if (x->m->opset < 11) {
        float f;
        *given = onnx_has_attr(x, name);
        vdnn_status st = onnx_attr_float(x, name, 0.0f, &f);
        *v = f;
        return st;
    }
    if (onnx_has_attr(x, name))
        return onnx_fail(x, VDNN_ERR_PARSE, "%s is an input, not an attribute, from opset 11 on", name);
    if (!onnx_has_input(x, input)) return VDNN_OK;
    const Onnx__TensorProto *t;
    vdnn_status st = onnx_input_const(x, input, &t);
    if (!st) st = onnx_const_scalar(x, t, v);
    *given = !st;
    return st;
}

/* Clip(0, 6) is ReLU6, any other finite bounds a clip layer; Clip(0) alone is a ReLU. */
vdnn_status onnx_map_clip(onnx_map *x)
{
    bool has_lo, has_hi;
    double lo, hi;
    int layer;
    if (x->m->opset < 11 && x->node->n_input > 1)
        return onnx_fail(x, VDNN_ERR_PARSE, "takes one input before opset 11 (the bounds are attributes)");
    vdnn_status st = clip_bound(x, "min", 1, &has_lo, &lo);
    if (!st) st = clip_bound(x, "max", 2, &has_hi, &hi);
    if (st) return st;
    if (has_lo && !has_hi && lo == 0.0) return unary(x, VDNN_LAYER_RELU, &layer);
    if (!has_lo || !has_hi)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "a Clip without a %s bound is not supported (vdnn's clip has both, as ReLU6's 0 and 6)",
                         has_lo ? "max" : "min");
    if (!(fabs(lo) <= FLT_MAX && fabs(hi) <= FLT_MAX && lo < hi))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "bounds %g and %g are not supported (finite, min below max)", lo, hi);
    if ((st = unary(x, VDNN_LAYER_CLIP, &layer))) return st;
    x->g->layers[layer].p.clip_lo = (float)lo;
    x->g->layers[layer].p.clip_hi = (float)hi;
    return VDNN_OK;
}

/* Whether gate is f(v) for the sigmoid or hard-sigmoid layer f, read by this Mul alone (so that the pair can be
 * one layer): gate is that layer's own node's output, used once. */
static bool gate_of(const onnx_map *x, const onnx_value *gate, const onnx_value *v)
{
    const vdnn_layer *L = &x->g->layers[gate->layer];
    const int node = x->layer_node[gate->layer];
    return (L->kind == VDNN_LAYER_SIGMOID || L->kind == VDNN_LAYER_HARDSIGMOID) && L->inputs[0] == v->layer &&
           node >= 0 && !strcmp(x->m->graph->node[node]->output[0], gate->name) && onnx_uses(x, gate->name) == 1;
}

/* x * sigmoid(x) becomes a SiLU layer, x * HardSigmoid(x) with HardSwish's constants a hard-swish layer: the gate's
 * layer changes kind (keeping its node's name) and the Mul's output is bound to it. */
static vdnn_status fold_gate(onnx_map *x, const onnx_value *gate)
{
    vdnn_layer *L = &x->g->layers[gate->layer];
    if (L->kind == VDNN_LAYER_SIGMOID) {
        L->kind = VDNN_LAYER_SILU;
        return onnx_bind(x, 0, gate);
    }
    if (fabsf(L->p.alpha - 1.0f / 6.0f) > 1e-6f || L->p.beta != 0.5f)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "x * HardSigmoid(x) with alpha=%g, beta=%g is not supported (vdnn's hard-swish is "
                         "HardSwish's: alpha 1/6, beta 1/2)",
                         (double)L->p.alpha, (double)L->p.beta);
    L->kind = VDNN_LAYER_HARDSWISH;
    return onnx_bind(x, 0, gate);
}

static bool per_channel(vdnn_shape maps, vdnn_shape s) { return s.c == maps.c && s.h == 1 && s.w == 1; }

vdnn_status onnx_map_mul(onnx_map *x)
{
    const onnx_value *a, *b;
    vdnn_status st = onnx_input(x, 0, &a);
    if (!st) st = onnx_input(x, 1, &b);
    if (st) return st;
    if (a->layer < 0 || b->layer < 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "multiplying by the constant '%s' is not supported (vdnn maps Mul as x * sigmoid(x), "
                         "x * HardSigmoid(x) or a per-channel scale)",
                         (a->layer < 0 ? a : b)->name);
    if ((st = onnx_input_layer(x, 0, 0, &a)) || (st = onnx_input_layer(x, 1, 0, &b))) return st;
    if (gate_of(x, b, a)) return fold_gate(x, b);
    if (gate_of(x, a, b)) return fold_gate(x, a);
    if (a->layer == b->layer)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "multiplies '%s' by itself, which vdnn does not support", a->name);
    vdnn_shape sa, sb;
    if ((st = onnx_shape(x, a->layer, &sa)) || (st = onnx_shape(x, b->layer, &sb))) return st;
    if (a->rank != b->rank || sa.n != sb.n || (!per_channel(sa, sb) && !per_channel(sb, sa)))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "multiplies '%s' (%dx%dx%d) by '%s' (%dx%dx%d): vdnn maps Mul only as x * sigmoid(x) (SiLU), "
                         "x * HardSigmoid(x) (hard-swish) or N x C x H x W maps times N x C x 1 x 1 scales",
                         a->name, sa.c, sa.h, sa.w, b->name, sb.c, sb.h, sb.w);
    /* The scales come second. */
    const int inputs[2] = {per_channel(sa, sb) ? a->layer : b->layer, per_channel(sa, sb) ? b->layer : a->layer};
    int layer;
    return onnx_add_layer(x, VDNN_LAYER_CHANNEL_MUL, inputs, 2, a->rank, &layer);
}
