/* Shared by the planning subcommands: model set-up, plans per policy, and where costs come from. */
#include "cmd_planning.h"
#include "cmd_model_fit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Where the plans' op info comes from, for the command's notes and cost lines. */
static void describe_ops(const cli_model *m, const cli_cost_options *c, char *buf, size_t n)
{
    if (m->be) {
        vdnn_device_info d;
        vdnn_error e = {VDNN_OK, ""};
        if (vdnn_backend_describe(m->be, &d, &e) == VDNN_OK) snprintf(buf, n, "the %s backend here", d.backend);
        return;
    }
    vdnn_profile_summary ps;
    vdnn_profile_summarize(m->prof, &ps);
    const vdnn_device_info *d = &ps.device_info;
    snprintf(buf, n, "%s (%s%s%s, %s)", c->profile, d->backend, d->name[0] ? ": " : "", d->name,
             strcmp(ps.op_info_source, "described") ? "recorded on the device"
                                                     : "described without the device: see the file's note");
}

/* --fused-profile: read for the base model with every attention fused; m->prof stays the unfused one's. */
static vdnn_status load_fused_profile(const cli_cost_options *c, cli_model *m, vdnn_error *err)
{
    vdnn_status rc = cli_load_fused_profile(c->fused_profile, m->base, m->in, m->classes, &m->fused_prof, err);
    if (rc == VDNN_OK) m->base_prof = m->prof;
    return rc;
}

vdnn_status cli_model_load(const cli_options *o, const cli_cost_options *c, cli_model *m, const char *cmd,
                           vdnn_error *err)
{
    memset(m, 0, sizeof *m);
    m->costs = c;
    m->cmd = cmd;
    const cli_options base = cli_model_fit_base(o); /* grouped or fused by cli_model_plan */
    const bool plans = !strcmp(cmd, "plan") || !strcmp(cmd, "simulate") || !strcmp(cmd, "plot");
    const bool measured = c && c->fused_profile;
    vdnn_status rc = measured && !o->auto_attention
                         ? cli_error(err, VDNN_ERR_INVALID_ARG, "--fused-profile is for --attention auto (with --profile)")
                         : cli_model_fit_check(o, plans && c, c && c->profile && !measured, cmd, err);
    if (rc == VDNN_OK) rc = cli_load_model_opts(&base, &m->m, err);
    /* The search starts from the model as loaded; m->m stands for it until cli_model_plan chooses a variant. */
    if (rc == VDNN_OK && cli_model_fit_asked(o)) {
        m->fit = *o;
        m->base = m->m;
    }
    if (rc == VDNN_OK) rc = cli_shape(o, m->m, NULL, &m->in, &m->classes, err);
    if (rc == VDNN_OK && c) rc = cli_cost_profile(c, m->m, m->in, m->classes, &m->prof, err);
    if (rc == VDNN_OK && measured) rc = load_fused_profile(c, m, err);
    /* A profile that recorded its device's op info plans for that device, which need not be here, unless --device
     * names a backend to plan with instead. */
    vdnn_profile_summary ps = {0};
    if (rc == VDNN_OK && m->prof) vdnn_profile_summarize(m->prof, &ps);
    const bool device_named = strcmp(o->device, "auto") != 0;
    const bool from_profile = rc == VDNN_OK && c && c->profile && ps.op_info && !device_named;
    if (rc == VDNN_OK && c && c->profile && !ps.op_info)
        fprintf(stderr,
                "vdnn %s: note: %s records no op info (format version %d%s): planning with the %s backend's op info "
                "here, which may not be the profiled device's; profile again with this vdnn to plan for that device\n",
                cmd, c->profile, ps.version, ps.measured ? "" : ", an estimate", strcmp(o->device, "cuda") ? "cpu" : "cuda");
    cli_options co = *o;
    if (strcmp(co.device, "cuda")) co.device = "cpu";
    if (rc == VDNN_OK && !from_profile) rc = cli_backend(&co, &m->be, err);
    /* Planning a profile of one device with another's op info is allowed (to compare them) but said. */
    if (rc == VDNN_OK && m->be && ps.op_info) {
        vdnn_error e = {VDNN_OK, ""};
        if (vdnn_profile_check_backend(m->prof, m->m, m->be, &e) != VDNN_OK)
            fprintf(stderr, "vdnn %s: note: --device %s: planning with this backend's op info, not the profile's: %s\n",
                    cmd, co.device, e.msg);
    }
    if (rc == VDNN_OK) describe_ops(m, c, m->ops, sizeof m->ops);
    if (rc != VDNN_OK) cli_model_free(m);
    return rc;
}

