/* NCCL on GPU ranks: 2 data-parallel ranks summing gradients with NCCL equal one GPU at the whole batch and
 * the same ranks through MPI, and 2 stages exchanging by NCCL equal one GPU. Needs 2 GPUs, vdnn-mpi and a
 * build with NCCL; skipped (saying why) otherwise. */
#include "backend/backend.h"
#include "test_dist_util.h"

/* TF32 off and deterministic algorithms: the runs then differ only in the order of float sums. */
#define GPU_COMMON                                                                                            \
    "--data synthetic --input 3x16x16 --classes 10 --device cuda --no-tf32 --deterministic --lr 0.05 "      \
    "--log-every 1000 --batch 32 --steps 8 --lr-schedule constant"

/* Why this machine cannot run the test, or NULL. */
static const char *no_gpus(void)
{
    static char why[sizeof(((vdnn_error *)0)->msg) + 32];
    for (int d = 0; d < 2; d++) {
        vdnn_backend_t *be = NULL;
        vdnn_error err;
        if (vdnn_backend_cuda_create(d, 1, &be, &err) != VDNN_OK) {
            snprintf(why, sizeof why, "GPU %d: %.900s", d, err.msg);
            return why;
        }
        vdnn_backend_destroy(be);
    }
    return NULL;
}

static bool ready(void)
{
    if (!dist_available()) return false;
    const char *why = no_gpus();
    if (why) {
        print_message("skipped: needs 2 GPUs (%s)\n", why);
        return false;
    }
    return true;
}

static void run_or_fail(const dist_fixture *f, const char *cmd, const char *name)
{
    int rc = dist_sh("%s >%s/%s.out 2>%s/%s.err", cmd, f->dir, name, f->dir, name);
    if (rc) {
        char err[1100];
        snprintf(err, sizeof err, "%s/%s.err", f->dir, name);
        dist_print_file(err);
        fail_msg("%s (%s) exited with %d", cmd, name, rc);
    }
}

static double diff(const dist_fixture *f, const char *a, const char *b)
{
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", f->dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", f->dir, b);
    bool bitwise;
    return dist_ckpt_diff(pa, pb, &bitwise);
}

static bool out_has(const dist_fixture *f, const char *name, const char *needle)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.out", f->dir, name);
    return dist_file_has(path, needle);
}

static void one_gpu(const dist_fixture *f, const char *model, const char *name)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout %d " VDNN_BINARY_DIR "/vdnn train --model %s " GPU_COMMON " --save %s/%s.ckpt",
             DIST_JOB_LIMIT_S, model, f->dir, name);
    run_or_fail(f, cmd, name);
}

static void mpi_gpus(const dist_fixture *f, const char *model, const char *extra, const char *name)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, DIST_MPIRUN " --model %s " GPU_COMMON " %s --save %s/%s.ckpt", DIST_JOB_LIMIT_S, 2, model,
             extra, f->dir, name);
    run_or_fail(f, cmd, name);
}

static void data_parallel(void **state)
{
    if (!ready()) skip();
    dist_fixture *f = *state;
    mpi_gpus(f, f->plain, "", "nccl");
    if (!out_has(f, "nccl", "gradients summed by NCCL")) {
        print_message("skipped: this vdnn-mpi was built without NCCL\n");
        skip();
    }
    one_gpu(f, f->plain, "one");
    mpi_gpus(f, f->plain, "--no-nccl", "mpi");
    double d1 = diff(f, "one", "nccl"), d2 = diff(f, "mpi", "nccl");
    print_message("2 GPUs, NCCL sums vs one GPU at 32: %.3g; vs the same ranks through MPI: %.3g\n", d1, d2);
    assert_true(d1 < 2e-4);
    assert_true(d2 < 2e-4);
}

static void pipeline(void **state)
{
    if (!ready()) skip();
    dist_fixture *f = *state;
    mpi_gpus(f, f->plain, "--stages 2 --micro-batches 2", "pipe");
    if (!out_has(f, "pipe", "stage messages by NCCL")) {
        print_message("skipped: this vdnn-mpi was built without NCCL\n");
        skip();
    }
    one_gpu(f, f->plain, "one");
    double d = diff(f, "one", "pipe");
    print_message("2 stages on 2 GPUs by NCCL vs one GPU: %.3g\n", d);
    assert_true(d < 2e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(data_parallel, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(pipeline, dist_setup, dist_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
