/* Synchronized batch norm under mpirun: N data-parallel ranks at B/N equal one rank at B with batch norm
 * (weights and running statistics), also when the plan recomputes a BN layer and across 2 groups x 2
 * stages; without it they do not, which shows the tolerance can fail. */
#include "test_dist_util.h"

#define COMMON                                                                                               \
    "--data synthetic --input 3x32x32 --classes 10 --threads 1 --device cpu --lr 0.05 --log-every 1000 " \
    "--conv-algo lean --batch 32"

/* Batch norm before a convolution (whose backward needs the normalized map, so a planner may recompute it)
 * and before a residual add; no dropout, whose masks differ per group by design. */
static const char bn_model[] = "[net]\nname=bnchain\ninput=3x32x32\nclasses=10\n"
                               "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n[bn1]\ntype=batchnorm\n"
                               "[conv2]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n[bn2]\ntype=batchnorm\n"
                               "[relu2]\ntype=relu\n[conv3]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n"
                               "[bn3]\ntype=batchnorm\n[add]\ntype=add\ninput=relu2,bn3\n[relu3]\ntype=relu\n"
                               "[pool1]\ntype=maxpool\nsize=2\n[conv4]\ntype=conv\nfilters=16\nsize=3\npad=1\n"
                               "[bn4]\ntype=batchnorm\n[relu4]\ntype=relu\n[pool2]\ntype=avgpool\nsize=2\n"
                               "[flatten]\ntype=flatten\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* The plan command for one rank of two (batch 16) with the runs' options; then a policy and a budget. */
#define RANK_PLAN VDNN_BINARY_DIR "/vdnn plan %s --input 3x32x32 --classes 10 --batch 16 --conv-algo lean --threads 1 "

typedef struct sbn_fixture {
    dist_fixture d;
    char model[1024];
} sbn_fixture;

static int sbn_setup(void **state)
{
    sbn_fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    vt_tmpdir(f->d.dir, sizeof f->d.dir);
    vt_write_file(f->d.dir, "bn.cfg", bn_model, strlen(bn_model), f->model, sizeof f->model);
    *state = f;
    return 0;
}

static int sbn_teardown(void **state)
{
    sbn_fixture *f = *state;
    vt_rmdir(f->d.dir);
    free(f);
    return 0;
}

static int steps(void) { return getenv("VDNN_TEST_QUICK") ? 4 : 8; }

static void fail_with(const sbn_fixture *f, const char *name, const char *what, int rc)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.err", f->d.dir, name);
    dist_print_file(path);
    fail_msg("%s (%s) exited with %d", what, name, rc);
}

static void run_one(const sbn_fixture *f, const char *name)
{
    int rc = dist_sh("timeout %d " VDNN_BINARY_DIR "/vdnn train --model %s " COMMON " --steps %d --save %s/%s.ckpt "
                     ">%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, f->model, steps(), f->d.dir, name, f->d.dir, name, f->d.dir, name);
    if (rc) fail_with(f, name, "vdnn train", rc);
}

static void run_mpi(const sbn_fixture *f, int ranks, const char *extra, const char *name)
{
    int rc = dist_sh(DIST_MPIRUN " --model %s " COMMON " --steps %d %s --save %s/%s.ckpt >%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, ranks, f->model, steps(), extra, f->d.dir, name, f->d.dir, name, f->d.dir, name);
    if (rc) fail_with(f, name, "mpirun vdnn-mpi train", rc);
}

static double diff(const sbn_fixture *f, const char *a, const char *b)
{
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", f->d.dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", f->d.dir, b);
    bool bitwise;
    return dist_ckpt_diff(pa, pb, &bitwise);
}

static bool out_has(const sbn_fixture *f, const char *name, const char *needle)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.out", f->d.dir, name);
    return dist_file_has(path, needle);
}

static void data_parallel(void **state, int ranks)
{
    if (!dist_available()) skip();
    sbn_fixture *f = *state;
    char name[32];
    run_one(f, "one");
    /* Synchronized is the default on the CPU backend. */
    snprintf(name, sizeof name, "sync%d", ranks);
    run_mpi(f, ranks, "", name);
    assert_true(out_has(f, name, "batch norm synchronized over the groups"));
    double d = diff(f, "one", name);
    print_message("sync BN, %d ranks at batch %d vs one rank at 32: largest relative difference %.3g\n", ranks,
                  32 / ranks, d);
    assert_true(d < 2e-4);
    snprintf(name, sizeof name, "local%d", ranks);
    run_mpi(f, ranks, "--no-sync-bn", name);
    assert_false(out_has(f, name, "synchronized"));
    double other = diff(f, "one", name);
    print_message("per-group BN, %d ranks vs one rank at 32: %.3g\n", ranks, other);
    assert_true(other > 1e-3);
}

