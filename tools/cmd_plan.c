/* `vdnn plan`: a dry run that prints the memory plan of one training iteration; no data, no compute. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"
#include "plan/planner.h"

static const char plan_usage[] =
    "usage: vdnn plan MODEL [--batch N] [--input CxHxW] [--classes N] [--policy P] [--budget SIZE]\n"
    "                 [--host-budget SIZE] [--offload-params] [--stream-inputs] [--profile FILE | estimate flags] [--json]\n"
    "Plans one training iteration without running it: every feature map's size and class (keep, swap or\n"
    "recompute), when it leaves the device and when it comes back, the peak and average device memory, the\n"
    "host memory and the bytes moved per iteration. Exits 3 if the plan does not fit the budget, naming\n"
    "the smallest budget that works.\n";

int vdnn_cmd_plan(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            char pol[256];
            fputs(plan_usage, stdout);
            fputs(CLI_CONV_ALGO_USAGE, stdout);
            fputs(CLI_OFFLOAD_USAGE, stdout);
            printf("Policies: %s (default none); recompute, dyn, pooch and auto plan from costs.\n"
                   "um (OC-DNN) swaps what all swaps, but into CUDA Unified Memory: training needs a GPU, the plan does\n"
                   "not; the table marks those storages 'managed' and counts them in the managed pool, not the peak.\n",
                   cli_policy_list(pol, sizeof pol));
            fputs(CLI_COST_USAGE, stdout);
            return 0;
        }
    char **args = malloc((size_t)(argc + 1) * sizeof *args);
    if (!args) return 1;
    memcpy(args, argv, (size_t)(argc + 1) * sizeof *args);
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
    vdnn_error err;
    vdnn_error_clear(&err);
    cli_model m;
    vdnn_plan_t *plan = NULL;
    vdnn_profile prof;
    memset(&prof, 0, sizeof prof);
    vdnn_status rc = cli_model_load(&o, &m, &err);
    if (rc == VDNN_OK) rc = cli_cost_profile(&costs, m.g, &prof, &err);
    if (rc == VDNN_OK) rc = cli_model_plan(&m, o.policy, o.budget, o.host_budget, &prof, &plan, &err);
    /* Static policies need the same memory at any budget: their peak is their smallest budget. The
     * planners can go as low as the most memory-saving plan known. */
    size_t min_budget = plan ? plan->peak_device_bytes : 0;
    if (rc == VDNN_OK && o.policy > VDNN_POLICY_CONV && o.policy != VDNN_POLICY_UM) {
        vdnn_plan_request rq = {.policy = o.policy, .training = true, .budget = SIZE_MAX, .host_budget = o.host_budget,
                                .profile = &prof, .offload_params = o.offload_params, .algos = m.algos,
                                .stream_inputs = o.stream_inputs,
                                .force_algo = m.force_algo};
        size_t mb;
        rc = vdnn_plan_min_budget(m.g, m.info, &rq, &mb, &err);
        if (rc == VDNN_OK && mb < min_budget) min_budget = mb;
    }
    int code = 0;
    if (rc == VDNN_OK) cli_note_unstreamed("plan", &o, plan);
    if (rc == VDNN_OK) {
        if (o.json) vdnn_plan_print_json(plan, m.g, min_budget, stdout);
        else vdnn_plan_print_table(plan, m.g, stdout);
        if (!plan->feasible) {
            char need[32], have[32];
            if (plan->host_bytes + plan->managed_bytes > plan->host_budget)
                fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs %s of host memory, the host budget is %s\n",
                        vdnn_policy_name(o.policy),
                        vdnn_format_bytes(plan->host_bytes + plan->managed_bytes, need, sizeof need),
                        vdnn_format_bytes(plan->host_budget, have, sizeof have));
            else
                fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs at least %s (%zu bytes); the budget is %s\n",
                        vdnn_policy_name(o.policy), vdnn_format_bytes(min_budget, need, sizeof need), min_budget,
                        vdnn_format_bytes(plan->budget, have, sizeof have));
            code = 3;
        }
    }
    vdnn_profile_release(&prof);
    vdnn_plan_free(plan);
    cli_model_free(&m);
    return rc == VDNN_OK ? code : cli_fail("plan", &err);
}
