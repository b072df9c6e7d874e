/* Nets in bf16 (memory.precision): the option's checks and the refusal where the backend cannot run it (a CPU
 * without AVX-512 BF16, simulated by the backend's no_bf16 option), map storages at half their fp32 bytes with
 * parameters still fp32, a bf16 run stopped at a checkpoint and resumed continuing bit for bit, and checkpoints of
 * fp32 and bf16 nets loading into each other, reported through the net's stats. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "exec/net_impl.h"
#include "plan/plan.h"
#include "testutil.h"
#include "train/net_checkpoint.h"

static const char small[] = "[net]\nname=small\ninput=3x12x12\nclasses=5\n"
                            "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\n"
                            "[bn1]\ntype=batchnorm\n"
                            "[relu1]\ntype=relu\n"
                            "[conv2]\ntype=conv\nfilters=8\nsize=3\npad=1\n"
                            "[add]\ntype=add\ninput=conv2,relu1\n"
                            "[pool1]\ntype=maxpool\nsize=2\n"
                            "[fc]\ntype=fc\noutputs=classes\n"
                            "[loss]\ntype=softmax\n";

enum { BATCH = 4, IMG = 3 * 12 * 12, STEPS = 4 };

static vdnn_backend_t *cpu(bool no_bf16)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_cpu_options o = {.threads = 1, .no_bf16 = no_bf16};
    vt_assert_ok(vdnn_backend_cpu_create(&o, &be, &err), err);
    return be;
}

static vdnn_net_options options(vdnn_precision p, vdnn_policy pol)
{
    vdnn_net_options o = vdnn_net_options_default();
    o.batch = BATCH;
    o.seed = 3;
    o.memory.precision = p;
    o.memory.policy = pol;
    o.memory.poison = true;
    return o;
}

static vdnn_graph_t *model(void)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small, "small.cfg", &g, &err), err);
    return g;
}

/* Seeded images in [-1, 1) and labels: the same batch every step, so that the loss must fall. */
static void batch(int s, float *x, int32_t *y)
{
    (void)s;
    vt_fill_uniform(x, (size_t)BATCH * IMG, 100, -1.0f, 1.0f);
    for (int i = 0; i < BATCH; i++) y[i] = (int32_t)((i * 7) % 5);
}

static void train(vdnn_net_t *net, int first, int last, float *losses)
{
    float x[BATCH * IMG];
    int32_t y[BATCH];
    vdnn_error err;
    for (int s = first; s < last; s++) {
        batch(s, x, y);
        vt_assert_ok(vdnn_net_train_step(net, x, y, 0.05f, &losses[s], &err), err);
        assert_true(isfinite(losses[s]));
    }
}

static bool has_bf16(void)
{
    vdnn_backend_t *be = cpu(false);
    vdnn_error err;
    bool ok = vdnn_backend_check_dtype(be, VDNN_DTYPE_BF16, NULL, &err) == VDNN_OK;
    if (!ok) print_message("skipped: %s\n", err.msg);
    vdnn_backend_destroy(be);
    return ok;
}

static void test_option_checks_and_names(void **state)
{
    (void)state;
    vdnn_memory_options m = vdnn_memory_options_default();
    assert_int_equal(m.precision, VDNN_PRECISION_FP32);
    vdnn_error err;
    m.precision = (vdnn_precision)9;
    vt_assert_error(vdnn_memory_options_check(&m, &err), err, VDNN_ERR_INVALID_ARG,
                    "memory.precision: 9 is out of range (fp32, bf16 or fp16)");
    vdnn_precision p;
    assert_true(vdnn_precision_parse("bf16", &p) && p == VDNN_PRECISION_BF16);
    assert_true(vdnn_precision_parse("fp16", &p) && p == VDNN_PRECISION_FP16);
    assert_false(vdnn_precision_parse("fp8", &p));
    assert_false(vdnn_precision_parse("BF16", &p));
    assert_string_equal(vdnn_precision_name(VDNN_PRECISION_FP32), "fp32");
    assert_string_equal(vdnn_precision_name((vdnn_precision)7), "?");
}

/* A CPU without AVX-512 BF16 refuses bf16 nets and plans up front, naming the option and why; fp16 is refused on
 * every CPU. Nothing is allocated. */
