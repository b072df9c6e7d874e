/* Options shared by the vdnn subcommands: the flags (memory flags from one table, which also names each flag's
 * option field, so that library messages can be told in flags), and the model, data, backend and net set up
 * from them. */
#include "cmd_common.h"
#include "cmd_model_fit.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How a memory flag's value is read. */
typedef enum { MEM_BOOL, MEM_SIZE, MEM_BUDGET, MEM_POLICY, MEM_ALGO, MEM_COUNT, MEM_BANDWIDTH, MEM_PRECISION } mem_kind;

/* The memory flags: flag, the vdnn_memory_options field it sets (as library messages name it), which
 * commands take it, how its value reads, where it goes. A new memory option is one line here. */
static const struct mem_flag {
    const char *flag, *field;
    unsigned allowed;
    mem_kind kind;
    size_t offset;
} mem_flags[] = {
    {"--policy", "memory.policy", OPT_MEMORY, MEM_POLICY, offsetof(vdnn_memory_options, policy)},
    {"--budget", "memory.budget", OPT_MEMORY, MEM_BUDGET, offsetof(vdnn_memory_options, budget)},
    {"--host-budget", "memory.host_budget", OPT_MEMORY, MEM_SIZE, offsetof(vdnn_memory_options, host_budget)},
    {"--conv-algo", "memory.conv_algo", OPT_MEMORY, MEM_ALGO, offsetof(vdnn_memory_options, conv_algo)},
    {"--offload-params", "memory.offload_params", OPT_MEMORY, MEM_BOOL, offsetof(vdnn_memory_options, offload_params)},
    {"--stream-inputs", "memory.stream_inputs", OPT_MEMORY, MEM_BOOL, offsetof(vdnn_memory_options, stream_inputs)},
    {"--micro-batches", "memory.micro_batches", OPT_TRAINING, MEM_COUNT, offsetof(vdnn_memory_options, micro_batches)},
    {"--poison", "memory.poison", OPT_MEMORY, MEM_BOOL, offsetof(vdnn_memory_options, poison)},
    {"--precision", "memory.precision", OPT_MEMORY | OPT_PRECISION, MEM_PRECISION,
     offsetof(vdnn_memory_options, precision)},
    {"--allow-oversubscribe", "memory.allow_oversubscribe", OPT_DEVICE, MEM_BOOL,
     offsetof(vdnn_memory_options, allow_oversubscribe)},
    {"--link-bandwidth-d2h", "memory.link_bandwidth_d2h", OPT_DEVICE, MEM_BANDWIDTH,
     offsetof(vdnn_memory_options, link_bandwidth_d2h)},
    {"--link-bandwidth-h2d", "memory.link_bandwidth_h2d", OPT_DEVICE, MEM_BANDWIDTH,
     offsetof(vdnn_memory_options, link_bandwidth_h2d)},
};

/* The other option fields library messages begin with ("batch: ..."), and their flags. */
static const struct { const char *field, *flag; } plain_fields[] = {
    {"batch", "--batch"}, {"input", "--input"}, {"classes", "--classes"}, {"context", "--context"},
    {"head groups", "--head-groups"}, {"seed", "--seed"},
    {"lr", "--lr"}, {"lr_schedule", "--lr-schedule"}, {"momentum", "--momentum"},
    {"weight_decay", "--weight-decay"}, {"optimizer", "--optimizer"}, {"beta1, beta2", "--beta1, --beta2"},
    {"eps", "--eps"}, {"clip_grad_norm", "--clip-grad-norm"}, {"memory.optimizer_moments", "--optimizer"}, {"threads", "--threads"}, {"epochs", "--epochs"}, {"steps", "--steps"},
    {"iterations", "--iterations"}, {"loss_scale", "--loss-scale"},
};

/* The MPI runtime's option fields (vdnn_dist_options), named anywhere in its messages. */
static const struct { const char *field, *flag; } dist_fields[] = {
    {"dist.stages", "--stages"}, {"dist.sync_bn", "--sync-bn"}, {"dist.timeout_s", "--comm-timeout"},
    {"dist.balance", "--balance"}, {"dist.bucket_bytes", "--bucket"},
};

