/* Options shared by the vdnn subcommands, and setting up a model, data and backend from them. */
#include "cmd_common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_defaults(cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "lenet";
    o->data = "fashion-mnist";
    o->batch = 64;
    o->epochs = 2;
    o->lr = 0.05;
    o->lr_schedule = "cosine";
    o->conv_algo = VDNN_ALGO_CHOOSE;
    o->momentum = 0.9;
    o->weight_decay = 5e-4;
    o->seed = 1;
    o->device = "auto";
    o->budget = SIZE_MAX;
    o->host_budget = SIZE_MAX;
    o->policy = VDNN_POLICY_NONE;
    o->log_every = 100;
    o->micro_batches = 1;
}

static bool bad(const char *cmd, const char *flag, const char *val, const char *what)
{
    fprintf(stderr, "vdnn %s: %s: invalid value '%s' (%s)\n", cmd, flag, val, what);
    return false;
}

static bool parse_shape(const char *s, int *c, int *h, int *w)
{
    char tail;
    return sscanf(s, "%dx%dx%d%c", c, h, w, &tail) == 3 && *c > 0 && *h > 0 && *w > 0 && *c <= 65536 &&
           *h <= 65536 && *w <= 65536;
}

static bool parse_bandwidth(const char *s, double *out)
{
    /* "16GB/s", "16GB", "500MB/s", a bare number of bytes/s */
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    size_t n = strlen(buf);
    if (n > 2 && !strcmp(buf + n - 2, "/s")) buf[n - 2] = '\0';
    size_t v;
    if (!vdnn_parse_size(buf, &v) || v == 0 || v == SIZE_MAX) return false;
    *out = (double)v;
    return true;
}

