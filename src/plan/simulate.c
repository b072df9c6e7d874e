/* The timeline simulator: the executor's queue semantics (one compute lane, one lane per copy direction,
 * copies ordered after the compute point that issued them, waits on copy events) with costs from a profile. */
#include "plan/simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim {
    const vdnn_plan_t *plan;
    const vdnn_graph_t *g;
    const vdnn_profile *prof;
    vdnn_timeline *t;
    vdnn_error *err;
    double lane_free[3];  /* when each lane's last span ends; lane 0 is the compute cursor */
    double *done;         /* per event: when its copy ends */
    bool *recorded;
    size_t live;
} sim;

static vdnn_status oom(sim *s) { return vdnn_fail(s->err, VDNN_ERR_NO_MEMORY, "simulate: out of memory"); }

static vdnn_status add_span(sim *s, vdnn_lane lane, vdnn_span_kind kind, int step, int action, double start, double end,
                            const char *what, const char *name)
{
    vdnn_timeline *t = s->t;
    if (!(end > start)) return VDNN_OK;
    if (t->n_spans == t->cap_spans) {
        int nc = t->cap_spans ? 2 * t->cap_spans : 256;
        vdnn_span *p = realloc(t->spans, (size_t)nc * sizeof *p);
        if (!p) return oom(s);
        t->spans = p;
        t->cap_spans = nc;
    }
    vdnn_span *sp = &t->spans[t->n_spans++];
    memset(sp, 0, sizeof *sp);
    sp->lane = lane;
    sp->kind = kind;
    sp->step = step;
    sp->action = action;
    sp->start = start;
    sp->end = end;
    sp->stall = kind == VDNN_SPAN_STALL;
    snprintf(sp->label, sizeof sp->label, "%s%s%.80s", what, name[0] ? " " : "", name);
    double d = end - start;
    switch (lane) {
    case VDNN_LANE_COMPUTE:
        if (sp->stall) t->stall_s += d;
        else t->compute_s += d;
        break;
    case VDNN_LANE_D2H: t->d2h_s += d; break;
    case VDNN_LANE_H2D: t->h2d_s += d; break;
    }
    return VDNN_OK;
}

static vdnn_status mem_sample(sim *s)
{
    vdnn_timeline *t = s->t;
    if (t->n_mem == t->cap_mem) {
        int nc = t->cap_mem ? 2 * t->cap_mem : 256;
        vdnn_mem_sample *p = realloc(t->mem, (size_t)nc * sizeof *p);
        if (!p) return oom(s);
        t->mem = p;
        t->cap_mem = nc;
    }
    t->mem[t->n_mem++] = (vdnn_mem_sample){s->lane_free[VDNN_LANE_COMPUTE], s->live};
    if (s->live > t->peak_live_bytes) t->peak_live_bytes = s->live;
    return VDNN_OK;
}

static vdnn_status bad_action(sim *s, int si, int ai, const char *what, int value)
{
    return vdnn_fail(s->err, VDNN_ERR_INVALID_ARG, "simulate: step %d, action %d: %s %d", si, ai, what, value);
}

/* How long d seconds of compute starting at t0 take beside copies that run until busy_end: at 1/(1 + slowdown)
 * of full speed until then (gaps between copies are not modelled). */
static double stretched_until(const sim *s, double t0, double d, double busy_end)
{
    const double slow = s->prof->copy_slowdown;
    if (!(slow > 0) || busy_end <= t0) return d;
    const double w = busy_end - t0;
    return d * (1 + slow) <= w ? d * (1 + slow) : w + (d - w / (1 + slow));
}

/* The same beside the copies already queued on either lane. */
static double stretched(const sim *s, double t0, double d)
{
    return stretched_until(s, t0, d, fmax(s->lane_free[VDNN_LANE_D2H], s->lane_free[VDNN_LANE_H2D]));
}

