/* Options shared by the vdnn subcommands, their flags, and setting up a model, data, backend and net from them
 * through the public API (vdnn/vdnn.h) alone. */
#ifndef VDNN_TOOLS_CMD_COMMON_H
#define VDNN_TOOLS_CMD_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include <vdnn/vdnn.h>

typedef struct cli_options {
    const char *model;        /* NAME or FILE */
    const char *data;         /* dataset spec */
    bool data_given;          /* --data was on the command line (else a sequence model takes CLI_DEFAULT_TEXT) */
    int in_c, in_h, in_w;     /* 0: from the data or the model */
    int classes;              /* 0: from the data or the model */
    int context;              /* --context N: a sequence model's context (position table and input length); 0: the file's */
    int head_groups;          /* --head-groups G: every attention's heads in G groups (vdnn_model_with_head_groups);
                                 0: the file's; CLI_HEAD_GROUPS_AUTO: the fewest whose plan fits (cmd_model_fit.h) */
    bool fused_attention;     /* --attention fused: every attention one op, no probabilities tensor
                                 (vdnn_model_with_fused_attention) */
    bool auto_attention;      /* --attention auto: the attentions to fuse chosen by their plans (cmd_model_fit.h) */
    int batch;
    int epochs;
    long steps;
    double lr;
    const char *lr_schedule;
    double momentum, weight_decay;
    bool adamw;               /* --optimizer adamw (else SGD) */
    double beta1, beta2, eps; /* AdamW */
    double loss_scale;        /* --loss-scale: dynamic loss scaling's first scale (0: fp16's default, -1: off) */
    double clip_grad_norm;    /* --clip-grad-norm X (0: off) */
    long seed;
    int threads;
    const char *device;       /* auto | cpu | cuda */
    bool no_tf32;             /* CUDA: strict FP32 (no TF32 tensor-core math); the CPU is strict FP32 anyway */
    bool deterministic;       /* CUDA: only bitwise-reproducible algorithms; the CPU backend always is */
    vdnn_memory_options mem;  /* every memory flag (the table in cmd_common.c) */
    const char *save, *resume;
    bool json;
    int log_every;
    const char *profile;      /* measured costs for the profile-guided policies */
    const char *fused_profile; /* train --attention auto: the model's profile with every attention fused */
    const char *trace;        /* Chrome trace of the last training iteration, real and simulated */
    const char *plan_json;    /* train: the plan it trains with, as `vdnn plan --json` prints it */
    bool no_eval;             /* skip the evaluation on the test split after training */
} cli_options;

/* Help for --conv-algo, shared by the subcommands that plan. */
#define CLI_CONV_ALGO_USAGE                                                                                      \
    "--conv-algo default|lean|choose: convolution algorithms (default: choose). default: the backend's fastest\n" \
    "for every layer, so every policy gives bit-identical results; lean: the smallest workspaces; choose: dyn\n"  \
    "and auto pick per layer where that fits or is faster (results then match up to float rounding, and the\n"   \
    "plan lists the layers).\n"

/* Help for --precision, shared by the subcommands that size maps. */
#define CLI_PRECISION_USAGE                                                                                      \
    "--precision fp32|bf16|fp16: the type of feature maps, gradient maps and workspaces (default fp32); weights\n" \
    "stay fp32 master copies (each op rounds its own copy), and so do momentum, loss, softmax and batch-norm\n"    \
    "statistics. bf16 needs AVX-512 BF16 on a CPU (a GPU of compute capability 8.0 or later); fp16 runs on\n"     \
    "CUDA only. Checkpoints keep fp32 weights and load into a net of any precision.\n"

/* Help for --offload-params, shared by the subcommands that plan. */
#define CLI_OFFLOAD_USAGE                                                                                         \
    "--offload-params: weights, biases and their momentum live in host memory between their uses (ZeRO-Offload\n" \
    "style): each comes to the device one layer before its forward step (not copied back) and before its\n"      \
    "backward step, whose update is copied back. Same results bit for bit; not with --micro-batches or policy um.\n" \
    "Policy auto does it by itself where only that fits or the simulation finds it faster.\n"                     \
    "--stream-inputs: a convolution whose input has its output's shape and no other reader runs in place: its\n" \
    "forward saves the input to host memory a batch chunk at a time before writing the output over it, and its\n"\
    "backward reads the input back a chunk at a time. Same results bit for bit; not with --micro-batches or\n"   \
    "policy um. Policy auto does it by itself where nothing else fits.\n"

/* The text a sequence model trains and evaluates on when no --data is given: the English quotations of Debian's
 * `fortunes` and `fortunes-min` packages (fortune-mod's data files), the directory's text files read as one text
 * (text:DIR), the '%' lines between quotations included. */
#define CLI_DEFAULT_TEXT_DIR "/usr/share/games/fortunes"
#define CLI_DEFAULT_TEXT_PACKAGE "fortunes"

