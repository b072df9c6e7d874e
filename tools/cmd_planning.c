/* Shared by the planning subcommands: model set-up, plans per policy, and where costs come from. */
#include "cmd_planning.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

vdnn_status cli_model_load(const cli_options *o, cli_model *m, vdnn_error *err)
{
    memset(m, 0, sizeof *m);
    vdnn_shape in;
    int classes;
    vdnn_backend_t *be = NULL;
    vdnn_status rc = cli_load_model(o->model, &m->g, err);
    if (rc == VDNN_OK) rc = cli_shape(o, m->g, NULL, &in, &classes, err);
    if (rc == VDNN_OK) rc = vdnn_graph_resolve(m->g, in, classes, err);
    /* Op info sizes workspaces and aux state. The CPU backend answers without a device; --device cuda plans with
     * the CUDA backend's op info (what `vdnn train --device cuda` plans with), which needs the GPU. */
    cli_options co = *o;
    if (strcmp(co.device, "cuda")) co.device = "cpu";
    if (rc == VDNN_OK) rc = cli_backend(&co, &be, err);
    if (rc == VDNN_OK) {
        m->info = calloc((size_t)m->g->n_layers, sizeof *m->info);
        m->algos = calloc((size_t)m->g->n_layers, sizeof *m->algos);
        m->force_algo = o->conv_algo;
        m->offload_params = o->offload_params;
        m->stream_inputs = o->stream_inputs;
        if (!m->info || !m->algos) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    }
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(m->g, be, true, m->algos, m->info, err);
    vdnn_backend_destroy(be);
    if (rc != VDNN_OK) cli_model_free(m);
    return rc;
}

void cli_model_free(cli_model *m)
{
    free(m->info);
    free(m->algos);
    vdnn_graph_free(m->g);
    memset(m, 0, sizeof *m);
}

vdnn_status cli_model_plan(const cli_model *m, vdnn_policy policy, size_t budget, size_t host_budget,
                           const vdnn_profile *prof, vdnn_plan_t **plan, vdnn_error *err)
{
    vdnn_plan_request rq = {.policy = policy, .training = true, .budget = budget, .host_budget = host_budget,
                            .variable_base = 0, .profile = prof, .algos = m->algos, .force_algo = m->force_algo,
                            .offload_params = m->offload_params, .stream_inputs = m->stream_inputs};
    return vdnn_plan_build(m->g, m->info, &rq, plan, err);
}

bool cli_take_flag(int *argc, char **argv, const char *flag, const char **value, const char *cmd)
{
    *value = NULL;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], flag)) continue;
        if (i + 1 >= *argc) {
            fprintf(stderr, "vdnn %s: %s needs a value (see vdnn %s --help)\n", cmd, flag, cmd);
            return false;
        }
        *value = argv[i + 1];
        memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 2) * sizeof *argv);
        *argc -= 2;
        i--; /* a repeated flag: the last one wins, as in cli_parse */
    }
    return true;
}

bool cli_refuse_flag(int argc, char **argv, const char *flag, const char *why, const char *cmd)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], flag)) {
            fprintf(stderr, "vdnn %s: unknown flag '%s'%s%s (see vdnn %s --help)\n", cmd, flag, why ? ": " : "", why ? why : "", cmd);
            return false;
        }
    return true;
}

/* "1e11", "100GB/s", "100GB", "16GiB/s": bytes (or flops) per second. */
static bool parse_rate(const char *s, bool sizes, double *out)
{
    double d;
    if (vdnn_parse_float(s, &d)) {
        if (!(d > 0) || !isfinite(d)) return false;
        *out = d;
        return true;
    }
    if (!sizes) return false;
    char buf[64];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return false;
    size_t n = strlen(buf);
    if (n > 2 && !strcmp(buf + n - 2, "/s")) buf[n - 2] = '\0';
    size_t v;
    if (!vdnn_parse_size(buf, &v) || v == 0 || v == SIZE_MAX) return false;
    *out = (double)v;
    return true;
}

static bool bad_value(const char *cmd, const char *flag, const char *v, const char *what)
{
    fprintf(stderr, "vdnn %s: %s: invalid value '%s' (%s)\n", cmd, flag, v, what);
    return false;
}