void cli_model_free(cli_model *m)
{
    if (m->m != m->base) vdnn_model_free(m->base);
    if (m->prof != m->base_prof) vdnn_profile_free(m->prof);
    vdnn_profile_free(m->base_prof);
    vdnn_profile_free(m->fused_prof);
    vdnn_backend_free(m->be);
    vdnn_model_free(m->m);
    memset(m, 0, sizeof *m);
}

/* --head-groups auto or --attention auto: m->m and m->prof become the base's variant chosen under mem. */
static vdnn_status regroup(cli_model *m, const vdnn_memory_options *mem, vdnn_error *err)
{
    vdnn_model_t *chosen = NULL;
    vdnn_profile_t *prof = NULL;
    const vdnn_profile_t *both[2] = {m->base_prof, m->fused_prof};
    const vdnn_profile_t *const *measured = m->fused_prof ? both : NULL;
    vdnn_status rc = cli_fit_model(&m->fit, m->base, m->be, m->costs, measured, m->in, m->classes, mem, m->cmd,
                                   &chosen, err);
    if (rc == VDNN_OK)
        rc = measured ? vdnn_profile_compose(measured, 2, chosen, &prof, err)
                      : cli_cost_profile(m->costs, chosen, m->in, m->classes, &prof, err);
    if (rc != VDNN_OK) {
        vdnn_model_free(chosen);
        return rc;
    }
    if (m->m != m->base) vdnn_model_free(m->m);
    if (m->prof != m->base_prof) vdnn_profile_free(m->prof);
    m->m = chosen;
    m->prof = prof;
    return VDNN_OK;
}

vdnn_status cli_model_plan(cli_model *m, const cli_options *o, vdnn_policy policy, vdnn_plan_t **plan,
                           vdnn_error *err)
{
    vdnn_memory_options mem = o->mem;
    mem.policy = policy;
    vdnn_status rc = m->base ? regroup(m, &mem, err) : VDNN_OK;
    if (rc != VDNN_OK) return rc;
    return vdnn_plan_create(m->m, m->be, m->prof, m->in, m->classes, &mem, plan, err);
}