static void test_refused_without_the_capability(void **state)
{
    (void)state;
    vdnn_backend_t *no = cpu(true), *be = cpu(false);
    vdnn_graph_t *g = model();
    vdnn_error err;
    vdnn_net_options o = options(VDNN_PRECISION_BF16, VDNN_POLICY_NONE);
    vdnn_net_t *net = (vdnn_net_t *)&o; /* must come back NULL */
    vt_assert_error(vdnn_net_create(g, no, &o, &net, &err), err, VDNN_ERR_UNSUPPORTED, "memory.precision: bf16");
    assert_null(net);
    assert_non_null(strstr(err.msg, "AVX-512 BF16"));
    vdnn_plan_t *plan = NULL;
    vt_assert_error(vdnn_plan_create(g, no, NULL, (vdnn_shape){BATCH, 3, 12, 12}, 0, &o.memory, &plan, &err), err,
                    VDNN_ERR_UNSUPPORTED, "AVX-512 BF16");
    assert_null(plan);
    vdnn_layer_info info[16];
    vt_assert_error(vdnn_model_layers_precision(g, (vdnn_shape){BATCH, 3, 12, 12}, 0, no, VDNN_PRECISION_BF16, info,
                                                &err),
                    err, VDNN_ERR_UNSUPPORTED, "memory.precision: bf16");
    o.memory.precision = VDNN_PRECISION_FP16;
    vt_assert_error(vdnn_net_create(g, be, &o, &net, &err), err, VDNN_ERR_UNSUPPORTED, "fp16 runs on CUDA only");
    assert_null(net);
    /* fp32 runs there as ever. */
    o.memory.precision = VDNN_PRECISION_FP32;
    vt_assert_ok(vdnn_net_create(g, no, &o, &net, &err), err);
    vdnn_net_free(net);
    vdnn_graph_free(g);
    vdnn_backend_destroy(no);
    vdnn_backend_destroy(be);
}

/* A transformer's ops widen bf16 maps to fp32 code (no AVX-512 BF16 needed), so gpt-mini runs bf16 on a CPU
 * without it, in less memory than fp32; the refusal of a convolution names its layer; token ids above 256 are not
 * exact in bf16, so a larger vocabulary is refused. */
static void test_transformer_runs_bf16_anywhere(void **state)
{
    (void)state;
    vdnn_backend_t *no = cpu(true);
    vdnn_graph_t *g = vt_load_zoo("gpt-mini"), *cnn = model();
    vdnn_error err;
    vdnn_net_options o = options(VDNN_PRECISION_BF16, VDNN_POLICY_NONE);
    o.in_c = 1, o.in_h = 16, o.in_w = 1, o.classes = 256;
    vdnn_net_t *n16 = NULL, *n32 = NULL;
    vt_assert_ok(vdnn_net_create(g, no, &o, &n16, &err), err);
    const size_t seq = (size_t)BATCH * 16;
    float x[BATCH * 16];
    int32_t y[BATCH * 16];
    for (size_t i = 0; i < seq; i++) x[i] = (float)(i * 37 % 256), y[i] = (int32_t)((i * 37 + 37) % 256);
    float loss = 0;
    vt_assert_ok(vdnn_net_train_step(n16, x, y, 0.1f, &loss, &err), err);
    assert_true(isfinite(loss) && loss > 4.0f && loss < 7.0f); /* about ln 256 = 5.5 at the start */
    o.memory.precision = VDNN_PRECISION_FP32;
    vt_assert_ok(vdnn_net_create(g, no, &o, &n32, &err), err);
    assert_true(n16->plan_train->peak_device_bytes < n32->plan_train->peak_device_bytes);
    vdnn_net_free(n16);
    vdnn_net_free(n32);
    vt_assert_ok(vdnn_graph_resolve(cnn, (vdnn_shape){BATCH, 3, 12, 12}, 0, &err), err);
    vt_assert_error(vdnn_backend_check_dtype(no, VDNN_DTYPE_BF16, cnn, &err), err, VDNN_ERR_UNSUPPORTED,
                    "layer 'conv1': bf16 needs AVX-512 BF16");
    o.memory.precision = VDNN_PRECISION_BF16;
    o.classes = 300;
    vt_assert_error(vdnn_net_create(g, no, &o, &n16, &err), err, VDNN_ERR_UNSUPPORTED,
                    "layer 'wte': a vocabulary of 300 tokens in bf16 maps");
    assert_null(n16);
    vdnn_graph_free(g);
    vdnn_graph_free(cnn);
    vdnn_backend_destroy(no);
}

