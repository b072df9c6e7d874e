// CUDA kernels of pooling by PyTorch's window rules, for what cuDNN's symmetric pooling cannot express: ceil_mode's
// last window clipped at the border, averages that leave padding out of their divisor. The loops mirror the CPU
// backend's (cpu_ops_pool_windows.c) in their order of additions, so the two agree to the bit. Maps of any type,
// summed in float and rounded once.
#include <math.h>

#include "cuda_kernels_layers.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

// Window o along one axis: [lo, hi) of the input, and its extent within the padded input (ending at in + pad).
__device__ __forceinline__ void span(int o, int in, int k, int stride, int pad, int *lo, int *hi, int *size)
{
    const int start = o * stride - pad, end = min(start + k, in + pad);
    *size = end - start;
    *lo = max(start, 0);
    *hi = min(end, in);
}

__device__ __forceinline__ float divisor(int hlo, int hhi, int hsize, int wlo, int whi, int wsize, int exclude_pad)
{
    return (float)(exclude_pad ? (hhi - hlo) * (whi - wlo) : hsize * wsize);
}

template <typename T>
__global__ void k_pool_win_fwd(int max, T *y, int32_t *argmax, const T *x, vdnn_cuda_pool_geom g, int exclude_pad,
                               size_t total)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int ow = (int)(i % (size_t)g.ow), oh = (int)((i / (size_t)g.ow) % (size_t)g.oh);
        const size_t plane = i / ((size_t)g.ow * (size_t)g.oh);
        const T *xp = x + plane * (size_t)g.h * (size_t)g.w;
        int hlo, hhi, hsize, wlo, whi, wsize;
        span(oh, g.h, g.kh, g.sh, g.ph, &hlo, &hhi, &hsize);
        span(ow, g.w, g.kw, g.sw, g.pw, &wlo, &whi, &wsize);
        float acc = max ? -INFINITY : 0.0f;
        int best = hlo * g.w + wlo;
        for (int ih = hlo; ih < hhi; ih++)
            for (int iw = wlo; iw < whi; iw++) {
                const float v = vdnn_ld(xp[(size_t)ih * g.w + iw]);
                // PyTorch's rule: the first maximum wins, a NaN wins over any number.
                if (!max) acc += v;
                else if (v > acc || isnan(v)) acc = v, best = ih * g.w + iw;
            }
        if (max) {
            y[i] = vdnn_st<T>(acc);
            if (argmax) argmax[i] = best;
        } else {
            y[i] = vdnn_st<T>(acc / divisor(hlo, hhi, hsize, wlo, whi, wsize, exclude_pad));
        }
    }
}

// Window oh covers input rows oh*sh - ph .. oh*sh - ph + kh - 1: input ih is read by oh0..oh1.
template <typename T>
__global__ void k_pool_win_bwd(int max, T *dx, const T *dy, const int32_t *argmax, vdnn_cuda_pool_geom g,
                               int exclude_pad, size_t total)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const int iw = (int)(i % (size_t)g.w), ih = (int)((i / (size_t)g.w) % (size_t)g.h);
        const size_t plane = i / ((size_t)g.w * (size_t)g.h);
        const int ys = ih + g.ph, xs = iw + g.pw;
        const int oh0 = ys < g.kh ? 0 : (ys - g.kh) / g.sh + 1, oh1 = min(ys / g.sh, g.oh - 1);
        const int ow0 = xs < g.kw ? 0 : (xs - g.kw) / g.sw + 1, ow1 = min(xs / g.sw, g.ow - 1);
        const size_t base = plane * (size_t)g.oh * (size_t)g.ow;
        const int self = ih * g.w + iw;
        float s = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++) {
            int hlo, hhi, hsize, wlo, whi, wsize;
            span(oh, g.h, g.kh, g.sh, g.ph, &hlo, &hhi, &hsize);
            for (int ow = ow0; ow <= ow1; ow++) {
                const size_t o = base + (size_t)oh * g.ow + ow;
                if (max) {
                    if (argmax[o] == self) s += vdnn_ld(dy[o]);
                    continue;
                }
                span(ow, g.w, g.kw, g.sw, g.pw, &wlo, &whi, &wsize);
                s += vdnn_ld(dy[o]) / divisor(hlo, hhi, hsize, wlo, whi, wsize, exclude_pad);
            }
        }
        dx[i] = vdnn_st<T>(s);
    }
}

bool geom_ok(const vdnn_cuda_pool_geom &g)
{
    return g.kh >= 1 && g.kw >= 1 && g.sh >= 1 && g.sw >= 1 && g.ph >= 0 && g.pw >= 0 && g.oh >= 1 && g.ow >= 1;
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_pool_win_fwd(cudaStream_t s, vdnn_cuda_type t, int max, void *y, int32_t *argmax,
                                                const void *x, vdnn_cuda_pool_geom g, int exclude_pad)
{
    const size_t total = (size_t)g.n * (size_t)g.c * (size_t)g.oh * (size_t)g.ow;
    if (!total) return cudaSuccess;
    if (!geom_ok(g)) return cudaErrorInvalidValue;
    VDNN_TYPED(t, T,
               k_pool_win_fwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(max, (T *)y, argmax, (const T *)x, g,
                                                                             exclude_pad, total));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_pool_win_bwd(cudaStream_t s, vdnn_cuda_type t, int max, void *dx, const void *dy,
                                                const int32_t *argmax, vdnn_cuda_pool_geom g, int exclude_pad)
{
    const size_t total = (size_t)g.n * (size_t)g.c * (size_t)g.h * (size_t)g.w;
    if (!total) return cudaSuccess;
    if (!geom_ok(g) || (max && !argmax)) return cudaErrorInvalidValue;
    VDNN_TYPED(t, T,
               k_pool_win_bwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(max, (T *)dx, (const T *)dy, argmax, g,
                                                                             exclude_pad, total));
    return cudaGetLastError();
}
