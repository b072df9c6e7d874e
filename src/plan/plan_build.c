/* From a request to a plan: analyze (plan.c), classify with the request's planner, looked up by name in the
 * planners' table, finalize (plan.c) and validate where asked; under offload_params, the shared parameters' update
 * steps where they lower the peak. The one place that calls a planner, so plan.c never does. */
#include "plan/plan.h"
#include "plan/plan_validate.h"
#include "plan/planner_table.h"

static vdnn_status build_one(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                             vdnn_plan_t **out, vdnn_error *err)
{
    vdnn_plan_t *p = NULL;
    vdnn_status rc = vdnn_plan_analyze(g, info, req, &p, err);
    if (rc == VDNN_OK) {
        const vdnn_planner_entry *e = vdnn_planner_find(vdnn_policy_name(p->policy));
        rc = e ? e->classify(p, g, err)
               : vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.policy: unknown policy %d", (int)p->policy);
    }
    /* The static policies only classify; the profile-guided planners leave the plan finalized. */
    if (rc == VDNN_OK && !p->n_blocks) rc = vdnn_plan_finalize(p, err);
    /* The planners compared their trials under the quick placement; the plan kept gets the tight one. */
    if (rc == VDNN_OK) rc = vdnn_plan_place_tight(p, err);
    /* A poisoned run is a debugging run: a plan the executor could not replay soundly fails here, naming the
     * step and tensor, rather than as garbage values later. */
    if (rc == VDNN_OK && (req->checks || req->memory.poison)) {
        if (req->checks) req->checks->plans++;
        rc = vdnn_plan_validate(p, err);
    }
    if (p) p->req.checks = NULL; /* borrowed only while building */
    if (rc != VDNN_OK) {
        vdnn_plan_free(p);
        return rc;
    }
    *out = p;
    return VDNN_OK;
}

/* A plan with shared parameters' update steps (shared_steps) against the fused schedule's: the steps bring the
 * owners' gradients home and back, so they are kept only where they lower the peak (or fit where it does not). */
static bool steps_lower(const vdnn_plan_t *steps, const vdnn_plan_t *fused)
{
    if (steps->feasible != fused->feasible) return steps->feasible;
    return steps->peak_device_bytes < fused->peak_device_bytes;
}

vdnn_status vdnn_plan_build(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                            vdnn_plan_t **out, vdnn_error *err)
{
    vdnn_status rc = build_one(g, info, req, out, err);
    if (rc != VDNN_OK || !(*out)->shared_steps) return rc;
    vdnn_plan_request rq = *req;
    rq.fuse_shared = true;
    vdnn_plan_t *fused = NULL;
    rc = build_one(g, info, &rq, &fused, err);
    if (rc == VDNN_OK && !steps_lower(*out, fused)) {
        vdnn_plan_t *t = *out;
        *out = fused;
        fused = t;
    }
    vdnn_plan_free(fused);
    if (rc != VDNN_OK) {
        vdnn_plan_free(*out);
        *out = NULL;
    }
    return rc;
}

vdnn_status vdnn_plan_training(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_layer_algos *algos,
                               const vdnn_memory_options *memory, const struct vdnn_profile *prof,
                               bool keep_weight_grads, vdnn_plan_t **out, vdnn_error *err)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory = *memory;
    rq.profile = prof;
    rq.keep_weight_grads = keep_weight_grads;
    rq.algos = algos;
    return vdnn_plan_build(g, info, &rq, out, err);
}

