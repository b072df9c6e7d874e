/* `vdnn simulate`: predicts one training iteration of a plan from a profile (measured or estimated): time,
 * stalls, copy traffic and device memory, optionally as a Chrome trace. No data, no device. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

static const char simulate_usage_head[] =
    "usage: vdnn simulate MODEL [--batch N] [--input CxHxW | --seq-len N] [--context N] [--head-groups G|auto] [--attention fused|auto] [--classes N] [--policy P] [--budget SIZE]\n"
    "                     [--host-budget SIZE] [--profile FILE | estimate flags] [--trace FILE.json]\n"
    "                     [--precision fp32|bf16|fp16] [--json]\n"
    "Plans one training iteration like `vdnn plan` and replays it on a model of the device: one compute\n"
    "queue and a copy queue per direction, ordered as the executor orders them. Prints the predicted\n"
    "iteration time, the compute time, how long compute stalls waiting for copies, how busy each copy\n"
    "direction is, the peak of live device memory and the plan's peak (live memory plus fragmentation).\n"
    "--trace writes the timeline as Chrome trace-event JSON (open it in ui.perfetto.dev).\n"
    "Exits 3 if the plan does not fit the budget (the prediction is still printed).\n";

static void usage(FILE *f)
{
    fputs(simulate_usage_head, f);
    fputs(CLI_CONV_ALGO_USAGE, f);
    fputs(CLI_OFFLOAD_USAGE, f);
    fputs(CLI_PRECISION_USAGE, f);
    cli_policy_help(f);
    fputs(CLI_COST_USAGE, f);
}

static void print_text(const cli_model *m, const vdnn_plan_summary *p, const vdnn_timeline_summary *t, const char *costs)
{
    char a[32], b[32];
    double it = t->iteration_s > 0 ? t->iteration_s : 1;
    const double lb = p->lower_bound_s;
    printf("simulated %s, batch %d, input %dx%dx%d, policy %s\n", p->model, p->input.n, p->input.c, p->input.h,
           p->input.w, vdnn_policy_name(p->policy));
    printf("costs: %s\n", costs);
    printf("op info: %s\n", m->ops);
    printf("iteration:        %10.3f ms\n", t->iteration_s * 1e3);
    printf("lower bound:      %10.3f ms (no plan at this budget is faster; iteration / bound = %.3f)\n", lb * 1e3,
           lb > 0 ? t->iteration_s / lb : 0);
    printf("compute:          %10.3f ms (%.1f%% of the iteration)\n", t->compute_s * 1e3, 100 * t->compute_s / it);
    printf("stall:            %10.3f ms (compute waits for copies)\n", t->stall_s * 1e3);
    printf("device-to-host:   %10.3f ms busy\n", t->d2h_s * 1e3);
    printf("host-to-device:   %10.3f ms busy\n", t->h2d_s * 1e3);
    printf("moved:            %s per iteration, both directions\n", vdnn_format_bytes(p->bytes_moved, a, sizeof a));
    printf("peak live memory: %s (%zu bytes)\n", vdnn_format_bytes(t->peak_live_bytes, a, sizeof a), t->peak_live_bytes);
    printf("plan peak:        %s (%zu bytes, with placement)\n", vdnn_format_bytes(p->peak_device_bytes, a, sizeof a),
           p->peak_device_bytes);
    if (p->budget != SIZE_MAX)
        printf("budget:           %s: %s\n", vdnn_format_bytes(p->budget, b, sizeof b), p->feasible ? "fits" : "does NOT fit");
    (void)m;
}

static void print_json(const vdnn_plan_summary *p, const vdnn_timeline_summary *t, const cli_cost_options *c,
                       const vdnn_profile_t *prof)
{
    printf("{\"model\": \"%s\", \"batch\": %d, \"input\": \"%dx%dx%d\", \"classes\": %d, \"policy\": \"%s\", ", p->model,
           p->input.n, p->input.c, p->input.h, p->input.w, p->classes, vdnn_policy_name(p->policy));
    if (c->profile) {
        vdnn_profile_summary ps;
        vdnn_profile_summarize(prof, &ps);
        printf("\"costs\": \"profile\", \"device\": \"%s\", ", ps.device);
    } else {
        printf("\"costs\": \"estimate\", \"flops_per_s\": %.6g, \"mem_bytes_per_s\": %.6g, \"link_d2h_bytes_per_s\": %.6g, "
               "\"link_h2d_bytes_per_s\": %.6g, ",
               c->flops, c->mem_bw, c->link_d2h, c->link_h2d);
    }
    printf("\"feasible\": %s, \"budget_bytes\": ", p->feasible ? "true" : "false");
    if (p->budget == SIZE_MAX) printf("null");
    else printf("%zu", p->budget);
    printf(", \"lower_bound_s\": %.9g", p->lower_bound_s);
    printf(", \"iteration_s\": %.9g, \"compute_s\": %.9g, \"stall_s\": %.9g, \"d2h_s\": %.9g, \"h2d_s\": %.9g, "
           "\"peak_live_bytes\": %zu, \"peak_device_bytes\": %zu, \"bytes_moved\": %zu, \"host_bytes\": %zu}\n",
           t->iteration_s, t->compute_s, t->stall_s, t->d2h_s, t->h2d_s, t->peak_live_bytes, p->peak_device_bytes,
           p->bytes_moved, p->host_bytes);
}

int vdnn_cmd_simulate(int argc, char **argv)
{
    if (cli_help_asked(argc, argv)) {
        usage(stdout);
        return 0;
    }
    /* Our own flags come out of argv first; cli_parse handles the rest. */
    char **args = cli_args_copy(argc, argv);
    if (!args) return 1;
    int n = argc;
    cli_cost_options costs;
    const char *trace = NULL, *policy = NULL;
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    bool ok = cli_take_cost_flags(&n, args, &costs, "simulate") && cli_take_flag(&n, args, "--trace", &trace, "simulate") &&
              cli_take_flag(&n, args, "--policy", &policy, "simulate") &&
              cli_refuse_flag(n, args, "--poison", NULL, "simulate") &&
              cli_parse(n, args, 2, OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_MEMORY | OPT_JSON, true, &o, "simulate");
    free(args);
    if (ok && policy && !vdnn_policy_parse(policy, &o.mem.policy)) {
        char pol[256];
        fprintf(stderr, "vdnn simulate: --policy: invalid value '%s' (%s)\n", policy, cli_policy_list(pol, sizeof pol));
        ok = false;
    }
    if (!ok) return 2;
    if (!o.model) {
        usage(stderr);
        return 2;
    }
    vdnn_error err = {VDNN_OK, ""};
    cli_model m;
    vdnn_plan_t *plan = NULL;
    vdnn_timeline_t *t = NULL;
    vdnn_plan_summary sum;
    vdnn_timeline_summary ts;
    vdnn_status rc = cli_model_load(&o, &costs, &m, "simulate", &err);
    if (rc == VDNN_OK) rc = cli_model_plan(&m, &o, o.mem.policy, &plan, &err);
    if (rc == VDNN_OK) rc = vdnn_plan_simulate(plan, NULL, &t, &err);
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(plan, &sum, &err);
    if (rc == VDNN_OK && trace) {
        char name[160];
        snprintf(name, sizeof name, "%s, policy %s", sum.model, vdnn_policy_name(sum.policy));
        const vdnn_timeline_t *tl[1] = {t};
        const char *names[1] = {name};
        rc = vdnn_trace_write(trace, tl, names, 1, &err);
    }
    int code = 0;
    if (rc == VDNN_OK) {
        char desc[256];
        vdnn_timeline_summarize(t, &ts);
        cli_cost_describe(&costs, m.prof, desc, sizeof desc);
        if (o.json) print_json(&sum, &ts, &costs, m.prof);
        else print_text(&m, &sum, &ts, desc);
        if (trace && !o.json) printf("trace:            %s\n", trace);
        if (!sum.feasible) {
            char need[32], have[32];
            if (sum.host_bytes > sum.host_budget)
                fprintf(stderr, "vdnn simulate: infeasible: policy '%s' needs %s of host memory, the host budget is %s\n",
                        vdnn_policy_name(sum.policy), vdnn_format_bytes(sum.host_bytes, need, sizeof need),
                        vdnn_format_bytes(sum.host_budget, have, sizeof have));
            else
                fprintf(stderr, "vdnn simulate: infeasible: policy '%s' needs %s of device memory, the budget is %s\n",
                        vdnn_policy_name(sum.policy), vdnn_format_bytes(sum.peak_device_bytes, need, sizeof need),
                        vdnn_format_bytes(sum.budget, have, sizeof have));
            code = 3;
        }
    }
    vdnn_timeline_free(t);
    vdnn_plan_free(plan);
    cli_model_free(&m);
    return rc == VDNN_OK ? code : cli_fail("simulate", &err);
}
