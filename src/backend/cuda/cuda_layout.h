/* Rules of the CUDA backend that need no CUDA headers, so the tests check them on any machine: how the per-channel
 * sums split their work, how sub-buffers handed to cuDNN are aligned, how cuDNN statuses become vdnn statuses. */
#ifndef VDNN_BACKEND_CUDA_LAYOUT_H
#define VDNN_BACKEND_CUDA_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "vdnn/vdnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device scratch each CUDA backend keeps for the partial sums of its per-channel reductions. */
#define VDNN_CUDA_SUM_SCRATCH_BYTES ((size_t)1 << 20)

/* Each of the two pinned buffers an upload from pageable memory goes through. */
#define VDNN_CUDA_STAGE_BYTES ((size_t)8 << 20)

/* cuDNN wants its pointers aligned; 256 bytes is what cudaMalloc gives, so sub-buffers get it too. */
#define VDNN_CUDA_ALIGN ((size_t)256)

/* How many splits a per-channel sum over an (n, c, hw) tensor uses: enough blocks to fill a large GPU, each adding
 * a few thousand values, as many as `sums` partial arrays of c doubles each fit in `scratch_bytes`, at most 1024.
 * Depends on the shape alone, so the order of additions is the same on every device. 0: the scratch is too
 * small for even one split. */
int vdnn_cuda_sum_splits(int n, int c, size_t hw, int sums, size_t scratch_bytes);

/* A cuDNN 9 status code as a vdnn status: out of host or device memory -> VDNN_ERR_NO_MEMORY, a driver or
 * architecture mismatch -> VDNN_ERR_NO_DEVICE, BAD_PARAM_* -> VDNN_ERR_INVALID_ARG, NOT_SUPPORTED_* ->
 * VDNN_ERR_UNSUPPORTED, anything else -> VDNN_ERR_BACKEND. */
vdnn_status vdnn_cuda_cudnn_status(int code);

/* The oldest Linux driver a CUDA major version runs on (NVIDIA's release notes: 13.x needs 580, 12.x 525, 11.x
 * 450), as text; "the one released with CUDA <major>" for other versions. */
const char *vdnn_cuda_min_driver(int cuda_major);

/* cuDNN's legacy tensors hold at most this many values (int sizes and strides). */
#define VDNN_CUDA_MAX_TENSOR_VALUES ((size_t)2147483647)

/* How a batch of n images is cut so that each call's tensors hold at most `limit` values when one image holds
 * `image_values`: *per images per chunk, *count chunks, the last of *last images. false if one image alone is over
 * the limit. */
bool vdnn_cuda_chunk_plan(size_t image_values, int n, size_t limit, int *per, int *count, int *last);

/* `bytes` rounded up to VDNN_CUDA_ALIGN. */
size_t vdnn_cuda_align(size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
