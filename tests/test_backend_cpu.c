/* Tests of the CPU backend: memory, copy queues and events (incl. throttling), element-wise helpers, and the
 * hand-written ops on hand-computed values (the op harness, test_ops.c, checks them against references and finite
 * differences; test_op_contract.c what they report). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "op_desc.h"
#include "testutil.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static vdnn_backend_t *make_backend(double bw_d2h, double bw_h2d)
{
    vdnn_cpu_options opt = {.threads = 2, .link_bandwidth_d2h = bw_d2h, .link_bandwidth_h2d = bw_h2d};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&opt, &be, &err), err);
    assert_non_null(be);
    assert_string_equal(be->ops->name, "cpu");
    assert_int_equal(be->threads, 2);
    return be;
}

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void fill_iota(float *x, size_t n, float start)
{
    for (size_t i = 0; i < n; i++) x[i] = start + (float)i;
}

/* ---------------- memory ---------------- */

static void test_memory(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_error err;
    void *d = NULL, *h = NULL, *z = NULL;
    vt_assert_ok(be->ops->dev_alloc(be, 1000, &d, &err), err);
    vt_assert_ok(be->ops->host_alloc(be, 333, &h, &err), err);
    vt_assert_ok(be->ops->dev_alloc(be, 0, &z, &err), err);
    assert_int_equal((uintptr_t)d % 64, 0);
    assert_int_equal((uintptr_t)h % 64, 0);
    memset(d, 0xab, 1000);
    memset(h, 0xcd, 333);
    assert_true(be->ops->dev_free_bytes(be) == SIZE_MAX);

    float src[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    vt_assert_ok(be->ops->upload(be, d, src, sizeof src, &err), err);
    vt_assert_ok(be->ops->download(be, back, d, sizeof back, &err), err);
    assert_memory_equal(src, back, sizeof src);

    void *huge = NULL;
    vt_assert_error(be->ops->dev_alloc(be, SIZE_MAX - 8, &huge, &err), err, VDNN_ERR_NO_MEMORY, "dev_alloc");
    be->ops->dev_free(be, d);
    be->ops->dev_free(be, z);
    be->ops->host_free(be, h);
    vdnn_backend_destroy(be);
}

static void test_bad_options(void **state)
{
    vdnn_backend_t *be = (vdnn_backend_t *)&be;
    vdnn_error err;
    vdnn_cpu_options opt = {.threads = -1};
    vt_assert_error(vdnn_backend_cpu_create(&opt, &be, &err), err, VDNN_ERR_INVALID_ARG, "threads -1");
    assert_null(be);
    opt = (vdnn_cpu_options){.link_bandwidth_h2d = -5};
    vt_assert_error(vdnn_backend_cpu_create(&opt, &be, &err), err, VDNN_ERR_INVALID_ARG, "H2D");
    /* NULL options mean the defaults. */
    vt_assert_ok(vdnn_backend_cpu_create(NULL, &be, &err), err);
    assert_true(be->threads >= 1);
    vdnn_backend_destroy(be);
}

/* ---------------- copy queues and events ---------------- */

static void test_copy_order(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_error err;
    enum { N = 4096 };
    float *a = floats(N), *b = floats(N), *c = floats(N), *d = floats(N), *e = floats(N);
    fill_iota(a, N, 1);
    fill_iota(e, N, -100);
    for (vdnn_queue_id q = VDNN_QUEUE_D2H; q <= VDNN_QUEUE_H2D; q++) {
        memset(b, 0, N * sizeof *b);
        memset(c, 0, N * sizeof *c);
        memset(d, 0, N * sizeof *d);
        /* Each copy reads what the one before wrote, so any reordering shows. */
        vt_assert_ok(be->ops->copy_async(be, q, b, a, N * sizeof *a, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->copy_async(be, q, c, b, N * sizeof *a, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->copy_async(be, q, d, c, N * sizeof *a, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->copy_async(be, q, b, e, N * sizeof *a, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->copy_async(be, q, d, d, 0, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        assert_memory_equal(d, a, N * sizeof *a);
        assert_memory_equal(c, a, N * sizeof *a);
        assert_memory_equal(b, e, N * sizeof *a);
    }
    /* Many small copies to one place: the last one wins. */
    float vals[200], out = -1;
    for (int i = 0; i < 200; i++) {
        vals[i] = (float)i;
        vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, &out, &vals[i], sizeof out, VDNN_COPY_H2D, &err), err);
    }
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    assert_true(out == 199.0f);

    /* On the compute queue a copy is done when the call returns. */
    memset(b, 0, N * sizeof *b);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_COMPUTE, b, a, N * sizeof *a, VDNN_COPY_D2D, &err), err);
    assert_memory_equal(b, a, N * sizeof *a);

    vt_assert_error(be->ops->copy_async(be, VDNN_QUEUE_COUNT, b, a, 4, VDNN_COPY_D2H, &err), err,
                    VDNN_ERR_INVALID_ARG, "no queue 3");
    vt_assert_error(be->ops->copy_async(be, VDNN_QUEUE_D2H, NULL, a, 4, VDNN_COPY_D2H, &err), err,
                    VDNN_ERR_INVALID_ARG, "NULL destination");
    free(a), free(b), free(c), free(d), free(e);
    vdnn_backend_destroy(be);
}

/* The spec'd link emulation: 64 MiB at 1 GB/s is 67 ms. */
static void test_throttled_copy(void **state)
{
    vdnn_backend_t *be = make_backend(1e9, 1e9);
    vdnn_error err;
    size_t bytes = (size_t)64 << 20;
    unsigned char *src = malloc(bytes), *dst = calloc(1, bytes);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < bytes; i++) src[i] = (unsigned char)(i * 7 + 3);
    vdnn_event *ev;
    vt_assert_ok(be->ops->event_create(be, &ev, &err), err);

    double t0 = now();
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, dst, src, bytes, VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_D2H, &err), err);
    double t_enqueued = now() - t0;
    vt_assert_ok(be->ops->event_sync(be, ev, &err), err);
    double t_done = now() - t0;
    assert_true(t_enqueued < 0.033); /* async: the caller does not pay for the copy */
    if (t_done < 0.060) fail_msg("64 MiB at 1 GB/s took %.4f s, expected >= 0.060", t_done);
    assert_memory_equal(dst, src, bytes);

    /* sync_all waits for a throttled copy too, on the other queue. */
    memset(dst, 0, bytes);
    t0 = now();
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, dst, src, bytes, VDNN_COPY_H2D, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    t_done = now() - t0;
    if (t_done < 0.060) fail_msg("sync_all returned after %.4f s, expected >= 0.060", t_done);
    assert_memory_equal(dst, src, bytes);

    be->ops->event_destroy(be, ev);
    free(src);
    free(dst);
    vdnn_backend_destroy(be);
}

