/* `vdnn plan`: a dry run that prints the memory plan of one training iteration; no data, no compute. */
#include <stdlib.h>
#include <string.h>

#include "cmd_common.h"
#include "plan/plan.h"

static const char plan_usage[] =
    "usage: vdnn plan MODEL [--batch N] [--input CxHxW] [--classes N] [--policy none|all|conv]\n"
    "                 [--budget SIZE] [--host-budget SIZE] [--json]\n"
    "Plans one training iteration without running it: every feature map's size and class (keep or swap),\n"
    "when it leaves the device and when it comes back, the peak and average device memory, the host memory\n"
    "and the bytes moved per iteration. Exits 3 if the plan does not fit the budget, naming the smallest\n"
    "budget that works.\n";

int vdnn_cmd_plan(int argc, char **argv)
{
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(plan_usage, stdout);
            return 0;
        }
    if (!cli_parse(argc, argv, 2, OPT_SHAPE | OPT_BATCH | OPT_MEMORY | OPT_JSON, true, &o, "plan")) return 2;
    if (!o.model) {
        fputs(plan_usage, stderr);
        return 2;
    }
    vdnn_error err;
    vdnn_error_clear(&err);
    vdnn_graph_t *g = NULL;
    vdnn_backend_t *be = NULL;
    vdnn_plan_t *plan = NULL;
    vdnn_op_info *info = NULL;
    vdnn_shape in;
    int classes;
    vdnn_status rc = cli_load_model(o.model, &g, &err);
    if (rc == VDNN_OK) rc = cli_shape(&o, g, NULL, &in, &classes, &err);
    if (rc == VDNN_OK) rc = vdnn_graph_resolve(g, in, classes, &err);
    o.device = "cpu";
    if (rc == VDNN_OK) rc = cli_backend(&o, &be, &err);
    if (rc == VDNN_OK) {
        info = calloc((size_t)g->n_layers, sizeof *info);
        if (!info) rc = vdnn_fail(&err, VDNN_ERR_NO_MEMORY, "out of memory");
    }
    if (rc == VDNN_OK) rc = vdnn_plan_query_ops(g, be, true, info, &err);
    vdnn_plan_request rq = {.policy = o.policy, .training = true, .budget = o.budget, .host_budget = o.host_budget};
    if (rc == VDNN_OK) rc = vdnn_plan_build(g, info, &rq, &plan, &err);
    int code = 0;
    if (rc == VDNN_OK) {
        /* Static policies need the same memory at any budget: their peak is the smallest budget. */
        size_t min_budget = plan->peak_device_bytes;
        if (o.json) vdnn_plan_print_json(plan, g, min_budget, stdout);
        else vdnn_plan_print_table(plan, g, stdout);
        if (!plan->feasible) {
            char need[32], have[32];
            if (plan->host_bytes > plan->host_budget)
                fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs %s of host memory, the host budget is %s\n",
                        vdnn_policy_name(o.policy), vdnn_format_bytes(plan->host_bytes, need, sizeof need),
                        vdnn_format_bytes(plan->host_budget, have, sizeof have));
            else
                fprintf(stderr, "vdnn plan: infeasible: policy '%s' needs at least %s (%zu bytes); the budget is %s\n",
                        vdnn_policy_name(o.policy), vdnn_format_bytes(min_budget, need, sizeof need), min_budget,
                        vdnn_format_bytes(plan->budget, have, sizeof have));
            code = 3;
        }
    }
    vdnn_plan_free(plan);
    free(info);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
    return rc == VDNN_OK ? code : cli_fail("plan", &err);
}
