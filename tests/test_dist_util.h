/* Helpers for the tests that run vdnn-mpi under mpirun: finding the tools, running a job with a time
 * limit, small models, and comparing checkpoints. */
#ifndef VDNN_TEST_DIST_UTIL_H
#define VDNN_TEST_DIST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "train/checkpoint.h"

#ifndef VDNN_BINARY_DIR
#define VDNN_BINARY_DIR "build"
#endif

/* A job may take this long before `timeout` ends it: a hang fails the test instead of stalling CI. */
#define DIST_JOB_LIMIT_S 120

/* Runs a shell command; returns its exit status (128 + signal when killed). */
VDNN_PRINTF(1, 2)
static inline int dist_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st == -1) fail_msg("cannot run: %s", cmd);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Whether mpirun and vdnn-mpi are there; prints why not (the test is then skipped). */
static inline bool dist_available(void)
{
    if (access(VDNN_BINARY_DIR "/vdnn-mpi", X_OK) != 0) {
        print_message("skipped: %s/vdnn-mpi was not built (no MPI found at configure time)\n", VDNN_BINARY_DIR);
        return false;
    }
    if (dist_sh("command -v mpirun >/dev/null 2>&1") != 0) {
        print_message("skipped: mpirun is not installed\n");
        return false;
    }
    return true;
}

/* mpirun with N ranks, as CI runs it (root allowed, more ranks than cores allowed); stdout and stderr go
 * to files. Under ASan, leak checks are off for the ranks: Open MPI's plugins leave allocations that
 * LeakSanitizer cannot attribute (their modules are unloaded at exit); memory errors still fail. */
#define DIST_MPIRUN                                                                                        \
    "OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" "         \
    "timeout -k 5 %d mpirun --allow-run-as-root --oversubscribe -np %d " VDNN_BINARY_DIR "/vdnn-mpi train"

/* Whether file contains needle. */
static inline bool dist_file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    const size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!buf) fail_msg("out of memory");
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    bool found = strstr(buf, needle) != NULL;
    free(buf);
    return found;
}

static inline void dist_print_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) print_message("  | %s", line);
    fclose(f);
}

/* Largest |a - b| / max(1, |a|) over every tensor; fails if the names, counts or steps differ. */
static inline double dist_ckpt_diff(const char *pa, const char *pb, bool *bitwise)
{
    vdnn_checkpoint a, b;
    vdnn_error err;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    vt_assert_ok(vdnn_checkpoint_read(pa, &a, &err), err);
    vt_assert_ok(vdnn_checkpoint_read(pb, &b, &err), err);
    if (a.step != b.step || a.model_hash != b.model_hash || a.n_tensors != b.n_tensors)
        fail_msg("%s (step %lld, %d tensors) and %s (step %lld, %d tensors) differ in kind", pa, (long long)a.step,
                 a.n_tensors, pb, (long long)b.step, b.n_tensors);
    double worst = 0;
    *bitwise = true;
    for (int i = 0; i < a.n_tensors; i++) {
        const vdnn_ckpt_tensor *t = &a.tensors[i];
        const vdnn_ckpt_tensor *u = vdnn_checkpoint_find(&b, t->name);
        if (!u || u->count != t->count) fail_msg("%s: tensor '%s' is missing or of another size in %s", pa, t->name, pb);
        if (t->count && memcmp(t->data, u->data, t->count * sizeof(float))) *bitwise = false;
        for (size_t k = 0; k < t->count; k++) {
            double x = t->data[k], y = u->data[k];
            double d = fabs(x - y) / (fabs(x) > 1 ? fabs(x) : 1);
            if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        }
    }
    vdnn_checkpoint_release(&a);
    vdnn_checkpoint_release(&b);
    return worst;
}

/* A small CNN without batch norm or dropout: data parallelism at B/N per rank equals one rank at B. */
static const char dist_plain_model[] = "[net]\nname=plain\ninput=3x16x16\nclasses=10\n"
                                       "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\n[relu1]\ntype=relu\n"
                                       "[pool1]\ntype=maxpool\nsize=2\n"
                                       "[conv2]\ntype=conv\nfilters=16\nsize=3\npad=1\n[relu2]\ntype=relu\n"
                                       "[pool2]\ntype=maxpool\nsize=2\n[flatten]\ntype=flatten\n"
                                       "[fc1]\ntype=fc\noutputs=32\n[relu3]\ntype=relu\n"
                                       "[fc2]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* Batch norm, a residual add and dropout; stage=1 starts the second stage at conv3. */
static const char dist_mixed_model[] = "[net]\nname=mixed\ninput=3x16x16\nclasses=10\n"
                                       "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n[bn1]\ntype=batchnorm\n"
                                       "[relu1]\ntype=relu\n[conv2]\ntype=conv\nfilters=8\nsize=3\npad=1\n"
                                       "[bn2]\ntype=batchnorm\n[add]\ntype=add\ninput=relu1,bn2\n[relu2]\ntype=relu\n"
                                       "[pool1]\ntype=maxpool\nsize=2\n"
                                       "[conv3]\ntype=conv\nfilters=16\nsize=3\npad=1\nstage=1\n[relu3]\ntype=relu\n"
                                       "[pool2]\ntype=avgpool\nsize=2\n[flatten]\ntype=flatten\n"
                                       "[drop]\ntype=dropout\np=0.3\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* A scratch directory holding both models as files. */
typedef struct dist_fixture {
    char dir[512];
    char plain[1024], mixed[1024];
} dist_fixture;

static inline int dist_setup(void **state)
{
    dist_fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    vt_tmpdir(f->dir, sizeof f->dir);
    vt_write_file(f->dir, "plain.cfg", dist_plain_model, strlen(dist_plain_model), f->plain, sizeof f->plain);
    vt_write_file(f->dir, "mixed.cfg", dist_mixed_model, strlen(dist_mixed_model), f->mixed, sizeof f->mixed);
    *state = f;
    return 0;
}

static inline int dist_teardown(void **state)
{
    dist_fixture *f = *state;
    vt_rmdir(f->dir);
    free(f);
    return 0;
}

#endif