static void test_event_wait(void **state)
{
    /* D2H at 100 MB/s: 8 MB take 80 ms, long enough that H2D would overtake it without the wait.
     * Lower time bounds are exact (the throttle sleeps); upper bounds are loose, for loaded machines. */
    vdnn_backend_t *be = make_backend(1e8, 0);
    vdnn_error err;
    size_t n = 2000000, bytes = n * sizeof(float);
    float *a = floats(n), *b = floats(n), *c = floats(n);
    fill_iota(a, n, 0.5f);
    vdnn_event *ev, *ev2;
    vt_assert_ok(be->ops->event_create(be, &ev, &err), err);
    vt_assert_ok(be->ops->event_create(be, &ev2, &err), err);

    double t0 = now();
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, b, a, bytes, VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_H2D, ev, &err), err);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, c, b, bytes, VDNN_COPY_H2D, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev2, VDNN_QUEUE_H2D, &err), err);
    assert_true(now() - t0 < 0.040);
    vt_assert_ok(be->ops->event_sync(be, ev2, &err), err);
    double t = now() - t0;
    if (t < 0.075) fail_msg("H2D did not wait for D2H: done after %.4f s", t);
    assert_memory_equal(c, a, bytes);

    /* The compute queue's wait blocks the caller. */
    memset(b, 0, bytes);
    t0 = now();
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, b, a, bytes, VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, ev, &err), err);
    t = now() - t0;
    if (t < 0.075) fail_msg("compute wait returned after %.4f s", t);
    assert_memory_equal(b, a, bytes);

    /* An event recorded on compute is complete at once; one never recorded counts as complete. */
    vdnn_event *fresh;
    vt_assert_ok(be->ops->event_create(be, &fresh, &err), err);
    t0 = now();
    vt_assert_ok(be->ops->event_sync(be, fresh, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, fresh, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_H2D, fresh, &err), err);
    vt_assert_ok(be->ops->event_record(be, fresh, VDNN_QUEUE_COMPUTE, &err), err);
    vt_assert_ok(be->ops->event_sync(be, fresh, &err), err);
    assert_true(now() - t0 < 0.040);
    vt_assert_ok(be->ops->sync_all(be, &err), err);

    vt_assert_error(be->ops->event_record(be, fresh, (vdnn_queue_id)7, &err), err, VDNN_ERR_INVALID_ARG, "queue 7");
    vt_assert_error(be->ops->event_wait(be, VDNN_QUEUE_D2H, NULL, &err), err, VDNN_ERR_INVALID_ARG, "NULL event");
    be->ops->event_destroy(be, fresh);
    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, ev2);
    free(a), free(b), free(c);
    vdnn_backend_destroy(be);
}

