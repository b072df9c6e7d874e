/* `vdnn plot`: simulates one training iteration under several policies and draws device memory over
 * time (and optionally the compute and copy lanes) as SVG. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

#define PLOT_MAX 8

static const char plot_usage_head[] =
    "usage: vdnn plot MODEL [--batch N] [--input CxHxW] [--classes N] [--policies P,P,...] [--budget SIZE]\n"
    "                 [--host-budget SIZE] [--profile FILE | estimate flags] --out FILE.svg [--gantt FILE.svg]\n"
    "                 [--trace FILE.json] [--title TEXT] [--precision fp32|bf16|fp16]\n"
    "Simulates one training iteration under each policy (as `vdnn simulate` does) and draws the live device\n"
    "memory over the iteration for all of them on shared axes (--out), with the budget as a dashed line,\n"
    "and a Gantt chart of each one's compute, device-to-host and host-to-device lanes (--gantt). Prints a\n"
    "summary line per policy. --trace writes all timelines as one Chrome trace.\n";

static void usage(FILE *f)
{
    char pol[256];
    fputs(plot_usage_head, f);
    fputs(CLI_CONV_ALGO_USAGE, f);
    fputs(CLI_OFFLOAD_USAGE, f);
    fputs(CLI_PRECISION_USAGE, f);
    fprintf(f, "Policies: %s (default: all but um, whose managed pool the memory chart does not show; at most %d).\n",
            cli_policy_list(pol, sizeof pol), PLOT_MAX);
    fputs(CLI_COST_USAGE, f);
}

/* "none,all,conv" -> policies; prints and returns false on an unknown name. */
static bool parse_policies(const char *s, vdnn_policy *out, int *n)
{
    *n = 0;
    if (!s) {
        /* Not um: its swapped maps live outside the arena, so its curve would not compare with the others'. */
        for (int i = 0; i < VDNN_POLICY_COUNT && *n < PLOT_MAX; i++)
            if (i != VDNN_POLICY_UM) out[(*n)++] = (vdnn_policy)i;
        return true;
    }
    char buf[512], pol[256];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) {
        fprintf(stderr, "vdnn plot: --policies: the list is too long\n");
        return false;
    }
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        vdnn_policy p;
        if (!vdnn_policy_parse(tok, &p)) {
            fprintf(stderr, "vdnn plot: --policies: unknown policy '%s' (known: %s)\n", tok, cli_policy_list(pol, sizeof pol));
            return false;
        }
        if (*n == PLOT_MAX) {
            fprintf(stderr, "vdnn plot: --policies: at most %d policies in one chart\n", PLOT_MAX);
            return false;
        }
        out[(*n)++] = p;
    }
    if (!*n) {
        fprintf(stderr, "vdnn plot: --policies: invalid value '%s' (a comma-separated list such as none,all,conv)\n", s);
        return false;
    }
    return true;
}

