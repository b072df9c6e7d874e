/* Tests of the CUDA backend beyond its ops' results (which the op harness, test_ops.c, compares with the CPU):
 * options, memory, queues and events, element-wise helpers, refused op descriptions, conv algorithm lists and
 * what each candidate tells the planner, lenet training under each policy including um (bitwise equal parameters
 * in deterministic mode), and the refusal of a Unified Memory pool larger than the free device memory. Without a
 * usable GPU the GPU tests skip, the option checks still run, and the program exits 77 (skipped) with the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"
#include "op_check.h"
#include "op_desc.h"

#ifdef VDNN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#endif

/* Why the GPU tests are skipped ("" when a GPU is usable). Set once in main. */
static char skip_reason[1600];

/* ---------------- without a GPU too ---------------- */

static void test_create_or_reason(void **state)
{
    vdnn_backend_t *be = (vdnn_backend_t *)&be;
    vdnn_error err;
    vdnn_status st = vdnn_backend_cuda_create(0, 0, &be, &err);
    if (skip_reason[0]) {
        /* The CLI prints this one line and falls back to the CPU. */
        vt_assert_error(st, err, VDNN_ERR_NO_DEVICE, "no GPU");
        assert_null(be);
        assert_null(strchr(err.msg, '\n'));
        return;
    }
    vt_assert_ok(st, err);
    assert_string_equal(be->ops->name, "cuda");
    vdnn_backend_destroy(be);
}

#ifdef VDNN_HAVE_CUDA

static void test_bad_options(void **state)
{
    vdnn_backend_t *be = (vdnn_backend_t *)&be;
    vdnn_error err;
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.device = -1;
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "device -1");
    assert_null(be);
    vdnn_cuda_options_default(&o);
    o.tf32 = 5;
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "tf32");
    vdnn_cuda_options_default(&o);
    setenv("VDNN_CONV_WS_LIMIT", "lots", 1);
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "VDNN_CONV_WS_LIMIT='lots'");
    unsetenv("VDNN_CONV_WS_LIMIT");
    vt_assert_error(vdnn_backend_cuda_create_ex(&o, NULL, &err), err, VDNN_ERR_INVALID_ARG, "NULL output");
    /* Not a CUDA backend. */
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    assert_false(vdnn_cuda_settings(be, NULL));
    vdnn_op_desc d = {.kind = VDNN_LAYER_CONV};
    int n = 7;
    vt_assert_error(vdnn_cuda_conv_algos(be, &d, VDNN_CONV_FWD, false, NULL, 0, &n, &err), err, VDNN_ERR_INVALID_ARG,
                    "not a CUDA backend");
    assert_int_equal(n, 0);
    vdnn_backend_destroy(be);
}

/* ---------------- helpers ---------------- */

#define GPU_OR_SKIP()                     \
    do {                                  \
        if (skip_reason[0]) skip();       \
    } while (0)

static vdnn_backend_t *gpu(void)
{
    /* Strict FP32 so results can be compared with the CPU at FP32 tolerances. */
    setenv("VDNN_NO_TF32", "1", 1);
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cuda_create(0, 0, &be, &err), err);
    vdnn_cuda_options o;
    assert_true(vdnn_cuda_settings(be, &o));
    assert_int_equal(o.tf32, 0);
    return be;
}

static vdnn_backend_t *cpu(void)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    return be;
}

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void *dev(vdnn_backend_t *be, size_t bytes)
{
    void *p = NULL;
    vdnn_error err;
    vt_assert_ok(be->ops->dev_alloc(be, bytes, &p, &err), err);
    assert_non_null(p);
    return p;
}

static void up(vdnn_backend_t *be, void *d, const void *h, size_t bytes)
{
    vdnn_error err;
    vt_assert_ok(be->ops->upload(be, d, h, bytes, &err), err);
}

static void down(vdnn_backend_t *be, void *h, const void *d, size_t bytes)
{
    vdnn_error err;
    vt_assert_ok(be->ops->download(be, h, d, bytes, &err), err);
}

/* ---------------- memory, queues, events ---------------- */

