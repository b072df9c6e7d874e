/* Measuring a profile on the real backend: per-layer times from recorded iterations, the copy link's
 * latency and bandwidth from copies of growing size. */
#ifndef VDNN_EXEC_PROFILER_H
#define VDNN_EXEC_PROFILER_H

#include "exec/net.h"
#include "plan/profile.h"

/* Runs `iterations` recorded training steps (after one warm-up) with learning rate 0, so the
 * parameters do not change, on the given batch, and measures copies of 64 KiB to `max_copy_bytes`
 * in each direction. Per-layer times are medians. */
vdnn_status vdnn_profile_measure(vdnn_net_t *net, const float *images, const int32_t *labels, int iterations,
                                 size_t max_copy_bytes, vdnn_profile *out, vdnn_error *err);

/* Copy link only: fills the samples and both copy models of p. */
vdnn_status vdnn_profile_measure_link(vdnn_backend_t *be, size_t max_bytes, vdnn_profile *p, vdnn_error *err);

#endif
