/* vdnn_model_fit_head_groups: the fewest attention head groups whose plan fits the budgets. */
#include <stdint.h>

#include "plan/plan.h"

/* More groups than any model's heads: counts that divide no attention's heads are refused at once. */
#define MAX_HEAD_GROUPS 256

/* m in `groups` groups planned: whether it fits, and the least device budget known for it. */
static vdnn_status try_grouping(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                                const vdnn_memory_options *mem, const double rates[4], bool *fits, size_t *need,
                                vdnn_error *err)
{
    vdnn_profile_t *prof = NULL;
    vdnn_plan_t *plan = NULL;
    vdnn_plan_summary sum;
    vdnn_status rc = VDNN_OK;
    if (rates[0] > 0 || rates[1] > 0 || rates[2] > 0 || rates[3] > 0)
        rc = vdnn_profile_estimate_model(m, input, classes, rates[0] > 0 ? rates[0] : VDNN_ESTIMATE_FLOPS_PER_S,
                                         rates[1] > 0 ? rates[1] : VDNN_ESTIMATE_MEM_BYTES_PER_S,
                                         rates[2] > 0 ? rates[2] : VDNN_ESTIMATE_LINK_BYTES_PER_S,
                                         rates[3] > 0 ? rates[3] : VDNN_ESTIMATE_LINK_BYTES_PER_S, &prof, err);
    if (rc == VDNN_OK) rc = vdnn_plan_create(m, be, prof, input, classes, mem, &plan, err);
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(plan, &sum, err);
    if (rc == VDNN_OK) {
        *fits = sum.feasible;
        *need = sum.min_budget_bytes;
    }
    vdnn_plan_free(plan);
    vdnn_profile_free(prof);
    return rc;
}

vdnn_status vdnn_model_fit_head_groups(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                                       const vdnn_memory_options *mem, double flops_per_s, double mem_bytes_per_s,
                                       double link_d2h_bytes_per_s, double link_h2d_bytes_per_s, vdnn_model_t **out,
                                       int *groups, bool *fits, vdnn_error *err)
{
    if (!m || !out || !groups || !fits)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_fit_head_groups: no model or no place for the answer");
    *out = NULL;
    *groups = 0;
    *fits = false;
    const double rates[4] = {flops_per_s, mem_bytes_per_s, link_d2h_bytes_per_s, link_h2d_bytes_per_s};
    size_t best_need = SIZE_MAX;
    vdnn_error first = {VDNN_OK, ""};
    for (int g = 1; g <= MAX_HEAD_GROUPS && !*fits; g++) {
        vdnn_model_t *grouped = NULL;
        vdnn_error e = {VDNN_OK, ""};
        vdnn_status rc = vdnn_model_with_head_groups(m, g, &grouped, &e);
        /* 1 fails only for a model without attention, or one grouped already: that is the answer. */
        if (rc != VDNN_OK && g == 1) {
            if (err) *err = e;
            return rc;
        }
        if (rc != VDNN_OK) continue;
        bool ok = false;
        size_t need = SIZE_MAX;
        /* A grouping that cannot be planned (a tensor beyond the graph's limits, say) leaves it to the next. */
        rc = try_grouping(grouped, be, input, classes, mem, rates, &ok, &need, &e);
        if (rc != VDNN_OK && first.status == VDNN_OK) first = e;
        if (rc == VDNN_OK && (ok || !*out || need < best_need)) {
            vdnn_model_free(*out);
            *out = grouped;
            grouped = NULL;
            *groups = g;
            *fits = ok;
            best_need = need;
        }
        vdnn_model_free(grouped);
    }
    if (*out) return VDNN_OK;
    if (err) *err = first;
    return first.status;
}
