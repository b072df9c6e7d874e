/* Charts of simulated timelines as standalone SVG files: device memory over an iteration, and a Gantt
 * chart of the compute and copy lanes. */
#ifndef VDNN_PLAN_SVG_H
#define VDNN_PLAN_SVG_H

#include <stddef.h>

#include "plan/simulate.h"

/* vdnn_svg_memory and vdnn_svg_gantt are public (vdnn/plan.h). Both take a title and a subtitle (NULL: none) and
 * are written to PATH.tmp, then renamed. The memory chart draws one step line per timeline on shared axes (time in
 * ms, memory in MiB or GiB), a legend with each one's peak and iteration time, and a dashed line at the budget
 * (SIZE_MAX or 0: none). The Gantt chart puts the three lanes of each timeline on a shared time axis: forward,
 * backward, recompute and other compute in their own colours, offloads and prefetches, and stalls hatched in red;
 * hovering shows each span's label and times. */

#endif
