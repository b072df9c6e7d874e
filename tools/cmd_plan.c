/* `vdnn plan`: a dry run that prints the memory plan of one training iteration; no data, no compute. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

static const char plan_usage[] =
    "usage: vdnn plan MODEL [--batch N] [--input CxHxW | --seq-len N] [--context N] [--head-groups G|auto] [--attention fused|auto] [--classes N] [--policy P] [--budget SIZE]\n"
    "                 [--host-budget SIZE] [--offload-params] [--stream-inputs] [--precision fp32|bf16|fp16]\n"
    "                 [--profile FILE | estimate flags] [--json]\n"
    "Plans one training iteration without running it: every feature map's size and class (keep, swap or\n"
    "recompute), when it leaves the device and when it comes back, the peak and average device memory, the\n"
    "host memory and the bytes moved per iteration. Exits 3 if the plan does not fit the budget, naming\n"
    "the smallest budget that works.\n";

int vdnn_cmd_plan(int argc, char **argv)
{
    if (cli_help_asked(argc, argv)) {
        fputs(plan_usage, stdout);
        fputs(CLI_CONV_ALGO_USAGE, stdout);
        fputs(CLI_OFFLOAD_USAGE, stdout);
        fputs(CLI_PRECISION_USAGE, stdout);
        cli_policy_help(stdout);
        fputs("A plan under um needs no GPU: the table marks the swapped storages 'managed' and counts them in the\n"
              "managed pool, not the peak.\n", stdout);
        fputs(CLI_COST_USAGE, stdout);
        return 0;
    }
    char **args = cli_args_copy(argc, argv);
    if (!args) return 1;
    int n = argc;
    cli_cost_options costs;
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    bool ok = cli_take_cost_flags(&n, args, &costs, "plan") && cli_refuse_flag(n, args, "--poison", NULL, "plan") &&
              cli_refuse_flag(n, args, "--allow-oversubscribe", "a plan allocates nothing; train and profile take it", "plan") &&
              cli_parse(n, args, 2, OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_MEMORY | OPT_JSON, true, &o, "plan");
    free(args);
    if (!ok) return 2;
    if (!o.model) {
        fputs(plan_usage, stderr);
        return 2;
    }
    vdnn_error err = {VDNN_OK, ""};
    cli_model m;
    vdnn_plan_t *plan = NULL;
    vdnn_plan_summary sum;
    vdnn_status rc = cli_model_load(&o, &costs, &m, "plan", &err);
    if (rc == VDNN_OK) rc = cli_model_plan(&m, &o, o.mem.policy, &plan, &err);
    /* The summary names the smallest budget a plan is known for (static policies: their peak). */
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(plan, &sum, &err);
    int code = 0;
    if (rc == VDNN_OK) cli_note_unstreamed("plan", &o, sum.streamed_layers);
    if (rc == VDNN_OK) rc = cli_print_plan(plan, o.json, stdout, &err);
    if (rc == VDNN_OK && !sum.feasible) {
        char need[32], have[32];
        if (sum.host_bytes + sum.managed_bytes > sum.host_budget)
            fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs %s of host memory, the host budget is %s\n",
                    vdnn_policy_name(o.mem.policy), vdnn_format_bytes(sum.host_bytes + sum.managed_bytes, need, sizeof need),
                    vdnn_format_bytes(sum.host_budget, have, sizeof have));
        else
            fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs at least %s (%zu bytes); the budget is %s\n",
                    vdnn_policy_name(o.mem.policy), vdnn_format_bytes(sum.min_budget_bytes, need, sizeof need),
                    sum.min_budget_bytes, vdnn_format_bytes(sum.budget, have, sizeof have));
        code = 3;
    }
    vdnn_plan_free(plan);
    cli_model_free(&m);
    return rc == VDNN_OK ? code : cli_fail("plan", &err);
}