static void test_memory_and_queues(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t n = 1 << 20;
    float *d = dev(be, n * sizeof(float));
    float *d2 = dev(be, n * sizeof(float));
    void *z = dev(be, 0);
    float *h = NULL;
    vt_assert_ok(be->ops->host_alloc(be, n * sizeof(float), (void **)&h, &err), err);
    size_t fr = be->ops->dev_free_bytes(be);
    assert_true(fr > 0 && fr < SIZE_MAX);

    /* Blocking round trip. */
    float *src = floats(n), *back = floats(n);
    for (size_t i = 0; i < n; i++) src[i] = (float)i * 0.5f;
    up(be, d, src, n * sizeof(float));
    down(be, back, d, n * sizeof(float));
    assert_memory_equal(src, back, n * sizeof(float));

    /* The queues: compute fills, D2H waits for it through an event, copies into pinned memory. */
    vdnn_event *ev = NULL, *done = NULL;
    vt_assert_ok(be->ops->event_create(be, &ev, &err), err);
    vt_assert_ok(be->ops->event_create(be, &done, &err), err);
    /* A wait on a never-recorded event is no wait at all. */
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_D2H, ev, &err), err);
    vt_assert_ok(be->ops->fill(be, d, 3.0f, n, &err), err);
    vt_assert_ok(be->ops->accumulate(be, d, d, n, &err), err); /* 6 */
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_COMPUTE, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_D2H, ev, &err), err);
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_D2H, h, d, n * sizeof(float), VDNN_COPY_D2H, &err), err);
    vt_assert_ok(be->ops->event_record(be, done, VDNN_QUEUE_D2H, &err), err);
    vt_assert_ok(be->ops->event_sync(be, done, &err), err);
    for (size_t i = 0; i < n; i++)
        if (h[i] != 6.0f) fail_msg("D2H after event: h[%zu] = %g, want 6", i, (double)h[i]);

    /* H2D on its queue, compute waits for it, then works on the data. */
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_H2D, d2, h, n * sizeof(float), VDNN_COPY_H2D, &err), err);
    vt_assert_ok(be->ops->event_record(be, ev, VDNN_QUEUE_H2D, &err), err);
    vt_assert_ok(be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, ev, &err), err);
    vt_assert_ok(be->ops->accumulate(be, d2, d, n, &err), err); /* 7 */
    vt_assert_ok(be->ops->copy_async(be, VDNN_QUEUE_COMPUTE, d, d2, n * sizeof(float), VDNN_COPY_D2D, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    down(be, back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (back[i] != 7.0f) fail_msg("H2D + wait + accumulate: [%zu] = %g, want 7", i, (double)back[i]);
    vt_assert_ok(be->ops->scale(be, d, 0.5f, n, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);
    down(be, back, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (back[i] != 3.5f) fail_msg("scale: [%zu] = %g, want 3.5", i, (double)back[i]);

    /* Poison is NaN everywhere. */
    vt_assert_ok(be->ops->poison(be, d, 1000 * sizeof(float), &err), err);
    down(be, back, d, 1000 * sizeof(float));
    for (size_t i = 0; i < 1000; i++) assert_true(isnan(back[i]));

    /* Bad calls. */
    vt_assert_error(be->ops->copy_async(be, (vdnn_queue_id)7, h, d, 4, VDNN_COPY_D2H, &err), err, VDNN_ERR_INVALID_ARG,
                    "no queue 7");
    vt_assert_error(be->ops->copy_async(be, VDNN_QUEUE_D2H, NULL, d, 4, VDNN_COPY_D2H, &err), err,
                    VDNN_ERR_INVALID_ARG, "NULL destination");
    vt_assert_error(be->ops->event_record(be, NULL, VDNN_QUEUE_COMPUTE, &err), err, VDNN_ERR_INVALID_ARG, "NULL event");
    void *huge = NULL;
    vt_assert_error(be->ops->dev_alloc(be, (size_t)1 << 50, &huge, &err), err, VDNN_ERR_NO_MEMORY, "cudaMalloc");
    assert_null(huge);
    /* The failed allocation left nothing behind that breaks later work. */
    vt_assert_ok(be->ops->fill(be, d, 2.0f, 16, &err), err);
    vt_assert_ok(be->ops->sync_all(be, &err), err);

    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, done);
    be->ops->host_free(be, h);
    be->ops->dev_free(be, d);
    be->ops->dev_free(be, d2);
    be->ops->dev_free(be, z);
    free(src);
    free(back);
    vdnn_backend_destroy(be);
}

static void test_elementwise_vs_cpu(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *g = gpu(), *c = cpu();
    vdnn_error err;
    const size_t n = 100003;
    float *w = floats(n), *dw = floats(n), *v = floats(n), *out_g = floats(n), *out_c = floats(n), *vg = floats(n),
          *vc = floats(n);
    vt_fill_uniform(w, n, 1, -1, 1);
    vt_fill_uniform(dw, n, 2, -1, 1);
    vt_fill_uniform(v, n, 3, -1, 1);
    vdnn_backend_t *bes[2] = {g, c};
    float *outs[2] = {out_g, out_c}, *vs[2] = {vg, vc};
    for (int k = 0; k < 2; k++) {
        vdnn_backend_t *be = bes[k];
        float *dW = dev(be, n * 4), *dD = dev(be, n * 4), *dV = dev(be, n * 4);
        up(be, dW, w, n * 4);
        up(be, dD, dw, n * 4);
        up(be, dV, v, n * 4);
        vt_assert_ok(be->ops->sgd_update(be, dW, dD, dV, n, 0.1f, 0.9f, 5e-4f, &err), err);
        vt_assert_ok(be->ops->accumulate(be, dD, dW, n, &err), err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        down(be, outs[k], dD, n * 4);
        down(be, vs[k], dV, n * 4);
        be->ops->dev_free(be, dW);
        be->ops->dev_free(be, dD);
        be->ops->dev_free(be, dV);
    }
    /* The GPU may fuse multiply-adds: equal to rounding. */
    char msg[256];
    if (!vt_close(vg, vc, n, 1e-6, msg, sizeof msg)) fail_msg("sgd momentum: %s", msg);
    if (!vt_close(out_g, out_c, n, 1e-6, msg, sizeof msg)) fail_msg("sgd + accumulate: %s", msg);
    free(w), free(dw), free(v), free(out_g), free(out_c), free(vg), free(vc);
    vdnn_backend_destroy(g);
    vdnn_backend_destroy(c);
}

/* ---------------- ops ---------------- */

static void test_op_errors(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    vdnn_op *op = NULL;
    vdnn_op_info info;
    vdnn_op_desc d = vt_conv(vt_shape(2, 4, 8, 8), 8, 3, 1, 1, 1, 1);
    d.out.h = 5;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "conv: output");
    d = vt_lrn(vt_shape(2, 4, 8, 8), 4, 1e-4f, 0.75f, 2.0f);
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_UNSUPPORTED, "size 4");
    d = vt_lrn(vt_shape(2, 4, 8, 8), 17, 1e-4f, 0.75f, 2.0f);
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_UNSUPPORTED, "cuDNN's range");
    assert_null(op);
    d = vt_op(VDNN_LAYER_INPUT, vt_shape(1, 1, 1, 1), vt_shape(1, 1, 1, 1));
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "input");
    /* An inference conv has no backward. */
    d = vt_conv(vt_shape(2, 4, 8, 8), 8, 3, 1, 1, 1, 0);
    d.training = false;
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_int_equal(info.bwd_ws_bytes, 0);
    vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
    float *p = dev(be, 4096 * 4);
    vdnn_op_args a = {.x = {p}, .dy = p, .dw = p};
    vt_assert_error(be->ops->op_backward(be, op, &a, &err), err, VDNN_ERR_INVALID_ARG, "inference");
    vdnn_op_args f = {.x = {p}, .w = NULL, .y = p};
    vt_assert_error(be->ops->op_forward(be, op, &f, &err), err, VDNN_ERR_INVALID_ARG, "NULL weights");
    be->ops->op_destroy(be, op);
    /* Max pooling is honest about what its backward reads. */
    d = vt_pool(VDNN_LAYER_MAXPOOL, vt_shape(2, 4, 8, 8), 2, 2, 0);
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_true(info.bwd_needs_x && info.bwd_needs_y);
    assert_int_equal(info.aux_bytes, 0);
    be->ops->dev_free(be, p);
    vdnn_backend_destroy(be);
}