/* The executor records the same events every iteration: a re-record must make the event pending again. */
static void test_event_reuse(void **state)
{
    vdnn_backend_t *be = make_backend(2e7, 0); /* D2H: 64 KiB take ~3.3 ms */
    vdnn_error err;
    enum { N = 16384 };
    float *src = floats(N), *mid = floats(N), *dst = floats(N);
    vdnn_event *down, *up;
    vt_assert_ok(be->ops->event_create(be, &down, &err), err);
    vt_assert_ok(be->ops->event_create(be, &up, &err), err);
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < N; i++) src[i] = (float)(it * 100000 + i);
        vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, mid, src, sizeof(float) * N, VDNN_COPY_D2H, &err), err);
        vt_assert_ok(be->ops->event_record(be, down, VDNN_QUEUE_D2H, &err), err);
        vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_H2D, down, &err), err);
        vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, dst, mid, sizeof(float) * N, VDNN_COPY_H2D, &err), err);
        vt_assert_ok(be->ops->event_record(be, up, VDNN_QUEUE_H2D, &err), err);
        vt_assert_ok(be->ops->event_sync(be, up, &err), err);
        if (memcmp(dst, src, sizeof(float) * N))
            fail_msg("iteration %d: data not through both queues when the event completed", it);
    }
    /* `down` completed above; recorded again behind a slow copy, sync must wait for that copy. */
    size_t big = 1000000; /* 4 MB at 20 MB/s: 200 ms */
    float *a = floats(big), *b = floats(big);
    fill_iota(a, big, 3);
    double t0 = now();
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, b, a, big * sizeof(float), VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, down, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_sync(be, down, &err), err);
    double t = now() - t0;
    if (t < 0.150) fail_msg("re-recorded event completed after %.4f s, before its copy", t);
    assert_memory_equal(a, b, big * sizeof(float));
    be->ops->event_destroy(be, down);
    be->ops->event_destroy(be, up);
    free(src), free(mid), free(dst), free(a), free(b);
    vdnn_backend_destroy(be);
}

/* Destroying events and the backend with work still queued runs that work first (ASan checks the rest). */
static void test_destroy_with_pending_work(void **state)
{
    vdnn_backend_t *be = make_backend(1e8, 1e8);
    vdnn_error err;
    size_t n = 250000;
    float *a = floats(n), *b = floats(n), *c = floats(n);
    fill_iota(a, n, 9);
    vdnn_event *ev;
    vt_assert_ok(be->ops->event_create(be, &ev, &err), err);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, b, a, n * sizeof(float), VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_H2D, ev, &err), err);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, c, b, n * sizeof(float), VDNN_COPY_H2D, &err), err);
    be->ops->event_destroy(be, ev);
    vdnn_backend_destroy(be);
    assert_memory_equal(c, a, n * sizeof(float));
    free(a), free(b), free(c);
}

/* ---------------- element-wise helpers ---------------- */

