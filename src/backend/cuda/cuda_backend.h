/* What the CUDA backend offers beyond the backend interface: the settings it runs with (its creation options are
 * in backend/backend.h) and the convolution algorithms cuDNN offers for a layer, with workspace sizes and measured times, for planners.
 * Free of CUDA headers, so any module may include it. The functions exist only in builds with the CUDA backend:
 * code that links vdnn_cuda sees VDNN_HAVE_CUDA defined then. */
#ifndef VDNN_BACKEND_CUDA_BACKEND_H
#define VDNN_BACKEND_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

/* The settings a CUDA backend runs with, after the environment was applied. false if `be` is not CUDA. */
bool vdnn_cuda_settings(const vdnn_backend_t *be, vdnn_cuda_options *out);

/* For code that enqueues its own device work in order with the backend's (NCCL collectives): the CUDA
 * stream of a queue (a cudaStream_t, behind void * to keep this header free of CUDA) and the device. NULL
 * and -1 if `be` is not CUDA. */
void *vdnn_cuda_stream(vdnn_backend_t *be, vdnn_queue_id q);
int vdnn_cuda_device(const vdnn_backend_t *be);

/* The training or inference candidates of op d as the CUDA backend with options opt (resolved as a backend's are)
 * would list them on a GPU of compute capability cc_major.cc_minor, worked out without a device and without running
 * anything: each op's own query code answers (what it keeps for backward, what backward reads, its own scratch),
 * except a convolution's, whose cuDNN workspaces only cuDNN on a device can size: its one candidate is the
 * zero-workspace algorithms' (cuda_ops_conv.c, vdnn_cuda_conv_describe), and *derived says so. Deterministic mode
 * is refused for convolutions (VDNN_ERR_UNSUPPORTED). Writes at most VDNN_MAX_ALGOS candidates and their number. */
vdnn_status vdnn_cuda_describe_op(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const vdnn_op_desc *d,
                                  vdnn_op_algo *algos, int *n, bool *derived, vdnn_error *err);

/* The device description (vdnn_backend_describe's) of a GPU that is not here, named `name`, for a profile made
 * with vdnn_cuda_describe_op: compute capability, the settings as opt resolves, and the CUDA and cuDNN versions of
 * the headers this backend was built with, marked as such (no runtime or driver was asked). */
vdnn_status vdnn_cuda_describe_offline(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const char *name,
                                       vdnn_device_info *out, vdnn_error *err);

typedef enum vdnn_conv_pass {
    VDNN_CONV_FWD = 0,
    VDNN_CONV_BWD_DATA,
    VDNN_CONV_BWD_FILTER,
    VDNN_CONV_PASS_COUNT
} vdnn_conv_pass;

typedef struct vdnn_conv_algo {
    int algo;           /* cuDNN's algorithm number within the pass */
    char name[32];      /* e.g. "fwd_implicit_precomp_gemm", "bwd_filter_algo_1" */
    size_t ws_bytes;    /* workspace the algorithm needs */
    double time_ms;     /* measured by cuDNN; -1 when only the heuristics were asked */
    bool deterministic; /* bitwise-reproducible run to run */
    bool tensor_cores;  /* may run FP32 as TF32 on tensor cores (never when TF32 is off) */
} vdnn_conv_algo;

#define VDNN_CONV_MAX_ALGOS 16

/* The algorithms usable for one pass of a CONV layer under the backend's settings (TF32, determinism,
 * workspace limit), best first: by measured time when `measure` (runs cudnnFind*, which allocates
 * scratch device memory and synchronizes the device), else in cuDNN's heuristic order. Writes at most
 * `cap` entries and their number to *n. */
vdnn_status vdnn_cuda_conv_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_conv_pass pass, bool measure,
                                 vdnn_conv_algo *out, int cap, int *n, vdnn_error *err);

/* The algorithm a CONV op created on a CUDA backend runs for a pass (false for other ops, or for the
 * backward passes of an op created with training = false). */
bool vdnn_cuda_conv_chosen(const vdnn_backend_t *be, const vdnn_op *op, vdnn_conv_pass pass, vdnn_conv_algo *out);

#endif