/* ---------------- conv algorithms ---------------- */

static void test_conv_algorithms(void **state)
{
    GPU_OR_SKIP();
    setenv("VDNN_DETERMINISTIC", "1", 1);
    vdnn_backend_t *be = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    vdnn_error err;
    vdnn_cuda_options o;
    assert_true(vdnn_cuda_settings(be, &o));
    assert_int_equal(o.deterministic, 1);
    assert_int_equal(o.benchmark, 0);
    vdnn_op_desc d = vt_conv(vt_shape(8, 64, 28, 28), 64, 3, 1, 1, 1, 1);
    vdnn_op_info info;
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    vdnn_op *op = NULL;
    vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
    for (int pass = 0; pass < VDNN_CONV_PASS_COUNT; pass++) {
        vdnn_conv_algo list[VDNN_CONV_MAX_ALGOS], timed[VDNN_CONV_MAX_ALGOS], chosen;
        int n = 0, nt = 0;
        vt_assert_ok(vdnn_cuda_conv_algos(be, &d, (vdnn_conv_pass)pass, false, list, VDNN_CONV_MAX_ALGOS, &n, &err), err);
        assert_true(n >= 1);
        for (int i = 0; i < n; i++) {
            assert_true(list[i].deterministic);
            assert_false(list[i].tensor_cores);
            assert_true(list[i].time_ms < 0);
            assert_true(list[i].name[0] != '\0');
        }
        vt_assert_ok(vdnn_cuda_conv_algos(be, &d, (vdnn_conv_pass)pass, true, timed, VDNN_CONV_MAX_ALGOS, &nt, &err), err);
        assert_true(nt >= 1);
        for (int i = 0; i < nt; i++) assert_true(timed[i].time_ms >= 0);
        for (int i = 1; i < nt; i++) assert_true(timed[i].time_ms >= timed[i - 1].time_ms);
        assert_true(vdnn_cuda_conv_chosen(be, op, (vdnn_conv_pass)pass, &chosen));
        assert_true(chosen.deterministic);
        /* The op runs within what op_query told the planner. */
        size_t budget = pass == VDNN_CONV_FWD ? info.fwd_ws_bytes : info.bwd_ws_bytes;
        assert_true(chosen.ws_bytes <= budget);
        assert_int_equal(chosen.algo, list[0].algo);
        printf("conv 3x3 64->64 @28x28 b8 pass %d: %d candidates, chosen %s (%zu bytes), fastest measured %s %.3f ms\n",
               pass, n, chosen.name, chosen.ws_bytes, timed[0].name, timed[0].time_ms);
    }
    /* A cap of 1 returns one entry. */
    vdnn_conv_algo one;
    int n1 = 0;
    vt_assert_ok(vdnn_cuda_conv_algos(be, &d, VDNN_CONV_FWD, false, &one, 1, &n1, &err), err);
    assert_int_equal(n1, 1);
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

/* Every candidate op_algos offers for a conv: query with d.algo = i reports candidate i's info and the op created
 * with it needs exactly that workspace; deterministic mode keeps one reproducible candidate. (The op harness
 * compares each candidate's results with the CPU's and checks every op's candidate list.) */
static void test_conv_candidates(void **state)
{
    GPU_OR_SKIP();
    unsetenv("VDNN_DETERMINISTIC");
    unsetenv("VDNN_CUDNN_BENCHMARK");
    vdnn_backend_t *g = gpu();
    vdnn_error err;
    const vdnn_op_desc convs[] = {
        vt_conv(vt_shape(4, 16, 28, 28), 32, 3, 1, 1, 1, 1), vt_conv(vt_shape(8, 64, 28, 28), 64, 3, 1, 1, 1, 1),
        vt_conv(vt_shape(2, 3, 56, 56), 16, 7, 2, 3, 1, 0),  vt_conv(vt_shape(4, 32, 14, 14), 64, 1, 1, 0, 1, 1),
        vt_conv(vt_shape(2, 32, 14, 14), 64, 3, 1, 1, 4, 1), vt_conv(vt_shape(4, 8, 16, 16), 16, 5, 1, 2, 1, 1),
        vt_conv(vt_shape(2, 3, 63, 63), 16, 11, 4, 2, 1, 1),
    };
    const int n_convs = (int)(sizeof convs / sizeof convs[0]);
    int several = 0;
    for (int k = 0; k < n_convs; k++) {
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vt_assert_ok(g->ops->op_algos(g, &convs[k], algos, &n, &err), err);
        assert_true(n >= 1 && n <= VDNN_MAX_ALGOS);
        assert_string_equal(algos[0].name, "fastest");
        several += n > 1;
        size_t least_fwd = SIZE_MAX, least_bwd = SIZE_MAX;
        for (int i = 0; i < n; i++) {
            least_fwd = algos[i].info.fwd_ws_bytes < least_fwd ? algos[i].info.fwd_ws_bytes : least_fwd;
            least_bwd = algos[i].info.bwd_ws_bytes < least_bwd ? algos[i].info.bwd_ws_bytes : least_bwd;
        }
        for (int i = 0; i < n; i++) {
            vdnn_op_desc d = convs[k];
            d.algo = i;
            for (int j = 0; j < i; j++) {
                assert_string_not_equal(algos[i].name, algos[j].name);
                if (algos[i].numerics >= 0) assert_int_not_equal(algos[i].numerics, algos[j].numerics);
            }
            vdnn_op_info info;
            vt_assert_ok(g->ops->op_query(g, &d, &info, &err), err);
            assert_int_equal(info.fwd_ws_bytes, algos[i].info.fwd_ws_bytes);
            assert_int_equal(info.bwd_ws_bytes, algos[i].info.bwd_ws_bytes);
            assert_int_equal(info.aux_bytes, algos[i].info.aux_bytes);
            assert_true(info.bwd_needs_x == algos[i].info.bwd_needs_x && info.bwd_needs_y == algos[i].info.bwd_needs_y);
            /* The planner sizes the workspace from query: the op needs exactly that. */
            vdnn_op *op = NULL;
            vt_assert_ok(g->ops->op_create(g, &d, &op, &err), err);
            vdnn_conv_algo ch[VDNN_CONV_PASS_COUNT];
            for (int pass = 0; pass < VDNN_CONV_PASS_COUNT; pass++)
                assert_true(vdnn_cuda_conv_chosen(g, op, (vdnn_conv_pass)pass, &ch[pass]));
            assert_int_equal(ch[VDNN_CONV_FWD].ws_bytes, info.fwd_ws_bytes);
            size_t bwd = ch[VDNN_CONV_BWD_DATA].ws_bytes > ch[VDNN_CONV_BWD_FILTER].ws_bytes ? ch[VDNN_CONV_BWD_DATA].ws_bytes
                                                                                              : ch[VDNN_CONV_BWD_FILTER].ws_bytes;
            assert_int_equal(bwd, info.bwd_ws_bytes);
            g->ops->op_destroy(g, op);
            if (!strcmp(algos[i].name, "no-workspace")) assert_true(info.fwd_ws_bytes == 0 && info.bwd_ws_bytes == 0);
            if (!strcmp(algos[i].name, "no-workspace") || !strcmp(algos[i].name, "least-workspace"))
                assert_true(info.fwd_ws_bytes == least_fwd && info.bwd_ws_bytes == least_bwd);
            printf("conv %d candidate %d %-16s fwd %-26s %9zu B, bwd-data %-20s bwd-filter %-22s %9zu B, numerics %d\n", k,
                   i, algos[i].name, ch[0].name, info.fwd_ws_bytes, ch[1].name, ch[2].name, info.bwd_ws_bytes,
                   algos[i].numerics);
        }
    }
    /* The point of the candidates: some layer can trade speed for workspace. */
    assert_true(several > 0);

    vdnn_backend_destroy(g);

    /* Deterministic mode pins one reproducible candidate. */
    setenv("VDNN_DETERMINISTIC", "1", 1);
    g = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    vdnn_op_algo one[VDNN_MAX_ALGOS];
    int n1 = 0;
    for (int k = 0; k < n_convs; k++) {
        vt_assert_ok(g->ops->op_algos(g, &convs[k], one, &n1, &err), err);
        assert_int_equal(n1, 1);
        assert_true(one[0].numerics >= 0);
    }
    vdnn_backend_destroy(g);
}

/* ---------------- training ---------------- */

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[4];
    int correct;
    double eval_loss;
    int offloads;
    size_t managed_bytes;
} run_result;

