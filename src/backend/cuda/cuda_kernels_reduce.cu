// Per-channel and per-plane CUDA kernels: bias add and gradient, global average pooling, batch norm's
// parameter gradients. Sums run in double and in a fixed order, so results repeat bit for bit. Maps are of any
// value type (cuda_types.cuh); biases, gradients and statistics are float.
#include "cuda_kernels.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

template <typename T> __global__ void k_bias_add(T *y, const float *b, int c, size_t hw, size_t total)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) y[i] = vdnn_st<T>(vdnn_ld(y[i]) + b[(i / hw) % (size_t)c]);
}

// One warp per plane.
template <typename T> __global__ void k_gap_fwd(T *y, const T *x, size_t planes, size_t hw)
{
    const size_t warp = vdnn_tid() / 32;
    const unsigned lane = threadIdx.x % 32;
    if (warp >= planes) return; // whole warps leave together: blockDim is a multiple of 32
    const T *xp = x + warp * hw;
    double acc = 0.0;
    for (size_t j = lane; j < hw; j += 32) acc += (double)vdnn_ld(xp[j]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[warp] = vdnn_st<T>((float)(acc / (double)hw));
}

template <typename T> __global__ void k_gap_bwd(T *dx, const T *dy, size_t total, size_t hw)
{
    const float inv = (float)hw;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) dx[i] = vdnn_st<T>(vdnn_ld(dy[i / hw]) / inv);
}

// Per-channel sums that fill the device: pass 1 gives each (split, channel) its own block, which adds one
// contiguous range of the channel's n*hw values (walked row by row, so no division per element) into a partial;
// pass 2 adds a channel's partials in split order. The split count depends on the shape alone, so the order of
// every addition, and the result, repeat bit for bit.
struct vdnn_sum_geom {
    int n, c;
    size_t hw;
    int splits;
};

// Sums of dy (and of dy*(x-mean) when x is given) over split s of channel ch.
template <typename T>
__device__ void split_sums(const vdnn_sum_geom g, int s, int ch, const T *dy, const T *x, double m, double *s1,
                           double *s2)
{
    const size_t per = (size_t)g.n * g.hw;
    const size_t len = (per + (size_t)g.splits - 1) / (size_t)g.splits;
    size_t t = (size_t)s * len, end = t + len < per ? t + len : per;
    double a1 = 0.0, a2 = 0.0;
    while (t < end) {
        const size_t ni = t / g.hw, j0 = t % g.hw;
        const size_t seg = g.hw - j0 < end - t ? g.hw - j0 : end - t;
        const size_t base = (ni * (size_t)g.c + (size_t)ch) * g.hw + j0;
        for (size_t j = threadIdx.x; j < seg; j += VDNN_THREADS) {
            const double v = (double)vdnn_ld(dy[base + j]);
            a1 += v;
            if (x) a2 += v * ((double)vdnn_ld(x[base + j]) - m);
        }
        t += seg;
    }
    *s1 = a1;
    *s2 = a2;
}

template <typename T>
__global__ void k_sum_partials(double *part, const T *dy, const T *x, const float *mean, vdnn_sum_geom g)
{
    __shared__ double sh[VDNN_THREADS];
    const int s = blockIdx.x, ch = blockIdx.y;
    double a1, a2;
    split_sums(g, s, ch, dy, x, x ? (double)mean[ch] : 0.0, &a1, &a2);
    a1 = vdnn_block_sum(a1, sh);
    if (x) a2 = vdnn_block_sum(a2, sh);
    if (threadIdx.x == 0) {
        part[(size_t)ch * (size_t)g.splits + (size_t)s] = a1;
        if (x) part[(size_t)(g.c + ch) * (size_t)g.splits + (size_t)s] = a2;
    }
}

// Small planes (hw below a warp, as after a fully connected layer): threads take channels, blocks take row ranges.
template <typename T>
__global__ void k_sum_partials_rows(double *part, const T *dy, const T *x, const float *mean, vdnn_sum_geom g)
{
    const int s = blockIdx.x;
    const int ch = blockIdx.y * VDNN_THREADS + threadIdx.x;
    if (ch >= g.c) return;
    const int len = (g.n + g.splits - 1) / g.splits;
    const int r0 = s * len, r1 = r0 + len < g.n ? r0 + len : g.n;
    const double m = x ? (double)mean[ch] : 0.0;
    double a1 = 0.0, a2 = 0.0;
    for (int r = r0; r < r1; r++)
        for (size_t j = 0; j < g.hw; j++) {
            const size_t i = ((size_t)r * (size_t)g.c + (size_t)ch) * g.hw + j;
            const double v = (double)vdnn_ld(dy[i]);
            a1 += v;
            if (x) a2 += v * ((double)vdnn_ld(x[i]) - m);
        }
    part[(size_t)ch * (size_t)g.splits + (size_t)s] = a1;
    if (x) part[(size_t)(g.c + ch) * (size_t)g.splits + (size_t)s] = a2;
}

