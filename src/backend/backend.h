/* The backend interface: a table of function pointers (memory, copy queues, events, ops) that every device implements. */
#ifndef VDNN_BACKEND_H
#define VDNN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"
#include "graph/graph.h"
#include "vdnn/backend.h"

/* Queues. Ops run on the compute queue; each copy direction has its own queue
 * (its own engine on a GPU, a worker thread on the CPU). */
typedef enum vdnn_queue_id {
    VDNN_QUEUE_COMPUTE = 0,
    VDNN_QUEUE_D2H = 1,
    VDNN_QUEUE_H2D = 2,
    VDNN_QUEUE_COUNT
} vdnn_queue_id;

typedef struct vdnn_event vdnn_event;   /* opaque, backend-owned */
typedef struct vdnn_op vdnn_op;         /* a prepared kernel for one layer */

/* Everything an op needs to know about one layer, independent of memory. */
typedef struct vdnn_op_desc {
    vdnn_layer_kind kind;
    int n_inputs;
    vdnn_shape in[VDNN_MAX_INPUTS];
    vdnn_shape out;
    vdnn_layer_params p;
    bool training;       /* batchnorm: batch statistics (true) or running statistics */
    int algo;            /* which of op_algos' candidates to use; 0: the backend's default */
    vdnn_dtype dtype;    /* of the feature maps and gradient maps (see "Precision" below); 0: fp32 */
} vdnn_op_desc;

/* Precision. d->dtype is the type of every feature map and gradient map the op reads or writes: x[i], y, dy,
 * dx[i] hold vdnn_dtype_size(dtype) bytes per value (the vdnn_op_args pointers stay typed float * and are read as
 * that type: the executor hands them on without looking). Everything else stays fp32 whatever the dtype:
 *   - parameters: w and b are the net's fp32 master weights, dw and db fp32 gradients. An op of a 16-bit type
 *     rounds the weights to its type itself, each call, in its workspace (weights change every step, so a copy
 *     kept across calls would be stale);
 *   - batch norm's gamma, beta, running statistics (stats) and batch statistics (aux): fp32;
 *   - softmax_xent's loss: fp32, summed in double from logits read in the op's type; its backward recomputes the
 *     softmax in fp32 from the logits x (op_info says bwd_needs_x, not bwd_needs_y, for 16-bit types), so the
 *     gradient of a confident prediction is not lost to y's rounding;
 *   - labels: int32.
 * Arithmetic is fp32 (sums in fp32 or double); a 16-bit result is rounded once, to nearest even. op_info's sizes
 * are bytes of what the op really keeps (aux, workspaces), so they follow the dtype where it matters. A backend
 * refuses a dtype it cannot run fast with VDNN_ERR_UNSUPPORTED and a message that says why (the CPU: bf16 on
 * oneDNN's primitives needs AVX-512 BF16, fp16 is not offered), rather than emulating it slowly; ops that widen a
 * type to fp32 code at the cost of a conversion (the CPU's transformer ops) may run it anywhere. */

/* What an op needs beyond its inputs and outputs, as numbers the planner uses.
 * Filled by ops.query without touching a device. */
typedef struct vdnn_op_info {
    size_t aux_bytes;    /* written by forward, read by backward (pool indices, BN batch mean/var) */
    size_t fwd_ws_bytes; /* scratch during forward only */
    size_t bwd_ws_bytes; /* scratch during backward only */
    bool bwd_needs_x;    /* backward reads the inputs' values */
    bool bwd_needs_y;    /* backward reads the output's values */
    bool inplace_ok;     /* forward may write y over x[0] (x[0] == y) */
    bool bwd_inplace_ok; /* backward may write dx[0] over dy (dx[0] == dy) */
    /* The op may stream its input (vdnn_stream): forward writes y over x[0] a batch chunk at a time, once that
     * chunk has been read and saved, and backward reads x[0] a chunk at a time from buffers it is given. */
    bool stream_ok;
    int chunk_images;    /* images per chunk of a streamed input (the last chunk may hold fewer) */
} vdnn_op_info;

/* One way a backend can run an op. Convolutions may offer several, trading speed for workspace (as
 * cuDNN's algorithms do); every other op offers one. */
