/* The memory options: one struct, with one default, that travels by value wherever options go (a net's options,
 * a plan's request, the command's flags). A new option is a field here, a default in vdnn_memory_options_default,
 * a line in the command's flag table and its use. */
#ifndef VDNN_MEMORY_H
#define VDNN_MEMORY_H

#include "vdnn/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vdnn_policy {
    VDNN_POLICY_NONE = 0, /* in-core, with liveness reuse */
    VDNN_POLICY_ALL,      /* vDNN_all: offload every feature map needed by backward */
    VDNN_POLICY_CONV,     /* vDNN_conv: offload only the inputs of compute-heavy layers (convolutions; on sequence
                             models linear, attention and LSTM) */
    VDNN_POLICY_RECOMPUTE,/* Chen et al.: keep about sqrt(n) checkpoints, recompute the rest */
    VDNN_POLICY_DYN,      /* vDNN_dyn: from fastest to most memory-saving until it fits */
    VDNN_POLICY_POOCH,    /* PoocH: keep/swap search, then swap-to-recompute by r(X) */
    VDNN_POLICY_AUTO,     /* ours: the fastest simulated plan that fits */
    VDNN_POLICY_UM,       /* OC-DNN: all's classes, swapped maps in Unified Memory, migrated by prefetches */
    VDNN_POLICY_COUNT
} vdnn_policy;

/* "none", "all", ... ("?" out of range); parse is the inverse (case-insensitive). Both, and the one line that
 * says what a policy does (NULL out of range), come from the library's table of planners. */
VDNN_API const char *vdnn_policy_name(vdnn_policy p);
VDNN_API bool vdnn_policy_parse(const char *s, vdnn_policy *out);
VDNN_API const char *vdnn_policy_description(vdnn_policy p);

/* vdnn_memory_options.conv_algo: besides k >= 0 (every layer its k-th candidate, or its last; 0 the backend's
 * defaults, whose results are bitwise the same under every policy): */
#define VDNN_ALGO_DEFAULT 0
#define VDNN_ALGO_CHOOSE (-1)   /* the profile-guided planners choose per layer */
#define VDNN_ALGO_LEANEST (-2)  /* every layer the candidate with the smallest workspace */

#define VDNN_MAX_MICRO_BATCHES 4096

/* The type of feature maps, gradient maps and workspaces. Parameters stay fp32 master weights (the ops round a
 * copy for compute), and so do the optimizer state, the loss and softmax, and batch-norm statistics: what
 * PyTorch's autocast does. The values are those of the backends' internal type, fp32 first so that options that
 * never name a precision keep fp32. */
typedef enum vdnn_precision {
    VDNN_PRECISION_FP32 = 0,
    VDNN_PRECISION_BF16,      /* CPUs with AVX-512 BF16 (a transformer's layers: any CPU), GPUs of capability 8.0 up */
    VDNN_PRECISION_FP16,      /* CUDA only */
    VDNN_PRECISION_COUNT
} vdnn_precision;

/* "fp32", "bf16", "fp16" ("?" out of range); parse is the inverse. */
VDNN_API const char *vdnn_precision_name(vdnn_precision p);
VDNN_API bool vdnn_precision_parse(const char *s, vdnn_precision *out);

typedef struct vdnn_memory_options {
    vdnn_policy policy;          /* how feature maps are kept, swapped or recomputed (default none) */
    size_t budget;               /* device bytes the plan may use; SIZE_MAX: unlimited (the default) */
    size_t host_budget;          /* bytes of the pinned host pool; SIZE_MAX: unlimited (the default) */
    int conv_algo;               /* VDNN_ALGO_*, or a candidate index (default VDNN_ALGO_DEFAULT) */
    bool offload_params;         /* weights, biases and momentum homed in host memory between their uses */
    bool stream_inputs;          /* convolutions that can stream their inputs through host memory do */
    int micro_batches;           /* a step's batch in this many micro-batches, gradients summed (default 1) */
    bool pipelined;              /* with micro_batches > 1: every micro-batch held between its forward and
                                    backward passes (GPipe), planned as that many copies */
    double link_bandwidth_d2h;   /* CPU backend: copies throttled to this many bytes/s (0: unthrottled) */
    double link_bandwidth_h2d;
    bool poison;                 /* fill freed and offloaded device memory with NaN */
    bool allow_oversubscribe;    /* policy um: a managed pool beyond the device's free memory */
    int optimizer_moments;       /* parameter-sized state the optimizer keeps per parameter: 1, SGD's momentum (the
                                    default), or 2, AdamW's two moments; a net sets it from its optimizer */
    vdnn_precision precision;    /* of the maps (default fp32); whether the backend runs it is checked where a
                                    backend is known (net and plan creation), with its reason */
    bool clip_grads;             /* training clips gradients by their global norm, so every update waits for
                                    backward's end (update steps after it); a net sets it from its clip_grad_norm */
} vdnn_memory_options;

VDNN_API vdnn_memory_options vdnn_memory_options_default(void);

/* Checks every field's range; a failure names the field ("memory.micro_batches") and its range. */
VDNN_API vdnn_status vdnn_memory_options_check(const vdnn_memory_options *m, vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
