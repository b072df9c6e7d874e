// CUDA kernels of the element-wise activations (sigmoid, hard-sigmoid, hard-swish, SiLU, clip, GELU) and of the
// per-channel scaling of squeeze-and-excitation, over maps of any type (computed in float, rounded once). The
// formulas are PyTorch's; their slopes at the kinks too.
#include <math.h>

#include "cuda_kernels_layers.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

// GELU's tanh approximation (GPT-2, oneDNN's gelu_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr float GELU_K = 0.7978845608028654f;
constexpr float GELU_C = 0.044715f;
__device__ __forceinline__ float gelu_inner(float x) { return GELU_K * (x + GELU_C * x * x * x); }

__device__ __forceinline__ float act_fwd(vdnn_cuda_act k, float x, float a, float b)
{
    switch (k) {
    case VDNN_CUDA_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case VDNN_CUDA_ACT_HARDSIGMOID: {
        const float v = a * x + b;
        return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; // NaN falls through both tests
    }
    case VDNN_CUDA_ACT_HARDSWISH: {
        float r = x + 3.0f;
        r = r < 0.0f ? 0.0f : r > 6.0f ? 6.0f : r;
        return x * r / 6.0f;
    }
    case VDNN_CUDA_ACT_SILU: return x / (1.0f + expf(-x));
    case VDNN_CUDA_ACT_GELU: return 0.5f * x * (1.0f + tanhf(gelu_inner(x)));
    default: return x < a ? a : x > b ? b : x;
    }
}

// v is y for sigmoid, hard-sigmoid and clip, x for hard-swish, SiLU and GELU.
__device__ __forceinline__ float act_bwd(vdnn_cuda_act k, float v, float g, float a, float b)
{
    switch (k) {
    case VDNN_CUDA_ACT_SIGMOID: return g * v * (1.0f - v);
    case VDNN_CUDA_ACT_HARDSIGMOID: return v > 0.0f && v < 1.0f ? a * g : 0.0f;
    case VDNN_CUDA_ACT_HARDSWISH: return v < -3.0f ? 0.0f : v <= 3.0f ? g * (2.0f * v + 3.0f) / 6.0f : g;
    case VDNN_CUDA_ACT_SILU: {
        const float s = 1.0f / (1.0f + expf(-v));
        return g * (s * (1.0f + v * (1.0f - s)));
    }
    case VDNN_CUDA_ACT_GELU: {
        // d/dx 0.5 x (1 + tanh u), u = k (x + c x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2)
        const float th = tanhf(gelu_inner(v));
        const float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        return g * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
    }
    default: return v > a && v < b ? g : 0.0f;
    }
}

template <typename T> __global__ void k_act_fwd(vdnn_cuda_act k, T *y, const T *x, size_t n, float a, float b)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) y[i] = vdnn_st<T>(act_fwd(k, vdnn_ld(x[i]), a, b));
}

template <typename T>
__global__ void k_act_bwd(vdnn_cuda_act k, T *dx, const T *v, const T *dy, size_t n, float a, float b)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads())
        dx[i] = vdnn_st<T>(act_bwd(k, vdnn_ld(v[i]), vdnn_ld(dy[i]), a, b));
}

template <typename T> __global__ void k_chmul(T *y, const T *x, const T *scale, size_t total, size_t hw)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) y[i] = vdnn_st<T>(vdnn_ld(x[i]) * vdnn_ld(scale[i / hw]));
}

// One warp per plane, in double, as global average pooling.
template <typename T> __global__ void k_chmul_scale_grad(T *ds, const T *dy, const T *x, size_t planes, size_t hw)
{
    const size_t warp = vdnn_tid() / 32;
    const unsigned lane = threadIdx.x % 32;
    if (warp >= planes) return; // whole warps leave together: blockDim is a multiple of 32
    const T *gp = dy + warp * hw, *xp = x + warp * hw;
    double acc = 0.0;
    for (size_t j = lane; j < hw; j += 32) acc += (double)vdnn_ld(gp[j]) * (double)vdnn_ld(xp[j]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) ds[warp] = vdnn_st<T>((float)acc);
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_act_fwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *y, const void *x,
                                           size_t n, float a, float b)
{
    if (!n) return cudaSuccess;
    VDNN_TYPED(t, T, k_act_fwd<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(act, (T *)y, (const T *)x, n, a, b));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_act_bwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *dx, const void *v,
                                           const void *dy, size_t n, float a, float b)
{
    if (!n) return cudaSuccess;
    VDNN_TYPED(t, T,
               k_act_bwd<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(act, (T *)dx, (const T *)v, (const T *)dy, n, a, b));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_chmul(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const void *scale,
                                         size_t planes, size_t hw)
{
    const size_t total = planes * hw;
    if (!total) return cudaSuccess;
    VDNN_TYPED(t, T,
               k_chmul<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, (const T *)scale, total, hw));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_chmul_scale_grad(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *dy,
                                                    const void *x, size_t planes, size_t hw)
{
    if (!planes) return cudaSuccess;
    const size_t warps_per_block = VDNN_THREADS / 32;
    const size_t blocks = (planes + warps_per_block - 1) / warps_per_block;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    VDNN_TYPED(t, T,
               k_chmul_scale_grad<T><<<(unsigned)blocks, VDNN_THREADS, 0, s>>>((T *)ds, (const T *)dy, (const T *)x,
                                                                               planes, hw));
    return cudaGetLastError();
}