void cli_defaults(cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->model = "lenet";
    o->data = "fashion-mnist";
    o->batch = 64;
    o->epochs = 2;
    o->lr = 0.05;
    o->lr_schedule = "cosine";
    o->momentum = 0.9;
    o->weight_decay = 5e-4;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->seed = 1;
    o->device = "auto";
    o->log_every = 100;
    o->mem = vdnn_memory_options_default();
    /* The command lets the planners choose convolution algorithms; the library's default keeps every policy
     * bitwise alike. */
    o->mem.conv_algo = VDNN_ALGO_CHOOSE;
}

vdnn_status cli_error(vdnn_error *err, vdnn_status s, const char *fmt, ...)
{
    if (err) {
        err->status = s;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

static bool bad(const char *cmd, const char *flag, const char *val, const char *what)
{
    fprintf(stderr, "vdnn %s: %s: invalid value '%s' (%s)\n", cmd, flag, val, what);
    return false;
}

static bool parse_shape(const char *s, int *c, int *h, int *w)
{
    char tail;
    return sscanf(s, "%dx%dx%d%c", c, h, w, &tail) == 3 && *c > 0 && *h > 0 && *w > 0 && *c <= VDNN_MAX_SIDE &&
           *h <= VDNN_MAX_SIDE && *w <= VDNN_MAX_SIDE;
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

const char *cli_policy_list(char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; vdnn_policy_description((vdnn_policy)i) && len < n; i++) {
        const char *sep = i == 0 ? "" : !vdnn_policy_description((vdnn_policy)(i + 1)) ? " or " : ", ";
        len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, vdnn_policy_name((vdnn_policy)i));
    }
    return buf;
}

void cli_policy_help(FILE *f)
{
    fputs("Policies (--policy, default none):\n", f);
    for (int i = 0; vdnn_policy_description((vdnn_policy)i); i++)
        fprintf(f, "  %-10s %s\n", vdnn_policy_name((vdnn_policy)i), vdnn_policy_description((vdnn_policy)i));
}

/* One memory flag's value into o->mem. */
static bool set_mem(const struct mem_flag *m, const char *v, cli_options *o, const char *cmd)
{
    char *field = (char *)&o->mem + m->offset;
    size_t sz;
    long n;
    double d;
    char range[64], list[256];
    switch (m->kind) {
    case MEM_BOOL: *(bool *)field = true; return true;
    case MEM_BUDGET:
        if (!vdnn_parse_size(v, &sz) || sz == 0) return bad(cmd, m->flag, v, "a size such as 512MiB, 3GiB or unlimited");
        *(size_t *)field = sz;
        return true;
    case MEM_SIZE:
        if (!vdnn_parse_size(v, &sz)) return bad(cmd, m->flag, v, "a size such as 512MiB, 3GiB or unlimited");
        *(size_t *)field = sz;
        return true;
    case MEM_POLICY:
        if (!vdnn_policy_parse(v, (vdnn_policy *)field)) return bad(cmd, m->flag, v, cli_policy_list(list, sizeof list));
        return true;
    case MEM_ALGO:
        if (!strcmp(v, "default")) *(int *)field = VDNN_ALGO_DEFAULT;
        else if (!strcmp(v, "lean")) *(int *)field = VDNN_ALGO_LEANEST;
        else if (!strcmp(v, "choose")) *(int *)field = VDNN_ALGO_CHOOSE;
        else return bad(cmd, m->flag, v, "default, lean or choose");
        return true;
    case MEM_COUNT:
        snprintf(range, sizeof range, "an integer from 1 to %d", VDNN_MAX_MICRO_BATCHES);
        if (!vdnn_parse_int(v, &n) || n < 1 || n > VDNN_MAX_MICRO_BATCHES) return bad(cmd, m->flag, v, range);
        *(int *)field = (int)n;
        return true;
    case MEM_BANDWIDTH:
        if (!parse_bandwidth(v, &d)) return bad(cmd, m->flag, v, "a bandwidth such as 16GB/s");
        *(double *)field = d;
        return true;
    case MEM_PRECISION:
        if (!vdnn_precision_parse(v, (vdnn_precision *)field)) return bad(cmd, m->flag, v, "fp32, bf16 or fp16");
        return true;
    }
    return false;
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
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                                         \
    do {                                                                                     \
        if (!v) {                                                                            \
            fprintf(stderr, "vdnn %s: %s needs a value (see vdnn %s --help)\n", cmd, f, cmd); \
            return false;                                                                    \
        }                                                                                    \
        i++;                                                                                 \
    } while (0)
        const struct mem_flag *m = NULL;
        for (size_t k = 0; k < sizeof mem_flags / sizeof mem_flags[0]; k++)
            if (!strcmp(f, mem_flags[k].flag) && (allowed & mem_flags[k].allowed)) m = &mem_flags[k];
        if (m) {
            if (m->kind != MEM_BOOL) NEED_VALUE();
            if (!set_mem(m, v, o, cmd)) return false;
            continue;
        }
        /* Boolean flags. */
        if (!strcmp(f, "--json") && (allowed & OPT_JSON)) { o->json = true; continue; }
        if (!strcmp(f, "--no-eval") && (allowed & OPT_TRAINING)) { o->no_eval = true; continue; }
        if (!strcmp(f, "--no-tf32") && (allowed & OPT_DEVICE)) { o->no_tf32 = true; continue; }
        if (!strcmp(f, "--deterministic") && (allowed & OPT_DEVICE)) { o->deterministic = true; continue; }
        long n;
        double d;
        char range[64];
        if (!strcmp(f, "--model") && (allowed & OPT_MODEL)) { NEED_VALUE(); o->model = v; }
        else if (!strcmp(f, "--data") && (allowed & OPT_DATA)) { NEED_VALUE(); o->data = v; o->data_given = true; }
        else if (!strcmp(f, "--input") && (allowed & OPT_SHAPE)) {
            NEED_VALUE();
            snprintf(range, sizeof range, "CxHxW, each from 1 to %d, e.g. 3x224x224", VDNN_MAX_SIDE);
            if (!parse_shape(v, &o->in_c, &o->in_h, &o->in_w)) return bad(cmd, f, v, range);
        } else if (!strcmp(f, "--seq-len") && (allowed & OPT_SHAPE)) {
            /* A sequence model's input: one token id per position, 1xTx1 (docs/sequence.md). */
            NEED_VALUE();
            snprintf(range, sizeof range, "an integer from 1 to %d", VDNN_MAX_SIDE);
            if (!vdnn_parse_int(v, &n) || n < 1 || n > VDNN_MAX_SIDE) return bad(cmd, f, v, range);
            o->in_c = 1, o->in_h = (int)n, o->in_w = 1;
        } else if (!strcmp(f, "--context") && (allowed & OPT_SHAPE)) {
            /* A sequence model's context: its position table's rows and its default sequence length. */
            NEED_VALUE();
            snprintf(range, sizeof range, "an integer from 1 to %d", VDNN_MAX_SIDE);
            if (!vdnn_parse_int(v, &n) || n < 1 || n > VDNN_MAX_SIDE) return bad(cmd, f, v, range);
            o->context = (int)n;
        } else if (!strcmp(f, "--head-groups") && (allowed & OPT_SHAPE)) {
            /* Every attention's heads in groups, one group's probabilities a tensor (long contexts). */
            NEED_VALUE();
            if ((allowed & OPT_MEMORY) && !strcmp(v, "auto")) o->head_groups = CLI_HEAD_GROUPS_AUTO;
            else if (!vdnn_parse_int(v, &n) || n < 1 || n > 4096)
                return bad(cmd, f, v,
                           (allowed & OPT_MEMORY) ? "an integer from 1 to 4096, or auto" : "an integer from 1 to 4096");
            else o->head_groups = (int)n;
        } else if (!strcmp(f, "--attention") && (allowed & OPT_SHAPE)) {
            /* fused: the probabilities never a tensor (recomputed in backward); materialized: the model file's;
             * auto: each attention either way, as the plans say. */
            NEED_VALUE();
            const bool planning = allowed & OPT_MEMORY;
            if (strcmp(v, "fused") && strcmp(v, "materialized") && !(planning && !strcmp(v, "auto")))
                return bad(cmd, f, v, planning ? "fused, materialized or auto" : "fused or materialized");
            o->fused_attention = !strcmp(v, "fused");
            o->auto_attention = !strcmp(v, "auto");
        } else if (!strcmp(f, "--classes") && (allowed & OPT_SHAPE)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 2 || n > 1000000) return bad(cmd, f, v, "an integer from 2 to 1000000");
            o->classes = (int)n;
        } else if (!strcmp(f, "--batch") && (allowed & OPT_BATCH)) {
            NEED_VALUE();
            snprintf(range, sizeof range, "an integer from 1 to %d", VDNN_MAX_BATCH);
            if (!vdnn_parse_int(v, &n) || n < 1 || n > VDNN_MAX_BATCH) return bad(cmd, f, v, range);
            o->batch = (int)n;
        } else if (!strcmp(f, "--epochs") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 100000) return bad(cmd, f, v, "an integer from 1 to 100000");
            o->epochs = (int)n;
            o->steps = 0;
        } else if (!strcmp(f, "--steps") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1) return bad(cmd, f, v, "a positive integer");
            o->steps = n;
        } else if (!strcmp(f, "--lr") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d <= 0 || d > 100) return bad(cmd, f, v, "a number in (0, 100]");
            o->lr = d;
        } else if (!strcmp(f, "--lr-schedule") && (allowed & OPT_TRAINING)) { NEED_VALUE(); o->lr_schedule = v; }
        else if (!strcmp(f, "--momentum") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d < 0 || d >= 1) return bad(cmd, f, v, "a number in [0, 1)");
            o->momentum = d;
        } else if (!strcmp(f, "--optimizer") && (allowed & (OPT_TRAINING | OPT_MEMORY))) {
            /* AdamW keeps two moments per parameter: the plan (vdnn plan too) counts them. */
            NEED_VALUE();
            if (strcmp(v, "sgd") && strcmp(v, "adamw")) return bad(cmd, f, v, "sgd or adamw");
            o->adamw = !strcmp(v, "adamw");
            o->mem.optimizer_moments = o->adamw ? 2 : 1;
        } else if ((!strcmp(f, "--beta1") || !strcmp(f, "--beta2")) && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d < 0 || d >= 1) return bad(cmd, f, v, "a number in [0, 1)");
            *(f[6] == '1' ? &o->beta1 : &o->beta2) = d;
        } else if (!strcmp(f, "--loss-scale") && (allowed & OPT_TRAINING)) {
            /* The library checks that it is a power of two, naming the flag (plain_fields). */
            NEED_VALUE();
            if (!strcmp(v, "off")) o->loss_scale = -1;
            else if (!vdnn_parse_float(v, &d) || !(d > 0)) return bad(cmd, f, v, "a power of two, or off");
            else o->loss_scale = d;
        } else if (!strcmp(f, "--clip-grad-norm") && (allowed & (OPT_TRAINING | OPT_MEMORY))) {
            /* Clipped updates wait for backward's end: the plan (vdnn plan too) holds the gradients until then. */
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || !(d > 0) || d > 1e30) return bad(cmd, f, v, "a positive number");
            o->clip_grad_norm = d;
            o->mem.clip_grads = true;
        } else if (!strcmp(f, "--eps") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d <= 0 || d >= 1) return bad(cmd, f, v, "a number in (0, 1)");
            o->eps = d;
        } else if (!strcmp(f, "--weight-decay") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_float(v, &d) || d < 0 || d >= 1) return bad(cmd, f, v, "a number in [0, 1)");
            o->weight_decay = d;
        } else if (!strcmp(f, "--seed") && (allowed & (OPT_TRAINING | OPT_DATA))) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 0) return bad(cmd, f, v, "a non-negative integer");
            o->seed = n;
        } else if (!strcmp(f, "--log-every") && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1) return bad(cmd, f, v, "a positive integer");
            o->log_every = (int)n;
        } else if (!strcmp(f, "--threads") && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (!vdnn_parse_int(v, &n) || n < 1 || n > 4096) return bad(cmd, f, v, "an integer from 1 to 4096");
            o->threads = (int)n;
        } else if (!strcmp(f, "--device") && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto")) return bad(cmd, f, v, "cpu, cuda or auto");
            o->device = v;
        } else if (!strcmp(f, "--link-bandwidth") && (allowed & OPT_DEVICE)) {
            NEED_VALUE();
            if (!parse_bandwidth(v, &d)) return bad(cmd, f, v, "a bandwidth such as 16GB/s");
            o->mem.link_bandwidth_d2h = o->mem.link_bandwidth_h2d = d;
        } else if (!strcmp(f, "--profile") && (allowed & OPT_MEMORY)) { NEED_VALUE(); o->profile = v; }
        else if (!strcmp(f, "--fused-profile") && (allowed & OPT_MEMORY) && (allowed & OPT_TRAINING)) {
            NEED_VALUE();
            o->fused_profile = v;
        }
        else if (!strcmp(f, "--trace") && (allowed & OPT_TRAINING)) { NEED_VALUE(); o->trace = v; }
        else if (!strcmp(f, "--plan-json") && (allowed & OPT_TRAINING)) { NEED_VALUE(); o->plan_json = v; }
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