typedef struct vdnn_op_algo {
    char name[24];
    vdnn_op_info info;   /* what op_query reports with d->algo set to this candidate */
    int numerics;        /* candidates with equal numbers give bitwise equal results; negative: not reproducible
                          * (a non-deterministic or timed choice), equal to no other candidate */
    /* Some pass computes through a transform (FFT, Winograd): its rounding differs from direct summation by more
     * than fp32 rounding does, so results are compared with direct ones at a looser tolerance. */
    bool transform;
    char detail[96];     /* what the candidate runs, pass by pass (for messages); may be empty */
} vdnn_op_algo;

/* Sums across the ranks that share a batch, for batch norm's statistics (synchronized batch norm): on
 * return buf[0..n) holds the element-wise sum over every rank, the same on each. Every rank must make the
 * same calls in the same order; key (the same on every rank for one call) lets the callee check that. Host
 * memory, in double so the sums of large channels lose nothing before the division. */
typedef struct vdnn_reduce {
    vdnn_status (*sum)(void *ctx, int key, double *buf, size_t n, vdnn_error *err);
    void *ctx;
} vdnn_reduce;

/* A streamed input (op_info.stream_ok): x[0] never lies whole on the device through backward. The op calls
 * these in chunk order, chunks of op_info.chunk_images images. */
typedef struct vdnn_stream {
    /* forward, x[0] == y: chunk c of x has been read; returns once it is saved, so y's chunk may overwrite it */
    vdnn_status (*x_read)(void *ctx, int chunk, vdnn_error *err);
    /* backward, x[0] NULL: where chunk c of x is on the device, once it is there (valid until the next call) */
    vdnn_status (*x_chunk)(void *ctx, int chunk, const float **x, vdnn_error *err);
    void *ctx;
} vdnn_stream;

/* Pointers for one forward or backward call. All float pointers are device pointers; those of feature and gradient
 * maps (x, y, dy, dx, and a streamed x) point at values of the op's dtype (see "Precision" above).
 * Unused fields are NULL. */
typedef struct vdnn_op_args {
    const float *x[VDNN_MAX_INPUTS];
    float *y;
    const float *w;          /* conv/fc weights; batchnorm gamma */
    const float *b;          /* conv/fc bias; batchnorm beta */
    float *stats;            /* batchnorm running mean then running var (2*C) */
    bool update_stats;       /* batchnorm forward: update running statistics */
    float *aux;              /* op_info.aux_bytes */
    float *ws;               /* op_info.fwd_ws_bytes / bwd_ws_bytes */
    const float *dy;
    float *dx[VDNN_MAX_INPUTS]; /* overwritten, not accumulated; NULL: not wanted */
    float *dw, *db;          /* overwritten, not accumulated */
    const int32_t *labels;   /* softmax_xent: device pointer, n labels */
    float *loss;             /* softmax_xent forward: device pointer to one float (mean loss) */
    float grad_scale;        /* softmax_xent backward: dx is the gradient of grad_scale times the loss (0: 1); a
                                power of two keeps it exact (fp16 loss scaling, exec/loss_scale.h) */
    uint64_t seed;           /* dropout: mask = f(seed, index), so recompute reproduces it */
    const vdnn_reduce *reduce; /* batchnorm training: batch statistics over every rank's share (NULL: this
                                  call's batch alone); backends without it fail with VDNN_ERR_UNSUPPORTED */
    int reduce_key;          /* passed on to reduce->sum with the op's own phase: the layer's index */
    const vdnn_stream *stream; /* x[0] streamed (only for ops whose info says stream_ok); NULL: x[0] whole */
} vdnn_op_args;

typedef enum vdnn_copy_kind { VDNN_COPY_D2H, VDNN_COPY_H2D, VDNN_COPY_D2D } vdnn_copy_kind;

