// Element-wise CUDA kernels: fill, accumulate, scale, SGD, type conversion, add, ReLU, dropout (with the
// counter-based mask of backend.h). Kernels over maps are templates on the value type (cuda_types.cuh).
#include "cuda_kernels.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

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

// The CPU backend's AdamW expression by expression, each operation rounded on its own (no fused multiply-adds), so
// both backends give the same floats.
__global__ void k_adamw(float *w, const float *dw, float *m, float *v, size_t n, float decay, float beta1, float beta2,
                        float eps, float step_size, float bc2_sqrt)
{
    const float omb1 = 1.0f - beta1, omb2 = 1.0f - beta2;
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) {
        const float g = dw[i];
        const float wi = __fmul_rn(w[i], decay);
        const float mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(g, omb1));
        const float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(omb2, g), g));
        const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        m[i] = mi;
        v[i] = vi;
        w[i] = __fadd_rn(wi, __fmul_rn(-step_size, __fdiv_rn(mi, den)));
    }
}

// Every thread that sees a value that is not finite writes the same 1: no read-modify-write, so no race.
#define VDNN_SUMSQ_THREADS 1024

__global__ void k_nonfinite(unsigned *flag, const float *x, size_t n)
{
    bool bad = false;
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) bad |= !isfinite(x[i]);
    if (bad) *flag = 1u;
}

/* One block: each thread sums its strided share in double, then a fixed tree: the same x gives the same sum. */
__global__ void k_sum_squares(double *out, const float *x, size_t n)
{
    __shared__ double part[VDNN_SUMSQ_THREADS];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += (double)x[i] * (double)x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = part[0];
}

template <typename D, typename S> __global__ void k_convert(D *dst, const S *src, size_t n, int add)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads())
        dst[i] = vdnn_st<D>(add ? vdnn_ld(dst[i]) + vdnn_ld(src[i]) : vdnn_ld(src[i]));
}

template <typename T> struct add_inputs {
    const T *p[VDNN_CUDA_MAX_ADD];
};

template <typename T> __global__ void k_add(T *y, add_inputs<T> x, int k, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) {
        float s = vdnn_ld(x.p[0][i]);
        for (int j = 1; j < k; j++) s += vdnn_ld(x.p[j][i]);
        y[i] = vdnn_st<T>(s);
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

template <typename T> __global__ void k_dropout(T *out, const T *in, size_t n, uint64_t seed, float p, float scale)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads())
        out[i] = vdnn_st<T>(dropout_keep(seed, (uint64_t)i, p) ? vdnn_ld(in[i]) * scale : 0.0f);
}

__global__ void k_dropout_mask(unsigned char *mask, size_t n, uint64_t seed, float p)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) mask[i] = dropout_keep(seed, (uint64_t)i, p) ? 1 : 0;
}

// ReLU keeps NaN (as cuDNN's CUDNN_PROPAGATE_NAN did); backward passes dy where y > 0, which is where x > 0.
__device__ __forceinline__ float relu1(float x) { return x > 0.0f || x != x ? x : 0.0f; }

// The value itself or a zero: nothing is rounded, whatever the type.
template <typename T> __device__ __forceinline__ T relu1_t(T x)
{
    const float v = vdnn_ld(x);
    return v > 0.0f || v != v ? x : vdnn_st<T>(0.0f);
}

template <typename T> __global__ void k_relu_fwd(T *y, const T *x, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) y[i] = relu1_t(x[i]);
}

