/* The layer graph: layer kinds and parameters, the DAG in topological order, shape inference and cost counts. */
#ifndef VDNN_GRAPH_H
#define VDNN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"
#include "vdnn/model.h"

/* Inside the library a model is a graph: resolved copies of it carry shapes for one batch and input. */
typedef struct vdnn_graph vdnn_graph_t;

#define VDNN_MAX_INPUTS VDNN_LAYER_MAX_INPUTS
#define VDNN_MAX_ALGOS 4   /* candidate algorithms of one op (convolutions) */
#define VDNN_NAME_LEN VDNN_LAYER_NAME_LEN

typedef enum vdnn_layer_kind {
    VDNN_LAYER_INPUT = 0, /* the data; always layer 0, named "data" */
    VDNN_LAYER_CONV,
    VDNN_LAYER_MAXPOOL,
    VDNN_LAYER_AVGPOOL,
    VDNN_LAYER_RELU,
    VDNN_LAYER_LRN,
    VDNN_LAYER_BATCHNORM,
    VDNN_LAYER_DROPOUT,
    VDNN_LAYER_FC,
    VDNN_LAYER_CONCAT,
    VDNN_LAYER_ADD,
    VDNN_LAYER_GAP,       /* global average pooling -> n x c x 1 x 1 */
    VDNN_LAYER_FLATTEN,   /* n x c x h x w -> n x (c*h*w) x 1 x 1 */
    VDNN_LAYER_SOFTMAX_XENT, /* softmax + mean cross-entropy against labels; the loss */
    /* Element-wise activations (ONNX import, MobileNet, EfficientNet): */
    VDNN_LAYER_SIGMOID,      /* 1 / (1 + exp(-x)) */
    VDNN_LAYER_HARDSIGMOID,  /* clamp(alpha x + beta, 0, 1); PyTorch's Hardsigmoid is alpha 1/6, beta 1/2 */
    VDNN_LAYER_HARDSWISH,    /* x * relu6(x + 3) / 6, PyTorch's Hardswish and ONNX's HardSwish */
    VDNN_LAYER_SILU,         /* x * sigmoid(x) */
    VDNN_LAYER_CLIP,         /* clamp(x, clip_lo, clip_hi); ReLU6 is clip 0..6 */
    VDNN_LAYER_CHANNEL_MUL,  /* y[n,c,h,w] = x[n,c,h,w] * s[n,c]: inputs x, then s (N x C x 1 x 1); squeeze-and-excitation */
    /* Sequence layers (docs/sequence.md): tensors B x T x F are shapes {B, 1, T, F}, features contiguous. */
    VDNN_LAYER_EMBED,        /* token ids {B,1,T,1} (floats holding integers) -> rows of a vocab x F table */
    VDNN_LAYER_POS_EMBED,    /* x + a learned row per position: {B,1,T,F}, table context x F */
    VDNN_LAYER_LAYERNORM,    /* over the last dimension (w), with a learned scale and shift */
    VDNN_LAYER_LINEAR,       /* over the last dimension: {B,C,T,Fin} -> {B,C,T,Fout}, weight Fout x Fin */
    VDNN_LAYER_ATTN_PROBS,   /* causal softmax(Q K^T / sqrt(d)) from qkv {B,1,T,3F} -> {B,H,T,T} */
    VDNN_LAYER_ATTN_MIX,     /* inputs (probs {B,H,T,T}, qkv {B,1,T,3F}) -> P V, heads side by side {B,1,T,F} */
    VDNN_LAYER_GELU,         /* GPT-2's tanh approximation of GELU */
    /* LSTM (docs/sequence.md, "LSTM"): a file's [x] type=lstm becomes, at parse time, one lstm node per chunk of
     * time steps, sharing one parameter set by reference (tie), and a seq_cat gathering their h
     * (src/graph/lstm_expand.c). */
    VDNN_LAYER_LSTM,         /* one chunk: inputs (x, previous chunk) -> {B,1,S,P+H}, rows [h_t | c_t] */
    VDNN_LAYER_SEQ_CAT,      /* inputs {B,1,S_i,W_i} -> {B,1,sum S_i,cols}: the first cols of each row, along time */
    /* Attention in head groups (docs/sequence.md, "Attention in head groups"): a file's attn_probs groups=G and the
     * attn_mix reading it become G pairs of nodes, one per group of heads, and a feat_cat of the mixes
     * (src/graph/attn_expand.c). */
    VDNN_LAYER_FEAT_CAT,     /* inputs {B,C,T,W_i} -> {B,C,T,sum W_i}: each row's pieces side by side */
    /* Fused attention (docs/sequence.md, "Fused attention"): attn_probs and attn_mix in one op that never holds the
     * probabilities, recomputing them a block of query rows at a time in backward. */
    VDNN_LAYER_ATTN,         /* causal softmax(Q K^T / sqrt(d)) V from qkv {B,1,T,3F} -> {B,1,T,F}; aux: rows' log-sum-exp */
    VDNN_LAYER_KIND_COUNT
} vdnn_layer_kind;

