/* The backend's own CUDA kernels (cuda_kernels_*.cu), as C launchers: each enqueues on `s` and returns the launch status.
 * Launchers over maps take the maps' value type and untyped pointers; parameters, their gradients and statistics are
 * float whatever the maps' type, and arithmetic is float (sums in double). */
#ifndef VDNN_BACKEND_CUDA_KERNELS_H
#define VDNN_BACKEND_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "backend/cuda/cuda_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDNN_CUDA_MAX_ADD 8 /* = VDNN_MAX_INPUTS, kept here so the .cu files need no vdnn headers */

/* The value type of a map, numbered as vdnn_dtype (core/dtype.h; cuda_ops_table.c checks that they agree). */
typedef enum vdnn_cuda_type { VDNN_CUDA_F32 = 0, VDNN_CUDA_BF16 = 1, VDNN_CUDA_F16 = 2 } vdnn_cuda_type;

/* Whether this binary holds code the current device can run (cudaErrorNoKernelImageForDevice otherwise). */
cudaError_t vdnn_cuda_k_probe(void);

/* ---- element-wise (cuda_kernels_elementwise.cu) ---- */
cudaError_t vdnn_cuda_k_fill(cudaStream_t s, float *dst, float value, size_t n);
cudaError_t vdnn_cuda_k_accumulate(cudaStream_t s, float *dst, const float *src, size_t n);
cudaError_t vdnn_cuda_k_scale(cudaStream_t s, float *dst, float alpha, size_t n); /* dst *= alpha */
/* g = dw + wd*w; v = momentum*v + g; w -= lr*v */
cudaError_t vdnn_cuda_k_sgd(cudaStream_t s, float *w, const float *dw, float *v, size_t n, float lr, float momentum,
                            float weight_decay);
/* AdamW with the CPU backend's arithmetic in its order (backend.h); decay = 1 - lr*wd, step_size = lr / (1 - beta1^t)
 * and bc2_sqrt = sqrt(1 - beta2^t) come from the host, each rounded once. */
cudaError_t vdnn_cuda_k_adamw(cudaStream_t s, float *w, const float *dw, float *m, float *v, size_t n, float decay,
                              float beta1, float beta2, float eps, float step_size, float bc2_sqrt);
/* *flag = 1 when any of x[0..n) is infinite or NaN (untouched otherwise, so calls accumulate). */
cudaError_t vdnn_cuda_k_nonfinite(cudaStream_t s, unsigned *flag, const float *x, size_t n);
/* *out (device) = the sum of x[i]^2 in double, one block in a fixed order (gradient clipping's norm). */
cudaError_t vdnn_cuda_k_sum_squares(cudaStream_t s, double *out, const float *x, size_t n);
/* dst = src converted from type st to dt, or with add: dst = dst + src, added in float and rounded once. dst and src
 * may be the same buffer only when the types agree. */
cudaError_t vdnn_cuda_k_convert(cudaStream_t s, void *dst, vdnn_cuda_type dt, const void *src, vdnn_cuda_type st,
                                size_t n, int add);
/* y = x[0] + x[1] + ... (k inputs, summed in input order) */
cudaError_t vdnn_cuda_k_add(cudaStream_t s, vdnn_cuda_type t, void *y, const void *const *x, int k, size_t n);
/* out[i] = keep(seed, i, p) ? in[i] * scale : 0, keep() being vdnn_dropout_keep of backend.h */
cudaError_t vdnn_cuda_k_dropout(cudaStream_t s, vdnn_cuda_type t, void *out, const void *in, size_t n, uint64_t seed,
                                float p, float scale);
/* Writes keep(seed, i, p) as 0/1 bytes, for testing the device mask against the host function. */
cudaError_t vdnn_cuda_k_dropout_mask(cudaStream_t s, unsigned char *mask, size_t n, uint64_t seed, float p);

/* ReLU: y = max(x, 0) keeping NaN (y may be x); dx = dy where y > 0, else 0 (dx may be dy). Values are selected,
 * never rounded. */