__global__ void k_relu_fwd4(float4 *y, const float4 *x, size_t n4)
{
    for (size_t i = vdnn_tid(); i < n4; i += vdnn_nthreads()) {
        float4 v = x[i];
        y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}

template <typename T> __global__ void k_relu_bwd(T *dx, const T *y, const T *dy, size_t n)
{
    for (size_t i = vdnn_tid(); i < n; i += vdnn_nthreads()) dx[i] = vdnn_ld(y[i]) > 0.0f ? dy[i] : vdnn_st<T>(0.0f);
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

// The destination type is bound first, then the source type.
template <typename D> static cudaError_t convert_to(cudaStream_t s, D *dst, const void *src, vdnn_cuda_type st,
                                                   size_t n, int add)
{
    VDNN_TYPED(st, S, k_convert<D, S><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(dst, (const S *)src, n, add));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_convert(cudaStream_t s, void *dst, vdnn_cuda_type dt, const void *src,
                                           vdnn_cuda_type st, size_t n, int add)
{
    if (!n) return cudaSuccess;
    cudaError_t e = cudaSuccess;
    VDNN_TYPED(dt, D, e = convert_to<D>(s, (D *)dst, src, st, n, add));
    return e;
}

extern "C" cudaError_t vdnn_cuda_k_add(cudaStream_t s, vdnn_cuda_type t, void *y, const void *const *x, int k,
                                       size_t n)
{
    if (k < 1 || k > VDNN_CUDA_MAX_ADD) return cudaErrorInvalidValue;
    if (!n) return cudaSuccess;
    VDNN_TYPED(t, T, {
        add_inputs<T> in = {};
        for (int j = 0; j < k; j++) in.p[j] = (const T *)x[j];
        k_add<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>((T *)y, in, k, n);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_dropout(cudaStream_t s, vdnn_cuda_type t, void *out, const void *in, size_t n,
                                           uint64_t seed, float p, float scale)
{
    if (!n) return cudaSuccess;
    VDNN_TYPED(t, T, k_dropout<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>((T *)out, (const T *)in, n, seed, p, scale));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_dropout_mask(cudaStream_t s, unsigned char *mask, size_t n, uint64_t seed, float p)
{
    if (!n) return cudaSuccess;
    k_dropout_mask<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(mask, n, seed, p);
    return cudaGetLastError();
}

static cudaError_t relu_fwd_f32(cudaStream_t s, float *y, const float *x, size_t n)
{
    // 16-byte loads where both ends allow them; the tail (n % 4) in plain floats.
    size_t n4 = aligned16(y) && aligned16(x) ? n / 4 : 0;
    if (n4) k_relu_fwd4<<<vdnn_blocks(n4), VDNN_THREADS, 0, s>>>((float4 *)y, (const float4 *)x, n4);
    if (n > 4 * n4)
        k_relu_fwd<float><<<vdnn_blocks(n - 4 * n4), VDNN_THREADS, 0, s>>>(y + 4 * n4, x + 4 * n4, n - 4 * n4);
    return cudaGetLastError();
}

static cudaError_t relu_bwd_f32(cudaStream_t s, float *dx, const float *y, const float *dy, size_t n)
{
    size_t n4 = aligned16(dx) && aligned16(y) && aligned16(dy) ? n / 4 : 0;
    if (n4) k_relu_bwd4<<<vdnn_blocks(n4), VDNN_THREADS, 0, s>>>((float4 *)dx, (const float4 *)y, (const float4 *)dy, n4);
    if (n > 4 * n4)
        k_relu_bwd<float><<<vdnn_blocks(n - 4 * n4), VDNN_THREADS, 0, s>>>(dx + 4 * n4, y + 4 * n4, dy + 4 * n4,
                                                                           n - 4 * n4);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_relu_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, size_t n)
{
    if (!n) return cudaSuccess;
    if (t == VDNN_CUDA_F32) return relu_fwd_f32(s, (float *)y, (const float *)x, n);
    VDNN_TYPED(t, T, k_relu_fwd<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, n));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_relu_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *y, const void *dy,
                                            size_t n)
{
    if (!n) return cudaSuccess;
    if (t == VDNN_CUDA_F32) return relu_bwd_f32(s, (float *)dx, (const float *)y, (const float *)dy, n);
    VDNN_TYPED(t, T, k_relu_bwd<T><<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>((T *)dx, (const T *)y, (const T *)dy, n));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_adamw(cudaStream_t s, float *w, const float *dw, float *m, float *v, size_t n,
                                         float decay, float beta1, float beta2, float eps, float step_size,
                                         float bc2_sqrt)
{
    if (!n) return cudaSuccess;
    k_adamw<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(w, dw, m, v, n, decay, beta1, beta2, eps, step_size, bc2_sqrt);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_sum_squares(cudaStream_t s, double *out, const float *x, size_t n)
{
    k_sum_squares<<<1, VDNN_SUMSQ_THREADS, 0, s>>>(out, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_nonfinite(cudaStream_t s, unsigned *flag, const float *x, size_t n)
{
    if (!n) return cudaSuccess;
    k_nonfinite<<<vdnn_blocks(n), VDNN_THREADS, 0, s>>>(flag, x, n);
    return cudaGetLastError();
}