/* Name used in model files ("conv", "maxpool", ...). */
const char *vdnn_layer_kind_name(vdnn_layer_kind k);

typedef struct vdnn_layer_params {
    /* conv, pools */
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int groups;        /* conv */
    int filters;       /* conv: output channels; fc: outputs (after "classes" is resolved) */
    int outputs_are_classes; /* fc: outputs=classes in the file */
    int bias;          /* conv, fc: 1 if a bias is learned */
    /* lrn (across channels, as AlexNet / PyTorch LocalResponseNorm) */
    int lrn_size;
    float lrn_alpha, lrn_beta, lrn_k;
    /* batchnorm */
    float bn_eps, bn_momentum;
    /* dropout */
    float dropout_p;
    /* pools: output sizes rounded up (PyTorch's ceil_mode: a last window that starts inside the input or its
     * left padding is kept, clipped at the border); avgpool: divide by the input values a window covers
     * instead of its size within the padded input (PyTorch's count_include_pad=False) */
    int ceil_mode;
    int exclude_pad;
    /* hardsigmoid */
    float alpha, beta;
    /* clip (clip_lo < clip_hi) */
    float clip_lo, clip_hi;
    /* sequence layers: embed's vocabulary (the class count, set when resolved) and width (in filters);
     * pos_embed's longest sequence; attention's head count. Layer norm's epsilon is bn_eps. */
    int vocab;
    int model_vocab; /* embed in a pipeline stage's graph: the whole model's vocabulary, which that graph's classes
                      * (its tail's) are not; 0: [net] classes */
    int context;
    int heads;
    /* attention in head groups: a file's attn_probs has groups (in groups above) G > 1; each node of its expansion
     * computes head_count heads from head0 on, of heads in all (head_count 0: every head, an unexpanded layer). An
     * attn_mix's heads is 0 where it takes the count from its probabilities. */
    int head0, head_count;
    /* lstm: hidden H is in filters; proj P (0: none, h is H wide); chunk K steps per node as the file gives it
     * (0: the whole sequence); chunk_index k of n_chunks; step0, the first step of x[0] it reads (k K when x[0] is
     * the whole sequence, 0 when it is the previous layer's chunk k); lstm_in, the input features In (resolved).
     * seq_cat: filters is the columns it keeps. */
    int proj, chunk, chunk_index, n_chunks, step0, lstm_in;
    /* Parameters shared by reference: tie is the index of the earlier layer (the owner) whose parameters this layer
     * reads as its own, 0 if none: a tied linear (tie=LAYER, GPT-2's output projection) reads an embed's table as its
     * weight; an lstm chunk after the first reads chunk 0's weights and biases. A reader owns none of the parameters
     * it shares (n_weight 0; n_bias 0 where it shares the biases too). On the owner, tied_by is its last reader (the
     * first whose backward runs), 0 if none. The parameters are counted, initialised, updated and saved once, under
     * the owner; their gradient is the sum of every reader's and the owner's, in a fixed order (docs/sequence.md,
     * "Weight tying"). */
    int tie;
    int tied_by;
} vdnn_layer_params;

