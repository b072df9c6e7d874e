/* --head-groups auto: the fewest head groups whose plan fits the budget, for the commands that plan (plan, simulate,
 * plot, train), by vdnn_model_fit_head_groups. */
#ifndef VDNN_TOOLS_CMD_HEAD_GROUPS_H
#define VDNN_TOOLS_CMD_HEAD_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

#include <vdnn/vdnn.h>

/* o->head_groups for "--head-groups auto". */
#define CLI_HEAD_GROUPS_AUTO (-1)

/* base in the fewest head groups whose plan with the backend be, the input, classes and memory options fits, its
 * costs the estimate the cost options give (costs NULL, or no estimate flags: the default estimate, what
 * `vdnn train` plans with): *out (the caller frees it), *groups, *fits (false: none fits, the one that needs the
 * least). Says on stderr what it chose, for the command cmd. */
struct cli_cost_options;
vdnn_status cli_fit_head_groups(const vdnn_model_t *base, vdnn_backend_t *be, const struct cli_cost_options *costs,
                                vdnn_shape in, int classes, const vdnn_memory_options *mem, const char *cmd,
                                vdnn_model_t **out, vdnn_error *err);

#endif
