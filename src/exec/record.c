/* Recording what a real iteration did, as a timeline of the same shape the simulator predicts. */
#include "exec/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return arr;
    int nc = *cap ? 2 * *cap : 256;
    void *p = realloc(arr, (size_t)nc * elem);
    if (p) *cap = nc;
    return p;
}

vdnn_status vdnn_record_span(vdnn_recorder *r, vdnn_lane lane, vdnn_span_kind kind, int step, int action, double start,
                             double end, const char *label, vdnn_error *err)
{
    vdnn_timeline *t = r->tl;
    vdnn_span *sp = grow(t->spans, &t->cap_spans, t->n_spans + 1, sizeof *sp);
    if (!sp) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory recording a timeline");
    t->spans = sp;
    sp = &t->spans[t->n_spans++];
    *sp = (vdnn_span){.lane = lane, .kind = kind, .step = step, .action = action, .start = start, .end = end,
                      .stall = kind == VDNN_SPAN_STALL};
    snprintf(sp->label, sizeof sp->label, "%s", label);
    double d = end - start;
    if (lane == VDNN_LANE_D2H) t->d2h_s += d;
    else if (lane == VDNN_LANE_H2D) t->h2d_s += d;
    else if (sp->stall) t->stall_s += d;
    else t->compute_s += d;
    if (end > t->iteration_s) t->iteration_s = end;
    return VDNN_OK;
}

vdnn_status vdnn_record_mem(vdnn_recorder *r, double t, size_t bytes, vdnn_error *err)
{
    vdnn_timeline *tl = r->tl;
    vdnn_mem_sample *m = grow(tl->mem, &tl->cap_mem, tl->n_mem + 1, sizeof *m);
    if (!m) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory recording a timeline");
    tl->mem = m;
    tl->mem[tl->n_mem++] = (vdnn_mem_sample){t, bytes};
    if (bytes > tl->peak_live_bytes) tl->peak_live_bytes = bytes;
    return VDNN_OK;
}

vdnn_status vdnn_record_copy(vdnn_recorder *r, int step, int action, int event, vdnn_lane lane, double issued,
                             const char *label, vdnn_error *err)
{
    struct vdnn_rec_copy *c = grow(r->copies, &r->cap_copies, r->n_copies + 1, sizeof *c);
    if (!c) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory recording a timeline");
    r->copies = c;
    c = &r->copies[r->n_copies++];
    *c = (struct vdnn_rec_copy){.step = step, .action = action, .event = event, .lane = lane, .issued = issued};
    snprintf(c->label, sizeof c->label, "%s", label);
    return VDNN_OK;
}

void vdnn_recorder_release(vdnn_recorder *r)
{
    free(r->copies);
    r->copies = NULL;
    r->n_copies = r->cap_copies = 0;
}
