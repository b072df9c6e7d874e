/* Internals shared by the CPU backend's files: the backend struct, the op struct, and the per-kind op table. */
#ifndef VDNN_BACKEND_CPU_INTERNAL_H
#define VDNN_BACKEND_CPU_INTERNAL_H

/* Below this many elements a parallel region costs more than it saves. */
#define CPU_PAR_MIN 32768

#include <pthread.h>

#include <oneapi/dnnl/dnnl.h>

#include "backend/backend.h"
#include "backend/seq_shapes.h"

typedef struct cpu_copy_queue cpu_copy_queue; /* a worker thread running copies in order (cpu_backend.c) */

typedef struct cpu_backend {
    vdnn_backend_t base;           /* must be first */
    vdnn_cpu_options opt;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    cpu_copy_queue *copyq[VDNN_QUEUE_COUNT]; /* [VDNN_QUEUE_D2H], [VDNN_QUEUE_H2D]; compute runs on the caller */
    bool bf16;                     /* bf16 ops run (AVX-512 BF16, not switched off): cpu_isa.c */
    char no_bf16_why[160];         /* why not, for the refusal's message */
} cpu_backend;

typedef struct cpu_op_impl cpu_op_impl;

struct vdnn_op {
    vdnn_op_desc d;
    vdnn_op_info info;
    const cpu_op_impl *impl;
    void *state;                   /* owned by impl (oneDNN primitives, memory descriptors) */
    /* Widened (cpu_ops_widen.c): d and info are the fp32 op impl runs (one sample's where it goes a sample at a
     * time), maps the op as asked, with its bf16 maps. */
    bool widened;
    vdnn_op_desc maps;
};

