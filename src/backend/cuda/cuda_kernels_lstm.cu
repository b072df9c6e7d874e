// CUDA kernels of the LSTM ops (fp32; written without a GPU, never run on one): the pointwise part of a step forward
// and backward and seq_cat's row copies. The arithmetic is the CPU backend's (cpu_ops_lstm.c) expression by
// expression; every value has one writer, so results repeat bit for bit whatever the memory policy.
#include <math.h>

#include "cuda_kernels_lstm.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

__device__ __forceinline__ float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void k_bias(float *g, const float *bih, const float *bhh, size_t total, int h4)
{
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const int j = (int)(e % (size_t)h4);
        g[e] = bih[j] + bhh[j];
    }
}

__global__ void k_cell_fwd(float *g, float *y, long long ld_y, const float *cp, long long ld_cp, float *m, int b,
                           int h, int p)
{
    const size_t total = (size_t)b * (size_t)h;
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        float *gr = g + i * 4 * (size_t)h;
        const float gi = sigm(gr[j]), gf = sigm(gr[h + j]), gg = tanhf(gr[2 * h + j]), go = sigm(gr[3 * h + j]);
        gr[j] = gi, gr[h + j] = gf, gr[2 * h + j] = gg, gr[3 * h + j] = go;
        float *yr = y + (long long)i * ld_y;
        const float c_prev = cp ? cp[(long long)i * ld_cp + j] : 0.0f;
        const float c = gf * c_prev + gi * gg;
        yr[p + j] = c;
        const float out = go * tanhf(c);
        if (m) m[e] = out;
        else yr[j] = out;
    }
}

__global__ void k_dh(float *dh, const float *dy, long long ld_dy, const float *dhr, int b, int p)
{
    const size_t total = (size_t)b * (size_t)p;
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const size_t i = e / (size_t)p, j = e % (size_t)p;
        dh[e] = dy[(long long)i * ld_dy + (long long)j] + dhr[e];
    }
}

__global__ void k_m(float *m, const float *g, const float *y, long long ld_y, int b, int h, int p)
{
    const size_t total = (size_t)b * (size_t)h;
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        m[e] = g[i * 4 * (size_t)h + 3 * (size_t)h + j] * tanhf(y[(long long)i * ld_y + p + j]);
    }
}

__global__ void k_cell_bwd(float *dg, const float *g, const float *y, long long ld_y, const float *dy, long long ld_dy,
                           const float *cp, long long ld_cp, const float *dm, float *dcc, int b, int h, int p)
{
    const size_t total = (size_t)b * (size_t)h;
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        const float *gr = g + i * 4 * (size_t)h;
        float *o = dg + i * 4 * (size_t)h;
        const float gi = gr[j], gf = gr[h + j], gg = gr[2 * h + j], go = gr[3 * h + j];
        const float c = y[(long long)i * ld_y + p + j], tc = tanhf(c);
        const float dyc = dy[(long long)i * ld_dy + p + j];
        const float dme = dm[e];
        const float dc = dyc + dcc[e] + dme * go * (1.0f - tc * tc);
        const float c_prev = cp ? cp[(long long)i * ld_cp + j] : 0.0f;
        o[j] = dc * gg * gi * (1.0f - gi);
        o[h + j] = dc * c_prev * gf * (1.0f - gf);
        o[2 * h + j] = dc * gi * (1.0f - gg * gg);
        o[3 * h + j] = dme * tc * go * (1.0f - go);
        dcc[e] = dc * gf;
    }
}

template <typename T>
__global__ void k_rows_copy(T *dst, long long ld_dst, long long batch_dst, int dst_w, const T *src, long long ld_src,
                            long long batch_src, int n, int t, int cols)
{
    const size_t total = (size_t)n * (size_t)t * (size_t)dst_w;
    for (size_t e = vdnn_tid(); e < total; e += vdnn_nthreads()) {
        const long long j = (long long)(e % (size_t)dst_w), r = (long long)(e / (size_t)dst_w);
        const long long k = r / t, s = r % t;
        dst[k * batch_dst + s * ld_dst + j] = j < cols ? src[k * batch_src + s * ld_src + j] : vdnn_st<T>(0.0f);
    }
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_lstm_bias(cudaStream_t s, float *g, const float *bih, const float *bhh, size_t rows,
                                             int h4)
{
    const size_t total = rows * (size_t)h4;
    k_bias<<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(g, bih, bhh, total, h4);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_lstm_cell_fwd(cudaStream_t s, float *g, float *y, long long ld_y, const float *cp,
                                                 long long ld_cp, float *m, int b, int h, int p)
{
    k_cell_fwd<<<vdnn_blocks((size_t)b * (size_t)h), VDNN_THREADS, 0, s>>>(g, y, ld_y, cp, ld_cp, m, b, h, p);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_lstm_dh(cudaStream_t s, float *dh, const float *dy, long long ld_dy,
                                           const float *dhr, int b, int p)
{
    k_dh<<<vdnn_blocks((size_t)b * (size_t)p), VDNN_THREADS, 0, s>>>(dh, dy, ld_dy, dhr, b, p);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_lstm_m(cudaStream_t s, float *m, const float *g, const float *y, long long ld_y,
                                          int b, int h, int p)
{
    k_m<<<vdnn_blocks((size_t)b * (size_t)h), VDNN_THREADS, 0, s>>>(m, g, y, ld_y, b, h, p);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_lstm_cell_bwd(cudaStream_t s, float *dg, const float *g, const float *y,
                                                 long long ld_y, const float *dy, long long ld_dy, const float *cp,
                                                 long long ld_cp, const float *dm, float *dcc, int b, int h, int p)
{
    k_cell_bwd<<<vdnn_blocks((size_t)b * (size_t)h), VDNN_THREADS, 0, s>>>(dg, g, y, ld_y, dy, ld_dy, cp, ld_cp, dm,
                                                                            dcc, b, h, p);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_rows_copy(cudaStream_t s, vdnn_cuda_type type, void *dst, long long ld_dst,
                                             long long batch_dst, int dst_w, const void *src, long long ld_src,
                                             long long batch_src, int n, int t, int cols)
{
    const size_t total = (size_t)n * (size_t)t * (size_t)dst_w;
    if (!total) return cudaSuccess;
    VDNN_TYPED(type, T,
               k_rows_copy<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)dst, ld_dst, batch_dst, dst_w,
                                                                          (const T *)src, ld_src, batch_src, n, t,
                                                                          cols));
    return cudaGetLastError();
}
