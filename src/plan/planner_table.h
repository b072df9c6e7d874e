/* The planners' table: every policy's name, one line saying what it does, and the function that classifies an
 * analyzed plan. vdnn_plan_build looks the request's planner up here by name; the planners use plan.c's analyze /
 * finalize machinery and never call back into the code that called them. */
#ifndef VDNN_PLAN_PLANNER_TABLE_H
#define VDNN_PLAN_PLANNER_TABLE_H

#include "plan/plan.h"

/* Sets the class of every storage of an analyzed plan (p->policy says which policy was asked for); the
 * profile-guided planners also leave p finalized. */
typedef vdnn_status (*vdnn_classify_fn)(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);

typedef struct vdnn_planner_entry {
    vdnn_policy policy;       /* the public enum's value (memory.policy) */
    const char *name;         /* what --policy and memory.policy's name say */
    const char *description;  /* one line, for listings */
    vdnn_classify_fn classify;
} vdnn_planner_entry;

/* The entry named `name` (case-insensitive), or NULL. */
const vdnn_planner_entry *vdnn_planner_find(const char *name);
/* The entry of policy p, or NULL out of range. */
const vdnn_planner_entry *vdnn_planner_of(vdnn_policy p);

#endif
