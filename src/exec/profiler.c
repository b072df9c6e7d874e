/* Measuring a profile on the real backend: per-layer times from recorded iterations (medians), and the
 * copy link's latency and bandwidth fitted to copies of growing size in each direction. */
#include "exec/profiler.h"
#include "exec/net_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/timing.h"

#define LINK_REPEATS 3

static vdnn_status time_copy(vdnn_backend_t *be, vdnn_queue_id q, void *dst, const void *src, size_t bytes,
                             vdnn_event *ev, double *seconds, vdnn_error *err)
{
    vdnn_status rc = be->ops->sync_all(be, err);
    if (rc) return rc;
    double t0 = be->ops->now(be), t1 = t0;
    if (be->ops->set_timing) be->ops->set_timing(be, true);
    rc = be->ops->copy_async(be, q, dst, src, bytes, q == VDNN_QUEUE_D2H ? VDNN_COPY_D2H : VDNN_COPY_H2D, err);
    if (!rc) rc = be->ops->event_record(be, ev, q, err);
    if (be->ops->set_timing) be->ops->set_timing(be, false);
    if (!rc) rc = be->ops->event_time(be, ev, &t1, err);
    *seconds = t1 - t0;
    return rc;
}

vdnn_status vdnn_profile_measure_link(vdnn_backend_t *be, size_t max_bytes, vdnn_profile *p, vdnn_error *err)
{
    if (!be->ops->now || !be->ops->event_time)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "profile: the %s backend has no event timing", be->ops->name);
    if (max_bytes < (64u << 10)) max_bytes = 64u << 10;
    int n = 0;
    for (size_t b = 64u << 10; b <= max_bytes; b *= 4) n++;
    void *dev = NULL, *host = NULL;
    vdnn_event *ev = NULL;
    free(p->sample_bytes);
    free(p->sample_d2h_s);
    free(p->sample_h2d_s);
    p->sample_bytes = calloc((size_t)n, sizeof *p->sample_bytes);
    p->sample_d2h_s = calloc((size_t)n, sizeof(double));
    p->sample_h2d_s = calloc((size_t)n, sizeof(double));
    p->n_samples = 0;
    vdnn_status rc = (!p->sample_bytes || !p->sample_d2h_s || !p->sample_h2d_s)
                         ? vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory")
                         : VDNN_OK;
    size_t top = (64u << 10) << (2 * (n - 1));
    if (!rc) rc = be->ops->dev_alloc(be, top, &dev, err);
    if (!rc) rc = be->ops->host_alloc(be, top, &host, err);
    if (!rc) rc = be->ops->event_create(be, &ev, err);
    if (!rc) rc = be->ops->upload(be, dev, memset(host, 1, top), top, err);
    size_t b = 64u << 10;
    for (int i = 0; !rc && i < n; i++, b *= 4) {
        double d2h[LINK_REPEATS], h2d[LINK_REPEATS];
        for (int r = 0; !rc && r < LINK_REPEATS; r++) {
            rc = time_copy(be, VDNN_QUEUE_D2H, host, dev, b, ev, &d2h[r], err);
            if (!rc) rc = time_copy(be, VDNN_QUEUE_H2D, dev, host, b, ev, &h2d[r], err);
        }
        p->sample_bytes[i] = b;
        p->sample_d2h_s[i] = vdnn_median(d2h, LINK_REPEATS);
        p->sample_h2d_s[i] = vdnn_median(h2d, LINK_REPEATS);
        p->n_samples = i + 1;
    }
    if (ev) be->ops->event_destroy(be, ev);
    if (dev) be->ops->dev_free(be, dev);
    if (host) be->ops->host_free(be, host);
    if (!rc) {
        p->d2h = vdnn_copy_model_fit(p->sample_bytes, p->sample_d2h_s, p->n_samples);
        p->h2d = vdnn_copy_model_fit(p->sample_bytes, p->sample_h2d_s, p->n_samples);
    }
    return rc;
}

/* One training step at learning rate 0 (the parameters stay), recorded into *tl (emptied first). */
static vdnn_status record_step(vdnn_net_t *net, const float *images, const int32_t *labels, vdnn_timeline *tl,
                               vdnn_error *err)
{
    vdnn_timeline_release(tl);
    float loss;
    net->rec.tl = tl;
    vdnn_status rc = vdnn_net_train_step(net, images, labels, 0.0f, &loss, err);
    net->rec.tl = NULL;
    return rc;
}