static void train_lenet(vdnn_backend_t *be, vdnn_policy pol, int steps, run_result *r)
{
    vdnn_error err;
    vdnn_graph_t *g = NULL;
    vt_assert_ok(vdnn_graph_load(VDNN_SOURCE_DIR "/models/lenet.cfg", &g, &err), err);
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = 8;
    cfg.in_c = 1, cfg.in_h = 28, cfg.in_w = 28;
    cfg.classes = 10;
    cfg.memory.policy = pol;
    cfg.seed = 7;
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    r->offloads = 0;
    r->managed_bytes = net->managed_bytes;
    assert_true((net->managed != NULL) == (pol == VDNN_POLICY_UM));
    for (int i = 0; i < net->plan_train->n_actions; i++) r->offloads += net->plan_train->actions[i].kind == VDNN_ACT_OFFLOAD;
    float *images = floats(8 * 28 * 28);
    int32_t labels[8];
    for (int s = 0; s < steps; s++) {
        vt_fill_uniform(images, 8 * 28 * 28, 1000 + (uint64_t)s, 0, 1);
        for (int i = 0; i < 8; i++) labels[i] = (int32_t)((i * 3 + s) % 10);
        vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, &r->loss[s], &err), err);
    }
    /* A short evaluation batch: inference ops, padding, fetching the probabilities. */
    vt_assert_ok(vdnn_net_eval_batch(net, images, labels, 5, &r->correct, &r->eval_loss, &err), err);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
    vdnn_graph_free(g);
    free(images);
}

