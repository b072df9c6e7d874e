/* What a plan tells its caller: the summary (with the smallest budget known and the simulated iteration,
 * computed when first asked and kept), its rows of tensors, and its JSON and table texts. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/simulate.h"

struct vdnn_plan_figures {
    bool have_costs;
    vdnn_profile estimate;   /* the default estimate, for a plan made without a profile */
    bool have_figures;
    size_t min_budget;
    double lower_bound_s, simulated_s;
};

struct vdnn_plan_figures *vdnn_plan_figures_new(void) { return calloc(1, sizeof(struct vdnn_plan_figures)); }

void vdnn_plan_figures_free(struct vdnn_plan_figures *f)
{
    if (!f) return;
    if (f->have_costs) vdnn_profile_release(&f->estimate);
    free(f);
}

const vdnn_profile *vdnn_plan_costs(const vdnn_plan_t *p, vdnn_error *err)
{
    if (p->req.profile) return p->req.profile;
    struct vdnn_plan_figures *f = p->figures;
    if (!f->have_costs) {
        if (vdnn_profile_estimate_default(p->g, &f->estimate, err) != VDNN_OK) return NULL;
        f->have_costs = true;
    }
    return &f->estimate;
}

/* Static policies need the same memory at any budget, so their peak is their smallest budget; the planners
 * (not um, which plans as all does) can go as low as the most memory-saving plan known. */
static vdnn_status min_budget(const vdnn_plan_t *p, size_t *out, vdnn_error *err)
{
    *out = p->peak_device_bytes;
    if (!p->training || p->policy <= VDNN_POLICY_CONV || p->policy == VDNN_POLICY_UM) return VDNN_OK;
    vdnn_plan_request rq = p->req;
    rq.memory.budget = SIZE_MAX;
    rq.algos = p->cands; /* the request's own were borrowed while the plan was built */
    size_t mb = SIZE_MAX;
    vdnn_status rc = vdnn_plan_min_budget(p->g, p->req_info, &rq, &mb, err);
    if (rc == VDNN_OK && mb < *out) *out = mb;
    return rc;
}

static vdnn_status figures(const vdnn_plan_t *p, vdnn_error *err)
{
    struct vdnn_plan_figures *f = p->figures;
    if (f->have_figures) return VDNN_OK;
    const vdnn_profile *prof = vdnn_plan_costs(p, err);
    if (!prof) return err ? err->status : VDNN_ERR_NO_MEMORY;
    vdnn_status rc = min_budget(p, &f->min_budget, err);
    vdnn_timeline t;
    memset(&t, 0, sizeof t);
    if (rc == VDNN_OK) rc = vdnn_simulate(p, p->g, prof, &t, err);
    if (rc == VDNN_OK) {
        f->simulated_s = t.iteration_s;
        f->lower_bound_s = p->training ? vdnn_plan_lower_bound(p, p->g, prof) : 0;
        f->have_figures = true;
    }
    vdnn_timeline_release(&t);
    return rc;
}

vdnn_status vdnn_plan_summarize(const vdnn_plan_t *p, vdnn_plan_summary *s, vdnn_error *err)
{
    if (!p || !s) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "summarize: no plan or no summary to fill");
    vdnn_status rc = figures(p, err);
    if (rc != VDNN_OK) return rc;
    const struct vdnn_plan_figures *f = p->figures;
    memset(s, 0, sizeof *s);
    snprintf(s->model, sizeof s->model, "%s", p->g->name);
    s->policy = p->policy;
    s->training = p->training;
    s->feasible = p->feasible;
    s->input = p->g->input;
    s->classes = p->g->classes;
    s->micro_batches = p->micro_batches;
    s->budget = p->req.memory.budget;
    s->host_budget = p->req.memory.host_budget;
    s->peak_device_bytes = p->peak_device_bytes;
    s->max_live_bytes = p->max_live_bytes;
    s->avg_device_bytes = p->avg_device_bytes;
    s->persistent_bytes = p->persistent_bytes;
    s->host_bytes = p->host_bytes;
    s->home_bytes = p->home_bytes;
    s->managed_bytes = p->managed_bytes;
    s->bytes_moved = p->bytes_moved;
    s->min_budget_bytes = f->min_budget;
    s->lower_bound_s = f->lower_bound_s;
    s->simulated_s = f->simulated_s;
    s->offload_params = p->offload_params;
    s->streamed_layers = vdnn_plan_streamed_layers(p);
    s->steps = p->n_steps;
    s->tensors = vdnn_plan_listed_count(p);
    s->algorithms_change_numerics = vdnn_plan_algos_change_numerics(p);
    return VDNN_OK;
}

/* Prints into a memory stream, then into the caller's buffer as snprintf would. */
static vdnn_status to_buffer(const vdnn_plan_t *p, bool json, char *buf, size_t len, size_t *needed, vdnn_error *err)
{
    if (!p) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "plan text: no plan");
    size_t mb = 0;
    if (json) {
        vdnn_status rc = figures(p, err);
        if (rc != VDNN_OK) return rc;
        mb = p->figures->min_budget;
    }
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory printing the plan");
    if (json) vdnn_plan_print_json(p, p->g, mb, f);
    else vdnn_plan_print_table(p, p->g, f);
    if (fclose(f) != 0) {
        free(text);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory printing the plan");
    }
    if (needed) *needed = n;
    if (buf && len) snprintf(buf, len, "%s", text);
    free(text);
    return VDNN_OK;
}

vdnn_status vdnn_plan_json(const vdnn_plan_t *p, char *buf, size_t len, size_t *needed, vdnn_error *err)
{
    return to_buffer(p, true, buf, len, needed, err);
}

vdnn_status vdnn_plan_table(const vdnn_plan_t *p, char *buf, size_t len, size_t *needed, vdnn_error *err)
{
    return to_buffer(p, false, buf, len, needed, err);
}

vdnn_status vdnn_plan_simulate(const vdnn_plan_t *p, const vdnn_profile_t *prof, vdnn_timeline_t **out,
                               vdnn_error *err)
{
    if (!p || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "simulate: no plan or no place for the timeline");
    *out = NULL;
    if (!prof) prof = vdnn_plan_costs(p, err);
    if (!prof) return err ? err->status : VDNN_ERR_NO_MEMORY;
    vdnn_timeline *t = calloc(1, sizeof *t);
    if (!t) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory simulating the plan");
    vdnn_status rc = vdnn_simulate(p, p->g, prof, t, err);
    if (rc != VDNN_OK) {
        vdnn_timeline_free(t);
        return rc;
    }
    *out = t;
    return VDNN_OK;
}
