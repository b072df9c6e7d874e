/* `vdnn profile`: measures what the planners need on this device (per-layer forward and backward times, the
 * copy link per direction) by running a few training steps, and writes it as a JSON profile. */
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

static const char profile_usage[] =
    "usage: vdnn profile MODEL --out FILE [--batch N] [--input CxHxW] [--classes N] [--iterations K]\n"
    "                    [--policy P] [--budget SIZE] [--threads N] [--device auto|cpu|cuda] [--no-tf32]\n"
    "                    [--deterministic] [--allow-oversubscribe] [--link-bandwidth BW]\n"
    "                    [--precision fp32|bf16|fp16] [--json]\n"
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
    if (cli_help_asked(argc, argv)) {
        fputs(profile_usage, stdout);
        fputs(CLI_CONV_ALGO_USAGE, stdout);
        fputs(CLI_PRECISION_USAGE, stdout);
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
    vdnn_error err = {VDNN_OK, ""};
    vdnn_model_t *m = NULL;
    vdnn_backend_t *be = NULL;
    vdnn_profile_t *prof = NULL;
    vdnn_shape in;
    int classes = 0;
    bool busy = false;
    vdnn_status rc = cli_load_model_opts(&o, &m, &err);
    if (rc == VDNN_OK) rc = cli_shape(&o, m, NULL, &in, &classes, &err);
    if (rc == VDNN_OK) rc = cli_backend(&o, &be, &err);
    if (rc == VDNN_OK) rc = vdnn_profile_measure_model(m, be, in, classes, &o.mem, (int)k, &prof, &busy, &err);
    if (rc == VDNN_OK) rc = vdnn_profile_save(prof, out, &err);
    if (rc == VDNN_OK) {
        vdnn_profile_summary ps;
        vdnn_profile_summarize(prof, &ps);
        const char *name = vdnn_model_name(m);
        if (o.json)
            printf("{\"profile\": \"%s\", \"device\": \"%s\", \"model\": \"%s\", \"batch\": %d, \"forward_s\": %.6f, "
                   "\"backward_s\": %.6f, \"d2h_bytes_per_s\": %.6g, \"h2d_bytes_per_s\": %.6g, \"d2h_latency_s\": %.6g, "
                   "\"h2d_latency_s\": %.6g, \"d2h_busy_bytes_per_s\": %.6g, \"h2d_busy_bytes_per_s\": %.6g, "
                   "\"copy_compute_slowdown\": %.6g, \"op_info\": %s}\n",
                   out, ps.device, name, in.n, ps.forward_s, ps.backward_s, ps.d2h_bytes_per_s, ps.h2d_bytes_per_s,
                   ps.d2h_latency_s, ps.h2d_latency_s, ps.d2h_busy_bytes_per_s, ps.h2d_busy_bytes_per_s, ps.copy_slowdown,
                   ps.op_info ? "true" : "false");
        else
            printf("profile of %s at batch %d on %s written to %s: forward %.3f ms, backward %.3f ms, link d2h %.2f GB/s "
                   "(latency %.1f us), h2d %.2f GB/s (latency %.1f us)\n",
                   name, in.n, ps.device, out, ps.forward_s * 1e3, ps.backward_s * 1e3, ps.d2h_bytes_per_s / 1e9,
                   ps.d2h_latency_s * 1e6, ps.h2d_bytes_per_s / 1e9, ps.h2d_latency_s * 1e6);
        if (!o.json && busy)
            printf("while layers compute: link d2h %.2f GB/s, h2d %.2f GB/s; layers beside a copy %.1f%% slower\n",
                   ps.d2h_busy_bytes_per_s / 1e9, ps.h2d_busy_bytes_per_s / 1e9, 100 * ps.copy_slowdown);
        else if (!o.json)
            printf("the link while layers compute was not measured (no plan swapping every map could be made)\n");
        /* Said, because it is what makes the file plan for this device elsewhere. */
        if (!o.json && ps.op_info)
            printf("op info of every layer recorded (%s backend%s%s, %s): `vdnn plan --profile %s` plans for this "
                   "device on any machine\n",
                   ps.device_info.backend, ps.device_info.name[0] ? " on " : "", ps.device_info.name,
                   ps.device_info.library, out);
    }
    vdnn_profile_free(prof);
    vdnn_backend_free(be);
    vdnn_model_free(m);
    return rc == VDNN_OK ? 0 : cli_fail("profile", &err);
}