static double chunk_copy_s(const vdnn_copy_model *m, double bytes_per_image, int n, int k, int c)
{
    return vdnn_copy_seconds(m, (size_t)(bytes_per_image * vdnn_chunk_images(n, k, c)));
}

/* A step whose layer streams its input, as the executor runs it: forward queues every chunk's copy out at
 * the start and writes a chunk's output once its copy is done; backward keeps two chunks' copies in flight,
 * each chunk's compute waiting for its copy, chunk c + 1's copy queued once chunk c - 1 has left the buffer
 * it takes. A chunk's compute is stretched only while copies run beside it (those of this step, and what
 * the other lane still has queued); each chunk's copy is a span on its lane. */
static vdnn_status streamed_step(sim *s, const vdnn_step *st, int si, int ai, double t0, double d, vdnn_span_kind kind,
                                 const char *what, const char *name)
{
    const vdnn_plan_t *plan = s->plan;
    const int l = st->layer;
    const bool out = st->kind == VDNN_STEP_FWD;
    const vdnn_lane lane = out ? VDNN_LANE_D2H : VDNN_LANE_H2D;
    const double other_busy = s->lane_free[out ? VDNN_LANE_H2D : VDNN_LANE_D2H];
    const vdnn_copy_model *m = vdnn_profile_link(s->prof, out);
    const int n = s->g->input.n;
    int chunks;
    const int k = vdnn_plan_stream_chunk(plan, l, &chunks);
    const double bytes_per_image = (double)plan->st[plan->ls[l].xs].bytes / n;
    const double copy_start = fmax(t0, s->lane_free[lane]);
    double lane_t = copy_start, t = t0, *copy_at = malloc(sizeof(double) * 2 * (size_t)chunks);
    if (!copy_at) return oom(s);
    double *copy_end = copy_at + chunks;
    /* Copies queued before any compute: every chunk forward, the first two backward. */
    for (int c = 0; c < (out ? chunks : 2) && c < chunks; c++) {
        copy_at[c] = lane_t;
        copy_end[c] = lane_t = lane_t + chunk_copy_s(m, bytes_per_image, n, k, c);
    }
    for (int c = 0; c < chunks; c++) {
        const double dc = d * vdnn_chunk_images(n, k, c) / n;
        if (out) {
            t = fmax(t + stretched_until(s, t, dc, fmax(lane_t, other_busy)), copy_end[c]);
            continue;
        }
        /* Chunk c - 1's compute has just ended: chunk c + 1's copy takes its buffer. */
        if (c >= 1 && c + 1 < chunks) {
            copy_at[c + 1] = fmax(lane_t, t);
            copy_end[c + 1] = lane_t = copy_at[c + 1] + chunk_copy_s(m, bytes_per_image, n, k, c + 1);
        }
        t = fmax(t, copy_end[c]);
        t += stretched_until(s, t, dc, fmax(c + 1 < chunks ? copy_end[c + 1] : 0, other_busy));
    }
    s->lane_free[lane] = lane_t;
    s->lane_free[VDNN_LANE_COMPUTE] = t;
    vdnn_status rc = VDNN_OK;
    for (int c = 0; rc == VDNN_OK && c < chunks; c++)
        rc = add_span(s, lane, out ? VDNN_SPAN_D2H : VDNN_SPAN_H2D, si, ai, copy_at[c], copy_end[c], out ? "d2h" : "h2d",
                      plan->st[plan->ls[l].xs].name);
    free(copy_at);
    return rc ? rc : add_span(s, VDNN_LANE_COMPUTE, kind, si, ai, t0, t, what, name);
}

/* An update step of one layer (update steps, or a shared parameters' owner's): the profile's whole update shared by
 * parameter count, the update being memory-bound over each parameter's value, gradient and moments alike. */
static double layer_param_share(const vdnn_graph_t *g, int l)
{
    double all = 0;
    for (int k = 1; k < g->n_layers; k++) all += (double)g->layers[k].n_weight + (double)g->layers[k].n_bias;
    return all > 0 ? ((double)g->layers[l].n_weight + (double)g->layers[l].n_bias) / all : 0;
}

