/* The plan validator: replays a plan's actions against a model of device and host memory and refuses a plan the
 * executor could not run soundly. Internal: vdnn_plan_build runs it when asked (memory.poison, req.checks). */
#ifndef VDNN_PLAN_VALIDATE_H
#define VDNN_PLAN_VALIDATE_H

#include "plan/plan.h"

/* VDNN_OK, or VDNN_ERR_INVALID_ARG with a message naming the step, its layer and the tensor, when:
 *  - two blocks live at once overlap in the arena, a block lies beyond the arena's peak or is smaller than its
 *    storage, or held micro-batches' copies overlap (blocks are checked only if the plan was placed);
 *  - an op (compute, recompute, accumulation, update) reads a storage that has no block, whose block holds no
 *    value yet (not loaded, computed, fetched or recomputed), or whose prefetch it has not waited for;
 *  - a block is freed, or its storage written, while a copy out of it or into it is still in flight; a copy
 *    waits for an event no earlier copy recorded, or one is never waited for;
 *  - a prefetch reads a host copy that was never completed, or a homed parameter's block is freed after an
 *    update without its value going home;
 *  - host ranges in use at once overlap (homes, swapped maps from their copy out to their return, streamed
 *    inputs from their forward to their backward), or lie beyond the pool; streamed inputs' chunk events are
 *    shared with another copy, or their backward's chunk buffers are not on the device. */
vdnn_status vdnn_plan_validate(const vdnn_plan_t *p, vdnn_error *err);

#endif
