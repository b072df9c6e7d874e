/* The CPU ops' contract with the planner and the executor, as op_query and op_algos state it without running
 * anything (what backward reads, in-place permissions, aux and workspace sizes, the convolution candidates),
 * and the descriptions and arguments the ops refuse. The op harness (test_ops.c) checks that running ops keep
 * what these numbers promise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h" /* op->info, to check op_create fills it */
#include "op_desc.h"
#include "op_exec.h"
#include "testutil.h"

#define S vt_shape

static vdnn_backend_t *cpu(size_t conv_chunk_bytes)
{
    vdnn_cpu_options o = {.threads = 2, .conv_chunk_bytes = conv_chunk_bytes};
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    vt_assert_ok(vdnn_backend_cpu_create(&o, &be, &err), err);
    return be;
}

/* The planner trusts these flags: each one per the op's semantics, and op_create keeps what query said. */
static void test_info_flags(void **state)
{
    vdnn_backend_t *be = cpu(0);
    const vdnn_shape s = S(2, 4, 6, 6), cat[2] = {S(2, 3, 4, 4), S(2, 2, 4, 4)}, two[2] = {s, s};
    struct {
        const char *name;
        vdnn_op_desc d;
        bool needs_x, needs_y, inplace, has_aux, no_ws; /* no_ws: the hand-written ops need no scratch */
    } cases[] = {
        {"conv", vt_conv(s, 4, 3, 1, 1, 1, 1), true, false, false, false, false},
        {"maxpool", vt_pool(VDNN_LAYER_MAXPOOL, s, 2, 2, 0), false, false, false, true, false},
        {"avgpool", vt_pool(VDNN_LAYER_AVGPOOL, s, 2, 2, 0), false, false, false, false, false},
        {"relu", vt_relu(s), false, false, true, true, false}, /* a bit mask as aux */
        {"lrn", vt_lrn(s, 5, 1e-4f, 0.75f, 2.f), true, false, false, false, false},
        {"batchnorm training", vt_bn(s, true), true, false, false, true, false},
        {"batchnorm inference", vt_bn(s, false), false, false, false, false, false},
        {"fc", vt_fc(s, 5, 1), true, false, false, false, false},
        {"dropout", vt_dropout(s, 0.5f, true), false, false, true, false, true},
        {"concat", vt_multi(VDNN_LAYER_CONCAT, 2, cat), false, false, false, false, true},
        {"add", vt_multi(VDNN_LAYER_ADD, 2, two), false, false, false, false, true},
        {"gap", vt_gap(s), false, false, false, false, true},
        {"flatten", vt_flatten(s), false, false, true, false, true},
        {"softmax_xent", vt_xent(2, 5), false, true, false, false, true},
        /* Sigmoid, hard-sigmoid and clip find their slope from y; hard-swish and SiLU need x. */
        {"sigmoid", vt_act(VDNN_LAYER_SIGMOID, s), false, true, true, false, false},
        {"hardsigmoid", vt_hardsigmoid(s, 0.2f, 0.5f), false, true, true, false, true},
        {"hardswish", vt_act(VDNN_LAYER_HARDSWISH, s), true, false, false, false, false},
        {"silu", vt_act(VDNN_LAYER_SILU, s), true, false, false, false, false},
        {"clip", vt_clip(s, 0.0f, 6.0f), false, true, true, false, false},
        {"channel_mul", vt_channel_mul(s), true, false, false, false, true},
        /* Own window loops: max pooling's argmax in aux, nothing else kept. */
        {"maxpool ceil", vt_pool_win(VDNN_LAYER_MAXPOOL, S(2, 4, 6, 6), 3, 3, 2, 2, 0, 0, true, false), false, false,
         false, true, true},
        {"avgpool padding left out", vt_pool_win(VDNN_LAYER_AVGPOOL, s, 3, 3, 1, 1, 1, 1, false, true), false, false,
         false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vdnn_op_info info;
        vdnn_error err = {0};
        memset(&info, 0xff, sizeof info);
        vt_assert_ok(be->ops->op_query(be, &cases[i].d, &info, &err), err);
        if (info.bwd_needs_x != cases[i].needs_x || info.bwd_needs_y != cases[i].needs_y ||
            info.inplace_ok != cases[i].inplace)
            fail_msg("%s: needs_x %d needs_y %d inplace %d, expected %d %d %d", cases[i].name, info.bwd_needs_x,
                     info.bwd_needs_y, info.inplace_ok, cases[i].needs_x, cases[i].needs_y, cases[i].inplace);
        if ((info.aux_bytes > 0) != cases[i].has_aux) fail_msg("%s: aux_bytes %zu", cases[i].name, info.aux_bytes);
        if (cases[i].no_ws && (info.fwd_ws_bytes || info.bwd_ws_bytes))
            fail_msg("%s: workspace %zu + %zu bytes", cases[i].name, info.fwd_ws_bytes, info.bwd_ws_bytes);
        vdnn_op *op = NULL;
        vt_assert_ok(be->ops->op_create(be, &cases[i].d, &op, &err), err);
        char msg[256];
        if (!vt_op_info_same(&op->info, &info, msg, sizeof msg))
            fail_msg("%s: op_create's info differs from op_query's: %s", cases[i].name, msg);
        be->ops->op_destroy(be, op);
    }
    /* Batchnorm keeps the batch mean and variance per channel. */
    vdnn_op_info info;
    vdnn_error err = {0};
    const vdnn_op_desc bn = vt_bn(s, true);
    vt_assert_ok(be->ops->op_query(be, &bn, &info, &err), err);
    assert_int_equal(info.aux_bytes, 2 * 4 * sizeof(float));
    vdnn_backend_destroy(be);
}

/* With a small chunk cap (16 channels of 10x10: 6400 bytes an image) a 3x3 stride-1 convolution offers four
 * candidates (fast with Winograd, direct, lean, lean-direct), a stride-2 one two (no Winograd): the lean ones
 * copy one image at a time and need less workspace, and every candidate's numerics differ from the default's.
 * (The op harness checks every op's candidate list on every backend: one "default" for ops other than conv,
 * indices outside the list refused.) */
static void test_conv_candidates(void **state)
{
    vdnn_backend_t *be = cpu(2 * 6400);
    vdnn_error err = {0};
    const vdnn_op_desc descs[2] = {vt_conv(S(5, 16, 10, 10), 16, 3, 1, 1, 1, 1),
                                   vt_conv(S(5, 16, 10, 10), 16, 3, 2, 1, 1, 0)};
    const int expect[2] = {4, 2};
    for (int k = 0; k < 2; k++) {
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vt_assert_ok(be->ops->op_algos(be, &descs[k], algos, &n, &err), err);
        assert_int_equal(n, expect[k]);
        assert_true(algos[n - 1].info.bwd_ws_bytes < algos[0].info.bwd_ws_bytes);
        for (int a = 1; a < n; a++) assert_true(algos[a].numerics != algos[0].numerics);
        /* dx over dy needs the same shape in and out. */
        for (int a = 0; a < n; a++) assert_int_equal(algos[a].info.bwd_inplace_ok, k == 0);
    }
    vdnn_backend_destroy(be);
}

static void test_refused_descriptions(void **state)
{
    vdnn_backend_t *be = cpu(0);
    vdnn_error err = {0};
    vdnn_op_info info;
    vdnn_op *op = (vdnn_op *)&op;

    vdnn_op_desc d = vt_op(VDNN_LAYER_INPUT, S(1, 1, 2, 2), S(1, 1, 2, 2));
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "input");
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_INVALID_ARG, "input");
    assert_null(op);
    d.kind = (vdnn_layer_kind)99;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "99");

    d = vt_conv(S(1, 3, 6, 6), 4, 3, 1, 1, 2, 1);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "groups");
    d = vt_conv(S(1, 3, 6, 6), 4, 3, 1, 1, 1, 1);
    d.out.h = 5;
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_SHAPE, "expected 1x4x6x6");
    assert_null(op);
    d = vt_pool(VDNN_LAYER_MAXPOOL, S(1, 3, 6, 6), 2, 2, 2);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "pad 2x2");
    d = vt_lrn(S(1, 6, 3, 3), 4, 1e-4f, 0.75f, 2.f);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "size 4");
    d = vt_bn(S(1, 3, 1, 1), true);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "more than 1 value");
    d = vt_fc(S(2, 3, 2, 2), 4, 1);
    d.out.c = 5;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "4 outputs");
    const vdnn_shape cat[2] = {S(2, 3, 4, 4), S(2, 2, 4, 4)}, two[2] = {S(2, 3, 4, 4), S(2, 3, 4, 4)};
    d = vt_multi(VDNN_LAYER_CONCAT, 2, cat);
    d.out.c = 6;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "sum to 5");
    d = vt_multi(VDNN_LAYER_ADD, 2, two);
    d.in[1].h = 3;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "input 1");
    d = vt_dropout(S(2, 3, 4, 4), 1.5f, true);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "1.5");
    d = vt_gap(S(2, 3, 4, 4));
    d.out.h = 2;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "gap");
    d = vt_clip(S(2, 3, 4, 4), 6.0f, 6.0f);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "clip: bounds 6 and 6");
    d = vt_hardsigmoid(S(2, 3, 4, 4), NAN, 0.5f);
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_INVALID_ARG, "must be finite");
    d = vt_act(VDNN_LAYER_SILU, S(2, 3, 4, 4));
    d.out.c = 2;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "silu: output 2x2x4x4");
    d = vt_channel_mul(S(2, 3, 4, 4));
    d.in[1].h = 4;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "expected 2x3x1x1");
    /* A ceil-mode pooling whose output was sized by the floor rule. */
    d = vt_pool_win(VDNN_LAYER_MAXPOOL, S(1, 3, 8, 8), 3, 3, 2, 2, 0, 0, true, false);
    d.out.h = d.out.w = 3;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "expected 1x3x4x4, ceil mode");
    vdnn_backend_destroy(be);
}