/* The single update step's part of the profile's update: all of it, less the layers updated in steps of their own (a
 * fused plan's shared parameters under shared_steps; the fused updates are charged here, as before). */
static double single_update_share(const vdnn_plan_t *plan, const vdnn_graph_t *g)
{
    double own = 0;
    for (int l = 1; l < plan->n_layers; l++)
        if (plan->ls[l].upd >= 0) own += layer_param_share(g, l);
    return own < 1 ? 1 - own : 0;
}

static vdnn_status compute_step(sim *s, const vdnn_step *st, int si, int ai)
{
    const vdnn_profile *p = s->prof;
    double d = 0;
    vdnn_span_kind kind;
    const char *what, *name = "";
    switch (st->kind) {
    case VDNN_STEP_LOAD: d = p->load_s; kind = VDNN_SPAN_LOAD; what = "load"; break;
    case VDNN_STEP_UPDATE:
        d = p->update_s * (st->layer > 0 ? layer_param_share(s->g, st->layer) : single_update_share(s->plan, s->g));
        kind = VDNN_SPAN_UPDATE;
        what = "update";
        if (st->layer > 0) name = s->g->layers[st->layer].name;
        break;
    case VDNN_STEP_FWD:
    case VDNN_STEP_BWD:
        if (st->layer < 1 || st->layer >= s->plan->n_layers) return bad_action(s, si, ai, "step of layer", st->layer);
        d = st->kind == VDNN_STEP_FWD ? vdnn_profile_fwd(p, st->layer, s->plan->algo[st->layer])
                                       : vdnn_profile_bwd(p, st->layer, s->plan->algo[st->layer]);
        kind = st->kind == VDNN_STEP_FWD ? VDNN_SPAN_FWD : VDNN_SPAN_BWD;
        what = st->kind == VDNN_STEP_FWD ? "fwd" : "bwd";
        name = s->g->layers[st->layer].name;
        break;
    default: return bad_action(s, si, ai, "unknown step kind", (int)st->kind);
    }
    double t0 = s->lane_free[VDNN_LANE_COMPUTE];
    if ((st->kind == VDNN_STEP_FWD || st->kind == VDNN_STEP_BWD) && s->plan->ls[st->layer].xs >= 0)
        return streamed_step(s, st, si, ai, t0, d, kind, what, name);
    d = stretched(s, t0, d);
    s->lane_free[VDNN_LANE_COMPUTE] = t0 + d;
    return add_span(s, VDNN_LANE_COMPUTE, kind, si, ai, t0, t0 + d, what, name);
}

static vdnn_status copy(sim *s, const vdnn_action *a, int si, int ai)
{
    const vdnn_plan_t *plan = s->plan;
    if (a->a < 0 || a->a >= plan->n_storages) return bad_action(s, si, ai, "copy of storage", a->a);
    if (a->event < 0 || a->event >= plan->n_events) return bad_action(s, si, ai, "copy records event", a->event);
    bool out = a->kind == VDNN_ACT_OFFLOAD;
    vdnn_lane lane = out ? VDNN_LANE_D2H : VDNN_LANE_H2D;
    const vdnn_copy_model *m = vdnn_profile_link(s->prof, out);
    /* The executor makes the copy queue wait for a marker recorded on the compute queue. */
    double start = fmax(s->lane_free[VDNN_LANE_COMPUTE], s->lane_free[lane]);
    double end = start + vdnn_copy_seconds(m, plan->st[a->a].bytes);
    s->lane_free[lane] = end;
    s->done[a->event] = end;
    s->recorded[a->event] = true;
    return add_span(s, lane, out ? VDNN_SPAN_D2H : VDNN_SPAN_H2D, si, ai, start, end, out ? "d2h" : "h2d", plan->st[a->a].name);
}