static void test_elementwise(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_error err;
    float x[5];
    vt_assert_ok(be->ops->fill(be, x, 2.5f, 5, &err), err);
    for (int i = 0; i < 5; i++) assert_true(x[i] == 2.5f);
    float s[5] = {1, -2, 0.5f, 4, -2.5f};
    vt_assert_ok(be->ops->accumulate(be, x, s, 5, &err), err);
    const float acc[5] = {3.5f, 0.5f, 3.0f, 6.5f, 0.0f};
    assert_memory_equal(x, acc, sizeof acc);

    /* Large enough to take the parallel path. */
    size_t n = 100000;
    float *big = floats(n), *one = floats(n);
    vt_assert_ok(be->ops->fill(be, big, -1.0f, n, &err), err);
    vt_assert_ok(be->ops->fill(be, one, 3.0f, n, &err), err);
    vt_assert_ok(be->ops->accumulate(be, big, one, n, &err), err);
    for (size_t i = 0; i < n; i++)
        if (big[i] != 2.0f) fail_msg("accumulate: element %zu is %g", i, (double)big[i]);
    /* Scaling by a power of two is exact: micro-batch gradient sums rely on it. */
    vt_assert_ok(be->ops->scale(be, big, 0.25f, n, &err), err);
    for (size_t i = 0; i < n; i++)
        if (big[i] != 0.5f) fail_msg("scale: element %zu is %g", i, (double)big[i]);

    /* SGD: hand-computed first two steps with lr 0.1, momentum 0.9, weight decay 0.01. */
    float w[2] = {1.0f, -2.0f}, dw[2] = {0.5f, 0.25f}, v[2] = {0, 0};
    vt_assert_ok(be->ops->sgd_update(be, w, dw, v, 2, 0.1f, 0.9f, 0.01f, &err), err);
    assert_float_equal(v[0], 0.51, 1e-6);
    assert_float_equal(w[0], 0.949, 1e-6);
    assert_float_equal(v[1], 0.23, 1e-6);
    assert_float_equal(w[1], -2.023, 1e-6);
    vt_assert_ok(be->ops->sgd_update(be, w, dw, v, 2, 0.1f, 0.9f, 0.01f, &err), err);
    assert_float_equal(v[0], 0.96849, 1e-6);
    assert_float_equal(w[0], 0.852151, 1e-6);
    assert_float_equal(v[1], 0.43677, 1e-6);
    assert_float_equal(w[1], -2.066677, 1e-6);
    /* Further steps with changing gradients against the formula in double. */
    double wr[2] = {w[0], w[1]}, vr[2] = {v[0], v[1]};
    for (int step = 0; step < 5; step++) {
        dw[0] = 0.3f * (float)step - 0.7f;
        dw[1] = -0.2f * (float)step;
        vt_assert_ok(be->ops->sgd_update(be, w, dw, v, 2, 0.05f, 0.8f, 0.001f, &err), err);
        for (int i = 0; i < 2; i++) {
            double g = (double)dw[i] + 0.001 * wr[i];
            vr[i] = 0.8 * vr[i] + g;
            wr[i] -= 0.05 * vr[i];
            assert_float_equal(v[i], vr[i], 1e-5);
            assert_float_equal(w[i], wr[i], 1e-5);
        }
    }

    float p[4] = {1, 2, 3, 4};
    vt_assert_ok(be->ops->poison(be, p, 3 * sizeof(float), &err), err);
    assert_true(isnan(p[0]) && isnan(p[1]) && isnan(p[2]));
    assert_true(p[3] == 4.0f);
    vt_assert_error(be->ops->fill(be, NULL, 1.0f, 3, &err), err, VDNN_ERR_INVALID_ARG, "fill");
    free(big);
    free(one);
    vdnn_backend_destroy(be);
}

/* ---------------- ops ---------------- */

static vdnn_op *make_op(vdnn_backend_t *be, const vdnn_op_desc *d)
{
    vdnn_op *op = NULL;
    vdnn_error err;
    vt_assert_ok(be->ops->op_create(be, d, &op, &err), err);
    assert_non_null(op);
    return op;
}

static void run(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, bool forward)
{
    vdnn_error err;
    if (forward) vt_assert_ok(be->ops->op_forward(be, op, a, &err), err);
    else vt_assert_ok(be->ops->op_backward(be, op, a, &err), err);
}

