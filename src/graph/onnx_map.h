/* The state shared by the ONNX-to-layer mapping and its op handlers: tensor values, the graph being built,
 * and helpers that read inputs, attributes and constants with errors naming the node. */
#ifndef VDNN_GRAPH_ONNX_MAP_H
#define VDNN_GRAPH_ONNX_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "graph/onnx_read.h"

#define VDNN_ONNX_MAX_DIM (1L << 16)   /* kernels, strides, pads (as the .cfg reader) */
#define VDNN_ONNX_MAX_COUNT (1L << 24) /* filters, groups */

/* What a tensor name stands for: a layer's output (with the rank ONNX gives it: 4 for N x C x H x W, 2 for
 * N x F, which vdnn holds as N x F x 1 x 1) or a constant (an initializer or a Constant node's value). */
typedef struct onnx_value {
    const char *name;
    int layer;                        /* -1: a constant */
    int rank;
    const Onnx__TensorProto *konst;
    int pad_h, pad_w;                 /* zero padding of a Pad node, folded into the window op that reads it */
} onnx_value;

/* A check that needs resolved shapes: a layer's output must hold `features` values per sample
 * (a Reshape to an explicit (N, F)). */
typedef struct onnx_feature_check {
    int layer, node;
    long long features;
} onnx_feature_check;

/* Initial values that came from a node's constant tensors, checked against the layer once shapes are known. */
typedef struct onnx_init_src {
    int layer, node;
    const char *tensor;               /* the initializer's name */
    char dims[64];                    /* its shape, for messages */
    /* Where export writes the trained values back: */
    const Onnx__TensorProto *from;    /* the tensor they came from */
    const Onnx__TensorProto *from_var;/* batch norm statistics: the variance's (`from`: the mean's) */
    bool transposed;                  /* `from` holds the transpose (a MatMul's inputs x outputs weight) */
} onnx_init_src;

typedef struct onnx_map {
    const vdnn_onnx_model *m;
    vdnn_error *err;
    vdnn_graph_t *g;
    int cap_layers;
    int *layer_node;                  /* per layer: the node it came from (-1: the input and the loss) */
    onnx_value *vals;
    int n_vals, cap_vals;
    onnx_feature_check *checks;
    int n_checks, cap_checks;
    onnx_init_src *init_src;          /* parallel to g->init */
    int cap_init;
    /* The node being mapped */
    const Onnx__NodeProto *node;
    int node_index;
    int bound;                        /* its outputs given a value so far (the rest must be unused) */
    const Onnx__NodeProto *softmax;   /* the final Softmax, dropped: vdnn's loss computes it */
} onnx_map;

/* Maps a decoded model (vdnn_onnx_read's) to a graph, as vdnn_onnx_parse does. With `srcs`, also hands over
 * where each initial value g->init[i] came from (malloc'd, n_init of them; the tensors are m's, so m must
 * outlive their use): export writes trained values back there. m->source becomes the graph's copy. */
vdnn_status onnx_map_model(vdnn_onnx_model *m, vdnn_graph_t **out, onnx_init_src **srcs, vdnn_error *err);

/* An op handler maps the current node: it reads x->node, adds layers or values, binds its outputs. */
typedef vdnn_status (*onnx_op_fn)(onnx_map *x);

typedef struct onnx_op {
    const char *op_type;
    onnx_op_fn map;                   /* NULL: recognised, not supported yet (`later` says what it needs) */
    int min_inputs, max_inputs;
    const char *attrs;                /* the attributes it understands, space-separated */
    const char *later;
} onnx_op;

/* The table of op handlers (onnx_ops.c), ended by a NULL op_type. */
extern const onnx_op vdnn_onnx_ops[];

/* Fails with "source: node 'name' (Op): what". */
vdnn_status onnx_fail(onnx_map *x, vdnn_status st, const char *fmt, ...) VDNN_PRINTF(3, 4);

