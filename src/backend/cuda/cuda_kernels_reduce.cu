// Per-channel and per-plane CUDA kernels: bias add and gradient, global average pooling, batch norm's
// parameter gradients. Sums run in double and in a fixed order, so results repeat bit for bit.
#include "cuda_kernels.h"

#include "cuda_launch.cuh"

namespace {

__global__ void k_bias_add(float *y, const float *b, int c, size_t hw, size_t total)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) y[i] += b[(i / hw) % (size_t)c];
}

// One block per channel; the block's threads stride over the channel's n*hw values.
__global__ void k_bias_grad(float *db, const float *dy, int n, int c, size_t hw)
{
    __shared__ double sh[VDNN_THREADS];
    const int ch = blockIdx.x;
    const size_t per = (size_t)n * hw;
    double acc = 0.0;
    for (size_t t = threadIdx.x; t < per; t += VDNN_THREADS) {
        size_t ni = t / hw, j = t % hw;
        acc += (double)dy[(ni * (size_t)c + (size_t)ch) * hw + j];
    }
    double s = vdnn_block_sum(acc, sh);
    if (threadIdx.x == 0) db[ch] = (float)s;
}

// One warp per plane.
__global__ void k_gap_fwd(float *y, const float *x, size_t planes, size_t hw)
{
    const size_t warp = vdnn_tid() / 32;
    const unsigned lane = threadIdx.x % 32;
    if (warp >= planes) return; // whole warps leave together: blockDim is a multiple of 32
    const float *xp = x + warp * hw;
    double acc = 0.0;
    for (size_t j = lane; j < hw; j += 32) acc += (double)xp[j];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[warp] = (float)(acc / (double)hw);
}

__global__ void k_gap_bwd(float *dx, const float *dy, size_t total, size_t hw)
{
    const float inv = (float)hw;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) dx[i] = dy[i / hw] / inv;
}

__global__ void k_bn_param_grad(float *dgamma, float *dbeta, const float *x, const float *dy, const float *mean,
                                const float *inv_std, int n, int c, size_t hw)
{
    __shared__ double sh[VDNN_THREADS];
    const int ch = blockIdx.x;
    const size_t per = (size_t)n * hw;
    const double m = (double)mean[ch];
    double sdy = 0.0, sdyx = 0.0;
    for (size_t t = threadIdx.x; t < per; t += VDNN_THREADS) {
        size_t idx = ((t / hw) * (size_t)c + (size_t)ch) * hw + t % hw;
        double g = (double)dy[idx];
        sdy += g;
        sdyx += g * ((double)x[idx] - m);
    }
    double s1 = vdnn_block_sum(sdy, sh);
    double s2 = vdnn_block_sum(sdyx, sh);
    if (threadIdx.x == 0) {
        dbeta[ch] = (float)s1;
        dgamma[ch] = (float)(s2 * (double)inv_std[ch]);
    }
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_bias_add(cudaStream_t s, float *y, const float *b, int n, int c, size_t hw)
{
    size_t total = (size_t)n * (size_t)c * hw;
    if (!total) return cudaSuccess;
    k_bias_add<<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(y, b, c, hw, total);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_bias_grad(cudaStream_t s, float *db, const float *dy, int n, int c, size_t hw)
{
    if (c <= 0) return cudaSuccess;
    k_bias_grad<<<(unsigned)c, VDNN_THREADS, 0, s>>>(db, dy, n, c, hw);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_gap_fwd(cudaStream_t s, float *y, const float *x, size_t planes, size_t hw)
{
    if (!planes) return cudaSuccess;
    const size_t warps_per_block = VDNN_THREADS / 32;
    size_t blocks = (planes + warps_per_block - 1) / warps_per_block;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    k_gap_fwd<<<(unsigned)blocks, VDNN_THREADS, 0, s>>>(y, x, planes, hw);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_gap_bwd(cudaStream_t s, float *dx, const float *dy, size_t planes, size_t hw)
{
    size_t total = planes * hw;
    if (!total) return cudaSuccess;
    k_gap_bwd<<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>(dx, dy, total, hw);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_bn_param_grad(cudaStream_t s, float *dgamma, float *dbeta, const float *x,
                                                 const float *dy, const float *mean, const float *inv_std, int n,
                                                 int c, size_t hw)
{
    if (c <= 0) return cudaSuccess;
    k_bn_param_grad<<<(unsigned)c, VDNN_THREADS, 0, s>>>(dgamma, dbeta, x, dy, mean, inv_std, n, c, hw);
    return cudaGetLastError();
}