static void test_dropout(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_op_desc d = vt_dropout(vt_shape(1, 8, 1, 1), 0.5f, true);
    vdnn_op *op = make_op(be, &d);
    float x[8], y[8], dy[8], dx[8];
    fill_iota(x, 8, 1);
    fill_iota(dy, 8, -3);
    vdnn_op_args a = {.x = {x}, .y = y, .seed = 42, .dy = dy, .dx = {dx}};
    run(be, op, &a, true);
    run(be, op, &a, false);
    int kept = 0;
    for (int i = 0; i < 8; i++) {
        bool k = vdnn_dropout_keep(42, (uint64_t)i, 0.5f);
        kept += k;
        assert_true(y[i] == (k ? 2.0f * x[i] : 0.0f));
        assert_true(dx[i] == (k ? 2.0f * dy[i] : 0.0f));
    }
    assert_true(kept > 0 && kept < 8); /* this seed exercises both branches */
    be->ops->op_destroy(be, op);

    /* A larger tensor: keep rate near 1-p, same seed same mask (also in place), another seed another mask. */
    size_t n = 100000;
    d = vt_dropout(vt_shape(10, 100, 10, 10), 0.3f, true);
    op = make_op(be, &d);
    float *bx = floats(n), *y1 = floats(n), *y2 = floats(n), *y3 = floats(n);
    vt_fill_uniform(bx, n, 5, 0.5f, 1.5f);
    vdnn_op_args b = {.x = {bx}, .y = y1, .seed = 1234};
    run(be, op, &b, true);
    b.y = y2;
    run(be, op, &b, true);
    assert_memory_equal(y1, y2, n * sizeof(float));
    memcpy(y3, bx, n * sizeof(float));
    b.x[0] = y3;
    b.y = y3;
    run(be, op, &b, true);
    assert_memory_equal(y1, y3, n * sizeof(float));
    b.x[0] = bx;
    b.y = y2;
    b.seed = 1235;
    run(be, op, &b, true);
    size_t k1 = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        k1 += y1[i] != 0.0f;
        differ += (y1[i] != 0.0f) != (y2[i] != 0.0f);
        if (y1[i] != 0.0f && y1[i] != bx[i] * (1.0f / 0.7f)) fail_msg("dropout: kept element %zu not scaled", i);
    }
    if (k1 < 69000 || k1 > 71000) fail_msg("dropout p=0.3 kept %zu of %zu", k1, n);
    if (differ < 30000) fail_msg("dropout: another seed changed only %zu mask entries", differ);
    be->ops->op_destroy(be, op);

    /* Inference: identity. */
    d.training = false;
    op = make_op(be, &d);
    b.seed = 1234;
    b.y = y2;
    run(be, op, &b, true);
    assert_memory_equal(y2, bx, n * sizeof(float));
    be->ops->op_destroy(be, op);
    free(bx), free(y1), free(y2), free(y3);
    vdnn_backend_destroy(be);
}

