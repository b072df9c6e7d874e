/* How many samples an op that widens 16-bit maps into fp32 copies takes at a time: one rule for the CPU and CUDA
 * backends, so that their plans of the same model agree. */
#ifndef VDNN_BACKEND_WIDEN_GROUP_H
#define VDNN_BACKEND_WIDEN_GROUP_H

#include <stdbool.h>
#include <stddef.h>

/* The fp32 copies of a group at most this large by default (unless one sample is larger). */
#define VDNN_WIDEN_GROUP_BYTES ((size_t)4 << 20)
/* The CPU's bound for an LSTM chunk's default candidate ("whole-batch"; its "grouped" one, and the CUDA backend's
 * chunk, take VDNN_WIDEN_GROUP_BYTES): its per-step recurrent products read the recurrent weights once per group and
 * step, weight-bound at a batch's few rows, so halving a group nearly doubles their time (lstm-long's bf16 chunk on
 * 2 cores: 0.63x fp32's forward speed in groups of 4 samples, 0.98x with the batch of 8 whole). */
#define VDNN_WIDEN_LSTM_GROUP_BYTES ((size_t)16 << 20)

/* The largest divisor of the batch n whose copies (each_sample bytes a sample) fit cap, one at least; but the whole
 * batch where param_bytes (the room a group after the first needs for its parameter gradients, added after) is at
 * least what grouping saves, unless the cap was the caller's own (fixed_cap). */
int vdnn_widen_group_samples(int n, size_t each_sample, size_t cap, size_t param_bytes, bool fixed_cap);

#endif
