/* One case of the op harness on one backend: every candidate algorithm, forward and backward, against the CPU
 * backend, the double reference and finite differences, plus the properties the executor relies on. A backend
 * entry of a 16-bit type runs the case with maps of that type against the fp32 CPU. */
#ifndef VDNN_TEST_OP_CASE_RUN_H
#define VDNN_TEST_OP_CASE_RUN_H

#include <stdbool.h>

#include "backend/backend.h"
#include "op_cases.h"

typedef struct vt_case_backend {
    const char *name;   /* "cpu", "cpu-chunked", "cpu-bf16", "cuda", "cuda-fp16", ... */
    vdnn_backend_t *be;
    vdnn_backend_t *ref; /* the CPU backend every result is compared with; == be for the CPU itself */
    bool bn_aux_invstd; /* batchnorm's aux holds 1/sqrt(var + eps) after the mean (cuDNN's layout), not var */
    vdnn_dtype dtype;   /* of the maps the cases run with; the reference always runs fp32 */
} vt_case_backend;

/* Fails the test (cmocka) at the first check that does not hold; returns the number of candidates run. */
int vt_case_run(const vt_case_backend *cb, const vt_op_case *c);

#endif