static void test_concat(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    const vdnn_shape in[2] = {vt_shape(2, 1, 1, 2), vt_shape(2, 2, 1, 2)};
    vdnn_op_desc d = vt_multi(VDNN_LAYER_CONCAT, 2, in);
    vdnn_op *op = make_op(be, &d);
    const float x0[4] = {1, 2, 3, 4};           /* n0: c0 | n1: c0 */
    const float x1[8] = {10, 11, 12, 13, 20, 21, 22, 23};
    float y[12];
    vdnn_op_args a = {.x = {x0, x1}, .y = y};
    run(be, op, &a, true);
    const float want[12] = {1, 2, 10, 11, 12, 13, 3, 4, 20, 21, 22, 23};
    assert_memory_equal(y, want, sizeof want);

    float dy[12], dx0[4], dx1[8];
    fill_iota(dy, 12, 100);
    a.dy = dy;
    a.dx[0] = dx0;
    a.dx[1] = dx1;
    run(be, op, &a, false);
    const float want0[4] = {100, 101, 106, 107}, want1[8] = {102, 103, 104, 105, 108, 109, 110, 111};
    assert_memory_equal(dx0, want0, sizeof want0);
    assert_memory_equal(dx1, want1, sizeof want1);
    /* A NULL gradient is skipped, the others still written. */
    a.dx[0] = NULL;
    memset(dx1, 0, sizeof dx1);
    run(be, op, &a, false);
    assert_memory_equal(dx1, want1, sizeof want1);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

static void test_add(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    const vdnn_shape in[3] = {vt_shape(1, 2, 1, 2), vt_shape(1, 2, 1, 2), vt_shape(1, 2, 1, 2)};
    vdnn_op_desc d = vt_multi(VDNN_LAYER_ADD, 3, in);
    vdnn_op *op = make_op(be, &d);
    const float x0[4] = {1, 2, 3, 4}, x1[4] = {10, 20, 30, 40}, x2[4] = {-0.5f, 0.25f, 0, -4};
    float y[4], dy[4] = {1, -2, 3, -4}, dx0[4], dx2[4], sentinel = 7;
    float dx1[4] = {sentinel, sentinel, sentinel, sentinel};
    vdnn_op_args a = {.x = {x0, x1, x2}, .y = y, .dy = dy, .dx = {dx0, NULL, dx2}};
    run(be, op, &a, true);
    const float want[4] = {10.5f, 22.25f, 33, 40};
    assert_memory_equal(y, want, sizeof want);
    run(be, op, &a, false);
    assert_memory_equal(dx0, dy, sizeof dy);
    assert_memory_equal(dx2, dy, sizeof dy);
    for (int i = 0; i < 4; i++) assert_true(dx1[i] == sentinel);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

static void test_gap(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_op_desc d = vt_gap(vt_shape(1, 2, 2, 2));
    vdnn_op *op = make_op(be, &d);
    float x[8], y[2], dy[2] = {4, 8}, dx[8];
    fill_iota(x, 8, 1);
    vdnn_op_args a = {.x = {x}, .y = y, .dy = dy, .dx = {dx}};
    run(be, op, &a, true);
    assert_true(y[0] == 2.5f && y[1] == 6.5f);
    run(be, op, &a, false);
    const float want[8] = {1, 1, 1, 1, 2, 2, 2, 2};
    assert_memory_equal(dx, want, sizeof want);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

static void test_flatten(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_op_desc d = vt_flatten(vt_shape(2, 2, 2, 3));
    vdnn_op *op = make_op(be, &d);
    float x[24], y[24], dy[24], dx[24];
    fill_iota(x, 24, -5);
    fill_iota(dy, 24, 50);
    vdnn_op_args a = {.x = {x}, .y = y, .dy = dy, .dx = {dx}};
    run(be, op, &a, true);
    assert_memory_equal(y, x, sizeof x);
    run(be, op, &a, false);
    assert_memory_equal(dx, dy, sizeof dy);
    /* In place (x == y) leaves the values as they are. */
    a.x[0] = x;
    a.y = x;
    run(be, op, &a, true);
    assert_true(x[0] == -5.0f && x[23] == 18.0f);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

static void test_softmax_xent(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_error err;
    vdnn_op_desc d = vt_xent(2, 3);
    vdnn_op *op = make_op(be, &d);
    const float x[6] = {1, 2, 3, 0, 0, 0};
    const int32_t labels[2] = {2, 1};
    float y[6], dx[6], loss = -1;
    vdnn_op_args a = {.x = {x}, .y = y, .labels = labels, .loss = &loss, .dx = {dx}};
    run(be, op, &a, true);
    /* softmax(1,2,3) = (e^-2, e^-1, 1) / (1 + e^-1 + e^-2); loss = (-log 0.66524096 + log 3) / 2. */
    const double want[6] = {0.09003057, 0.24472847, 0.66524096, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    for (int i = 0; i < 6; i++) assert_float_equal(y[i], want[i], 1e-6);
    assert_float_equal(loss, 0.75310912, 1e-6);
    run(be, op, &a, false);
    for (int i = 0; i < 6; i++) {
        double onehot = (i == 2 || i == 4) ? 1.0 : 0.0;
        assert_float_equal(dx[i], (want[i] - onehot) / 2, 1e-6);
    }
    /* Labels are checked. */
    const int32_t bad[2] = {2, 3};
    a.labels = bad;
    vt_assert_error(be->ops->op_forward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "label 3 of sample 1");
    vt_assert_error(be->ops->op_backward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "label 3");
    be->ops->op_destroy(be, op);

    /* Huge logits stay finite (log-sum-exp). */
    d = vt_xent(1, 3);
    op = make_op(be, &d);
    const float hx[3] = {1000, 0, -1000};
    const int32_t l1[1] = {1};
    a = (vdnn_op_args){.x = {hx}, .y = y, .labels = l1, .loss = &loss};
    run(be, op, &a, true);
    assert_float_equal(loss, 1000.0, 1e-3);
    assert_true(y[0] == 1.0f && y[1] == 0.0f && y[2] == 0.0f);
    be->ops->op_destroy(be, op);

    /* A batch big enough to run threaded gives the same bits every time. */
    int n = 300, k = 1000;
    d = vt_xent(n, k);
    op = make_op(be, &d);
    float *bx = floats((size_t)n * k), *y1 = floats((size_t)n * k), *y2 = floats((size_t)n * k);
    int32_t *bl = calloc((size_t)n, sizeof *bl);
    assert_non_null(bl);
    vt_fill_uniform(bx, (size_t)n * k, 9, -10, 10);
    double ref = 0;
    for (int i = 0; i < n; i++) {
        bl[i] = (i * 37) % k;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < k; c++) m = fmax(m, bx[(size_t)i * k + c]);
        for (int c = 0; c < k; c++) s += exp(bx[(size_t)i * k + c] - m);
        ref += m + log(s) - bx[(size_t)i * k + bl[i]];
    }
    float l1v, l2v;
    a = (vdnn_op_args){.x = {bx}, .y = y1, .labels = bl, .loss = &l1v};
    run(be, op, &a, true);
    a.y = y2;
    a.loss = &l2v;
    run(be, op, &a, true);
    assert_memory_equal(y1, y2, (size_t)n * k * sizeof(float));
    assert_memory_equal(&l1v, &l2v, sizeof l1v);
    assert_float_equal(l1v, ref / n, 1e-4);
    be->ops->op_destroy(be, op);
    free(bx), free(y1), free(y2), free(bl);
    vdnn_backend_destroy(be);
}

/* Synchronized batch norm: two "ranks" (threads), each with its half of a batch, sum through a fake
 * reduction; they must match one op over the whole batch. */
#define SBN_RANKS 2
typedef struct fake_group {
    pthread_barrier_t bar;
    double *slot[SBN_RANKS];
    size_t n[SBN_RANKS];
    int keys[SBN_RANKS][8], calls[SBN_RANKS];
} fake_group;

typedef struct fake_rank {
    fake_group *g;
    int id;
    vdnn_reduce red;
    vdnn_backend_t *be;
    vdnn_op *op;
    vdnn_op_args a;
    vdnn_status fwd, bwd;
} fake_rank;

static vdnn_status fake_sum(void *ctx, int key, double *buf, size_t n, vdnn_error *err)
{
    fake_rank *r = ctx;
    fake_group *g = r->g;
    if (r->g->calls[r->id] < 8) g->keys[r->id][g->calls[r->id]] = key;
    g->calls[r->id]++;
    g->slot[r->id] = buf;
    g->n[r->id] = n;
    pthread_barrier_wait(&g->bar);
    double *sum = malloc(n * sizeof *sum);
    if (!sum) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        sum[i] = 0;
        for (int k = 0; k < SBN_RANKS; k++) sum[i] += g->n[k] == n ? g->slot[k][i] : NAN;
    }
    /* Everyone has read every slot before anyone overwrites its own. */
    pthread_barrier_wait(&g->bar);
    memcpy(buf, sum, n * sizeof *sum);
    free(sum);
    return VDNN_OK;
}

static void *fake_rank_run(void *arg)
{
    fake_rank *r = arg;
    vdnn_error err;
    r->fwd = r->be->ops->op_forward(r->be, r->op, &r->a, &err);
    r->bwd = r->fwd ? r->fwd : r->be->ops->op_backward(r->be, r->op, &r->a, &err);
    return NULL;
}

static vdnn_status failing_sum(void *ctx, int key, double *buf, size_t n, vdnn_error *err)
{
    return vdnn_fail(err, VDNN_ERR_IO, "no peer");
}

static void assert_close(const float *a, const float *b, size_t n, double tol, const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)a[i]));
        if (!(d <= worst)) worst = d;
    }
    if (!(worst <= tol)) fail_msg("%s: largest relative difference %g (tolerance %g)", what, worst, tol);
}