/* Per-layer, load, update and accumulation times of recorded iterations. */
static vdnn_status measure_layers(vdnn_net_t *net, const float *images, const int32_t *labels, int iterations,
                                  vdnn_profile *out, vdnn_error *err)
{
    const vdnn_graph_t *g = net->g;
    const vdnn_plan_t *plan = net->plan_train;
    if (iterations < 1) iterations = 1;
    vdnn_status rc = vdnn_profile_init_graph(out, g, err);
    if (rc) return rc;
    snprintf(out->device, sizeof out->device, "%s", net->be->ops->name);
    out->measured = true;
    const int L = g->n_layers;
    double *fwd = calloc((size_t)L * iterations, sizeof(double));
    double *bwd = calloc((size_t)L * iterations, sizeof(double));
    double *load = calloc((size_t)iterations, sizeof(double)), *upd = calloc((size_t)iterations, sizeof(double));
    double *acc = calloc((size_t)iterations, sizeof(double));
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    if (!fwd || !bwd || !load || !upd || !acc) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    float loss;
    /* Warm-up: first-touch page faults and library caches. */
    if (!rc) rc = vdnn_net_train_step(net, images, labels, 0.0f, &loss, err);
    int n_acc = 0;
    double acc_bytes = 0, acc_time = 0;
    for (int it = 0; !rc && it < iterations; it++) {
        rc = record_step(net, images, labels, &tl, err);
        for (int k = 0; !rc && k < tl.n_spans; k++) {
            const vdnn_span *sp = &tl.spans[k];
            if (sp->lane != VDNN_LANE_COMPUTE || sp->stall) continue;
            const vdnn_step *st = &plan->steps[sp->step];
            double d = sp->end - sp->start;
            switch (sp->kind) {
            case VDNN_SPAN_FWD: fwd[(size_t)st->layer * iterations + it] += d; break;
            case VDNN_SPAN_BWD: bwd[(size_t)st->layer * iterations + it] += d; break;
            case VDNN_SPAN_ACCUM:
                /* The simulator charges accumulations on their own, at this throughput. */
                acc_bytes += (double)plan->st[plan->actions[sp->action].b].bytes;
                acc_time += d;
                n_acc++;
                break;
            case VDNN_SPAN_LOAD: load[it] += d; break;
            case VDNN_SPAN_UPDATE: upd[it] += d; break;
            default: break;
            }
        }
    }
    vdnn_timeline_release(&tl);
    for (int l = 1; !rc && l < L; l++) {
        out->fwd_s[l] = vdnn_median(&fwd[(size_t)l * iterations], iterations);
        out->bwd_s[l] = vdnn_median(&bwd[(size_t)l * iterations], iterations);
    }
    if (!rc) {
        out->load_s = vdnn_median(load, iterations);
        out->update_s = vdnn_median(upd, iterations);
        out->accum_bytes_per_s = n_acc && acc_time > 0 ? acc_bytes / acc_time : 1e10;
    }
    free(fwd);
    free(bwd);
    free(load);
    free(upd);
    free(acc);
    return rc;
}

/* Seconds of [start, end) covered by the union of the copy spans (sorted by start). */
static double copy_overlap(const vdnn_span *const *copies, int n, double start, double end)
{
    double covered = 0, reach = start;
    for (int i = 0; i < n && copies[i]->start < end; i++) {
        double a = copies[i]->start > reach ? copies[i]->start : reach;
        double b = copies[i]->end < end ? copies[i]->end : end;
        if (b > a) {
            covered += b - a;
            reach = b;
        }
    }
    return covered;
}

static int by_start(const void *a, const void *b)
{
    double x = (*(const vdnn_span *const *)a)->start, y = (*(const vdnn_span *const *)b)->start;
    return (x > y) - (x < y);
}

/* What one recorded step of a swapping run says: each copy's bytes and seconds per direction, and each
 * layer span's time against the profile's, with the share of it that copies overlapped. */
typedef struct busy_fit {
    size_t *bytes[2];
    double *secs[2];
    size_t n[2], cap[2];        /* copies recorded, room for them (the plan's copies x steps) */
    double *slowdown;           /* per recorded step: the copy_slowdown its layers say (step_slowdown) */
    int n_steps;
} busy_fit;