bool cli_parse(int argc, char **argv, int first, unsigned allowed, bool positional_model, cli_options *o,
               const char *cmd)
{
    bool have_model = false;
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (f[0] != '-' && positional_model && !have_model) {
            o->model = f;
            have_model = true;
            continue;
        }
        if (f[0] != '-') {
            fprintf(stderr, "vdnn %s: unexpected argument '%s' (see vdnn %s --help)\n", cmd, f, cmd);
            return false;
        }
        /* Boolean flags. */
        if (!strcmp(f, "--json") && (allowed & OPT_JSON)) { o->json = true; continue; }
        if (!strcmp(f, "--poison") && (allowed & OPT_MEMORY)) { o->poison = true; continue; }
        if (!strcmp(f, "--offload-params") && (allowed & OPT_MEMORY)) { o->offload_params = true; continue; }
        if (!strcmp(f, "--stream-inputs") && (allowed & OPT_MEMORY)) { o->stream_inputs = true; continue; }
        if (!strcmp(f, "--no-eval") && (allowed & OPT_TRAINING)) { o->no_eval = true; continue; }
        if (!strcmp(f, "--no-tf32") && (allowed & OPT_DEVICE)) { o->no_tf32 = true; continue; }
        if (!strcmp(f, "--deterministic") && (allowed & OPT_DEVICE)) { o->deterministic = true; continue; }
        if (!strcmp(f, "--allow-oversubscribe") && (allowed & OPT_TRAINING)) { o->allow_oversubscribe = true; continue; }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        double d;
        size_t sz;
#define NEED_VALUE()                                                                         \
    do {                                                                                     \
        if (!v) {                                                                            \
            fprintf(stderr, "vdnn %s: %s needs a value (see vdnn %s --help)\n", cmd, f, cmd); \
            return false;                                                                    \
        }                                                                                    \
        i++;                                                                                 \
    } while (0)
        if (!strcmp(f, "--model") && (allowed & OPT_MODEL)) { NEED_VALUE(); o->model = v; }
        else if (!strcmp(f, "--data") && (allowed & OPT_DATA)) { NEED_VALUE(); o->data = v; }
        else if (!strcmp(f, "--input") && (allowed & OPT_SHAPE)) {
            NEED_VALUE();
            if (!parse_shape(v, &o->in_c, &o->in_h, &o->in_w)) return bad(cmd, f, v, "expected CxHxW, e.g. 3x224x224");
        } else if (!strcmp(f, "--classes") && (allowed & OPT_SHAPE)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 2 || n > 1000000) return bad(cmd, f, v, "an integer from 2 to 1000000");
            o->classes = (int)n;
        } else if (!strcmp(f, "--batch") && (allowed & OPT_BATCH)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 1000000) return bad(cmd, f, v, "a positive integer");
            o->batch = (int)n;
        } else if (!strcmp(f, "--epochs") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 100000) return bad(cmd, f, v, "a positive integer");
            o->epochs = (int)n;
            o->steps = 0;
        } else if (!strcmp(f, "--steps") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1) return bad(cmd, f, v, "a positive integer");
            o->steps = n;
        } else if (!strcmp(f, "--lr") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d <= 0 || d > 100) return bad(cmd, f, v, "a positive number");
            o->lr = d;
        } else if (!strcmp(f, "--lr-schedule") && (allowed & OPT_TRAINING)) { NEED_VALUE(); o->lr_schedule = v; }
        else if (!strcmp(f, "--momentum") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d < 0 || d >= 1) return bad(cmd, f, v, "a number in [0, 1)");
            o->momentum = d;
        } else if (!strcmp(f, "--weight-decay") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d < 0 || d >= 1) return bad(cmd, f, v, "a number in [0, 1)");
            o->weight_decay = d;
        } else if (!strcmp(f, "--seed") && (allowed & (OPT_TRAINING | OPT_DATA))) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 0) return bad(cmd, f, v, "a non-negative integer");
            o->seed = n;
        } else if (!strcmp(f, "--micro-batches") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 4096) return bad(cmd, f, v, "an integer from 1 to 4096");
            o->micro_batches = (int)n;
        } else if (!strcmp(f, "--log-every") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1) return bad(cmd, f, v, "a positive integer");
            o->log_every = (int)n;
        } else if (!strcmp(f, "--threads") && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 4096) return bad(cmd, f, v, "a positive integer");
            o->threads = (int)n;
        } else if (!strcmp(f, "--device") && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto")) return bad(cmd, f, v, "cpu, cuda or auto");
            o->device = v;
        } else if (!strcmp(f, "--budget") && (allowed & OPT_MEMORY)) {
            NEED_VALUE();
            if (!vdnn_parse_size(v, &sz) || sz == 0) return bad(cmd, f, v, "a size such as 512MiB, 3GiB or unlimited");
            o->budget = sz;
        } else if (!strcmp(f, "--host-budget") && (allowed & OPT_MEMORY)) {
            NEED_VALUE();
            if (!vdnn_parse_size(v, &sz)) return bad(cmd, f, v, "a size such as 512MiB, 3GiB or unlimited");
            o->host_budget = sz;
        } else if (!strcmp(f, "--conv-algo") && (allowed & OPT_MEMORY)) {
            NEED_VALUE();
            if (!strcmp(v, "default")) o->conv_algo = 0;
            else if (!strcmp(v, "lean")) o->conv_algo = VDNN_ALGO_LEANEST;
            else if (!strcmp(v, "choose")) o->conv_algo = VDNN_ALGO_CHOOSE;
            else return bad(cmd, f, v, "default, lean or choose");
        } else if (!strcmp(f, "--policy") && (allowed & OPT_MEMORY)) {
            NEED_VALUE();
            if (!vdnn_policy_parse(v, &o->policy)) return bad(cmd, f, v, "none, all, conv, recompute, dyn, pooch, auto or um");
        } else if ((!strcmp(f, "--link-bandwidth") || !strcmp(f, "--link-bandwidth-d2h") ||
                    !strcmp(f, "--link-bandwidth-h2d")) && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (!parse_bandwidth(v, &d)) return bad(cmd, f, v, "a bandwidth such as 16GB/s");
            if (strcmp(f, "--link-bandwidth-h2d")) o->link_d2h = d;
            if (strcmp(f, "--link-bandwidth-d2h")) o->link_h2d = d;
        } else if (!strcmp(f, "--profile") && (allowed & OPT_MEMORY)) { NEED_VALUE(); o->profile = v; }
        else if (!strcmp(f, "--trace") && (allowed & OPT_TRAINING)) { NEED_VALUE(); o->trace = v; }
        else if (!strcmp(f, "--save") && (allowed & OPT_CKPT)) { NEED_VALUE(); o->save = v; }
        else if (!strcmp(f, "--resume") && (allowed & OPT_CKPT)) { NEED_VALUE(); o->resume = v; }
        else {
            fprintf(stderr, "vdnn %s: unknown flag '%s' (see vdnn %s --help)\n", cmd, f, cmd);
            return false;
        }
#undef NEED_VALUE
    }
    return true;
}

vdnn_status cli_load_model(const char *model, vdnn_graph_t **g, vdnn_error *err)
{
    if (strchr(model, '/') || strstr(model, ".cfg") || strstr(model, ".onnx")) return vdnn_graph_load(model, g, err);
    for (const char *c = model; *c; c++)
        if (!(*c == '_' || *c == '-' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "--model: '%s' is neither a model name nor a .cfg or .onnx file", model);
    char path[1024];
    const char *dirs[3] = {getenv("VDNN_MODELS"), "models", NULL};
#ifdef VDNN_SOURCE_DIR
    dirs[2] = VDNN_SOURCE_DIR "/models";
#endif
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s.cfg", dirs[i], model);
        if (access(path, R_OK) == 0) return vdnn_graph_load(path, g, err);
    }
    return vdnn_fail(err, VDNN_ERR_IO, "--model: no model named '%s' (looked for models/%s.cfg)", model, model);
}