vdnn_status cli_print_plan(const vdnn_plan_t *p, bool json, FILE *f, vdnn_error *err)
{
    size_t n = 0;
    vdnn_status rc = json ? vdnn_plan_json(p, NULL, 0, &n, err) : vdnn_plan_table(p, NULL, 0, &n, err);
    char *text = rc == VDNN_OK ? malloc(n + 1) : NULL;
    if (rc == VDNN_OK && !text) rc = cli_error(err, VDNN_ERR_NO_MEMORY, "out of memory");
    if (rc == VDNN_OK) rc = json ? vdnn_plan_json(p, text, n + 1, NULL, err) : vdnn_plan_table(p, text, n + 1, NULL, err);
    /* The table's advice names option fields: this command's flags, for its reader. */
    char *shown = rc == VDNN_OK && !json ? malloc(n + 256) : NULL;
    if (shown) {
        cli_flag_names(text, shown, n + 256);
        n = strlen(shown);
    }
    if (rc == VDNN_OK && fwrite(shown ? shown : text, 1, n, f) != n) rc = cli_error(err, VDNN_ERR_IO, "cannot write the plan");
    free(shown);
    free(text);
    return rc;
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
    *c = (cli_cost_options){NULL, NULL, false, VDNN_ESTIMATE_FLOPS_PER_S, VDNN_ESTIMATE_MEM_BYTES_PER_S,
                            VDNN_ESTIMATE_LINK_BYTES_PER_S, VDNN_ESTIMATE_LINK_BYTES_PER_S};
    const char *prof, *fused, *flops, *bw, *link, *d2h, *h2d;
    if (!cli_take_flag(argc, argv, "--profile", &prof, cmd) || !cli_take_flag(argc, argv, "--fused-profile", &fused, cmd) || !cli_take_flag(argc, argv, "--estimate-flops", &flops, cmd) ||
        !cli_take_flag(argc, argv, "--estimate-bw", &bw, cmd) || !cli_take_flag(argc, argv, "--link-bandwidth", &link, cmd) ||
        !cli_take_flag(argc, argv, "--link-bandwidth-d2h", &d2h, cmd) ||
        !cli_take_flag(argc, argv, "--link-bandwidth-h2d", &h2d, cmd))
        return false;
    if (flops && !parse_rate(flops, false, &c->flops)) return bad_value(cmd, "--estimate-flops", flops, "a positive number such as 1e13");
    if (bw && !parse_rate(bw, true, &c->mem_bw)) return bad_value(cmd, "--estimate-bw", bw, "a bandwidth such as 5e11 or 500GB/s");
    if (link && !parse_rate(link, true, &c->link_d2h)) return bad_value(cmd, "--link-bandwidth", link, "a bandwidth such as 16GB/s");
    if (link) c->link_h2d = c->link_d2h;
    if (d2h && !parse_rate(d2h, true, &c->link_d2h)) return bad_value(cmd, "--link-bandwidth-d2h", d2h, "a bandwidth such as 16GB/s");
    if (h2d && !parse_rate(h2d, true, &c->link_h2d)) return bad_value(cmd, "--link-bandwidth-h2d", h2d, "a bandwidth such as 16GB/s");
    c->profile = prof;
    c->fused_profile = fused;
    c->estimate_given = flops || bw || link || d2h || h2d;
    if (fused && !prof) {
        fprintf(stderr, "vdnn %s: --fused-profile goes with --profile (the model's profile unfused) and --attention "
                "auto (see vdnn %s --help)\n", cmd, cmd);
        return false;
    }
    if (prof && c->estimate_given) {
        fprintf(stderr, "vdnn %s: --profile and the estimate flags exclude each other (see vdnn %s --help)\n", cmd, cmd);
        return false;
    }
    return true;
}

vdnn_status cli_cost_profile(const cli_cost_options *c, const vdnn_model_t *m, vdnn_shape in, int classes,
                             vdnn_profile_t **p, vdnn_error *err)
{
    *p = NULL;
    if (c->profile) return vdnn_profile_load(c->profile, m, in, classes, p, err);
    if (!c->estimate_given) return VDNN_OK;
    return vdnn_profile_estimate_model(m, in, classes, c->flops, c->mem_bw, c->link_d2h, c->link_h2d, p, err);
}

static const char *rate(double bytes_per_s, char *buf, size_t n)
{
    if (bytes_per_s >= 1e12) snprintf(buf, n, "%.4g TB/s", bytes_per_s / 1e12);
    else snprintf(buf, n, "%.4g GB/s", bytes_per_s / 1e9);
    return buf;
}

void cli_cost_describe(const cli_cost_options *c, const vdnn_profile_t *p, char *buf, size_t n)
{
    if (c->profile) {
        vdnn_profile_summary ps;
        vdnn_profile_summarize(p, &ps);
        snprintf(buf, n, "profile %s (%s, %s)", c->profile, ps.device, ps.measured ? "measured" : "estimated");
        return;
    }
    char link[64], mem[24], l1[24], l2[24];
    if (c->link_d2h == c->link_h2d) snprintf(link, sizeof link, "link %s", rate(c->link_d2h, l1, sizeof l1));
    else snprintf(link, sizeof link, "link %s out, %s in", rate(c->link_d2h, l1, sizeof l1), rate(c->link_h2d, l2, sizeof l2));
    snprintf(buf, n, "roofline estimate%s: %.4g Tflop/s, memory %s, %s", c->estimate_given ? "" : " (the default)",
             c->flops / 1e12, rate(c->mem_bw, mem, sizeof mem), link);
}
