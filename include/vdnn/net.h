/* Nets: a model trained on a backend under a memory plan, its parameters in caller-readable form, checkpoints,
 * and what a run measured. */
#ifndef VDNN_NET_PUBLIC_H
#define VDNN_NET_PUBLIC_H

#include "vdnn/base.h"
#include "vdnn/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vdnn_optimizer {
    VDNN_OPTIMIZER_SGD = 0, /* SGD with momentum and weight decay (PyTorch's rule), the default */
    VDNN_OPTIMIZER_ADAMW,   /* AdamW (PyTorch's torch.optim.AdamW): two moments per parameter, which the plan counts */
} vdnn_optimizer;

typedef struct vdnn_net_options {
    int batch;                     /* images per step (default 64); with memory.micro_batches M, M of batch/M */
    int in_c, in_h, in_w;          /* input CxHxW; all 0: the model's default (the default) */
    int classes;                   /* 0: the model's default (the default) */
    uint64_t seed;                 /* initial parameters and dropout masks (default 1) */
    float momentum;                /* SGD momentum (default 0.9) */
    float weight_decay;            /* default 5e-4 */
    vdnn_memory_options memory;    /* vdnn_memory_options_default() */
    const vdnn_profile_t *profile; /* costs the plan is made with (NULL, the default: the default estimate);
                                      read by vdnn_net_create only */
    vdnn_optimizer optimizer;      /* default SGD; sets memory.optimizer_moments (1 or 2) */
    float beta1, beta2, eps;       /* AdamW (defaults 0.9, 0.999, 1e-8); weight_decay is its decoupled decay */
    float loss_scale;              /* dynamic loss scaling's first scale, a power of two (GradScaler's rule: a step
                                      with an inf or NaN gradient is skipped and the scale halved; it doubles after
                                      2000 good steps). 0 (the default): 65536 with fp16 maps, off otherwise;
                                      below 0: off */
    float clip_grad_norm;          /* > 0: before each update, every parameter gradient is scaled by
                                      clip_grad_norm / (norm + 1e-6) when their global L2 norm exceeds it (PyTorch's
                                      clip_grad_norm_); no parameter is then updated before the last gradient
                                      is made (homed parameters, memory.offload_params, in update steps after
                                      backward). 0 (the default): no clipping */
} vdnn_net_options;

VDNN_API vdnn_net_options vdnn_net_options_default(void);

/* Plans one training iteration with vdnn_plan_create's call, checks the budgets (VDNN_ERR_BUDGET naming the
 * smallest budget that works), allocates the device arena and host pool and initialises the parameters from the
 * seed. The net keeps its own copy of the model: the caller may free it. */
VDNN_API vdnn_status vdnn_net_create(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_net_options *o,
                                     vdnn_net_t **out, vdnn_error *err);
VDNN_API void vdnn_net_free(vdnn_net_t *net);

/* One SGD step on `batch` images (host memory, NCHW float) and their labels (0 .. classes-1); *loss (may be
 * NULL) gets the mean training loss. */
VDNN_API vdnn_status vdnn_net_train_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr,
                                         float *loss, vdnn_error *err);
/* Inference on n <= batch / micro_batches images: *correct predictions and the summed loss (either may be NULL).
 * predict gives the n x classes softmax probabilities instead (a sequence model's: n x seq_len x classes, per
 * token). */
VDNN_API vdnn_status vdnn_net_eval_batch(vdnn_net_t *net, const float *images, const int32_t *labels, int n,
                                         int *correct, double *loss_sum, vdnn_error *err);
VDNN_API vdnn_status vdnn_net_predict(vdnn_net_t *net, const float *images, int n, float *probs, vdnn_error *err);
/* The same in evaluation mode, giving the n x classes logits (a sequence model's per token, as predict): the
 * model's output before the softmax of vdnn's loss (for an ONNX model, the graph's output, or the input of a
 * final Softmax node). */
