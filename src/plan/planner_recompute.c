/* The recompute planner (Chen et al. 2016, "Training deep nets with sublinear memory cost"): keep a
 * checkpoint every k saved feature maps, recompute the rest before backward, with k searched around
 * sqrt(n) for the fastest plan that fits the budget. */
#include <math.h>

#include "plan/planner.h"
#include "plan/policy.h"

int vdnn_chen_candidates(const vdnn_plan_t *p)
{
    int n = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++)
        n += p->st[i].candidate && p->st[i].kind == VDNN_ST_FMAP;
    return n;
}

void vdnn_chen_classes(vdnn_plan_t *p, const vdnn_graph_t *g, int k, bool swap_checkpoints)
{
    int idx = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) {
        vdnn_storage *s = &p->st[i];
        s->cls = VDNN_CLASS_KEEP;
        s->prefetch_step = s->recompute_step = -1;
        if (!s->candidate || s->kind != VDNN_ST_FMAP) continue;
        /* Storages are in topological order of their producers; the input cannot be recomputed. */
        bool checkpoint = s->layer == 0 || idx % k == 0;
        idx++;
        if (checkpoint) s->cls = swap_checkpoints ? VDNN_CLASS_SWAP : VDNN_CLASS_KEEP;
        else s->cls = VDNN_CLASS_RECOMPUTE;
    }
    (void)g;
}

vdnn_status vdnn_planner_recompute(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_search s;
    vdnn_status rc = vdnn_search_begin(&s, p, g, err);
    int n = vdnn_chen_candidates(p);
    /* In-core first: recomputing nothing is fastest when it fits. */
    if (rc == VDNN_OK) {
        vdnn_policy_static(p, g, VDNN_POLICY_NONE);
        rc = vdnn_search_eval(&s, NULL, NULL, err);
    }
    /* Then every spacing; sqrt(n) is Chen's choice for an unconstrained budget. Larger k recomputes
     * longer segments from fewer checkpoints. */
    for (int k = 1; rc == VDNN_OK && k <= n; k++) {
        vdnn_chen_classes(p, g, k, false);
        rc = vdnn_search_eval(&s, NULL, NULL, err);
    }
    if (rc == VDNN_OK && !s.have_best)
        for (int k = 1; rc == VDNN_OK && k <= n; k++) {
            vdnn_chen_classes(p, g, k, true);
            rc = vdnn_search_eval(&s, NULL, NULL, err);
        }
    (void)sqrt;
    if (rc == VDNN_OK) rc = vdnn_search_finish(&s, err);
    vdnn_search_release(&s);
    return rc;
}
