/* The CPU ops' contract with the planner and the executor, as op_query and op_algos state it without running
 * anything (what backward reads, in-place permissions, aux and workspace sizes, the convolution candidates),
 * the descriptions and arguments the ops refuse, and what changes with bf16 maps (the sizes, and the refusal on a
 * CPU without AVX-512 BF16, simulated). The op harness (test_ops.c) checks that running ops keep what these
 * numbers promise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h" /* op->info, to check op_create fills it; oneDNN's ISA */
#include "backend/op_check.h"
#include "op_desc.h"
#include "op_exec.h"
#include "testutil.h"

#define S vt_shape

static vdnn_backend_t *cpu_with(vdnn_cpu_options o)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    vt_assert_ok(vdnn_backend_cpu_create(&o, &be, &err), err);
    return be;
}

static vdnn_backend_t *cpu(size_t conv_chunk_bytes)
{
    return cpu_with((vdnn_cpu_options){.threads = 2, .conv_chunk_bytes = conv_chunk_bytes});
}

/* One op of every kind (batch norm twice), with the flags its op_info must carry in fp32. */
#define KIND_CASES 22
typedef struct kind_case {
    const char *name;
    vdnn_op_desc d;
    bool needs_x, needs_y, inplace, has_aux, no_ws; /* no_ws: the hand-written ops need no scratch */
} kind_case;

