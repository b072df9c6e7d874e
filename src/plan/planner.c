/* Shared machinery of the profile-guided planners: classifications saved and restored, judged by
 * simulation, swap-ins scheduled as early as memory allows, a lower bound, the smallest budget. */
#include "plan/planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/policy.h"
#include "mem/offsets.h"
#include "plan/simulate.h"

/* Placement adds fragmentation on top of the live bytes; quick evaluations keep this share free. */
#define FRAGMENTATION_MARGIN 0.03

vdnn_status vdnn_classes_save(const vdnn_plan_t *p, vdnn_classes *c, vdnn_error *err)
{
    int n = p->n_storages_analyzed;
    if (c->n != n) {
        vdnn_classes_release(c);
        c->cls = malloc(sizeof *c->cls * (size_t)n);
        c->prefetch_step = malloc(sizeof(int) * (size_t)n);
        c->recompute_step = malloc(sizeof(int) * (size_t)n);
        if (!c->cls || !c->prefetch_step || !c->recompute_step) {
            vdnn_classes_release(c);
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory in the planner");
        }
        c->n = n;
    }
    for (int i = 0; i < n; i++) {
        c->cls[i] = p->st[i].cls;
        c->prefetch_step[i] = p->st[i].prefetch_step;
        c->recompute_step[i] = p->st[i].recompute_step;
    }
    return VDNN_OK;
}

void vdnn_classes_load(vdnn_plan_t *p, const vdnn_classes *c)
{
    for (int i = 0; i < c->n; i++) {
        p->st[i].cls = c->cls[i];
        p->st[i].prefetch_step = c->prefetch_step[i];
        p->st[i].recompute_step = c->recompute_step[i];
    }
}

void vdnn_classes_release(vdnn_classes *c)
{
    free(c->cls);
    free(c->prefetch_step);
    free(c->recompute_step);
    memset(c, 0, sizeof *c);
}

vdnn_status vdnn_search_begin(vdnn_search *s, vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->g = g;
    s->prof = p->req.profile;
    if (!s->prof) {
        /* No measurements: a generic GPU on a PCIe gen3 link, the papers' setting. */
        vdnn_status rc = vdnn_profile_estimate(g, 1e13, 5e11, 16e9, &s->own_profile, err);
        if (rc != VDNN_OK) return rc;
        s->prof = &s->own_profile;
    }
    s->best_time = 1e300;
    s->least_peak = SIZE_MAX;
    return VDNN_OK;
}

void vdnn_search_release(vdnn_search *s)
{
    vdnn_classes_release(&s->best);
    vdnn_classes_release(&s->least);
    if (s->prof == &s->own_profile) vdnn_profile_release(&s->own_profile);
}

static bool fits_quick(const vdnn_plan_t *p)
{
    double room = p->budget == SIZE_MAX ? 1e300 : (double)p->budget * (1.0 - FRAGMENTATION_MARGIN);
    return (double)p->peak_device_bytes <= room && p->host_bytes <= p->host_budget;
}

vdnn_status vdnn_search_eval(vdnn_search *s, double *time, bool *fits, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    if (rc != VDNN_OK) return rc;
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    rc = vdnn_simulate(p, s->g, s->prof, &tl, err);
    double t = tl.iteration_s;
    vdnn_timeline_release(&tl);
    if (rc != VDNN_OK) return rc;
    s->evaluations++;
    bool ok = fits_quick(p);
    if (ok && t < s->best_time) {
        rc = vdnn_classes_save(p, &s->best, err);
        s->best_time = t;
        s->best_peak = p->peak_device_bytes;
        s->have_best = true;
    }
    if (rc == VDNN_OK && p->peak_device_bytes < s->least_peak) {
        rc = vdnn_classes_save(p, &s->least, err);
        s->least_peak = p->peak_device_bytes;
    }
    if (time) *time = t;
    if (fits) *fits = ok;
    return rc;
}

vdnn_status vdnn_search_eval_early(vdnn_search *s, double *time, bool *fits, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) p->st[i].prefetch_step = -1;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    size_t margin = p->budget == SIZE_MAX ? 0 : (size_t)((double)p->budget * FRAGMENTATION_MARGIN);
    if (rc == VDNN_OK) rc = vdnn_schedule_prefetch_early(p, margin, err);
    if (rc == VDNN_OK) rc = vdnn_search_eval(s, time, fits, err);
    return rc;
}