static void two_ranks(void **state) { data_parallel(state, 2); }
static void four_ranks(void **state) { data_parallel(state, 4); }

/* Runs `vdnn plan` on one rank's share with `flags` into plan.out; its exit status (3: does not fit). */
static int rank_plan(const sbn_fixture *f, const char *flags)
{
    return dist_sh(RANK_PLAN "%s >%s/plan.out 2>&1", f->model, flags, f->d.dir);
}

/* In plan.out: the class of tensor `name` (empty if not listed), and the planned peak in bytes (0 if none). */
static void plan_read(const sbn_fixture *f, const char *name, char *cls, size_t cls_size, size_t *peak)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/plan.out", f->d.dir);
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char line[512];
    cls[0] = '\0';
    *peak = 0;
    while (fgets(line, sizeof line, in)) {
        char tensor[64], c[32];
        unsigned long long bytes;
        const char *at = strstr(line, "peak device memory:");
        if (at && (at = strchr(at, '(')) && sscanf(at, "(%llu bytes", &bytes) == 1) *peak = (size_t)bytes;
        if (sscanf(line, "%63s %llu %31s", tensor, &bytes, c) == 3 && !strcmp(tensor, name))
            snprintf(cls, cls_size, "%s", c);
    }
    fclose(in);
}

/* A recomputed BN forward sums its statistics again (every rank runs the same plan): same output, no
 * deadlock, no second update of the running statistics. The budget under which pooch recomputes bn1 depends
 * on the convolutions' workspaces (oneDNN's blocked layouts differ between AVX-512 and AVX2), so it is searched
 * for: the largest of 98%, 96%, ... 50% of the in-core peak at which the plan fits and recomputes bn1. */
static void recompute(void **state)
{
    if (!dist_available()) skip();
    sbn_fixture *f = *state;
    char cls[32], flags[96];
    size_t incore = 0, peak = 0, budget = 0;
    int rc = rank_plan(f, "--policy none");
    if (rc) fail_with(f, "plan", "vdnn plan", rc);
    plan_read(f, "bn1", cls, sizeof cls, &incore);
    assert_true(incore > 0);
    for (int pct = 98; pct >= 50 && !budget; pct -= 2) {
        snprintf(flags, sizeof flags, "--policy pooch --budget %zu", incore / 100 * (size_t)pct);
        rc = rank_plan(f, flags);
        if (rc != 0 && rc != 3) fail_with(f, "plan", "vdnn plan", rc);
        plan_read(f, "bn1", cls, sizeof cls, &peak);
        if (rc == 0 && !strcmp(cls, "recompute")) budget = incore / 100 * (size_t)pct;
    }
    if (!budget) {
        char path[1100];
        snprintf(path, sizeof path, "%s/plan.out", f->d.dir);
        dist_print_file(path);
        fail_msg("pooch recomputes bn1 at no budget from 98%% to 50%% of the in-core peak %zu", incore);
    }
    print_message("pooch recomputes bn1 at %zu bytes (in-core peak %zu, planned peak %zu)\n", budget, incore, peak);
    run_one(f, "one");
    run_mpi(f, 2, flags, "rc2");
    double d = diff(f, "one", "rc2");
    print_message("sync BN, 2 ranks recomputing bn1 vs one rank: largest relative difference %.3g\n", d);
    assert_true(d < 2e-4);
}

/* 2 groups x 2 stages: each stage's BN layers sum over the ranks holding that stage. */
static void hybrid(void **state)
{
    if (!dist_available()) skip();
    sbn_fixture *f = *state;
    run_one(f, "one");
    run_mpi(f, 4, "--stages 2 --balance", "hybrid");
    double d = diff(f, "one", "hybrid");
    print_message("sync BN, 2 groups x 2 stages vs one rank: largest relative difference %.3g\n", d);
    assert_true(d < 2e-4);
}

static void conflicting_flags(void **state)
{
    if (!dist_available()) skip();
    sbn_fixture *f = *state;
    int rc = dist_sh(DIST_MPIRUN " --model %s " COMMON " --steps 1 --sync-bn --no-sync-bn >%s/bad.out 2>%s/bad.err",
                     DIST_JOB_LIMIT_S, 2, f->model, f->d.dir, f->d.dir);
    assert_int_equal(rc, 2);
    char path[1100];
    snprintf(path, sizeof path, "%s/bad.err", f->d.dir);
    assert_true(dist_file_has(path, "--sync-bn and --no-sync-bn"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(two_ranks, sbn_setup, sbn_teardown),
        cmocka_unit_test_setup_teardown(four_ranks, sbn_setup, sbn_teardown),
        cmocka_unit_test_setup_teardown(recompute, sbn_setup, sbn_teardown),
        cmocka_unit_test_setup_teardown(hybrid, sbn_setup, sbn_teardown),
        cmocka_unit_test_setup_teardown(conflicting_flags, sbn_setup, sbn_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
