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
} vdnn_recorder;

vdnn_status vdnn_record_span(vdnn_recorder *r, vdnn_lane lane, vdnn_span_kind kind, int step, int action, double start,
                             double end, const char *label, vdnn_error *err);
vdnn_status vdnn_record_mem(vdnn_recorder *r, double t, size_t bytes, vdnn_error *err);
vdnn_status vdnn_record_copy(vdnn_recorder *r, int step, int action, int event, vdnn_lane lane, double issued,
                             const char *label, vdnn_error *err);
void vdnn_recorder_release(vdnn_recorder *r);

#endif
