/* Models: a parsed model file (layers as a DAG). Immutable: nets and plans resolve their own copy to their batch
 * and input, so one model serves several of them at different sizes. */
#ifndef VDNN_MODEL_H
#define VDNN_MODEL_H

#include "vdnn/base.h"
#include "vdnn/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a model file; errors name the file and line ("models/x.cfg:12: unknown layer type 'convv'"). */
VDNN_API vdnn_status vdnn_model_load(const char *path, vdnn_model_t **out, vdnn_error *err);
/* The same from text in memory; `source` names it in messages. */
VDNN_API vdnn_status vdnn_model_parse(const char *text, const char *source, vdnn_model_t **out, vdnn_error *err);
VDNN_API void vdnn_model_free(vdnn_model_t *m);

VDNN_API const char *vdnn_model_name(const vdnn_model_t *m);
/* The file (or source) it was read from. */
VDNN_API const char *vdnn_model_source(const vdnn_model_t *m);
/* Layers, the data input (layer 0) included. */
VDNN_API int vdnn_model_layer_count(const vdnn_model_t *m);
/* The [net] section's input=CxHxW (n 0) and classes=N; zeros where the file gives none. */
VDNN_API void vdnn_model_defaults(const vdnn_model_t *m, vdnn_shape *input, int *classes);
/* A copy of a sequence model whose context is `context` tokens: every pos_embed layer's table has that many rows and
 * the default input is 1 x context x 1 (longer or shorter sequences than the file's; docs/sequence.md). The caller
 * frees it. VDNN_ERR_INVALID_ARG (naming the model) for a model without a pos_embed layer or a context out of range,
 * VDNN_ERR_UNSUPPORTED for a model carrying trained parameters (an ONNX model's initializers). */
VDNN_API vdnn_status vdnn_model_with_context(const vdnn_model_t *m, int context, vdnn_model_t **out, vdnn_error *err);
/* A copy of an LSTM model cut for sequences of `steps` steps: each lstm layer of the file in chunks of its chunk=
 * steps, the last one shorter (a chunk a node that plans keep, swap or recompute), and the default input
 * 1 x steps x 1 (docs/sequence.md, "LSTM"). The same parameter names and sizes whatever the steps (the seed's initial
 * values follow the graph's layer numbers, so they differ where the chunk count does); a checkpoint, like any, loads
 * only at the input size it was written at. The caller frees it. VDNN_ERR_INVALID_ARG
 * for a model without an lstm layer or steps out of range, VDNN_ERR_UNSUPPORTED for a model not read from a model
 * file, or whose attention is in head groups or fused (cut it for its steps first). */
VDNN_API vdnn_status vdnn_model_with_steps(const vdnn_model_t *m, int steps, vdnn_model_t **out, vdnn_error *err);
/* The lstm layers of m (as its file gives them, however many chunks each is cut into): 0 for none or a NULL model. */
VDNN_API int vdnn_model_lstm_count(const vdnn_model_t *m);
/* A copy of a transformer whose every attention computes its heads in `groups` groups: each group's probabilities
 * (B x H/groups x T x T) are a tensor of their own with their own mix of the values, joined after, so that a plan
 * keeps, swaps or recomputes one group's at a time and never needs every head's at once (long contexts;
 * docs/sequence.md). The same numbers up to the order of float sums; groups 1 gives a plain copy. The caller frees
 * it. VDNN_ERR_INVALID_ARG (naming the model and layer) for a model without attention or a count that does not
 * divide some attention's heads, VDNN_ERR_UNSUPPORTED for a model whose attention is already grouped. */
VDNN_API vdnn_status vdnn_model_with_head_groups(const vdnn_model_t *m, int groups, vdnn_model_t **out,
                                                 vdnn_error *err);
