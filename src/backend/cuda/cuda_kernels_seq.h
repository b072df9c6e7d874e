/* Launchers of the CUDA kernels of the sequence ops (cuda_kernels_seq.cu): embeddings, layer normalization, the
 * causal softmax of attention and its gradient. Maps (void *) are of type t, computed in float and rounded once;
 * parameters, their gradients and statistics are float. Each enqueues on `s` and returns the launch status. Every sum
 * has one writer and a fixed order (no atomics), as the CPU backend's, so results repeat bit for bit. */
#ifndef VDNN_BACKEND_CUDA_KERNELS_SEQ_H
#define VDNN_BACKEND_CUDA_KERNELS_SEQ_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = w[id(r), :] over `rows` token ids x (values holding integers); a row whose id is not in 0..vocab-1
 * becomes NaN (the ids live on the device, so they are not checked on the host as on the CPU). */
cudaError_t vdnn_cuda_k_embed_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, size_t rows,
                                  int f, int vocab);
/* dw = 0, then each value of dw adds dy's rows of its id in token order (ids outside the vocabulary are left out):
 * one writer per value, the CPU's order. */
cudaError_t vdnn_cuda_k_embed_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *x, const void *dy,
                                  size_t rows, int f, int vocab);

/* y[b, i] = x[b, i] + w[i] over n batches of tf values (y may be x). */
cudaError_t vdnn_cuda_k_pos_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, int n,
                                size_t tf);
/* dw[i] = sum over b of dy[b, i] (b in order) for i < tf, 0 for tf <= i < context_tf. */
cudaError_t vdnn_cuda_k_pos_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *dy, int n, size_t tf,
                                size_t context_tf);

/* Layer normalization over rows of f values: y = (x - mean) / sqrt(var + eps) * w + b, mean and biased variance
 * summed in double. mean and var (rows values each) are written when not NULL. */
cudaError_t vdnn_cuda_k_ln_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, const float *b,
                               float *mean, float *var, size_t rows, int f, float eps);
/* dx from x, the kept mean and var, dy and w (skipped when dx is NULL); dw[j] = sum dy*xhat and db[j] = sum dy over
 * the rows (skipped when both are NULL), in double: ranges of rows into per-split partials in `scratch`, then the
 * partials in split order (the split count depends on the shape alone, so the sums repeat bit for bit). */
cudaError_t vdnn_cuda_k_ln_bwd(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes, void *dx,
                               float *dw, float *db, const void *x, const float *mean, const float *var, const void *dy,
                               const float *w, size_t rows, int f, float eps);

/* Over rows of `cols` float scores (rows = blocks of cols query rows): row i of each block of p gets the softmax of its
 * first (i mod cols) + 1 scores, the rest 0. The scores are overwritten (their exponentials); p may be them for
 * float maps. */
cudaError_t vdnn_cuda_k_causal_softmax(cudaStream_t s, vdnn_cuda_type t, void *p, float *scores, size_t rows, int cols);
/* ds = p * (dp - sum_{j <= i} p dp) over the first i+1 values of each row, 0 beyond (the softmax's gradient). */
cudaError_t vdnn_cuda_k_causal_softmax_bwd(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p, const void *dp,
                                           size_t rows, int cols);
/* The same two over blocks of `block` query rows of `cols` scores, the first row of a block query r0: row i of a block
 * takes its first r0 + i + 1 scores (fused attention's blocks of rows; r0 + block <= cols). */
cudaError_t vdnn_cuda_k_causal_softmax_rows(cudaStream_t s, vdnn_cuda_type t, void *p, float *scores, size_t rows,
                                            int cols, int block, int r0);
cudaError_t vdnn_cuda_k_causal_softmax_bwd_rows(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p,
                                                const void *dp, size_t rows, int cols, int block, int r0);

#ifdef __cplusplus
}
#endif
#endif
