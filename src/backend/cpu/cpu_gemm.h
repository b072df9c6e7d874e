/* Row-major single-precision GEMM for the CPU backend's own ops (sequence layers, LSTM, bf16 attention): oneDNN's
 * sgemm, C = alpha op(A) op(B) + beta C. */
#ifndef VDNN_BACKEND_CPU_GEMM_H
#define VDNN_BACKEND_CPU_GEMM_H

#include <stdbool.h>

#include <oneapi/dnnl/dnnl.h>

/* Why oneDNN's and not OpenBLAS's: Debian's OpenBLAS runs its GEMMs on threads of its own, while the backend's other
 * work runs on OpenMP's, whose threads spin at barriers by default: on 2 cores the two pools took turns, and gpt-mini
 * (batch 32, context 64, fp32) took 334-404 ms a step, against 100-111 with OMP_WAIT_POLICY=passive; on oneDNN's
 * GEMM, which runs on the same OpenMP threads as the rest, 88 ms by default and 104-116 passive. The LSTM keeps
 * OpenBLAS (cpu_ops_lstm.c; its OpenMP build, CMakeLists.txt): oneDNN's GEMM was slower on its per-step products
 * (lstm-lm on one thread 324 ms a step against 259). Its arguments are checked by the callers (shapes from checked
 * op descriptions), so its only failure, invalid arguments, cannot happen here. */
static inline void vdnn_cpu_sgemm(bool trans_a, bool trans_b, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k, float alpha,
                                  const float *a, dnnl_dim_t lda, const float *b, dnnl_dim_t ldb, float beta, float *c,
                                  dnnl_dim_t ldc)
{
    (void)dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* y = A^T x for A rows x cols (row-major, lda), as a 1 x cols product: the column sums a bias gradient needs. */
static inline void vdnn_cpu_sgemv_t(dnnl_dim_t rows, dnnl_dim_t cols, const float *a, dnnl_dim_t lda, const float *x,
                                    float *y)
{
    vdnn_cpu_sgemm(false, false, 1, cols, rows, 1.0f, x, rows, a, lda, 0.0f, y, cols);
}

#endif