/* Every map storage (feature, gradient, their sums) is half its fp32 size, parameters and their momentum are not;
 * policy all moves about half the bytes (state like pooling's argmax, and softmax's input where fp32 saves its
 * output, do not halve). */
static void test_maps_are_half_the_bytes(void **state)
{
    (void)state;
    if (!has_bf16()) skip();
    vdnn_backend_t *be = cpu(false);
    vdnn_graph_t *g = model();
    vdnn_error err;
    vdnn_net_t *n32 = NULL, *n16 = NULL;
    vdnn_net_options o = options(VDNN_PRECISION_FP32, VDNN_POLICY_ALL);
    vt_assert_ok(vdnn_net_create(g, be, &o, &n32, &err), err);
    o.memory.precision = VDNN_PRECISION_BF16;
    vt_assert_ok(vdnn_net_create(g, be, &o, &n16, &err), err);
    const vdnn_plan_t *a = n32->plan_train, *b = n16->plan_train;
    const vdnn_graph_t *rg = n16->g;
    /* The plans may differ in which maps share storage (softmax's backward reads x in bf16, y in fp32), so each
     * storage is checked against its layer: maps at 2 bytes a value, parameters and momentum at 4. */
    int maps = 0, params = 0;
    for (int i = 0; i < b->n_storages; i++) {
        const vdnn_storage *t = &b->st[i];
        const vdnn_layer *ly = &rg->layers[t->layer];
        size_t want = 0;
        switch (t->kind) {
        case VDNN_ST_FMAP:
        case VDNN_ST_GRAD: want = vdnn_shape_count(t->layer ? ly->out : rg->input) * 2, maps++; break;
        case VDNN_ST_WEIGHT:
        case VDNN_ST_WGRAD:
        case VDNN_ST_WMOM: want = ly->n_weight * 4, params++; break;
        case VDNN_ST_BIAS:
        case VDNN_ST_BGRAD:
        case VDNN_ST_BMOM: want = ly->n_bias * 4, params++; break;
        default: continue;
        }
        if (t->bytes != want) fail_msg("%s: %zu bytes in bf16, %zu expected", t->name, t->bytes, want);
    }
    assert_true(maps > 5 && params > 5);
    if (!(b->bytes_moved < a->bytes_moved && (double)b->bytes_moved < 0.55 * (double)a->bytes_moved))
        fail_msg("policy all moves %zu bytes in bf16, %zu in fp32", b->bytes_moved, a->bytes_moved);
    assert_true(b->peak_device_bytes < a->peak_device_bytes);
    vdnn_net_stats st;
    vdnn_net_get_stats(n16, &st);
    assert_int_equal(st.precision, VDNN_PRECISION_BF16);
    assert_int_equal(st.checkpoint_precision, VDNN_PRECISION_BF16);
    vdnn_net_free(n32);
    vdnn_net_free(n16);
    vdnn_graph_free(g);
    vdnn_backend_destroy(be);
}

/* STEPS steps straight, against STEPS/2, a checkpoint, a new net loading it and the other STEPS/2: the same
 * parameters, momentum and statistics bit for bit, the same losses; under policy all, with poison. Then the bf16
 * checkpoint loads into an fp32 net and an fp32 one into a bf16 net, each saying where it came from. */
