/* auto, our planner and the default: run every other planner, take the fastest simulated plan that
 * fits, then improve it by local search (each saved feature map tried as keep, swap and recompute,
 * swap-ins scheduled as early as memory allows) until no single change helps. Host memory for swaps
 * is a budgeted resource: a plan over the host budget does not fit. */
#include <stdlib.h>

#include "plan/planner.h"
#include "plan/policy.h"

/* Local search stops after this many simulations (each pass tries every saved map twice). */
#define AUTO_MAX_EVALUATIONS 20000

static vdnn_status try_planner(vdnn_search *s, vdnn_status (*run)(vdnn_plan_t *, const vdnn_graph_t *, vdnn_error *),
                               vdnn_policy static_policy, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc;
    if (run) {
        rc = run(p, s->g, err);
    } else {
        vdnn_policy_static(p, s->g, static_policy);
        rc = vdnn_plan_finalize_ex(p, false, err);
    }
    /* Judge the planner's own schedule, then the same classes with early swap-ins. */
    if (rc == VDNN_OK) rc = vdnn_search_eval(s, NULL, NULL, err);
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
        double cur = s->best_time;
        for (int i = 0; rc == VDNN_OK && i < p->n_storages_analyzed && s->evaluations < AUTO_MAX_EVALUATIONS; i++) {
            vdnn_storage *x = &p->st[i];
            if (!x->candidate) continue;
            vdnn_tensor_class was = x->cls;
            for (int c = 0; rc == VDNN_OK && c < 3; c++) {
                vdnn_tensor_class to = (vdnn_tensor_class)c;
                if (to == was || (to == VDNN_CLASS_RECOMPUTE && (x->kind != VDNN_ST_FMAP || x->layer == 0))) continue;
                x->cls = to;
                double t;
                bool fits;
                rc = vdnn_search_eval_early(s, &t, &fits, err);
                if (rc == VDNN_OK && fits && t < cur - 1e-12) {
                    cur = t;
                    was = to;
                    improved = true;
                }
                x->cls = was;
            }
        }
    }
    return rc;
}

vdnn_status vdnn_planner_auto(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_search s;
    vdnn_status rc = vdnn_search_begin(&s, p, g, err);
    static const vdnn_policy statics[3] = {VDNN_POLICY_NONE, VDNN_POLICY_CONV, VDNN_POLICY_ALL};
    for (int k = 0; rc == VDNN_OK && k < 3; k++) rc = try_planner(&s, NULL, statics[k], err);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_recompute, VDNN_POLICY_NONE, err);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_dyn, VDNN_POLICY_NONE, err);
    if (rc == VDNN_OK) rc = try_planner(&s, vdnn_planner_pooch, VDNN_POLICY_NONE, err);
    if (rc == VDNN_OK && s.have_best) rc = local_search(&s, err);
    if (rc == VDNN_OK) rc = vdnn_search_finish(&s, err);
    vdnn_search_release(&s);
    return rc;
}
