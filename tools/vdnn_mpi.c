/* vdnn-mpi: `vdnn train` across the ranks mpirun starts, with data parallelism over groups of ranks and
 * model parallelism (--stages K) inside each group. A separate binary so `vdnn` itself needs no MPI. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vdnn/dist.h>

#include "cmd_planning.h"

static const char usage[] =
    "usage: mpirun -np N vdnn-mpi train [vdnn train flags] [--stages K] [--micro-batches M] [--balance]\n"
    "                                   [--bucket SIZE] [--comm-timeout SECONDS] [--no-eval]\n"
    "                                   [--sync-bn | --no-sync-bn] [--no-nccl]\n"
    "Trains like `vdnn train` on N ranks (each its own device, or CPU backend with --threads T; on one\n"
    "machine use N x T = cores). The N ranks form N/K data-parallel groups of K model-parallel stages:\n"
    "rank r is stage r % K of group r / K. --batch is the global batch: each group trains on its share\n"
    "(batch / groups images, so --batch must be a multiple of N/K), and gradients are summed over the\n"
    "groups in buckets of --bucket bytes (default 4MiB) that start during the backward pass.\n"
    "Stages: the model's stage=K keys place layers, else (or with --balance) layers are split where one\n"
    "tensor alone crosses, balancing per-layer costs (--profile FILE of the full model at batch/groups, else\n"
    "a FLOP estimate) within --budget. Activations and their gradients cross stages as MPI messages.\n"
    "--micro-batches M: each group's share is M micro-batches. With stages, a step runs GPipe's schedule:\n"
    "every micro-batch's forward pass, then their backward passes, each sent on as soon as it is done, so\n"
    "stages work at once; each stage plans and budgets M micro-batches' saved activations at once.\n"
    "Gradients are summed over the micro-batches and the update runs once per step. Batch norm normalizes\n"
    "over each micro-batch (as GPipe does): a BN net then trains like one device running the same\n"
    "micro-batches (vdnn train --micro-batches), not like one device at the whole batch.\n"
    "GPU ranks (--device cuda) sum gradients with NCCL on device memory (its id shared through MPI; each\n"
    "bucket an NCCL group on a stream of its own that waits for the backward pass by event) and send stage\n"
    "activations and gradients by NCCL send/receive, when the build has NCCL and every rank of a communicator\n"
    "has a GPU; --no-nccl (or a build without NCCL): through MPI on host memory.\n"
    "Every wait on another rank gives up after --comm-timeout seconds (default 300) with an error naming\n"
    "it, and the job is aborted: a rank that dies or stalls never hangs the others. Rank 0 prints progress,\n"
    "writes --save checkpoints (one file for the whole model, readable by `vdnn eval` and `vdnn train\n"
    "--resume`) and the summary (--json: one object on stdout).\n"
    "--sync-bn (the default on the CPU backend): batch norm normalizes over the global batch, its per-channel\n"
    "sums added up over the groups at each BN layer, forward and backward, so a BN net trains like one device\n"
    "at the global batch, running statistics included. --no-sync-bn: each group normalizes over its own\n"
    "share, with no messages inside the layers (running statistics averaged over the groups at checkpoints\n"
    "and at the end); the only choice on GPUs (--device cuda), where it is the default and --sync-bn is\n"
    "refused. Each group draws its own dropout masks: nets without dropout train like one device at the\n"
    "global batch (up to float summation order); one group of stages trains bit for bit like one device\n"
    "(with the same --micro-batches), batch norm and dropout included.\n";

/* VDNN_MPI_FAULT=RANK:STEP:kill|hang makes a rank die or stall after a step: for the failure tests. */
typedef struct fault {
    int rank;
    long step;
    char what[8];
} fault;

static void after_step(void *ctx, long step, int rank)
{
    const fault *f = ctx;
    if (rank != f->rank || step != f->step) return;
    fprintf(stderr, "vdnn-mpi: rank %d: injected fault '%s' after step %ld\n", rank, f->what, step);
    fflush(stderr);
    if (!strcmp(f->what, "kill")) raise(SIGKILL);
    for (;;) pause();
}

