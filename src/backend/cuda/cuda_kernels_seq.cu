// CUDA kernels of the sequence ops over maps of any type (computed in float, sums in double, rounded once):
// embeddings, layer normalization and attention's causal softmax. They follow the CPU backend's arithmetic
// (cpu_ops_seq.c) where it is its own code; every sum has one writer and a fixed order, so results repeat bit for
// bit whatever the memory policy. Parameters, their gradients and the kept statistics are float.
#include <math.h>

#include "cuda_kernels_seq.h"

#include "cuda_launch.cuh"
#include "cuda_types.cuh"

namespace {

// A token id from its float, or -1 when it is not an integer in 0..vocab-1.
__device__ __forceinline__ int token_id(float v, int vocab)
{
    if (!(v >= 0.0f && v < (float)vocab) || v != floorf(v)) return -1;
    return (int)v;
}

template <typename T> __global__ void k_embed_fwd(T *y, const T *x, const float *w, size_t rows, int f, int vocab)
{
    const size_t total = rows * (size_t)f;
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) {
        const size_t r = i / (size_t)f, j = i % (size_t)f;
        const int id = token_id(vdnn_ld(x[r]), vocab);
        y[i] = vdnn_st<T>(id < 0 ? NAN : w[(size_t)id * (size_t)f + j]);
    }
}

// One thread per (column, slice of the vocabulary): it reads every token id and adds, in token order, the rows whose
// id is in its slice. Each value of dw has one writer and the CPU backend's order of additions: no atomics, the same
// floats. The slices only spread the work.
template <typename T>
__global__ void k_embed_bwd(float *dw, const T *x, const T *dy, size_t rows, int f, int vocab, int slices)
{
    const size_t t = vdnn_tid();
    if (t >= (size_t)f * (size_t)slices) return;
    const size_t j = t % (size_t)f;
    const int s = (int)(t / (size_t)f), per = (vocab + slices - 1) / slices;
    const int v0 = s * per, v1 = v0 + per < vocab ? v0 + per : vocab;
    for (size_t r = 0; r < rows; r++) {
        const int id = token_id(vdnn_ld(x[r]), vocab);
        if (id >= v0 && id < v1) dw[(size_t)id * (size_t)f + j] += vdnn_ld(dy[r * (size_t)f + j]);
    }
}

template <typename T> __global__ void k_pos_fwd(T *y, const T *x, const float *w, size_t total, size_t tf)
{
    for (size_t i = vdnn_tid(); i < total; i += vdnn_nthreads()) y[i] = vdnn_st<T>(vdnn_ld(x[i]) + w[i % tf]);
}

template <typename T> __global__ void k_pos_bwd(float *dw, const T *dy, int n, size_t tf, size_t context_tf)
{
    for (size_t i = vdnn_tid(); i < context_tf; i += vdnn_nthreads()) {
        float s = 0.0f;
        if (i < tf)
            for (int b = 0; b < n; b++) s += vdnn_ld(dy[(size_t)b * tf + i]);
        dw[i] = s;
    }
}

// One block per row: mean, then the biased variance around it, both summed in double.
template <typename T>
__global__ void k_ln_fwd(T *y, const T *x, const float *w, const float *b, float *mean, float *var, int f, float eps)
{
    __shared__ double sh[VDNN_THREADS];
    const size_t row = blockIdx.x;
    const T *xr = x + row * (size_t)f;
    T *yr = y + row * (size_t)f;
    double acc = 0.0;
    for (int j = threadIdx.x; j < f; j += VDNN_THREADS) acc += (double)vdnn_ld(xr[j]);
    const double mu = vdnn_block_sum(acc, sh) / (double)f;
    acc = 0.0;
    for (int j = threadIdx.x; j < f; j += VDNN_THREADS) {
        const double d = (double)vdnn_ld(xr[j]) - mu;
        acc += d * d;
    }
    const double va = vdnn_block_sum(acc, sh) / (double)f;
    const float m = (float)mu, inv = (float)(1.0 / sqrt(va + (double)eps));
    if (threadIdx.x == 0 && mean) mean[row] = m;
    if (threadIdx.x == 0 && var) var[row] = (float)va;
    for (int j = threadIdx.x; j < f; j += VDNN_THREADS) yr[j] = vdnn_st<T>((vdnn_ld(xr[j]) - m) * inv * w[j] + b[j]);
}

// dx = inv (g - mean(g) - xhat mean(g xhat)) with g = dy w, one block per row.
template <typename T>
__global__ void k_ln_bwd_dx(T *dx, const T *x, const float *mean, const float *var, const T *dy, const float *w, int f,
                            float eps)
{
    __shared__ double sh[VDNN_THREADS];
    const size_t row = blockIdx.x;
    const T *xr = x + row * (size_t)f, *gr = dy + row * (size_t)f;
    const float m = mean[row], inv = (float)(1.0 / sqrt((double)var[row] + (double)eps));
    double a1 = 0.0, a2 = 0.0;
    for (int j = threadIdx.x; j < f; j += VDNN_THREADS) {
        const double g = (double)vdnn_ld(gr[j]) * (double)w[j];
        a1 += g;
        a2 += g * (double)((vdnn_ld(xr[j]) - m) * inv);
    }
    const double s1 = vdnn_block_sum(a1, sh) / (double)f;
    const double s2 = vdnn_block_sum(a2, sh) / (double)f;
    T *dr = dx + row * (size_t)f;
    for (int j = threadIdx.x; j < f; j += VDNN_THREADS) {
        const double xh = (double)((vdnn_ld(xr[j]) - m) * inv);
        dr[j] = vdnn_st<T>((float)((double)inv * ((double)vdnn_ld(gr[j]) * (double)w[j] - s1 - xh * s2)));
    }
}

