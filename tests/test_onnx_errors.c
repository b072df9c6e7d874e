/* Tests of ONNX import's refusals: every model of the broken corpus (tests/data/onnx/bad_*.onnx) fails with a
 * message naming the file, the node, its op type and what is unsupported; truncated and bit-flipped models
 * fail cleanly or load, never crash (run under ASan by `make test`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx.h"
#include "testutil.h"

#define DATA VDNN_SOURCE_DIR "/tests/data/onnx/"

typedef struct bad_case {
    const char *file;
    vdnn_status status;
    const char *needles[4]; /* each must be in the message */
} bad_case;

static const bad_case cases[] = {
    {"bad_unknown_op.onnx", VDNN_ERR_UNSUPPORTED,
     {"node 'weird' (Frobnicate)", "op type 'Frobnicate' is not supported", "Conv"}},
    {"bad_domain.onnx", VDNN_ERR_UNSUPPORTED, {"node 'ms_relu' (Relu)", "domain 'com.microsoft'"}},
    {"bad_dilation.onnx", VDNN_ERR_UNSUPPORTED, {"node 'conv' (Conv)", "dilations [2, 2]"}},
    {"bad_asym_pads.onnx", VDNN_ERR_UNSUPPORTED, {"node 'conv' (Conv)", "asymmetric pads [1, 1, 2, 2]"}},
    {"bad_conv_attr.onnx", VDNN_ERR_UNSUPPORTED, {"node 'conv' (Conv)", "attribute 'foo' is not supported"}},
    {"bad_ceil_in_padding.onnx", VDNN_ERR_UNSUPPORTED,
     {"node 'pool' (MaxPool)", "ceil_mode=1 on height 7 gives 5 outputs by ONNX's formula", "(4 outputs)"}},
    {"bad_avg_pad_exclude.onnx", VDNN_ERR_UNSUPPORTED,
     {"node 'avg' (AveragePool)", "count_include_pad=0 with pads 1x1 after a Pad"}},
    {"bad_lrn_even.onnx", VDNN_ERR_UNSUPPORTED, {"node 'lrn' (LRN)", "even size (4)"}},
    {"bad_clip_no_max.onnx", VDNN_ERR_UNSUPPORTED, {"node 'clip' (Clip)", "without a max bound"}},
    {"bad_mul_maps.onnx", VDNN_ERR_UNSUPPORTED,
     {"node 'product' (Mul)", "multiplies 'r' (3x8x8) by 'x' (3x8x8)", "N x C x 1 x 1 scales"}},
    {"bad_mul_const.onnx", VDNN_ERR_UNSUPPORTED, {"node 'scale' (Mul)", "multiplying by the constant 'k'"}},
    {"bad_hardswish_alpha.onnx", VDNN_ERR_UNSUPPORTED,
     {"node 'hswish_mul' (Mul)", "x * HardSigmoid(x) with alpha=0.2, beta=0.5 is not supported"}},
    {"bad_dynamic_reshape.onnx", VDNN_ERR_UNSUPPORTED, {"node 'shape_of_x' (Shape)", "computed at run time"}},
    {"bad_reshape_3d.onnx", VDNN_ERR_UNSUPPORTED, {"node 'to3d' (Reshape)", "reshape to [0, 3, -1]"}},
    {"bad_gemm_transb0.onnx", VDNN_ERR_UNSUPPORTED, {"node 'fc_t' (Gemm)", "transB=0"}},
    {"bad_gemm_shape.onnx", VDNN_ERR_SHAPE, {"node 'fc' (Gemm)", "'fc.w' (5x100, 500 values)", "192x1x1"}},
    {"bad_softmax_middle.onnx", VDNN_ERR_UNSUPPORTED, {"node 'early_softmax' (Softmax)", "only as the graph's last node"}},
    {"bad_used_indices.onnx", VDNN_ERR_UNSUPPORTED, {"node 'pool' (MaxPool)", "output 1 ('idx') is used"}},
    {"bad_dead_node.onnx", VDNN_ERR_UNSUPPORTED, {"node 'dead_end' (Relu)", "does not lead to the graph output"}},
    {"bad_two_outputs.onnx", VDNN_ERR_UNSUPPORTED, {"has 2 outputs"}},
    {"bad_two_inputs.onnx", VDNN_ERR_UNSUPPORTED, {"2 inputs besides its initializers", "'x', 'x2'"}},
    {"bad_symbolic_hw.onnx", VDNN_ERR_UNSUPPORTED, {"input 'x' has a symbolic H ('H')", "only the batch"}},
    {"bad_opset6.onnx", VDNN_ERR_UNSUPPORTED, {"opset 6 of ai.onnx is not supported", "opsets 7 to 17"}},
    {"bad_opset18.onnx", VDNN_ERR_UNSUPPORTED, {"opset 18 of ai.onnx is not supported"}},
    {"bad_external_data.onnx", VDNN_ERR_UNSUPPORTED, {"node 'fc' (Gemm)", "'fc.w' is stored in an external file"}},
    {"bad_no_graph.onnx", VDNN_ERR_PARSE, {"has no graph"}},
    {"bad_truncated.onnx", VDNN_ERR_FORMAT, {"not a valid ONNX model", "truncated"}},
    {"bad_not_onnx.onnx", VDNN_ERR_FORMAT, {"not a valid ONNX model"}},
};

