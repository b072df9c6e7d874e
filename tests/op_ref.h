/* Naive references of every op's forward pass, summed in double: the oracle the CPU backend is held to. */
#ifndef VDNN_TEST_OP_REF_H
#define VDNN_TEST_OP_REF_H

#include <stddef.h>

#include "op_exec.h"

/* y[i] for every i divisible by `step` (the others NaN: not checked) from in's inputs, and softmax_xent's mean
 * loss in *loss. Batchnorm in training mode normalizes with the batch statistics, in inference mode with
 * in->stats. */
void vt_ref_forward(const vt_op_data *in, size_t step, double *y, double *loss);

/* Batchnorm's per-channel batch mean and biased variance. */
void vt_ref_batch_stats(const vt_op_data *in, double *mean, double *var);

#endif
