/* --head-groups auto: the fewest head groups whose plan fits the budget, for the commands that plan (plan, simulate,
 * plot, train). */
#ifndef VDNN_TOOLS_CMD_HEAD_GROUPS_H
#define VDNN_TOOLS_CMD_HEAD_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

#include <vdnn/vdnn.h>

/* o->head_groups for "--head-groups auto". */
#define CLI_HEAD_GROUPS_AUTO (-1)

/* Plans the model in one grouping: *fits whether the plan fits both budgets, *need the least device budget known
 * for it (its min_budget_bytes). An error means this grouping cannot be planned (a tensor too large, say); the
 * search goes on with the next. */
typedef vdnn_status (*cli_grouping_plan)(void *ctx, const vdnn_model_t *m, bool *fits, size_t *need, vdnn_error *err);

/* Tries base (a transformer whose attention is not grouped) in 1, 2, 3, ... head groups, every count that divides
 * every attention's heads, and stops at the first whose plan fits: *out is base in that many groups (*groups), the
 * caller frees it. When none fits, the grouping that needs the least budget, and *fits false. When no grouping
 * could be planned, the first grouping's error. */
vdnn_status cli_fit_head_groups(const vdnn_model_t *base, cli_grouping_plan plan, void *ctx, vdnn_model_t **out,
                                int *groups, bool *fits, vdnn_error *err);

/* The same with plans made as vdnn_plan_create makes them with the backend be (NULL: the profile's op info), the
 * costs' profile of each grouping (costs NULL, or neither a profile nor estimate flags: the default estimate,
 * what `vdnn train` plans with), the input, classes and memory options. */
struct cli_cost_options;
vdnn_status cli_fit_head_groups_planned(const vdnn_model_t *base, vdnn_backend_t *be, const struct cli_cost_options *costs,
                                        vdnn_shape in, int classes, const vdnn_memory_options *mem, vdnn_model_t **out,
                                        int *groups, bool *fits, vdnn_error *err);

/* One line on stderr saying what the search chose, for the command cmd at budget bytes. */
void cli_note_head_groups(const char *cmd, int groups, bool fits, size_t budget);

#endif
