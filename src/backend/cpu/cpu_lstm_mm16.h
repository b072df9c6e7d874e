/* An LSTM chunk's large products in bf16 where AVX-512 BF16 is there (cpu_ops_lstm_mm16.c), for the widened bf16
 * chunk op (cpu_ops_lstm.c): the input projection, dx, dW_ih and dW_hh as oneDNN bf16 matmuls. */
#ifndef VDNN_BACKEND_CPU_LSTM_MM16_H
#define VDNN_BACKEND_CPU_LSTM_MM16_H

#include "backend/cpu/cpu_internal.h"
#include "backend/lstm_layout.h"

typedef struct cpu_lstm_mm16 cpu_lstm_mm16;

/* info (the fp32 chunk op's, of dimensions m: rows of its own steps alone) with room for the bf16 copies and the
 * products' scratch after each workspace's own bytes. */
vdnn_status vdnn_cpu_lstm_mm16_info(cpu_backend *be, const vdnn_lstm_dims *m, vdnn_op_info *info, vdnn_error *err);
vdnn_status vdnn_cpu_lstm_mm16_create(cpu_backend *be, const vdnn_lstm_dims *m, cpu_lstm_mm16 **out,
                                      vdnn_error *err);
void vdnn_cpu_lstm_mm16_destroy(cpu_lstm_mm16 *p);

/* gates ([t][b][4H], biases in them) += x W_ih^T for every step; ws the forward workspace, base the fp32 op's own
 * bytes of it. */
vdnn_status vdnn_cpu_lstm_mm16_project(cpu_backend *be, cpu_lstm_mm16 *p, const vdnn_lstm_dims *m, const float *x,
                                       const float *wih, float *gates, void *ws, size_t base, vdnn_error *err);

/* Backward's products from the gate gradients dg ([b][t][4H]): dwih += dg^T x, dx = dg W_ih, dwhh += the
 * pairs of dg and the h before it (NULL: not wanted). dg is read only. */
typedef struct vdnn_lstm_mm16_grads {
    const float *dg, *x, *wih, *y;
    float *dwih, *dx, *dwhh;
} vdnn_lstm_mm16_grads;
vdnn_status vdnn_cpu_lstm_mm16_backward(cpu_backend *be, cpu_lstm_mm16 *p, const vdnn_lstm_dims *m,
                                        const vdnn_lstm_mm16_grads *g, void *ws, size_t base, vdnn_error *err);

#endif
