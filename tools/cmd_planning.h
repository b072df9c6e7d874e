/* Shared by the planning subcommands (simulate, plot): a resolved model with its op info, its plans under
 * any policy, and a profile from --profile FILE or the estimate flags. */
#ifndef VDNN_TOOLS_CMD_PLANNING_H
#define VDNN_TOOLS_CMD_PLANNING_H

#include <stdbool.h>
#include <stdio.h>

#include "cmd_common.h"
#include "plan/plan.h"
#include "plan/profile.h"

/* A model resolved to the command's batch and input, with every layer's op info from the CPU backend
 * (what `vdnn plan` uses, so the plans are the same). */
typedef struct cli_model {
    vdnn_graph_t *g;
    vdnn_op_info *info;
    vdnn_layer_algos *algos;  /* each layer's candidate algorithms */
    int force_algo;           /* --conv-algo */
    bool offload_params;      /* --offload-params */
    bool stream_inputs;       /* --stream-inputs */
} cli_model;

vdnn_status cli_model_load(const cli_options *o, cli_model *m, vdnn_error *err);
void cli_model_free(cli_model *m);
/* The training plan of m under a policy and budgets; the profile-guided policies plan with `prof`, the
 * costs the simulation will use (NULL: their own estimate). */
vdnn_status cli_model_plan(const cli_model *m, vdnn_policy policy, size_t budget, size_t host_budget,
                           const vdnn_profile *prof, vdnn_plan_t **plan, vdnn_error *err);

/* Where costs come from: a profile file, else the roofline estimate (defaults in the usage text). */
typedef struct cli_cost_options {
    const char *profile;
    bool estimate_given;
    double flops, mem_bw, link_d2h, link_h2d;
} cli_cost_options;

#define CLI_COST_USAGE                                                                                          \
    "Costs come from --profile FILE (written by a measuring run), or from a roofline estimate:\n"               \
    "  --estimate-flops F       compute rate in flop/s (default 1e12)\n"                                         \
    "  --estimate-bw B          device memory bandwidth in bytes/s, e.g. 1e11 or 100GB/s (default 1e11)\n"      \
    "  --link-bandwidth L       host link bandwidth per direction, e.g. 16GB/s (default 16GB/s);\n"             \
    "                           --link-bandwidth-d2h / --link-bandwidth-h2d set one direction\n"

/* Takes the "--flag VALUE" pair out of argv if present: *value is set (NULL if absent). Returns false
 * (after printing) when the flag has no value. */
bool cli_take_flag(int *argc, char **argv, const char *flag, const char **value, const char *cmd);
/* Takes the cost flags out of argv and checks their values. Returns false after printing a message. */
bool cli_take_cost_flags(int *argc, char **argv, cli_cost_options *c, const char *cmd);
/* Refuses a flag cli_parse would accept but that means nothing to this command. */
bool cli_refuse_flag(int argc, char **argv, const char *flag, const char *why, const char *cmd);

/* Reads the profile (checked against m's graph) or makes the estimate. */
vdnn_status cli_cost_profile(const cli_cost_options *c, const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err);
/* One line saying where the costs come from. */
void cli_cost_describe(const cli_cost_options *c, const vdnn_profile *p, char *buf, size_t n);

/* "none, all or conv": every policy vdnn_policy_parse knows, for usage and error texts. */
const char *cli_policy_list(char *buf, size_t n);

#endif
