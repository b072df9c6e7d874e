/* auto, our planner and the default: run every other planner, take the fastest simulated plan that
 * fits, then improve it by local search (each saved feature map tried as keep, swap and recompute,
 * swap-ins scheduled as early as memory allows) until no single change helps. Host memory for swaps
 * is a budgeted resource: a plan over the host budget does not fit. Where the parameters on the device leave
 * no plan that fits, or one that must evict maps, the search runs again with them homed in host memory. */
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "plan/policy.h"
#include "plan/simulate.h"

/* Local search stops after this many simulations (each pass tries every saved map twice). */
#define AUTO_MAX_EVALUATIONS 3000

/* Classes the caller set (a static policy's, or a mix of them) that the search's quick placement does not fit: the
 * static policy's own plan gets the tight placement too (plan_build.c), so they are a fallback where that fits.
 * Placed only where they would be the fastest fallback (a tight placement costs more than a quick one). */
static vdnn_status try_tight(vdnn_search *s, double t, vdnn_error *err)
{
    if (s->have_placed && t >= s->placed_time) return VDNN_OK;
    bool fits = false;
    vdnn_status rc = vdnn_search_fits(s, &fits, err);
    if (rc != VDNN_OK || fits) return rc;
    rc = vdnn_plan_finalize(s->p, err);
    if (rc == VDNN_OK && !s->p->feasible) rc = vdnn_plan_place_tight(s->p, err);
    if (rc == VDNN_OK && s->p->feasible) rc = vdnn_search_placed(s, t, err);
    return rc;
}

/* Judges the classes a planner chose (run) or the caller set (run NULL) as they are, then with
 * early swap-ins. A planner's plan that it found to fit, and a static policy's that fits as that policy places it,
 * are kept as fallbacks: auto's plan is never slower than either. */
static vdnn_status try_planner(vdnn_search *s, vdnn_status (*run)(vdnn_plan_t *, const vdnn_graph_t *, vdnn_error *),
                               vdnn_error *err)
{
    vdnn_status rc = run ? run(s->p, s->g, err) : VDNN_OK;
    const bool placed = run && rc == VDNN_OK && s->p->feasible;
    double t = 0;
    if (rc == VDNN_OK) rc = vdnn_search_eval(s, &t, NULL, err);
    if (rc == VDNN_OK && placed) rc = vdnn_search_placed(s, t, err);
    if (rc == VDNN_OK && !run) rc = try_tight(s, t, err);
    if (rc == VDNN_OK) rc = vdnn_search_eval_early(s, NULL, NULL, err);
    return rc;
}

static vdnn_status local_search(vdnn_search *s, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc = VDNN_OK;
    bool improved = true;
    while (rc == VDNN_OK && improved && s->evaluations < AUTO_MAX_EVALUATIONS) {
        improved = false;
        vdnn_classes_load(p, &s->best);
        /* Each layer's other algorithms (a leaner one may let a map stay, a faster one may fit). */
        for (int l = 1; rc == VDNN_OK && p->choose_algos && l < p->n_layers && s->evaluations < AUTO_MAX_EVALUATIONS; l++) {
            const int was = p->algo[l];
            for (int k = 0; rc == VDNN_OK && k < p->cands[l].n; k++) {
                if (k == was) continue;
                vdnn_plan_set_algo(p, l, k);
                const double before = s->best_time;
                rc = vdnn_search_eval_early(s, NULL, NULL, err);
                if (rc == VDNN_OK && s->best_time < before) {
                    improved = true;
                    vdnn_classes_load(p, &s->best);
                    break;
                }
                vdnn_plan_set_algo(p, l, was);
            }
        }
        for (int i = 0; rc == VDNN_OK && i < p->n_storages_analyzed && s->evaluations < AUTO_MAX_EVALUATIONS; i++) {
            /* By index, not by pointer: an evaluation may add storages (recompute workspaces) and move p->st. */
            if (!p->st[i].candidate) continue;
            vdnn_tensor_class was = p->st[i].cls;
            const bool recomputable = p->st[i].kind == VDNN_ST_FMAP && p->st[i].layer != 0;
            for (int c = 0; rc == VDNN_OK && c < 3; c++) {
                vdnn_tensor_class to = (vdnn_tensor_class)c;
                if (to == was || (to == VDNN_CLASS_RECOMPUTE && !recomputable)) continue;
                p->st[i].cls = to;
                /* A change is kept when it makes a new best: faster, and placed within the budget. */
                const double before = s->best_time;
                rc = vdnn_search_eval_early(s, NULL, NULL, err);
                if (rc == VDNN_OK && s->best_time < before) {
                    was = to;
                    improved = true;
                }
                p->st[i].cls = was;
            }
        }
    }
    return rc;
}

/* One whole search under the plan's current offload_params; *t gets the result's simulated seconds. */
static vdnn_status auto_search(vdnn_plan_t *p, const vdnn_graph_t *g, double *t, vdnn_error *err)
{
    vdnn_search s;
    vdnn_status rc = vdnn_search_begin(&s, p, g, err);
    /* The static policies and the most memory-saving mixes (so that auto fits wherever any known
     * plan does), then every other planner's choice. */
    for (int lean = 0; lean < (p->choose_algos ? 2 : 1); lean++) {
        vdnn_plan_use_algos(p, lean);
        for (int mix = 0; rc == VDNN_OK && mix < VDNN_MEMORY_MIXES; mix++) {
            vdnn_memory_mix(p, g, mix);
            rc = try_planner(&s, NULL, err);
        }
    }
    vdnn_plan_use_algos(p, false);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_recompute, err);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_dyn, err);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_pooch, err);
    if (rc == VDNN_OK && s.have_best) rc = local_search(&s, err);
    if (rc == VDNN_OK) rc = vdnn_search_finish(&s, err);
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    if (rc == VDNN_OK) rc = vdnn_simulate(p, g, s.prof, &tl, err);
    *t = tl.iteration_s;
    vdnn_timeline_release(&tl);
    vdnn_search_release(&s);
    return rc;
}

