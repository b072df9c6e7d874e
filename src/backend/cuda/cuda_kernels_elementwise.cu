// Element-wise CUDA kernels: fill, accumulate, scale, SGD, add, dropout (with the counter-based mask of backend.h).
#include "cuda_kernels.h"

#include "cuda_launch.cuh"

namespace {

__global__ void k_fill(float *dst, float value, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dst[i] = value;
}

__global__ void k_accumulate(float *dst, const float *src, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dst[i] += src[i];
}

__global__ void k_scale(float *dst, float alpha, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dst[i] *= alpha;
}

__global__ void k_sgd(float *w, const float *dw, float *v, size_t n, float lr, float momentum, float wd)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) {
        float g = dw[i] + wd * w[i];
        float vi = momentum * v[i] + g;
        v[i] = vi;
        w[i] -= lr * vi;
    }
}

struct add_inputs {
    const float *p[VDNN_CUDA_MAX_ADD];
};

__global__ void k_add(float *y, add_inputs x, int k, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) {
        float s = x.p[0][i];
        for (int j = 1; j < k; j++) s += x.p[j][i];
        y[i] = s;
    }
}

// The same arithmetic as vdnn_mix64 / vdnn_dropout_keep in backend.h (a host-only static inline function,
// so it cannot be called here). Every step is exact integer or power-of-two arithmetic, so the device
// mask equals the host mask bit for bit; test_cuda checks this.
__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ bool dropout_keep(uint64_t seed, uint64_t i, float p)
{
    uint64_t r = mix64(seed ^ mix64(i));
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
    return u >= (double)p;
}

__global__ void k_dropout(float *out, const float *in, size_t n, uint64_t seed, float p, float scale)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads())
        out[i] = dropout_keep(seed, (uint64_t)i, p) ? in[i] * scale : 0.0f;
}

__global__ void k_dropout_mask(unsigned char *mask, size_t n, uint64_t seed, float p)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) mask[i] = dropout_keep(seed, (uint64_t)i, p) ? 1 : 0;
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_probe(void)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, k_fill);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
}

extern "C" cudaError_t vdnn_cuda_k_fill(cudaStream_t s, float *dst, float value, size_t n)
{
    if (!n) return cudaSuccess;
    k_fill<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(dst, value, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_accumulate(cudaStream_t s, float *dst, const float *src, size_t n)
{
    if (!n) return cudaSuccess;
    k_accumulate<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_scale(cudaStream_t s, float *dst, float alpha, size_t n)
{
    if (!n) return cudaSuccess;
    k_scale<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(dst, alpha, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_sgd(cudaStream_t s, float *w, const float *dw, float *v, size_t n, float lr,
                                       float momentum, float weight_decay)
{
    if (!n) return cudaSuccess;
    k_sgd<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(w, dw, v, n, lr, momentum, weight_decay);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_add(cudaStream_t s, float *y, const float *const *x, int k, size_t n)
{
    if (k < 1 || k > VDNN_CUDA_MAX_ADD) return cudaErrorInvalidValue;
    if (!n) return cudaSuccess;
    add_inputs in = {};
    for (int j = 0; j < k; j++) in.p[j] = x[j];
    k_add<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(y, in, k, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_dropout(cudaStream_t s, float *out, const float *in, size_t n, uint64_t seed,
                                           float p, float scale)
{
    if (!n) return cudaSuccess;
    k_dropout<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(out, in, n, seed, p, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_dropout_mask(cudaStream_t s, unsigned char *mask, size_t n, uint64_t seed, float p)
{
    if (!n) return cudaSuccess;
    k_dropout_mask<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(mask, n, seed, p);
    return cudaGetLastError();
}
