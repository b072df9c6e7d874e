/* Distributed training equals one device: data parallelism on 2 and 4 ranks at batch B/N per rank against
 * one rank at B (float-summation tolerance), a 2-stage pipeline bit for bit (batch norm, dropout and a
 * residual included), 2 groups x 2 stages within tolerance, checkpoints that resume exactly, and gradient clipping
 * (its norm summed across stages: a clipped pipeline bit for bit). */
#include "test_dist_util.h"

#define COMMON "--data synthetic --input 3x16x16 --classes 10 --threads 1 --device cpu --lr 0.05 --log-every 1000"

static int steps(void) { return getenv("VDNN_TEST_QUICK") ? 4 : 8; }

/* One device: the reference. */
static void run_one_ex(const dist_fixture *f, const char *model, int batch, int n_steps, const char *extra, const char *name)
{
    int rc = dist_sh("timeout %d " VDNN_BINARY_DIR "/vdnn train --model %s " COMMON " --batch %d --steps %d %s "
                     "--save %s/%s.ckpt >%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, model, batch, n_steps, extra, f->dir, name, f->dir, name, f->dir, name);
    if (rc) {
        char err[1100];
        snprintf(err, sizeof err, "%s/%s.err", f->dir, name);
        dist_print_file(err);
        fail_msg("vdnn train (%s) exited with %d", name, rc);
    }
}

static void run_one_at(const dist_fixture *f, const char *model, int batch, int n_steps, const char *name)
{
    run_one_ex(f, model, batch, n_steps, "", name);
}

static void run_one(const dist_fixture *f, const char *model, int n_steps, const char *name)
{
    run_one_at(f, model, 32, n_steps, name);
}

static void run_mpi(const dist_fixture *f, int ranks, const char *model, const char *extra, const char *name)
{
    int rc = dist_sh(DIST_MPIRUN " --model %s " COMMON " --batch 32 %s --save %s/%s.ckpt >%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, ranks, model, extra, f->dir, name, f->dir, name, f->dir, name);
    if (rc) {
        char err[1100];
        snprintf(err, sizeof err, "%s/%s.err", f->dir, name);
        dist_print_file(err);
        fail_msg("mpirun -np %d vdnn-mpi train %s (%s) exited with %d", ranks, extra, name, rc);
    }
}

static double diff(const dist_fixture *f, const char *a, const char *b, bool *bitwise)
{
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", f->dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", f->dir, b);
    return dist_ckpt_diff(pa, pb, bitwise);
}

static void data_parallel(void **state, int ranks)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    char extra[64], name[32];
    snprintf(extra, sizeof extra, "--steps %d", steps());
    snprintf(name, sizeof name, "dp%d", ranks);
    run_one(f, f->plain, steps(), "one");
    run_mpi(f, ranks, f->plain, extra, name);
    bool bitwise;
    double d = diff(f, "one", name, &bitwise);
    print_message("data parallel, %d ranks at batch %d each vs one rank at 32: largest relative difference %.3g%s\n",
                  ranks, 32 / ranks, d, bitwise ? " (bitwise equal)" : "");
    assert_true(d < 2e-4);
    /* The tolerance tells batches apart: a rank that trained on its own share alone would fail it. */
    run_one_at(f, f->plain, 32 / ranks, steps(), "share");
    double other = diff(f, "one", "share", &bitwise);
    print_message("one rank at batch %d vs at 32: %.3g\n", 32 / ranks, other);
    assert_true(other > 1e-3);
}

static void dp_two_ranks(void **state) { data_parallel(state, 2); }
static void dp_four_ranks(void **state) { data_parallel(state, 4); }

