/* vDNN's static policies: none (keep all), all (swap every saved feature map), conv (swap convolution inputs). */
#include "plan/policy.h"

#include <string.h>
#include <strings.h>

static const char *policy_names[VDNN_POLICY_COUNT] = {"none", "all", "conv"};

const char *vdnn_policy_name(vdnn_policy p) { return p < VDNN_POLICY_COUNT ? policy_names[p] : "?"; }

bool vdnn_policy_parse(const char *s, vdnn_policy *out)
{
    for (int i = 0; i < VDNN_POLICY_COUNT; i++) {
        if (!strcasecmp(s, policy_names[i])) {
            *out = (vdnn_policy)i;
            return true;
        }
    }
    return false;
}

/* A feature map is worth swapping only if the device could do without it for at least one
 * step between its last forward use and its first backward use. */
static bool swappable(const vdnn_storage *s)
{
    return (s->kind == VDNN_ST_FMAP || s->kind == VDNN_ST_AUX) && s->first_bwd_use >= 0 && s->last_fwd_use >= 0 &&
           s->first_bwd_use > s->last_fwd_use + 1;
}

static bool feeds_conv(const vdnn_plan_t *p, const vdnn_graph_t *g, int st)
{
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        if (ly->kind != VDNN_LAYER_CONV) continue;
        for (int i = 0; i < ly->n_inputs; i++)
            if (p->ls[ly->inputs[i]].out == st) return true;
    }
    return false;
}

vdnn_status vdnn_policy_classify(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    for (int i = 0; i < p->n_storages; i++) {
        vdnn_storage *s = &p->st[i];
        s->cls = VDNN_CLASS_KEEP;
        if (!p->training || !swappable(s)) continue;
        bool swap = false;
        switch (p->policy) {
        case VDNN_POLICY_NONE: break;
        case VDNN_POLICY_ALL: swap = true; break;
        case VDNN_POLICY_CONV: swap = s->kind == VDNN_ST_FMAP && feeds_conv(p, g, i); break;
        default: return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "unknown policy %d", (int)p->policy);
        }
        if (!swap) continue;
        s->cls = VDNN_CLASS_SWAP;
        /* vDNN prefetches one layer ahead: the copy back starts with the backward step
         * before the first one that reads it. */
        s->prefetch_step = s->first_bwd_use - 1;
    }
    return VDNN_OK;
}
