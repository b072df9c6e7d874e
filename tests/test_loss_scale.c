/* Dynamic loss scaling (exec/loss_scale.h): the scaler's rule (GradScaler's), the CPU backend's finite check, and
 * the training step on the CPU with fp32 maps: a power-of-two scale gives the unscaled run's parameters bit for bit,
 * an overflowing one skips the step (parameters untouched, counted, scale halved); fp16 nets stay refused here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"
#include "exec/loss_scale.h"
#include "vdnn/net.h"

/* A small net with a convolution, batch norm and pooling before a classifier. */
static const char small_cfg[] = "[net]\nname=small\n"
                                "[conv1]\ntype=conv\nfilters=6\nsize=3\npad=1\nbias=1\n"
                                "[bn1]\ntype=batchnorm\n"
                                "[relu1]\ntype=relu\n"
                                "[pool1]\ntype=maxpool\nsize=2\n"
                                "[flat]\ntype=flatten\n"
                                "[fc]\ntype=fc\noutputs=classes\n"
                                "[loss]\ntype=softmax\n";

#define BATCH 8
#define SIDE 8

static void test_scaler_rule(void **state)
{
    vdnn_loss_scaler s;
    vdnn_loss_scaler_init(&s, VDNN_LOSS_SCALE_INIT);
    assert_true(s.scale == 65536.0f && s.growth == 2.0f && s.backoff == 0.5f && s.interval == 2000);
    for (int i = 0; i < 1999; i++) assert_true(vdnn_loss_scaler_step(&s, true));
    assert_true(s.scale == 65536.0f);
    assert_true(vdnn_loss_scaler_step(&s, true)); /* the 2000th good step in a row */
    assert_true(s.scale == 131072.0f);
    assert_int_equal(s.good, 0);
    /* An overflow skips, halves and starts the count again. */
    for (int i = 0; i < 1500; i++) assert_true(vdnn_loss_scaler_step(&s, true));
    assert_false(vdnn_loss_scaler_step(&s, false));
    assert_true(s.scale == 65536.0f);
    assert_int_equal(s.good, 0);
    assert_false(vdnn_loss_scaler_step(&s, false));
    assert_true(s.scale == 32768.0f);
    for (int i = 0; i < 1999; i++) vdnn_loss_scaler_step(&s, true);
    assert_true(s.scale == 32768.0f); /* the 1500 before the overflow do not count */
    vdnn_loss_scaler_step(&s, true);
    assert_true(s.scale == 65536.0f);
    assert_int_equal(s.skipped, 2);
    assert_int_equal(s.applied, 2000 + 1500 + 2000);
    /* A growth past the float range leaves the scale. */
    vdnn_loss_scaler_init(&s, ldexpf(1.0f, 127));
    s.interval = 1;
    assert_true(vdnn_loss_scaler_step(&s, true));
    assert_true(s.scale == ldexpf(1.0f, 127));
}

static void test_cpu_all_finite(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_error err;
    const size_t n = 300001; /* past the threaded loops' threshold */
    float *a = malloc(n * sizeof *a), *b = malloc(7 * sizeof *b);
    assert_true(a && b);
    vt_fill_uniform(a, n, 5, -1e30f, 1e30f);
    vt_fill_uniform(b, 7, 6, -1, 1);
    const float *x[2] = {a, b};
    const size_t ns[2] = {n, 7};
    bool fin = false;
    vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
    assert_true(fin);
    const float bad[] = {INFINITY, -INFINITY, NAN};
    const size_t where[] = {0, n / 2, n - 1};
    for (int k = 0; k < 3; k++)
        for (int w = 0; w < 3; w++) {
            const float keep = a[where[w]];
            a[where[w]] = bad[k];
            fin = true;
            vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
            if (fin) fail_msg("%g at %zu not found", (double)bad[k], where[w]);
            a[where[w]] = keep;
        }
    b[6] = NAN;
    fin = true;
    vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
    assert_false(fin);
    vt_assert_ok(be->ops->all_finite(be, x, ns, 0, &fin, &err), err);
    assert_true(fin); /* no tensors: nothing to find */
    const float *none[1] = {NULL};
    vt_assert_error(be->ops->all_finite(be, none, ns, 1, &fin, &err), err, VDNN_ERR_INVALID_ARG, "tensor 0 is NULL");
    vt_assert_error(be->ops->all_finite(be, x, ns, 2, NULL, &err), err, VDNN_ERR_INVALID_ARG, "all_finite");
    free(a);
    free(b);
}

static vdnn_net_t *make_net(vdnn_backend_t *be, vdnn_graph_t *g, int batch, float loss_scale, vdnn_optimizer opt)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = batch;
    cfg.in_c = 1;
    cfg.in_h = cfg.in_w = SIDE;
    cfg.classes = 10;
    cfg.seed = 11;
    cfg.loss_scale = loss_scale;
    cfg.optimizer = opt;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    return net;
}

/* Every parameter and moment of the net, in order, into one host array (*n values); batch norm's running statistics
 * too unless skip_stats (forward updates them whether or not the step's update is skipped, as in PyTorch). */
static float *params_of(vdnn_net_t *net, bool skip_stats, size_t *n)
{
    vdnn_error err;
    size_t total = 0;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        if (!skip_stats || strcmp(pi.kind, "stats")) total += pi.count;
    }
    float *all = malloc(total * sizeof *all);
    assert_non_null(all);
    size_t at = 0;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        if (skip_stats && !strcmp(pi.kind, "stats")) continue;
        vt_assert_ok(vdnn_net_get(net, pi.name, all + at, pi.count, &err), err);
        at += pi.count;
    }
    *n = total;
    return all;
}

