/* Charts of simulated timelines as standalone SVG files: device memory over an iteration, and a Gantt
 * chart of the compute and copy lanes. */
#ifndef VDNN_PLAN_SVG_H
#define VDNN_PLAN_SVG_H

#include <stddef.h>

#include "plan/simulate.h"

/* Both charts take a title and a subtitle (NULL: none) for the top of the picture. */

/* Device memory over one iteration, one step line per timeline on shared axes (time in ms, memory in MiB
 * or GiB), a legend with each one's peak and iteration time, and a dashed line at `budget` (SIZE_MAX or 0:
 * none). Written to PATH.tmp, then renamed. */
vdnn_status vdnn_svg_memory(const char *path, const char *title, const char *subtitle,
                            const vdnn_timeline *const *tl, const char *const *names,
                            int n, size_t budget, vdnn_error *err);

/* The three lanes of each timeline on a shared time axis: forward, backward, recompute and other compute
 * in their own colours, offloads and prefetches, and stalls hatched in red. Hover shows each span's label
 * and times. */
vdnn_status vdnn_svg_gantt(const char *path, const char *title, const char *subtitle,
                            const vdnn_timeline *const *tl, const char *const *names,
                           int n, vdnn_error *err);

#endif
