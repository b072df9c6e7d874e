/* The planners' table (see planner_table.h), and the policy names and descriptions of the public API, which
 * come from it so that a new planner is one row here. */
#include "plan/planner_table.h"

#include <strings.h>

#include "plan/policy.h"

/* Indexed by the enum (designated rows), so vdnn_planner_of is a lookup. */
static const vdnn_planner_entry planners[VDNN_POLICY_COUNT] = {
    [VDNN_POLICY_NONE] = {VDNN_POLICY_NONE, "none", "in-core: every feature map kept, device memory reused by liveness",
                          vdnn_policy_classify_static},
    [VDNN_POLICY_ALL] = {VDNN_POLICY_ALL, "all",
                         "vDNN_all: every feature map that backward needs swapped to host memory and back",
                         vdnn_policy_classify_static},
    [VDNN_POLICY_CONV] = {VDNN_POLICY_CONV, "conv",
                          "vDNN_conv: only the inputs of convolutions (sequence models: linear, attention, "
                          "LSTM) swapped",
                          vdnn_policy_classify_static},
    [VDNN_POLICY_RECOMPUTE] = {VDNN_POLICY_RECOMPUTE, "recompute",
                               "Chen et al.: about sqrt(n) checkpoints kept, the other maps recomputed (from costs)",
                               vdnn_planner_recompute},
    [VDNN_POLICY_DYN] = {VDNN_POLICY_DYN, "dyn", "vDNN_dyn: the fastest of vDNN's classes that fits (from costs)",
                         vdnn_planner_dyn},
    [VDNN_POLICY_POOCH] = {VDNN_POLICY_POOCH, "pooch",
                           "PoocH: a keep/swap search, then swaps made recomputes where cheaper (from costs)",
                           vdnn_planner_pooch},
    [VDNN_POLICY_AUTO] = {VDNN_POLICY_AUTO, "auto",
                          "the fastest simulated plan that fits, over every planner and option (from costs)",
                          vdnn_planner_auto},
    [VDNN_POLICY_UM] = {VDNN_POLICY_UM, "um",
                        "OC-DNN: all's classes, the swapped maps in CUDA Unified Memory (training needs a GPU)",
                        vdnn_policy_classify_static},
};

const vdnn_planner_entry *vdnn_planner_of(vdnn_policy p)
{
    return (unsigned)p < VDNN_POLICY_COUNT ? &planners[p] : NULL;
}

const vdnn_planner_entry *vdnn_planner_find(const char *name)
{
    for (int i = 0; name && i < VDNN_POLICY_COUNT; i++)
        if (!strcasecmp(name, planners[i].name)) return &planners[i];
    return NULL;
}

const char *vdnn_policy_name(vdnn_policy p)
{
    const vdnn_planner_entry *e = vdnn_planner_of(p);
    return e ? e->name : "?";
}

const char *vdnn_policy_description(vdnn_policy p)
{
    const vdnn_planner_entry *e = vdnn_planner_of(p);
    return e ? e->description : NULL;
}

bool vdnn_policy_parse(const char *s, vdnn_policy *out)
{
    const vdnn_planner_entry *e = vdnn_planner_find(s);
    if (e) *out = e->policy;
    return e != NULL;
}