static vdnn_status wait(sim *s, const vdnn_action *a, int si, int ai)
{
    const vdnn_plan_t *plan = s->plan;
    if (a->event < 0 || a->event >= plan->n_events) return bad_action(s, si, ai, "wait for event", a->event);
    if (!s->recorded[a->event])
        return vdnn_fail(s->err, VDNN_ERR_INVALID_ARG, "simulate: step %d, action %d waits for event %d, which no earlier copy records",
                         si, ai, a->event);
    double now = s->lane_free[VDNN_LANE_COMPUTE];
    if (s->done[a->event] <= now) return VDNN_OK;
    s->lane_free[VDNN_LANE_COMPUTE] = s->done[a->event];
    const char *name = a->a >= 0 && a->a < plan->n_storages ? plan->st[a->a].name : "";
    return add_span(s, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL, si, ai, now, s->done[a->event], "wait", name);
}

static vdnn_status action(sim *s, const vdnn_step *st, int si, int ai)
{
    const vdnn_plan_t *plan = s->plan;
    const vdnn_action *a = &plan->actions[ai];
    double now = s->lane_free[VDNN_LANE_COMPUTE];
    switch (a->kind) {
    case VDNN_ACT_ALLOC:
    case VDNN_ACT_FREE: {
        if (a->a < 0 || a->a >= plan->n_blocks) return bad_action(s, si, ai, "block", a->a);
        size_t b = plan->blocks[a->a].bytes;
        if (a->kind == VDNN_ACT_ALLOC) s->live += b;
        else if (b > s->live) return bad_action(s, si, ai, "frees more than is live: block", a->a);
        else s->live -= b;
        return mem_sample(s);
    }
    case VDNN_ACT_OFFLOAD:
    case VDNN_ACT_PREFETCH: return copy(s, a, si, ai);
    case VDNN_ACT_WAIT: return wait(s, a, si, ai);
    case VDNN_ACT_COMPUTE: return compute_step(s, st, si, ai);
    case VDNN_ACT_ACCUM: {
        if (a->a < 0 || a->a >= plan->n_storages) return bad_action(s, si, ai, "accumulation into storage", a->a);
        if (a->b < 0 || a->b >= plan->n_storages) return bad_action(s, si, ai, "accumulation of storage", a->b);
        double d = (double)plan->st[a->b].bytes / s->prof->accum_bytes_per_s;
        s->lane_free[VDNN_LANE_COMPUTE] = now + d;
        int l = plan->st[a->a].layer;
        const char *name = l >= 0 && l < s->g->n_layers ? s->g->layers[l].name : plan->st[a->a].name;
        return add_span(s, VDNN_LANE_COMPUTE, VDNN_SPAN_ACCUM, si, ai, now, now + d, "accum", name);
    }
    case VDNN_ACT_RECOMPUTE: {
        if (a->a < 1 || a->a >= plan->n_layers) return bad_action(s, si, ai, "recompute of layer", a->a);
        double d = stretched(s, now, vdnn_profile_fwd(s->prof, a->a, plan->algo[a->a]));
        s->lane_free[VDNN_LANE_COMPUTE] = now + d;
        return add_span(s, VDNN_LANE_COMPUTE, VDNN_SPAN_RECOMPUTE, si, ai, now, now + d, "recompute", s->g->layers[a->a].name);
    }
    }
    return bad_action(s, si, ai, "unknown action kind", (int)a->kind);
}

