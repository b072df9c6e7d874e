/* One trial plan of a model variant under a caller's budgets, for the searches that pick a variant by its plan
 * (head groups, fused attention). */
#ifndef VDNN_PLAN_TRIAL_H
#define VDNN_PLAN_TRIAL_H

#include "vdnn/plan.h"

/* m planned with be under mem, its costs a roofline estimate at rates (flops, memory bytes, link d2h and h2d per
 * second; 0: the default estimate's; all 0: the default estimate, what a net plans with without a profile).
 * *sum is the plan's summary; with plan non-NULL the caller keeps (and frees) the plan. */
vdnn_status vdnn_plan_trial(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                            const vdnn_memory_options *mem, const double rates[4], vdnn_plan_t **plan,
                            vdnn_plan_summary *sum, vdnn_error *err);

#endif