typedef struct vdnn_layer {
    char name[VDNN_NAME_LEN];
    vdnn_layer_kind kind;
    int line;                         /* line of its section header in the model file */
    int stage;                        /* model-parallel stage: stage=K in the file, else the previous layer's (0) */
    int n_inputs;
    int inputs[VDNN_MAX_INPUTS];      /* indices of earlier layers */
    vdnn_layer_params p;
    /* In a graph whose attention was expanded into head groups (attn_expand.c): 1 + this node's index before (0:
     * none); vdnn_graph_seed_index numbers by it, so that grouping leaves parameters and dropout masks as they were. */
    int origin;
    /* A fused attention node (attn_fuse.c): the attn_probs it stands for with its mix, by name and 1 + index before,
     * so that the graph hashes as the unfused one and checkpoints move between them. */
    char fused_probs[VDNN_NAME_LEN];
    int fused_probs_origin;
    /* A pipeline stage's tied linear whose table's owner (an embed) is in an earlier stage (dist/stages.c): its
     * weight is a copy of that table, stored under the owner's name ("wte.weight"). The net computes the copy's
     * gradient, which the runtime sends to the owner's stage (dist/mpi_tie.c), and never updates, clips or reduces
     * it: the owner's updated table comes back after every step. "" for every other layer. */
    char weight_of[VDNN_NAME_LEN];

    /* Filled by vdnn_graph_resolve(): */
    vdnn_shape out;                   /* output shape for the resolved batch */
    size_t n_weight;                  /* conv/fc weights; batchnorm gamma */
    size_t n_bias;                    /* conv/fc bias; batchnorm beta */
    size_t n_stats;                   /* batchnorm running mean + running var (2*C) */
    double flops_fwd;                 /* multiply-adds count as 2 */
    double flops_bwd;                 /* data + weight gradients */
    int n_consumers;                  /* layers that read this layer's output */
} vdnn_layer;

/* Initial values of one parameter-like storage ("conv1.weight", "bn1.stats": running means then variances) in
 * vdnn's layout, supplied by a model file that carries trained parameters (ONNX initializers). */
typedef struct vdnn_param_init {
    char name[VDNN_NAME_LEN + 8];
    size_t count;
    float *values;
    char source[128];                 /* the model file's name for these values (the ONNX initializer; for batch
                                       * norm statistics, the running mean's), "" if none: what ties a trained
                                       * parameter back to the file (reference data, export) */
} vdnn_param_init;

struct vdnn_graph {
    char name[VDNN_NAME_LEN];         /* [net] name=..., else file stem */
    char source[512];                 /* file the graph was read from, for messages */
    vdnn_shape default_input;         /* [net] input=CxHxW, n unused (0 if absent) */
    int default_classes;              /* [net] classes=N (0 if absent) */
    int n_layers;
    vdnn_layer *layers;               /* topological order; layers[0] is the input */
    int n_init;
    vdnn_param_init *init;            /* owned; storages not listed are initialised from the seed */
    /* Resolved: */
    vdnn_shape input;                 /* n c h w */
    int classes;
    bool resolved;
    /* The type of every feature map and gradient map of a net made from this graph (its precision). The input
     * images arrive as fp32 and are converted into the data map; parameters stay fp32 whatever it is. Set by
     * whoever makes the net's or plan's copy; not part of the model's hash, so checkpoints of one precision load
     * into a net of another. */
    vdnn_dtype dtype;
    /* The model file's layers as parsed, before lstm and attention expansion (parser.c), so that a copy can be cut
     * for another sequence length (vdnn_graph_with_steps); NULL where the graph was built otherwise. Owned. */
    int n_file_layers;
    vdnn_layer *file_layers;
};

/* Replaces each lstm layer of a parsed file (one node per layer) by its chunk nodes (chunk 0 owning the parameters,
 * the others tied to it) and,
 * where a layer other than the next lstm reads it, the seq_cat of its h under the layer's own name (lstm_expand.c).
 * Inputs must be linked; consumer counts are left to the caller. */
