/* Shared machinery of the profile-guided planners: saving and restoring a classification, judging one by
 * simulation, scheduling swap-ins as early as memory allows, and the lower bound of an iteration. */
#ifndef VDNN_PLAN_PLANNER_H
#define VDNN_PLAN_PLANNER_H

#include "plan/plan.h"
#include "plan/profile.h"

/* The classes of an analyzed plan's storages. */
typedef struct vdnn_classes {
    int n;
    vdnn_tensor_class *cls;
    int *prefetch_step;
    int *recompute_step;
} vdnn_classes;

vdnn_status vdnn_classes_save(const vdnn_plan_t *p, vdnn_classes *c, vdnn_error *err);
void vdnn_classes_load(vdnn_plan_t *p, const vdnn_classes *c);
void vdnn_classes_release(vdnn_classes *c);

/* A planner's working state: the plan, its costs, and the best classification seen so far. */
typedef struct vdnn_search {
    vdnn_plan_t *p;
    const vdnn_graph_t *g;
    vdnn_profile own_profile;          /* an estimate when the request brought none */
    const vdnn_profile *prof;
    vdnn_classes best;
    double best_time;                  /* simulated seconds of the best feasible classification */
    size_t best_peak;
    bool have_best;                    /* best is feasible */
    vdnn_classes least;                /* the most memory-saving classification seen (for infeasible budgets) */
    size_t least_peak;
    long evaluations;
} vdnn_search;

vdnn_status vdnn_search_begin(vdnn_search *s, vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);
/* Finalizes (unplaced, fast) the plan's current classes and simulates them. *time = simulated
 * iteration seconds, *fits = live peak within the budgets (with a margin for fragmentation). Records
 * the classification if it is the best feasible or the least memory so far. */
vdnn_status vdnn_search_eval(vdnn_search *s, double *time, bool *fits, vdnn_error *err);
/* Same, after scheduling every swap-in as early as memory allows (PoocH's scheduling). */
vdnn_status vdnn_search_eval_early(vdnn_search *s, double *time, bool *fits, vdnn_error *err);
/* The compute-lane stall at each swapped storage's offload wait and prefetch wait in the last
 * simulation of the current classes (arrays of n_storages_analyzed; filled by vdnn_search_stalls). */
vdnn_status vdnn_search_stalls(vdnn_search *s, double *offload_stall, double *prefetch_stall, vdnn_error *err);
/* Loads the best classification (or the least memory one if none fits), finalizes it with placement,
 * and checks that the placed peak fits; if placement pushed it over, tries the next best. */
vdnn_status vdnn_search_finish(vdnn_search *s, vdnn_error *err);
void vdnn_search_release(vdnn_search *s);

/* PoocH's swap-in scheduling: each swapped storage comes back as early in the backward pass as the
 * budget allows (keeping `margin` bytes free for fragmentation). The plan must be finalized. */
vdnn_status vdnn_schedule_prefetch_early(vdnn_plan_t *p, size_t margin, vdnn_error *err);

/* A lower bound of the iteration time at p's budget: the compute no plan avoids, plus the transfer
 * or recompute time that the memory over budget forces at the tightest step (see docs/planners.md). */
double vdnn_plan_lower_bound(const vdnn_plan_t *p, const vdnn_graph_t *g, const vdnn_profile *prof);

/* Chen et al.'s checkpoints: every k-th saved feature map (in topological order) stays
 * (kept, or swapped when swap_checkpoints), the others are recomputed from it. */
void vdnn_chen_classes(vdnn_plan_t *p, const vdnn_graph_t *g, int k, bool swap_checkpoints);
/* Number of feature maps Chen's scheme chooses among. */
int vdnn_chen_candidates(const vdnn_plan_t *p);

/* The smallest device budget for which a plan is known (over the static policies and the most
 * memory-saving mixes). */
vdnn_status vdnn_plan_min_budget(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err);

#endif
