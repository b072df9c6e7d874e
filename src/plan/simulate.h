/* The timeline simulator: replays a plan's actions against a profile on three lanes (compute, device-to-host,
 * host-to-device) and predicts iteration time, stalls and device memory over time. */
#ifndef VDNN_PLAN_SIMULATE_H
#define VDNN_PLAN_SIMULATE_H

#include <stdio.h>

#include "plan/plan.h"
#include "plan/profile.h"

typedef enum vdnn_lane { VDNN_LANE_COMPUTE = 0, VDNN_LANE_D2H = 1, VDNN_LANE_H2D = 2 } vdnn_lane;

/* What a span is, for colours and sums. */
typedef enum vdnn_span_kind {
    VDNN_SPAN_LOAD,
    VDNN_SPAN_FWD,
    VDNN_SPAN_BWD,
    VDNN_SPAN_UPDATE,
    VDNN_SPAN_ACCUM,
    VDNN_SPAN_RECOMPUTE,
    VDNN_SPAN_D2H,
    VDNN_SPAN_H2D,
    VDNN_SPAN_STALL,
    VDNN_SPAN_KIND_COUNT
} vdnn_span_kind;

/* One interval on a lane: an op, a copy, or a stall of the compute lane waiting for a copy. */
typedef struct vdnn_span {
    vdnn_lane lane;
    vdnn_span_kind kind;
    int step;
    int action;               /* index into plan->actions */
    double start, end;        /* seconds from the iteration's start */
    char label[96];           /* "fwd conv1", "d2h conv1", "wait conv3", ... */
    bool stall;
} vdnn_span;

/* Device bytes live from time t on (a step function). */
typedef struct vdnn_mem_sample {
    double t;
    size_t bytes;
} vdnn_mem_sample;

typedef struct vdnn_timeline {
    double iteration_s;       /* until every lane is idle */
    double compute_s;         /* busy time of the compute lane */
    double stall_s;           /* compute lane idle, waiting for a copy */
    double d2h_s, h2d_s;      /* busy time of each copy lane */
    size_t peak_live_bytes;   /* max of live block bytes */
    int n_spans, cap_spans;
    vdnn_span *spans;
    int n_mem, cap_mem;
    vdnn_mem_sample *mem;
} vdnn_timeline;

/* Replays plan->actions in order. The compute lane runs ops back to back; a copy starts when the compute
 * lane has reached it and its own lane is free; WAIT moves the compute lane to the copy's end (a stall).
 * Live device bytes change at the compute lane's time of each ALLOC / FREE. Spans of zero length are left
 * out. Fails on a plan that waits for a copy never issued or names storages / blocks / layers it lacks. */
vdnn_status vdnn_simulate(const vdnn_plan_t *plan, const vdnn_graph_t *g, const vdnn_profile *prof,
                          vdnn_timeline *out, vdnn_error *err);
void vdnn_timeline_release(vdnn_timeline *t);

/* vdnn_trace_write (public): one process per timeline, lanes compute / device-to-host / host-to-device as
 * threads, device memory as a counter. */

/* The costs a plan was made with: its request's profile, else the default estimate (kept with the plan).
 * NULL (err filled) when the estimate cannot be made. */
const vdnn_profile *vdnn_plan_costs(const vdnn_plan_t *p, vdnn_error *err);

#endif
