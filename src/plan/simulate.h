/* The timeline simulator: replays a plan's actions against a profile on three lanes (compute, device-to-host,
 * host-to-device) and predicts iteration time, stalls and device memory over time. */
#ifndef VDNN_PLAN_SIMULATE_H
#define VDNN_PLAN_SIMULATE_H

#include <stdio.h>

#include "plan/plan.h"
#include "plan/profile.h"

typedef enum vdnn_lane { VDNN_LANE_COMPUTE = 0, VDNN_LANE_D2H = 1, VDNN_LANE_H2D = 2 } vdnn_lane;

/* One interval on a lane: an op, a copy, or a stall of the compute lane waiting for a copy. */
typedef struct vdnn_span {
    vdnn_lane lane;
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

vdnn_status vdnn_simulate(const vdnn_plan_t *plan, const vdnn_graph_t *g, const vdnn_profile *prof,
                          vdnn_timeline *out, vdnn_error *err);
void vdnn_timeline_release(vdnn_timeline *t);

/* Chrome trace-event JSON (viewable in Perfetto / chrome://tracing): one process per timeline
 * (name given), lanes compute / device-to-host / host-to-device as threads, device memory as a counter. */
vdnn_status vdnn_trace_write(const char *path, const vdnn_timeline *const *tl, const char *const *names, int n,
                             vdnn_error *err);

#endif
