/* GPipe micro-batches under mpirun: 2 stages with 4 micro-batches equal one device summing gradients over the
 * same 4 micro-batches bit for bit (batch norm, dropout, a residual; under swapping with poison too); 2 groups
 * x 2 stages with micro-batches equal one device at the whole batch within float tolerance (no batch norm);
 * a resumed pipeline continues exactly; a budget too small for the held micro-batches fails before the
 * first step, saying so. */
#include "test_dist_util.h"

#define COMMON "--data synthetic --input 3x16x16 --classes 10 --threads 1 --device cpu --lr 0.05 --log-every 1000 --batch 32"

static int steps(void) { return getenv("VDNN_TEST_QUICK") ? 4 : 8; }

static void fail_with(const dist_fixture *f, const char *name, const char *what, int rc)
{
    char err[1100];
    snprintf(err, sizeof err, "%s/%s.err", f->dir, name);
    dist_print_file(err);
    fail_msg("%s (%s) exited with %d", what, name, rc);
}

/* One device for n steps; extra flags such as --micro-batches. */
static void run_one_n(const dist_fixture *f, const char *model, int n, const char *extra, const char *name)
{
    int rc = dist_sh("timeout %d " VDNN_BINARY_DIR "/vdnn train --model %s " COMMON " --steps %d %s --save %s/%s.ckpt "
                     ">%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, model, n, extra, f->dir, name, f->dir, name, f->dir, name);
    if (rc) fail_with(f, name, "vdnn train", rc);
}

static void run_one(const dist_fixture *f, const char *model, const char *extra, const char *name)
{
    run_one_n(f, model, steps(), extra, name);
}

static int run_mpi_n_rc(const dist_fixture *f, int ranks, const char *model, int n, const char *extra, const char *name)
{
    return dist_sh(DIST_MPIRUN " --model %s " COMMON " --steps %d %s --save %s/%s.ckpt >%s/%s.out 2>%s/%s.err",
                   DIST_JOB_LIMIT_S, ranks, model, n, extra, f->dir, name, f->dir, name, f->dir, name);
}

static int run_mpi_rc(const dist_fixture *f, int ranks, const char *model, const char *extra, const char *name)
{
    return run_mpi_n_rc(f, ranks, model, steps(), extra, name);
}

static void run_mpi(const dist_fixture *f, int ranks, const char *model, const char *extra, const char *name)
{
    int rc = run_mpi_rc(f, ranks, model, extra, name);
    if (rc) fail_with(f, name, "mpirun vdnn-mpi train", rc);
}

static double diff(const dist_fixture *f, const char *a, const char *b, bool *bitwise)
{
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", f->dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", f->dir, b);
    return dist_ckpt_diff(pa, pb, bitwise);
}

static void gpipe_equals_accumulation(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    run_one(f, f->mixed, "--micro-batches 4", "one_mb4");
    run_mpi(f, 2, f->mixed, "--stages 2 --micro-batches 4", "mp2_mb4");
    char out[1100];
    snprintf(out, sizeof out, "%s/mp2_mb4.out", f->dir);
    assert_true(dist_file_has(out, "(32 per group in 4 micro-batches of 8)"));
    bool bitwise;
    double d = diff(f, "one_mb4", "mp2_mb4", &bitwise);
    print_message("2 stages x 4 micro-batches (GPipe) vs one device summing 4 micro-batches: largest relative "
                  "difference %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* Swapped activations come back from each micro-batch's own host copy; poison shows a wrong read. */
    run_mpi(f, 2, f->mixed, "--stages 2 --micro-batches 4 --policy all --poison", "mp2_mb4_all");
    d = diff(f, "one_mb4", "mp2_mb4_all", &bitwise);
    print_message("the same under --policy all --poison: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* Batch norm over micro-batches: that is not the whole batch's training (so the equality above says
     * something about micro-batches). */
    run_one(f, f->mixed, "", "one");
    d = diff(f, "one", "mp2_mb4", &bitwise);
    print_message("4 micro-batches vs the whole batch with batch norm: %.3g\n", d);
    assert_true(d > 1e-3);
}

static void resume_with_micro_batches(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    const int n = steps();
    /* A constant rate: a schedule would depend on each run's own step count. */
    run_one_n(f, f->mixed, 2 * n, "--micro-batches 4 --lr-schedule constant", "long");
    int rc = run_mpi_n_rc(f, 2, f->mixed, n, "--stages 2 --micro-batches 4 --lr-schedule constant", "half");
    if (rc) fail_with(f, "half", "mpirun vdnn-mpi train", rc);
    char extra[1200];
    snprintf(extra, sizeof extra, "--stages 2 --micro-batches 4 --lr-schedule constant --resume %s/half.ckpt", f->dir);
    rc = run_mpi_n_rc(f, 2, f->mixed, 2 * n, extra, "resumed");
    if (rc) fail_with(f, "resumed", "mpirun vdnn-mpi train", rc);
    bool bitwise;
    double d = diff(f, "long", "resumed", &bitwise);
    print_message("2 stages x 4 micro-batches, stopped and resumed, vs one device: %.3g%s\n", d,
                  bitwise ? " (bitwise equal)" : "");
    /* Dropout masks are numbered by step and micro-batch: a resumed run draws the same ones. */
    assert_true(bitwise);
}

static void hybrid_micro_batches(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    run_one(f, f->plain, "", "plain_one");
    run_mpi(f, 4, f->plain, "--stages 2 --micro-batches 4", "hybrid_mb4");
    bool bitwise;
    double d = diff(f, "plain_one", "hybrid_mb4", &bitwise);
    print_message("2 groups x 2 stages x 4 micro-batches of 4 vs one device at 32 (no batch norm): largest relative "
                  "difference %.3g\n", d);
    assert_true(d < 2e-4);
    /* Data parallelism alone sums each rank's micro-batches one after another. */
    run_mpi(f, 2, f->plain, "--micro-batches 2", "dp_mb2");
    d = diff(f, "plain_one", "dp_mb2", &bitwise);
    print_message("2 ranks x 2 micro-batches of 8 vs one device at 32: largest relative difference %.3g\n", d);
    assert_true(d < 2e-4);
}

static void budget_too_small(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    int rc = run_mpi_rc(f, 2, f->mixed, "--stages 2 --micro-batches 4 --budget 1MiB", "small");
    char out[1100], err[1100];
    snprintf(out, sizeof out, "%s/small.out", f->dir);
    snprintf(err, sizeof err, "%s/small.err", f->dir);
    print_message("exit %d\n", rc);
    dist_print_file(err);
    assert_true(rc != 0 && rc < 124);
    assert_true(dist_file_has(err, "memory budget too small"));
    assert_true(dist_file_has(err, "at batch 32 in 4 micro-batches of 8, all held between their forward and backward "
                                   "passes"));
    assert_true(dist_file_has(err, "the smallest budget that works is"));
    /* Before the first step. */
    assert_false(dist_file_has(out, "step "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gpipe_equals_accumulation, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(resume_with_micro_batches, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(hybrid_micro_batches, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(budget_too_small, dist_setup, dist_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