typedef struct vdnn_backend_ops {
    const char *name;                         /* "cpu", "cuda" */
    void (*destroy)(vdnn_backend_t *be);

    /* Device memory: the memory manager asks for one block per arena and carves it. */
    vdnn_status (*dev_alloc)(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err);
    void (*dev_free)(vdnn_backend_t *be, void *ptr);
    /* Host memory that copy queues can read and write asynchronously (pinned on CUDA). */
    vdnn_status (*host_alloc)(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err);
    void (*host_free)(vdnn_backend_t *be, void *ptr);
    /* Free device bytes (SIZE_MAX when unlimited, as on the CPU). */
    size_t (*dev_free_bytes)(vdnn_backend_t *be);
    /* Optional: the device's name, versions and the settings op info depends on (backend, total_bytes and
     * free_bytes are filled before it is called, from name, total_bytes and dev_free_bytes). */
    void (*describe)(vdnn_backend_t *be, vdnn_device_info *out);

    /* Enqueue a copy on a queue; returns at once. D2H/H2D go on their copy queues. */
    vdnn_status (*copy_async)(vdnn_backend_t *be, vdnn_queue_id q, void *dst, const void *src,
                              size_t bytes, vdnn_copy_kind kind, vdnn_error *err);
    /* Blocking copies for set-up, checkpoints and tests (not used inside an iteration). */
    vdnn_status (*upload)(vdnn_backend_t *be, void *dev_dst, const void *host_src, size_t bytes, vdnn_error *err);
    vdnn_status (*download)(vdnn_backend_t *be, void *host_dst, const void *dev_src, size_t bytes, vdnn_error *err);

    /* Events order queues: record marks a point in q; wait makes q wait for it;
     * sync blocks the caller until it has happened. */
    vdnn_status (*event_create)(vdnn_backend_t *be, vdnn_event **ev, vdnn_error *err);
    void (*event_destroy)(vdnn_backend_t *be, vdnn_event *ev);
    vdnn_status (*event_record)(vdnn_backend_t *be, vdnn_event *ev, vdnn_queue_id q, vdnn_error *err);
    vdnn_status (*event_wait)(vdnn_backend_t *be, vdnn_queue_id q, vdnn_event *ev, vdnn_error *err);
    vdnn_status (*event_sync)(vdnn_backend_t *be, vdnn_event *ev, vdnn_error *err);
    /* Blocks until ev has happened and gives the time it happened, in seconds on the backend's clock
     * (the host's monotonic clock, comparable with now). */
    vdnn_status (*event_time)(vdnn_backend_t *be, vdnn_event *ev, double *seconds, vdnn_error *err);
    /* Optional (NULL: events always carry times). While on, recorded events carry the times event_time reads;
     * timing costs a little on every record, so callers turn it on only around what they time. */
    void (*set_timing)(vdnn_backend_t *be, bool on);
    /* The backend's clock now, once all compute queued so far has finished. */
    double (*now)(vdnn_backend_t *be);
    /* Blocks until every queue is idle. */
    vdnn_status (*sync_all)(vdnn_backend_t *be, vdnn_error *err);

    /* Ops. query is pure (no device work); create prepares kernels for one layer. */
    vdnn_status (*op_query)(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err);
    /* The candidates for d (d->algo ignored), *n >= 1 of them, the default first. Pure, like query. */
    vdnn_status (*op_algos)(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err);
    vdnn_status (*op_create)(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op **op, vdnn_error *err);
    void (*op_destroy)(vdnn_backend_t *be, vdnn_op *op);
    vdnn_status (*op_forward)(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);
    vdnn_status (*op_backward)(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err);

    /* Element-wise helpers on device memory (compute queue). */
    vdnn_status (*fill)(vdnn_backend_t *be, float *dst, float value, size_t n, vdnn_error *err);
    vdnn_status (*accumulate)(vdnn_backend_t *be, float *dst, const float *src, size_t n, vdnn_error *err); /* dst += src */
    vdnn_status (*scale)(vdnn_backend_t *be, float *dst, float alpha, size_t n, vdnn_error *err); /* dst *= alpha */
    /* SGD with momentum and weight decay, PyTorch's rule:
     * g = dw + wd*w; v = momentum*v + g; w -= lr*v. */
    vdnn_status (*sgd_update)(vdnn_backend_t *be, float *w, const float *dw, float *v, size_t n,
                              float lr, float momentum, float weight_decay, vdnn_error *err);
    /* AdamW, PyTorch's rule and order (torch.optim.AdamW): w *= 1 - lr*wd; m = b1 m + (1-b1) g;
     * v = b2 v + (1-b2) g*g; w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps), t the step from 1.
     * NULL on backends without it: the executor then refuses AdamW. */
    vdnn_status (*adamw_update)(vdnn_backend_t *be, float *w, const float *dw, float *m, float *v, size_t n, float lr,
                                float beta1, float beta2, float eps, float weight_decay, long step, vdnn_error *err);
    /* *finite = no value of the count tensors x[i] (n[i] floats each) is infinite or NaN. Waits for the compute
     * queue. fp16 loss scaling checks the parameter gradients with it (exec/loss_scale.h); NULL: no loss scaling. */
    vdnn_status (*all_finite)(vdnn_backend_t *be, const float *const *x, const size_t *n, int count, bool *finite,
                              vdnn_error *err);
    /* *sum = the sum of x[i]^2 over n floats, accumulated in double, the same for the same x (gradient clipping by
     * global norm). NULL on a backend without it: the net then refuses clip_grad_norm. */
    vdnn_status (*sum_squares)(vdnn_backend_t *be, const float *x, size_t n, double *sum, vdnn_error *err);
    /* Fills `poison` pattern (NaN) over device memory, for the --poison debug mode. The pattern is NaN read as
     * fp32, bf16 or fp16 at any even offset. */
    vdnn_status (*poison)(vdnn_backend_t *be, void *dst, size_t bytes, vdnn_error *err);
    /* Maps of 16-bit types (NULL on backends without them). convert: n values from src_type to dst_type, rounded to
     * nearest even (the input images of a bf16 net, say). accumulate_typed: dst += src over n values of `type`,
     * added in fp32 and rounded once (gradient maps of a tensor read by several layers). */
    vdnn_status (*convert)(vdnn_backend_t *be, void *dst, vdnn_dtype dst_type, const void *src, vdnn_dtype src_type,
                           size_t n, vdnn_error *err);
    vdnn_status (*accumulate_typed)(vdnn_backend_t *be, vdnn_dtype type, void *dst, const void *src, size_t n,
                                    vdnn_error *err);

    /* Unified (managed) memory, for policy um; NULL on backends without it (the CPU). managed_alloc returns
     * memory that device and host both address, migrated between them by the driver; mem_prefetch makes
     * `to_device` (or the host) the preferred location of a range and migrates it there, in order on queue q. */
    vdnn_status (*managed_alloc)(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err);
    void (*managed_free)(vdnn_backend_t *be, void *ptr);
    vdnn_status (*mem_prefetch)(vdnn_backend_t *be, void *ptr, size_t bytes, bool to_device, vdnn_queue_id q,
                                vdnn_error *err);
} vdnn_backend_ops;

