// CUDA kernels for average pooling's backward pass and for softmax with cross-entropy loss, over maps of any value
// type (cuda_types.cuh).
#include <math.h>

#include "cuda_kernels.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

// Each input element gathers the output gradients of the windows that cover it: no atomics, one writer
// per element, the same sum every run.
template <typename T> __global__ void k_avgpool_bwd(T *dx, const T *dy, vdnn_cuda_pool_geom g, size_t total)
{
    const float area = (float)(g.kh * g.kw);
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int iw = (int)(i % (size_t)g.w);
        const int ih = (int)((i / (size_t)g.w) % (size_t)g.h);
        const size_t plane = i / ((size_t)g.w * (size_t)g.h);
        // Window oh covers rows oh*sh - ph .. oh*sh - ph + kh - 1.
        const int ys = ih + g.ph, xs = iw + g.pw;
        const int oh0 = ys < g.kh ? 0 : (ys - g.kh) / g.sh + 1;
        const int ow0 = xs < g.kw ? 0 : (xs - g.kw) / g.sw + 1;
        const int oh1 = min(ys / g.sh, g.oh - 1), ow1 = min(xs / g.sw, g.ow - 1);
        const T *dyp = dy + plane * (size_t)g.oh * (size_t)g.ow;
        float s = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) s += vdnn_ld(dyp[(size_t)oh * g.ow + ow]);
        dx[i] = vdnn_st<T>(s / area);
    }
}

// log(sum exp) of one row of k values, from its maximum (one block per row; every thread gets it).
template <typename T> __device__ double row_lse(const T *xr, int k)
{
    __shared__ double shd[VDNN_THREADS];
    __shared__ float shf[VDNN_THREADS];
    float m = -INFINITY;
    for (int c = threadIdx.x; c < k; c += VDNN_THREADS) m = fmaxf(m, vdnn_ld(xr[c]));
    m = vdnn_block_max(m, shf);
    double acc = 0.0;
    for (int c = threadIdx.x; c < k; c += VDNN_THREADS) acc += exp((double)vdnn_ld(xr[c]) - (double)m);
    return (double)m + log(vdnn_block_sum(acc, shd));
}

// One block per row. Mirrors the CPU backend: max, sum of exp in double, lse = max + log(sum),
// y = exp(x - lse), loss = lse - x[label].
template <typename T>
__global__ void k_softmax_xent_fwd(T *y, const T *x, const int32_t *labels, double *per_sample, int k)
{
    const size_t row = blockIdx.x;
    const T *xr = x + row * (size_t)k;
    T *yr = y + row * (size_t)k;
    const double lse = row_lse(xr, k);
    if (per_sample && threadIdx.x == 0) {
        const int32_t lab = labels[row];
        per_sample[row] = lab >= 0 && lab < k ? lse - (double)vdnn_ld(xr[lab]) : (double)NAN;
    }
    __syncthreads(); // x[label] is read before any thread overwrites it when y aliases x
    for (int c = threadIdx.x; c < k; c += VDNN_THREADS) yr[c] = vdnn_st<T>((float)exp((double)vdnn_ld(xr[c]) - lse));
}

// From the logits: the float softmax of the forward pass, minus the one-hot label, over n; rounded once.
template <typename T>
__global__ void k_softmax_xent_bwd_logits(T *dx, const T *x, const int32_t *labels, int n, int k, float scale)
{
    const size_t row = blockIdx.x;
    const T *xr = x + row * (size_t)k;
    T *dr = dx + row * (size_t)k;
    const double lse = row_lse(xr, k);
    const int32_t lab = labels[row];
    const float inv_n = (1.0f / (float)n) * scale;
    for (int c = threadIdx.x; c < k; c += VDNN_THREADS) {
        const float y = (float)exp((double)vdnn_ld(xr[c]) - lse);
        dr[c] = lab < 0 || lab >= k ? vdnn_st<T>(NAN) : vdnn_st<T>((y - (c == lab ? 1.0f : 0.0f)) * inv_n);
    }
}

__global__ void k_mean_loss(float *loss, const double *per, int n)
{
    __shared__ double sh[VDNN_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += VDNN_THREADS) acc += per[i];
    double s = vdnn_block_sum(acc, sh);
    if (threadIdx.x == 0) *loss = (float)(s / (double)n);
}

__global__ void k_softmax_xent_bwd(float *dx, const float *y, const int32_t *labels, int n, int k, float scale)
{
    const size_t total = (size_t)n * (size_t)k;
    const float inv_n = (1.0f / (float)n) * scale;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int row = (int)(i / (size_t)k), c = (int)(i % (size_t)k);
        const int32_t lab = labels[row];
        if (lab < 0 || lab >= k) dx[i] = NAN;
        else dx[i] = (y[i] - (c == lab ? 1.0f : 0.0f)) * inv_n;
    }
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_avgpool_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *dy,
                                               vdnn_cuda_pool_geom g)
{
    size_t total = (size_t)g.n * (size_t)g.c * (size_t)g.h * (size_t)g.w;
    if (!total) return cudaSuccess;
    if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1) return cudaErrorInvalidValue;
    VDNN_TYPED(t, T, k_avgpool_bwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)dx, (const T *)dy, g, total));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_softmax_xent_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x,
                                                    const int32_t *labels, double *per_sample, int n, int k)
{
    if (n <= 0 || k <= 0) return cudaSuccess;
    VDNN_TYPED(t, T,
               k_softmax_xent_fwd<T><<<(unsigned)n, VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, labels, per_sample, k));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_softmax_xent_bwd_logits(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *x,
                                                           const int32_t *labels, int n, int k, float scale)
{
    if (n <= 0 || k <= 0) return cudaSuccess;
    VDNN_TYPED(t, T,
               k_softmax_xent_bwd_logits<T><<<(unsigned)n, VDNN_THREADS, 0, s>>>((T *)dx, (const T *)x, labels, n, k,
                                                                                scale));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_mean_loss(cudaStream_t s, float *loss, const double *per_sample, int n)
{
    if (n <= 0) return cudaSuccess;
    k_mean_loss<<<1, VDNN_THREADS, 0, s>>>(loss, per_sample, n);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_softmax_xent_bwd(cudaStream_t s, float *dx, const float *y, const int32_t *labels,
                                                    int n, int k, float scale)
{
    size_t total = (size_t)n * (size_t)k;
    if (n <= 0 || k <= 0) return cudaSuccess;
    k_softmax_xent_bwd<<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(dx, y, labels, n, k, scale);
    return cudaGetLastError();
}
