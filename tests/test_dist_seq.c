/* Sequence models under mpirun: data parallelism gives each group its samples' labels (one per token) and
 * evaluates on its share like one device; a GPT pipeline (the embedding's vocabulary in a stage graph) equals one
 * device bit for bit; a tied table whose embedding and output projection lie in different stages (the reader's
 * copy, its gradient part sent every micro-batch, the table sent back after the update) equals one device bit for
 * bit with micro-batches, AdamW, clipping, swapping under poison, three stages and a resume, and within float
 * tolerance in 2 groups x 2 stages. */
#include "test_dist_util.h"

#define UNTIED VDNN_SOURCE_DIR "/tests/reference/gpt-tiny.cfg"
#define TIED VDNN_SOURCE_DIR "/tests/reference/gpt-tiny-tied.cfg"
/* A constant rate: a schedule would depend on each run's own step count (the resume). */
#define COMMON "--batch 4 --threads 1 --device cpu --lr 0.01 --lr-schedule constant --log-every 1000"
#define ADAMW "--optimizer adamw --clip-grad-norm 0.5"

static int steps(void) { return getenv("VDNN_TEST_QUICK") ? 3 : 5; }

typedef struct seq_fixture {
    dist_fixture base;
    char text[1100];
} seq_fixture;

static int seq_setup(void **state)
{
    seq_fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    vt_tmpdir(f->base.dir, sizeof f->base.dir);
    char body[4096] = "";
    for (int i = 0; i < 40; i++) strcat(body, "the quick brown fox jumps over the lazy dog. ");
    vt_write_file(f->base.dir, "text.txt", body, strlen(body), f->text, sizeof f->text);
    *state = f;
    return 0;
}

static int seq_teardown(void **state)
{
    seq_fixture *f = *state;
    vt_rmdir(f->base.dir);
    free(f);
    return 0;
}

static void fail_with(const seq_fixture *f, const char *name, const char *what, int rc)
{
    char err[1200];
    snprintf(err, sizeof err, "%s/%s.err", f->base.dir, name);
    dist_print_file(err);
    fail_msg("%s (%s) exited with %d", what, name, rc);
}

static void run_one(const seq_fixture *f, const char *model, int n, const char *extra, const char *name)
{
    int rc = dist_sh("timeout %d " VDNN_BINARY_DIR "/vdnn train --model %s --data text:%s " COMMON " --steps %d %s "
                     "--save %s/%s.ckpt >%s/%s.out 2>%s/%s.err",
                     DIST_JOB_LIMIT_S, model, f->text, n, extra, f->base.dir, name, f->base.dir, name, f->base.dir,
                     name);
    if (rc) fail_with(f, name, "vdnn train", rc);
}

static void run_mpi(const seq_fixture *f, int ranks, const char *model, int n, const char *extra, const char *name)
{
    int rc = dist_sh(DIST_MPIRUN " --model %s --data text:%s " COMMON " --steps %d %s --save %s/%s.ckpt >%s/%s.out "
                     "2>%s/%s.err",
                     DIST_JOB_LIMIT_S, ranks, model, f->text, n, extra, f->base.dir, name, f->base.dir, name,
                     f->base.dir, name);
    if (rc) fail_with(f, name, "mpirun vdnn-mpi train", rc);
}

static double diff(const seq_fixture *f, const char *a, const char *b, bool *bitwise)
{
    char pa[1200], pb[1200];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", f->base.dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", f->base.dir, b);
    return dist_ckpt_diff(pa, pb, bitwise);
}

/* The "validation loss: ..." line a run printed, into line. */
static void validation_line(const seq_fixture *f, const char *name, char *line, size_t n)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.out", f->base.dir, name);
    FILE *fp = fopen(path, "r");
    if (!fp) fail_msg("%s: cannot open", path);
    line[0] = '\0';
    char buf[512];
    while (fgets(buf, sizeof buf, fp))
        if (!strncmp(buf, "validation loss: ", 17)) snprintf(line, n, "%s", buf);
    fclose(fp);
    if (!line[0]) fail_msg("%s: no validation loss line", path);
}