/* Every backend struct starts with this. */
struct vdnn_backend {
    const vdnn_backend_ops *ops;
    int threads;
    size_t total_bytes;      /* device memory in all (0: not known; the CPU's is unlimited) */
    char fallback[256];      /* opened as "auto" but not on CUDA: why ("" otherwise) */
    int nets;                /* nets using it: freed while some are, it closes when the last is freed */
    bool freed;              /* vdnn_backend_free was called while nets used it */
};

/* Backends compiled into this build. */
typedef struct vdnn_cpu_options {
    int threads;                 /* 0: all cores */
    double link_bandwidth_d2h;   /* bytes/s the copy queues are throttled to; 0: unthrottled */
    double link_bandwidth_h2d;
    size_t conv_chunk_bytes;     /* cap on one convolution layout copy (the batch is cut into chunks under
                                    it; the lean algorithm uses a sixteenth); 0: 256 MiB */
    bool no_bf16;                /* act as if the CPU lacked AVX-512 BF16, so bf16 ops are refused (tests of the
                                    refusal); env VDNN_CPU_ISA=no-bf16 does the same (cpu/cpu_isa.c) */
    size_t widen_group_bytes;    /* cap on the fp32 copies of the samples a widened bf16 op (a sequence model's)
                                    takes at a time (cpu/cpu_ops_widen.c; one sample at least), obeyed even where
                                    that makes parameter gradients cost room; 0: 4 MiB, groups only where cheaper */
} vdnn_cpu_options;