vdnn_status vdnn_graph_expand_lstm(vdnn_graph_t *g, vdnn_error *err);
/* A copy of g expanded again from its file's layers for sequences of `steps` steps: every lstm layer in chunks of its
 * chunk= steps (the last one shorter), the default input 1 x steps x 1, pos_embed contexts as g has them
 * (lstm_expand.c). VDNN_ERR_INVALID_ARG without an lstm layer, VDNN_ERR_UNSUPPORTED for a graph not read from a
 * model file or whose attention is grouped or fused (cut it first). */
vdnn_status vdnn_graph_with_steps(const vdnn_graph_t *g, int steps, vdnn_graph_t **out, vdnn_error *err);
/* Sets every layer's n_consumers from the inputs. */
void vdnn_graph_count_consumers(vdnn_graph_t *g);
/* Replaces each attn_probs of groups G > 1 and the attn_mix that reads it by G pairs of nodes NAME.gK, the mixes
 * joined by a feat_cat under the attn_mix's name (attn_expand.c). VDNN_ERR_PARSE naming the layer when a grouped
 * attn_probs is read by anything but one attn_mix. Inputs must be linked; consumer counts are left to the caller. */
vdnn_status vdnn_graph_expand_attention(vdnn_graph_t *g, vdnn_error *err);
/* Each attn_probs and the attn_mix reading it as one attention node (attn_fuse.c): the attentions (attn_probs in
 * layer order) whose entry of `which` is true, every one with which NULL. VDNN_ERR_UNSUPPORTED naming the layer
 * where probabilities to fuse are grouped or read otherwise. */
vdnn_status vdnn_graph_fuse_attention(vdnn_graph_t *g, const bool *which, vdnn_error *err);

/* An lstm's h width: its projection P, else its hidden H. */
static inline int vdnn_lstm_h_width(const vdnn_layer_params *p) { return p->proj ? p->proj : p->filters; }

/* An lstm's parameter counts in PyTorch's layout: weight_ih 4H x In, weight_hh 4H x P, weight_hr P x H (with a
 * projection), then bias_ih and bias_hh, 4H each. */
static inline void vdnn_lstm_param_counts(const vdnn_layer_params *p, size_t *weights, size_t *biases)
{
    const size_t h = (size_t)p->filters, pw = (size_t)vdnn_lstm_h_width(p);
    *weights = 4 * h * ((size_t)p->lstm_in + pw) + (p->proj ? pw * h : 0);
    *biases = 8 * h;
}

/* Whether layer kind k is written by the parser itself (never in a model file under its name). */
static inline bool vdnn_layer_kind_internal(vdnn_layer_kind k)
{
    return k == VDNN_LAYER_SEQ_CAT || k == VDNN_LAYER_FEAT_CAT;
}

/* Whether layer L is an lstm layer's first chunk: the node that owns the layer's parameters. */
static inline bool vdnn_lstm_owner(const vdnn_layer *L) { return L->kind == VDNN_LAYER_LSTM && L->p.chunk_index == 0; }

/* Layer l's index as the graph was numbered when each lstm layer had a parameter node before its first chunk (the
 * chunks read its output): what seeds initial parameters and dropout masks, so that a model trains to the same bits
 * as it did then. With params, the index of the node that held l's parameters (an lstm owner's old parameter node). */
int vdnn_graph_seed_index(const vdnn_graph_t *g, int l, bool params);

/* The prefix of layer l's parameter storages ("conv1" for conv1.weight): its name, except for an lstm layer's
 * parameters, which keep the name of the file's layer, "<layer>.params" (nn.LSTM's, as checkpoints and reference
 * files name them). */
void vdnn_layer_param_prefix(const vdnn_graph_t *g, int l, char *buf, size_t n);

/* Reads a model file: a .cfg model, or an ONNX model when the path ends in .onnx (graph/onnx.h). Errors name
 * the file and line ("models/x.cfg:12: unknown layer type 'foo'") or the ONNX node. */