vdnn_status cli_shape(const cli_options *o, const vdnn_graph_t *g, const vdnn_dataset_t *ds, vdnn_shape *in,
                      int *classes, vdnn_error *err)
{
    *in = (vdnn_shape){o->batch, o->in_c, o->in_h, o->in_w};
    if (ds) {
        if (o->in_c && (o->in_c != ds->c || o->in_h != ds->h || o->in_w != ds->w))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "--input %dx%dx%d does not match the data (%dx%dx%d in %s)",
                             o->in_c, o->in_h, o->in_w, ds->c, ds->h, ds->w, ds->source);
        *in = (vdnn_shape){o->batch, ds->c, ds->h, ds->w};
    } else if (!o->in_c) {
        if (!g->default_input.c)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s has no default input size: give --input CxHxW", g->source);
        *in = (vdnn_shape){o->batch, g->default_input.c, g->default_input.h, g->default_input.w};
    }
    *classes = o->classes ? o->classes : ds ? ds->classes : g->default_classes;
    if (ds && o->classes && o->classes < ds->classes)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "--classes %d is fewer than the %d classes in %s", o->classes,
                         ds->classes, ds->source);
    if (*classes < 2) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s has no default class count: give --classes N", g->source);
    return VDNN_OK;
}

void cli_cuda_options(const cli_options *o, int device, vdnn_cuda_options *co)
{
    vdnn_cuda_options_default(co);
    co->device = device;
    co->threads = o->threads;
    /* A flag turns a switch one way; without it the environment (or the default) decides. */
    if (o->no_tf32) co->tf32 = 0;
    if (o->deterministic) co->deterministic = 1;
}

void cli_warn_oversubscribed(const char *cmd, const vdnn_net_t *net)
{
    if (!net || !net->oversubscribed) return;
    char m[32], a[32];
    fprintf(stderr,
            "vdnn %s: warning: the Unified Memory pool (%s) and the device arena (%s) exceed the device's free memory "
            "(--allow-oversubscribe): the driver will evict and re-fault pages\n",
            cmd, vdnn_format_bytes(net->managed_bytes, m, sizeof m), vdnn_format_bytes(net->dev_bytes, a, sizeof a));
}

vdnn_status cli_backend(const cli_options *o, vdnn_backend_t **be, vdnn_error *err)
{
    if (strcmp(o->device, "cpu")) {
        vdnn_error cerr;
        vdnn_cuda_options co;
        cli_cuda_options(o, 0, &co);
        vdnn_status rc = vdnn_backend_cuda_create_ex(&co, be, &cerr);
        if (rc == VDNN_OK) return VDNN_OK;
        if (!strcmp(o->device, "cuda")) return vdnn_fail(err, rc, "--device cuda: %s", cerr.msg);
        fprintf(stderr, "vdnn: %s; using the CPU backend\n", cerr.msg);
    }
    vdnn_cpu_options co = {.threads = o->threads, .link_bandwidth_d2h = o->link_d2h, .link_bandwidth_h2d = o->link_h2d};
    return vdnn_backend_cpu_create(&co, be, err);
}

void cli_net_config(const cli_options *o, vdnn_shape in, int classes, vdnn_net_config *c)
{
    vdnn_net_config_default(c);
    c->batch = in.n;
    c->in_c = in.c;
    c->in_h = in.h;
    c->in_w = in.w;
    c->classes = classes;
    c->policy = o->policy;
    c->algo = o->conv_algo;
    c->budget = o->budget;
    c->host_budget = o->host_budget;
    c->poison = o->poison;
    c->seed = (uint64_t)o->seed;
    c->momentum = (float)o->momentum;
    c->weight_decay = (float)o->weight_decay;
    c->allow_oversubscribe = o->allow_oversubscribe;
    c->micro_batches = o->micro_batches;
    c->offload_params = o->offload_params;
    c->stream_inputs = o->stream_inputs;
}

void cli_note_unstreamed(const char *cmd, const cli_options *o, const vdnn_plan_t *plan)
{
    if (o->stream_inputs && plan && !vdnn_plan_streamed_layers(plan))
        fprintf(stderr,
                "vdnn %s: note: --stream-inputs: no layer streams its input (that needs a convolution whose output "
                "has its input's shape, whose input has no other reader, and whose algorithm copies the input)\n",
                cmd);
}

int cli_fail(const char *cmd, const vdnn_error *err)
{
    fprintf(stderr, "vdnn %s: %s\n", cmd, err->msg[0] ? err->msg : vdnn_status_name(err->status));
    return err->status == VDNN_ERR_INVALID_ARG ? 2 : 1;
}