vdnn_status vdnn_search_stalls(vdnn_search *s, double *offload_stall, double *prefetch_stall, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    for (int i = 0; i < p->n_storages_analyzed; i++) offload_stall[i] = prefetch_stall[i] = 0;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    if (rc == VDNN_OK) rc = vdnn_simulate(p, s->g, s->prof, &tl, err);
    for (int k = 0; rc == VDNN_OK && k < tl.n_spans; k++) {
        const vdnn_span *sp = &tl.spans[k];
        if (sp->kind != VDNN_SPAN_STALL || sp->action < 0) continue;
        const vdnn_action *a = &p->actions[sp->action];
        if (a->kind != VDNN_ACT_WAIT || a->a < 0 || a->a >= p->n_storages_analyzed) continue;
        double d = sp->end - sp->start;
        /* Events come in pairs per swapped storage: even = copy out, odd = copy back. */
        if (a->event % 2 == 0) offload_stall[a->a] += d;
        else prefetch_stall[a->a] += d;
    }
    vdnn_timeline_release(&tl);
    return rc;
}

vdnn_status vdnn_search_finish(vdnn_search *s, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_classes_load(p, s->have_best ? &s->best : &s->least);
    vdnn_status rc = vdnn_plan_finalize(p, err);
    if (rc != VDNN_OK || p->feasible || !s->have_best) return rc;
    /* Placement fragmented more than the margin allowed: bring swapped maps back just in time. */
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) p->st[i].prefetch_step = -1;
    rc = vdnn_plan_finalize(p, err);
    if (rc != VDNN_OK || p->feasible) return rc;
    vdnn_classes_load(p, &s->least);
    return vdnn_plan_finalize(p, err);
}

vdnn_status vdnn_schedule_prefetch_early(vdnn_plan_t *p, size_t margin, vdnn_error *err)
{
    if (p->budget == SIZE_MAX) return VDNN_OK;
    size_t *live = calloc((size_t)p->n_steps, sizeof(size_t));
    int *order = malloc(sizeof(int) * (size_t)p->n_storages + 1);
    if (!live || !order) {
        free(live);
        free(order);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory scheduling prefetches");
    }
    vdnn_plan_live_bytes(p, live);
    size_t limit = p->budget > margin ? p->budget - margin : 0;
    /* The earliest-needed first: they gain most from an early start. */
    int n = 0;
    for (int i = 0; i < p->n_storages; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) order[n++] = i;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && p->st[order[b]].need_step < p->st[order[b - 1]].need_step; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    const int first_bwd = p->n_layers; /* the first backward step */
    for (int k = 0; k < n; k++) {
        vdnn_storage *x = &p->st[order[k]];
        size_t bytes = vdnn_align_up(x->bytes);
        int lo = x->last_fwd_use + 1 > first_bwd ? x->last_fwd_use + 1 : first_bwd;
        int q = x->prefetch_step;
        while (q - 1 >= lo && live[q - 1] + bytes <= limit) q--;
        for (int t = q; t < x->prefetch_step; t++) live[t] += bytes;
        x->prefetch_step = q;
    }
    free(live);
    free(order);
    return VDNN_OK;
}