bool cli_sequence_model(const vdnn_model_t *m)
{
    vdnn_shape def;
    int classes;
    vdnn_model_defaults(m, &def, &classes);
    return def.c == 1 && def.w == 1 && def.h > 1;
}

vdnn_status cli_load_model_opts(const cli_options *o, vdnn_model_t **m, vdnn_error *err)
{
    vdnn_status rc = cli_load_model(o->model, m, err);
    vdnn_model_t *c = NULL;
    if (rc == VDNN_OK && o->context) {
        rc = vdnn_model_with_context(*m, o->context, &c, err);
        vdnn_model_free(*m);
        *m = c;
    }
    /* --seq-len cuts an LSTM model's chunks for that many steps (a file's chunk= steps each). */
    vdnn_shape def;
    int def_classes;
    if (rc == VDNN_OK) vdnn_model_defaults(*m, &def, &def_classes);
    if (rc == VDNN_OK && o->in_c == 1 && o->in_w == 1 && o->in_h && o->in_h != def.h && vdnn_model_lstm_count(*m)) {
        rc = vdnn_model_with_steps(*m, o->in_h, &c, err);
        vdnn_model_free(*m);
        *m = c;
    }
    if (rc == VDNN_OK) rc = cli_model_fit_check(o, false, false, "this command", err);
    if (rc == VDNN_OK && o->head_groups) {
        rc = vdnn_model_with_head_groups(*m, o->head_groups, &c, err);
        vdnn_model_free(*m);
        *m = c;
    } else if (rc == VDNN_OK && o->fused_attention) {
        rc = vdnn_model_with_fused_attention(*m, &c, err);
        vdnn_model_free(*m);
        *m = c;
    }
    return rc;
}

