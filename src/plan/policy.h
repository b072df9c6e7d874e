/* Policies that class each storage as keep or swap and choose when swapped storages come back. */
#ifndef VDNN_PLAN_POLICY_H
#define VDNN_PLAN_POLICY_H

#include "plan/plan.h"

/* Sets cls and prefetch_step of every storage of p for p->policy. Liveness (def, uses) is known. */
vdnn_status vdnn_policy_classify(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err);

#endif