cudaError_t vdnn_cuda_k_relu_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, size_t n);
cudaError_t vdnn_cuda_k_relu_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *y, const void *dy, size_t n);

/* ---- per-channel and per-plane reductions (cuda_kernels_reduce.cu) ---- */
/* y[n,c,:] += b[c] over an (n, c, hw) tensor */
cudaError_t vdnn_cuda_k_bias_add(cudaStream_t s, vdnn_cuda_type t, void *y, const float *b, int n, int c, size_t hw);
/* db[c] = sum over n and hw of dy[n,c,:], through per-split partials in `scratch` (see vdnn_cuda_sum_splits). */
cudaError_t vdnn_cuda_k_bias_grad(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes, float *db,
                                  const void *dy, int n, int c, size_t hw);
/* y[p] = mean of plane p of x (planes of hw values) */
cudaError_t vdnn_cuda_k_gap_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, size_t planes, size_t hw);
/* dx[p,:] = dy[p] / hw */
cudaError_t vdnn_cuda_k_gap_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *dy, size_t planes, size_t hw);
/* Batch norm's dgamma and dbeta alone (no dx): dgamma[c] = sum dy*(x-mean)*inv_std, dbeta[c] = sum dy. */
cudaError_t vdnn_cuda_k_bn_param_grad(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes,
                                      float *dgamma, float *dbeta, const void *x, const void *dy, const float *mean,
                                      const float *inv_std, int n, int c, size_t hw);

/* ---- pooling, LRN and loss (cuda_kernels_nn.cu) ---- */
typedef struct vdnn_cuda_pool_geom {
    int n, c, h, w;   /* input */
    int oh, ow;       /* output */
    int kh, kw, sh, sw, ph, pw;
} vdnn_cuda_pool_geom;
/* Average pooling's input gradient, the padding counted in every window (count_include_pad). */
cudaError_t vdnn_cuda_k_avgpool_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *dy, vdnn_cuda_pool_geom g);

/* Cross-channel LRN as PyTorch's LocalResponseNorm (odd size, alpha divided by it), for 16-bit maps (fp32 maps run
 * cuDNN's): y = x * d^-beta with d = k + alpha/size * sum of x^2 over the window; backward recomputes d from x. */
typedef struct vdnn_cuda_lrn_geom {
    int n, c;
    size_t hw;
    int size;
    float alpha, beta, k;
} vdnn_cuda_lrn_geom;
cudaError_t vdnn_cuda_k_lrn_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, vdnn_cuda_lrn_geom g);
cudaError_t vdnn_cuda_k_lrn_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *x, const void *dy,
                                vdnn_cuda_lrn_geom g);

/* Row-wise softmax of x (n rows of k) into y; when per_sample is not NULL also each row's
 * -log softmax[label] (NaN for a label outside [0, k)). y may alias x. */
cudaError_t vdnn_cuda_k_softmax_xent_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x,
                                         const int32_t *labels, double *per_sample, int n, int k);
/* *loss = mean of per_sample[0..n), summed in a fixed order */
cudaError_t vdnn_cuda_k_mean_loss(cudaStream_t s, float *loss, const double *per_sample, int n);
/* dx = (y - onehot(labels)) * (scale / n) from float y, 1/n rounded before the scale (a loss scale, 1 when none: a
 * power of two keeps dx exactly the unscaled one times it); a row with a label outside [0, k) becomes NaN */
cudaError_t vdnn_cuda_k_softmax_xent_bwd(cudaStream_t s, float *dx, const float *y, const int32_t *labels, int n, int k,
                                         float scale);
/* The same from the logits x of a 16-bit map: the softmax recomputed in float (never rounded before the
 * subtraction), dx rounded once. */
cudaError_t vdnn_cuda_k_softmax_xent_bwd_logits(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *x,
                                                const int32_t *labels, int n, int k, float scale);

#ifdef __cplusplus
}
#endif
#endif
