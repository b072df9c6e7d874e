/* Shape and type checks of the ops every backend validates the same way, so all backends refuse the same descriptions. */
#ifndef VDNN_BACKEND_OP_CHECK_H
#define VDNN_BACKEND_OP_CHECK_H

#include "backend/backend.h"

/* concat: inputs of equal batch and spatial size whose channels add up to the output's; feat_cat: inputs of equal
 * batch, channels and height whose last dimensions add up to the output's. */
vdnn_status vdnn_op_check_concat(const vdnn_op_desc *d, vdnn_error *err);
/* Either concatenation as rows joined side by side: `rows` rows (concat: samples; feat_cat: every index but the last)
 * of `joined` output values, input i giving len[i] values of each. */
void vdnn_op_concat_rows(const vdnn_op_desc *d, size_t *rows, size_t *joined, size_t len[VDNN_MAX_INPUTS]);
/* Inputs shaped exactly like the output. */
vdnn_status vdnn_op_check_add(const vdnn_op_desc *d, vdnn_error *err);
/* a and b are values of vdnn_dtype (VDNN_ERR_INVALID_ARG naming `what` otherwise); pass a twice for one type. */
vdnn_status vdnn_op_check_dtypes(vdnn_dtype a, vdnn_dtype b, const char *what, vdnn_error *err);
/* The element-wise activations (sigmoid, hardsigmoid, hardswish, silu, clip): one input shaped like the output,
 * finite parameters, clip's bounds in order. */
vdnn_status vdnn_op_check_act(const vdnn_op_desc *d, vdnn_error *err);
/* channel_mul: x (N x C x H x W) like the output, then s (N x C x 1 x 1). */
vdnn_status vdnn_op_check_channel_mul(const vdnn_op_desc *d, vdnn_error *err);
/* Pooling: one input, a window within range (pads at most half of it), the output size vdnn_window_out gives. */
vdnn_status vdnn_op_check_pool(const vdnn_op_desc *d, vdnn_error *err);
/* Whether a pooling's windows go beyond what oneDNN's and cuDNN's symmetric pooling computes: ceil_mode adds a
 * last window clipped at the border, or average pooling leaves padding out of its divisor where there is some.
 * The backends run these on their own window loops. */
bool vdnn_pool_own_windows(const vdnn_op_desc *d);
/* Token ids reach embed as values of the data map: with 16-bit maps a vocabulary whose ids the type does not hold
 * exactly (above 257 in bf16, 2049 in fp16) is refused, naming the op. */
vdnn_status vdnn_op_check_token_ids(const vdnn_op_desc *d, vdnn_error *err);

#endif