static void data_parallel_labels(void **state)
{
    if (!dist_available()) skip();
    seq_fixture *f = *state;
    run_one(f, UNTIED, steps(), "", "one");
    run_mpi(f, 2, UNTIED, steps(), "", "dp2");
    bool bitwise;
    double d = diff(f, "one", "dp2", &bitwise);
    print_message("gpt-tiny, 2 data-parallel ranks at 2 sequences vs one device at 4: largest relative difference "
                  "%.3g\n", d);
    /* Group 1 reading group 0's labels (a label per sample, not per token) moved it by 1e-2 and more. */
    assert_true(d < 2e-4);
    char a[512], b[512];
    validation_line(f, "one", a, sizeof a);
    validation_line(f, "dp2", b, sizeof b);
    print_message("one device: %s2 ranks:     %s", a, b);
    assert_string_equal(a, b);
}

static void pipeline_bitwise(void **state)
{
    if (!dist_available()) skip();
    seq_fixture *f = *state;
    run_one(f, UNTIED, steps(), "--micro-batches 2", "one_mb2");
    run_mpi(f, 2, UNTIED, steps(), "--stages 2 --micro-batches 2", "mp2_mb2");
    bool bitwise;
    double d = diff(f, "one_mb2", "mp2_mb2", &bitwise);
    print_message("gpt-tiny, 2 stages x 2 micro-batches vs one device: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
}

static void tied_table_across_stages(void **state)
{
    if (!dist_available()) skip();
    seq_fixture *f = *state;
    run_one(f, TIED, steps(), "--micro-batches 2 " ADAMW, "one_mb2");
    run_mpi(f, 2, TIED, steps(), "--stages 2 --micro-batches 2 " ADAMW, "mp2");
    char out[1200];
    snprintf(out, sizeof out, "%s/mp2.out", f->base.dir);
    /* The embedding in the first stage, the tied projection in the second. */
    assert_true(dist_file_has(out, "stages wte.."));
    assert_true(dist_file_has(out, "..loss"));
    bool bitwise;
    double d = diff(f, "one_mb2", "mp2", &bitwise);
    print_message("tied gpt-tiny, 2 stages x 2 micro-batches, AdamW, clipped, vs one device: %.3g%s\n", d,
                  bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* The copy's values come back from the owner, and its swapped maps from each micro-batch's own host copy. */
    run_mpi(f, 2, TIED, steps(), "--stages 2 --micro-batches 2 --policy all --poison " ADAMW, "mp2_all");
    d = diff(f, "one_mb2", "mp2_all", &bitwise);
    print_message("the same under --policy all --poison: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* A stage in between holds neither. */
    run_mpi(f, 3, TIED, steps(), "--stages 3 --micro-batches 2 " ADAMW, "mp3");
    d = diff(f, "one_mb2", "mp3", &bitwise);
    print_message("3 stages: %.3g%s\n", d, bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
}

static void tied_table_resume_and_hybrid(void **state)
{
    if (!dist_available()) skip();
    seq_fixture *f = *state;
    const int n = steps();
    run_one(f, TIED, 2 * n, "--micro-batches 2 " ADAMW, "long");
    run_mpi(f, 2, TIED, n, "--stages 2 --micro-batches 2 " ADAMW, "half");
    char extra[1400];
    snprintf(extra, sizeof extra, "--stages 2 --micro-batches 2 " ADAMW " --resume %s/half.ckpt", f->base.dir);
    run_mpi(f, 2, TIED, 2 * n, extra, "resumed");
    bool bitwise;
    double d = diff(f, "long", "resumed", &bitwise);
    print_message("tied gpt-tiny, 2 stages, stopped and resumed, vs one device: %.3g%s\n", d,
                  bitwise ? " (bitwise equal)" : "");
    assert_true(bitwise);
    /* SGD: AdamW divides by the root of tiny second moments, which magnifies the order of a sum's rounding. */
    run_one(f, TIED, n, "--clip-grad-norm 0.5", "one");
    run_mpi(f, 4, TIED, n, "--stages 2 --clip-grad-norm 0.5", "hybrid");
    d = diff(f, "one", "hybrid", &bitwise);
    print_message("2 groups x 2 stages (SGD, clipped) vs one device: largest relative difference %.3g\n", d);
    assert_true(d < 2e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(data_parallel_labels, seq_setup, seq_teardown),
        cmocka_unit_test_setup_teardown(pipeline_bitwise, seq_setup, seq_teardown),
        cmocka_unit_test_setup_teardown(tied_table_across_stages, seq_setup, seq_teardown),
        cmocka_unit_test_setup_teardown(tied_table_resume_and_hybrid, seq_setup, seq_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
