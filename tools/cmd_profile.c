/* `vdnn profile`: measures what the planners need on this device (per-layer forward and backward times, the
 * copy link per direction) by running a few training steps, and writes it as a JSON profile. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"
#include "exec/profiler.h"

static const char profile_usage[] =
    "usage: vdnn profile MODEL --out FILE [--batch N] [--input CxHxW] [--classes N] [--iterations K]\n"
    "                    [--policy P] [--budget SIZE] [--threads N] [--device auto|cpu|cuda] [--no-tf32]\n"
    "                    [--deterministic] [--allow-oversubscribe] [--link-bandwidth BW] [--json]\n"
    "Runs K (default 5) recorded training steps on random data after one warm-up step, with learning\n"
    "rate 0, under a safe plan (--policy, default none), and times every layer's forward and backward\n"
    "(medians), the batch upload, gradient accumulation, and copies of 64 KiB and up in each direction\n"
    "(fitted to latency + bytes / bandwidth). Where the backend offers several convolution algorithms,\n"
    "each is timed on K steps of a net of its own. Then K steps of a plan that swaps every saved map (no\n"
    "budget) measure the link while layers compute and how much the copies slow the layers: on the CPU\n"
    "backend the copy threads share the cores. The profile names the device, model, batch and input; the\n"
    "planners (`--policy recompute|dyn|pooch|auto --profile FILE` on plan, simulate, plot and train) use it.\n"
    "Profile with the --no-tf32 / --deterministic settings the training will use: they change the times.\n"
    "--allow-oversubscribe: see vdnn train --help (policy um).\n" CLI_DEVICE_USAGE;

int vdnn_cmd_profile(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(profile_usage, stdout);
            fputs(CLI_CONV_ALGO_USAGE, stdout);
            return 0;
        }
    const char *out = NULL, *iters = NULL;
    if (!cli_take_flag(&argc, argv, "--out", &out, "profile") || !cli_take_flag(&argc, argv, "--iterations", &iters, "profile"))
        return 2;
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    if (!cli_refuse_flag(argc, argv, "--offload-params", "a profile times layers with their parameters on the device; "
                         "plan, simulate, plot and train take it", "profile") ||
        !cli_refuse_flag(argc, argv, "--stream-inputs", "a profile times layers with their inputs whole on the "
                         "device; plan, simulate, plot and train take it", "profile") ||
        !cli_parse(argc, argv, 2, OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_MEMORY | OPT_JSON, true, &o, "profile")) return 2;
    long k = 5;
    if (iters && (!vdnn_parse_int(iters, &k) || k < 1 || k > 1000)) {
        fprintf(stderr, "vdnn profile: --iterations: invalid value '%s' (an integer from 1 to 1000)\n", iters);
        return 2;
    }
    if (!o.model || !out) {
        fputs(profile_usage, stderr);
        return 2;
    }
    vdnn_error err;
    vdnn_error_clear(&err);
    vdnn_graph_t *g = NULL;
    vdnn_backend_t *be = NULL;
    vdnn_net_t *net = NULL;
    vdnn_profile prof;
    memset(&prof, 0, sizeof prof);
    float *images = NULL;
    int32_t *labels = NULL;
    vdnn_shape in;
    int classes = 0;
    vdnn_status rc = cli_load_model(o.model, &g, &err);
    if (rc == VDNN_OK) rc = cli_shape(&o, g, NULL, &in, &classes, &err);
    if (rc == VDNN_OK) rc = cli_backend(&o, &be, &err);
    vdnn_net_config cfg;
    if (rc == VDNN_OK) {
        cli_net_config(&o, in, classes, &cfg);
        rc = vdnn_net_create(g, be, &cfg, &net, &err);
        if (rc == VDNN_OK) cli_warn_oversubscribed("profile", net);
    }
    if (rc == VDNN_OK) {
        size_t n = vdnn_shape_count(g->input);
        images = malloc(n * sizeof *images);
        labels = malloc((size_t)in.n * sizeof *labels);
        if (!images || !labels) rc = vdnn_fail(&err, VDNN_ERR_NO_MEMORY, "out of memory");
        uint64_t z = 12345;
        for (size_t i = 0; rc == VDNN_OK && i < n; i++) images[i] = (float)((double)(vdnn_mix64(z + i) >> 11) / 9007199254740992.0) - 0.5f;
        for (int i = 0; rc == VDNN_OK && i < in.n; i++) labels[i] = (int32_t)(vdnn_mix64(z ^ (uint64_t)i) % (uint64_t)classes);
    }
    /* Copies up to the largest feature map: the sizes a plan will move. */
    size_t max_copy = 64u << 10;
    for (int l = 0; rc == VDNN_OK && l < g->n_layers; l++)
        if (vdnn_shape_bytes(g->layers[l].out) > max_copy) max_copy = vdnn_shape_bytes(g->layers[l].out);
    if (max_copy > (256u << 20)) max_copy = 256u << 20;
    if (rc == VDNN_OK) rc = vdnn_profile_measure(net, images, labels, (int)k, max_copy, &prof, &err);
    /* The other convolution algorithms, each on a net of its own once this one is gone. */
    vdnn_net_free(net);
    net = NULL;
    if (rc == VDNN_OK) rc = vdnn_profile_measure_algos(g, be, &cfg, images, labels, (int)k, &prof, &err);
    bool busy = false;
    if (rc == VDNN_OK) rc = vdnn_profile_measure_busy(g, be, &cfg, images, labels, (int)k, &prof, &busy, &err);
    if (rc == VDNN_OK) rc = vdnn_profile_write(out, &prof, &err);
    if (rc == VDNN_OK) {
        double fwd = 0, bwd = 0;
        for (int l = 1; l < g->n_layers; l++) {
            fwd += prof.fwd_s[l];
            bwd += prof.bwd_s[l];
        }
        if (o.json)
            printf("{\"profile\": \"%s\", \"device\": \"%s\", \"model\": \"%s\", \"batch\": %d, \"forward_s\": %.6f, "
                   "\"backward_s\": %.6f, \"d2h_bytes_per_s\": %.6g, \"h2d_bytes_per_s\": %.6g, \"d2h_latency_s\": %.6g, "
                   "\"h2d_latency_s\": %.6g, \"d2h_busy_bytes_per_s\": %.6g, \"h2d_busy_bytes_per_s\": %.6g, "
                   "\"copy_compute_slowdown\": %.6g}\n",
                   out, prof.device, g->name, in.n, fwd, bwd, prof.d2h.bytes_per_s, prof.h2d.bytes_per_s,
                   prof.d2h.latency_s, prof.h2d.latency_s, vdnn_profile_link(&prof, true)->bytes_per_s,
                   vdnn_profile_link(&prof, false)->bytes_per_s, prof.copy_slowdown);
        else
            printf("profile of %s at batch %d on %s written to %s: forward %.3f ms, backward %.3f ms, link d2h %.2f GB/s "
                   "(latency %.1f us), h2d %.2f GB/s (latency %.1f us)\n",
                   g->name, in.n, prof.device, out, fwd * 1e3, bwd * 1e3, prof.d2h.bytes_per_s / 1e9,
                   prof.d2h.latency_s * 1e6, prof.h2d.bytes_per_s / 1e9, prof.h2d.latency_s * 1e6);
        if (!o.json && busy)
            printf("while layers compute: link d2h %.2f GB/s, h2d %.2f GB/s; layers beside a copy %.1f%% slower\n",
                   prof.d2h_busy.bytes_per_s / 1e9, prof.h2d_busy.bytes_per_s / 1e9, 100 * prof.copy_slowdown);
        else if (!o.json)
            printf("the link while layers compute was not measured (no plan swapping every map could be made)\n");
    }
    free(images);
    free(labels);
    vdnn_profile_release(&prof);
    vdnn_net_free(net);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
    return rc == VDNN_OK ? 0 : cli_fail("profile", &err);
}