vdnn_status vdnn_graph_load(const char *path, vdnn_graph_t **out, vdnn_error *err);
/* Same, from text in memory; `source` is the name used in messages. */
vdnn_status vdnn_graph_parse(const char *text, const char *source, vdnn_graph_t **out, vdnn_error *err);
void vdnn_graph_free(vdnn_graph_t *g);
/* Sets g->name to the file name without directory and extensions. */
void vdnn_graph_name_from_source(vdnn_graph_t *g, const char *src);
/* A copy with its own layers, to resolve without touching g (models are immutable to their users). */
vdnn_status vdnn_graph_clone(const vdnn_graph_t *g, vdnn_graph_t **out, vdnn_error *err);
/* A resolved copy: input.n is the batch; classes 0 takes the model's default. Errors name the file. */
vdnn_status vdnn_graph_resolved_copy(const vdnn_graph_t *g, vdnn_shape input, int classes, vdnn_graph_t **out,
                                     vdnn_error *err);

/* Sets batch, input CxHxW (input.n = batch) and class count, infers every output shape,
 * parameter counts, consumer counts and FLOPs. Errors (shape mismatch, a dimension that
 * shrinks to zero) name the file and the layer's line. Can be called again with new sizes. */
vdnn_status vdnn_graph_resolve(vdnn_graph_t *g, vdnn_shape input, int classes, vdnn_error *err);

/* Hash of the model's structure at its resolved input (layer names, kinds, parameter counts, shapes without the
 * batch): a checkpoint names the model it belongs to by it. */
uint64_t vdnn_graph_hash(const vdnn_graph_t *g);

/* Index of the layer with this name, or -1. */
int vdnn_graph_find(const vdnn_graph_t *g, const char *name);
/* The model file's initial values of a storage by name, or NULL. */
const vdnn_param_init *vdnn_graph_param_init(const vdnn_graph_t *g, const char *name);

/* Output size of a window op along one axis, as PyTorch computes it: floor((in + 2 pad - k) / stride) + 1, or with
 * ceil_mode rounded up, less one if the last window would start beyond the input and its left padding. 0 when
 * the padded input is smaller than the window. */
int vdnn_window_out(int in, int k, int stride, int pad, bool ceil_mode);

/* The span of window `o` along one axis: [*lo, *hi) of the input it covers (clipped at the border), and *size, its
 * extent within the padded input (ending at in + pad), the divisor of average pooling with padding counted. */
void vdnn_window_span(int o, int in, int k, int stride, int pad, int *lo, int *hi, int *size);

static inline size_t vdnn_shape_count(vdnn_shape s)
{
    return (size_t)s.n * (size_t)s.c * (size_t)s.h * (size_t)s.w;
}
/* Bytes of s in fp32: images as callers hand them in, host buffers of fp32 values. */
static inline size_t vdnn_shape_bytes(vdnn_shape s) { return vdnn_shape_count(s) * sizeof(float); }
/* Bytes of a feature or gradient map of shape s in g's precision. */
static inline size_t vdnn_map_bytes(const vdnn_graph_t *g, vdnn_shape s)
{
    return vdnn_shape_count(s) * vdnn_dtype_size(g->dtype);
}

/* Rows softmax_xent normalizes, each of count/rows classes laid out contiguously: an image net's logits
 * {N, K, 1, 1} are N rows, a sequence's {B, 1, T, V} are B*T rows (one per token). One label per row. */
static inline size_t vdnn_xent_rows(vdnn_shape s)
{
    return s.h == 1 && s.w == 1 ? (size_t)s.n : (size_t)s.n * (size_t)s.c * (size_t)s.h;
}

/* Labels one batch of a resolved graph takes: the rows of its loss (its last layer). */
static inline size_t vdnn_graph_label_count(const vdnn_graph_t *g)
{
    return vdnn_xent_rows(g->layers[g->n_layers - 1].out);
}
/* Labels per sample: 1 for an image net, the tokens of a sequence for a sequence model. */
static inline size_t vdnn_graph_labels_per_sample(const vdnn_graph_t *g)
{
    return vdnn_graph_label_count(g) / (size_t)g->input.n;
}

/* Whether a resolved graph reads token sequences (its first layer after the data is an embedding). */
static inline bool vdnn_graph_is_sequence(const vdnn_graph_t *g)
{
    for (int i = 1; i < g->n_layers; i++)
        if (g->layers[i].kind == VDNN_LAYER_EMBED) return true;
    return false;
}

#endif