// Pass 1 of the parameter gradients: block (split s, a block of columns), one thread per column over the split's rows
// in order; part holds f*splits sums of dy*xhat, then f*splits sums of dy.
template <typename T>
__global__ void k_ln_param_partials(double *part, const T *x, const float *mean, const float *var, const T *dy,
                                    size_t rows, int f, float eps, int splits)
{
    const int s = blockIdx.x;
    const int j = blockIdx.y * VDNN_THREADS + threadIdx.x;
    if (j >= f) return;
    const size_t len = (rows + (size_t)splits - 1) / (size_t)splits, r0 = (size_t)s * len;
    const size_t r1 = r0 + len < rows ? r0 + len : rows;
    double aw = 0.0, ab = 0.0;
    for (size_t r = r0; r < r1; r++) {
        const float g = vdnn_ld(dy[r * (size_t)f + (size_t)j]);
        const float inv = (float)(1.0 / sqrt((double)var[r] + (double)eps));
        aw += (double)g * (double)((vdnn_ld(x[r * (size_t)f + (size_t)j]) - mean[r]) * inv);
        ab += (double)g;
    }
    part[(size_t)j * (size_t)splits + (size_t)s] = aw;
    part[((size_t)f + (size_t)j) * (size_t)splits + (size_t)s] = ab;
}

// Pass 2: each column adds its partials in split order.
__global__ void k_ln_param_finish(float *dw, float *db, const double *part, int f, int splits)
{
    const int j = blockIdx.x * VDNN_THREADS + threadIdx.x;
    if (j >= f) return;
    double aw = 0.0, ab = 0.0;
    for (int s = 0; s < splits; s++) {
        aw += part[(size_t)j * (size_t)splits + (size_t)s];
        ab += part[((size_t)f + (size_t)j) * (size_t)splits + (size_t)s];
    }
    if (dw) dw[j] = (float)aw;
    if (db) db[j] = (float)ab;
}

// One block per row of scores sc (float), as the CPU: the maximum, exp(score - max) in float (kept in sc), their sum in
// double, one reciprocal; the probabilities go to p rounded once (p may be sc for float maps).
// Rows come in blocks of `block` query rows, the first of them query r0: row i of a block has r0 + i + 1 live scores
// (a whole attention: block t, r0 0).
template <typename T> __global__ void k_causal_softmax(T *p, float *sc, int t, int block, int r0)
{
    __shared__ double shd[VDNN_THREADS];
    __shared__ float shf[VDNN_THREADS];
    const size_t row = blockIdx.x;
    float *sr = sc + row * (size_t)t;
    T *pr = p + row * (size_t)t;
    const int live = r0 + (int)(row % (size_t)block) + 1;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < live; j += VDNN_THREADS) m = fmaxf(m, sr[j]);
    m = vdnn_block_max(m, shf);
    double acc = 0.0;
    for (int j = threadIdx.x; j < live; j += VDNN_THREADS) {
        const float e = expf(sr[j] - m);
        sr[j] = e;
        acc += (double)e;
    }
    const float inv = (float)(1.0 / vdnn_block_sum(acc, shd));
    for (int j = threadIdx.x; j < t; j += VDNN_THREADS) pr[j] = vdnn_st<T>(j < live ? sr[j] * inv : 0.0f);
}

template <typename T> __global__ void k_causal_softmax_bwd(T *ds, const T *p, const T *dp, int t, int block, int r0)
{
    __shared__ double sh[VDNN_THREADS];
    const size_t row = blockIdx.x;
    const size_t at = row * (size_t)t;
    const int live = r0 + (int)(row % (size_t)block) + 1;
    double acc = 0.0;
    for (int j = threadIdx.x; j < live; j += VDNN_THREADS)
        acc += (double)vdnn_ld(p[at + j]) * (double)vdnn_ld(dp[at + j]);
    const float dot = (float)vdnn_block_sum(acc, sh);
    for (int j = threadIdx.x; j < t; j += VDNN_THREADS)
        ds[at + j] =
            vdnn_st<T>(j < live ? __fmul_rn(vdnn_ld(p[at + j]), __fsub_rn(vdnn_ld(dp[at + j]), dot)) : 0.0f);
}

} // namespace