vdnn_status cli_load_model(const char *model, vdnn_model_t **m, vdnn_error *err)
{
    if (strchr(model, '/') || strstr(model, ".cfg") || strstr(model, ".onnx")) return vdnn_model_load(model, m, err);
    for (const char *c = model; *c; c++)
        if (!(*c == '_' || *c == '-' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return cli_error(err, VDNN_ERR_INVALID_ARG, "--model: '%s' is neither a model name nor a .cfg or .onnx file", model);
    char path[1024];
    const char *dirs[3] = {getenv("VDNN_MODELS"), "models", NULL};
#ifdef VDNN_SOURCE_DIR
    dirs[2] = VDNN_SOURCE_DIR "/models";
#endif
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s.cfg", dirs[i], model);
        if (access(path, R_OK) == 0) return vdnn_model_load(path, m, err);
    }
    return cli_error(err, VDNN_ERR_IO, "--model: no model named '%s' (looked for models/%s.cfg)", model, model);
}

vdnn_status cli_shape(const cli_options *o, const vdnn_model_t *m, const vdnn_dataset_t *ds, vdnn_shape *in,
                      int *classes, vdnn_error *err)
{
    vdnn_shape def;
    int def_classes;
    vdnn_model_defaults(m, &def, &def_classes);
    *in = (vdnn_shape){o->batch, o->in_c, o->in_h, o->in_w};
    if (ds) {
        const vdnn_shape d = vdnn_dataset_shape(ds);
        if (o->in_c && (o->in_c != d.c || o->in_h != d.h || o->in_w != d.w))
            return cli_error(err, VDNN_ERR_INVALID_ARG, "--input %dx%dx%d does not match the data (%dx%dx%d in %s)",
                             o->in_c, o->in_h, o->in_w, d.c, d.h, d.w, vdnn_dataset_source(ds));
        *in = (vdnn_shape){o->batch, d.c, d.h, d.w};
    } else if (!o->in_c) {
        if (!def.c)
            return cli_error(err, VDNN_ERR_INVALID_ARG, "%s has no default input size: give --input CxHxW",
                             vdnn_model_source(m));
        *in = (vdnn_shape){o->batch, def.c, def.h, def.w};
    }
    const int ds_classes = ds ? vdnn_dataset_classes(ds) : 0;
    *classes = o->classes ? o->classes : ds ? ds_classes : def_classes;
    if (ds && o->classes && o->classes < ds_classes)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "--classes %d is fewer than the %d classes in %s", o->classes,
                         ds_classes, vdnn_dataset_source(ds));
    if (*classes < 2)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "%s has no default class count: give --classes N", vdnn_model_source(m));
    return VDNN_OK;
}

