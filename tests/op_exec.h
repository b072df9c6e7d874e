/* Runs one op on any backend from host tensors, the way the executor calls it: device buffers sized by
 * op_query, x and y handed to backward only when op_query says backward reads them, every output and
 * scratch buffer poisoned (NaN) first and every output checked to be written, and inputs checked to be
 * left as they were. Shared by the op harness (test_ops.c) and the PyTorch reference test. Host tensors
 * are floats; the device's maps (x, y, dy, dx) are of the op's dtype, converted on the way. */
#ifndef VDNN_TEST_OP_EXEC_H
#define VDNN_TEST_OP_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* How inputs are drawn. Finite differences need some ops' inputs kept away from kinks and ties. */
typedef enum vt_fill {
    VT_FILL_UNIFORM,        /* uniform in [-1, 1) */
    VT_FILL_AWAY_FROM_ZERO, /* |x| >= 0.05: relu's kink is further than any finite-difference step */
    VT_FILL_DISTINCT,       /* every window of up to 3x3 holds values at least 0.03 apart: max pooling has no ties */
    VT_FILL_SPREAD,         /* each channel's values spread over [-1, 1]: no batchnorm channel has a variance near
                             * zero, where normalizing curves too sharply for finite differences */
    VT_FILL_KINKED,         /* uniform over both sides of every kink of a piecewise activation (hardsigmoid's and
                             * clip's bounds, hardswish's -3 and 3) and 2 beyond, at least 0.05 from each kink */
} vt_fill;

/* The host tensors of one op call (inputs only; results are in vt_op_result). */
typedef struct vt_op_data {
    char name[160];          /* for messages */
    vdnn_op_desc d;
    size_t nx[VDNN_MAX_INPUTS], ny, nw, nb, nstats;
    float *x[VDNN_MAX_INPUTS];
    float *w, *b;            /* conv/fc weights and bias; batchnorm gamma and beta */
    float *stats;            /* batchnorm running mean then running variance */
    float *dy;               /* the output gradient (unused by softmax_xent, whose gradient comes from the labels) */
    int32_t *labels;         /* softmax_xent: one per image */
    uint64_t seed;           /* dropout's mask */
} vt_op_data;

/* Buffers of d's sizes, every value NaN until the caller fills them. */
void vt_op_data_alloc(vt_op_data *io, const char *name, const vdnn_op_desc *d);
/* vt_op_data_alloc, then every input drawn from `seed`: never zeros, never the same tensor twice. */
void vt_op_data_random(vt_op_data *io, const char *name, const vdnn_op_desc *d, vt_fill fill, uint64_t seed);
void vt_op_data_free(vt_op_data *io);
/* The fill finite differences need for d's kind. */
vt_fill vt_fill_for(const vdnn_op_desc *d);
/* Rounds io's maps (inputs and dy) to values of type t, so that an fp32 run and a run in t read the same. */
void vt_op_data_round(vt_op_data *io, vdnn_dtype t);

/* Host conversions between floats and n values of type t (round to nearest even). */
void vt_to_dtype(void *dst, const float *src, size_t n, vdnn_dtype t);
void vt_from_dtype(float *dst, const void *src, size_t n, vdnn_dtype t);

/* Variations of one call. */
typedef struct vt_call {
    int algo;              /* candidate of op_algos */
    bool update_stats;     /* batchnorm forward updates the running statistics */
    bool backward;
    unsigned skip_dx;      /* bit i: dx[i] not wanted (NULL) */
    bool fwd_no_aux;       /* forward with aux NULL, as evaluation runs max pooling */
    bool bwd_no_bias;      /* backward with b NULL (batchnorm's gradients do not depend on beta) */
    bool fwd_inplace;      /* y written over x[0] */
    bool bwd_inplace;      /* dx[0] written over dy */
} vt_call;

/* Host copies of what one call wrote. NULL where the op has no such tensor or the call did not ask for it. */
typedef struct vt_op_result {
    vdnn_op_info info;
    float *y, *dx[VDNN_MAX_INPUTS], *dw, *db;
    float *stats;          /* running statistics after forward */
    float *aux;            /* info.aux_bytes, as the backend lays it out */
    float loss;            /* softmax_xent */
} vt_op_result;

/* One op prepared on one backend, with device buffers for in's tensors. */
typedef struct vt_exec {
    vdnn_backend_t *be;
    vt_op_data *in;
    vdnn_op_desc d;        /* in->d with the candidate algorithm */
    vdnn_op_info info;
    vdnn_op *op;
    float *x[VDNN_MAX_INPUTS], *y, *w, *b, *stats, *aux, *ws, *dy, *dx[VDNN_MAX_INPUTS], *dw, *db, *loss;
    int32_t *labels;
} vt_exec;

void vt_exec_open(vt_exec *e, vdnn_backend_t *be, vt_op_data *in, int algo);
void vt_exec_close(vt_exec *e);
/* Copies in's current values to the device. */
void vt_exec_upload(vt_exec *e);
/* The objective whose gradient backward computes with dy = in->dy: sum(y * dy) in double, or softmax_xent's
 * loss. Uploads in's current values and runs forward without updating statistics. *abs_sum (when not NULL)
 * gets sum |y * dy|, the scale of the objective's rounding error. */
double vt_exec_objective(vt_exec *e, double *abs_sum);

/* Whether two op_info say the same, field by field; msg gets both. */
bool vt_op_info_same(const vdnn_op_info *a, const vdnn_op_info *b, char *msg, size_t len);

/* Forward (and backward when c->backward) of in on be; fails the test on any error, unwritten output or
 * changed input. */
void vt_op_run(vdnn_backend_t *be, vt_op_data *in, const vt_call *c, vt_op_result *out);
void vt_op_result_free(vt_op_result *r);

#endif
