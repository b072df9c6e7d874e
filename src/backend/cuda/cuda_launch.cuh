// Launch-shape helpers and fixed-order block reductions shared by the backend's .cu files.
#ifndef VDNN_BACKEND_CUDA_LAUNCH_CUH
#define VDNN_BACKEND_CUDA_LAUNCH_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#define VDNN_THREADS 256
// Grid-stride loops cover any n with at most this many blocks.
#define VDNN_MAX_BLOCKS 65536

static inline unsigned vdnn_blocks(size_t n)
{
    size_t b = (n + VDNN_THREADS - 1) / VDNN_THREADS;
    if (b > VDNN_MAX_BLOCKS) b = VDNN_MAX_BLOCKS;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ size_t vdnn_tid() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t vdnn_nthreads() { return (size_t)gridDim.x * blockDim.x; }

// Sum of v over the block (blockDim.x == VDNN_THREADS), returned to every thread. The tree always adds
// the same pairs, so the result does not vary from run to run. `sh` holds VDNN_THREADS values.
__device__ __forceinline__ double vdnn_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int half = VDNN_THREADS / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) sh[threadIdx.x] += sh[threadIdx.x + half];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads(); // sh may be reused right after
    return r;
}

__device__ __forceinline__ float vdnn_block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int half = VDNN_THREADS / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + half]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

#endif
