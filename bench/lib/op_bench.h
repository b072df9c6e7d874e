/* What the op benchmarks (bench/bf16_ops.c, bench/lstm_ops.c) share: an op of the CPU backend with buffers of
 * random values for every argument its description asks for, timed forward and backward, best of several calls. */
#ifndef VDNN_BENCH_OP_BENCH_H
#define VDNN_BENCH_OP_BENCH_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/timing.h"

static void bench_die(const char *what, const vdnn_error *err)
{
    fprintf(stderr, "bench: %s: %s\n", what, err->msg);
    exit(1);
}

static void *bench_alloc(vdnn_backend_t *be, size_t bytes)
{
    void *p = NULL;
    vdnn_error err = {0};
    if (bytes && be->ops->dev_alloc(be, bytes, &p, &err)) bench_die("dev_alloc", &err);
    return p;
}

/* n values in [-scale, scale) from a fixed generator, converted to type t. */
static void *bench_random_map(vdnn_backend_t *be, size_t n, vdnn_dtype t, unsigned seed, float scale)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) exit(1);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        f[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
    void *p = bench_alloc(be, n * vdnn_dtype_size(t));
    vdnn_error err = {0};
    if (n && be->ops->convert(be, p, t, f, VDNN_DTYPE_F32, n, &err)) bench_die("convert", &err);
    free(f);
    return p;
}

/* One way to run an op: the op, its buffers, and its best times so far. */
typedef struct bench_run {
    vdnn_op *op;
    vdnn_op_args a;
    double fwd, bwd;
} bench_run;

/* The op of d (d->algo chosen, info its info) with every map of d's type and nw weights and nb biases (fp32), their
 * gradients, aux and the larger workspace. */
static void bench_run_open(vdnn_backend_t *be, const vdnn_op_desc *d, const vdnn_op_info *info, size_t nw, size_t nb,
                           const char *name, bench_run *r)
{
    vdnn_error err = {0};
    memset(r, 0, sizeof *r);
    if (be->ops->op_create(be, d, &r->op, &err)) bench_die(name, &err);
    const size_t es = vdnn_dtype_size(d->dtype), ny = vdnn_shape_count(d->out);
    vdnn_op_args *a = &r->a;
    for (int i = 0; i < d->n_inputs; i++) {
        const size_t nx = vdnn_shape_count(d->in[i]);
        a->x[i] = bench_random_map(be, nx, d->dtype, 1u + (unsigned)i, 1.0f);
        a->dx[i] = bench_alloc(be, nx * es);
    }
    a->dy = bench_random_map(be, ny, d->dtype, 7, 1.0f);
    a->w = nw ? bench_random_map(be, nw, VDNN_DTYPE_F32, 8, 0.1f) : NULL;
    a->b = nb ? bench_random_map(be, nb, VDNN_DTYPE_F32, 9, 0.1f) : NULL;
    a->y = bench_alloc(be, ny * es);
    a->dw = nw ? bench_alloc(be, nw * sizeof(float)) : NULL;
    a->db = nb ? bench_alloc(be, nb * sizeof(float)) : NULL;
    a->aux = info->aux_bytes ? bench_alloc(be, info->aux_bytes) : NULL;
    a->ws = bench_alloc(be, info->fwd_ws_bytes > info->bwd_ws_bytes ? info->fwd_ws_bytes : info->bwd_ws_bytes);
    r->fwd = r->bwd = 1e30;
}

static void bench_run_close(vdnn_backend_t *be, bench_run *r)
{
    const vdnn_op_args *a = &r->a;
    void *all[] = {(void *)a->x[0], (void *)a->x[1], a->dx[0], a->dx[1], (void *)a->dy, (void *)a->w, (void *)a->b,
                   a->y, a->dw, a->db, a->aux, a->ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) be->ops->dev_free(be, all[i]);
    be->ops->op_destroy(be, r->op);
}

/* One forward and one backward; the times count unless this is the warm-up (first-touch page faults, JIT). */
static void bench_run_once(vdnn_backend_t *be, const char *name, bench_run *r, bool count)
{
    vdnn_error err = {0};
    double t0 = vdnn_now_seconds();
    if (be->ops->op_forward(be, r->op, &r->a, &err)) bench_die(name, &err);
    double t1 = vdnn_now_seconds();
    if (be->ops->op_backward(be, r->op, &r->a, &err)) bench_die(name, &err);
    double t2 = vdnn_now_seconds();
    if (!count) return;
    if (t1 - t0 < r->fwd) r->fwd = t1 - t0;
    if (t2 - t1 < r->bwd) r->bwd = t2 - t1;
}

#endif
