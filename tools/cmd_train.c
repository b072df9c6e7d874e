/* `vdnn train` and `vdnn eval`: set up model, data, backend and net from flags, run, report. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd_model_fit.h"
#include "cmd_planning.h"


static const char train_usage[] =
    "usage: vdnn train [--model NAME|FILE] [--data fashion-mnist|cifar10:DIR|idx:DIR|text:FILE|text:DIR|tokens:FILE|\n"
    "                  synthetic]\n"
    "                  [--input CxHxW | --seq-len N] [--context N] [--head-groups G|auto] [--attention fused|auto] [--classes N] [--batch N] [--epochs N | --steps N] [--lr X]\n"
    "                  [--lr-schedule constant|step:N:GAMMA|cosine[:MIN][,warmup=N]] [--momentum X]\n"
    "                  [--weight-decay X] [--optimizer sgd|adamw] [--beta1 X] [--beta2 X] [--eps X] [--clip-grad-norm X] [--seed N] [--threads N] [--device auto|cpu|cuda] [--no-tf32]\n"
    "                  [--deterministic] [--budget SIZE] [--host-budget SIZE] [--policy POLICY] [--profile FILE]\n"
    "                  [--fused-profile FILE] [--offload-params] [--stream-inputs]\n"
    "                  [--conv-algo default|lean|choose] [--allow-oversubscribe] [--poison] [--link-bandwidth BW]\n"
    "                  [--save FILE] [--resume FILE] [--log-every N] [--trace FILE.json] [--micro-batches M]\n"
    "                  [--plan-json FILE] [--no-eval] [--precision fp32|bf16|fp16] [--loss-scale X|off] [--json]\n"
    "Trains MODEL (default lenet: models/NAME.cfg) on the data (default fashion-mnist), then evaluates\n"
    "on the test split. SIZE takes KiB/MiB/GiB suffixes. Defaults: batch 64, 2 epochs, lr 0.05 cosine,\n"
    "momentum 0.9, weight decay 5e-4, seed 1, policy none, unlimited budget.\n"
    "--steps N / --epochs N train until that many steps / epochs in all (a resumed run continues).\n"
    "--json prints the summary as one JSON object on stdout (progress goes to stderr).\n"
    "POLICY: none, all, conv (vDNN), recompute (checkpointing), dyn (vDNN_dyn), pooch, auto, um; recompute,\n"
    "dyn, pooch and auto plan from costs: --profile FILE (from `vdnn profile`), else a generic estimate.\n"
    "um (OC-DNN, CUDA only) keeps what `all` swaps in Unified Memory and moves it with prefetches; it is refused\n"
    "when the managed pool and the arena exceed the GPU's free memory, unless --allow-oversubscribe (which\n"
    "lets the driver evict pages, and can hang a GPU shared with other jobs).\n"
    "--link-bandwidth 16GB/s (or -d2h / -h2d) throttles the CPU backend's copies like a PCIe link.\n"
    "--micro-batches M: each step runs M micro-batches of batch/M images one after another (planned and\n"
    "budgeted at that size) and sums their gradients before one update: gradient accumulation. Batch norm\n"
    "then normalizes over each micro-batch, and dropout draws masks per micro-batch.\n"
    "--trace FILE.json writes the last step's real timeline (and, with --profile, the simulated one) as a\n"
    "Chrome trace.\n"
    "--plan-json FILE writes the plan the net trains with, as `vdnn plan --json` prints it for the same flags.\n"
    "--optimizer adamw: PyTorch's AdamW (defaults beta1 0.9, beta2 0.999, eps 1e-8; --weight-decay is its decoupled\n"
    "decay); its two moments per parameter are optimizer state the plan counts, as SGD's momentum.\n"
    "--loss-scale X: dynamic loss scaling from scale X (a power of two; PyTorch GradScaler's rule: a step with an\n"
    "inf or NaN gradient is skipped and the scale halved, 2000 good steps double it). On by default from 65536\n"
    "with --precision fp16 (CUDA only); off: none. The summary counts the skipped steps.\n"
    "--clip-grad-norm X scales every gradient by X / (norm + 1e-6) when their global L2 norm exceeds X (PyTorch's\n"
    "clip_grad_norm_), before either optimizer's update: no parameter is updated before the last gradient is\n"
    "made (with --offload-params, each homed layer's update comes in a step of its own after backward).\n"
    "--data text:FILE trains a sequence model (gpt-mini) on FILE's bytes as tokens, sequences of --seq-len tokens\n"
    "(default: the model's context) each predicting the next byte; the last tenth of the file is the validation\n"
    "split, whose loss is printed in nats and bits per token (docs/sequence.md). --data tokens:FILE does the same\n"
    "with pre-tokenized ids in llm.c's .bin layout (a header of 256 int32: 20240520, 1, the token count; then\n"
    "uint16 ids); the vocabulary (the model's classes) is the largest id + 1 unless --classes says otherwise.\n"
    "--context N gives a sequence model a context of N tokens (its position table's rows, the default --seq-len).\n"
    "--seq-len N on an LSTM model cuts its chunked layers for N steps (chunk= steps each, the last one shorter).\n"
    "--head-groups G computes every attention's heads in G groups, each group's probabilities a tensor of their own,\n"
    "so that a plan swaps or recomputes one group's at a time (long contexts; the same numbers, bit for bit).\n"
    "--head-groups auto (train, plan, simulate, plot) takes the fewest groups, of the counts that divide the heads,\n"
    "whose plan fits --budget, and says which.\n"
    "--attention fused computes every attention in one op that never holds its probabilities (a block of query rows\n"
    "at a time, recomputed in backward): no B x H x T x T tensor to keep, swap or recompute, for two more GEMMs in\n"
    "backward (CPU; the same parameters as unfused, the numbers equal up to float sums; checkpoints resume either\n"
    "way). --attention auto (train, plan, simulate, plot) fuses the attentions that make the fastest plan that\n"
    "fits --budget, by the plan's estimate, and says which; with --profile (the model profiled unfused) and\n"
    "--fused-profile FILE (profiled with --attention fused), by the two profiles' measured costs, and the net plans\n"
    "from them composed for the choice.\n"
    "Without --data a sequence model reads text:" CLI_DEFAULT_TEXT_DIR " (Debian's " CLI_DEFAULT_TEXT_PACKAGE "\n"
    "and fortunes-min): the text files of a directory read as one text, in name order.\n"
    CLI_DEVICE_USAGE;

static const char eval_usage[] =
    "usage: vdnn eval --resume FILE [--model NAME|FILE] [--data SPEC] [--input CxHxW | --seq-len N] [--context N] [--head-groups G] [--attention fused]\n"
    "                 [--classes N] [--batch N] [--threads N] [--device auto|cpu|cuda] [--no-tf32] [--deterministic]\n"
    "                 [--precision fp32|bf16|fp16] [--json]\n"
    "Evaluates a checkpoint on the test split of the data and prints accuracy and loss (a sequence model without\n"
    "--data: on " CLI_DEFAULT_TEXT_DIR ", as vdnn train).\n" CLI_PRECISION_USAGE
    CLI_DEVICE_USAGE;

static void print_json(FILE *f, const vdnn_net_t *net, const vdnn_train_result *r)
{
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    fprintf(f,
            "{\"model\": \"%s\", \"batch\": %d, \"micro_batches\": %d, \"input\": \"%dx%dx%d\", \"classes\": %d, \"policy\": \"%s\", "
            "\"precision\": \"%s\", "
            "\"device\": \"%s\", \"steps\": %ld, \"steps_run\": %ld, \"test_accuracy\": %.6f, \"test_loss\": %.6f, "
            "\"final_loss\": %.6f, \"images_per_sec\": %.3f, \"step_seconds\": %.6f, \"train_seconds\": %.3f, "
            "\"elapsed_seconds\": %.3f, "
            "\"peak_device_bytes\": %zu, \"planned_peak_device_bytes\": %zu, \"host_bytes\": %zu, "
            "\"bytes_moved_per_step\": %zu, \"offload_params\": %s, \"streamed_layers\": %d, \"loss_scale\": %g, "
            "\"skipped_steps\": %lld}\n",
            st.model, st.batch, st.micro_batches, st.input.c, st.input.h, st.input.w, st.classes,
            vdnn_policy_name(st.policy), vdnn_precision_name(st.precision), st.backend, r->steps, r->steps_run, r->test_accuracy, r->test_loss,
            r->final_loss, r->images_per_sec, r->step_seconds, r->train_seconds, r->elapsed_seconds,
            r->peak_device_bytes, st.device_bytes, st.host_bytes, st.bytes_moved, st.offload_params ? "true" : "false",
            st.streamed_layers, (double)st.loss_scale, (long long)st.skipped_steps);
}


typedef struct session {
    vdnn_profile_t *prof;
    vdnn_model_t *m;
    vdnn_backend_t *be;
    vdnn_dataset_t *train, *test;
    vdnn_net_t *net;
} session;

static void session_free(session *s)
{
    vdnn_net_free(s->net);
    vdnn_dataset_free(s->train);
    vdnn_dataset_free(s->test);
    vdnn_backend_free(s->be);
    vdnn_model_free(s->m);
    vdnn_profile_free(s->prof);
}

static vdnn_status write_plan(const vdnn_plan_t *plan, const char *path, vdnn_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(err, VDNN_ERR_IO, "--plan-json %s: cannot write it", path);
    vdnn_status rc = cli_print_plan(plan, true, f, err);
    if (fclose(f) != 0 && rc == VDNN_OK) rc = cli_error(err, VDNN_ERR_IO, "--plan-json %s: cannot write it", path);
    return rc;
}

/* Without --data a sequence model (input 1xTx1) reads the default text; o->data is set to it. */
static vdnn_status default_text(cli_options *o, const vdnn_model_t *m, vdnn_error *err)
{
    if (o->data_given || !cli_sequence_model(m)) return VDNN_OK;
    struct stat sb;
    if (stat(CLI_DEFAULT_TEXT_DIR, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cli_error(err, VDNN_ERR_IO, "no --data given: %s, a sequence model, reads the default text %s, which is "
                         "missing: install the Debian package '%s' (scripts/setup.sh does), or give --data text:FILE",
                         vdnn_model_name(m), CLI_DEFAULT_TEXT_DIR, CLI_DEFAULT_TEXT_PACKAGE);
    o->data = "text:" CLI_DEFAULT_TEXT_DIR;
    return VDNN_OK;
}

/* --head-groups auto, --attention auto: the session's model in the fewest head groups whose training plan fits, or
 * with the attentions fused that make the fastest plan that fits, planned as the net will plan it (this backend;
 * the default estimate, or with --fused-profile the two profiles, composed into s->prof for the choice). */
static vdnn_status regroup(session *s, const cli_options *o, vdnn_shape in, int classes, vdnn_error *err)
{
    const vdnn_net_options no = cli_net_options(o, in, classes);
    vdnn_profile_t *both[2] = {NULL, NULL};
    vdnn_model_t *chosen = NULL;
    vdnn_status rc = VDNN_OK;
    if (o->fused_profile) {
        rc = vdnn_profile_load(o->profile, s->m, in, classes, &both[0], err);
        if (rc == VDNN_OK) rc = cli_load_fused_profile(o->fused_profile, s->m, in, classes, &both[1], err);
    }
    const vdnn_profile_t *const measured[2] = {both[0], both[1]};
    if (rc == VDNN_OK)
        rc = cli_fit_model(o, s->m, s->be, NULL, o->fused_profile ? measured : NULL, in, classes, &no.memory,
                           "train", &chosen, err);
    if (rc == VDNN_OK && o->fused_profile) rc = vdnn_profile_compose(measured, 2, chosen, &s->prof, err);
    vdnn_profile_free(both[0]);
    vdnn_profile_free(both[1]);
    if (rc != VDNN_OK) {
        vdnn_model_free(chosen);
        return rc;
    }
    vdnn_model_free(s->m);
    s->m = chosen;
    return VDNN_OK;
}

/* --fused-profile: only with --attention auto and --profile (the model's profile unfused). */
static vdnn_status check_fused_profile(const cli_options *o, vdnn_error *err)
{
    if (!o->fused_profile) return VDNN_OK;
    if (!o->auto_attention || !o->profile)
        return cli_error(err, VDNN_ERR_INVALID_ARG, "--fused-profile %s goes with --attention auto and --profile (the "
                         "model's profile unfused; see vdnn train --help)", o->fused_profile);
    return VDNN_OK;
}

static vdnn_status session_open(cli_options *o, bool need_train, session *s, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    const bool auto_fit = cli_model_fit_asked(o);
    const cli_options base = cli_model_fit_base(o); /* grouped or fused once the backend can plan */
    vdnn_status rc = check_fused_profile(o, err);
    if (rc == VDNN_OK) rc = cli_model_fit_check(o, true, o->profile && !o->fused_profile, "train", err);
    if (rc == VDNN_OK) rc = cli_load_model_opts(&base, &s->m, err);
    if (rc == VDNN_OK) rc = default_text(o, s->m, err);
    /* n: synthetic data makes at least one batch of training images. */
    vdnn_shape syn = {o->batch, o->in_c, o->in_h, o->in_w};
    int syn_classes = o->classes;
    if (rc == VDNN_OK && !strcmp(o->data, "synthetic")) {
        vdnn_shape def;
        int def_classes;
        vdnn_model_defaults(s->m, &def, &def_classes);
        if (!syn.c) syn = (vdnn_shape){o->batch, def.c, def.h, def.w};
        if (!syn_classes) syn_classes = def_classes;
        if (!syn.c || syn_classes < 2)
            rc = cli_error(err, VDNN_ERR_INVALID_ARG, "--data synthetic needs --input CxHxW and --classes N");
    }
    if (rc == VDNN_OK && cli_is_sequence_data(o->data) && !syn.h) {
        /* Sequences of the model's context unless --seq-len says otherwise. */
        vdnn_shape def;
        int def_classes;
        vdnn_model_defaults(s->m, &def, &def_classes);
        syn.h = def.h;
        if (def.c != 1 || def.w != 1)
            rc = cli_error(err, VDNN_ERR_INVALID_ARG, "--data %s feeds sequence models (input 1xTx1, e.g. gpt-mini); %s "
                           "takes %dx%dx%d images", o->data, vdnn_model_name(s->m), def.c, def.h, def.w);
    }
    if (rc == VDNN_OK && need_train)
        rc = vdnn_dataset_open(o->data, VDNN_SPLIT_TRAIN, syn, syn_classes, (uint64_t)o->seed, &s->train, err);
    if (rc == VDNN_OK) rc = vdnn_dataset_open(o->data, VDNN_SPLIT_TEST, syn, syn_classes, (uint64_t)o->seed, &s->test, err);
    vdnn_shape in;
    int classes = 0;
    if (rc == VDNN_OK) rc = cli_shape(o, s->m, s->train ? s->train : s->test, &in, &classes, err);
    if (rc == VDNN_OK) rc = cli_backend(o, &s->be, err);
    if (rc == VDNN_OK && auto_fit) rc = regroup(s, o, in, classes, err);
    if (rc == VDNN_OK && o->profile && !s->prof) rc = vdnn_profile_load(o->profile, s->m, in, classes, &s->prof, err);
    /* The run plans with its own backend's op info; a profile recorded on another device or under other settings
     * plans for that one, so `vdnn plan --profile` would not show this run's plan: say so, and go on (its times
     * are still the costs given). */
    if (rc == VDNN_OK && s->prof) {
        vdnn_error e = {VDNN_OK, ""};
        if (vdnn_profile_check_backend(s->prof, s->m, s->be, &e) != VDNN_OK) fprintf(stderr, "vdnn train: note: %s\n", e.msg);
    }
    if (rc == VDNN_OK) {
        vdnn_net_options no = cli_net_options(o, in, classes);
        no.profile = s->prof;
        rc = vdnn_net_create(s->m, s->be, &no, &s->net, err);
    }
    if (rc == VDNN_OK) {
        vdnn_net_stats st;
        vdnn_net_get_stats(s->net, &st);
        cli_note_unstreamed("train", o, st.streamed_layers);
    }
    if (rc == VDNN_OK && o->plan_json) rc = write_plan(vdnn_net_plan(s->net), o->plan_json, err);
    if (rc == VDNN_OK && o->resume) rc = vdnn_net_load(s->net, o->resume, err);
    if (rc == VDNN_OK && o->resume) {
        vdnn_net_stats st;
        vdnn_net_get_stats(s->net, &st);
        /* Allowed (the weights are fp32 either way) but worth saying: the run's numbers change from here. */
        if (st.checkpoint_precision != st.precision)
            fprintf(stderr, "vdnn: %s was written by a %s net; its fp32 weights continue in %s (--precision)\n",
                    o->resume, vdnn_precision_name(st.checkpoint_precision), vdnn_precision_name(st.precision));
    }
    return rc;
}

int vdnn_cmd_train(int argc, char **argv)
{
    cli_options o;
    cli_defaults(&o);
    if (cli_help_asked(argc, argv)) {
        fputs(train_usage, stdout);
        fputs(CLI_CONV_ALGO_USAGE, stdout);
        fputs(CLI_OFFLOAD_USAGE, stdout);
        fputs(CLI_PRECISION_USAGE, stdout);
        char pol[256];
        /* Names only: the table of what each does is in vdnn plan --help, and this help stays one screen. */
        printf("Policies: %s (vdnn plan --help says what each does).\n", cli_policy_list(pol, sizeof pol));
        return 0;
    }
    if (!cli_parse(argc, argv, 2, ~0u, false, &o, "train")) return 2;
    if (o.trace && o.mem.micro_batches > 1) {
        fprintf(stderr, "vdnn train: --trace records one whole iteration: it does not take --micro-batches\n");
        return 2;
    }
    vdnn_error err = {VDNN_OK, ""};
    vdnn_train_options to = vdnn_train_options_default();
    to.lr = o.lr;
    to.lr_schedule = o.lr_schedule;
    to.epochs = o.epochs;
    to.steps = o.steps;
    to.log_every = o.log_every;
    to.save_path = o.save;
    to.evaluate = !o.no_eval;
    FILE *log = o.json ? stderr : stdout;
    to.progress = cli_progress;
    to.progress_ctx = log;
    vdnn_status rc;

    if (o.save) {
        /* Fail before training, not after it, when the checkpoint cannot be written there. */
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", o.save);
        char *slash = strrchr(dir, '/');
        if (slash == dir) dir[1] = '\0';
        else if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        struct stat sb;
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "vdnn train: --save %s: directory '%s' does not exist\n", o.save, dir);
            return 2;
        }
    }
    session s;
    rc = session_open(&o, true, &s, &err);
    if (rc == VDNN_OK) {
        cli_warn_oversubscribed("train", s.net);
        vdnn_net_stats st;
        vdnn_net_get_stats(s.net, &st);
        char pk[32];
        char micro[64] = "";
        if (st.micro_batches > 1) snprintf(micro, sizeof micro, " (%d micro-batches of %d)", st.micro_batches, st.input.n);
        fprintf(log, "vdnn train: model %s, %d%s x %dx%dx%d, %d classes, %s, policy %s, %s maps, device memory %s, "
                "%d train images\n",
                st.model, st.batch, micro, st.input.c, st.input.h, st.input.w, st.classes, st.backend,
                vdnn_policy_name(st.policy), vdnn_precision_name(st.precision), vdnn_format_bytes(st.device_bytes, pk, sizeof pk),
                vdnn_dataset_shape(s.train).n);
        vdnn_train_result r;
        vdnn_timeline_t *measured = NULL, *simulated = NULL;
        if (o.trace) to.record_last = &measured;
        rc = vdnn_train_run(s.net, s.train, s.test, &to, &r, &err);
        if (rc == VDNN_OK && o.trace) {
            const vdnn_timeline_t *tls[2] = {measured, NULL};
            const char *names[2] = {"measured (last training step)", "simulated (from --profile)"};
            int n = 1;
            if (s.prof) {
                rc = vdnn_plan_simulate(vdnn_net_plan(s.net), s.prof, &simulated, &err);
                tls[1] = simulated;
                n = 2;
            }
            if (rc == VDNN_OK && !measured) rc = cli_error(&err, VDNN_ERR_INVALID_ARG, "--trace: no step was run to record");
            if (rc == VDNN_OK) rc = vdnn_trace_write(o.trace, tls, names, n, &err);
        }
        vdnn_timeline_free(measured);
        vdnn_timeline_free(simulated);
        if (rc == VDNN_OK) {
            if (o.json) {
                print_json(stdout, s.net, &r);
            } else {
                printf("done: %ld steps, final loss %.4f, %.1f images/s, peak device memory %s (%zu bytes), %.1f s\n",
                       r.steps, r.final_loss, r.images_per_sec, vdnn_format_bytes(r.peak_device_bytes, pk, sizeof pk),
                       r.peak_device_bytes, r.elapsed_seconds);
                vdnn_net_stats ls;
                vdnn_net_get_stats(s.net, &ls);
                if (ls.loss_scaling)
                    printf("loss scaling: %lld of %ld steps skipped (inf or NaN gradients), scale now %g\n",
                           (long long)ls.skipped_steps, r.steps_run, (double)ls.loss_scale);
                if (r.test_accuracy >= 0 && cli_is_sequence_data(o.data))
                    cli_print_text_eval(r.test_loss, r.test_accuracy);
                else if (r.test_accuracy >= 0)
                    printf("test accuracy: %.2f%% (loss %.4f)\n", 100.0 * r.test_accuracy, r.test_loss);
            }
        }
    }
    session_free(&s);
    return rc == VDNN_OK ? 0 : cli_fail("train", &err);
}