static bool take_bool(int *argc, char **argv, const char *flag)
{
    bool found = false;
    for (int i = 1; i < *argc; i++)
        if (!strcmp(argv[i], flag)) {
            memmove(&argv[i], &argv[i + 1], (size_t)(*argc - i - 1) * sizeof *argv);
            (*argc)--;
            i--;
            found = true;
        }
    return found;
}

typedef struct run {
    cli_options o;
    vdnn_dist_options dc;
    bool no_eval;
    int sync_bn;                 /* 1 --sync-bn, 0 --no-sync-bn, -1 neither: the backend's default */
    fault fault;
    bool have_fault;
    vdnn_model_t *m;
    vdnn_backend_t *be;
    vdnn_dataset_t *train, *test;
    vdnn_profile_t *prof;
    vdnn_dist_t *w;
} run;

/* Returns 0, or the exit code for a usage error (printed on rank 0 only: every rank sees the same argv). */
static int parse(int argc, char **argv, int rank, run *r)
{
    cli_defaults(&r->o);
    r->dc = vdnn_dist_options_default();
    const char *stages = NULL, *bucket = NULL, *timeout = NULL;
    FILE *say = rank == 0 ? stderr : fopen("/dev/null", "w");
    int code = 0;
    r->dc.balance = take_bool(&argc, argv, "--balance");
    r->no_eval = take_bool(&argc, argv, "--no-eval");
    r->dc.no_nccl = take_bool(&argc, argv, "--no-nccl");
    bool sync = take_bool(&argc, argv, "--sync-bn"), no_sync = take_bool(&argc, argv, "--no-sync-bn");
    r->sync_bn = sync ? 1 : no_sync ? 0 : -1;
    if (sync && no_sync) {
        fprintf(say, "vdnn-mpi train: --sync-bn and --no-sync-bn: give one of them\n");
        code = 2;
    }
    if (!cli_take_flag(&argc, argv, "--stages", &stages, "train") || !cli_take_flag(&argc, argv, "--bucket", &bucket, "train") ||
        !cli_take_flag(&argc, argv, "--comm-timeout", &timeout, "train"))
        code = 2;
    long v;
    double d;
    if (!code && stages && (!vdnn_parse_int(stages, &v) || v < 1 || v > VDNN_MAX_STAGES)) {
        fprintf(say, "vdnn-mpi train: --stages: invalid value '%s' (an integer from 1 to %d)\n", stages, VDNN_MAX_STAGES);
        code = 2;
    } else if (stages) {
        r->dc.stages = (int)v;
    }
    if (!code && bucket && !vdnn_parse_size(bucket, &r->dc.bucket_bytes)) {
        fprintf(say, "vdnn-mpi train: --bucket: invalid value '%s' (a size such as 4MiB)\n", bucket);
        code = 2;
    }
    if (!code && timeout && (!vdnn_parse_float(timeout, &d) || d <= 0 || d > 1e6)) {
        fprintf(say, "vdnn-mpi train: --comm-timeout: invalid value '%s' (seconds, more than 0)\n", timeout);
        code = 2;
    } else if (timeout) {
        r->dc.timeout_s = d;
    }
    if (!code && !cli_parse(argc, argv, 2, ~0u, false, &r->o, "train")) code = 2;
    if (!code && r->o.trace) {
        fprintf(say, "vdnn-mpi train: --trace is not supported with MPI\n");
        code = 2;
    }
    /* Pipeline stages would each decide on their own gradients whether to skip a step (fp16 scales by default). */
    if (!code && (r->o.loss_scale > 0 || r->o.mem.precision == VDNN_PRECISION_FP16)) {
        fprintf(say, "vdnn-mpi train: %s is not supported with MPI yet (vdnn train takes it)\n",
                r->o.loss_scale > 0 ? "--loss-scale" : "--precision fp16 (dynamic loss scaling)");
        code = 2;
    }
    const char *fs = getenv("VDNN_MPI_FAULT");
    if (!code && fs && *fs) {
        char tail;
        if (sscanf(fs, "%d:%ld:%7[a-z]%c", &r->fault.rank, &r->fault.step, r->fault.what, &tail) != 3 ||
            (strcmp(r->fault.what, "kill") && strcmp(r->fault.what, "hang"))) {
            fprintf(say, "vdnn-mpi: VDNN_MPI_FAULT='%s' (expected RANK:STEP:kill or RANK:STEP:hang)\n", fs);
            code = 2;
        }
        r->have_fault = true;
    }
    if (say != stderr && say) fclose(say);
    return code;
}