/* One step's copy_slowdown: quiet (no copy overlapped) and loud layer spans' seconds d against the profile's base,
 * loud_w the seconds copies overlapped. The quiet spans tell how this step's speed differs from the profile's for
 * other reasons (clock, caches, a neighbour), so only what is left over is the copies' doing. Step by step, so that
 * a slow step is judged against its own quiet spans, and the median of the steps is robust to one of them. */
static double step_slowdown(double quiet_d, double quiet_base, double loud_d, double loud_base, double loud_w)
{
    const double drift = quiet_base > 0.1 * (quiet_base + loud_base) ? quiet_d / quiet_base : 1.0;
    return vdnn_copy_slowdown_fit(loud_d - drift * loud_base, loud_w);
}

static vdnn_status fit_step(const vdnn_net_t *net, const vdnn_timeline *tl, const vdnn_profile *out, busy_fit *f,
                            vdnn_error *err)
{
    const vdnn_plan_t *plan = net->plan_train;
    const vdnn_span **copies = calloc((size_t)tl->n_spans + 1, sizeof *copies);
    if (!copies) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    int nc = 0;
    for (int k = 0; k < tl->n_spans; k++) {
        const vdnn_span *sp = &tl->spans[k];
        if (sp->lane == VDNN_LANE_COMPUTE) continue;
        copies[nc++] = sp;
        int d = sp->lane == VDNN_LANE_H2D;
        if (f->n[d] == f->cap[d]) {
            free(copies);
            return vdnn_fail(err, VDNN_ERR_BACKEND, "profile: a step recorded more copies than its plan issues");
        }
        f->bytes[d][f->n[d]] = plan->st[plan->actions[sp->action].a].bytes;
        f->secs[d][f->n[d]++] = sp->end - sp->start;
    }
    qsort(copies, (size_t)nc, sizeof *copies, by_start);
    double quiet_d = 0, quiet_base = 0, loud_d = 0, loud_base = 0, loud_w = 0;
    for (int k = 0; k < tl->n_spans; k++) {
        const vdnn_span *sp = &tl->spans[k];
        if (sp->lane != VDNN_LANE_COMPUTE || (sp->kind != VDNN_SPAN_FWD && sp->kind != VDNN_SPAN_BWD)) continue;
        int l = plan->steps[sp->step].layer;
        double d = sp->end - sp->start, base = sp->kind == VDNN_SPAN_FWD ? out->fwd_s[l] : out->bwd_s[l];
        if (!(d > 0) || !(base > 0)) continue;
        double share = copy_overlap(copies, nc, sp->start, sp->end) / d;
        if (share < 0.05) {
            quiet_d += d;
            quiet_base += base;
        } else {
            loud_d += d;
            loud_base += base;
            loud_w += share * d;
        }
    }
    if (loud_w > 0) f->slowdown[f->n_steps++] = step_slowdown(quiet_d, quiet_base, loud_d, loud_base, loud_w);
    free(copies);
    return VDNN_OK;
}

/* A copy model for a busy link: the least-squares fit, or, where the sizes were too alike for a slope, the
 * idle latency and the mean rate of the rest. */
static vdnn_copy_model busy_model(const size_t *bytes, const double *secs, int n, const vdnn_copy_model *idle)
{
    vdnn_copy_model m = vdnn_copy_model_fit(bytes, secs, n);
    if (m.bytes_per_s > 0 && m.latency_s >= 0) return m;
    double b = 0, t = 0;
    for (int i = 0; i < n; i++) {
        b += (double)bytes[i];
        t += secs[i] > idle->latency_s ? secs[i] - idle->latency_s : 0;
    }
    return t > 0 ? (vdnn_copy_model){idle->latency_s, b / t} : (vdnn_copy_model){0, 0};
}