static vdnn_status check_inputs(const vdnn_plan_t *plan, const vdnn_graph_t *g, const vdnn_profile *prof, vdnn_error *err)
{
    if (prof->n_layers != plan->n_layers || g->n_layers != plan->n_layers)
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "simulate: the plan has %d layers, the graph %d and the profile %d", plan->n_layers,
                         g->n_layers, prof->n_layers);
    if (!prof->fwd_s || !prof->bwd_s) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: the profile is not initialised");
    for (int l = 1; l < prof->n_layers; l++)
        if (!(prof->fwd_s[l] >= 0 && prof->bwd_s[l] >= 0 && isfinite(prof->fwd_s[l] + prof->bwd_s[l])))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: layer %s has times %g / %g s in the profile", g->layers[l].name,
                             prof->fwd_s[l], prof->bwd_s[l]);
    if (!(prof->load_s >= 0 && prof->update_s >= 0 && isfinite(prof->load_s + prof->update_s)))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: load %g s / update %g s in the profile", prof->load_s, prof->update_s);
    if (!(prof->accum_bytes_per_s > 0))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: the profile's accumulation rate %g B/s is not positive", prof->accum_bytes_per_s);
    const vdnn_copy_model *m[2] = {&prof->d2h, &prof->h2d};
    for (int i = 0; i < 2; i++)
        if (!(m[i]->bytes_per_s > 0) || !(m[i]->latency_s >= 0) || !isfinite(m[i]->latency_s))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: the profile's %s link (latency %g s, %g B/s) is not usable",
                             i ? "host-to-device" : "device-to-host", m[i]->latency_s, m[i]->bytes_per_s);
    return VDNN_OK;
}

vdnn_status vdnn_simulate(const vdnn_plan_t *plan, const vdnn_graph_t *g, const vdnn_profile *prof, vdnn_timeline *out,
                          vdnn_error *err)
{
    memset(out, 0, sizeof *out);
    vdnn_status rc = check_inputs(plan, g, prof, err);
    if (rc) return rc;
    sim s = {.plan = plan, .g = g, .prof = prof, .t = out, .err = err};
    s.done = calloc((size_t)plan->n_events + 1, sizeof *s.done);
    s.recorded = calloc((size_t)plan->n_events + 1, sizeof *s.recorded);
    if (!s.done || !s.recorded) rc = oom(&s);
    /* Persistent blocks are taken when the net is created, not by the iteration's actions. */
    for (int b = 0; rc == VDNN_OK && b < plan->n_blocks; b++)
        if (plan->st[plan->blocks[b].storage].persistent) s.live += plan->blocks[b].bytes;
    if (rc == VDNN_OK) rc = mem_sample(&s);
    for (int si = 0; rc == VDNN_OK && si < plan->n_steps; si++) {
        const vdnn_step *st = &plan->steps[si];
        if (st->first_action < 0 || st->n_actions < 0 || st->first_action + st->n_actions > plan->n_actions)
            rc = bad_action(&s, si, st->first_action, "action range of length", st->n_actions);
        for (int k = 0; rc == VDNN_OK && k < st->n_actions; k++) rc = action(&s, st, si, st->first_action + k);
    }
    if (rc == VDNN_OK) {
        out->iteration_s = fmax(s.lane_free[0], fmax(s.lane_free[1], s.lane_free[2]));
        /* Close the memory curve at the iteration's end. */
        double now = s.lane_free[VDNN_LANE_COMPUTE];
        s.lane_free[VDNN_LANE_COMPUTE] = out->iteration_s;
        rc = mem_sample(&s);
        s.lane_free[VDNN_LANE_COMPUTE] = now;
    }
    free(s.done);
    free(s.recorded);
    if (rc) vdnn_timeline_release(out);
    return rc;
}

void vdnn_timeline_release(vdnn_timeline *t)
{
    free(t->spans);
    free(t->mem);
    memset(t, 0, sizeof *t);
}

void vdnn_timeline_free(vdnn_timeline *t)
{
    if (!t) return;
    vdnn_timeline_release(t);
    free(t);
}

void vdnn_timeline_summarize(const vdnn_timeline *t, vdnn_timeline_summary *s)
{
    *s = (vdnn_timeline_summary){t->iteration_s, t->compute_s, t->stall_s, t->d2h_s, t->h2d_s, t->peak_live_bytes};
}
