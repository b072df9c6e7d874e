/* Op descriptions for the tests: one builder per layer kind, shared by every test that runs ops directly. */
#ifndef VDNN_TEST_OP_DESC_H
#define VDNN_TEST_OP_DESC_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

vdnn_shape vt_shape(int n, int c, int h, int w);

/* One input, training mode, no parameters: relu, gap, flatten, softmax_xent (and the base of the others). */
vdnn_op_desc vt_op(vdnn_layer_kind kind, vdnn_shape in, vdnn_shape out);
vdnn_op_desc vt_relu(vdnn_shape in);
vdnn_op_desc vt_gap(vdnn_shape in);
vdnn_op_desc vt_flatten(vdnn_shape in);
vdnn_op_desc vt_xent(int n, int classes);

/* Output size floor((in + 2 pad - kernel) / stride) + 1, as the graph computes it. */
vdnn_op_desc vt_conv_rect(vdnn_shape in, int filters, int kh, int kw, int sh, int sw, int ph, int pw, int groups,
                          int bias);
vdnn_op_desc vt_conv(vdnn_shape in, int filters, int k, int stride, int pad, int groups, int bias);
vdnn_op_desc vt_pool_rect(vdnn_layer_kind kind, vdnn_shape in, int kh, int kw, int sh, int sw, int ph, int pw);
vdnn_op_desc vt_pool(vdnn_layer_kind kind, vdnn_shape in, int k, int stride, int pad);
/* With ceil_mode and (average pooling) padding left out of the divisor; output sizes by PyTorch's rules. */
vdnn_op_desc vt_pool_win(vdnn_layer_kind kind, vdnn_shape in, int kh, int kw, int sh, int sw, int ph, int pw,
                         bool ceil_mode, bool exclude_pad);
vdnn_op_desc vt_lrn(vdnn_shape in, int size, float alpha, float beta, float k);
vdnn_op_desc vt_bn(vdnn_shape in, bool training);
vdnn_op_desc vt_fc(vdnn_shape in, int outputs, int bias);
vdnn_op_desc vt_dropout(vdnn_shape in, float p, bool training);
/* sigmoid, hardswish and silu; hardsigmoid and clip with their parameters. */
vdnn_op_desc vt_act(vdnn_layer_kind kind, vdnn_shape in);
vdnn_op_desc vt_hardsigmoid(vdnn_shape in, float alpha, float beta);
vdnn_op_desc vt_clip(vdnn_shape in, float lo, float hi);
/* channel_mul of maps `in` by N x C x 1 x 1 scales. */
vdnn_op_desc vt_channel_mul(vdnn_shape in);
/* concat (output channels summed) or add (output shaped like the inputs) of n inputs. */
vdnn_op_desc vt_multi(vdnn_layer_kind kind, int n, const vdnn_shape *in);

/* Sequence ops (B x T x F as Bx1xTxF): token embedding of ids Bx1xTx1, position embedding, layer norm and linear
 * over the last dimension, attention probabilities from qkv Bx1xTx3F and their mix, GELU; token-wise softmax_xent. */
vdnn_op_desc vt_embed(int b, int t, int vocab, int width);
vdnn_op_desc vt_pos_embed(vdnn_shape in, int context);
vdnn_op_desc vt_layernorm(vdnn_shape in);
vdnn_op_desc vt_linear(vdnn_shape in, int outputs, int bias);
vdnn_op_desc vt_attn_probs(int b, int t, int width, int heads);
vdnn_op_desc vt_attn_mix(int b, int t, int width, int heads);
/* Fused attention: qkv B x 1 x t x 3 width -> B x 1 x t x width. */
vdnn_op_desc vt_attn(int b, int t, int width, int heads);
/* Heads h0 .. h0+n-1 of `heads` (a head group): attn_probs or attn_mix. */
vdnn_op_desc vt_attn_group(vdnn_layer_kind kind, int b, int t, int width, int heads, int h0, int n);
vdnn_op_desc vt_xent_seq(int b, int t, int vocab);
/* One lstm chunk of s steps, hidden h, projection proj (0: none), reading steps step0.. of an input {b,1,tin,ldx}
 * (its first `in` features), with a previous chunk of prev steps (0: none, the state starts at zero). */
vdnn_op_desc vt_lstm(int b, int s, int h, int proj, int in, int tin, int ldx, int step0, int prev);
/* An lstm's parameters as a tensor (the op's input is a 1x1x1x1 stand-in for the data). */
/* seq_cat of n inputs {b,1,steps[i],w} keeping the first cols columns. */
vdnn_op_desc vt_seq_cat(int b, int n, const int *steps, int w, int cols);

/* Element counts of the weights (conv/fc weights, batchnorm gamma), biases (beta) and running statistics. */
void vt_op_param_counts(const vdnn_op_desc *d, size_t *nw, size_t *nb, size_t *nstats);
/* Whether the op has a backward pass to test: everything in training mode, and dropout in inference mode too
 * (the identity); batchnorm and convolutions made for inference have none. */
bool vt_op_has_backward(const vdnn_op_desc *d);

#endif
