/* How many samples an op that widens 16-bit maps into fp32 copies takes at a time: one rule for the CPU and CUDA
 * backends, so that their plans of the same model agree. */
#ifndef VDNN_BACKEND_WIDEN_GROUP_H
#define VDNN_BACKEND_WIDEN_GROUP_H

#include <stdbool.h>
#include <stddef.h>

/* The fp32 copies of a group at most this large by default (unless one sample is larger). */
#define VDNN_WIDEN_GROUP_BYTES ((size_t)4 << 20)

/* The largest divisor of the batch n whose copies (each_sample bytes a sample) fit cap, one at least; but the whole
 * batch where param_bytes (the room a group after the first needs for its parameter gradients, added after) is at
 * least what grouping saves, unless the cap was the caller's own (fixed_cap). */
int vdnn_widen_group_samples(int n, size_t each_sample, size_t cap, size_t param_bytes, bool fixed_cap);

#endif