static int kind_cases(kind_case *out)
{
    const vdnn_shape s = S(2, 4, 6, 6), cat[2] = {S(2, 3, 4, 4), S(2, 2, 4, 4)}, two[2] = {s, s};
    const kind_case cases[] = {
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
    _Static_assert(sizeof cases / sizeof cases[0] == KIND_CASES, "KIND_CASES counts the cases");
    memcpy(out, cases, sizeof cases);
    return KIND_CASES;
}

/* The planner trusts these flags: each one per the op's semantics, and op_create keeps what query said. */
static void test_info_flags(void **state)
{
    vdnn_backend_t *be = cpu(0);
    const vdnn_shape s = S(2, 4, 6, 6);
    kind_case cases[KIND_CASES];
    const int n_cases = kind_cases(cases);
    for (int i = 0; i < n_cases; i++) {
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

/* oneDNN 2.6 has Winograd convolution kernels for AVX-512 only (none for AVX2), so the candidates depend on the ISA
 * oneDNN may use here. */
static bool dnnl_has_winograd(void)
{
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core ||
           (isa & (unsigned)dnnl_cpu_isa_avx512_mic) == (unsigned)dnnl_cpu_isa_avx512_mic;
}

/* With a small chunk cap (16 channels of 10x10: 6400 bytes an image) a 3x3 stride-1 convolution offers four
 * candidates where oneDNN has Winograd (fast with Winograd, direct, lean, lean-direct) and two elsewhere (fast,
 * lean), a stride-2 one two (no Winograd): the lean ones copy one image at a time and need less workspace, and
 * every candidate's numerics differ from the default's.
 * (The op harness checks every op's candidate list on every backend: one "default" for ops other than conv,
 * indices outside the list refused.) */
static void test_conv_candidates(void **state)
{
    vdnn_backend_t *be = cpu(2 * 6400);
    vdnn_error err = {0};
    const vdnn_op_desc descs[2] = {vt_conv(S(5, 16, 10, 10), 16, 3, 1, 1, 1, 1),
                                   vt_conv(S(5, 16, 10, 10), 16, 3, 2, 1, 1, 0)};
    const bool wino = dnnl_has_winograd();
    print_message("oneDNN's ISA here: 0x%x, Winograd %s\n", (unsigned)dnnl_get_effective_cpu_isa(),
                  wino ? "available" : "not available");
    const int expect[2] = {wino ? 4 : 2, 2};
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

/* The kinds whose bf16 maps run on any CPU: a sequence model's (widened to fp32 code) and the own loops that read
 * bf16 a value at a time or copy it. */
static bool bf16_anywhere(vdnn_layer_kind k)
{
    switch (k) {
    case VDNN_LAYER_EMBED: case VDNN_LAYER_POS_EMBED: case VDNN_LAYER_LAYERNORM: case VDNN_LAYER_LINEAR:
    case VDNN_LAYER_ATTN_PROBS: case VDNN_LAYER_ATTN_MIX: case VDNN_LAYER_GELU: case VDNN_LAYER_ADD:
    case VDNN_LAYER_CONCAT: case VDNN_LAYER_FEAT_CAT: case VDNN_LAYER_DROPOUT: case VDNN_LAYER_SOFTMAX_XENT:
    case VDNN_LAYER_FLATTEN: case VDNN_LAYER_LSTM: case VDNN_LAYER_SEQ_CAT: case VDNN_LAYER_ATTN: return true;
    default: return false;
    }
}

/* Every other kind refuses bf16 on a CPU without AVX-512 BF16 (simulated through the backend option), in query, algos
 * and create alike, saying why; fp16 is refused on every CPU, an unknown type as a bad argument. fp32 is unaffected. */
static void test_reduced_precision_refused(void **state)
{
    vdnn_backend_t *no = cpu_with((vdnn_cpu_options){.threads = 2, .no_bf16 = true}), *be = cpu(0);
    kind_case cases[KIND_CASES];
    const int n_cases = kind_cases(cases);
    vdnn_error err = {0};
    for (int i = 0; i < n_cases; i++) {
        vdnn_op_desc d = cases[i].d;
        vdnn_op_info info;
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vdnn_op *op = (vdnn_op *)&op;
        vt_assert_ok(no->ops->op_query(no, &d, &info, &err), err);
        d.dtype = VDNN_DTYPE_BF16;
        if (bf16_anywhere(d.kind)) {
            vt_assert_ok(no->ops->op_query(no, &d, &info, &err), err);
            vt_assert_ok(no->ops->op_create(no, &d, &op, &err), err);
            no->ops->op_destroy(no, op);
            op = NULL;
        } else {
        vt_assert_error(no->ops->op_query(no, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "bf16 needs AVX-512 BF16");
        vt_assert_error(no->ops->op_query(no, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "no_bf16 option");
        vt_assert_error(no->ops->op_algos(no, &d, algos, &n, &err), err, VDNN_ERR_UNSUPPORTED, "AVX-512 BF16");
        vt_assert_error(no->ops->op_create(no, &d, &op, &err), err, VDNN_ERR_UNSUPPORTED, "AVX-512 BF16");
        assert_null(op);
        }
        d.dtype = VDNN_DTYPE_F16;
        vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "fp16 runs on CUDA only");
        d.dtype = (vdnn_dtype)9;
        vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "unknown data type 9");
    }
    vdnn_backend_destroy(no);
    vdnn_backend_destroy(be);
}

/* VDNN_CPU_ISA=no-bf16 does what the option does; "native" is the CPU itself; anything else is refused. */
static void test_reduced_precision_env(void **state)
{
    const char *old = getenv("VDNN_CPU_ISA");
    char saved[64] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    vdnn_op_desc d = vt_relu(S(1, 2, 3, 3));
    d.dtype = VDNN_DTYPE_BF16;
    vdnn_op_info info;
    vdnn_error err = {0};
    setenv("VDNN_CPU_ISA", "no-bf16", 1);
    vdnn_backend_t *be = cpu(0);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "VDNN_CPU_ISA=no-bf16");
    vdnn_backend_destroy(be);
    setenv("VDNN_CPU_ISA", "avx9000", 1);
    vdnn_cpu_options o = {0};
    be = (vdnn_backend_t *)&be;
    vt_assert_error(vdnn_backend_cpu_create(&o, &be, &err), err, VDNN_ERR_INVALID_ARG, "VDNN_CPU_ISA=avx9000");
    assert_null(be);
    setenv("VDNN_CPU_ISA", "native", 1);
    be = cpu(0);
    vdnn_status native = be->ops->op_query(be, &d, &info, &err);
    vdnn_backend_destroy(be);
    unsetenv("VDNN_CPU_ISA");
    be = cpu(0);
    assert_int_equal(be->ops->op_query(be, &d, &info, &err), native);
    vdnn_backend_destroy(be);
    if (old) setenv("VDNN_CPU_ISA", saved, 1);
}

/* With bf16 maps the flags stay those of fp32 (but softmax_xent's backward reads its logits, not y), kept state stays
 * fp32 (batch norm's statistics, relu's bit mask), and sizes follow the 2-byte values: a convolution's chunks hold
 * twice the images, LRN's backward scratch adds its float copies, FC's workspace holds a bf16 weights copy. */
static void test_bf16_info(void **state)
{
    vdnn_backend_t *be = cpu(0);
    vdnn_error err = {0};
    vdnn_op_desc probe = vt_relu(S(1, 1, 1, 1));
    vdnn_op_info info, f32;
    probe.dtype = VDNN_DTYPE_BF16;
    if (be->ops->op_query(be, &probe, &info, &err) == VDNN_ERR_UNSUPPORTED) {
        vdnn_backend_destroy(be);
        print_message("Skipped: %s\n", err.msg);
        skip();
    }
    kind_case cases[KIND_CASES];
    const int n_cases = kind_cases(cases);
    for (int i = 0; i < n_cases; i++) {
        vdnn_op_desc d = cases[i].d;
        vt_assert_ok(be->ops->op_query(be, &d, &f32, &err), err);
        d.dtype = VDNN_DTYPE_BF16;
        /* The ops ONNX import brought run in bf16 (on CUDA too); on the CPU own-window pooling keeps an fp32 copy of
         * dx in its backward workspace. */
        const bool act = d.kind >= VDNN_LAYER_SIGMOID && d.kind <= VDNN_LAYER_CHANNEL_MUL;
        const bool own_pool =
            (d.kind == VDNN_LAYER_MAXPOOL || d.kind == VDNN_LAYER_AVGPOOL) && vdnn_pool_own_windows(&d);
        if (act || own_pool) {
            vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
            if (own_pool && info.bwd_ws_bytes != vdnn_shape_count(d.in[0]) * sizeof(float))
                fail_msg("%s: bf16 backward workspace %zu bytes", cases[i].name, info.bwd_ws_bytes);
            continue;
        }
        vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
        const bool xent = d.kind == VDNN_LAYER_SOFTMAX_XENT;
        if (info.bwd_needs_x != (f32.bwd_needs_x || xent) || info.bwd_needs_y != (f32.bwd_needs_y && !xent) ||
            info.inplace_ok != f32.inplace_ok || info.bwd_inplace_ok != f32.bwd_inplace_ok)
            fail_msg("%s in bf16: needs_x %d needs_y %d inplace %d/%d; fp32: %d %d %d/%d", cases[i].name,
                     info.bwd_needs_x, info.bwd_needs_y, info.inplace_ok, info.bwd_inplace_ok, f32.bwd_needs_x,
                     f32.bwd_needs_y, f32.inplace_ok, f32.bwd_inplace_ok);
        if (d.kind == VDNN_LAYER_BATCHNORM || d.kind == VDNN_LAYER_RELU) assert_int_equal(info.aux_bytes, f32.aux_bytes);
        if (d.kind == VDNN_LAYER_LRN) assert_int_equal(2 * info.bwd_ws_bytes, 5 * f32.bwd_ws_bytes);
        if (d.kind == VDNN_LAYER_FC) {
            size_t nw, nb, ns;
            vt_op_param_counts(&d, &nw, &nb, &ns);
            assert_true(info.fwd_ws_bytes >= nw * 2);
        }
        vdnn_op *op = NULL;
        char msg[256];
        vt_assert_ok(be->ops->op_create(be, &d, &op, &err), err);
        if (!vt_op_info_same(&op->info, &info, msg, sizeof msg))
            fail_msg("%s in bf16: op_create's info differs from op_query's: %s", cases[i].name, msg);
        be->ops->op_destroy(be, op);
    }
    vdnn_backend_destroy(be);
    /* 16 channels of 10x10 under a 12.5 KiB cap: 2 images a chunk in fp32, 4 in bf16. */
    be = cpu(2 * 6400);
    vdnn_op_desc d = vt_conv(S(5, 16, 10, 10), 16, 3, 2, 1, 1, 0);
    vt_assert_ok(be->ops->op_query(be, &d, &f32, &err), err);
    d.dtype = VDNN_DTYPE_BF16;
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_int_equal(f32.chunk_images, 2);
    assert_int_equal(info.chunk_images, 4);
    vdnn_backend_destroy(be);
}

/* The sequence ops' flags (the planner trusts them), their sizes, and their refusals: a bad shape is a shape error,
 * a vocabulary a 16-bit type cannot hold UNSUPPORTED. */
static void test_sequence_ops(void **state)
{
    vdnn_backend_t *be = cpu(0);
    const vdnn_shape t = S(2, 1, 5, 8);
    const struct {
        const char *name;
        vdnn_op_desc d;
        bool needs_x, needs_y, inplace;
        size_t aux;
    } cases[] = {
        {"embed", vt_embed(2, 5, 11, 8), true, false, false, 0},
        {"pos_embed", vt_pos_embed(t, 7), false, false, true, 0},
        {"layernorm", vt_layernorm(t), true, false, false, 2 * 10 * sizeof(float)},
        {"linear", vt_linear(t, 6, 1), true, false, false, 0},
        {"attn_probs", vt_attn_probs(2, 5, 8, 2), true, true, false, 0},
        {"attn_mix", vt_attn_mix(2, 5, 8, 2), true, false, false, 0},
        {"attention (fused)", vt_attn(2, 5, 8, 2), true, false, false, 0},
        {"gelu", vt_act(VDNN_LAYER_GELU, t), true, false, false, 0},
        {"softmax_xent over tokens", vt_xent_seq(2, 5, 7), false, true, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vdnn_op_info info;
        vdnn_error err = {0};
        vt_assert_ok(be->ops->op_query(be, &cases[i].d, &info, &err), err);
        if (info.bwd_needs_x != cases[i].needs_x || info.bwd_needs_y != cases[i].needs_y ||
            info.inplace_ok != cases[i].inplace || info.aux_bytes != cases[i].aux)
            fail_msg("%s: needs_x %d needs_y %d inplace %d aux %zu, expected %d %d %d %zu", cases[i].name,
                     info.bwd_needs_x, info.bwd_needs_y, info.inplace_ok, info.aux_bytes, cases[i].needs_x,
                     cases[i].needs_y, cases[i].inplace, cases[i].aux);
        vdnn_op_desc d = cases[i].d;
        d.dtype = VDNN_DTYPE_BF16;
        /* The CPU runs them in bf16 with fp32's flags and aux (widened to its fp32 code, room for the fp32 copies in
         * the workspaces, or, on AVX-512 BF16, linear, layer norm and GELU on oneDNN's bf16 primitives, workspaces of
         * their own; the loss recomputes its softmax from the logits instead). */
        if (cases[i].d.kind == VDNN_LAYER_SOFTMAX_XENT) continue;
        vdnn_op_info half;
        vt_assert_ok(be->ops->op_query(be, &d, &half, &err), err);
        if (half.bwd_needs_x != info.bwd_needs_x || half.bwd_needs_y != info.bwd_needs_y ||
            half.aux_bytes != info.aux_bytes)
            fail_msg("%s in bf16: info differs from fp32's beyond the workspace", cases[i].name);
    }
    /* Shapes that do not fit are refused, naming the op. */
    const vdnn_op_desc bad[] = {
        vt_linear(t, 6, 1), vt_attn_probs(2, 5, 8, 3), vt_embed(2, 5, 11, 8), vt_pos_embed(t, 4),
    };
    vdnn_op_desc b0 = bad[0];
    b0.out.w = 7; /* not outputs= */
    vdnn_op_desc b2 = bad[2];
    b2.in[0].w = 2; /* two values per token */
    const vdnn_op_desc *refused[] = {&b0, &bad[1], &b2, &bad[3]};
    for (size_t i = 0; i < 4; i++) {
        vdnn_op_info info;
        vdnn_error err = {0};
        vdnn_status st = be->ops->op_query(be, refused[i], &info, &err);
        if (st != VDNN_ERR_SHAPE || !strstr(err.msg, vdnn_layer_kind_name(refused[i]->kind)))
            fail_msg("bad %s: %s \"%s\", expected a shape error naming it", vdnn_layer_kind_name(refused[i]->kind),
                     vdnn_status_name(st), err.msg);
    }
    /* Token ids in 16-bit maps: exact up to 256 in bf16 and 2048 in fp16; a larger vocabulary is refused naming the
     * op (both backends ask this check; the CPU's query too). */
    const struct {
        vdnn_dtype t;
        int vocab;
        bool ok;
    } ids[] = {{VDNN_DTYPE_BF16, 257, true},  {VDNN_DTYPE_BF16, 258, false}, {VDNN_DTYPE_F16, 2049, true},
               {VDNN_DTYPE_F16, 2050, false}, {VDNN_DTYPE_F32, 1 << 20, true}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        vdnn_op_desc v = vt_embed(1, 2, ids[i].vocab, 4);
        v.dtype = ids[i].t;
        vdnn_error e = {0};
        vdnn_status st = vdnn_op_check_token_ids(&v, &e);
        if (ids[i].ok ? st != VDNN_OK : (st != VDNN_ERR_UNSUPPORTED || !strstr(e.msg, "embed: a vocabulary of")))
            fail_msg("vocabulary %d in %s: %s \"%s\"", ids[i].vocab, vdnn_dtype_name(ids[i].t), vdnn_status_name(st),
                     e.msg);
    }
    vdnn_op_desc big = vt_embed(1, 2, 300, 4);
    big.dtype = VDNN_DTYPE_BF16;
    vdnn_op_info big_info;
    vdnn_error big_err = {0};
    vt_assert_error(be->ops->op_query(be, &big, &big_info, &big_err), big_err, VDNN_ERR_UNSUPPORTED,
                    "exact only up to 256");
    /* A token id outside the vocabulary is an error, not a read past the table. */
    vdnn_op *op = NULL;
    vdnn_error err = {0};
    const vdnn_op_desc e = vt_embed(1, 2, 3, 4);
    vt_assert_ok(be->ops->op_create(be, &e, &op, &err), err);
    float x[2] = {1.0f, 3.0f}, w[12] = {0}, y[8];
    vdnn_op_args a = {.x = {x}, .y = y, .w = w};
    vdnn_status st = be->ops->op_forward(be, op, &a, &err);
    assert_int_equal(st, VDNN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "not an id in 0..2"));
    be->ops->op_destroy(be, op);
    vdnn_backend_destroy(be);
}

/* The LSTM ops (docs/sequence.md, "LSTM"): flags and sizes the planner trusts, bf16 (the chunk widened to its fp32
 * code, its gates kept in bf16: half the aux; the gather a copy of bf16 rows), shape errors naming the op. */
static void test_lstm_ops(void **state)
{
    vdnn_backend_t *be = cpu(0);
    vdnn_error err = {0};
    vdnn_op_info info;
    /* batch 2, 3 steps, hidden 4, projection 2, 5 inputs */
    const vdnn_op_desc d = vt_lstm(2, 3, 4, 2, 5, 3, 5, 0, 2);
    vt_assert_ok(be->ops->op_query(be, &d, &info, &err), err);
    assert_true(info.bwd_needs_x && info.bwd_needs_y && !info.inplace_ok && !info.bwd_inplace_ok);
    assert_int_equal(info.aux_bytes, 2 * 3 * 4 * 4 * sizeof(float)); /* the four gates of every step */
    size_t nw, nb, ns;
    vt_op_param_counts(&d, &nw, &nb, &ns);
    assert_int_equal(nw + nb, 4 * 4 * (5 + 2) + 2 * 4 + 8 * 4);    /* PyTorch's count with proj_size, in w and b */
    const vdnn_op_desc ok[] = {d, vt_seq_cat(2, 2, (const int[]){3, 1}, 6, 2)};
    for (size_t i = 0; i < 2; i++) {
        vdnn_op_desc b = ok[i];
        vdnn_op_info half;
        vt_assert_ok(be->ops->op_query(be, &b, &info, &err), err);
        b.dtype = VDNN_DTYPE_BF16;
        vt_assert_ok(be->ops->op_query(be, &b, &half, &err), err);
        const size_t aux = b.kind == VDNN_LAYER_LSTM ? info.aux_bytes / 2 : info.aux_bytes;
        if (half.bwd_needs_x != info.bwd_needs_x || half.bwd_needs_y != info.bwd_needs_y || half.aux_bytes != aux ||
            half.bwd_ws_bytes < info.bwd_ws_bytes)
            fail_msg("%s in bf16: info differs from fp32's beyond the workspace", vdnn_layer_kind_name(b.kind));
    }
    vdnn_op_desc bad[5] = {d, d, d, d, ok[1]};
    bad[0].out.w = 5;       /* not P + H */
    bad[1].n_inputs = 3;    /* an input besides x and the previous chunk (the parameters are w and b) */
    bad[1].in[2] = d.in[1];
    bad[2].p.step0 = 1;     /* steps 1..3 of an input of 3 */
    bad[3].in[1].w = 7;     /* a previous chunk of other rows */
    bad[4].out.h = 5;       /* 3 + 1 steps, not 5 */
    for (size_t i = 0; i < 5; i++) {
        vdnn_status st = be->ops->op_query(be, &bad[i], &info, &err);
        if (st != VDNN_ERR_SHAPE || !strstr(err.msg, vdnn_layer_kind_name(bad[i].kind)))
            fail_msg("bad %s #%zu: %s \"%s\", expected a shape error naming it", vdnn_layer_kind_name(bad[i].kind),
                     i, vdnn_status_name(st), err.msg);
    }
    vdnn_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_flags),
        cmocka_unit_test(test_sequence_ops),
        cmocka_unit_test(test_lstm_ops),
        cmocka_unit_test(test_conv_candidates),
        cmocka_unit_test(test_refused_descriptions),
        cmocka_unit_test(test_missing_buffers),
        cmocka_unit_test(test_reduced_precision_refused),
        cmocka_unit_test(test_reduced_precision_env),
        cmocka_unit_test(test_bf16_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
