/* ONNX ops that move or reduce data without parameters: Flatten, Reshape, GlobalAveragePool, ReduceMean,
 * Concat, the final Softmax, Identity and Constant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx_ops.h"

/* An axis in [-rank, rank) as 0..rank-1, or -1. */
static int axis_of(int64_t a, int rank) { return a >= -rank && a < rank ? (int)(a < 0 ? a + rank : a) : -1; }

/* A rank-4 input becomes N x (C*H*W) through a flatten layer; a rank-2 one already is. */
static vdnn_status flatten_to_rows(onnx_map *x, const onnx_value *in)
{
    if (in->rank == 2) return onnx_bind(x, 0, in);
    int layer;
    return onnx_add_layer(x, VDNN_LAYER_FLATTEN, &in->layer, 1, 2, &layer);
}

vdnn_status onnx_map_flatten(onnx_map *x)
{
    const onnx_value *in;
    int64_t axis;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    if (!st) st = onnx_attr_int(x, "axis", 1, -4, 4, &axis);
    if (st) return st;
    if (axis_of(axis, in->rank) != 1)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "axis=%lld on a rank-%d tensor is not supported (only axis 1: one row per sample)",
                         (long long)axis, in->rank);
    return flatten_to_rows(x, in);
}

/* Reshape to (N, -1), (N, F), (-1, F) or (0, ...): a row per sample. N is 0 (copy) or the model's fixed batch. */
vdnn_status onnx_map_reshape(onnx_map *x)
{
    const onnx_value *in, *sv;
    int64_t allowzero, *s = NULL;
    size_t n = 0;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    if (!st) st = onnx_input(x, 1, &sv);
    if (!st && sv->layer >= 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "the target shape '%s' is computed in the graph (a dynamic shape); vdnn needs a constant "
                         "shape (export with constant folding)",
                         sv->name);
    if (!st) st = onnx_attr_int(x, "allowzero", 0, 0, 1, &allowzero);
    if (!st) st = onnx_const_ints(x, sv->konst, &s, &n);
    if (st) return st;
    int64_t batch = x->m->in_dims[0], rows = n == 2 ? s[0] : 0, cols = n == 2 ? s[1] : 0;
    bool rows_ok = (rows == 0 && !allowzero) || (rows == -1 && cols > 0) || (batch > 0 && rows == batch);
    bool cols_ok = (cols == -1 && rows != -1) || cols > 0;
    char shape[96] = "";
    for (size_t i = 0, k = 0; i < n && k < sizeof shape; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    free(s);
    if (n != 2 || !rows_ok || !cols_ok)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "reshape to [%s] is not supported (vdnn maps only a reshape to (N, -1): one row per sample)",
                         shape);
    if (cols > 0 && (st = onnx_add_feature_check(x, in->layer, cols))) return st;
    return flatten_to_rows(x, in);
}

vdnn_status onnx_map_gap(onnx_map *x)
{
    const onnx_value *in;
    int layer;
    vdnn_status st = onnx_input_layer(x, 0, 4, &in);
    return st ? st : onnx_add_layer(x, VDNN_LAYER_GAP, &in->layer, 1, 4, &layer);
}

/* The mean over H and W is global average pooling; with keepdims=0 it is N x C. */
vdnn_status onnx_map_reducemean(onnx_map *x)
{
    const onnx_value *in;
    int64_t axes[4], keep;
    int n, layer;
    vdnn_status st = onnx_input_layer(x, 0, 4, &in);
    if (!st) st = onnx_attr_ints(x, "axes", axes, 4, &n);
    if (!st) st = onnx_attr_int(x, "keepdims", 1, 0, 1, &keep);
    if (st) return st;
    unsigned seen = 0;
    for (int i = 0; i < n; i++) seen |= axis_of(axes[i], 4) >= 0 ? 1u << axis_of(axes[i], 4) : 16u;
    if (n != 2 || seen != 12u)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "a mean over axes other than H and W (2 and 3) is not supported (vdnn maps it to global "
                         "average pooling)");
    return onnx_add_layer(x, VDNN_LAYER_GAP, &in->layer, 1, keep ? 4 : 2, &layer);
}

vdnn_status onnx_map_concat(onnx_map *x)
{
    int64_t axis;
    if (!onnx_has_attr(x, "axis")) return onnx_fail(x, VDNN_ERR_PARSE, "the axis attribute is missing");
    vdnn_status st = onnx_attr_int(x, "axis", 1, -4, 4, &axis);
    if (st) return st;
    int inputs[VDNN_MAX_INPUTS], rank = 0, n = (int)x->node->n_input;
    if (n > VDNN_MAX_INPUTS)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "%d inputs (vdnn concatenates at most %d)", n, VDNN_MAX_INPUTS);
    const onnx_value *v = NULL;
    for (int k = 0; k < n; k++) {
        if ((st = onnx_input_layer(x, k, rank, &v))) return st;
        rank = v->rank;
        inputs[k] = v->layer;
        for (int j = 0; j < k; j++)
            if (inputs[j] == v->layer)
                return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "lists '%s' twice, which vdnn's concat does not support",
                                 v->name);
    }
    if (axis_of(axis, rank) != 1)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "axis=%lld is not supported (only the channel axis 1)",
                         (long long)axis);
    if (n == 1) return onnx_bind(x, 0, v);
    int layer;
    return onnx_add_layer(x, VDNN_LAYER_CONCAT, inputs, n, rank, &layer);
}

/* Only as the last node: vdnn's loss is softmax cross-entropy on the logits before it. */
vdnn_status onnx_map_softmax(onnx_map *x)
{
    const onnx_value *in;
    int64_t axis;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    if (!st) st = onnx_attr_int(x, "axis", x->m->opset < 13 ? 1 : -1, -4, 4, &axis);
    if (st) return st;
    if (strcmp(x->node->output[0], x->m->output))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "a Softmax is supported only as the graph's last node (vdnn's loss computes it)");
    if (axis_of(axis, in->rank) != 1)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "a softmax over axis %lld of a rank-%d tensor is not supported (only over the classes, "
                         "axis 1)",
                         (long long)axis, in->rank);
    x->softmax = x->node;
    return onnx_bind(x, 0, in);
}

vdnn_status onnx_map_identity(onnx_map *x)
{
    const onnx_value *in;
    vdnn_status st = onnx_input(x, 0, &in);
    return st ? st : onnx_bind(x, 0, in);
}

vdnn_status onnx_map_constant(onnx_map *x)
{
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < x->node->n_attribute; i++)
        if (!strcmp(vdnn_onnx_str(x->node->attribute[i]->name), "value")) a = x->node->attribute[i];
    if (!a || !a->t) return onnx_fail(x, VDNN_ERR_PARSE, "has no tensor 'value'");
    size_t n;
    vdnn_status st = onnx_const_count(x, a->t, &n); /* shape checks now, not at its first use */
    return st ? st : onnx_bind(x, 0, &(onnx_value){.layer = -1, .konst = a->t});
}
