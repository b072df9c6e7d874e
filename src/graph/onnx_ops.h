/* The ONNX op handlers, one per supported op type; the table in onnx_ops.c names them. */
#ifndef VDNN_GRAPH_ONNX_OPS_H
#define VDNN_GRAPH_ONNX_OPS_H

#include "graph/onnx_map.h"

/* onnx_ops_window.c */
vdnn_status onnx_map_conv(onnx_map *x);
vdnn_status onnx_map_maxpool(onnx_map *x);
vdnn_status onnx_map_avgpool(onnx_map *x);
vdnn_status onnx_map_pad(onnx_map *x);
/* onnx_ops_dense.c */
vdnn_status onnx_map_batchnorm(onnx_map *x);
vdnn_status onnx_map_gemm(onnx_map *x);
vdnn_status onnx_map_matmul(onnx_map *x);
vdnn_status onnx_map_add(onnx_map *x);
/* onnx_ops_shape.c */
vdnn_status onnx_map_flatten(onnx_map *x);
vdnn_status onnx_map_reshape(onnx_map *x);
vdnn_status onnx_map_gap(onnx_map *x);
vdnn_status onnx_map_reducemean(onnx_map *x);
vdnn_status onnx_map_concat(onnx_map *x);
vdnn_status onnx_map_softmax(onnx_map *x);
vdnn_status onnx_map_identity(onnx_map *x);
vdnn_status onnx_map_constant(onnx_map *x);
/* onnx_ops_act.c */
vdnn_status onnx_map_sigmoid(onnx_map *x);
vdnn_status onnx_map_hardsigmoid(onnx_map *x);
vdnn_status onnx_map_hardswish(onnx_map *x);
vdnn_status onnx_map_clip(onnx_map *x);
vdnn_status onnx_map_mul(onnx_map *x);
/* onnx_ops.c */
vdnn_status onnx_map_relu(onnx_map *x);
vdnn_status onnx_map_dropout(onnx_map *x);
vdnn_status onnx_map_lrn(onnx_map *x);

#endif