int vdnn_cmd_plot(int argc, char **argv)
{
    if (cli_help_asked(argc, argv)) {
        usage(stdout);
        return 0;
    }
    char **args = cli_args_copy(argc, argv);
    if (!args) return 1;
    int n = argc;
    cli_cost_options costs;
    const char *out = NULL, *gantt = NULL, *trace = NULL, *policies = NULL, *title = NULL;
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    bool ok = cli_take_cost_flags(&n, args, &costs, "plot") && cli_take_flag(&n, args, "--out", &out, "plot") &&
              cli_take_flag(&n, args, "--gantt", &gantt, "plot") && cli_take_flag(&n, args, "--trace", &trace, "plot") &&
              cli_take_flag(&n, args, "--policies", &policies, "plot") && cli_take_flag(&n, args, "--title", &title, "plot") &&
              cli_refuse_flag(n, args, "--policy", "use --policies P,P,...", "plot") &&
              cli_refuse_flag(n, args, "--poison", NULL, "plot") &&
              cli_parse(n, args, 2, OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_MEMORY, true, &o, "plot");
    free(args);
    vdnn_policy pols[PLOT_MAX];
    int n_pol = 0;
    if (ok) ok = parse_policies(policies, pols, &n_pol);
    if (ok && !out && !gantt) {
        fprintf(stderr, "vdnn plot: give --out FILE.svg (and/or --gantt FILE.svg) (see vdnn plot --help)\n");
        ok = false;
    }
    if (!ok) return 2;
    if (!o.model) {
        usage(stderr);
        return 2;
    }

    vdnn_error err = {VDNN_OK, ""};
    cli_model m;
    vdnn_timeline_t *tls[PLOT_MAX] = {NULL};
    vdnn_timeline_summary ts[PLOT_MAX];
    const vdnn_timeline_t *tl[PLOT_MAX];
    char names[PLOT_MAX][96];
    const char *name_ptr[PLOT_MAX];
    bool fits[PLOT_MAX];
    size_t plan_peak[PLOT_MAX];
    vdnn_status rc = cli_model_load(&o, &costs, &m, "plot", &err);
    for (int i = 0; rc == VDNN_OK && i < n_pol; i++) {
        vdnn_plan_t *plan = NULL;
        rc = cli_model_plan(&m, &o, pols[i], &plan, &err);
        if (rc == VDNN_OK) rc = vdnn_plan_simulate(plan, NULL, &tls[i], &err);
        if (rc == VDNN_OK) {
            vdnn_plan_summary sum;
            memset(&sum, 0, sizeof sum);
            vdnn_timeline_summarize(tls[i], &ts[i]);
            rc = vdnn_plan_summarize(plan, &sum, &err);
            fits[i] = rc == VDNN_OK && sum.feasible;
            plan_peak[i] = rc == VDNN_OK ? sum.peak_device_bytes : 0;
            /* The curve shows live bytes; placement can need more, so say what the plan needs. */
            char need[32];
            if (sum.feasible) snprintf(names[i], sizeof names[i], "%s", vdnn_policy_name(pols[i]));
            else if (rc == VDNN_OK && sum.host_bytes > sum.host_budget)
                snprintf(names[i], sizeof names[i], "%s (over the host budget)", vdnn_policy_name(pols[i]));
            else
                snprintf(names[i], sizeof names[i], "%s (over budget: needs %s)", vdnn_policy_name(pols[i]),
                         vdnn_format_bytes(sum.peak_device_bytes, need, sizeof need));
            name_ptr[i] = names[i];
            tl[i] = tls[i];
        }
        vdnn_plan_free(plan);
    }
    char desc[256], head[256], t1[400], t2[400];
    if (rc == VDNN_OK) {
        cli_cost_describe(&costs, m.prof, desc, sizeof desc);
        snprintf(head, sizeof head, "%s, batch %d, input %dx%dx%d", vdnn_model_name(m.m), m.in.n, m.in.c, m.in.h, m.in.w);
        if (title) {
            snprintf(t1, sizeof t1, "%s", title);
            snprintf(t2, sizeof t2, "%s", title);
        } else {
            snprintf(t1, sizeof t1, "%s: device memory over one training iteration", head);
            snprintf(t2, sizeof t2, "%s: compute and copy lanes", head);
        }
    }
    if (rc == VDNN_OK && out) rc = vdnn_svg_memory(out, t1, desc, tl, name_ptr, n_pol, o.mem.budget, &err);
    if (rc == VDNN_OK && gantt) rc = vdnn_svg_gantt(gantt, t2, desc, tl, name_ptr, n_pol, &err);
    if (rc == VDNN_OK && trace) rc = vdnn_trace_write(trace, tl, name_ptr, n_pol, &err);
    if (rc == VDNN_OK) {
        char a[32], b[32];
        printf("%s; costs: %s\n", head, desc);
        printf("%-12s %12s %12s %12s %12s %5s\n", "policy", "iteration", "stall", "peak live", "plan peak", "fits");
        for (int i = 0; i < n_pol; i++)
            printf("%-12s %9.3f ms %9.3f ms %12s %12s %5s\n", vdnn_policy_name(pols[i]), ts[i].iteration_s * 1e3,
                   ts[i].stall_s * 1e3, vdnn_format_bytes(ts[i].peak_live_bytes, a, sizeof a),
                   vdnn_format_bytes(plan_peak[i], b, sizeof b), fits[i] ? "yes" : "no");
        if (out) printf("memory chart: %s\n", out);
        if (gantt) printf("gantt chart:  %s\n", gantt);
        if (trace) printf("trace:        %s\n", trace);
    }
    for (int i = 0; i < n_pol; i++) vdnn_timeline_free(tls[i]);
    cli_model_free(&m);
    return rc == VDNN_OK ? 0 : cli_fail("plot", &err);
}
