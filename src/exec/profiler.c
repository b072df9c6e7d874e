/* Measuring a profile on the real backend: per-layer times from recorded iterations (medians), and the
 * copy link's latency and bandwidth fitted to copies of growing size in each direction. */
#include "exec/profiler.h"

#include <stdlib.h>
#include <string.h>

#include "core/timing.h"

#define LINK_REPEATS 3

static vdnn_status time_copy(vdnn_backend_t *be, vdnn_queue_id q, void *dst, const void *src, size_t bytes,
                             vdnn_event *ev, double *seconds, vdnn_error *err)
{
    vdnn_status rc = be->ops->sync_all(be, err);
    if (rc) return rc;
    double t0 = be->ops->now(be), t1;
    rc = be->ops->copy_async(be, q, dst, src, bytes, q == VDNN_QUEUE_D2H ? VDNN_COPY_D2H : VDNN_COPY_H2D, err);
    if (!rc) rc = be->ops->event_record(be, ev, q, err);
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
        vdnn_timeline_release(&tl);
        memset(&tl, 0, sizeof tl);
        net->rec.tl = &tl;
        rc = vdnn_net_train_step(net, images, labels, 0.0f, &loss, err);
        net->rec.tl = NULL;
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

#define CONTENTION_COPY_BYTES ((size_t)32 << 20)
#define CONTENTION_MAX_COPIES 4096

/* Compute seconds (forward and backward spans) of one recorded step. */
static vdnn_status step_compute(vdnn_net_t *net, const float *images, const int32_t *labels, double *seconds,
                                vdnn_error *err)
{
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    float loss;
    net->rec.tl = &tl;
    vdnn_status rc = vdnn_net_train_step(net, images, labels, 0.0f, &loss, err);
    net->rec.tl = NULL;
    *seconds = 0;
    for (int k = 0; !rc && k < tl.n_spans; k++) {
        const vdnn_span *sp = &tl.spans[k];
        if (sp->lane == VDNN_LANE_COMPUTE && !sp->stall && (sp->kind == VDNN_SPAN_FWD || sp->kind == VDNN_SPAN_BWD))
            *seconds += sp->end - sp->start;
    }
    vdnn_timeline_release(&tl);
    return rc;
}

/* How much longer compute takes while copies run: steps alone and steps under a stream of device-to-host
 * copies that lasts the whole step (the median of each, over `iterations` pairs). */
static vdnn_status measure_contention(vdnn_net_t *net, const float *images, const int32_t *labels, int iterations,
                                      vdnn_profile *out, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    double step_s = out->load_s + out->update_s;
    for (int l = 1; l < out->n_layers; l++) step_s += out->fwd_s[l] + out->bwd_s[l];
    const double copy_s = vdnn_copy_seconds(&out->d2h, CONTENTION_COPY_BYTES);
    int n = copy_s > 0 ? (int)(1.5 * step_s / copy_s) + 1 : 1;
    if (n > CONTENTION_MAX_COPIES) n = CONTENTION_MAX_COPIES;
    void *dev = NULL, *host = NULL;
    double *alone = calloc((size_t)iterations, sizeof(double)), *busy = calloc((size_t)iterations, sizeof(double));
    vdnn_status rc = alone && busy ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    if (!rc) rc = be->ops->dev_alloc(be, CONTENTION_COPY_BYTES, &dev, err);
    if (!rc) rc = be->ops->host_alloc(be, CONTENTION_COPY_BYTES, &host, err);
    if (!rc) rc = be->ops->fill(be, dev, 0.0f, CONTENTION_COPY_BYTES / sizeof(float), err);
    for (int it = 0; !rc && it < iterations; it++) {
        rc = step_compute(net, images, labels, &alone[it], err);
        for (int c = 0; !rc && c < n; c++)
            rc = be->ops->copy_async(be, VDNN_QUEUE_D2H, host, dev, CONTENTION_COPY_BYTES, VDNN_COPY_D2H, err);
        if (!rc) rc = step_compute(net, images, labels, &busy[it], err);
        vdnn_status rs = be->ops->sync_all(be, rc ? NULL : err);
        if (!rc) rc = rs;
    }
    if (!rc) {
        double a = vdnn_median(alone, iterations), b = vdnn_median(busy, iterations);
        out->copy_slowdown = a > 0 && b > a ? b / a - 1 : 0;
    }
    if (dev) be->ops->dev_free(be, dev);
    if (host) be->ops->host_free(be, host);
    free(alone);
    free(busy);
    return rc;
}

vdnn_status vdnn_profile_measure(vdnn_net_t *net, const float *images, const int32_t *labels, int iterations,
                                 size_t max_copy_bytes, vdnn_profile *out, vdnn_error *err)
{
    vdnn_status rc = measure_layers(net, images, labels, iterations, out, err);
    if (!rc) rc = vdnn_profile_measure_link(net->be, max_copy_bytes, out, err);
    if (!rc) rc = measure_contention(net, images, labels, iterations, out, err);
    return rc;
}

vdnn_status vdnn_profile_measure_algos(vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_config *cfg,
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
        vdnn_net_config c = *cfg;
        c.algo = k;
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
