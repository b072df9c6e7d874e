/* Internals shared by the CUDA backend's C files: the backend and op structs, the per-kind op table, status checks. */
#ifndef VDNN_BACKEND_CUDA_INTERNAL_H
#define VDNN_BACKEND_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_conv_select.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_layout.h"

typedef struct cuda_backend {
    vdnn_backend_t base;                   /* must be first */
    vdnn_cuda_options opt;                 /* as resolved at create (environment applied) */
    int device;
    cudaStream_t stream[VDNN_QUEUE_COUNT]; /* compute, D2H, H2D; all non-blocking */
    cudnnHandle_t cudnn;                   /* bound to the compute stream */
    cublasHandle_t cublas;                 /* bound to the compute stream */
    char device_name[256];
    int cc_major, cc_minor;                /* compute capability: bf16 needs 8.0 */
    cudaEvent_t clock_ref;                 /* recorded on the compute stream by now(): ties GPU time to host time */
    double clock_ref_host;                 /* host monotonic seconds when clock_ref completed */
    char cache_scope[384];                 /* what measured conv algorithms depend on: device, cuDNN, TF32 */
    vdnn_conv_cache *conv_cache;           /* opened at the first convolution */
    bool timing;                           /* events recorded now carry times (set_timing) */
    void *stage[2];                        /* pinned staging for uploads from pageable memory (made at first use) */
    cudaEvent_t stage_done[2];             /* each staging buffer's last copy out */
    double *sum_scratch;                   /* VDNN_CUDA_SUM_SCRATCH_BYTES for per-channel partial sums */
    unsigned *finite_flag;                 /* one device word for all_finite */
} cuda_backend;

typedef struct cuda_op_impl cuda_op_impl;

struct vdnn_op {
    vdnn_op_desc d;
    vdnn_op_info info;
    const cuda_op_impl *impl;
    void *state; /* owned by impl (descriptors, chosen algorithms) */
};

