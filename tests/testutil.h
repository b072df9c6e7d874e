/* Shared helpers for the cmocka tests: temporary directories, seeded random data, error assertions. */
#ifndef VDNN_TESTUTIL_H
#define VDNN_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/error.h"
#include "graph/graph.h"
#include "train/checkpoint.h"

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