/* Inputs: whether input k is given, the value of a given one, a layer output of rank `rank` (0: any),
 * a constant. Each fails naming the input when it is missing or of the wrong sort. */
bool onnx_has_input(const onnx_map *x, int k);
vdnn_status onnx_input(onnx_map *x, int k, const onnx_value **v);
vdnn_status onnx_input_layer(onnx_map *x, int k, int rank, const onnx_value **v);
/* The same, also taking the output of a Pad (for the window ops that fold its padding into theirs). */
vdnn_status onnx_input_padded(onnx_map *x, int k, const onnx_value **v);
vdnn_status onnx_input_const(onnx_map *x, int k, const Onnx__TensorProto **t);
/* Node-wide uses of a tensor (node inputs and the graph output). */
int onnx_uses(const onnx_map *x, const char *name);

/* Outputs: a new layer fed by `inputs` that produces output `out` of the node with this rank; or output
 * `out` bound to an existing value. */
vdnn_status onnx_add_layer(onnx_map *x, vdnn_layer_kind kind, const int *inputs, int n_inputs, int rank, int *layer);
vdnn_status onnx_bind(onnx_map *x, int out, const onnx_value *v);
vdnn_status onnx_add_feature_check(onnx_map *x, int layer, long long features);
/* The output shape of `layer` at the model's input size and batch 1, for mappings that depend on it: resolves the
 * layers mapped so far. */
vdnn_status onnx_shape(onnx_map *x, int layer, vdnn_shape *s);
/* Makes room for element n of the array *array points to (elem bytes each), doubling *cap as needed. */
vdnn_status onnx_grow(onnx_map *x, void *array, size_t elem, int n, int *cap);
/* For the driver: the graph input and the constants as values; a layer named after a node (or `want`). */
vdnn_status onnx_add_input(onnx_map *x, const char *name);
vdnn_status onnx_add_const(onnx_map *x, const char *name, const Onnx__TensorProto *t);
void onnx_layer_name(const vdnn_graph_t *g, const char *want, const char *op, int index, char out[VDNN_NAME_LEN]);
vdnn_status onnx_new_layer(onnx_map *x, const char *want, const char *op, int node, vdnn_layer **out);

/* Attributes: absent ones take the default; wrong types and out-of-range values fail naming the attribute. */
vdnn_status onnx_attr_int(onnx_map *x, const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out);
vdnn_status onnx_attr_float(onnx_map *x, const char *name, float def, float *out);
vdnn_status onnx_attr_ints(onnx_map *x, const char *name, int64_t *out, int max, int *n);
vdnn_status onnx_attr_string(onnx_map *x, const char *name, const char *def, char *out, size_t len);
bool onnx_has_attr(const onnx_map *x, const char *name);

/* Constants: element count and "AxBxC" text of a tensor; its values as floats (float or double tensors) or
 * as integers (int64 or int32 tensors), malloc'd. */
vdnn_status onnx_const_count(onnx_map *x, const Onnx__TensorProto *t, size_t *count);
void onnx_dims_str(const Onnx__TensorProto *t, char *buf, size_t len);
vdnn_status onnx_const_floats(onnx_map *x, const Onnx__TensorProto *t, float **out, size_t *count);
vdnn_status onnx_const_ints(onnx_map *x, const Onnx__TensorProto *t, int64_t **out, size_t *count);
/* A scalar (one element) float constant. */
vdnn_status onnx_const_scalar(onnx_map *x, const Onnx__TensorProto *t, double *out);

/* Gives `layer` initial values for its storage "<layer><suffix>" (".weight", ".bias", ".stats"); takes
 * ownership of `values` (freed on failure too). `from` is the tensor they came from, for messages. */
vdnn_status onnx_set_init(onnx_map *x, int layer, const char *suffix, float *values, size_t count,
                          const Onnx__TensorProto *from);
/* The same with a constant's values as they are. */
vdnn_status onnx_init_from(onnx_map *x, int layer, const char *suffix, const Onnx__TensorProto *t);

#endif