/* One implementation per layer kind (or family). query does no device work and allocates no device memory. */
struct cuda_op_impl {
    vdnn_status (*query)(cuda_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
    vdnn_status (*create)(cuda_backend *be, vdnn_op *op, vdnn_error *err); /* op->d, op->info are set */
    void (*destroy)(cuda_backend *be, vdnn_op *op);
    vdnn_status (*forward)(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
    vdnn_status (*backward)(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
    /* Candidates when there are several (NULL: one, algo 0). Pure, like query. */
    vdnn_status (*algos)(cuda_backend *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err);
};

/* cuDNN ops (cuda_ops_conv.c, _pool.c, _relu.c, _lrn.c, _bn.c). */
extern const cuda_op_impl vdnn_cuda_op_conv;
extern const cuda_op_impl vdnn_cuda_op_pool; /* max and average */
extern const cuda_op_impl vdnn_cuda_op_relu;
extern const cuda_op_impl vdnn_cuda_op_lrn;
extern const cuda_op_impl vdnn_cuda_op_batchnorm;
/* cuBLAS (cuda_ops_fc.c). */
extern const cuda_op_impl vdnn_cuda_op_fc;
/* Own kernels and copies (cuda_ops_simple.c). */
extern const cuda_op_impl vdnn_cuda_op_dropout;
extern const cuda_op_impl vdnn_cuda_op_concat;
extern const cuda_op_impl vdnn_cuda_op_add;
extern const cuda_op_impl vdnn_cuda_op_gap;
extern const cuda_op_impl vdnn_cuda_op_flatten;
extern const cuda_op_impl vdnn_cuda_op_softmax_xent;
/* Own kernels: the element-wise activations (cuda_ops_act.c), channel scaling (cuda_ops_chmul.c), and pooling of any
 * window rule (cuda_ops_pool_windows.c, which hands the symmetric ones to vdnn_cuda_op_pool). */
extern const cuda_op_impl vdnn_cuda_op_act;
extern const cuda_op_impl vdnn_cuda_op_channel_mul;
extern const cuda_op_impl vdnn_cuda_op_pooling;
/* The sequence ops, any map type (cuda_ops_seq.c); GELU is one of the activations. */
extern const cuda_op_impl vdnn_cuda_op_embed;
extern const cuda_op_impl vdnn_cuda_op_pos_embed;
extern const cuda_op_impl vdnn_cuda_op_layernorm;
extern const cuda_op_impl vdnn_cuda_op_linear;
extern const cuda_op_impl vdnn_cuda_op_attn_probs;
extern const cuda_op_impl vdnn_cuda_op_attn_mix;
extern const cuda_op_impl vdnn_cuda_op_attn_fused;
/* LSTM (cuda_ops_lstm.c): a chunk of time steps, the parameters as a tensor, the gather of chunks along time. */
extern const cuda_op_impl vdnn_cuda_op_lstm;
extern const cuda_op_impl vdnn_cuda_op_seq_cat;
/* The chunk with 16-bit maps, widened into the fp32 chunk `fp32` a group of samples at a time (cuda_ops_lstm_half.c). */
vdnn_status vdnn_cuda_lstm_half_query(const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
vdnn_status vdnn_cuda_lstm_half_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, const cuda_op_impl *fp32,
                                        vdnn_error *err);
vdnn_status vdnn_cuda_lstm_half_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, const cuda_op_impl *fp32,
                                         vdnn_error *err);

/* Turn a CUDA / cuDNN / cuBLAS status into a vdnn error; the message names the call (printf-style)
 * and the library's own description. VDNN_OK on success; nothing is formatted then. */
vdnn_status vdnn_cuda_check(cudaError_t e, vdnn_error *err, const char *fmt, ...) VDNN_PRINTF(3, 4);
vdnn_status vdnn_cudnn_check(cudnnStatus_t s, vdnn_error *err, const char *fmt, ...) VDNN_PRINTF(3, 4);
/* cuDNN keeps the explanation of its last failure per thread, and a failed probe (an algorithm ruled out, say)
 * leaves one behind: reading it clears it, so every checked call starts from none and reports its own. */
void vdnn_cudnn_clear_last(void);
#define VDNN_CUDNN_CHECK(call, err, ...) (vdnn_cudnn_clear_last(), vdnn_cudnn_check((call), err, __VA_ARGS__))
vdnn_status vdnn_cublas_check(cublasStatus_t s, vdnn_error *err, const char *fmt, ...) VDNN_PRINTF(3, 4);

/* Makes the backend's device current on the calling thread (the runtime keeps it per thread). */
vdnn_status vdnn_cuda_use(cuda_backend *b, vdnn_error *err);

/* Maps of the op's dtype: bytes of a value, the kernels' type, cuDNN's type. */
static inline size_t vdnn_cuda_esize(const vdnn_op_desc *d) { return vdnn_dtype_size(d->dtype); }
static inline vdnn_cuda_type vdnn_cuda_type_of(const vdnn_op_desc *d) { return (vdnn_cuda_type)d->dtype; }
static inline bool vdnn_cuda_half(const vdnn_op_desc *d) { return d->dtype != VDNN_DTYPE_F32; }
static inline cudnnDataType_t vdnn_cudnn_type(vdnn_dtype t)
{
    return t == VDNN_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : t == VDNN_DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
/* p advanced by `values` values of the op's dtype. */
static inline void *vdnn_cuda_at(const vdnn_op_desc *d, const void *p, size_t values)
{
    return (char *)p + values * vdnn_cuda_esize(d);
}

/* An NCHW tensor descriptor of shape s with values of type t. On failure *t is NULL. */
vdnn_status vdnn_cuda_tensor(cudnnTensorDescriptor_t *t, vdnn_shape s, vdnn_dtype type, const char *what,
                             vdnn_error *err);
void vdnn_cuda_tensor_free(cudnnTensorDescriptor_t *t);

/* A batch cut into chunks whose tensors cuDNN takes (VDNN_CUDA_MAX_TENSOR_VALUES, or the backend's lower
 * tensor_values): `count` calls of `per` images, the last of `last`. */
typedef struct cuda_chunks {
    int per, count, last;
} cuda_chunks;

/* The chunks of an op over images of d's inputs and output; an error naming the op if one image is too large. */
vdnn_status vdnn_cuda_chunks(const cuda_backend *b, const vdnn_op_desc *d, const char *name, cuda_chunks *c,
                             vdnn_error *err);
static inline int vdnn_cuda_chunk_images(const cuda_chunks *c, int i) { return i == c->count - 1 ? c->last : c->per; }

/* Tensor descriptors of one shape for a full chunk and for the last one (the same descriptor when they agree). */
typedef struct cuda_chunk_tensor {
    cudnnTensorDescriptor_t full, last;
} cuda_chunk_tensor;
vdnn_status vdnn_cuda_chunk_tensor(cuda_chunk_tensor *t, vdnn_shape s, vdnn_dtype type, const cuda_chunks *c,
                                   const char *what, vdnn_error *err);
void vdnn_cuda_chunk_tensor_free(cuda_chunk_tensor *t);
static inline cudnnTensorDescriptor_t vdnn_cuda_chunk_desc(const cuda_chunk_tensor *t, const cuda_chunks *c, int i)
{
    return i == c->count - 1 ? t->last : t->full;
}
/* Values of one image of shape s (the step between chunks is per * this). */
static inline size_t vdnn_cuda_image_values(vdnn_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

/* floor((in + 2 pad - k) / stride) + 1, the output size of a window op (as PyTorch). */
static inline int vdnn_cuda_window_out(int in, int k, int stride, int pad)
{
    int span = in + 2 * pad - k;
    return span < 0 ? 0 : span / stride + 1;
}

static inline size_t vdnn_cuda_max_sz(size_t a, size_t b) { return a > b ? a : b; }

static inline bool vdnn_cuda_same_shape(vdnn_shape a, vdnn_shape b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

/* Forward of a one-input op needs its input and output. */
static inline vdnn_status vdnn_cuda_need_io(const vdnn_op_args *a, const char *name, vdnn_error *err)
{
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: NULL %s", name, a->x[0] ? "output" : "input");
    return VDNN_OK;
}

/* cuBLAS products (cuda_gemm.c), column-major as cuBLAS: A and B of type ab, C of type ct (fp32 operands: fp32, on
 * SGEMM; 16-bit ones: their own type or fp32, on cublasGemmEx with fp32 accumulation), C = alpha op(A) op(B). */
vdnn_status vdnn_cuda_gemm(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, float alpha, const void *A, int lda, const void *B, int ldb, void *C, vdnn_dtype ct,
                           int ldc, const char *what, vdnn_error *err);
/* The same for `count` products, operands sa, sb and sc values apart. */
vdnn_status vdnn_cuda_gemm_batched(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb, int m,
                                   int n, int k, float alpha, const void *A, int lda, long long sa, const void *B,
                                   int ldb, long long sb, void *C, vdnn_dtype ct, int ldc, long long sc, int count,
                                   const char *what, vdnn_error *err);
/* The same adding into C: C += alpha op(A) op(B). */
vdnn_status vdnn_cuda_gemm_batched_add(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb,
                                       int m, int n, int k, float alpha, const void *A, int lda, long long sa,
                                       const void *B, int ldb, long long sb, void *C, vdnn_dtype ct, int ldc,
                                       long long sc, int count, const char *what, vdnn_error *err);
/* Workspace bytes of an op's n fp32 weights rounded to its 16-bit type (0 for fp32 maps, which read them as they
 * are); and the weights a product reads, *w: a->w for fp32 maps, else a->ws after the rounding into it (enqueued on
 * the compute queue). */
size_t vdnn_cuda_weights_copy_bytes(const vdnn_op_desc *d, size_t n);
vdnn_status vdnn_cuda_weights_for(cuda_backend *b, const vdnn_op_desc *d, const vdnn_op_args *a, size_t n,
                                  const void **w, const char *what, vdnn_error *err);

/* The backend's convert and accumulate_typed entries (cuda_typed.c). */
vdnn_status vdnn_cuda_convert(vdnn_backend_t *be, void *dst, vdnn_dtype dst_type, const void *src, vdnn_dtype src_type,
                              size_t n, vdnn_error *err);
vdnn_status vdnn_cuda_accumulate_typed(vdnn_backend_t *be, vdnn_dtype type, void *dst, const void *src, size_t n,
                                       vdnn_error *err);

/* The backend's op entries, dispatching by layer kind (cuda_ops_table.c). */
vdnn_status vdnn_cuda_op_query(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
vdnn_status vdnn_cuda_op_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err);
vdnn_status vdnn_cuda_op_create(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op **op, vdnn_error *err);
void vdnn_cuda_op_destroy(vdnn_backend_t *be, vdnn_op *op);
vdnn_status vdnn_cuda_op_forward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
vdnn_status vdnn_cuda_op_backward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);

/* Options as a backend created with them runs: -1 switches and 0 limits from the environment, else defaults. */
vdnn_status vdnn_cuda_resolve_options(const vdnn_cuda_options *in, vdnn_cuda_options *o, vdnn_error *err);
/* A convolution's candidate described without a device (cuda_ops_conv.c; see vdnn_cuda_describe_op). */
vdnn_status vdnn_cuda_conv_describe(const cuda_backend *b, const vdnn_op_desc *d, vdnn_op_algo *out, vdnn_error *err);

/* The GPU, the CUDA and cuDNN versions, and the settings op info depends on (cuda_describe.c). */
void vdnn_cuda_describe(vdnn_backend_t *be, vdnn_device_info *out);

#endif