/* Flags each subcommand accepts, as a bit set. */
enum {
    OPT_MODEL = 1 << 0, OPT_DATA = 1 << 1, OPT_SHAPE = 1 << 2, OPT_BATCH = 1 << 3, OPT_TRAINING = 1 << 4,
    OPT_DEVICE = 1 << 5, OPT_MEMORY = 1 << 6, OPT_CKPT = 1 << 7, OPT_JSON = 1 << 8,
    OPT_PRECISION = 1 << 9  /* --precision alone: commands that size maps but take no other memory flag (eval, info) */
};

void cli_defaults(cli_options *o);
/* Parses argv[first..]: flags in `allowed`, and (if positional_model) one bare model argument.
 * Prints a message naming the flag and returns false on an unknown flag or a bad value. */
bool cli_parse(int argc, char **argv, int first, unsigned allowed, bool positional_model, cli_options *o,
               const char *cmd);

/* Fills err (status s) as the library does: for the command's own failures. */
vdnn_status cli_error(vdnn_error *err, vdnn_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether m is a sequence model (its default input is token ids, 1xTx1 with T > 1): the default text, "sequences". */
bool cli_sequence_model(const vdnn_model_t *m);
/* Finds and loads the model: NAME -> models/NAME.cfg, else a file path. */
vdnn_status cli_load_model(const char *model, vdnn_model_t **m, vdnn_error *err);
/* The same for o->model, then --context and --head-groups applied (vdnn_model_with_context, _with_head_groups). */
vdnn_status cli_load_model_opts(const cli_options *o, vdnn_model_t **m, vdnn_error *err);
/* Input shape (n = batch) and class count from flags, else the data, else the model's defaults. */
vdnn_status cli_shape(const cli_options *o, const vdnn_model_t *m, const vdnn_dataset_t *ds, vdnn_shape *in,
                      int *classes, vdnn_error *err);
/* The backend for --device: auto tries CUDA and says in one line why it uses the CPU instead. */
vdnn_status cli_backend(const cli_options *o, vdnn_backend_t **be, vdnn_error *err);
/* The backend options from --threads, --no-tf32, --deterministic (the environment decides what no flag says). */
vdnn_backend_options cli_backend_options(const cli_options *o);
/* Help text of the flags every command with --device takes besides it. */
#define CLI_DEVICE_USAGE                                                                                          \
    "--no-tf32 keeps CUDA convolutions and matrix products in strict FP32 (TF32 tensor-core math is on by\n"    \
    "default, as in PyTorch; env VDNN_NO_TF32=1 does the same); the CPU backend computes in FP32 anyway, so\n" \
    "there it has no effect.\n"                                                                                  \
    "CUDA convolutions prefer bitwise-reproducible algorithms (an atomic one only where none runs);\n"          \
    "--deterministic allows those only, one per layer, and no cuDNN benchmark mode (env\n"                        \
    "VDNN_DETERMINISTIC=1); the CPU backend is deterministic already.\n"
/* Prints the one warning of an oversubscribed managed pool (policy um with --allow-oversubscribe). */
void cli_warn_oversubscribed(const char *cmd, const vdnn_net_t *net);
/* The net's options from the flags at this input (n = batch) and class count. */
vdnn_net_options cli_net_options(const cli_options *o, vdnn_shape in, int classes);

/* "none, all, ... or um": every policy the library's table of planners knows, for error texts. */
const char *cli_policy_list(char *buf, size_t n);
/* The --policy help: one line per policy, its name and what it does, from the same table. */
void cli_policy_help(FILE *f);

/* Whether an argument after the command's name (argv[2] on) is --help or -h. */
bool cli_help_asked(int argc, char **argv);
/* A copy of argv's argc + 1 pointers (NULL-terminated), for the cli_take_* helpers to shorten; NULL when out of
 * memory. Free it. */
char **cli_args_copy(int argc, char **argv);

/* Prints "vdnn CMD: message" to stderr, the library's option fields named as this command's flags, and returns
 * exit code 1 (2 for invalid arguments). */
int cli_fail(const char *cmd, const vdnn_error *err);
/* The message with each option field the library names ("memory.budget", a leading "batch:") as its flag. */
void cli_flag_names(const char *msg, char *out, size_t n);
/* Whether --data names sequence data (text:FILE, text:DIR, tokens:FILE): sequences of tokens, a loss per token. */
bool cli_is_sequence_data(const char *spec);
/* A language model's validation numbers on stdout: mean loss per token in nats and in bits (nats / ln 2). */
void cli_print_text_eval(double loss, double accuracy);
/* The training loop's progress line, on the FILE * ctx (vdnn_train_options.progress). */
void cli_progress(void *ctx, const vdnn_progress *p);
/* Tells the user on stderr when --stream-inputs was asked for and no layer of the plan streams. */
void cli_note_unstreamed(const char *cmd, const cli_options *o, int streamed_layers);

#endif
