/* One trial plan of a model variant under a caller's budgets, for the searches that pick a variant by its plan
 * (head groups, fused attention). */
#ifndef VDNN_PLAN_TRIAL_H
#define VDNN_PLAN_TRIAL_H

#include "vdnn/plan.h"

/* Where a trial's costs come from: measured profiles of other variants of the model, composed for the variant
 * (n_profiles > 0: vdnn_profile_compose), or a roofline estimate at rates (flops, memory bytes, link d2h and h2d per
 * second; 0: the default estimate's; all 0: the default estimate, what a net plans with without a profile). */
typedef struct vdnn_trial_costs {
    double rates[4];
    const vdnn_profile_t *const *profiles;
    int n_profiles;
} vdnn_trial_costs;

/* m planned with be under mem at those costs. *sum is the plan's summary; with plan non-NULL the caller keeps (and
 * frees) the plan. */
vdnn_status vdnn_plan_trial(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                            const vdnn_memory_options *mem, const vdnn_trial_costs *costs, vdnn_plan_t **plan,
                            vdnn_plan_summary *sum, vdnn_error *err);

#endif
