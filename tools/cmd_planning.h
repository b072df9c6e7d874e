/* Shared by the planning subcommands (plan, simulate, plot, project): a model at the command's batch and input,
 * the backend whose op sizes the plans use, and a profile from --profile FILE or the estimate flags. */
#ifndef VDNN_TOOLS_CMD_PLANNING_H
#define VDNN_TOOLS_CMD_PLANNING_H

#include <stdbool.h>
#include <stdio.h>

#include "cmd_common.h"

/* Where costs come from: a profile file, the roofline estimate the flags describe, or (neither given) the
 * library's default estimate, which is what `vdnn train` plans with when it has no profile. */
typedef struct cli_cost_options {
    const char *profile;
    const char *fused_profile; /* --attention auto: a profile of the model with every attention fused */
    bool estimate_given;
    double flops, mem_bw, link_d2h, link_h2d;
} cli_cost_options;

#define CLI_COST_USAGE                                                                                          \
    "Costs come from a profile or from a roofline estimate:\n"                                                  \
    "  --profile FILE           written by `vdnn profile`, with the device's op info (what ops keep,\n"        \
    "                           workspaces): plans use it, so they are that device's on any machine,\n"        \
    "                           unless --device names a backend to plan with (docs/profiles.md)\n"             \
    "  --fused-profile FILE     with --attention auto and --profile: a profile of the model with every\n"      \
    "                           attention fused (vdnn profile --attention fused); each choice is planned\n"     \
    "                           from the two, its fused attentions' times from this one\n"                      \
    "  --estimate-flops F       compute rate in flop/s (default 1e13)\n"                                         \
    "  --estimate-bw B          device memory bandwidth in bytes/s, e.g. 5e11 or 500GB/s (default 5e11)\n"      \
    "  --link-bandwidth L       host link bandwidth per direction, e.g. 16GB/s (default 16GB/s);\n"             \
    "                           --link-bandwidth-d2h / --link-bandwidth-h2d set one direction\n"                \
    "With none of them, plans use the defaults, as `vdnn train` does without --profile: both make the same plan.\n"

/* A model at the command's batch and input, with where the plans' op info comes from: a --profile FILE that
 * recorded it (the profiled device's plans, on any machine; unless --device names a backend), else the CPU
 * backend, which answers without a device (what `vdnn train --device cpu` plans with), or with --device cuda the
 * CUDA backend (what `vdnn train --device cuda` plans with), which needs the GPU. */
typedef struct cli_model {
    vdnn_model_t *m;
    vdnn_shape in;            /* n: the batch */
    int classes;
    vdnn_backend_t *be;       /* NULL: the profile's op info */
    vdnn_profile_t *prof;     /* NULL: the library's default estimate */
    vdnn_profile_t *base_prof, *fused_prof; /* --fused-profile: the profiles of base unfused and all fused (prof:
                                               the chosen variant's, composed of them) */
    char ops[512];            /* where the op info comes from, for messages */
    vdnn_model_t *base;       /* --head-groups auto, --attention auto: the model before grouping or fusing (m is the
                                 variant chosen, or base itself before the first plan) */
    cli_options fit;          /* with base: the options that ask for the search */
    const cli_cost_options *costs;
    const char *cmd;
} cli_model;

/* cmd names the command in notes printed to stderr (a profile without op info, or planned with another backend's). */
vdnn_status cli_model_load(const cli_options *o, const cli_cost_options *c, cli_model *m, const char *cmd,
                           vdnn_error *err);
void cli_model_free(cli_model *m);
/* The training plan of m under the command's memory options with another policy. With --head-groups auto, m's
 * model becomes the base in the fewest head groups whose plan under that policy fits (said on stderr). */
vdnn_status cli_model_plan(cli_model *m, const cli_options *o, vdnn_policy policy, vdnn_plan_t **plan,
                           vdnn_error *err);

/* Takes the "--flag VALUE" pair out of argv if present: *value is set (NULL if absent). Returns false
 * (after printing) when the flag has no value. */
bool cli_take_flag(int *argc, char **argv, const char *flag, const char **value, const char *cmd);
/* Takes the cost flags out of argv and checks their values. Returns false after printing a message. */
bool cli_take_cost_flags(int *argc, char **argv, cli_cost_options *c, const char *cmd);
/* Refuses a flag cli_parse would accept but that means nothing to this command. */
bool cli_refuse_flag(int argc, char **argv, const char *flag, const char *why, const char *cmd);

/* The profile the cost options name for the model at (in, classes): read, estimated, or NULL for the default. */
vdnn_status cli_cost_profile(const cli_cost_options *c, const vdnn_model_t *m, vdnn_shape in, int classes,
                             vdnn_profile_t **p, vdnn_error *err);
/* One line saying where the costs come from. */
void cli_cost_describe(const cli_cost_options *c, const vdnn_profile_t *p, char *buf, size_t n);


/* A plan's table or JSON text (vdnn_plan_table / vdnn_plan_json) written to f. */
vdnn_status cli_print_plan(const vdnn_plan_t *p, bool json, FILE *f, vdnn_error *err);

#endif