static void test_batchnorm_sync(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    const int N = 6, C = 3, H = 5, W = 4, key = 7;
    const size_t plane = (size_t)H * W, per = (size_t)C * plane, n = (size_t)N * per, half = n / 2;
    vdnn_op_desc d = vt_bn(vt_shape(N, C, H, W), true);
    vdnn_op *whole = make_op(be, &d);
    float *x = floats(n), *dy = floats(n), *y = floats(n), *dx = floats(n), *hy = floats(n), *hdx = floats(n);
    vt_fill_uniform(x, n, 21, -3.0f, 5.0f);
    vt_fill_uniform(dy, n, 22, -1.0f, 1.0f);
    float gamma[3] = {0.5f, 1.5f, -2.0f}, beta[3] = {0.1f, -0.2f, 0.3f};
    float stats[6] = {0.2f, -0.1f, 0.0f, 1.0f, 0.5f, 2.0f}, hstats[SBN_RANKS][6];
    float aux[6], haux[SBN_RANKS][6], dg[3], db[3], hdg[SBN_RANKS][3], hdb[SBN_RANKS][3];
    for (int k = 0; k < SBN_RANKS; k++) memcpy(hstats[k], stats, sizeof stats);
    vdnn_op_args a = {.x = {x}, .y = y, .w = gamma, .b = beta, .stats = stats, .update_stats = true, .aux = aux,
                      .dy = dy, .dx = {dx}, .dw = dg, .db = db};
    run(be, whole, &a, true);
    run(be, whole, &a, false);

    vdnn_op_desc hd = vt_bn(vt_shape(N / 2, C, H, W), true);
    fake_group g;
    memset(&g, 0, sizeof g);
    assert_int_equal(pthread_barrier_init(&g.bar, NULL, SBN_RANKS), 0);
    fake_rank r[SBN_RANKS];
    pthread_t t[SBN_RANKS];
    for (int k = 0; k < SBN_RANKS; k++) {
        r[k] = (fake_rank){.g = &g, .id = k, .be = be, .op = make_op(be, &hd)};
        r[k].red = (vdnn_reduce){fake_sum, &r[k]};
        /* The dp convention: each rank's dy is that of its own share's loss; here simply the whole's dy. */
        r[k].a = (vdnn_op_args){.x = {x + k * half}, .y = hy + k * half, .w = gamma, .b = beta, .stats = hstats[k],
                                .update_stats = true, .aux = haux[k], .dy = dy + k * half, .dx = {hdx + k * half},
                                .dw = hdg[k], .db = hdb[k], .reduce = &r[k].red, .reduce_key = key};
        assert_int_equal(pthread_create(&t[k], NULL, fake_rank_run, &r[k]), 0);
    }
    for (int k = 0; k < SBN_RANKS; k++) pthread_join(t[k], NULL);
    pthread_barrier_destroy(&g.bar);
    for (int k = 0; k < SBN_RANKS; k++) {
        assert_int_equal(r[k].fwd, VDNN_OK);
        assert_int_equal(r[k].bwd, VDNN_OK);
        /* Two sums forward (mean, then squared deviations), one backward, keyed by layer and phase. */
        assert_int_equal(g.calls[k], 3);
        for (int i = 0; i < 3; i++) assert_int_equal(g.keys[k][i], key * 4 + i);
        assert_close(aux, haux[k], 6, 1e-6, "batch mean and variance");
        /* Running statistics from the global figures (unbiased over all N*H*W values): equal on each rank. */
        assert_close(stats, hstats[k], 6, 1e-6, "running statistics");
        assert_memory_equal(hstats[k], hstats[0], sizeof stats);
    }
    assert_close(y, hy, n, 1e-5, "y");
    assert_close(dx, hdx, n, 1e-5, "dx");
    /* Each rank keeps its own dgamma/dbeta: the gradient sum over ranks makes the whole's. */
    float sg[3], sb[3];
    for (int c = 0; c < C; c++) {
        sg[c] = hdg[0][c] + hdg[1][c];
        sb[c] = hdb[0][c] + hdb[1][c];
    }
    assert_close(dg, sg, 3, 1e-5, "dgamma");
    assert_close(db, sb, 3, 1e-5, "dbeta");
    /* Without the reduction each half normalizes alone: far from the whole. */
    a = r[0].a;
    a.reduce = NULL;
    a.update_stats = false;
    run(be, r[0].op, &a, true);
    double far = 0;
    for (size_t i = 0; i < half; i++) far = fmax(far, fabs((double)y[i] - (double)hy[i]));
    assert_true(far > 1e-2);
    /* A failed reduction is the op's failure. */
    vdnn_reduce bad = {failing_sum, NULL};
    a.reduce = &bad;
    vdnn_error err;
    assert_int_equal(be->ops->op_forward(be, r[0].op, &a, &err), VDNN_ERR_IO);
    assert_int_equal(be->ops->op_backward(be, r[0].op, &a, &err), VDNN_ERR_IO);
    for (int k = 0; k < SBN_RANKS; k++) be->ops->op_destroy(be, r[k].op);
    be->ops->op_destroy(be, whole);
    free(x), free(dy), free(y), free(dx), free(hy), free(hdx);
    vdnn_backend_destroy(be);
}

static void test_forward_arg_checks(void **state)
{
    vdnn_backend_t *be = make_backend(0, 0);
    vdnn_error err;
    const vdnn_shape in[2] = {vt_shape(1, 1, 1, 4), vt_shape(1, 1, 1, 4)};
    vdnn_op_desc d = vt_multi(VDNN_LAYER_ADD, 2, in);
    vdnn_op *op = make_op(be, &d);
    float x[4] = {0}, y[4];
    vdnn_op_args a = {.x = {x}, .y = y};
    vt_assert_error(be->ops->op_forward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "input 1 is NULL");
    vt_assert_error(be->ops->op_backward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "dy is NULL");
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_copy_order),
        cmocka_unit_test(test_throttled_copy),
        cmocka_unit_test(test_event_wait),
        cmocka_unit_test(test_event_reuse),
        cmocka_unit_test(test_destroy_with_pending_work),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_forward_arg_checks),
        cmocka_unit_test(test_batchnorm_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