static void same_parameters(const char *what, const vdnn_checkpoint *a, const vdnn_checkpoint *b)
{
    assert_int_equal(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        assert_string_equal(a->tensors[i].name, b->tensors[i].name);
        assert_int_equal(a->tensors[i].count, b->tensors[i].count);
        if (memcmp(a->tensors[i].data, b->tensors[i].data, a->tensors[i].count * sizeof(float)))
            fail_msg("%s: tensor %s differs", what, a->tensors[i].name);
    }
}

static void test_training_policies(void **state)
{
    GPU_OR_SKIP();
    setenv("VDNN_DETERMINISTIC", "1", 1);
    vdnn_backend_t *be = gpu();
    unsetenv("VDNN_DETERMINISTIC");
    const int steps = 3;
    const vdnn_policy pols[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_UM};
    enum { N_POLS = 4 };
    run_result r[N_POLS];
    for (int p = 0; p < N_POLS; p++) {
        memset(&r[p], 0, sizeof r[p]);
        train_lenet(be, pols[p], steps, &r[p]);
        for (int s = 0; s < steps; s++) assert_true(isfinite(r[p].loss[s]));
    }
    assert_int_equal(r[0].offloads, 0);
    assert_true(r[1].offloads > 0);
    assert_true(r[2].offloads > 0);
    /* um migrates what all copies, through managed memory. */
    assert_int_equal(r[3].offloads, r[1].offloads);
    assert_true(r[3].managed_bytes > 0 && r[1].managed_bytes == 0);
    for (int p = 1; p < N_POLS; p++) {
        char what[64];
        snprintf(what, sizeof what, "policy %s vs none", vdnn_policy_name(pols[p]));
        same_parameters(what, &r[p].ck, &r[0].ck);
        assert_memory_equal(r[p].loss, r[0].loss, sizeof(float) * (size_t)steps);
        assert_int_equal(r[p].correct, r[0].correct);
        assert_true(r[p].eval_loss == r[0].eval_loss);
    }
    /* Run to run, too. */
    run_result again;
    memset(&again, 0, sizeof again);
    train_lenet(be, VDNN_POLICY_ALL, steps, &again);
    same_parameters("second run", &again.ck, &r[0].ck);

    /* The CPU backend trains the same net to the same losses, up to FP32 rounding. */
    vdnn_backend_t *c = cpu();
    run_result rc;
    memset(&rc, 0, sizeof rc);
    train_lenet(c, VDNN_POLICY_NONE, steps, &rc);
    for (int s = 0; s < steps; s++) {
        double tol = s == 0 ? 1e-4 : 1e-2;
        if (!(fabs((double)r[0].loss[s] - (double)rc.loss[s]) <= tol * fmax(1.0, fabs((double)rc.loss[s]))))
            fail_msg("step %d: cuda loss %.7f vs cpu %.7f", s, (double)r[0].loss[s], (double)rc.loss[s]);
    }
    assert_true(fabs(r[0].eval_loss - rc.eval_loss) <= 1e-2 * fmax(1.0, rc.eval_loss));

    for (int p = 0; p < N_POLS; p++) vdnn_checkpoint_release(&r[p].ck);
    vdnn_checkpoint_release(&again.ck);
    vdnn_checkpoint_release(&rc.ck);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
}