static void pipeline_is_bitwise(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    char extra[128];
    run_one(f, f->mixed, steps(), "mixed_one");
    /* The placement in the model file (stage=1 at conv3). */
    snprintf(extra, sizeof extra, "--steps %d --stages 2", steps());
    run_mpi(f, 2, f->mixed, extra, "mp2");
    char out[1100];
    snprintf(out, sizeof out, "%s/mp2.out", f->dir);
    assert_true(dist_file_has(out, "stages conv1..pool1 | conv3..loss"));
    bool bitwise;
    double d = diff(f, "mixed_one", "mp2", &bitwise);
    print_message("2 stages vs one device: largest relative difference %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* A split computed from costs (over the cuts where one tensor crosses) trains the same way. */
    snprintf(extra, sizeof extra, "--steps %d --stages 2 --balance", steps());
    run_mpi(f, 2, f->mixed, extra, "mp2b");
    d = diff(f, "mixed_one", "mp2b", &bitwise);
    print_message("2 balanced stages vs one device: largest relative difference %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* Stopped and resumed, the pipeline still draws the one-device run's dropout masks. */
    run_one_ex(f, f->mixed, 32, 2 * steps(), "--lr-schedule constant", "mixed_long");
    snprintf(extra, sizeof extra, "--lr-schedule constant --steps %d --stages 2", steps());
    run_mpi(f, 2, f->mixed, extra, "mp2_half");
    char resume[1300];
    snprintf(resume, sizeof resume, "--lr-schedule constant --steps %d --stages 2 --resume %s/mp2_half.ckpt", 2 * steps(),
             f->dir);
    run_mpi(f, 2, f->mixed, resume, "mp2_resumed");
    d = diff(f, "mixed_long", "mp2_resumed", &bitwise);
    print_message("2 stages, stopped and resumed, vs one device: largest relative difference %.3g%s\n", d,
                  bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
}

static void hybrid_two_by_two(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    char extra[128];
    run_one(f, f->plain, steps(), "one");
    snprintf(extra, sizeof extra, "--steps %d --stages 2", steps());
    run_mpi(f, 4, f->plain, extra, "hybrid");
    bool bitwise;
    double d = diff(f, "one", "hybrid", &bitwise);
    print_message("2 groups x 2 stages at batch 16 per group vs one device at 32: largest relative difference %.3g\n", d);
    assert_true(d < 2e-4);
}

/* Gradient clipping by global norm: 2 stages sum their squared gradient sums in the one device's layer order, so a
 * clipped pipeline is bitwise the one device (SGD, AdamW, and GPipe micro-batches against one device summing the same
 * micro-batches); data parallelism (2 ranks) and 2 groups x 2 stages clip the averaged gradients, equal to one device
 * within the unclipped tests' tolerance. The clip acts: unclipped training differs. */
static void clipped_equals_one_device(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    char extra[192], one[128];
    bool bitwise;
    const char *opts[2] = {"--clip-grad-norm 0.05", "--clip-grad-norm 0.05 --optimizer adamw --lr 0.002"};
    for (int k = 0; k < 2; k++) {
        run_one_ex(f, f->mixed, 32, steps(), opts[k], "clip_one");
        snprintf(extra, sizeof extra, "--steps %d --stages 2 %s", steps(), opts[k]);
        run_mpi(f, 2, f->mixed, extra, "clip_mp2");
        double d = diff(f, "clip_one", "clip_mp2", &bitwise);
        print_message("clipped (%s), 2 stages vs one device: largest relative difference %.3g%s\n", opts[k], d,
                      bitwise ? " (bitwise equal)" : "");
        assert_true(bitwise);
        if (k) continue;
        run_one(f, f->mixed, steps(), "unclipped_one");
        d = diff(f, "clip_one", "unclipped_one", &bitwise);
        print_message("clipped vs unclipped, one device: %.3g\n", d);
        assert_true(d > 1e-3);
    }
    double d;
    /* GPipe: 4 micro-batches through 2 stages, against one device summing the same 4. */
    run_one_ex(f, f->mixed, 32, steps(), "--clip-grad-norm 0.05 --micro-batches 4", "clip_one_mb4");
    snprintf(extra, sizeof extra, "--steps %d --stages 2 --micro-batches 4 --clip-grad-norm 0.05", steps());
    run_mpi(f, 2, f->mixed, extra, "clip_mp2_mb4");
    d = diff(f, "clip_one_mb4", "clip_mp2_mb4", &bitwise);
    print_message("clipped, 2 stages x 4 micro-batches vs one device summing 4: %.3g%s\n", d,
                  bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* Data parallelism: the norm of the averaged gradients. */
    snprintf(one, sizeof one, "--clip-grad-norm 0.05");
    run_one_ex(f, f->plain, 32, steps(), one, "clip_plain_one");
    snprintf(extra, sizeof extra, "--steps %d --clip-grad-norm 0.05", steps());
    run_mpi(f, 2, f->plain, extra, "clip_dp2");
    d = diff(f, "clip_plain_one", "clip_dp2", &bitwise);
    print_message("clipped, data parallel on 2 ranks vs one device: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(d < 2e-4);
    snprintf(extra, sizeof extra, "--steps %d --stages 2 --clip-grad-norm 0.05", steps());
    run_mpi(f, 4, f->plain, extra, "clip_hybrid");
    d = diff(f, "clip_plain_one", "clip_hybrid", &bitwise);
    print_message("clipped, 2 groups x 2 stages vs one device: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(d < 2e-4);
    run_one(f, f->plain, steps(), "plain_unclipped");
    d = diff(f, "clip_plain_one", "plain_unclipped", &bitwise);
    print_message("clipped vs unclipped (plain), one device: %.3g\n", d);
    assert_true(d > 1e-3);
}

static void resume_continues_exactly(void **state)
{
    if (!dist_available()) skip();
    dist_fixture *f = *state;
    char extra[1200];
    const int n = steps();
    /* A constant rate: a schedule would depend on each run's own step count. */
    snprintf(extra, sizeof extra, "--lr-schedule constant --steps %d", 2 * n);
    run_mpi(f, 2, f->plain, extra, "whole");
    snprintf(extra, sizeof extra, "--lr-schedule constant --steps %d --stages 2", n);
    run_mpi(f, 4, f->plain, extra, "half");
    /* A hybrid run's checkpoint is one file in the one-device format: data parallelism resumes it. */
    snprintf(extra, sizeof extra, "--lr-schedule constant --steps %d --resume %s/half.ckpt", 2 * n, f->dir);
    run_mpi(f, 2, f->plain, extra, "resumed");
    bool bitwise;
    double d = diff(f, "whole", "resumed", &bitwise);
    print_message("2 ranks for %d steps vs 2x2 hybrid for %d then 2 ranks: largest relative difference %.3g\n", 2 * n, n, d);
    assert_true(d < 2e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dp_two_ranks, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(dp_four_ranks, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(pipeline_is_bitwise, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(hybrid_two_by_two, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(resume_continues_exactly, dist_setup, dist_teardown),
        cmocka_unit_test_setup_teardown(clipped_equals_one_device, dist_setup, dist_teardown),
    };
    if (getenv("VDNN_TEST_FILTER")) cmocka_set_test_filter(getenv("VDNN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