vdnn_status vdnn_backend_cpu_create(const vdnn_cpu_options *opt, vdnn_backend_t **out, vdnn_error *err);

/* Creates the CUDA backend if this build has one and a GPU is usable;
 * VDNN_ERR_NO_DEVICE with a one-line reason otherwise. */
vdnn_status vdnn_backend_cuda_create(int device, int threads, vdnn_backend_t **out, vdnn_error *err);

/* CUDA backend options. Tri-state switches: -1 takes the environment's value (below), 0 off, 1 on. Declared
 * here, not in cuda/cuda_backend.h, so that callers need no #ifdef: builds without the CUDA backend accept
 * them and report VDNN_ERR_NO_DEVICE. */
typedef struct vdnn_cuda_options {
    int device;
    int threads;          /* host threads; the CUDA backend itself uses none */
    int tf32;             /* TF32 tensor-core math in convolutions and FC; env VDNN_NO_TF32=1 turns it off; default on */
    int deterministic;    /* only bitwise-reproducible algorithms; env VDNN_DETERMINISTIC=1; default off */
    int benchmark;        /* pick each conv's fastest measured algorithm instead of cuDNN's heuristic favourite;
                           * env VDNN_CUDNN_BENCHMARK=1; default off. Ignored in deterministic mode. Either way
                           * only algorithms that ran on the device (cudnnFind*Ex, once per layer configuration,
                           * cached on disk: see docs/cuda.md) are offered. */
    size_t conv_ws_limit; /* no conv algorithm needing more workspace than this; 0: env VDNN_CONV_WS_LIMIT
                           * (a size such as "512MiB"), else unlimited */
    size_t conv_find_limit; /* layers whose operands exceed this many bytes are not measured (cuDNN's heuristic
                             * list is trusted for them); 0: env VDNN_CONV_FIND_LIMIT, else 4 GiB */
    size_t tensor_values; /* most values one cuDNN call's tensor may hold: convolutions, pooling and LRN over larger
                           * batches run in batch chunks under it; 0: env VDNN_CUDA_TENSOR_VALUES, else 2^31-1
                           * (cuDNN's own limit; tests set it low to exercise the chunks) */
} vdnn_cuda_options;

/* device 0, threads 0, every switch -1 (environment), no workspace limit of its own. */
void vdnn_cuda_options_default(vdnn_cuda_options *o);

/* vdnn_backend_cuda_create with explicit options (the CLI's --no-tf32 and --deterministic go here). */
vdnn_status vdnn_backend_cuda_create_ex(const vdnn_cuda_options *opt, vdnn_backend_t **out, vdnn_error *err);

static inline void vdnn_backend_destroy(vdnn_backend_t *be)
{
    if (be) be->ops->destroy(be);
}

/* The op description of layer `i` of a resolved graph. */
void vdnn_op_desc_from_layer(const vdnn_graph_t *g, int i, bool training, vdnn_op_desc *d);

/* Whether be runs maps of type t (a net's precision): fp32 always; another type if the backend's ops accept it,
 * every layer of g (NULL: the ops that need the device's support for the type, such as a ReLU). The refusal says
 * "memory.precision: ..." with the layer and the backend's reason (a convolution in bf16 on a CPU without AVX-512
 * BF16, fp16 on any CPU). */
vdnn_status vdnn_backend_check_dtype(vdnn_backend_t *be, vdnn_dtype t, const vdnn_graph_t *g, vdnn_error *err);

/* op_algos for an op with a single way to run: op_query's info under the name "default". */
vdnn_status vdnn_op_algos_single(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n,
                                 vdnn_error *err);

/* Counter-based dropout mask shared by every backend: element `i` is kept iff
 * vdnn_dropout_keep(seed, i, p). Pure, so recompute reproduces the mask. */
static inline uint64_t vdnn_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline bool vdnn_dropout_keep(uint64_t seed, uint64_t i, float p)
{
    uint64_t r = vdnn_mix64(seed ^ vdnn_mix64(i));
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
    return u >= (double)p;
}

#endif
