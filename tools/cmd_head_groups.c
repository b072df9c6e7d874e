/* --head-groups auto: the fewest head groups whose plan fits the budget, for the commands that plan. */
#include "cmd_head_groups.h"
#include "cmd_planning.h"

#include <stdint.h>
#include <stdio.h>

vdnn_status cli_fit_head_groups(const vdnn_model_t *base, vdnn_backend_t *be, const cli_cost_options *costs,
                                vdnn_shape in, int classes, const vdnn_memory_options *mem, const char *cmd,
                                vdnn_model_t **out, vdnn_error *err)
{
    const bool est = costs && costs->estimate_given;
    int groups;
    bool fits;
    vdnn_status rc = vdnn_model_fit_head_groups(base, be, in, classes, mem, est ? costs->flops : 0,
                                                est ? costs->mem_bw : 0, est ? costs->link_d2h : 0,
                                                est ? costs->link_h2d : 0, out, &groups, &fits, err);
    if (rc != VDNN_OK) return rc;
    char b[48] = "the device (no --budget)";
    if (mem->budget && mem->budget != SIZE_MAX) vdnn_format_bytes(mem->budget, b, sizeof b);
    if (fits)
        fprintf(stderr, "vdnn %s: --head-groups auto: %d, the fewest head groups whose plan fits %s\n", cmd, groups, b);
    else
        fprintf(stderr, "vdnn %s: --head-groups auto: no grouping fits %s; %d head groups need the least\n", cmd, b,
                groups);
    return VDNN_OK;
}
