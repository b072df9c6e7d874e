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
    int *algo;                 /* per layer: the chosen algorithm */
} vdnn_classes;

vdnn_status vdnn_classes_save(const vdnn_plan_t *p, vdnn_classes *c, vdnn_error *err);
void vdnn_classes_load(vdnn_plan_t *p, const vdnn_classes *c);
void vdnn_classes_release(vdnn_classes *c);

/* Earlier bests a search keeps, in case the best does not fit once its blocks are placed. */
#define VDNN_SEARCH_EARLIER 8

/* A planner's working state: the plan, its costs, and the best classifications seen so far. Judging a
 * candidate by its live bytes is fast; placing its blocks is exact but costs O(blocks^2), so the search
 * places only where a margin for fragmentation cannot tell, and vdnn_search_finish places the best. */
typedef struct vdnn_search {
    vdnn_plan_t *p;
    const vdnn_graph_t *g;
    vdnn_profile own_profile;          /* an estimate when the request brought none */
    const vdnn_profile *prof;
    size_t margin;                     /* bytes of the budget left for fragmentation (grows to what placement
                                          is seen to take, up to max_margin) */
    size_t max_margin;
    vdnn_classes best;                 /* the fastest classification that fits (by margin or placed) */
    double best_time;                  /* its simulated seconds */
    size_t best_peak;                  /* its live peak */
    bool have_best;
    vdnn_classes earlier[VDNN_SEARCH_EARLIER]; /* the bests it replaced, newest first */
    double earlier_time[VDNN_SEARCH_EARLIER];
    int n_earlier;
    vdnn_classes placed;               /* the fastest classification known to fit once placed */
    double placed_time;
    bool have_placed;
    vdnn_classes least;                /* the most memory-saving classification seen (for infeasible budgets) */
    size_t least_peak;
    long evaluations;
    long placements;                   /* placements run to decide whether a candidate fits */
    long placed_blocks;                /* blocks placed by those */
    size_t last_live;                  /* the last evaluation's live peak */
    int last_fit;                      /* whether it fits: 1 yes, 0 no, -1 not known yet */
    bool last_placed;                  /* last_fit comes from placing its blocks */
} vdnn_search;

vdnn_status vdnn_search_begin(vdnn_search *s, vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);
/* Finalizes (unplaced, fast) the plan's current classes and simulates them. *time = simulated
 * iteration seconds. Records the classification if it is the fastest that fits or the least memory so
 * far. fits, unless NULL: as vdnn_search_fits (NULL saves placements). */
vdnn_status vdnn_search_eval(vdnn_search *s, double *time, bool *fits, vdnn_error *err);
/* Whether the classification last evaluated (classes unchanged since) fits the budgets: by its live
 * peak within the margin for fragmentation, or where that does not tell, by placing its blocks (past a
 * cap on placements, a doubtful one does not fit). */
vdnn_status vdnn_search_fits(vdnn_search *s, bool *fits, vdnn_error *err);
/* Records the current classes, simulated at t seconds, as known to fit once placed (e.g. another
 * planner's finalized, feasible result). */
vdnn_status vdnn_search_placed(vdnn_search *s, double t, vdnn_error *err);
/* Same as vdnn_search_eval, after scheduling every swap-in as early as memory allows (PoocH's scheduling). */
vdnn_status vdnn_search_eval_early(vdnn_search *s, double *time, bool *fits, vdnn_error *err);
/* The compute-lane stall at each swapped storage's offload wait and prefetch wait in the last
 * simulation of the current classes (arrays of n_storages_analyzed; filled by vdnn_search_stalls). */
vdnn_status vdnn_search_stalls(vdnn_search *s, double *offload_stall, double *prefetch_stall, vdnn_error *err);
/* Finalizes the plan with placement: the fastest classification that fits once placed (the best, else
 * an earlier best, else the fastest known to fit), or the least memory one if none fits. */
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

/* Where the plan may choose: every layer to its default algorithm, or (leanest) to the one with the smallest
 * workspace. Algorithms the request fixed are left alone. */
void vdnn_plan_use_algos(vdnn_plan_t *p, bool leanest);

/* The most memory-saving classifications known: 0-2 the static policies none / all / conv, 3 swap what
 * is expensive to rebuild and recompute the rest, 4-7 Chen's checkpoints (swapped) at a few spacings. */
#define VDNN_MEMORY_MIXES 8
void vdnn_memory_mix(vdnn_plan_t *p, const vdnn_graph_t *g, int mix);

/* The smallest device budget for which a plan is known (over the static policies and the most
 * memory-saving mixes). */
vdnn_status vdnn_plan_min_budget(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err);

#endif