/* A copy of a transformer whose every attention is fused: one op computes softmax(Q K^T / sqrt(d)) V from qkv a block
 * of query rows at a time, and its backward recomputes the probabilities, so they are never a tensor (the B x H x T x T
 * a plan would otherwise keep, swap or recompute; docs/sequence.md, "Fused attention"). It starts from the same
 * parameters and hashes as the unfused model, so checkpoints move between the two; its numbers match the unfused
 * model's up to the order of float sums. The caller frees it. VDNN_ERR_INVALID_ARG for a model without attention,
 * VDNN_ERR_UNSUPPORTED (naming the layer) for attention in head groups or probabilities read by anything but their
 * mix. The CPU backend runs it (fp32, and bf16 widened); CUDA refuses it, naming the op. */
VDNN_API vdnn_status vdnn_model_with_fused_attention(const vdnn_model_t *m, vdnn_model_t **out, vdnn_error *err);
/* The attentions (attn_probs layers) of m not fused yet, counted in layer order: 0 for none or a NULL model. */
VDNN_API int vdnn_model_attention_count(const vdnn_model_t *m);
/* The same with some attentions fused: fuse[i] for the i-th attention in layer order, `count` of them (the model's
 * vdnn_model_attention_count: another count is VDNN_ERR_INVALID_ARG); fuse NULL fuses every one. The rest keep
 * their probabilities tensor. */
VDNN_API vdnn_status vdnn_model_with_fused_attentions(const vdnn_model_t *m, const bool *fuse, int count,
                                                      vdnn_model_t **out, vdnn_error *err);

/* Writes the ONNX model `m` was read from (the .onnx file at vdnn_model_source) to `out` with the parameters a
 * checkpoint of it holds (vdnn_net_save's file) as its initializers: weights, biases, batch-norm scales, shifts
 * and running statistics, in ONNX's layouts. The rest of the graph is the file's, unchanged. `out` is written
 * whole or not at all (a temporary file beside it, then renamed). VDNN_ERR_UNSUPPORTED when m is not an ONNX
 * model, VDNN_ERR_MISMATCH (naming the tensor) when the checkpoint lacks one of the model's parameters or holds
 * it at another size, VDNN_ERR_IO when `out` cannot be written. */
VDNN_API vdnn_status vdnn_model_export_onnx(const vdnn_model_t *m, const char *checkpoint, const char *out,
                                            vdnn_error *err);

#define VDNN_LAYER_NAME_LEN 64
#define VDNN_LAYER_MAX_INPUTS 8

/* One layer at a given batch and input. */
typedef struct vdnn_layer_info {
    char name[VDNN_LAYER_NAME_LEN];
    char type[16];                    /* "input", "conv", "maxpool", ... as in model files */
    int n_inputs;
    int inputs[VDNN_LAYER_MAX_INPUTS]; /* indices of earlier layers */
    vdnn_shape out;                   /* output shape (n = batch) */
    size_t weights, biases, stats;    /* parameter counts (floats); stats: batch norm's running mean and variance */
    double flops_fwd, flops_bwd;      /* multiply-adds count as 2 */
    size_t aux_bytes;                 /* state forward leaves for backward (from the backend; 0 without one) */
    size_t fwd_ws_bytes, bwd_ws_bytes;/* the op's scratch in its default algorithm (likewise) */
    size_t out_bytes;                 /* the output map's bytes in the precision asked for (4 or 2 a value) */
} vdnn_layer_info;

/* Fills out[0 .. vdnn_model_layer_count) for this batch (input.n), input and class count (classes 0: the
 * model's default). With a backend, each training op's state and scratch sizes too. Shape errors name the
 * file and line. */
VDNN_API vdnn_status vdnn_model_layers(const vdnn_model_t *m, vdnn_shape input, int classes, vdnn_backend_t *be,
                                       vdnn_layer_info *out, vdnn_error *err);
/* The same with maps of another precision: out_bytes, and the backend's state and scratch sizes, for a net of that
 * precision (a backend that cannot run it refuses, naming memory.precision). vdnn_model_layers is this at fp32. */
VDNN_API vdnn_status vdnn_model_layers_precision(const vdnn_model_t *m, vdnn_shape input, int classes,
                                                 vdnn_backend_t *be, vdnn_precision precision, vdnn_layer_info *out,
                                                 vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
