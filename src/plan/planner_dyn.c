/* vDNN_dyn: try configurations from the fastest to the most memory-saving (in-core, swap what vDNN_conv swaps
 * one layer at a time from the first, vDNN_conv, vDNN_all), first with the fastest convolution algorithms and
 * then, where the plan may choose, with the memory-optimal ones, and keep the fastest simulated one that fits.
 * Swap-ins start one layer ahead, as in vDNN. */
#include "plan/planner.h"
#include "plan/policy.h"

/* The configurations under the plan's current algorithms. */
static vdnn_status dyn_configs(vdnn_search *s, vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    static const vdnn_policy order[3] = {VDNN_POLICY_NONE, VDNN_POLICY_CONV, VDNN_POLICY_ALL};
    vdnn_status rc = VDNN_OK;
    for (int k = 0; rc == VDNN_OK && k < 3; k++) {
        vdnn_policy_static(p, g, order[k]);
        rc = vdnn_search_eval(s, NULL, NULL, err);
    }
    /* Greedy between none and conv: offload what conv swaps in forward order (the early layers
     * hold the largest maps), then the remaining feature maps, evaluating every prefix. */
    vdnn_policy_static(p, g, VDNN_POLICY_NONE);
    for (int pass = 0; rc == VDNN_OK && pass < 2; pass++) {
        for (int i = 0; rc == VDNN_OK && i < p->n_storages_analyzed; i++) {
            vdnn_storage *x = &p->st[i];
            if (!x->candidate || x->cls != VDNN_CLASS_KEEP) continue;
            if ((pass == 0) != vdnn_policy_heavy_input(p, g, i)) continue;
            x->cls = VDNN_CLASS_SWAP;
            bool fits = false;
            rc = vdnn_search_eval(s, NULL, &fits, err);
            if (fits) break;
        }
        if (s->have_best) break;
    }
    return rc;
}

vdnn_status vdnn_planner_dyn(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_search s;
    vdnn_status rc = vdnn_search_begin(&s, p, g, err);
    for (int lean = 0; rc == VDNN_OK && lean < (p->choose_algos ? 2 : 1); lean++) {
        vdnn_plan_use_algos(p, lean);
        rc = dyn_configs(&s, p, g, err);
    }
    if (rc == VDNN_OK) rc = vdnn_search_finish(&s, err);
    vdnn_search_release(&s);
    return rc;
}
