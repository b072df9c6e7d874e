/* The LSTM ops' layout that every backend shares (docs/sequence.md, "LSTM"): a chunk's dimensions and shape check,
 * where each parameter sits in the params tensor, the rows of its input, output and previous chunk, and the op info
 * (aux, workspaces) plans are made with, so that plans from either backend's op info hold on the other. */
#ifndef VDNN_BACKEND_LSTM_LAYOUT_H
#define VDNN_BACKEND_LSTM_LAYOUT_H

#include "backend/backend.h"

/* One chunk of steps: x[0] {B,1,Tin,ldx}: steps step0 .. step0+S-1 of it, the first In columns of each row (an lstm
 * chunk's rows are [h | c]); x[1] (optional) the previous chunk, whose last row is the incoming (h, c). The
 * parameters are w and b (the op's weights and biases, shared by every chunk of the layer: graph.h's tie), their
 * gradients dw and db. y {B,1,S,P+H}: rows [h_t | c_t]. aux: the activated gates i, f, g, o per step, laid out
 * [t][b][4H] so that each step's recurrent GEMM reads B contiguous rows. */
typedef struct vdnn_lstm_dims {
    int b, s, h, pw, w, in, tin, ldx, step0, sp; /* sp: the previous chunk's steps (0: none, the state is zero) */
    bool proj;
} vdnn_lstm_dims;

/* PyTorch's nn.LSTM parameters: weight_ih, weight_hh, weight_hr one after another in the weights, bias_ih then
 * bias_hh in the biases. */
typedef struct vdnn_lstm_params {
    const float *wih, *whh, *whr, *bih, *bhh;
} vdnn_lstm_params;

/* The chunk's dimensions, or VDNN_ERR_SHAPE naming the op. */
vdnn_status vdnn_lstm_dims_of(const vdnn_op_desc *d, vdnn_lstm_dims *m, vdnn_error *err);
vdnn_lstm_params vdnn_lstm_params_at(const vdnn_lstm_dims *m, const float *w, const float *b);
/* Floats of the chunk's backward workspace. */
size_t vdnn_lstm_bwd_floats(const vdnn_lstm_dims *m);
/* The chunk op's info: aux (the gates), both workspaces, what backward reads. */
vdnn_op_info vdnn_lstm_info(const vdnn_lstm_dims *m);
/* The chunk op's buffers for a forward or backward call (backward: one that computes something), the first missing
 * one named as "<prefix>lstm: x is NULL" (prefix: the backend's, "" or "cuda "). */
vdnn_status vdnn_lstm_check_args(const vdnn_op_desc *d, const vdnn_lstm_dims *m, const vdnn_op_args *a, bool backward,
                                 const char *prefix, vdnn_error *err);
/* seq_cat's shape check. */
vdnn_status vdnn_seq_cat_check(const vdnn_op_desc *d, vdnn_error *err);

/* Row (b, t) of the chunk's input, output and previous chunk. */
static inline const float *vdnn_lstm_x_row(const vdnn_lstm_dims *m, const float *x, int b, int t)
{
    return x + ((size_t)b * (size_t)m->tin + (size_t)(m->step0 + t)) * (size_t)m->ldx;
}
static inline float *vdnn_lstm_y_row(const vdnn_lstm_dims *m, float *y, int b, int t)
{
    return y + ((size_t)b * (size_t)m->s + (size_t)t) * (size_t)m->w;
}
static inline const float *vdnn_lstm_prev_row(const vdnn_lstm_dims *m, const float *xp, int b)
{
    return xp + ((size_t)b * (size_t)m->sp + (size_t)(m->sp - 1)) * (size_t)m->w;
}

#endif
