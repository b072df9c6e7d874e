/* vdnn_model_fit_head_groups: the fewest attention head groups whose plan fits the budgets. */
#include <stdint.h>

#include "api/plan_trial.h"
#include "plan/plan.h"

/* More groups than any model's heads: counts that divide no attention's heads are refused at once. */
#define MAX_HEAD_GROUPS 256

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
    const vdnn_trial_costs costs = {{flops_per_s, mem_bytes_per_s, link_d2h_bytes_per_s, link_h2d_bytes_per_s}, NULL, 0};
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
        vdnn_plan_summary sum;
        rc = vdnn_plan_trial(grouped, be, input, classes, mem, &costs, NULL, &sum, &e);
        if (rc == VDNN_OK) {
            ok = sum.feasible;
            need = sum.min_budget_bytes;
        }
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
