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

vdnn_status vdnn_record_stamp(vdnn_recorder *r, vdnn_backend_t *be, int *index, vdnn_error *err)
{
    if (r->n_stamps == r->cap_stamps) {
        vdnn_event **s = grow(r->stamps, &r->cap_stamps, r->n_stamps + 1, sizeof *s);
        if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory recording a timeline");
        r->stamps = s;
        for (int i = r->n_stamps; i < r->cap_stamps; i++) r->stamps[i] = NULL;
    }
    vdnn_event **ev = &r->stamps[r->n_stamps];
    vdnn_status st = *ev ? VDNN_OK : be->ops->event_create(be, ev, err);
    if (st == VDNN_OK) st = be->ops->event_record(be, *ev, VDNN_QUEUE_COMPUTE, err);
    if (st == VDNN_OK) *index = r->n_stamps++;
    return st;
}

vdnn_status vdnn_record_action(vdnn_recorder *r, const struct vdnn_rec_action *a, vdnn_error *err)
{
    struct vdnn_rec_action *p = grow(r->actions, &r->cap_actions, r->n_actions + 1, sizeof *p);
    if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory recording a timeline");
    r->actions = p;
    r->actions[r->n_actions++] = *a;
    return VDNN_OK;
}

vdnn_status vdnn_record_resolve(vdnn_recorder *r, vdnn_backend_t *be, vdnn_error *err)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; st == VDNN_OK && i < r->n_actions; i++) {
        const struct vdnn_rec_action *a = &r->actions[i];
        double start = 0, end = 0;
        st = be->ops->event_time(be, r->stamps[a->start], &start, err);
        if (st == VDNN_OK) st = be->ops->event_time(be, r->stamps[a->end], &end, err);
        if (st != VDNN_OK) break;
        start -= r->t0;
        end -= r->t0;
        if (a->mem) st = vdnn_record_mem(r, end, a->bytes, err);
        else if (a->copy) st = vdnn_record_copy(r, a->step, a->action, a->event, a->lane, start, a->label, err);
        /* A wait that did not wait is no stall. */
        else if (a->kind != VDNN_SPAN_STALL || end - start > 1e-6)
            st = vdnn_record_span(r, VDNN_LANE_COMPUTE, a->kind, a->step, a->action, start, end, a->label, err);
    }
    r->n_actions = 0;
    r->n_stamps = 0;
    return st;
}

void vdnn_recorder_release(vdnn_recorder *r, vdnn_backend_t *be)
{
    for (int i = 0; i < r->cap_stamps; i++)
        if (r->stamps[i]) be->ops->event_destroy(be, r->stamps[i]);
    free(r->stamps);
    r->stamps = NULL;
    r->n_stamps = r->cap_stamps = 0;
    free(r->actions);
    r->actions = NULL;
    r->n_actions = r->cap_actions = 0;
    free(r->copies);
    r->copies = NULL;
    r->n_copies = r->cap_copies = 0;
}
