// CUDA kernels of the element-wise activations (sigmoid, hard-sigmoid, hard-swish, SiLU, clip, GELU) and of the
// per-channel scaling of squeeze-and-excitation. The formulas are PyTorch's; their slopes at the kinks too.
#include <math.h>

#include "cuda_kernels_layers.h"

#include "cuda_launch.cuh"

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

__global__ void k_act_fwd(vdnn_cuda_act k, float *y, const float *x, size_t n, float a, float b)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) y[i] = act_fwd(k, x[i], a, b);
}

__global__ void k_act_bwd(vdnn_cuda_act k, float *dx, const float *v, const float *dy, size_t n, float a, float b)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dx[i] = act_bwd(k, v[i], dy[i], a, b);
}

__global__ void k_chmul(float *y, const float *x, const float *scale, size_t total, size_t hw)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) y[i] = x[i] * scale[i / hw];
}

// One warp per plane, in double, as global average pooling.
__global__ void k_chmul_scale_grad(float *ds, const float *dy, const float *x, size_t planes, size_t hw)
{
    const size_t warp = vdnn_tid() / 32;
    const unsigned lane = threadIdx.x % 32;
    if (warp >= planes) return; // whole warps leave together: blockDim is a multiple of 32
    const float *gp = dy + warp * hw, *xp = x + warp * hw;
    double acc = 0.0;
    for (size_t j = lane; j < hw; j += 32) acc += (double)gp[j] * (double)xp[j];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) ds[warp] = (float)acc;
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_act_fwd(cudaStream_t s, vdnn_cuda_act act, float *y, const float *x, size_t n,
                                           float a, float b)
{
    if (!n) return cudaSuccess;
    k_act_fwd<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(act, y, x, n, a, b);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_act_bwd(cudaStream_t s, vdnn_cuda_act act, float *dx, const float *v,
                                           const float *dy, size_t n, float a, float b)
{
    if (!n) return cudaSuccess;
    k_act_bwd<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(act, dx, v, dy, n, a, b);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_chmul(cudaStream_t s, float *y, const float *x, const float *scale, size_t planes,
                                         size_t hw)
{
    const size_t total = planes * hw;
    if (!total) return cudaSuccess;
    k_chmul<<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(y, x, scale, total, hw);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_chmul_scale_grad(cudaStream_t s, float *ds, const float *dy, const float *x,
                                                    size_t planes, size_t hw)
{
    if (!planes) return cudaSuccess;
    const size_t warps_per_block = VDNN_THREADS / 32;
    const size_t blocks = (planes + warps_per_block - 1) / warps_per_block;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    k_chmul_scale_grad<<<(unsigned)blocks, VDNN_THREADS, 0, s>>>(ds, dy, x, planes, hw);
    return cudaGetLastError();
}
