/* `vdnn info`: per-layer shapes, parameters, FLOPs and feature-map bytes, and the memory a training step needs. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

static const char info_usage[] =
    "usage: vdnn info MODEL [--batch N] [--input CxHxW | --seq-len N] [--context N] [--head-groups G] [--attention fused] [--classes N] [--precision fp32|bf16|fp16] [--json]\n"
    "Prints every layer's output shape, parameters, forward FLOPs and feature-map bytes, then the totals:\n"
    "weights, weight gradients, feature maps, gradient maps, workspace, and the in-core training memory\n"
    "for that batch, both with every tensor held at once and with vdnn's liveness reuse (policy none).\n"
    CLI_PRECISION_USAGE;

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
    if (cli_help_asked(argc, argv)) {
        fputs(info_usage, stdout);
        return 0;
    }
    if (!cli_parse(argc, argv, 2, OPT_SHAPE | OPT_BATCH | OPT_JSON | OPT_PRECISION, true, &o, "info")) return 2;
    if (!o.model) {
        fputs(info_usage, stderr);
        return 2;
    }
    vdnn_error err = {VDNN_OK, ""};
    o.device = "cpu";
    cli_model m;
    vdnn_plan_t *plan = NULL;
    vdnn_layer_info *layers = NULL;
    vdnn_plan_summary sum;
    vdnn_status rc = cli_model_load(&o, NULL, &m, "info", &err);
    const vdnn_shape in = m.in;
    const int classes = m.classes;
    if (rc == VDNN_OK) {
        layers = calloc((size_t)vdnn_model_layer_count(m.m), sizeof *layers);
        if (!layers) rc = cli_error(&err, VDNN_ERR_NO_MEMORY, "out of memory");
    }
    if (rc == VDNN_OK) rc = vdnn_model_layers_precision(m.m, in, classes, m.be, o.mem.precision, layers, &err);
    /* In-core: policy none, no budget, the default algorithms. */
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.precision = o.mem.precision;
    if (rc == VDNN_OK) rc = vdnn_plan_create(m.m, m.be, NULL, in, classes, &mem, &plan, &err);
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(plan, &sum, &err);
    if (rc != VDNN_OK) {
        free(layers);
        vdnn_plan_free(plan);
        cli_model_free(&m);
        return cli_fail("info", &err);
    }
    const char *name = vdnn_model_name(m.m);
    size_t params = 0, fmaps = layers[0].out_bytes, grads = 0, ws = 0, aux = 0;
    double flops = 0, flops_bwd = 0;
    char b1[32], b2[32];
    if (!o.json) {
        printf("%s at batch %d, input %dx%dx%d, %d classes, maps in %s\n", name, in.n, in.c, in.h, in.w, classes,
               vdnn_precision_name(o.mem.precision));
        printf("%-28s %-10s %-14s %12s %12s %14s\n", "layer", "type", "output", "params", "fwd GFLOP", "fmap bytes");
    } else {
        printf("{\"model\": \"%s\", \"batch\": %d, \"input\": \"%dx%dx%d\", \"classes\": %d, \"precision\": \"%s\", "
               "\"layers\": [", name, in.n, in.c, in.h, in.w, classes, vdnn_precision_name(o.mem.precision));
    }
    for (int l = 1; l < vdnn_model_layer_count(m.m); l++) {
        const vdnn_layer_info *ly = &layers[l];
        size_t np = ly->weights + ly->biases;
        params += np;
        fmaps += ly->out_bytes;
        grads += ly->out_bytes;
        aux += ly->aux_bytes;
        ws = ly->fwd_ws_bytes > ws ? ly->fwd_ws_bytes : ws;
        ws = ly->bwd_ws_bytes > ws ? ly->bwd_ws_bytes : ws;
        flops += ly->flops_fwd;
        flops_bwd += ly->flops_bwd;
        if (o.json)
            printf("%s{\"name\": \"%s\", \"type\": \"%s\", \"output\": \"%s\", \"params\": %zu, \"flops_fwd\": %.0f, "
                   "\"flops_bwd\": %.0f, \"fmap_bytes\": %zu}",
                   l > 1 ? ", " : "", ly->name, ly->type, shape_str(ly->out, b1, sizeof b1), np,
                   ly->flops_fwd, ly->flops_bwd, ly->out_bytes);
        else
            printf("%-28s %-10s %-14s %12zu %12.3f %14zu\n", ly->name, ly->type, shape_str(ly->out, b1, sizeof b1), np,
                   ly->flops_fwd / 1e9, ly->out_bytes);
    }
    size_t wbytes = params * sizeof(float);
    size_t naive = wbytes * 2 + fmaps + grads + ws;
    if (o.json) {
        printf("], \"params\": %zu, \"weights_bytes\": %zu, \"weight_grad_bytes\": %zu, \"momentum_bytes\": %zu, "
               "\"feature_map_bytes\": %zu, \"gradient_map_bytes\": %zu, \"aux_bytes\": %zu, \"workspace_bytes\": %zu, "
               "\"flops_fwd\": %.0f, \"flops_bwd\": %.0f, \"incore_all_held_bytes\": %zu, \"incore_planned_peak_bytes\": %zu}\n",
               params, wbytes, wbytes, wbytes, fmaps, grads, aux, ws, flops, flops_bwd, naive, sum.peak_device_bytes);
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
               vdnn_format_bytes(sum.peak_device_bytes, b2, sizeof b2));
    }
    vdnn_plan_free(plan);
    free(layers);
    cli_model_free(&m);
    return 0;
}
