/* Launchers of the CUDA kernels of the activations, channel scaling and pooling windows (cuda_kernels_act.cu,
 * cuda_kernels_pool.cu): each enqueues on `s` and returns the launch status. Maps are of type t, computed in float and
 * rounded once. */
#ifndef VDNN_BACKEND_CUDA_KERNELS_LAYERS_H
#define VDNN_BACKEND_CUDA_KERNELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element-wise activations; a and b are hardsigmoid's alpha and beta, or clip's bounds. */
typedef enum vdnn_cuda_act {
    VDNN_CUDA_ACT_SIGMOID,
    VDNN_CUDA_ACT_HARDSIGMOID,
    VDNN_CUDA_ACT_HARDSWISH,
    VDNN_CUDA_ACT_SILU,
    VDNN_CUDA_ACT_CLIP,
    VDNN_CUDA_ACT_GELU, /* GPT-2's tanh approximation */
} vdnn_cuda_act;

/* y = f(x), NaN kept (y may be x). */
cudaError_t vdnn_cuda_k_act_fwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *y, const void *x, size_t n,
                                float a, float b);
/* dx = f'(.) dy, the slope read from v: y for sigmoid, hardsigmoid and clip, x for hardswish, silu and gelu (dx may be dy). */
cudaError_t vdnn_cuda_k_act_bwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *dx, const void *v,
                                const void *dy, size_t n, float a, float b);

/* y[p, :] = x[p, :] * scale[p] over `planes` planes of hw values (y may be x). */
cudaError_t vdnn_cuda_k_chmul(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const void *scale, size_t planes,
                              size_t hw);
/* ds[p] = sum over plane p of dy * x, in double, rounded once. */
cudaError_t vdnn_cuda_k_chmul_scale_grad(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *dy, const void *x,
                                         size_t planes, size_t hw);

/* Pooling by PyTorch's window rules (ceil_mode's last window clipped at the border; with exclude_pad, averages over
 * the input values a window covers). Max pooling writes each window's argmax (its index within the input plane)
 * when argmax is not NULL. */
cudaError_t vdnn_cuda_k_pool_win_fwd(cudaStream_t s, vdnn_cuda_type t, int max, void *y, int32_t *argmax, const void *x,
                                     vdnn_cuda_pool_geom g, int exclude_pad);
/* Each input gathers the gradients of the windows that read it (max: that chose it), windows in output order. */
cudaError_t vdnn_cuda_k_pool_win_bwd(cudaStream_t s, vdnn_cuda_type t, int max, void *dx, const void *dy,
                                     const int32_t *argmax, vdnn_cuda_pool_geom g, int exclude_pad);

#ifdef __cplusplus
}
#endif
#endif