// out1[ch] = sum of the partials of ch; out2[ch] (when given) = sum of the second partials * scale[ch].
__global__ void k_sum_finish(float *out1, float *out2, const double *part, const float *scale, int c, int splits)
{
    const int ch = blockIdx.x * VDNN_THREADS + threadIdx.x;
    if (ch >= c) return;
    double a1 = 0.0, a2 = 0.0;
    for (int s = 0; s < splits; s++) {
        a1 += part[(size_t)ch * (size_t)splits + (size_t)s];
        if (out2) a2 += part[(size_t)(c + ch) * (size_t)splits + (size_t)s];
    }
    out1[ch] = (float)a1;
    if (out2) out2[ch] = (float)(a2 * (double)scale[ch]);
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_bias_add(cudaStream_t s, vdnn_cuda_type t, void *y, const float *b, int n, int c,
                                            size_t hw)
{
    size_t total = (size_t)n * (size_t)c * hw;
    if (!total) return cudaSuccess;
    VDNN_TYPED(t, T, k_bias_add<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)y, b, c, hw, total));
    return cudaGetLastError();
}

// Launches the two passes; `sums` is 1 (bias) or 2 (batch norm), the partials need sums*c*splits doubles of
// `scratch` (scratch_bytes in all).
template <typename T>
static cudaError_t channel_sums(cudaStream_t st, double *scratch, size_t scratch_bytes, float *out1, float *out2,
                                const T *dy, const T *x, const float *mean, const float *scale, int n, int c, size_t hw,
                                int sums)
{
    if (c <= 0) return cudaSuccess;
    const bool rows = hw < 32;
    const int sp = vdnn_cuda_sum_splits(n, c, hw, sums, scratch_bytes);
    if (sp < 1) return cudaErrorInvalidValue;
    vdnn_sum_geom g = {n, c, hw, sp};
    if (rows) {
        dim3 grid((unsigned)sp, (unsigned)((c + VDNN_THREADS - 1) / VDNN_THREADS));
        k_sum_partials_rows<T><<<grid, VDNN_THREADS, 0, st>>>(scratch, dy, x, mean, g);
    } else {
        dim3 grid((unsigned)sp, (unsigned)c);
        k_sum_partials<T><<<grid, VDNN_THREADS, 0, st>>>(scratch, dy, x, mean, g);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    k_sum_finish<<<(unsigned)((c + VDNN_THREADS - 1) / VDNN_THREADS), VDNN_THREADS, 0, st>>>(out1, out2, scratch, scale,
                                                                                           c, sp);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_bias_grad(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes,
                                             float *db, const void *dy, int n, int c, size_t hw)
{
    cudaError_t e = cudaSuccess;
    VDNN_TYPED(t, T,
               e = channel_sums<T>(s, scratch, scratch_bytes, db, NULL, (const T *)dy, NULL, NULL, NULL, n, c, hw, 1));
    return e;
}

extern "C" cudaError_t vdnn_cuda_k_gap_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, size_t planes,
                                           size_t hw)
{
    if (!planes) return cudaSuccess;
    const size_t warps_per_block = VDNN_THREADS / 32;
    size_t blocks = (planes + warps_per_block - 1) / warps_per_block;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    VDNN_TYPED(t, T, k_gap_fwd<T><<<(unsigned)blocks, VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, planes, hw));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_gap_bwd(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *dy, size_t planes,
                                           size_t hw)
{
    size_t total = planes * hw;
    if (!total) return cudaSuccess;
    VDNN_TYPED(t, T, k_gap_bwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)dx, (const T *)dy, total, hw));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_bn_param_grad(cudaStream_t s, vdnn_cuda_type t, double *scratch,
                                                 size_t scratch_bytes, float *dgamma, float *dbeta, const void *x,
                                                 const void *dy, const float *mean, const float *inv_std, int n, int c,
                                                 size_t hw)
{
    cudaError_t e = cudaSuccess;
    VDNN_TYPED(t, T,
               e = channel_sums<T>(s, scratch, scratch_bytes, dbeta, dgamma, (const T *)dy, (const T *)x, mean,
                                   inv_std, n, c, hw, 2));
    return e;
}
