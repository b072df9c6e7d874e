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

/* Times every layer's other algorithms: for each k >= 1 that some layer offers, a net made with cfg but
 * algo k (one at a time, after the caller freed its own) runs `iterations` recorded steps, and each layer
 * with a k-th candidate gets its times in out's algo arrays (out already holds the defaults'). */
vdnn_status vdnn_profile_measure_algos(const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                                       const float *images, const int32_t *labels, int iterations,
                                       vdnn_profile *out, vdnn_error *err);

/* The link and the layers while both run: a net made with cfg but policy all (every saved map swapped),
 * no budget, runs `iterations` recorded steps after a warm-up; fits out's d2h_busy / h2d_busy to its copies
 * and copy_slowdown to how much longer the layers that copies overlapped took than out's times (less the
 * drift of the layers no copy overlapped; the median of the steps' own fits). Where that plan cannot be made or moves nothing, out is left as
 * it is and *measured is false. Call it after the caller's own net is freed. */
vdnn_status vdnn_profile_measure_busy(const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                                      const float *images, const int32_t *labels, int iterations, vdnn_profile *out,
                                      bool *measured, vdnn_error *err);

/* Copy link only: fills the samples and both copy models of p. */
vdnn_status vdnn_profile_measure_link(vdnn_backend_t *be, size_t max_bytes, vdnn_profile *p, vdnn_error *err);

#endif