extern "C" cudaError_t vdnn_cuda_k_embed_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w,
                                             size_t rows, int f, int vocab)
{
    const size_t total = rows * (size_t)f;
    if (!total) return cudaSuccess;
    VDNN_TYPED(t, T, k_embed_fwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, w, rows, f, vocab));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_embed_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *x, const void *dy,
                                             size_t rows, int f, int vocab)
{
    if (f <= 0 || vocab <= 0) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(dw, 0, (size_t)vocab * (size_t)f * sizeof(float), s);
    if (e != cudaSuccess || !rows) return e;
    // About 64k threads in all, at least one slice per thread column and at most one id per slice.
    int slices = 65536 / f;
    if (slices < 1) slices = 1;
    if (slices > vocab) slices = vocab;
    const size_t threads = (size_t)f * (size_t)slices;
    const unsigned blocks = (unsigned)((threads + VDNN_THREADS - 1) / VDNN_THREADS);
    VDNN_TYPED(t, T,
               k_embed_bwd<T><<<blocks, VDNN_THREADS, 0, s>>>(dw, (const T *)x, (const T *)dy, rows, f, vocab, slices));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_pos_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w,
                                           int n, size_t tf)
{
    const size_t total = (size_t)n * tf;
    if (!total) return cudaSuccess;
    VDNN_TYPED(t, T, k_pos_fwd<T><<<vdnn_blocks(total), VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, w, total, tf));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_pos_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *dy, int n, size_t tf,
                                           size_t context_tf)
{
    if (!context_tf) return cudaSuccess;
    VDNN_TYPED(t, T, k_pos_bwd<T><<<vdnn_blocks(context_tf), VDNN_THREADS, 0, s>>>(dw, (const T *)dy, n, tf, context_tf));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_ln_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w,
                                          const float *b, float *mean, float *var, size_t rows, int f, float eps)
{
    if (!rows || f <= 0) return cudaSuccess;
    if (rows > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    VDNN_TYPED(t, T,
               k_ln_fwd<T><<<(unsigned)rows, VDNN_THREADS, 0, s>>>((T *)y, (const T *)x, w, b, mean, var, f, eps));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_ln_bwd(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes,
                                          void *dx, float *dw, float *db, const void *x, const float *mean,
                                          const float *var, const void *dy, const float *w, size_t rows, int f,
                                          float eps)
{
    if (!rows || f <= 0) return cudaSuccess;
    if (rows > 0x7fffffffu) return cudaErrorInvalidConfiguration;
    if (dx) {
        VDNN_TYPED(t, T,
                   k_ln_bwd_dx<T><<<(unsigned)rows, VDNN_THREADS, 0, s>>>((T *)dx, (const T *)x, mean, var,
                                                                          (const T *)dy, w, f, eps));
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    if (!dw && !db) return cudaSuccess;
    // Splits of 64 rows, at most 1024, as many as two sums per column and split fit in the scratch.
    const size_t cap = scratch_bytes / (2 * sizeof(double) * (size_t)f);
    if (cap < 1) return cudaErrorInvalidValue;
    size_t splits = (rows + 63) / 64;
    if (splits > 1024) splits = 1024;
    if (splits > cap) splits = cap;
    const unsigned col_blocks = (unsigned)((f + VDNN_THREADS - 1) / VDNN_THREADS);
    VDNN_TYPED(t, T,
               k_ln_param_partials<T><<<dim3((unsigned)splits, col_blocks), VDNN_THREADS, 0, s>>>(
                   scratch, (const T *)x, mean, var, (const T *)dy, rows, f, eps, (int)splits));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    k_ln_param_finish<<<col_blocks, VDNN_THREADS, 0, s>>>(dw, db, scratch, f, (int)splits);
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_causal_softmax_rows(cudaStream_t s, vdnn_cuda_type t, void *p, float *scores,
                                                       size_t rows, int cols, int block, int r0)
{
    if (!rows || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffffu || block < 1 || r0 < 0 || r0 + block > cols) return cudaErrorInvalidConfiguration;
    VDNN_TYPED(t, T, k_causal_softmax<T><<<(unsigned)rows, VDNN_THREADS, 0, s>>>((T *)p, scores, cols, block, r0));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_causal_softmax(cudaStream_t s, vdnn_cuda_type t, void *p, float *scores, size_t rows,
                                                  int cols)
{
    return vdnn_cuda_k_causal_softmax_rows(s, t, p, scores, rows, cols, cols, 0);
}

extern "C" cudaError_t vdnn_cuda_k_causal_softmax_bwd_rows(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p,
                                                           const void *dp, size_t rows, int cols, int block, int r0)
{
    if (!rows || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffffu || block < 1 || r0 < 0 || r0 + block > cols) return cudaErrorInvalidConfiguration;
    VDNN_TYPED(t, T,
               k_causal_softmax_bwd<T><<<(unsigned)rows, VDNN_THREADS, 0, s>>>((T *)ds, (const T *)p, (const T *)dp,
                                                                               cols, block, r0));
    return cudaGetLastError();
}

extern "C" cudaError_t vdnn_cuda_k_causal_softmax_bwd(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p,
                                                      const void *dp, size_t rows, int cols)
{
    return vdnn_cuda_k_causal_softmax_bwd_rows(s, t, ds, p, dp, rows, cols, cols, 0);
}
