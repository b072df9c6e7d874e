/* The op harness's comparisons: results against results, against the double references, and gradients against
 * central finite differences. Each returns false with a one-line reason in msg instead of failing the test, so
 * that the harness can also show that they do fail on a wrong result. */
#ifndef VDNN_TEST_OP_CHECK_H
#define VDNN_TEST_OP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op_exec.h"

/* Finite differences. The objective (vt_exec_objective) is summed in double over float32 outputs; its
 * rounding enters the bound as 2^-24 of the sum of its terms' magnitudes. Ops linear in every tensor have no
 * truncation error, so they take a long step and a tight bound (observed: under 2e-6 on the CPU). The others
 * take a short step on O(1) values, their truncation error O(step^2) (observed: under 2.5e-4), with inputs of
 * max pooling and relu kept more than a step from ties and kinks (vt_fill_for). The bound on |fd - g| is
 * relative to max(max|g|, 0.1) element by element, and to the root sum of squares of g_j * step_j along a
 * random direction. */
#define VT_FD_STEP 1e-2
#define VT_FD_TOL 2e-3
#define VT_FD_STEP_LINEAR 1.0
#define VT_FD_TOL_LINEAR 1e-4
/* Per-element differences check at most this many elements of a tensor, evenly strided. */
#define VT_FD_MAX_CHECKS 300

/* Whether d's op is linear in each of its tensors (inputs and parameters), so its differences are exact. */
bool vt_fd_linear(const vdnn_op_desc *d);

/* |got - want| <= rtol * (|want| + max|want|) everywhere: relative to each value with the tensor's scale as
 * the floor (values near zero come out of sums of large terms). rtol 0 asks for equal values (-0 equals +0).
 * NaN never passes. */
bool vt_close(const float *got, const float *want, size_t n, double rtol, char *msg, size_t len);
/* The same against a double reference; NaN reference values are not checked. */
bool vt_close_ref(const float *got, const double *ref, size_t n, double rtol, char *msg, size_t len);

/* The step for d's kind. */
double vt_fd_step(const vdnn_op_desc *d);

/* How far a backend's objective may stray beyond float32 rounding: what its forward result (y, or the loss)
 * gives against the CPU's, scaled for the two evaluations of a difference and their other inputs. 0 for the
 * CPU itself. Algorithms such as FFT convolutions round more coarsely than the CPU's. */
double vt_objective_error(const vt_op_data *in, const float *y, const float *y_cpu, float loss, float loss_cpu);

/* Central differences of the objective (vt_exec_objective) in each of (at most VT_FD_MAX_CHECKS) elements of
 * t, one of e->in's tensors, against the gradient g backward computed. t is restored. obj_err: as above; g_rtol:
 * how far g itself may be off, relative to its largest value (an algorithm computing through a transform; 0
 * otherwise). */
bool vt_fd_elements(vt_exec *e, float *t, size_t n, const float *g, double obj_err, double g_rtol, uint64_t seed,
                    char *msg, size_t len);
/* The same along one random direction v over all of t at once: L(t + h v) - L(t - h v) against g . (2 h v).
 * Two forward passes however large t is, so it scales to the zoo's shapes. */
bool vt_fd_direction(vt_exec *e, float *t, size_t n, const float *g, double obj_err, double g_rtol, uint64_t seed,
                     char *msg, size_t len);

#endif