double vdnn_plan_lower_bound(const vdnn_plan_t *p, const vdnn_graph_t *g, const vdnn_profile *prof)
{
    /* Compute every plan runs. */
    double compute = prof->load_s + prof->update_s;
    for (int l = 1; l < g->n_layers; l++) compute += prof->fwd_s[l] + prof->bwd_s[l];
    if (p->budget == SIZE_MAX) return compute;
    size_t *live = calloc((size_t)p->n_steps, sizeof(size_t));
    if (!live) return compute;
    /* With everything kept, at each step s the bytes over budget must be off the device: each evicted
     * byte was either copied out before s (the link is busy at most the time up to s, the rest of the
     * copy is exposed) or is recomputed (at its producer's forward cost per byte, cheapest first). */
    double extra = 0;
    for (int s = 0; s < p->n_steps; s++) live[s] = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) {
        const vdnn_storage *x = &p->st[i];
        int end = x->persistent ? p->n_steps - 1 : x->last_use;
        int begin = x->persistent ? 0 : x->def_step;
        if (begin < 0) continue;
        for (int t = begin; t <= end; t++) live[t] += vdnn_align_up(x->bytes);
    }
    double t_before = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const vdnn_step *st = &p->steps[s];
        if (live[s] > p->budget) {
            double over = (double)(live[s] - p->budget);
            /* Candidates evictable at s: saved feature maps not used in step s. */
            double swap_cost = over / prof->d2h.bytes_per_s - t_before;
            if (swap_cost < 0) swap_cost = 0;
            double best_rc = 0, need = over;
            /* Recompute: cheapest seconds per byte first (a simple selection). */
            int n = p->n_storages_analyzed;
            char *used = calloc((size_t)n, 1);
            while (need > 0 && used) {
                int pick = -1;
                double pick_rate = 1e300;
                for (int i = 0; i < n; i++) {
                    const vdnn_storage *x = &p->st[i];
                    if (used[i] || !x->candidate || x->layer == 0 || x->kind != VDNN_ST_FMAP) continue;
                    if (!(x->last_fwd_use < s && s < x->first_bwd_use)) continue;
                    double rate = prof->fwd_s[x->layer] / (double)x->bytes;
                    if (rate < pick_rate) {
                        pick_rate = rate;
                        pick = i;
                    }
                }
                if (pick < 0) {
                    best_rc = 1e300;
                    break;
                }
                used[pick] = 1;
                double take = (double)p->st[pick].bytes < need ? (double)p->st[pick].bytes : need;
                best_rc += take * pick_rate;
                need -= take;
            }
            free(used);
            double c = swap_cost < best_rc ? swap_cost : best_rc;
            if (c > extra && c < 1e299) extra = c;
        }
        if (st->kind == VDNN_STEP_FWD) t_before += prof->fwd_s[st->layer];
        else if (st->kind == VDNN_STEP_BWD) t_before += prof->bwd_s[st->layer];
        else if (st->kind == VDNN_STEP_LOAD) t_before += prof->load_s;
    }
    free(live);
    return compute + extra;
}

vdnn_status vdnn_plan_min_budget(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err)
{
    vdnn_plan_request r = *req;
    r.budget = SIZE_MAX;
    r.host_budget = SIZE_MAX;
    r.policy = VDNN_POLICY_NONE;
    vdnn_plan_t *p = NULL;
    vdnn_status rc = vdnn_plan_analyze(g, info, &r, &p, err);
    if (rc != VDNN_OK) return rc;
    size_t best = SIZE_MAX;
    /* The static policies, a mix that swaps what is expensive to rebuild and recomputes the rest,
     * and Chen's checkpoints (swapped) at a few spacings. */
    int n = vdnn_chen_candidates(p);
    for (int mix = 0; rc == VDNN_OK && mix < 8; mix++) {
        if (mix < 3) {
            vdnn_policy_static(p, g, (vdnn_policy)mix);
        } else if (mix == 3) {
            for (int i = 0; i < p->n_storages; i++) {
                vdnn_storage *s = &p->st[i];
                s->cls = VDNN_CLASS_KEEP;
                s->prefetch_step = s->recompute_step = -1;
                if (!s->candidate) continue;
                bool cheap = s->kind == VDNN_ST_FMAP && s->layer > 0 && g->layers[s->layer].kind != VDNN_LAYER_CONV &&
                             g->layers[s->layer].kind != VDNN_LAYER_FC;
                s->cls = cheap ? VDNN_CLASS_RECOMPUTE : VDNN_CLASS_SWAP;
            }
        } else {
            static const double spacing[4] = {1.0, 0.5, 2.0, 4.0};
            int k = (int)(spacing[mix - 4] * sqrt((double)(n > 0 ? n : 1)) + 0.5);
            vdnn_chen_classes(p, g, k < 1 ? 1 : k, true);
        }
        rc = vdnn_plan_finalize(p, err);
        if (rc == VDNN_OK && p->peak_device_bytes < best) best = p->peak_device_bytes;
    }
    vdnn_plan_free(p);
    *out = best;
    return rc;
}
