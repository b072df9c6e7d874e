// Cross-channel LRN kernels for 16-bit maps (cuDNN's LRN runs the fp32 ones): one thread per value, float
// arithmetic, each window sum recomputed from x (a window is a handful of channels), so backward needs neither y
// nor scratch.
#include <math.h>

#include "cuda_kernels.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

// d_j = k + alpha/size * sum of x^2 over channel j's window, at one position (x points at channel 0 there).
template <typename T> __device__ float lrn_d(const T *x, const vdnn_cuda_lrn_geom &g, int j)
{
    const int h = g.size / 2, lo = j - h < 0 ? 0 : j - h, hi = j + h >= g.c ? g.c - 1 : j + h;
    float acc = 0.0f;
    for (int q = lo; q <= hi; q++) {
        const float v = vdnn_ld(x[(size_t)q * g.hw]);
        acc += v * v;
    }
    return g.k + g.alpha / (float)g.size * acc;
}

template <typename T> __global__ void k_lrn_fwd(T *y, const T *x, vdnn_cuda_lrn_geom g, size_t total)
{
    const size_t chw = (size_t)g.c * g.hw;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int c = (int)((i / g.hw) % (size_t)g.c);
        const T *x0 = x + (i / chw) * chw + i % g.hw;
        y[i] = vdnn_st<T>(vdnn_ld(x[i]) * powf(lrn_d(x0, g, c), -g.beta));
    }
}

// dx_c = dy_c d_c^-beta - 2 alpha beta / size * x_c * sum over the window of c of dy_j x_j d_j^(-beta-1)
// (an odd window is symmetric: c lies in j's window exactly when j lies in c's).
template <typename T> __global__ void k_lrn_bwd(T *dx, const T *x, const T *dy, vdnn_cuda_lrn_geom g, size_t total)
{
    const size_t chw = (size_t)g.c * g.hw;
    const int h = g.size / 2;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int c = (int)((i / g.hw) % (size_t)g.c);
        const size_t at = (i / chw) * chw + i % g.hw;
        const T *x0 = x + at, *dy0 = dy + at;
        const int lo = c - h < 0 ? 0 : c - h, hi = c + h >= g.c ? g.c - 1 : c + h;
        float acc = 0.0f;
        for (int j = lo; j <= hi; j++) {
            const float dj = lrn_d(x0, g, j);
            acc += vdnn_ld(dy0[(size_t)j * g.hw]) * vdnn_ld(x0[(size_t)j * g.hw]) * powf(dj, -g.beta - 1.0f);
        }
        const float dc = lrn_d(x0, g, c);
        const float f = 2.0f * g.alpha / (float)g.size * g.beta;
        dx[i] = vdnn_st<T>(vdnn_ld(dy[i]) * powf(dc, -g.beta) - f * vdnn_ld(x[i]) * acc);
    }
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_lrn_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x,
                                           vdnn_cuda_lrn_geom g)
{
    const size_t total = (size_t)g.n * (size_t)g.c * g.hw;
    if (!total) return cudaSuccess;
    if (g.size < 1 || g.size % 2 == 0) return cudaErrorInvalidValue;
    VDNN_TYPED(t, T, k_lrn_fwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, g, total));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_lrn_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *x, const void *dy,
                                           vdnn_cuda_lrn_geom g)
{
    const size_t total = (size_t)g.n * (size_t)g.c * g.hw;
    if (!total) return cudaSuccess;
    if (g.size < 1 || g.size % 2 == 0) return cudaErrorInvalidValue;
    VDNN_TYPED(t, T,
               k_lrn_bwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)dx, (const T *)x, (const T *)dy, g, total));
    return cudaGetLastError();
}
