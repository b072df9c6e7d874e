/* Reading an ONNX model (file or bytes) into protobuf-c structures with the model-level checks done:
 * opset, one image input with fixed C, H, W, one output, named initializers. */
#ifndef VDNN_GRAPH_ONNX_READ_H
#define VDNN_GRAPH_ONNX_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "onnx.pb-c.h"

/* Opsets of the default domain (ai.onnx) whose operator definitions the mapping follows: 7 is where
 * broadcasting and the current Gemm, BatchNormalization and Dropout forms start; 17 is the newest of
 * Debian's onnx 1.12 (opset 18 moves ReduceMean's axes to an input). */
#define VDNN_ONNX_OPSET_MIN 7
#define VDNN_ONNX_OPSET_MAX 17

typedef struct vdnn_onnx_model {
    Onnx__ModelProto *proto;          /* owns everything the pointers below reach */
    const char *source;               /* the name used in messages (borrowed) */
    const Onnx__GraphProto *graph;
    int64_t opset;                    /* of the default domain */
    const char *input;                /* the one graph input that is not an initializer */
    int64_t in_dims[4];               /* its N, C, H, W; N is 0 when symbolic */
    const char *output;               /* the graph's one output */
} vdnn_onnx_model;

/* Decodes and checks `len` bytes; errors start with `source`. On success m owns the decoded model. */
vdnn_status vdnn_onnx_read(const void *data, size_t len, const char *source, vdnn_onnx_model *m, vdnn_error *err);
void vdnn_onnx_model_free(vdnn_onnx_model *m);

/* The whole file in a malloc'd buffer (at most 2 GiB). */
vdnn_status vdnn_onnx_read_file(const char *path, uint8_t **data, size_t *len, vdnn_error *err);

/* "" for an absent string, so callers never test for NULL. */
static inline const char *vdnn_onnx_str(const char *s) { return s ? s : ""; }

#endif
