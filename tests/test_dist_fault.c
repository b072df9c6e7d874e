/* A rank that dies or stalls mid-training: the other ranks stop with a clear error within a bounded time
 * (never a hang) and the last checkpoint written before the failure stays intact. */
#include <time.h>

#include "test_dist_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1024 synthetic images at batch 64: 16 steps an epoch, a checkpoint after each. The fault hits after
 * step 20, so the file must hold epoch 1 (step 16). */
static void run_fault(const dist_fixture *f, const char *fault, int stages, const char *expect)
{
    char ckpt[1100], err_path[1100];
    snprintf(ckpt, sizeof ckpt, "%s/run.ckpt", f->dir);
    snprintf(err_path, sizeof err_path, "%s/run.err", f->dir);
    unlink(ckpt);
    double t0 = now_s();
    int rc = dist_sh("VDNN_MPI_FAULT=%s " DIST_MPIRUN " --model %s --data synthetic --input 3x16x16 --classes 10 "
                     "--batch 64 --epochs 3 --threads 1 --device cpu --stages %d --comm-timeout 10 --save %s "
                     ">%s/run.out 2>%s",
                     fault, DIST_JOB_LIMIT_S, 2, f->plain, stages, ckpt, f->dir, err_path);
    double dt = now_s() - t0;
    print_message("fault %s, %d stage(s): exit %d after %.1f s\n", fault, stages, rc, dt);
    /* mpirun itself exits 137 when a rank was killed: the elapsed time tells `timeout` apart. */
    if (rc == 0 || dt >= DIST_JOB_LIMIT_S - 1 || !dist_file_has(err_path, expect)) {
        dist_print_file(err_path);
        fail_msg("expected a failure naming \"%s\" before the %d s limit, got exit %d", expect, DIST_JOB_LIMIT_S, rc);
    }
    assert_true(dist_file_has(err_path, "injected fault"));
    /* Bounded: the comm timeout (10 s) plus start-up, far below the job limit. */
    assert_true(dt < 60);
    vdnn_checkpoint ck;
    vdnn_error err;
    memset(&ck, 0, sizeof ck);
    vt_assert_ok(vdnn_checkpoint_read(ckpt, &ck, &err), err);
    assert_int_equal(ck.step, 16);
    assert_int_equal(ck.epoch, 1);
    vdnn_checkpoint_release(&ck);
}

static void killed_rank_ends_the_job(void **state)
{
    if (!dist_available()) skip();
    /* mpirun notices the dead process and ends the others; it names the rank and the signal. */
    run_fault(*state, "1:20:kill", 1, "exited on signal 9");
}

static void stalled_rank_times_out(void **state)
{
    if (!dist_available()) skip();
    /* Rank 0 waits for gradient sums rank 1 never joins: the timeout names the wait, then aborts the job. */
    run_fault(*state, "1:20:hang", 1, "rank 0: timed out after 10 s waiting for the gradient sums of step 20");
}

static void stalled_stage_times_out(void **state)
{
    if (!dist_available()) skip();
    /* Stage 0 waits for the gradient its next stage never sends back. */
    run_fault(*state, "1:20:hang", 2,
              "timed out after 10 s waiting for the gradient of stage 0's output of micro-batch 0 of step 20 from rank 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_rank_ends_the_job, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(stalled_rank_times_out, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(stalled_stage_times_out, dist_setup, dist_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
