/* Launchers of the CUDA kernels of the LSTM ops (cuda_kernels_lstm.cu):
 * the gate nonlinearities and cell update of one step and their gradient (fp32), and the row copies of seq_cat (any
 * map type). Each enqueues on `s` and returns the launch status. Every value has one writer (no atomics), so results repeat
 * bit for bit. Matrices are row-major, as the CPU backend's (cpu_ops_lstm.c). */
#ifndef VDNN_BACKEND_CUDA_KERNELS_LSTM_H
#define VDNN_BACKEND_CUDA_KERNELS_LSTM_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* g[r, j] = bih[j] + bhh[j] for `rows` rows of h4 values: the biases the input projection then adds onto. */
cudaError_t vdnn_cuda_k_lstm_bias(cudaStream_t s, float *g, const float *bih, const float *bhh, size_t rows, int h4);

/* One step for b rows: g (b x 4H, pre-activations i, f, g, o) becomes the activated gates in place;
 * c = f * c_prev + i * g goes to column P+j of row i of y (y + i * ld_y); o * tanh(c) goes to m[i*H + j] when m is
 * not NULL (the projection's input), else to column j of y. c_prev is row i of cp (cp + i * ld_cp, H values), or
 * zero when cp is NULL. */
cudaError_t vdnn_cuda_k_lstm_cell_fwd(cudaStream_t s, float *g, float *y, long long ld_y, const float *cp,
                                      long long ld_cp, float *m, int b, int h, int p);

/* The step's gradient: dh[i*P + j] = dy[i*ld_dy + j] + dhr[i*P + j] for b rows of P (h's gradient from above and
 * from the next step). */
cudaError_t vdnn_cuda_k_lstm_dh(cudaStream_t s, float *dh, const float *dy, long long ld_dy, const float *dhr, int b,
                                int p);
/* m[i*H + j] = o * tanh(c) from the kept gates g (b x 4H) and y's c columns: the projection's input again. */
cudaError_t vdnn_cuda_k_lstm_m(cudaStream_t s, float *m, const float *g, const float *y, long long ld_y, int b, int h,
                               int p);
/* The gates' gradient dg (b x 4H) from the kept gates g, c (y's columns P..), dy's c columns, dm (the gradient of
 * o * tanh(c), b x H) and dcc (c's gradient from the next step, b x H), which becomes c_prev's (dc * f). */
cudaError_t vdnn_cuda_k_lstm_cell_bwd(cudaStream_t s, float *dg, const float *g, const float *y, long long ld_y,
                                      const float *dy, long long ld_dy, const float *cp, long long ld_cp,
                                      const float *dm, float *dcc, int b, int h, int p);

/* dst[n, t, j] = src[n, t, j] for j < cols and 0 for cols <= j < dst_w: n batches of t rows, rows ld_src and
 * ld_dst apart, batches batch_src and batch_dst apart (seq_cat's gather and its gradient), values of type `type`. */
cudaError_t vdnn_cuda_k_rows_copy(cudaStream_t s, vdnn_cuda_type type, void *dst, long long ld_dst, long long batch_dst,
                                  int dst_w, const void *src, long long ld_src, long long batch_src, int n, int t,
                                  int cols);

#ifdef __cplusplus
}
#endif
#endif