/* Missing buffers are reported, not dereferenced. */
static void test_missing_buffers(void **state)
{
    vdnn_backend_t *be = cpu(0);
    vdnn_error err = {0};
    const vdnn_op_desc descs[4] = {vt_bn(S(2, 3, 2, 2), true), vt_conv(S(1, 3, 6, 6), 4, 3, 1, 1, 1, 1),
                                   vt_pool_win(VDNN_LAYER_MAXPOOL, S(1, 3, 6, 6), 3, 3, 2, 2, 0, 0, true, false),
                                   vt_channel_mul(S(2, 3, 4, 4))};
    for (int k = 0; k < 4; k++) {
        vt_op_data in;
        vt_op_data_random(&in, "missing buffers", &descs[k], VT_FILL_UNIFORM, 140 + (uint64_t)k);
        vt_exec e;
        vt_exec_open(&e, be, &in, 0);
        vt_exec_upload(&e);
        vdnn_op_args a = {.x = {e.x[0]}, .y = e.y, .w = e.w, .b = e.b, .stats = e.stats, .aux = e.aux, .ws = e.ws};
        if (k == 0) {
            a.aux = NULL;
            vt_assert_error(be->ops->op_forward(be, e.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "aux");
            a.aux = e.aux, a.update_stats = true, a.stats = NULL;
            vt_assert_error(be->ops->op_forward(be, e.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "running statistics");
        } else if (k == 1) {
            a.w = NULL;
            vt_assert_error(be->ops->op_forward(be, e.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "weights");
        } else {
            /* Backward without what it reads: max pooling's argmax, the scales of channel_mul. */
            vdnn_op_args b = {.x = {e.x[0]}, .dy = e.dy, .dx = {e.dx[0]}};
            vt_assert_error(be->ops->op_backward(be, e.op, &b, &err), err, VDNN_ERR_INVALID_ARG,
                            k == 2 ? "argmax (aux)" : "NULL x");
        }
        vt_exec_close(&e);
        vt_op_data_free(&in);
    }
    vdnn_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_flags),
        cmocka_unit_test(test_conv_candidates),
        cmocka_unit_test(test_refused_descriptions),
        cmocka_unit_test(test_missing_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