vdnn_backend_options cli_backend_options(const cli_options *o)
{
    vdnn_backend_options bo = vdnn_backend_options_default();
    bo.threads = o->threads;
    /* A flag turns a switch one way; without it the environment (or the default) decides. */
    if (o->no_tf32) bo.tf32 = 0;
    if (o->deterministic) bo.deterministic = 1;
    return bo;
}

void cli_warn_oversubscribed(const char *cmd, const vdnn_net_t *net)
{
    vdnn_net_stats s;
    if (!net) return;
    vdnn_net_get_stats(net, &s);
    if (!s.oversubscribed) return;
    char m[32], a[32];
    fprintf(stderr,
            "vdnn %s: warning: the Unified Memory pool (%s) and the device arena (%s) exceed the device's free memory "
            "(--allow-oversubscribe): the driver will evict and re-fault pages\n",
            cmd, vdnn_format_bytes(s.managed_bytes, m, sizeof m), vdnn_format_bytes(s.device_bytes, a, sizeof a));
}

vdnn_status cli_backend(const cli_options *o, vdnn_backend_t **be, vdnn_error *err)
{
    const vdnn_backend_options bo = cli_backend_options(o);
    vdnn_error e;
    vdnn_status rc = vdnn_backend_open_ex(o->device, &bo, &o->mem, be, &e);
    if (rc != VDNN_OK) {
        if (!strcmp(o->device, "cuda")) return cli_error(err, rc, "--device cuda: %s", e.msg);
        if (err) *err = e;
        return rc;
    }
    const char *why = vdnn_backend_fallback(*be);
    if (why) fprintf(stderr, "vdnn: %s; using the CPU backend\n", why);
    return VDNN_OK;
}