static void test_bf16_resumes_bitwise(void **state)
{
    (void)state;
    if (!has_bf16()) skip();
    vdnn_backend_t *be = cpu(false);
    vdnn_graph_t *g = model();
    vdnn_error err;
    char dir[256], path[512], path32[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/half.ckpt", dir);
    snprintf(path32, sizeof path32, "%s/fp32.ckpt", dir);
    const vdnn_net_options o = options(VDNN_PRECISION_BF16, VDNN_POLICY_ALL);
    float whole[STEPS], parts[STEPS];
    vdnn_net_t *a = NULL, *b = NULL, *c = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &o, &a, &err), err);
    train(a, 0, STEPS, whole);
    assert_true(whole[STEPS - 1] < whole[0]);
    vt_assert_ok(vdnn_net_create(g, be, &o, &b, &err), err);
    train(b, 0, STEPS / 2, parts);
    vt_assert_ok(vdnn_net_save(b, path, &err), err);
    vdnn_net_free(b);
    vt_assert_ok(vdnn_net_create(g, be, &o, &c, &err), err);
    vt_assert_ok(vdnn_net_load(c, path, &err), err);
    train(c, STEPS / 2, STEPS, parts);
    assert_memory_equal(whole, parts, sizeof whole);
    vdnn_checkpoint ka, kc;
    vt_assert_ok(vdnn_net_export(a, &ka, &err), err);
    vt_assert_ok(vdnn_net_export(c, &kc, &err), err);
    assert_int_equal(ka.precision, VDNN_PRECISION_BF16);
    vt_assert_same_checkpoint("bf16, stopped and resumed", &ka, &kc);
    vdnn_checkpoint_release(&ka);
    vdnn_checkpoint_release(&kc);

    /* Across precisions: the fp32 masters load as they are, and the stats say which precision wrote them. */
    vdnn_net_options o32 = o;
    o32.memory.precision = VDNN_PRECISION_FP32;
    vdnn_net_t *f = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &o32, &f, &err), err);
    vt_assert_ok(vdnn_net_load(f, path, &err), err);
    vdnn_net_stats st;
    vdnn_net_get_stats(f, &st);
    assert_int_equal(st.precision, VDNN_PRECISION_FP32);
    assert_int_equal(st.checkpoint_precision, VDNN_PRECISION_BF16);
    float w16[8 * 3 * 9], w32[8 * 3 * 9];
    vt_assert_ok(vdnn_net_get(c, "conv1.weight", w16, 8 * 3 * 9, &err), err);
    vdnn_net_t *c2 = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &o, &c2, &err), err);
    vt_assert_ok(vdnn_net_load(c2, path, &err), err);
    vt_assert_ok(vdnn_net_get(c2, "conv1.weight", w16, 8 * 3 * 9, &err), err);
    vt_assert_ok(vdnn_net_get(f, "conv1.weight", w32, 8 * 3 * 9, &err), err);
    assert_memory_equal(w16, w32, sizeof w16);
    train(f, STEPS / 2, STEPS, parts);
    /* fp32 continues close to bf16's path, not on it. */
    for (int s = STEPS / 2; s < STEPS; s++) assert_true(fabsf(parts[s] - whole[s]) < 0.05f * whole[s] + 1e-3f);
    vt_assert_ok(vdnn_net_save(f, path32, &err), err);
    vt_assert_ok(vdnn_net_load(c, path32, &err), err);
    vdnn_net_get_stats(c, &st);
    assert_int_equal(st.precision, VDNN_PRECISION_BF16);
    assert_int_equal(st.checkpoint_precision, VDNN_PRECISION_FP32);

    /* Inference in bf16: probabilities widened to fp32, summing to one within bf16's rounding. */
    float x[BATCH * IMG], probs[BATCH * 5];
    int32_t y[BATCH];
    batch(0, x, y);
    vt_assert_ok(vdnn_net_predict(c, x, BATCH, probs, &err), err);
    for (int i = 0; i < BATCH; i++) {
        float sum = 0;
        for (int k = 0; k < 5; k++) sum += probs[i * 5 + k];
        if (!(fabsf(sum - 1.0f) < 2e-2f)) fail_msg("image %d: probabilities sum to %g", i, (double)sum);
    }
    vdnn_net_free(a);
    vdnn_net_free(c);
    vdnn_net_free(c2);
    vdnn_net_free(f);
    vt_rmdir(dir);
    vdnn_graph_free(g);
    vdnn_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option_checks_and_names),
        cmocka_unit_test(test_refused_without_the_capability),
        cmocka_unit_test(test_transformer_runs_bf16_anywhere),
        cmocka_unit_test(test_maps_are_half_the_bytes),
        cmocka_unit_test(test_bf16_resumes_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