/* Like cli_backend, but the ranks on one machine take its GPUs in turn. */
static vdnn_status open_backend(const cli_options *o, vdnn_backend_t **be, vdnn_error *err)
{
    if (!strcmp(o->device, "cpu")) return cli_backend(o, be, err);
    MPI_Comm node;
    int local = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
    }
    char name[32];
    snprintf(name, sizeof name, "cuda:%d", local);
    const vdnn_backend_options bo = cli_backend_options(o);
    vdnn_error cerr;
    vdnn_status rc = vdnn_backend_open_ex(name, &bo, &o->mem, be, &cerr);
    if (rc == VDNN_OK) return VDNN_OK;
    if (!strcmp(o->device, "cuda")) return cli_error(err, rc, "--device cuda (GPU %d of this machine): %s", local, cerr.msg);
    if (local == 0) fprintf(stderr, "vdnn-mpi: %s; using the CPU backend\n", cerr.msg);
    cli_options co = *o;
    co.device = "cpu";
    return cli_backend(&co, be, err);
}

static vdnn_status setup(run *r, vdnn_error *err)
{
    const cli_options *o = &r->o;
    vdnn_status rc = cli_load_model_opts(o, &r->m, err);
    vdnn_shape syn = {0, o->in_c, o->in_h, o->in_w};
    int syn_classes = o->classes;
    if (rc == VDNN_OK && !strcmp(o->data, "synthetic")) {
        vdnn_shape def;
        int def_classes;
        vdnn_model_defaults(r->m, &def, &def_classes);
        if (!syn.c) syn = def;
        if (!syn_classes) syn_classes = def_classes;
        if (!syn.c || syn_classes < 2)
            rc = cli_error(err, VDNN_ERR_INVALID_ARG, "--data synthetic needs --input CxHxW and --classes N");
    }
    /* A sequence model's text comes in sequences of its context unless --seq-len says otherwise. */
    if (rc == VDNN_OK && !syn.h && cli_sequence_model(r->m)) {
        vdnn_shape def;
        int def_classes;
        vdnn_model_defaults(r->m, &def, &def_classes);
        syn.h = def.h;
    }
    if (rc == VDNN_OK) rc = vdnn_dataset_open(o->data, VDNN_SPLIT_TRAIN, syn, syn_classes, (uint64_t)o->seed, &r->train, err);
    if (rc == VDNN_OK) rc = vdnn_dataset_open(o->data, VDNN_SPLIT_TEST, syn, syn_classes, (uint64_t)o->seed, &r->test, err);
    vdnn_shape in;
    int classes = 0;
    if (rc == VDNN_OK) rc = cli_shape(o, r->m, r->train, &in, &classes, err);
    if (rc == VDNN_OK) rc = open_backend(o, &r->be, err);
    /* Synchronized batch norm unless asked otherwise, where the backend has it (vdnn_dist_create refuses
     * an explicit --sync-bn elsewhere, naming the flag). */
    if (rc == VDNN_OK && r->sync_bn >= 0) r->dc.sync_bn = r->sync_bn == 1;
    if (rc == VDNN_OK && r->sync_bn < 0) {
        /* Decided together: with --device auto a rank without a GPU runs the CPU backend, and all ranks must
         * agree. A rank that failed above aborts the job instead of reaching this. */
        int cpu = !strcmp(vdnn_backend_name(r->be), "cpu");
        if (MPI_Allreduce(MPI_IN_PLACE, &cpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
            rc = cli_error(err, VDNN_ERR_IO, "MPI_Allreduce failed choosing between --sync-bn and --no-sync-bn");
        r->dc.sync_bn = cpu;
    }
    int n_ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    if (rc == VDNN_OK && o->mem.offload_params && n_ranks > 1)
        rc = cli_error(err, VDNN_ERR_UNSUPPORTED,
                       "--offload-params is not supported with more than one rank: data and stage parallelism keep "
                       "every gradient until a separate update step, while homed parameters are updated in their "
                       "layer's backward step (one rank trains with it as vdnn train does)");
    vdnn_net_options no = cli_net_options(o, in, classes);
    if (rc == VDNN_OK && o->profile) {
        /* A profile describes the whole model at one group's batch. */
        int groups = n_ranks / r->dc.stages > 0 ? n_ranks / r->dc.stages : 1;
        vdnn_shape pin = {in.n / groups, in.c, in.h, in.w};
        rc = vdnn_profile_load(o->profile, r->m, pin, classes, &r->prof, err);
        r->dc.profile = r->prof;
        no.profile = r->prof;
    }
    if (rc == VDNN_OK) rc = vdnn_dist_create(MPI_COMM_WORLD, r->m, r->be, &no, &r->dc, &r->w, err);
    if (rc == VDNN_OK && o->resume) rc = vdnn_dist_resume(r->w, o->resume, err);
    return rc;
}

static void teardown(run *r)
{
    vdnn_dist_free(r->w);
    vdnn_dataset_free(r->train);
    vdnn_dataset_free(r->test);
    vdnn_backend_free(r->be);
    vdnn_model_free(r->m);
    vdnn_profile_free(r->prof);
}

static void report(const run *r, const vdnn_train_result *res)
{
    vdnn_dist_info w;
    vdnn_dist_get_info(r->w, &w);
    char pk[32];
    if (r->o.json) {
        printf("{\"model\": \"%s\", \"ranks\": %d, \"stages\": %d, \"groups\": %d, \"batch\": %d, \"group_batch\": %d, "
               "\"micro_batches\": %d, "
               "\"input\": \"%dx%dx%d\", \"classes\": %d, \"threads\": %d, \"steps\": %ld, \"steps_run\": %ld, "
               "\"test_accuracy\": %.6f, \"test_loss\": %.6f, \"final_loss\": %.6f, \"images_per_sec\": %.3f, "
               "\"step_seconds\": %.6f, \"train_seconds\": %.3f, \"elapsed_seconds\": %.3f, \"peak_device_bytes\": %zu, "
               "\"gradient_buckets\": %d, \"gradient_bytes\": %zu, \"gradient_hook_seconds\": %.6f, "
               "\"gradient_wait_seconds\": %.6f, \"split\": \"%s\"}\n",
               w.model, w.ranks, w.stages, w.groups, w.global_batch, w.group_batch, w.micro_batches, w.input.c,
               w.input.h, w.input.w, w.classes, r->o.threads, res->steps, res->steps_run,
               res->test_accuracy, res->test_loss, res->final_loss, res->images_per_sec, res->step_seconds,
               res->train_seconds, res->elapsed_seconds, res->peak_device_bytes, w.gradient_buckets, w.gradient_bytes,
               w.gradient_hook_s, w.gradient_wait_s, w.split);
        return;
    }
    printf("done: %ld steps, final loss %.4f, %.1f images/s, largest device memory of a rank %s, %.1f s\n", res->steps,
           res->final_loss, res->images_per_sec, vdnn_format_bytes(res->peak_device_bytes, pk, sizeof pk),
           res->elapsed_seconds);
    if (res->test_accuracy >= 0 && cli_is_sequence_data(r->o.data)) cli_print_text_eval(res->test_loss, res->test_accuracy);
    else if (res->test_accuracy >= 0)
        printf("test accuracy: %.2f%% (loss %.4f)\n", 100.0 * res->test_accuracy, res->test_loss);
}

static int train(int argc, char **argv, int rank)
{
    run r;
    memset(&r, 0, sizeof r);
    int code = parse(argc, argv, rank, &r);
    if (code) return code;
    vdnn_error err = {VDNN_OK, ""};
    vdnn_dist_run_options ro;
    memset(&ro, 0, sizeof ro);
    ro.train = vdnn_train_options_default();
    ro.train.lr = r.o.lr;
    ro.train.lr_schedule = r.o.lr_schedule;
    ro.train.epochs = r.o.epochs;
    ro.train.steps = r.o.steps;
    ro.train.log_every = r.o.log_every;
    ro.train.save_path = r.o.save;
    ro.train.evaluate = !r.no_eval;
    FILE *log = r.o.json ? stderr : stdout;
    ro.train.progress = cli_progress;
    ro.train.progress_ctx = log;
    vdnn_status rc = VDNN_OK;
    if (r.have_fault) {
        ro.after_step = after_step;
        ro.ctx = &r.fault;
    }
    if (rc == VDNN_OK) rc = setup(&r, &err);
    if (rc == VDNN_OK && rank == 0) {
        vdnn_dist_info w;
        vdnn_dist_get_info(r.w, &w);
        char micro[64] = "";
        if (w.micro_batches > 1)
            snprintf(micro, sizeof micro, " in %d micro-batches of %d", w.micro_batches, w.group_batch / w.micro_batches);
        fprintf(log,
                "vdnn-mpi train: model %s, %d ranks = %d data-parallel group%s x %d stage%s, global batch %d (%d per "
                "group%s), %dx%dx%d, %d classes, %s%s%s%s%s%s\n",
                w.model, w.ranks, w.groups, w.groups > 1 ? "s" : "", w.stages, w.stages > 1 ? "s" : "", w.global_batch,
                w.group_batch, micro, w.input.c, w.input.h, w.input.w, w.classes, vdnn_backend_name(r.be),
                w.sync_bn ? ", batch norm synchronized over the groups" : "", w.dp_nccl ? ", gradients summed by NCCL" : "",
                w.pipe_nccl ? ", stage messages by NCCL" : "", w.stages > 1 ? ", stages " : "", w.split);
        fflush(log);
    }
    vdnn_train_result res;
    if (rc == VDNN_OK) rc = vdnn_dist_train_run(r.w, r.train, r.test, &ro, &res, &err);
    if (rc == VDNN_OK && rank == 0) report(&r, &res);
    if (rc != VDNN_OK) {
        char msg[sizeof err.msg + 256];
        cli_flag_names(err.msg[0] ? err.msg : vdnn_status_name(err.status), msg, sizeof msg);
        fprintf(stderr, "vdnn-mpi train: rank %d: %s\n", rank, msg);
        fflush(stderr);
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        /* Other ranks may be waiting on this one: end the whole job, not just this rank. */
        if (size > 1) MPI_Abort(MPI_COMM_WORLD, err.status == VDNN_ERR_INVALID_ARG ? 2 : 1);
        code = err.status == VDNN_ERR_INVALID_ARG ? 2 : 1;
    }
    fflush(stdout);
    teardown(&r);
    return code;
}

int main(int argc, char **argv)
{
    int provided = 0, rank = 0;
    /* Open MPI: sum gradients with the ring algorithm (each rank sends 2(N-1)/N of them, the least any
     * algorithm sends; on one machine it was 2-3x faster than the default choice). The caller's own
     * setting wins. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "vdnn-mpi: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int code;
    if (argc >= 2 && !strcmp(argv[1], "train")) {
        if (cli_help_asked(argc, argv)) {
            if (rank == 0) fputs(usage, stdout);
            code = 0;
        } else {
            code = train(argc, argv, rank);
        }
    } else if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        if (rank == 0) fputs(usage, stdout);
        code = 0;
    } else {
        if (rank == 0) fprintf(stderr, "vdnn-mpi: expected the command 'train'\n%s", usage);
        code = 2;
    }
    MPI_Finalize();
    return code;
}
