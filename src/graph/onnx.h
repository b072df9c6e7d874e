/* ONNX import: an .onnx model (file or bytes) as a vdnn graph with its initializers as initial parameters. */
#ifndef VDNN_GRAPH_ONNX_H
#define VDNN_GRAPH_ONNX_H

#include <stddef.h>

#include "graph/graph.h"

/* Reads, checks and maps the model; the graph ends with vdnn's softmax cross-entropy on the ONNX graph's
 * output (a final Softmax node is dropped: the loss computes it). Every construct vdnn cannot run as the
 * file says is an error naming the node, its op type and what is unsupported. The graph is resolved once at
 * the model's input size (batch 1) so shape errors show at load. */
vdnn_status vdnn_onnx_load(const char *path, vdnn_graph_t **out, vdnn_error *err);
/* Same, from `len` bytes in memory; `source` names the model in messages. */
vdnn_status vdnn_onnx_parse(const void *data, size_t len, const char *source, vdnn_graph_t **out, vdnn_error *err);

/* Gets the trained values of storage `name` ("conv1.weight", "bn1.stats", in vdnn's layout) into
 * dst[0 .. count); VDNN_ERR_MISMATCH when there is no such storage of that size. */
typedef vdnn_status (*vdnn_onnx_param_fn)(void *ctx, const char *name, float *dst, size_t count, vdnn_error *err);
/* Writes the ONNX model at `model` to `out` with each tensor import made a parameter of (weights, biases, batch
 * norm's scale, shift, running mean and variance) replaced by the values `get` gives for that parameter, in the
 * tensor's own layout and element type; everything else is the file's. `out` gets the whole file or is left as
 * it was (a temporary beside it, renamed). */
vdnn_status vdnn_onnx_export(const char *model, vdnn_onnx_param_fn get, void *ctx, const char *out, vdnn_error *err);

#endif
