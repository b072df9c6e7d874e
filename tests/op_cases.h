/* The op harness's case table: every layer kind at hand-picked shapes (the old op tests' shapes, odd shapes
 * and corner cases of size, stride and padding) and every distinct layer of the zoo (the .cfg files in models/). */
#ifndef VDNN_TEST_OP_CASES_H
#define VDNN_TEST_OP_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

typedef struct vt_op_case {
    char name[96];
    vdnn_op_desc d;
    bool small;    /* small enough for per-element finite differences */
    uint64_t seed; /* of its inputs, from its name: adding a case leaves the others' data alone */
} vt_op_case;

typedef struct vt_op_cases {
    int n, cap;
    vt_op_case *c;
} vt_op_cases;

/* The hand-picked cases, then (unless quick) the zoo's: at a reduced input size, or at the nets' own with
 * VDNN_TEST_ZOO_FULL=1. A description already in the table is not added twice. */
void vt_op_cases_build(vt_op_cases *cs, bool quick);
void vt_op_cases_free(vt_op_cases *cs);

/* Tolerance of each op against the CPU backend (vt_close's rtol; 0: equal values): FP32 against FP32 with other
 * summation orders and algorithms, and exact for the ops that only move, select or scale values. */
double vt_op_rtol(vdnn_layer_kind kind);
/* Tolerance of each op's forward pass against the double reference (vt_close_ref's rtol). */
double vt_op_ref_rtol(vdnn_layer_kind kind);
/* Tolerance of an op run with maps of type t against the fp32 CPU on the same inputs (each representable in t):
 * vt_op_rtol for fp32; 0 for the ops that only move or select values (relu, concat, flatten); otherwise, for every
 * tensor, a few units u of t's rounding (u = 2^-8 for bf16, 2^-11 for fp16: the output's rounding plus the op's
 * rounding of the weights), against |want| plus the tensor's largest |want| (vt_close). Observed on the CPU over
 * every case: at most 0.6 u (conv and fc y and dx), 0.45 u for the other ops, 1e-5 u for the fp32 outputs (dw, db,
 * batch norm's statistics, the loss); bf16 is held to 2 u, fp16 (CUDA only, not yet observed) to 4 u. */
#define VT_BF16_RTOL (1.0 / 128)
#define VT_F16_RTOL (1.0 / 512)
double vt_op_rtol_dtype(vdnn_layer_kind kind, vdnn_dtype t);

#endif