vdnn_net_options cli_net_options(const cli_options *o, vdnn_shape in, int classes)
{
    vdnn_net_options no = vdnn_net_options_default();
    no.batch = in.n;
    no.in_c = in.c;
    no.in_h = in.h;
    no.in_w = in.w;
    no.classes = classes;
    no.seed = (uint64_t)o->seed;
    no.momentum = (float)o->momentum;
    no.weight_decay = (float)o->weight_decay;
    no.memory = o->mem;
    no.optimizer = o->adamw ? VDNN_OPTIMIZER_ADAMW : VDNN_OPTIMIZER_SGD;
    no.beta1 = (float)o->beta1;
    no.beta2 = (float)o->beta2;
    no.eps = (float)o->eps;
    no.loss_scale = (float)o->loss_scale;
    no.clip_grad_norm = (float)o->clip_grad_norm;
    return no;
}

void cli_progress(void *ctx, const vdnn_progress *p)
{
    FILE *f = ctx;
    fprintf(f, "step %ld/%ld  epoch %.2f  loss %.4f  lr %.5f  %.1f img/s  elapsed %.1fs\n", p->step, p->total, p->epoch,
            p->loss, p->lr, p->images_per_sec, p->elapsed_s);
    fflush(f);
}

void cli_note_unstreamed(const char *cmd, const cli_options *o, int streamed_layers)
{
    if (o->mem.stream_inputs && !streamed_layers)
        fprintf(stderr,
                "vdnn %s: note: --stream-inputs: no layer streams its input (that needs a convolution whose output "
                "has its input's shape, whose input has no other reader, and whose algorithm copies the input)\n",
                cmd);
}