static vdnn_status auto_plan(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);

static bool evicts(const vdnn_plan_t *p)
{
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].cls != VDNN_CLASS_KEEP) return true;
    return false;
}

/* Where nothing fits, the whole search again on the plan's graph with convolution inputs streamed (a plan of
 * other storages: analyzed afresh); its plan replaces p's if it fits, or comes closer. */
static vdnn_status try_streaming(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_plan_request rq = p->req;
    rq.memory.policy = p->policy;
    rq.memory.offload_params = p->offload_params;
    rq.memory.stream_inputs = true;
    rq.fuse_shared = p->offload_params && !p->shared_steps; /* the update schedule it has */
    rq.keep_weight_grads = !p->fused_update && !p->update_steps;
    const char *why;
    if (!vdnn_plan_stream_supported(&rq, &why)) return VDNN_OK;
    vdnn_plan_t *q = NULL;
    vdnn_status rc = vdnn_plan_analyze(g, p->req_info, &rq, &q, err);
    if (rc == VDNN_OK && !vdnn_plan_streamed_layers(q)) {
        vdnn_plan_free(q);
        return VDNN_OK;
    }
    if (rc == VDNN_OK) rc = vdnn_planner_auto(q, g, err);
    if (rc == VDNN_OK && (q->feasible || q->peak_device_bytes < p->peak_device_bytes)) {
        vdnn_plan_t t = *p;
        *p = *q;
        *q = t;
    }
    vdnn_plan_free(q);
    return rc;
}

vdnn_status vdnn_planner_auto(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_status rc = auto_plan(p, g, err);
    if (rc == VDNN_OK && !p->feasible && !p->stream_inputs && p->req.memory.budget != SIZE_MAX) rc = try_streaming(p, g, err);
    return rc;
}

/* Which of two searched plans auto keeps: the one that fits, both fitting the faster, neither the smaller. */
static bool better(const vdnn_plan_t *a, double ta, const vdnn_plan_t *b, double tb)
{
    if (a->feasible != b->feasible) return a->feasible;
    return a->feasible ? ta < tb : a->peak_device_bytes < b->peak_device_bytes;
}

/* The search again with the parameters homed, on p itself; where homing can also give the plan other steps (shared
 * parameters' update steps), on a plan analyzed afresh with them too, left in *q where it is the better (NULL
 * otherwise); *t gets the kept one's simulated seconds. */
static vdnn_status home_search(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_plan_t **q, double *t, vdnn_error *err)
{
    *q = NULL;
    const bool steps_too = vdnn_plan_offload_changes_steps(p);
    vdnn_plan_set_offload_params(p, true);
    vdnn_status rc = auto_search(p, g, t, err);
    if (rc != VDNN_OK || !steps_too) return rc;
    vdnn_plan_request rq = p->req;
    rq.memory.policy = p->policy;
    rq.memory.offload_params = true;
    rq.memory.stream_inputs = p->stream_inputs;
    rq.fuse_shared = false;
    double tq = 0;
    rc = vdnn_plan_analyze(g, p->req_info, &rq, q, err);
    if (rc == VDNN_OK) rc = auto_search(*q, g, &tq, err);
    if (rc == VDNN_OK && better(*q, tq, p, *t)) {
        *t = tq;
        return VDNN_OK;
    }
    vdnn_plan_free(*q);
    *q = NULL;
    return rc;
}

static vdnn_status auto_plan(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    double t_dev = 0, t_home = 0;
    vdnn_status rc = auto_search(p, g, &t_dev, err);
    /* Parameters homed in host memory (unless asked for, or impossible): searched again where the plan with
     * them on the device does not fit, or fits only by evicting maps, which the room they leave may spare.
     * Kept if that fits where the other does not, or is faster by the simulation. */
    const bool can_home = p->training && (p->fused_update || p->update_steps) && p->held_batches == 1 &&
                          p->policy != VDNN_POLICY_UM;
    if (rc != VDNN_OK || p->offload_params || !can_home || p->req.memory.budget == SIZE_MAX || (p->feasible && !evicts(p)))
        return rc;
    const bool dev_fits = p->feasible;
    const size_t dev_peak = p->peak_device_bytes;
    vdnn_classes dev;
    memset(&dev, 0, sizeof dev);
    rc = vdnn_classes_save(p, &dev, err);
    vdnn_plan_t *q = NULL;
    if (rc == VDNN_OK) rc = home_search(p, g, &q, &t_home, err);
    const vdnn_plan_t *h = q ? q : p;
    /* Neither fitting, the one closer to the budget stays (it names what is missing). */
    const bool take_home = h->feasible ? !dev_fits || t_home < t_dev : !dev_fits && h->peak_device_bytes < dev_peak;
    if (rc == VDNN_OK && q && take_home) {
        vdnn_plan_t t = *p;
        *p = *q;
        *q = t;
    } else if (rc == VDNN_OK && !take_home) {
        vdnn_plan_set_offload_params(p, false);
        vdnn_classes_load(p, &dev);
        rc = vdnn_plan_finalize(p, err);
        /* As the search left it: it may fit under the tight placement only (vdnn_search_finish). */
        if (rc == VDNN_OK && dev_fits && !p->feasible) rc = vdnn_plan_place_tight(p, err);
    }
    vdnn_classes_release(&dev);
    vdnn_plan_free(q);
    return rc;
}