vdnn_status vdnn_profile_measure_busy(const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                                      const float *images, const int32_t *labels, int iterations, vdnn_profile *out,
                                      bool *measured, vdnn_error *err)
{
    *measured = false;
    if (!be->ops->now || !be->ops->event_time) return VDNN_OK;
    vdnn_net_options c = *cfg;
    c.memory.policy = VDNN_POLICY_ALL;
    c.memory.budget = SIZE_MAX;
    c.profile = NULL;
    c.memory.poison = false;
    vdnn_net_t *net = NULL;
    vdnn_status rc = vdnn_net_create(g, be, &c, &net, err);
    if (rc == VDNN_ERR_BUDGET || rc == VDNN_ERR_NO_MEMORY) {
        /* No room to swap everything here: plans use the idle link and no slowdown. */
        vdnn_error_clear(err);
        return VDNN_OK;
    }
    if (rc) return rc;
    if (iterations < 1) iterations = 1;
    /* Every step issues the plan's copies once: room for all of them, per direction. */
    busy_fit f;
    memset(&f, 0, sizeof f);
    const vdnn_plan_t *plan = net->plan_train;
    size_t per_step[2] = {0, 0};
    for (int a = 0; a < plan->n_actions; a++)
        if (plan->actions[a].kind == VDNN_ACT_OFFLOAD || plan->actions[a].kind == VDNN_ACT_PREFETCH)
            per_step[plan->actions[a].kind == VDNN_ACT_PREFETCH]++;
    for (int d = 0; d < 2; d++) {
        f.cap[d] = per_step[d] * (size_t)iterations;
        f.bytes[d] = malloc((f.cap[d] + 1) * sizeof *f.bytes[d]);
        f.secs[d] = malloc((f.cap[d] + 1) * sizeof *f.secs[d]);
        if (!f.bytes[d] || !f.secs[d]) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    }
    f.slowdown = malloc((size_t)iterations * sizeof *f.slowdown);
    if (!f.slowdown && !rc) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    /* Warm-up, then the recorded steps. */
    if (!rc) rc = record_step(net, images, labels, &tl, err);
    for (int it = 0; !rc && it < iterations; it++) {
        rc = record_step(net, images, labels, &tl, err);
        if (!rc) rc = fit_step(net, &tl, out, &f, err);
    }
    vdnn_timeline_release(&tl);
    vdnn_net_free(net);
    if (!rc && f.n[0] && f.n[1]) {
        out->d2h_busy = busy_model(f.bytes[0], f.secs[0], (int)f.n[0], &out->d2h);
        out->h2d_busy = busy_model(f.bytes[1], f.secs[1], (int)f.n[1], &out->h2d);
        out->copy_slowdown = f.n_steps ? vdnn_median(f.slowdown, f.n_steps) : 0;
        *measured = true;
    }
    free(f.slowdown);
    for (int d = 0; d < 2; d++) {
        free(f.bytes[d]);
        free(f.secs[d]);
    }
    return rc;
}

vdnn_status vdnn_profile_measure(vdnn_net_t *net, const float *images, const int32_t *labels, int iterations,
                                 size_t max_copy_bytes, vdnn_profile *out, vdnn_error *err)
{
    vdnn_status rc = measure_layers(net, images, labels, iterations, out, err);
    if (!rc) rc = vdnn_profile_measure_link(net->be, max_copy_bytes, out, err);
    return rc;
}

vdnn_status vdnn_profile_measure_algos(const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *cfg,
                                       const float *images, const int32_t *labels, int iterations,
                                       vdnn_profile *out, vdnn_error *err)
{
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    if (!algos) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    vdnn_status rc = vdnn_plan_query_algos(g, be, true, algos, NULL, err);
    for (int l = 1; !rc && l < g->n_layers; l++) {
        out->n_algos[l] = algos[l].n;
        out->algo_fwd_s[l][0] = out->fwd_s[l];
        out->algo_bwd_s[l][0] = out->bwd_s[l];
    }
    for (int k = 1; !rc && k < VDNN_MAX_ALGOS; k++) {
        bool any = false;
        for (int l = 1; l < g->n_layers; l++) any |= algos[l].n > k;
        if (!any) break;
        vdnn_net_options c = *cfg;
        c.memory.conv_algo = k;
        vdnn_net_t *net = NULL;
        vdnn_profile tmp;
        memset(&tmp, 0, sizeof tmp);
        rc = vdnn_net_create(g, be, &c, &net, err);
        if (rc == VDNN_ERR_BUDGET) {
            /* Not runnable within the budget: those candidates stay unmeasured (planned at the default's
             * times, which the profile's consumers see through vdnn_profile_fwd/bwd). */
            for (int l = 1; l < g->n_layers; l++)
                if (out->n_algos[l] > k) out->n_algos[l] = k;
            rc = VDNN_OK;
            break;
        }
        if (!rc) rc = measure_layers(net, images, labels, iterations, &tmp, err);
        for (int l = 1; !rc && l < g->n_layers; l++)
            if (algos[l].n > k) {
                out->algo_fwd_s[l][k] = tmp.fwd_s[l];
                out->algo_bwd_s[l][k] = tmp.bwd_s[l];
            }
        vdnn_profile_release(&tmp);
        vdnn_net_free(net);
    }
    free(algos);
    return rc;
}