/* A managed pool larger than the free device memory is refused before anything is allocated. The net is a chain
 * of 3x3 convolutions on 16x256x256 maps at batch 256: each map is 1 GiB and swapped, so the pool grows 1 GiB
 * per layer, and there are 8 layers more than the device has free GiB. Never allocated: on a shared GPU that
 * much Unified Memory could hang the device. */
static void test_um_oversubscription_refused(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t free0 = be->ops->dev_free_bytes(be);
    assert_true(free0 > 0 && free0 < SIZE_MAX);
    const int layers = (int)(free0 >> 30) + 8;
    size_t cap = 256 + (size_t)layers * 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text + len, cap - len, "[net]\nname=um_big\ninput=16x256x256\nclasses=10\n");
    for (int l = 0; l < layers; l++)
        len += (size_t)snprintf(text + len, cap - len, "[conv%d]\ntype=conv\nfilters=16\nsize=3\npad=1\nbias=0\n", l);
    len += (size_t)snprintf(text + len, cap - len, "[gap]\ntype=gap\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n");
    assert_true(len < cap);
    vdnn_graph_t *g = NULL;
    vt_assert_ok(vdnn_graph_parse(text, "um_big.cfg", &g, &err), err);
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = 256;
    cfg.in_c = 16, cfg.in_h = 256, cfg.in_w = 256;
    cfg.classes = 10;
    cfg.memory.policy = VDNN_POLICY_UM;
    vdnn_net_t *net = (vdnn_net_t *)&net;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "memory.allow_oversubscribe");
    assert_null(net);
    printf("%d layers, free %zu bytes: %s\n", layers, free0, err.msg);
    /* Nothing was allocated (some slack for what cuDNN's heuristics may load). */
    const size_t free1 = be->ops->dev_free_bytes(be);
    if (free1 + ((size_t)256 << 20) < free0) fail_msg("free device memory went from %zu to %zu bytes", free0, free1);
    vdnn_graph_free(g);
    free(text);
    vdnn_backend_destroy(be);
}

#endif /* VDNN_HAVE_CUDA */

int main(void)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_status st = vdnn_backend_cuda_create(0, 0, &be, &err);
    if (st == VDNN_ERR_NO_DEVICE) {
        /* The backend's message names the driver this build needs and the one installed. */
        snprintf(skip_reason, sizeof skip_reason, "%s", err.msg);
        printf("SKIP: %s\n", skip_reason);
    } else if (st == VDNN_OK) {
        vdnn_backend_destroy(be);
    } /* any other failure is left for the tests to report */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_or_reason),
#ifdef VDNN_HAVE_CUDA
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_memory_and_queues),
        cmocka_unit_test(test_elementwise_vs_cpu),
        cmocka_unit_test(test_op_errors),
        cmocka_unit_test(test_conv_algorithms),
        cmocka_unit_test(test_conv_candidates),
        cmocka_unit_test(test_training_policies),
        cmocka_unit_test(test_um_oversubscription_refused),
#endif
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed) return 1;
    return skip_reason[0] ? VT_EXIT_SKIPPED : 0;
}