/* Labels (and predicted rows) per sample: 1 for an image model, the sequence length for a sequence model, whose
 * train_step and eval_batch take n x that many labels. */
VDNN_API int vdnn_net_labels_per_sample(const vdnn_net_t *net);
VDNN_API vdnn_status vdnn_net_forward(vdnn_net_t *net, const float *images, int n, float *logits, vdnn_error *err);

/* The parameters and buffers a checkpoint holds: weights, biases, running statistics and momentum, named
 * "LAYER.weight", "LAYER.bias", "LAYER.stats" (batch norm's running mean, then variance),
 * "LAYER.weight.momentum", "LAYER.bias.momentum". */
typedef struct vdnn_param_info {
    char name[96];
    char layer[64];
    char kind[16];   /* "weight", "bias", "stats", "wmom", "bmom" */
    size_t count;    /* floats */
} vdnn_param_info;

VDNN_API int vdnn_net_param_count(const vdnn_net_t *net);
VDNN_API vdnn_status vdnn_net_param_info(const vdnn_net_t *net, int i, vdnn_param_info *out, vdnn_error *err);
/* Copies one of them by name into host[0 .. count) or from it; count must be its size. */
VDNN_API vdnn_status vdnn_net_get(vdnn_net_t *net, const char *name, float *host, size_t count, vdnn_error *err);
VDNN_API vdnn_status vdnn_net_set(vdnn_net_t *net, const char *name, const float *host, size_t count,
                                  vdnn_error *err);

/* Checkpoints: parameters, momentum, statistics, the step and the seed; written atomically (a temporary file,
 * then renamed), read back checked (VDNN_ERR_FORMAT for a damaged file, VDNN_ERR_MISMATCH for another model). */
VDNN_API vdnn_status vdnn_net_save(vdnn_net_t *net, const char *path, vdnn_error *err);
VDNN_API vdnn_status vdnn_net_load(vdnn_net_t *net, const char *path, vdnn_error *err);
/* Writes the ONNX model the net was created from (its vdnn_model_source) to `out` with the net's parameters and
 * batch-norm running statistics as its initializers; see vdnn_model_export_onnx. */
VDNN_API vdnn_status vdnn_net_export_onnx(vdnn_net_t *net, const char *out, vdnn_error *err);

/* The training plan the net runs (owned by the net). */
VDNN_API const vdnn_plan_t *vdnn_net_plan(const vdnn_net_t *net);

typedef struct vdnn_net_stats {
    char model[64];
    char backend[16];
    vdnn_policy policy;
    int batch;                     /* a step's images */
    int micro_batches;
    vdnn_shape input;              /* n: one micro-batch */
    int classes;
    int64_t step, epoch;           /* optimizer steps done; epochs completed */
    uint64_t seed;
    size_t device_bytes;           /* the arena: the larger of the training and evaluation plans' peaks */
    size_t peak_device_bytes;      /* measured: the arena's high-water mark so far */
    size_t host_bytes;             /* the pinned host pool */
    size_t managed_bytes;          /* policy um: the Unified Memory pool */
    bool oversubscribed;           /* the managed pool and the arena exceed the device's free memory */
    size_t bytes_moved;            /* per step, both directions (the plan's) */
    double last_step_s;            /* wall time of the last training step */
    bool offload_params;
    int streamed_layers;
    vdnn_precision precision;      /* of the maps (memory.precision) */
    vdnn_precision checkpoint_precision; /* of the net that wrote the last checkpoint loaded (fp32 and bf16 load
                                            into each other: weights are fp32 in both); `precision` if none */
    bool loss_scaling;             /* dynamic loss scaling is on (vdnn_net_options.loss_scale) */
    float loss_scale;              /* its current scale (0 when off) */
    int64_t skipped_steps;         /* steps whose update was skipped for an inf or NaN gradient (counted in step) */
} vdnn_net_stats;

VDNN_API void vdnn_net_get_stats(const vdnn_net_t *net, vdnn_net_stats *s);

#ifdef __cplusplus
}
#endif
#endif
