/* vDNN's static policies: none (keep all), all (swap every saved feature map), conv (swap the inputs of the
 * compute-heavy layers), and um (all's classes in Unified Memory). The profile-guided ones live in planner_*.c,
 * the names in planner_table.c. */
#include "plan/policy.h"

/* vDNN_conv swaps what the layers with long compute read, so that the compute hides the copy. On image networks
 * that is convolutions alone: their fully-connected layers stay out, as in vDNN's paper, so CNN plans keep their
 * classes. Sequence models have no convolutions; their GEMM layers (linear over the last dimension, attention's
 * scores and mix, LSTM chunks) play that part. */
bool vdnn_layer_compute_heavy(vdnn_layer_kind k)
{
    switch (k) {
    case VDNN_LAYER_CONV:
    case VDNN_LAYER_LINEAR:
    case VDNN_LAYER_ATTN_PROBS:
    case VDNN_LAYER_ATTN_MIX:
    case VDNN_LAYER_ATTN:
    case VDNN_LAYER_LSTM:
        return true;
    default:
        return false;
    }
}

bool vdnn_policy_heavy_input(const vdnn_plan_t *p, const vdnn_graph_t *g, int st)
{
    if (p->st[st].kind != VDNN_ST_FMAP) return false;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        if (!vdnn_layer_compute_heavy(ly->kind)) continue;
        for (int i = 0; i < ly->n_inputs; i++)
            if (p->ls[ly->inputs[i]].out == st) return true;
    }
    return false;
}

void vdnn_policy_static(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_policy policy)
{
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        s->cls = VDNN_CLASS_KEEP;
        s->prefetch_step = s->recompute_step = -1;
        if (!s->candidate) continue;
        bool swap = policy == VDNN_POLICY_ALL || (policy == VDNN_POLICY_CONV && vdnn_policy_heavy_input(p, g, i));
        /* vDNN prefetches one layer ahead: -1 lets finalize start the copy back with the
         * step before the first one that needs it. */
        if (swap) s->cls = VDNN_CLASS_SWAP;
    }
}

vdnn_status vdnn_policy_classify_static(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    (void)err;
    /* OC-DNN moves what vDNN_all moves; only where the maps live and how they move differ (plan.c, exec.c). */
    vdnn_policy_static(p, g, p->policy == VDNN_POLICY_UM ? VDNN_POLICY_ALL : p->policy);
    return VDNN_OK;
}
