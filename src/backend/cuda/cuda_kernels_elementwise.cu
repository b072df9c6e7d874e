// Element-wise CUDA kernels: fill, accumulate, scale, SGD, add, ReLU, dropout (with the counter-based mask of
// backend.h).
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

// ReLU keeps NaN (as cuDNN's CUDNN_PROPAGATE_NAN did); backward passes dy where y > 0, which is where x > 0.
__device__ __forceinline__ float relu1(float x) { return x > 0.0f || x != x ? x : 0.0f; }

__global__ void k_relu_fwd(float *y, const float *x, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) y[i] = relu1(x[i]);
}

__global__ void k_relu_fwd4(float4 *y, const float4 *x, size_t n4)
{
    for (size_t i = vdnn_tid(); i < n4; i += vdnn_nthreads()) {
        float4 v = x[i];
        y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}

__global__ void k_relu_bwd(float *dx, const float *y, const float *dy, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void k_relu_bwd4(float4 *dx, const float4 *y, const float4 *dy, size_t n4)
{
    for (size_t i = vdnn_tid(); i < n4; i += vdnn_nthreads()) {
        float4 a = y[i], g = dy[i];
        dx[i] = make_float4(a.x > 0.0f ? g.x : 0.0f, a.y > 0.0f ? g.y : 0.0f, a.z > 0.0f ? g.z : 0.0f,
                            a.w > 0.0f ? g.w : 0.0f);
    }
}

bool aligned16(const void *p) { return ((size_t)p & 15) == 0; }

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

extern "C" cudaError_t vdnn_cuda_k_relu_fwd(cudaStream_t s, float *y, const float *x, size_t n)
{
    if (!n) return cudaSuccess;
    // 16-byte loads where both ends allow them; the tail (n % 4) in plain floats.
    size_t n4 = aligned16(y) && aligned16(x) ? n / 4 : 0;
    if (n4) k_relu_fwd4<<<vdnn_blocks(n4), VDNN_THREADS, 0, s>>>((float4 *)y, (const float4 *)x, n4);
    if (n > 4 * n4) k_relu_fwd<<<vdnn_blocks(n - 4 * n4), VDNN_THREADS, 0, s>>>(y + 4 * n4, x + 4 * n4, n - 4 * n4);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_relu_bwd(cudaStream_t s, float *dx, const float *y, const float *dy, size_t n)
{
    if (!n) return cudaSuccess;
    size_t n4 = aligned16(dx) && aligned16(y) && aligned16(dy) ? n / 4 : 0;
    if (n4) k_relu_bwd4<<<vdnn_blocks(n4), VDNN_THREADS, 0, s>>>((float4 *)dx, (const float4 *)y, (const float4 *)dy, n4);
    if (n > 4 * n4)
        k_relu_bwd<<<vdnn_blocks(n - 4 * n4), VDNN_THREADS, 0, s>>>(dx + 4 * n4, y + 4 * n4, dy + 4 * n4, n - 4 * n4);
    return cudaGetLastError();
}