bool cli_take_cost_flags(int *argc, char **argv, cli_cost_options *c, const char *cmd)
{
    *c = (cli_cost_options){NULL, false, 1e12, 1e11, 16e9, 16e9};
    const char *prof, *flops, *bw, *link, *d2h, *h2d;
    if (!cli_take_flag(argc, argv, "--profile", &prof, cmd) || !cli_take_flag(argc, argv, "--estimate-flops", &flops, cmd) ||
        !cli_take_flag(argc, argv, "--estimate-bw", &bw, cmd) || !cli_take_flag(argc, argv, "--link-bandwidth", &link, cmd) ||
        !cli_take_flag(argc, argv, "--link-bandwidth-d2h", &d2h, cmd) ||
        !cli_take_flag(argc, argv, "--link-bandwidth-h2d", &h2d, cmd))
        return false;
    if (flops && !parse_rate(flops, false, &c->flops)) return bad_value(cmd, "--estimate-flops", flops, "a positive number such as 1e12");
    if (bw && !parse_rate(bw, true, &c->mem_bw)) return bad_value(cmd, "--estimate-bw", bw, "a bandwidth such as 1e11 or 100GB/s");
    if (link && !parse_rate(link, true, &c->link_d2h)) return bad_value(cmd, "--link-bandwidth", link, "a bandwidth such as 16GB/s");
    if (link) c->link_h2d = c->link_d2h;
    if (d2h && !parse_rate(d2h, true, &c->link_d2h)) return bad_value(cmd, "--link-bandwidth-d2h", d2h, "a bandwidth such as 16GB/s");
    if (h2d && !parse_rate(h2d, true, &c->link_h2d)) return bad_value(cmd, "--link-bandwidth-h2d", h2d, "a bandwidth such as 16GB/s");
    c->profile = prof;
    c->estimate_given = flops || bw || link || d2h || h2d;
    if (prof && c->estimate_given) {
        fprintf(stderr, "vdnn %s: --profile and the estimate flags exclude each other (see vdnn %s --help)\n", cmd, cmd);
        return false;
    }
    return true;
}

vdnn_status cli_cost_profile(const cli_cost_options *c, const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err)
{
    if (c->profile) return vdnn_profile_read(c->profile, g, p, err);
    /* The estimate has one link rate; the two directions may differ. */
    vdnn_status rc = vdnn_profile_estimate(g, c->flops, c->mem_bw, c->link_d2h, p, err);
    if (rc == VDNN_OK) p->h2d.bytes_per_s = c->link_h2d;
    return rc;
}

static const char *rate(double bytes_per_s, char *buf, size_t n)
{
    if (bytes_per_s >= 1e12) snprintf(buf, n, "%.4g TB/s", bytes_per_s / 1e12);
    else snprintf(buf, n, "%.4g GB/s", bytes_per_s / 1e9);
    return buf;
}

void cli_cost_describe(const cli_cost_options *c, const vdnn_profile *p, char *buf, size_t n)
{
    if (c->profile) {
        snprintf(buf, n, "profile %s (%s, %s)", c->profile, p->device, p->measured ? "measured" : "estimated");
        return;
    }
    char link[64], mem[24], l1[24], l2[24];
    if (c->link_d2h == c->link_h2d) snprintf(link, sizeof link, "link %s", rate(c->link_d2h, l1, sizeof l1));
    else snprintf(link, sizeof link, "link %s out, %s in", rate(c->link_d2h, l1, sizeof l1), rate(c->link_h2d, l2, sizeof l2));
    snprintf(buf, n, "roofline estimate: %.4g Tflop/s, memory %s, %s", c->flops / 1e12, rate(c->mem_bw, mem, sizeof mem), link);
}

const char *cli_policy_list(char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < VDNN_POLICY_COUNT && len < n; i++) {
        const char *sep = i == 0 ? "" : i == VDNN_POLICY_COUNT - 1 ? " or " : ", ";
        len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, vdnn_policy_name((vdnn_policy)i));
    }
    return buf;
}