/* One implementation per layer kind (or family). query must not allocate device memory. */
struct cpu_op_impl {
    vdnn_status (*query)(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
    vdnn_status (*create)(cpu_backend *be, vdnn_op *op, vdnn_error *err);  /* op->d, op->info are set */
    void (*destroy)(cpu_backend *be, vdnn_op *op);
    vdnn_status (*forward)(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
    vdnn_status (*backward)(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
    /* Candidates when there are several (NULL: one, algo 0). */
    vdnn_status (*algos)(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err);
};

/* oneDNN-backed ops (cpu_ops_dnnl_*.c). */
extern const cpu_op_impl vdnn_cpu_op_conv;
extern const cpu_op_impl vdnn_cpu_op_pool;      /* max and average */
extern const cpu_op_impl vdnn_cpu_op_relu;
extern const cpu_op_impl vdnn_cpu_op_lrn;
extern const cpu_op_impl vdnn_cpu_op_batchnorm;
extern const cpu_op_impl vdnn_cpu_op_fc;
/* Hand-written ops (cpu_ops_simple.c): nothing in oneDNN/BLAS fits them directly. */
extern const cpu_op_impl vdnn_cpu_op_dropout;
extern const cpu_op_impl vdnn_cpu_op_concat;
extern const cpu_op_impl vdnn_cpu_op_add;
extern const cpu_op_impl vdnn_cpu_op_gap;
extern const cpu_op_impl vdnn_cpu_op_flatten;
extern const cpu_op_impl vdnn_cpu_op_softmax_xent;
/* Element-wise activations (cpu_ops_act.c), channel scaling (cpu_ops_chmul.c), and pooling of any window rule
 * (cpu_ops_pool_windows.c, which hands the symmetric ones to vdnn_cpu_op_pool). */
extern const cpu_op_impl vdnn_cpu_op_act;
extern const cpu_op_impl vdnn_cpu_op_channel_mul;
extern const cpu_op_impl vdnn_cpu_op_pooling;
/* Sequence ops (cpu_ops_seq.c, cpu_ops_dnnl_layernorm.c); GELU is one of the activations. */
extern const cpu_op_impl vdnn_cpu_op_embed;
extern const cpu_op_impl vdnn_cpu_op_pos_embed;
extern const cpu_op_impl vdnn_cpu_op_layernorm;
extern const cpu_op_impl vdnn_cpu_op_linear;
extern const cpu_op_impl vdnn_cpu_op_attn_probs;
extern const cpu_op_impl vdnn_cpu_op_attn_mix;
/* linear's shape rule, for both of its implementations; and linear with bf16 maps where AVX-512 BF16 is there, as
 * oneDNN's bf16 inner product over the rows (cpu_ops_linear_bf16.c; elsewhere it is widened). */
vdnn_status vdnn_cpu_linear_shape(const vdnn_op_desc *d, vdnn_error *err);
extern const cpu_op_impl vdnn_cpu_op_linear_bf16;
/* One run of bf16 values widened to floats, or floats rounded to bf16 (nearest even): the portable loops of
 * vdnn_cpu_convert, bit for bit, on the calling thread (for short runs, such as rows of a strided map). */
void vdnn_cpu_bf16_widen_run(float *dst, const uint16_t *src, size_t n);
void vdnn_cpu_bf16_round_run(uint16_t *dst, const float *src, size_t n);
/* An attn_probs / attn_mix description checked (inputs, heads, output shape) and its dimensions, whatever its
 * map type; and the columns [first, first + count) of each of the B x T rows of a qkv gradient zeroed, or the whole
 * gradient where the op owns only some heads' columns (es: bytes a value; all-zero bits are +0 in every type). */
vdnn_status vdnn_cpu_attn_probs_dims(const vdnn_op_desc *d, vdnn_attn_dims *ad, vdnn_error *err);
vdnn_status vdnn_cpu_attn_mix_dims(const vdnn_op_desc *d, vdnn_attn_dims *ad, vdnn_error *err);
void vdnn_cpu_attn_zero_unowned(void *dqkv, const vdnn_attn_dims *ad, size_t first, size_t count, size_t es);
/* Row i of causal attention (live = i + 1 keys of t): the softmax of its scores in place, zeros past live; and its
 * gradient dS = P (dP - rowsum(P dP)), zeros past live (ds may be dp). Dots in double (cpu_ops_seq.c). */
void vdnn_cpu_causal_softmax_row(float *p, int live, int t);
void vdnn_cpu_causal_softmax_grad_row(const float *p, const float *dp, float *ds, int live, int t);
/* Fused attention, the probabilities never a tensor (cpu_ops_attn_fused.c; bf16 maps widened). */
extern const cpu_op_impl vdnn_cpu_op_attn_fused;
/* Attention with bf16 maps, a block of query rows at a time (cpu_ops_attn_bf16.c). */
extern const cpu_op_impl vdnn_cpu_op_attn_probs_bf16;
extern const cpu_op_impl vdnn_cpu_op_attn_mix_bf16;
/* LSTM (cpu_ops_lstm.c): a chunk of time steps, parameters as a tensor, the gather of chunks along time. */
extern const cpu_op_impl vdnn_cpu_op_lstm;
/* A widened LSTM chunk's candidate d->algo (false: none such): the samples it takes at a time and whether its large
 * products run in bf16. In order: the batch whole (or groups within VDNN_WIDEN_LSTM_GROUP_BYTES) with bf16 products
 * where AVX-512 BF16 is there; smaller groups (VDNN_WIDEN_GROUP_BYTES), if smaller; those with fp32 products, if
 * the bf16 ones exist. */
bool vdnn_cpu_lstm16_variant(const cpu_backend *be, const vdnn_op_desc *d, int *group, bool *bf16_products);
/* The LSTM chunk for bf16 maps where AVX-512 BF16 is there: widened, its large products bf16 (cpu_lstm_mm16.h). */
extern const cpu_op_impl vdnn_cpu_op_lstm_mm16;
extern const cpu_op_impl vdnn_cpu_op_seq_cat;

/* Sets be->bf16 from the CPU, the options and VDNN_CPU_ISA (cpu_isa.c); fails on an unknown VDNN_CPU_ISA. */
vdnn_status vdnn_cpu_isa_resolve(cpu_backend *be, vdnn_error *err);
/* VDNN_OK if ops of type t run here; VDNN_ERR_UNSUPPORTED saying why not otherwise (kind names the op). */
vdnn_status vdnn_cpu_check_dtype(const cpu_backend *be, vdnn_dtype t, const char *kind, vdnn_error *err);

/* bf16 maps for ops whose arithmetic is fp32 code, on any CPU (cpu_ops_widen.c): whether d is run so; the
 * op's info (impl's, with room for the fp32 copies in the workspaces), and where asked
 * (non-NULL) the fp32 op's description and info; forward and backward of an op created widened. */
bool vdnn_cpu_widened(const vdnn_op_desc *d);
vdnn_status vdnn_cpu_widen_query(cpu_backend *be, const cpu_op_impl *impl, const vdnn_op_desc *d, vdnn_op_info *info,
                                 vdnn_op_desc *inner, vdnn_op_info *inner_info, vdnn_error *err);
vdnn_status vdnn_cpu_widen_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
vdnn_status vdnn_cpu_widen_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);

/* Bytes of one value of the op's feature maps. */
static inline size_t vdnn_cpu_esize(const vdnn_op_desc *d) { return vdnn_dtype_size(d->dtype); }
static inline bool vdnn_cpu_is_bf16(const vdnn_op_desc *d) { return d->dtype == VDNN_DTYPE_BF16; }
/* VDNN_ERR_INVALID_ARG naming the op and the argument where a buffer the call needs is NULL. */
static inline vdnn_status vdnn_cpu_need(const void *p, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    if (p) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %s is NULL", vdnn_layer_kind_name(d->kind), what);
}

/* The backend's convert and accumulate_typed entries (cpu_typed.c). */
vdnn_status vdnn_cpu_convert(vdnn_backend_t *be, void *dst, vdnn_dtype dst_type, const void *src, vdnn_dtype src_type,
                             size_t n, vdnn_error *err);
vdnn_status vdnn_cpu_accumulate_typed(vdnn_backend_t *be, vdnn_dtype type, void *dst, const void *src, size_t n,
                                      vdnn_error *err);

/* Turns a oneDNN status into a vdnn error naming `what`. */
vdnn_status vdnn_cpu_dnnl_check(dnnl_status_t s, const char *what, vdnn_error *err);

/* The backend's op entries, dispatching by layer kind through the op table (cpu_ops_table.c). */
vdnn_status vdnn_cpu_op_query(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
vdnn_status vdnn_cpu_op_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err);
vdnn_status vdnn_cpu_op_create(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op **op, vdnn_error *err);
void vdnn_cpu_op_destroy(vdnn_backend_t *be, vdnn_op *op);
vdnn_status vdnn_cpu_op_forward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
vdnn_status vdnn_cpu_op_backward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);

/* The processor, oneDNN's version and the settings op info depends on (cpu_describe.c). */
void vdnn_cpu_describe(vdnn_backend_t *be, vdnn_device_info *out);

#endif
