/* `vdnn info`: per-layer shapes, parameters, FLOPs and feature-map bytes, and the memory a training step needs. */
#include <stdlib.h>
#include <string.h>

#include "cmd_common.h"
#include "plan/plan.h"

static const char info_usage[] =
    "usage: vdnn info MODEL [--batch N] [--input CxHxW] [--classes N] [--json]\n"
    "Prints every layer's output shape, parameters, forward FLOPs and feature-map bytes, then the totals:\n"
    "weights, weight gradients, feature maps, gradient maps, workspace, and the in-core training memory\n"
    "for that batch, both with every tensor held at once and with vdnn's liveness reuse (policy none).\n";

static const char *shape_str(vdnn_shape s, char *buf, size_t n)
{
    snprintf(buf, n, "%dx%dx%d", s.c, s.h, s.w);
    return buf;
}

int vdnn_cmd_info(int argc, char **argv)
{
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(info_usage, stdout);
            return 0;
        }
    if (!cli_parse(argc, argv, 2, OPT_SHAPE | OPT_BATCH | OPT_JSON, true, &o, "info")) return 2;
    if (!o.model) {
        fputs(info_usage, stderr);
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
    vdnn_plan_request rq = {.policy = VDNN_POLICY_NONE, .training = true, .budget = SIZE_MAX, .host_budget = SIZE_MAX};
    if (rc == VDNN_OK) rc = vdnn_plan_build(g, info, &rq, &plan, &err);
    if (rc != VDNN_OK) {
        free(info);
        vdnn_backend_destroy(be);
        vdnn_graph_free(g);
        return cli_fail("info", &err);
    }
    size_t params = 0, fmaps = vdnn_shape_bytes(g->input), grads = 0, ws = 0, aux = 0;
    double flops = 0, flops_bwd = 0;
    char b1[32], b2[32];
    if (!o.json) {
        printf("%s at batch %d, input %dx%dx%d, %d classes\n", g->name, in.n, in.c, in.h, in.w, classes);
        printf("%-28s %-10s %-14s %12s %12s %14s\n", "layer", "type", "output", "params", "fwd GFLOP", "fmap bytes");
    } else {
        printf("{\"model\": \"%s\", \"batch\": %d, \"input\": \"%dx%dx%d\", \"classes\": %d, \"layers\": [", g->name, in.n,
               in.c, in.h, in.w, classes);
    }
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        size_t np = ly->n_weight + ly->n_bias;
        params += np;
        fmaps += vdnn_shape_bytes(ly->out);
        grads += vdnn_shape_bytes(ly->out);
        aux += info[l].aux_bytes;
        ws = info[l].fwd_ws_bytes > ws ? info[l].fwd_ws_bytes : ws;
        ws = info[l].bwd_ws_bytes > ws ? info[l].bwd_ws_bytes : ws;
        flops += ly->flops_fwd;
        flops_bwd += ly->flops_bwd;
        if (o.json)
            printf("%s{\"name\": \"%s\", \"type\": \"%s\", \"output\": \"%s\", \"params\": %zu, \"flops_fwd\": %.0f, "
                   "\"flops_bwd\": %.0f, \"fmap_bytes\": %zu}",
                   l > 1 ? ", " : "", ly->name, vdnn_layer_kind_name(ly->kind), shape_str(ly->out, b1, sizeof b1), np,
                   ly->flops_fwd, ly->flops_bwd, vdnn_shape_bytes(ly->out));
        else
            printf("%-28s %-10s %-14s %12zu %12.3f %14zu\n", ly->name, vdnn_layer_kind_name(ly->kind),
                   shape_str(ly->out, b1, sizeof b1), np, ly->flops_fwd / 1e9, vdnn_shape_bytes(ly->out));
    }
    size_t wbytes = params * sizeof(float);
    size_t naive = wbytes * 2 + fmaps + grads + ws;
    if (o.json) {
        printf("], \"params\": %zu, \"weights_bytes\": %zu, \"weight_grad_bytes\": %zu, \"momentum_bytes\": %zu, "
               "\"feature_map_bytes\": %zu, \"gradient_map_bytes\": %zu, \"aux_bytes\": %zu, \"workspace_bytes\": %zu, "
               "\"flops_fwd\": %.0f, \"flops_bwd\": %.0f, \"incore_all_held_bytes\": %zu, \"incore_planned_peak_bytes\": %zu}\n",
               params, wbytes, wbytes, wbytes, fmaps, grads, aux, ws, flops, flops_bwd, naive, plan->peak_device_bytes);
    } else {
        printf("\ntotals at batch %d:\n", in.n);
        printf("  parameters            %zu\n", params);
        printf("  weights               %s\n", vdnn_format_bytes(wbytes, b1, sizeof b1));
        printf("  weight gradients      %s\n", vdnn_format_bytes(wbytes, b1, sizeof b1));
        printf("  momentum (SGD)        %s\n", vdnn_format_bytes(wbytes, b1, sizeof b1));
        printf("  feature maps          %s (every layer's output, input included)\n", vdnn_format_bytes(fmaps, b1, sizeof b1));
        printf("  gradient maps         %s (one per layer output)\n", vdnn_format_bytes(grads, b1, sizeof b1));
        printf("  layer state (aux)     %s (pooling indices, batch-norm statistics)\n", vdnn_format_bytes(aux, b1, sizeof b1));
        printf("  workspace             %s (largest single op, CPU backend)\n", vdnn_format_bytes(ws, b1, sizeof b1));
        printf("  forward               %.2f GFLOP, backward %.2f GFLOP\n", flops / 1e9, flops_bwd / 1e9);
        printf("  in-core, every tensor held at once (weights + weight grads + feature maps + gradient maps + workspace):\n"
               "                        %s\n", vdnn_format_bytes(naive, b1, sizeof b1));
        printf("  in-core with vdnn's liveness reuse (policy none, momentum included): %s\n",
               vdnn_format_bytes(plan->peak_device_bytes, b2, sizeof b2));
    }
    vdnn_plan_free(plan);
    free(info);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
    return 0;
}
