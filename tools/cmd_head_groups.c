/* --head-groups auto: the fewest head groups whose plan fits the budget, for the commands that plan. */
#include "cmd_head_groups.h"
#include "cmd_planning.h"

#include <stdint.h>
#include <stdio.h>

/* More groups than any model's heads: counts that divide no attention's heads are skipped at once. */
#define MAX_HEAD_GROUPS 256

vdnn_status cli_fit_head_groups(const vdnn_model_t *base, cli_grouping_plan plan, void *ctx, vdnn_model_t **out,
                                int *groups, bool *fits, vdnn_error *err)
{
    *out = NULL;
    *groups = 0;
    *fits = false;
    size_t best_need = SIZE_MAX;
    vdnn_error first = {VDNN_OK, ""};
    for (int g = 1; g <= MAX_HEAD_GROUPS && !*fits; g++) {
        vdnn_model_t *m = NULL;
        vdnn_error e = {VDNN_OK, ""};
        vdnn_status rc = vdnn_model_with_head_groups(base, g, &m, &e);
        /* 1 fails only for a model without attention, or one grouped already: that is the answer. */
        if (rc != VDNN_OK && g == 1) {
            *err = e;
            return rc;
        }
        if (rc != VDNN_OK) continue;
        bool ok = false;
        size_t need = SIZE_MAX;
        rc = plan(ctx, m, &ok, &need, &e);
        if (rc != VDNN_OK && first.status == VDNN_OK) first = e;
        if (rc == VDNN_OK && (ok || !*out || need < best_need)) {
            vdnn_model_free(*out);
            *out = m;
            m = NULL;
            *groups = g;
            *fits = ok;
            best_need = need;
        }
        vdnn_model_free(m);
    }
    if (*out) return VDNN_OK;
    *err = first;
    return first.status;
}

typedef struct planned_ctx {
    vdnn_backend_t *be;
    const cli_cost_options *costs;
    vdnn_shape in;
    int classes;
    const vdnn_memory_options *mem;
} planned_ctx;

static vdnn_status plan_grouping(void *ctx, const vdnn_model_t *g, bool *fits, size_t *need, vdnn_error *err)
{
    const planned_ctx *x = ctx;
    vdnn_profile_t *prof = NULL;
    vdnn_plan_t *plan = NULL;
    vdnn_plan_summary sum;
    vdnn_status rc = x->costs ? cli_cost_profile(x->costs, g, x->in, x->classes, &prof, err) : VDNN_OK;
    if (rc == VDNN_OK) rc = vdnn_plan_create(g, x->be, prof, x->in, x->classes, x->mem, &plan, err);
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(plan, &sum, err);
    if (rc == VDNN_OK) {
        *fits = sum.feasible;
        *need = sum.min_budget_bytes;
    }
    vdnn_plan_free(plan);
    vdnn_profile_free(prof);
    return rc;
}

vdnn_status cli_fit_head_groups_planned(const vdnn_model_t *base, vdnn_backend_t *be, const cli_cost_options *costs,
                                        vdnn_shape in, int classes, const vdnn_memory_options *mem, vdnn_model_t **out,
                                        int *groups, bool *fits, vdnn_error *err)
{
    planned_ctx x = {be, costs, in, classes, mem};
    return cli_fit_head_groups(base, plan_grouping, &x, out, groups, fits, err);
}

void cli_note_head_groups(const char *cmd, int groups, bool fits, size_t budget)
{
    char b[32];
    if (fits)
        fprintf(stderr, "vdnn %s: --head-groups auto: %d, the fewest head groups whose plan fits %s\n", cmd, groups,
                vdnn_format_bytes(budget, b, sizeof b));
    else
        fprintf(stderr, "vdnn %s: --head-groups auto: no grouping fits %s; %d head groups need the least\n", cmd,
                vdnn_format_bytes(budget, b, sizeof b), groups);
}
