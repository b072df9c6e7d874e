/* --head-groups auto and --attention auto: the model variant whose plan fits the budget, for the commands that plan. */
#include "cmd_model_fit.h"
#include "cmd_planning.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

bool cli_model_fit_asked(const cli_options *o) { return o->head_groups == CLI_HEAD_GROUPS_AUTO || o->auto_attention; }

cli_options cli_model_fit_base(const cli_options *o)
{
    cli_options b = *o;
    if (b.head_groups == CLI_HEAD_GROUPS_AUTO) b.head_groups = 0;
    b.auto_attention = false;
    return b;
}

vdnn_status cli_model_fit_check(const cli_options *o, bool plans, bool profile, const char *cmd, vdnn_error *err)
{
    const char *flag = o->auto_attention ? "--attention auto" : "--head-groups auto";
    if (o->auto_attention && o->head_groups)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "--attention auto fuses whole attentions, with no probabilities "
                         "to group: it takes no --head-groups");
    if (o->fused_attention && o->head_groups)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "--attention fused computes each attention whole, with no "
                         "probabilities to group: it takes no --head-groups");
    if (!cli_model_fit_asked(o)) return VDNN_OK;
    if (!plans)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "%s chooses the model's %s for a budget: vdnn plan, simulate, "
                         "plot and train take it; give %s to vdnn %s", flag,
                         o->auto_attention ? "fused attentions" : "grouping",
                         o->auto_attention ? "--attention fused or materialized" : "a number of groups", cmd);
    if (profile && o->auto_attention)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "%s plans every choice of fused attentions, and a profile is "
                         "measured for one: give --attention fused or materialized, the profile's; or, with "
                         "--profile of the model unfused, --fused-profile with one of it with every attention fused "
                         "(vdnn profile --attention fused; vdnn plan, simulate, plot and train)", flag);
    if (profile)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "%s plans every grouping, and a profile is measured for one: give "
                         "--head-groups N, the profile's", flag);
    return VDNN_OK;
}

static void budget_text(const vdnn_memory_options *mem, char *b, size_t n)
{
    snprintf(b, n, "the device (no --budget)");
    if (mem->budget && mem->budget != SIZE_MAX) vdnn_format_bytes(mem->budget, b, n);
}

static vdnn_status fit_groups(const vdnn_model_t *base, vdnn_backend_t *be, const double r[4], vdnn_shape in,
                              int classes, const vdnn_memory_options *mem, const char *cmd, vdnn_model_t **out,
                              vdnn_error *err)
{
    int groups;
    bool fits;
    vdnn_status rc = vdnn_model_fit_head_groups(base, be, in, classes, mem, r[0], r[1], r[2], r[3], out, &groups,
                                                &fits, err);
    if (rc != VDNN_OK) return rc;
    char b[48];
    budget_text(mem, b, sizeof b);
    if (fits)
        fprintf(stderr, "vdnn %s: --head-groups auto: %d, the fewest head groups whose plan fits %s\n", cmd, groups, b);
    else
        fprintf(stderr, "vdnn %s: --head-groups auto: no grouping fits %s; %d head groups need the least\n", cmd, b,
                groups);
    return VDNN_OK;
}

static vdnn_status fit_attention(const vdnn_model_t *base, vdnn_backend_t *be, const double r[4],
                                 const vdnn_profile_t *const *measured, vdnn_shape in, int classes,
                                 const vdnn_memory_options *mem, const char *cmd, vdnn_model_t **out, vdnn_error *err)
{
    const int n = vdnn_model_attention_count(base);
    bool *fused = calloc(n > 0 ? (size_t)n : 1, sizeof *fused);
    if (!fused) return cli_error(err, VDNN_ERR_NO_MEMORY, "out of memory");
    int k;
    bool fits;
    vdnn_status rc = measured ? vdnn_model_fit_attention_measured(base, be, in, classes, mem, measured[0],
                                                                  measured[1], out, fused, &k, &fits, err)
                              : vdnn_model_fit_attention(base, be, in, classes, mem, r[0], r[1], r[2], r[3], out,
                                                         fused, &k, &fits, err);
    if (rc == VDNN_OK) {
        /* Which ones, as attention numbers from 0 in layer order, so a reader can find them in the plan. */
        char which[256] = "";
        size_t len = 0;
        for (int i = 0; i < n && len + 16 < sizeof which; i++)
            if (fused[i]) len += (size_t)snprintf(which + len, sizeof which - len, "%s%d", len ? "," : "", i);
        char b[48];
        budget_text(mem, b, sizeof b);
        fprintf(stderr, "vdnn %s: --attention auto: %d of %d attentions fused%s%s%s: %s %s%s%s\n", cmd, k, n,
                k ? " (" : "", which, k ? ")" : "", fits ? "the fastest plan that fits" : "no choice fits", b,
                fits ? "" : "; this one needs the least", measured ? " (costs from the two profiles)" : "");
    }
    free(fused);
    return rc;
}

vdnn_status cli_fit_model(const cli_options *o, const vdnn_model_t *base, vdnn_backend_t *be,
                          const cli_cost_options *costs, const vdnn_profile_t *const *measured, vdnn_shape in,
                          int classes, const vdnn_memory_options *mem, const char *cmd, vdnn_model_t **out,
                          vdnn_error *err)
{
    const bool est = costs && costs->estimate_given;
    const double r[4] = {est ? costs->flops : 0, est ? costs->mem_bw : 0, est ? costs->link_d2h : 0,
                         est ? costs->link_h2d : 0};
    return o->auto_attention ? fit_attention(base, be, r, measured, in, classes, mem, cmd, out, err)
                             : fit_groups(base, be, r, in, classes, mem, cmd, out, err);
}

vdnn_status cli_load_fused_profile(const char *path, const vdnn_model_t *base, vdnn_shape in, int classes,
                                   vdnn_profile_t **out, vdnn_error *err)
{
    vdnn_model_t *fused = NULL;
    vdnn_status rc = vdnn_model_with_fused_attention(base, &fused, err);
    if (rc == VDNN_OK) rc = vdnn_profile_load(path, fused, in, classes, out, err);
    vdnn_model_free(fused);
    return rc;
}
