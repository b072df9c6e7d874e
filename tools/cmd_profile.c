/* `vdnn profile`: measures what the planners need on this device (per-layer forward and backward times, the
 * copy link per direction) by running a few training steps, and writes it as a JSON profile; or, with
 * --describe-gpu, writes a GPU's profile without the GPU (its op info from the CUDA backend's rules, times
 * estimated). */
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
    "--allow-oversubscribe: see vdnn train --help (policy um).\n"
    "\n"
    "       vdnn profile MODEL --out FILE --describe-gpu CC [--gpu-name NAME] [--batch N] [--input CxHxW]\n"
    "                    [--classes N] [--precision fp32|bf16|fp16] [--no-tf32] [--estimate-flops F]\n"
    "                    [--estimate-bw B] [--link-bandwidth L] [--json]\n"
    "With --describe-gpu (a compute capability such as 9.0 for Hopper, 8.0 for the A100), nothing runs: the\n"
    "profile carries every layer's op info as the CUDA backend's own rules give it for that GPU without the\n"
    "device (what ops keep, what backward reads, their scratch; convolutions' workspaces are those of cuDNN's\n"
    "zero-workspace algorithms, a lower bound), and times from a roofline estimate (defaults 1e13 flop/s,\n"
    "5e11 B/s, a 16 GB/s link), so `vdnn plan --profile FILE` says on any machine what fits that GPU and what\n"
    "moves. Needs a build with the CUDA backend (which compiles without a GPU); docs/profiles.md.\n" CLI_DEVICE_USAGE;

static int parse_cc(const char *s, int *major, int *minor)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != '.' || end[1] < '0' || end[1] > '9' || end[2] || a < 3 || a > 99) return 0;
    *major = (int)a;
    *minor = end[1] - '0';
    return 1;
}

/* --describe-gpu: the profile written from the CUDA backend's rules and a roofline estimate. */
static int describe_gpu(int argc, char **argv, const char *out, const char *cc, const char *gpu_name)
{
    cli_cost_options costs;
    if (!cli_take_cost_flags(&argc, argv, &costs, "profile")) return 2;
    if (costs.profile) {
        fprintf(stderr, "vdnn profile: --profile with --describe-gpu: it writes a profile, it reads none\n");
        return 2;
    }
    vdnn_gpu_description gpu = {.name = gpu_name, .tf32 = -1, .flops_per_s = costs.flops, .mem_bytes_per_s = costs.mem_bw,
                                .link_d2h_bytes_per_s = costs.link_d2h, .link_h2d_bytes_per_s = costs.link_h2d};
    if (!parse_cc(cc, &gpu.cc_major, &gpu.cc_minor)) {
        fprintf(stderr, "vdnn profile: --describe-gpu: invalid value '%s' (a compute capability such as 9.0)\n", cc);
        return 2;
    }
    static const char *const refused[][2] = {
        {"--iterations", "nothing runs"},
        {"--device", "it describes the GPU named by --describe-gpu"},
        {"--deterministic", "deterministic convolution workspaces are cuDNN's to size, on the device"},
        {"--policy", "nothing runs"},
        {"--budget", "nothing runs"},
        {"--threads", "nothing runs"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char why[96];
        snprintf(why, sizeof why, "with --describe-gpu %s", refused[i][1]);
        if (!cli_refuse_flag(argc, argv, refused[i][0], why, "profile")) return 2;
    }
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    if (!cli_parse(argc, argv, 2, OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_MEMORY | OPT_JSON, true, &o, "profile")) return 2;
    if (!o.model) {
        fputs(profile_usage, stderr);
        return 2;
    }
    if (o.no_tf32) gpu.tf32 = 0;
    vdnn_error err = {VDNN_OK, ""};
    vdnn_model_t *m = NULL;
    vdnn_profile_t *prof = NULL;
    vdnn_shape in;
    int classes = 0;
    vdnn_status rc = cli_load_model_opts(&o, &m, &err);
    if (rc == VDNN_OK) rc = cli_shape(&o, m, NULL, &in, &classes, &err);
    if (rc == VDNN_OK) rc = vdnn_profile_describe_gpu_model(m, in, classes, o.mem.precision, &gpu, &prof, &err);
    if (rc == VDNN_OK) rc = vdnn_profile_save(prof, out, &err);
    if (rc == VDNN_OK) {
        vdnn_profile_summary ps;
        vdnn_profile_summarize(prof, &ps);
        if (o.json)
            printf("{\"profile\": \"%s\", \"device\": \"%s\", \"gpu\": \"%s\", \"model\": \"%s\", \"batch\": %d, "
                   "\"precision\": \"%s\", \"forward_s\": %.6f, \"backward_s\": %.6f, \"op_info_source\": \"%s\", "
                   "\"measured\": false}\n",
                   out, ps.device, ps.device_info.name, vdnn_model_name(m), in.n, vdnn_precision_name(o.mem.precision),
                   ps.forward_s, ps.backward_s, ps.op_info_source);
        else
            printf("profile of %s at batch %d in %s for %s written to %s: op info described from the CUDA backend's "
                   "rules, times estimated (forward %.3f ms, backward %.3f ms); `vdnn plan --profile %s` plans for "
                   "that GPU on any machine\n",
                   vdnn_model_name(m), in.n, vdnn_precision_name(o.mem.precision), ps.device_info.name, out,
                   ps.forward_s * 1e3, ps.backward_s * 1e3, out);
    }
    vdnn_profile_free(prof);
    vdnn_model_free(m);
    return rc == VDNN_OK ? 0 : cli_fail("profile", &err);
}

int vdnn_cmd_profile(int argc, char **argv)
{
    if (cli_help_asked(argc, argv)) {
        fputs(profile_usage, stdout);
        fputs(CLI_CONV_ALGO_USAGE, stdout);
        fputs(CLI_PRECISION_USAGE, stdout);
        return 0;
    }
    const char *out = NULL, *iters = NULL, *cc = NULL, *gpu_name = NULL;
    if (!cli_take_flag(&argc, argv, "--out", &out, "profile") || !cli_take_flag(&argc, argv, "--describe-gpu", &cc, "profile") ||
        !cli_take_flag(&argc, argv, "--gpu-name", &gpu_name, "profile"))
        return 2;
    for (const char *c = gpu_name; c && *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
            fprintf(stderr, "vdnn profile: --gpu-name: quotes, backslashes and control characters are not taken\n");
            return 2;
        }
    if (gpu_name && strlen(gpu_name) > 80) {
        fprintf(stderr, "vdnn profile: --gpu-name: at most 80 characters\n");
        return 2;
    }
    if (gpu_name && !cc) {
        fprintf(stderr, "vdnn profile: --gpu-name names the GPU --describe-gpu describes (see vdnn profile --help)\n");
        return 2;
    }
    if (cc && !out) {
        fputs(profile_usage, stderr);
        return 2;
    }
    if (cc) return describe_gpu(argc, argv, out, cc, gpu_name);
    if (!cli_take_flag(&argc, argv, "--iterations", &iters, "profile")) return 2;
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
