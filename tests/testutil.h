/* Shared helpers for the cmocka tests: temporary directories, seeded random data, error assertions. */
#ifndef VDNN_TESTUTIL_H
#define VDNN_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/error.h"
#include "exec/net.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "plan/profile.h"
#include "train/checkpoint.h"
#include "train/data.h"

/* Creates a fresh directory under $TMPDIR (or /tmp) and writes its path into buf. */
void vt_tmpdir(char *buf, size_t len);
/* Removes a directory made by vt_tmpdir and the files in it. */
void vt_rmdir(const char *dir);
/* Writes `len` bytes to dir/name, returns the full path in out. */
/* cmocka group fixtures: *state is a 2-thread CPU backend. */
int vt_cpu_backend_setup(void **state);
int vt_cpu_backend_teardown(void **state);
/* The whole file, NUL-terminated (the test fails if it cannot be read); *len (may be NULL) its size. Free it. */
char *vt_read_file(const char *path, size_t *len);
void vt_write_file(const char *dir, const char *name, const void *data, size_t len, char *out, size_t outlen);
/* Uniform floats in [lo, hi) from a seeded generator. */
void vt_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);

/* Loads models/NAME.cfg from the source tree (the zoo), failing the test if it does not load. */
vdnn_graph_t *vt_load_zoo(const char *name);

/* Fails the test unless both checkpoints hold the same tensors (names, sizes) with the same bits, naming the
 * first element that differs; `what` heads the message. */
/* The maps' type the zoo tests train in: VDNN_TEST_PRECISION=fp32 (or unset) | bf16 | fp16, so that CTest runs
 * one test program once per precision. A type this machine's CPU backend does not run ends the program with
 * exit code 77 (CTest: skipped) after saying why; an unknown name fails. */
vdnn_dtype vt_test_precision(void);

void vt_assert_same_checkpoint(const char *what, const vdnn_checkpoint *want, const vdnn_checkpoint *got);

/* n training steps of net at lr on ds's batches first .. first + n - 1 (batch samples each, in order), every loss
 * finite (`what` heads the failure); loss[i] (loss may be NULL) takes step first + i's. */
void vt_train_batches(vdnn_net_t *net, const vdnn_dataset_t *ds, int batch, int first, int n, float lr, float *loss,
                      const char *what);

/* A zoo sequence model trained a few steps on a generated text file under each policy (test_lstm_policies,
 * test_seq_policies): the file, the model, a one-thread CPU backend and a profile estimated for a fixed machine, so
 * that every machine plans alike. */
#define VT_TEXT_MAX_STEPS 8
typedef struct vt_text_env {
    vdnn_graph_t *g;      /* resolved at batch x seq tokens, 256 classes (bytes) */
    vdnn_backend_t *be;
    vdnn_dataset_t *ds;   /* the file's training split, at least batch * steps sequences */
    vdnn_profile prof;
    vdnn_op_info *info;   /* the backend's ops for g */
    int batch, seq, steps;
    char model[64];
    char path[256];
} vt_text_env;

/* Writes `bytes` of text drawn from `words` by a generator seeded with `seed` (a byte distribution to learn), and
 * opens the rest; vt_text_env_close removes the file. */
void vt_text_env_open(vt_text_env *e, const char *model, int batch, int seq, int steps, const char *const *words,
                      size_t n_words, uint64_t seed, size_t bytes);
void vt_text_env_close(vt_text_env *e);

/* Options of a net of e's model under pol at budget, memory poisoned (freed and offloaded bytes overwritten, so that a
 * plan that reads them shows), profiled by e->prof. */
vdnn_net_options vt_text_options(const vt_text_env *e, vdnn_policy pol, size_t budget, uint64_t seed);

/* What one training run gave: its parameters and losses (compared bit for bit) and its plan's figures. */
typedef struct vt_text_run {
    vdnn_checkpoint ck;
    float loss[VT_TEXT_MAX_STEPS];
    size_t train_peak, bytes_moved;
    int n_swap, n_recompute;
} vt_text_run;

/* A net of cfg, feasible, trained e->steps steps on the file's first batches at lr, each loss finite; then the plan's
 * peak and counts, the arena's high-water mark equal to the planned peak, and the parameters exported. Failures name
 * the model and cfg's policy. The caller frees the net. */
vdnn_net_t *vt_text_train(const vt_text_env *e, const vdnn_net_options *cfg, float lr, vt_text_run *r);
/* Fails unless r's parameters and losses are ref's bit for bit; `head` heads the message. */
void vt_text_assert_same_run(const vt_text_env *e, const char *head, const vt_text_run *ref, const vt_text_run *r);
/* The smallest budget any plan of e's model reaches. */
size_t vt_text_min_budget(const vt_text_env *e);
/* The first of (midway, three quarters of the way, in-core) between least and in-core's peak where pol finds a plan;
 * the peak when it finds none. */
size_t vt_text_planner_budget(const vt_text_env *e, vdnn_policy pol, size_t least, size_t peak);
/* One training run of e's model under pol at budget (SIZE_MAX: none), into r. */
typedef void (*vt_text_train_fn)(const vt_text_env *e, vdnn_policy pol, size_t budget, vt_text_run *r);
/* Every policy and planner that runs on the CPU, trained by train, against none's run ref, bit for bit: all and conv
 * unbudgeted, the planners at vt_text_planner_budget (midway, where they must choose what to swap and recompute);
 * each one's peak below none's, all and conv moving bytes, conv fewer maps than all (the inputs of the GEMM layers
 * only). */
void vt_text_policies_bitwise(const vt_text_env *e, const char *model, vt_text_train_fn train, const vt_text_run *ref);

/* The exit status of a test program whose GPU part could not run and whose other tests all passed: CTest's
 * SKIP_RETURN_CODE for it, so that CTest reports the test as skipped rather than passed. */
#define VT_EXIT_SKIPPED 77


/* Asserts that a call failed with `expect` and that the message contains `needle`. */
#define vt_assert_error(st, err, expect, needle)                                              \
    do {                                                                                      \
        vdnn_status st_ = (st);                                                               \
        if (st_ != (expect) || !strstr((err).msg, (needle)))                                  \
            fail_msg("expected %s containing \"%s\", got %s: \"%s\"", vdnn_status_name(expect), \
                     (needle), vdnn_status_name(st_), (err).msg);                             \
    } while (0)

#define vt_assert_ok(st, err)                                                                 \
    do {                                                                                      \
        vdnn_status st_ = (st);                                                               \
        if (st_ != VDNN_OK) fail_msg("%s: %s", vdnn_status_name(st_), (err).msg);             \
    } while (0)

#endif