static void batch_of(int step, float *images, int32_t *labels)
{
    vt_fill_uniform(images, (size_t)BATCH * SIDE * SIDE, 100 + (uint64_t)step, -1, 1);
    for (int i = 0; i < BATCH; i++) labels[i] = (i * 7 + step) % 10;
}

static void train(vdnn_net_t *net, int steps, float *losses)
{
    float images[BATCH * SIDE * SIDE];
    int32_t labels[BATCH];
    vdnn_error err;
    for (int s = 0; s < steps; s++) {
        batch_of(s, images, labels);
        vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, losses ? &losses[s] : NULL, &err), err);
    }
}

/* Scaling the loss gradient by a power of two and the parameter gradients back is exact: the same floats. */
static void test_scaled_equals_unscaled(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small_cfg, "small.cfg", &g, &err), err);
    const vdnn_optimizer opts[2] = {VDNN_OPTIMIZER_SGD, VDNN_OPTIMIZER_ADAMW};
    for (int o = 0; o < 2; o++) {
        vdnn_net_t *plain = make_net(be, g, BATCH, -1.0f, opts[o]), *scaled = make_net(be, g, BATCH, 1024.0f, opts[o]);
        float lp[3], ls[3];
        train(plain, 3, lp);
        train(scaled, 3, ls);
        size_t n1, n2;
        float *p1 = params_of(plain, false, &n1), *p2 = params_of(scaled, false, &n2);
        assert_int_equal(n1, n2);
        for (size_t i = 0; i < n1; i++)
            if (memcmp(&p1[i], &p2[i], sizeof(float)))
                fail_msg("%s: value %zu of the parameters differs: %.9g scaled, %.9g not", o ? "adamw" : "sgd", i,
                         (double)p2[i], (double)p1[i]);
        assert_memory_equal(lp, ls, sizeof lp);
        vdnn_net_stats st;
        vdnn_net_get_stats(scaled, &st);
        assert_true(st.loss_scaling);
        assert_true(st.loss_scale == 1024.0f);
        assert_int_equal(st.skipped_steps, 0);
        assert_int_equal(st.step, 3);
        vdnn_net_get_stats(plain, &st);
        assert_false(st.loss_scaling);
        assert_true(st.loss_scale == 0.0f);
        free(p1);
        free(p2);
        vdnn_net_free(plain);
        vdnn_net_free(scaled);
    }
    vdnn_graph_free(g);
}

/* A scale so large that the gradients overflow (one sample: the loss gradient is about 2^127 itself): the step is
 * skipped (nothing changes), counted, the scale halved, until it is small enough; then the updates apply. */
static void test_overflow_skips(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small_cfg, "small.cfg", &g, &err), err);
    vdnn_net_t *net = make_net(be, g, 1, ldexpf(1.0f, 127), VDNN_OPTIMIZER_SGD);
    size_t n0, n1;
    float *before = params_of(net, true, &n0);
    float images[BATCH * SIDE * SIDE];
    int32_t labels[BATCH];
    batch_of(0, images, labels);
    vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, NULL, &err), err);
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    assert_int_equal(st.skipped_steps, 1);
    assert_int_equal(st.step, 1);
    assert_true(st.loss_scale == ldexpf(1.0f, 126));
    float *after = params_of(net, true, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0 * sizeof(float)); /* momentum too: no update ran */
    free(after);
    /* Each skip halves the scale: within 127 steps one goes through. */
    int steps = 1;
    while (st.skipped_steps == steps && steps < 127) {
        vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, NULL, &err), err);
        steps++;
        vdnn_net_get_stats(net, &st);
    }
    assert_true(st.skipped_steps < steps);
    assert_true(st.loss_scale == ldexpf(1.0f, 127 - (int)st.skipped_steps));
    after = params_of(net, true, &n1);
    assert_true(memcmp(before, after, n0 * sizeof(float)) != 0);
    printf("overflow: %lld steps skipped, then an update at scale 2^%d\n", (long long)st.skipped_steps,
           127 - (int)st.skipped_steps);
    free(before);
    free(after);
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void test_options_refused(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small_cfg, "small.cfg", &g, &err), err);
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = BATCH;
    cfg.in_c = 1;
    cfg.in_h = cfg.in_w = SIDE;
    cfg.classes = 10;
    vdnn_net_t *net = NULL;
    cfg.loss_scale = 3.0f;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_INVALID_ARG, "loss_scale: 3");
    cfg.loss_scale = INFINITY;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_INVALID_ARG, "power of two");
    /* fp16 (and so its loss scaling) runs on CUDA only. */
    cfg.loss_scale = 0.0f;
    cfg.memory.precision = VDNN_PRECISION_FP16;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_UNSUPPORTED, "fp16");
    assert_null(net);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaler_rule),
        cmocka_unit_test(test_cpu_all_finite),
        cmocka_unit_test(test_scaled_equals_unscaled),
        cmocka_unit_test(test_overflow_skips),
        cmocka_unit_test(test_options_refused),
    };
    return cmocka_run_group_tests(tests, vt_cpu_backend_setup, vt_cpu_backend_teardown);
}
