/* --head-groups auto and --attention auto: the variant of the model whose plan fits the budget, for the commands
 * that plan (plan, simulate, plot, train), by vdnn_model_fit_head_groups and vdnn_model_fit_attention. */
#ifndef VDNN_TOOLS_CMD_MODEL_FIT_H
#define VDNN_TOOLS_CMD_MODEL_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include <vdnn/vdnn.h>

#include "cmd_common.h"

/* o->head_groups for "--head-groups auto". */
#define CLI_HEAD_GROUPS_AUTO (-1)

/* Whether o asks for a search: --head-groups auto or --attention auto. */
bool cli_model_fit_asked(const cli_options *o);
/* The options o without their searches, the model to search from (the file's grouping, unfused). */
cli_options cli_model_fit_base(const cli_options *o);
/* VDNN_ERR_INVALID_ARG for options that cannot go together: --attention fused or auto with --head-groups, and a
 * search in a command that does not plan (plans false) or with a profile (measured for one variant). */
vdnn_status cli_model_fit_check(const cli_options *o, bool plans, bool profile, const char *cmd, vdnn_error *err);

/* base as o's search asks (the fewest head groups that fit, or the attentions to fuse for the fastest plan that fits)
 * with the backend be, the input, classes and memory options, its costs the estimate the cost options give (costs
 * NULL, or no estimate flags: the default estimate, what `vdnn train` plans with): *out (the caller frees it). Says
 * on stderr what it chose, for the command cmd. */
struct cli_cost_options;
/* measured (NULL, or the profiles of base unfused and all fused: --fused-profile): --attention auto plans from those
 * instead (vdnn_model_fit_attention_measured). */
vdnn_status cli_fit_model(const cli_options *o, const vdnn_model_t *base, vdnn_backend_t *be,
                          const struct cli_cost_options *costs, const vdnn_profile_t *const *measured, vdnn_shape in,
                          int classes, const vdnn_memory_options *mem, const char *cmd, vdnn_model_t **out,
                          vdnn_error *err);
/* --fused-profile PATH: the profile of base with every attention fused, checked against that model at the input and
 * classes. *out: the caller frees it. */
vdnn_status cli_load_fused_profile(const char *path, const vdnn_model_t *base, vdnn_shape in, int classes,
                                   vdnn_profile_t **out, vdnn_error *err);

#endif