int vdnn_cmd_eval(int argc, char **argv)
{
    cli_options o;
    cli_defaults(&o);
    if (cli_help_asked(argc, argv)) {
        fputs(eval_usage, stdout);
        return 0;
    }
    if (!cli_parse(argc, argv, 2, OPT_MODEL | OPT_DATA | OPT_SHAPE | OPT_BATCH | OPT_DEVICE | OPT_CKPT | OPT_JSON | OPT_PRECISION,
                   false, &o, "eval"))
        return 2;
    vdnn_error err = {VDNN_OK, ""};
    if (!o.resume) {
        fprintf(stderr, "vdnn eval: --resume FILE is required (the checkpoint to evaluate)\n");
        return 2;
    }
    session s;
    vdnn_status rc = session_open(&o, false, &s, &err);
    double acc = 0, loss = 0;
    if (rc == VDNN_OK) rc = vdnn_net_evaluate(s.net, s.test, &acc, &loss, &err);
    if (rc == VDNN_OK) {
        vdnn_net_stats st;
        vdnn_net_get_stats(s.net, &st);
        const int count = vdnn_dataset_shape(s.test).n;
        if (o.json)
            printf("{\"model\": \"%s\", \"checkpoint\": \"%s\", \"step\": %ld, \"test_accuracy\": %.6f, \"test_loss\": %.6f, "
                   "\"test_images\": %d}\n",
                   st.model, o.resume, (long)st.step, acc, loss, count);
        else if (cli_is_sequence_data(o.data))
            cli_print_text_eval(loss, acc);
        else
            printf("test accuracy: %.2f%% (loss %.4f) on %d images, checkpoint %s at step %ld\n", 100 * acc, loss,
                   count, o.resume, (long)st.step);
    }
    session_free(&s);
    return rc == VDNN_OK ? 0 : cli_fail("eval", &err);
}