static void test_corpus(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        char path[512];
        snprintf(path, sizeof path, DATA "%s", c->file);
        vdnn_graph_t *g = (vdnn_graph_t *)1;
        vdnn_error err;
        vdnn_status st = vdnn_graph_load(path, &g, &err);
        assert_null(g);
        if (st != c->status || !strstr(err.msg, path))
            fail_msg("%s: got %s \"%s\", want %s naming the file", c->file, vdnn_status_name(st), err.msg,
                     vdnn_status_name(c->status));
        for (int k = 0; k < 4 && c->needles[k]; k++)
            if (!strstr(err.msg, c->needles[k]))
                fail_msg("%s: \"%s\" does not say \"%s\"", c->file, err.msg, c->needles[k]);
    }
}

static void test_missing_and_empty(void **state)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_error(vdnn_graph_load(DATA "no_such_model.onnx", &g, &err), err, VDNN_ERR_IO, "no_such_model.onnx");
    vt_assert_error(vdnn_onnx_parse("", 0, "empty.onnx", &g, &err), err, VDNN_ERR_FORMAT,
                    "empty.onnx: the ONNX model is empty");
    vt_assert_error(vdnn_onnx_parse(NULL, 10, "null.onnx", &g, &err), err, VDNN_ERR_FORMAT, "null.onnx");
    assert_null(g);
}

static uint8_t *read_all(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    uint8_t *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    assert_true(*len > 0 && *len < (1 << 20));
    return buf;
}

/* One damaged model: an error that names it, or a graph that resolves. Counts the loads. */
static void try_parse(const uint8_t *data, size_t len, int *loaded)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vdnn_status st = vdnn_onnx_parse(data, len, "fuzz.onnx", &g, &err);
    if (st != VDNN_OK) {
        assert_null(g);
        if (strncmp(err.msg, "fuzz.onnx", 9)) fail_msg("error without the file name: %s", err.msg);
        return;
    }
    assert_non_null(g);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 0, 0, 0}, 0, &err), err);
    vdnn_graph_free(g);
    (*loaded)++;
}

static bool quick(void) { return getenv("VDNN_TEST_QUICK") != NULL; }

static void test_truncated(void **state)
{
    const char *models[] = {"conv.onnx", "bn.onnx", "act.onnx", "tiny_cnn.onnx"};
    for (int m = 0; m < 4; m++) {
        size_t len;
        uint8_t *data = read_all(models[m], &len);
        int loaded = 0;
        size_t step = quick() && len > 4096 ? 7 : 1;
        for (size_t n = 0; n < len; n += step) {
            /* A copy of exactly n bytes, so that ASan sees any read past the end. */
            uint8_t *cut = malloc(n ? n : 1);
            assert_non_null(cut);
            memcpy(cut, data, n);
            try_parse(cut, n, &loaded);
            free(cut);
        }
        /* Only the whole model maps: every shorter prefix loses a node, an initializer or the outputs. */
        assert_int_equal(loaded, 0);
        try_parse(data, len, &loaded);
        assert_int_equal(loaded, 1);
        free(data);
    }
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_flipped(void **state)
{
    static const char *const models[] = {"conv.onnx", "pool.onnx", "bn.onnx",       "names.onnx",
                                         "act.onnx",  "pool_ceil.onnx", "tiny_mlp.onnx", "tiny_cnn.onnx"};
    static const uint8_t masks[] = {0xff, 0x01, 0x80};
    int loaded = 0;
    size_t len;
    for (int m = 0; m < 8; m++) {
        uint8_t *data = read_all(models[m], &len);
        for (size_t i = 0; i < len; i++)
            for (int k = 0; k < (quick() ? 1 : 3); k++) {
                data[i] ^= masks[k];
                try_parse(data, len, &loaded);
                data[i] ^= masks[k];
            }
        free(data);
    }
    /* Several random bytes at once, in the PyTorch exports. */
    static const char *const exports[] = {"tiny_cnn.onnx", "tiny_se.onnx"};
    for (int m = 0; m < 2; m++) {
        uint8_t *data = read_all(exports[m], &len), *copy = malloc(len);
        assert_non_null(copy);
        uint64_t s = 0x9e3779b97f4a7c15ULL;
        int rounds = quick() ? 1000 : 10000;
        for (int r = 0; r < rounds; r++) {
            memcpy(copy, data, len);
            int changes = 1 + (int)(next(&s) % 4);
            for (int c = 0; c < changes; c++) copy[next(&s) % len] = (uint8_t)next(&s);
            try_parse(copy, len, &loaded);
        }
        free(copy);
        free(data);
    }
    /* Most flips land in weight values, which load; the count shows both outcomes were exercised. */
    assert_true(loaded > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_missing_and_empty),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_flipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
