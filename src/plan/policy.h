/* Policies: each sets the class (keep / swap / recompute) of every storage of an analyzed plan and
 * when swapped storages come back. Static ones only classify; planners also finalize the plan. */
#ifndef VDNN_PLAN_POLICY_H
#define VDNN_PLAN_POLICY_H

#include "plan/plan.h"

/* The table's classify function of none, all, conv and um: vdnn_policy_static for p->policy (um: all's). */
vdnn_status vdnn_policy_classify_static(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);

/* vDNN's none / all / conv classes on an analyzed plan. */
void vdnn_policy_static(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_policy policy);

/* The compute-heavy layers: convolution, or on sequence models linear, attention (scores and mix) and LSTM. */
bool vdnn_layer_compute_heavy(vdnn_layer_kind k);

/* Whether storage st is a feature map read by a compute-heavy layer. What conv swaps, and dyn's first greedy
 * pass. */
bool vdnn_policy_heavy_input(const vdnn_plan_t *p, const vdnn_graph_t *g, int st);

/* Profile-guided planners (planner_*.c). Each leaves p finalized with the fastest plan it found
 * under p->req.memory.budget and p->req.memory.host_budget, or the most memory-saving one if none fits. */
vdnn_status vdnn_planner_recompute(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);
vdnn_status vdnn_planner_dyn(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);
vdnn_status vdnn_planner_pooch(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);
vdnn_status vdnn_planner_auto(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);

#endif
