/* Recording what a real iteration did, as a timeline of the same shape the simulator predicts: ops and
 * stalls on the compute lane, copies on the two copy lanes, device bytes over time. */
#ifndef VDNN_EXEC_RECORD_H
#define VDNN_EXEC_RECORD_H

#include "plan/simulate.h"

typedef struct vdnn_recorder {
    vdnn_timeline *tl;     /* where spans go; NULL: not recording */
    double t0;             /* backend clock at the iteration's start */
    int n_copies, cap_copies;
    struct vdnn_rec_copy {
        int step, action, event;
        vdnn_lane lane;
        double issued;
        char label[96];
    } *copies;
    /* Each action is timed by events recorded on the compute queue before and after it, whose times are read once
     * the iteration is over: reading a clock between actions would make an asynchronous device wait for the host
     * (every span would hold the host's time to issue the op as well as the device's to run it). */
    vdnn_event **stamps;   /* made as needed, kept for the next recorded iteration */
    int n_stamps, cap_stamps;
    struct vdnn_rec_action {
        int step, action, start, end; /* stamps before and after */
        vdnn_span_kind kind;
        bool mem, copy;        /* a memory sample (after the action) or a copy issued at its start, not a span */
        vdnn_lane lane;        /* copies */
        int event;             /* copies: the plan's event the copy completes */
        size_t bytes;          /* memory samples */
        char label[96];
    } *actions;
    int n_actions, cap_actions;
} vdnn_recorder;

vdnn_status vdnn_record_span(vdnn_recorder *r, vdnn_lane lane, vdnn_span_kind kind, int step, int action, double start,
                             double end, const char *label, vdnn_error *err);
vdnn_status vdnn_record_mem(vdnn_recorder *r, double t, size_t bytes, vdnn_error *err);
vdnn_status vdnn_record_copy(vdnn_recorder *r, int step, int action, int event, vdnn_lane lane, double issued,
                             const char *label, vdnn_error *err);
/* A new stamp: the next pool event (made with be when the pool is short) recorded on the compute queue. */
vdnn_status vdnn_record_stamp(vdnn_recorder *r, vdnn_backend_t *be, int *index, vdnn_error *err);
/* A recorded action, written into the timeline by vdnn_record_resolve. */
vdnn_status vdnn_record_action(vdnn_recorder *r, const struct vdnn_rec_action *a, vdnn_error *err);
/* After the iteration's queues have drained: every recorded action into the timeline, in order, at its stamps'
 * times (less t0); copies into the copy list (their ends are read by the executor). Empties the list. */
vdnn_status vdnn_record_resolve(vdnn_recorder *r, vdnn_backend_t *be, vdnn_error *err);
/* Frees the lists, and the stamp events with be. */
void vdnn_recorder_release(vdnn_recorder *r, vdnn_backend_t *be);

#endif