static bool ident_char(char c) { return c == '_' || c == '.' || isalnum((unsigned char)c); }

/* Appends text to out[0 .. n) at *len, truncating. */
static void append(char *out, size_t n, size_t *len, const char *text, size_t tl)
{
    if (*len + 1 >= n) return;
    if (tl > n - 1 - *len) tl = n - 1 - *len;
    memcpy(out + *len, text, tl);
    *len += tl;
    out[*len] = '\0';
}

void cli_flag_names(const char *msg, char *out, size_t n)
{
    size_t len = 0;
    const char *s = msg;
    out[0] = '\0';
    /* A leading "field: " or "field VALUE" names one of the plain options. */
    for (size_t k = 0; k < sizeof plain_fields / sizeof plain_fields[0]; k++) {
        size_t fl = strlen(plain_fields[k].field);
        if (!strncmp(s, plain_fields[k].field, fl) && (s[fl] == ':' || s[fl] == ' ')) {
            append(out, n, &len, plain_fields[k].flag, strlen(plain_fields[k].flag));
            s += fl;
            break;
        }
    }
    while (*s) {
        const struct mem_flag *hit = NULL;
        if (!strncmp(s, "memory.", 7) && (s == msg || !ident_char(s[-1])))
            for (size_t k = 0; k < sizeof mem_flags / sizeof mem_flags[0]; k++) {
                size_t fl = strlen(mem_flags[k].field);
                if (!strncmp(s, mem_flags[k].field, fl) && !ident_char(s[fl])) hit = &mem_flags[k];
            }
        const char *dist_flag = NULL;
        size_t dist_len = 0;
        if (!strncmp(s, "dist.", 5) && (s == msg || !ident_char(s[-1])))
            for (size_t k = 0; k < sizeof dist_fields / sizeof dist_fields[0]; k++) {
                size_t fl = strlen(dist_fields[k].field);
                if (!strncmp(s, dist_fields[k].field, fl) && !ident_char(s[fl])) dist_flag = dist_fields[k].flag, dist_len = fl;
            }
        if (hit) {
            append(out, n, &len, hit->flag, strlen(hit->flag));
            s += strlen(hit->field);
        } else if (dist_flag) {
            append(out, n, &len, dist_flag, strlen(dist_flag));
            s += dist_len;
        } else {
            append(out, n, &len, s++, 1);
        }
    }
}

int cli_fail(const char *cmd, const vdnn_error *err)
{
    char msg[sizeof err->msg + 256];
    cli_flag_names(err->msg[0] ? err->msg : vdnn_status_name(err->status), msg, sizeof msg);
    fprintf(stderr, "vdnn %s: %s\n", cmd, msg);
    return err->status == VDNN_ERR_INVALID_ARG ? 2 : 1;
}

bool cli_help_asked(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
    return false;
}

char **cli_args_copy(int argc, char **argv)
{
    char **args = malloc((size_t)(argc + 1) * sizeof *args);
    if (args) memcpy(args, argv, (size_t)(argc + 1) * sizeof *args);
    return args;
}

bool cli_is_sequence_data(const char *spec) { return !strncmp(spec, "text:", 5) || !strncmp(spec, "tokens:", 7); }

void cli_print_text_eval(double loss, double accuracy)
{
    printf("validation loss: %.4f nats/token, %.4f bits/token (next-token accuracy %.2f%%)\n", loss,
           loss / 0.69314718055994530942, 100.0 * accuracy);
}
