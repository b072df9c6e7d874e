/* The table of ONNX op handlers (what each op maps to, the attributes it reads, the ops recognised but refused),
 * and the handlers of Relu, Dropout and LRN. */
#include "graph/onnx_ops.h"

/* Unbounded input count (Concat's inputs are checked by its handler). */
#define ANY (-1)

const onnx_op vdnn_onnx_ops[] = {
    {"Conv", onnx_map_conv, 2, 3, "auto_pad dilations group kernel_shape pads strides", NULL},
    {"BatchNormalization", onnx_map_batchnorm, 5, 5, "epsilon momentum spatial training_mode", NULL},
    {"Relu", onnx_map_relu, 1, 1, "", NULL},
    {"MaxPool", onnx_map_maxpool, 1, 1, "auto_pad ceil_mode dilations kernel_shape pads storage_order strides", NULL},
    {"AveragePool", onnx_map_avgpool, 1, 1, "auto_pad ceil_mode count_include_pad kernel_shape pads strides", NULL},
    {"Pad", onnx_map_pad, 1, 3, "mode pads value", NULL},
    {"GlobalAveragePool", onnx_map_gap, 1, 1, "", NULL},
    {"ReduceMean", onnx_map_reducemean, 1, 1, "axes keepdims", NULL},
    {"Flatten", onnx_map_flatten, 1, 1, "axis", NULL},
    {"Reshape", onnx_map_reshape, 2, 2, "allowzero", NULL},
    {"Gemm", onnx_map_gemm, 2, 3, "alpha beta transA transB", NULL},
    {"MatMul", onnx_map_matmul, 2, 2, "", NULL},
    {"Add", onnx_map_add, 2, 2, "", NULL},
    {"Concat", onnx_map_concat, 1, ANY, "axis", NULL},
    /* seed: vdnn draws its masks from the run's seed */
    {"Dropout", onnx_map_dropout, 1, 3, "ratio seed", NULL},
    {"LRN", onnx_map_lrn, 1, 1, "alpha beta bias size", NULL},
    {"Softmax", onnx_map_softmax, 1, 1, "axis", NULL},
    {"Identity", onnx_map_identity, 1, 1, "", NULL},
    {"Constant", onnx_map_constant, 0, 0, "value", NULL},
    {"Sigmoid", onnx_map_sigmoid, 1, 1, "", NULL},
    {"HardSigmoid", onnx_map_hardsigmoid, 1, 1, "alpha beta", NULL},
    {"HardSwish", onnx_map_hardswish, 1, 1, "", NULL},
    {"Clip", onnx_map_clip, 1, 3, "min max", NULL},
    {"Mul", onnx_map_mul, 2, 2, "", NULL},
    /* Shapes computed at run time: vdnn plans memory for fixed shapes. */
    {"Shape", NULL, 1, 1, "", "a shape computed at run time: export with fixed shapes, torch.flatten or constant folding"},
    {NULL, NULL, 0, 0, NULL, NULL},
};

vdnn_status onnx_map_relu(onnx_map *x)
{
    const onnx_value *in;
    int layer;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    return st ? st : onnx_add_layer(x, VDNN_LAYER_RELU, &in->layer, 1, in->rank, &layer);
}

/* The ratio is an attribute before opset 12 and an optional constant input from 12 on. vdnn drops in
 * training and passes through in evaluation whatever training_mode the file was written with. */
vdnn_status onnx_map_dropout(onnx_map *x)
{
    const onnx_value *in;
    const Onnx__TensorProto *t;
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    if (st) return st;
    float attr;
    double ratio = 0.5;
    if (x->m->opset < 12) {
        if (x->node->n_input > 1) return onnx_fail(x, VDNN_ERR_PARSE, "takes one input before opset 12");
        if ((st = onnx_attr_float(x, "ratio", 0.5f, &attr))) return st;
        ratio = attr;
    } else {
        if (onnx_has_attr(x, "ratio"))
            return onnx_fail(x, VDNN_ERR_PARSE, "the ratio is an input, not an attribute, from opset 12 on");
        if (onnx_has_input(x, 1) && ((st = onnx_input_const(x, 1, &t)) || (st = onnx_const_scalar(x, t, &ratio))))
            return st;
        if (onnx_has_input(x, 2) && (st = onnx_input_const(x, 2, &t))) return st;
    }
    if (!(ratio >= 0.0 && ratio < 1.0))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "ratio %g is not supported (vdnn takes [0, 1))", ratio);
    int layer;
    if ((st = onnx_add_layer(x, VDNN_LAYER_DROPOUT, &in->layer, 1, in->rank, &layer))) return st;
    x->g->layers[layer].p.dropout_p = (float)ratio;
    return VDNN_OK;
}

vdnn_status onnx_map_lrn(onnx_map *x)
{
    const onnx_value *in;
    int64_t size;
    float alpha, beta, bias;
    vdnn_status st = onnx_input_layer(x, 0, 4, &in);
    if (!st && !onnx_has_attr(x, "size")) st = onnx_fail(x, VDNN_ERR_PARSE, "the size attribute is missing");
    if (!st) st = onnx_attr_int(x, "size", 5, 1, VDNN_ONNX_MAX_DIM, &size);
    if (!st) st = onnx_attr_float(x, "alpha", 1e-4f, &alpha);
    if (!st) st = onnx_attr_float(x, "beta", 0.75f, &beta);
    if (!st) st = onnx_attr_float(x, "bias", 1.0f, &bias);
    if (st) return st;
    /* An even window is centred one channel apart in ONNX and in vdnn's backends (PyTorch's convention). */
    if (size % 2 == 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "an even size (%lld) is not supported (vdnn takes odd windows)",
                         (long long)size);
    if (!(alpha >= 0.0f) || !(beta >= 0.0f) || !(bias > 0.0f))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "alpha=%g beta=%g bias=%g is not supported (vdnn takes alpha >= 0, beta >= 0, bias > 0)",
                         (double)alpha, (double)beta, (double)bias);
    int layer;
    if ((st = onnx_add_layer(x, VDNN_LAYER_LRN, &in->layer, 1, 4, &layer))) return st;
    vdnn_layer_params *p = &x->g->layers[layer].p;
    p->lrn_size = (int)size;
    p->lrn_alpha = alpha;
    p->lrn_beta = beta;
    p->lrn_k = bias;
    return VDNN_OK;
}
