/* Tests of the model parser, shape inference and cost counts: the zoo's known numbers and every malformed fixture. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "testutil.h"

static vdnn_graph_t *load_ok(const char *path)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    assert_non_null(g);
    return g;
}

static vdnn_graph_t *parse_ok(const char *text)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(text, "mem.cfg", &g, &err), err);
    assert_non_null(g);
    return g;
}

static void resolve_ok(vdnn_graph_t *g, int n, int c, int h, int w, int classes)
{
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){n, c, h, w}, classes, &err), err);
    assert_true(g->resolved);
}

static size_t param_count(const vdnn_graph_t *g)
{
    size_t p = 0;
    for (int i = 0; i < g->n_layers; i++) p += g->layers[i].n_weight + g->layers[i].n_bias;
    return p;
}

static const vdnn_layer *layer(const vdnn_graph_t *g, const char *name)
{
    int i = vdnn_graph_find(g, name);
    if (i < 0) fail_msg("no layer '%s' in %s", name, g->name);
    return &g->layers[i];
}

static void assert_out(const vdnn_graph_t *g, const char *name, int c, int h, int w)
{
    vdnn_shape s = layer(g, name)->out;
    if (s.n != g->input.n || s.c != c || s.h != h || s.w != w)
        fail_msg("%s/%s: got %dx%dx%dx%d, want %dx%dx%dx%d", g->name, name, s.n, s.c, s.h, s.w, g->input.n, c,
                 h, w);
}

/* ---- the zoo ---- */

typedef struct zoo_case {
    const char *path, *name;
    int c, h, w, classes;    /* [net] defaults */
    size_t params;           /* at the defaults */
    int small, too_small;    /* a small square input that works, and one just below the minimum (0: none) */
} zoo_case;

static const zoo_case zoo[] = {
    {"models/lenet.cfg", "lenet", 1, 28, 28, 10, 857834, 8, 3},
    {"models/alexnet.cfg", "alexnet", 3, 224, 224, 1000, 60965224, 64, 62},
    {"models/overfeat.cfg", "overfeat", 3, 231, 231, 1000, 145920872, 71, 70},
    {"models/googlenet.cfg", "googlenet", 3, 224, 224, 1000, 6998552, 32, 0},
    {"models/vgg16.cfg", "vgg16", 3, 224, 224, 1000, 138357544, 32, 31},
    {"models/vgg19.cfg", "vgg19", 3, 224, 224, 1000, 143667240, 32, 31},
    {"models/resnet18.cfg", "resnet18", 3, 224, 224, 1000, 11689512, 32, 0},
    {"models/resnet50.cfg", "resnet50", 3, 224, 224, 1000, 25557032, 32, 0},
    {"models/resnet101.cfg", "resnet101", 3, 224, 224, 1000, 44549160, 32, 0},
    {"models/resnet152.cfg", "resnet152", 3, 224, 224, 1000, 60192808, 32, 0},
};

/* Structural invariants every resolved zoo net must satisfy. */
static void check_invariants(const vdnn_graph_t *g)
{
    assert_int_equal(g->layers[0].kind, VDNN_LAYER_INPUT);
    assert_string_equal(g->layers[0].name, "data");
    const vdnn_layer *last = &g->layers[g->n_layers - 1];
    assert_int_equal(last->kind, VDNN_LAYER_SOFTMAX_XENT);
    assert_int_equal(last->out.c, g->classes);
    assert_int_equal(last->n_consumers, 0);
    for (int i = 1; i < g->n_layers; i++) {
        const vdnn_layer *L = &g->layers[i];
        assert_true(L->n_inputs >= 1);
        for (int k = 0; k < L->n_inputs; k++) assert_true(L->inputs[k] >= 0 && L->inputs[k] < i);
        if (i < g->n_layers - 1) assert_true(L->n_consumers >= 1);
        assert_true(L->out.n == g->input.n && L->out.c >= 1 && L->out.h >= 1 && L->out.w >= 1);
        assert_true(L->flops_fwd >= 0 && L->flops_bwd >= 0);
        if (L->kind == VDNN_LAYER_BATCHNORM) {
            assert_int_equal(L->n_weight, (size_t)L->out.c);
            assert_int_equal(L->n_stats, 2 * (size_t)L->out.c);
        } else {
            assert_int_equal(L->n_stats, 0);
        }
    }
}

static void test_zoo_defaults(void **state)
{
    (void)state;
    for (size_t z = 0; z < sizeof zoo / sizeof zoo[0]; z++) {
        const zoo_case *zc = &zoo[z];
        vdnn_graph_t *g = load_ok(zc->path);
        assert_string_equal(g->name, zc->name);
        assert_string_equal(g->source, zc->path);
        assert_int_equal(g->default_input.c, zc->c);
        assert_int_equal(g->default_input.h, zc->h);
        assert_int_equal(g->default_input.w, zc->w);
        assert_int_equal(g->default_classes, zc->classes);
        resolve_ok(g, 1, 0, 0, 0, 0);
        assert_int_equal(g->input.c, zc->c);
        assert_int_equal(g->input.h, zc->h);
        assert_int_equal(g->classes, zc->classes);
        if (param_count(g) != zc->params) fail_msg("%s: %zu parameters, want %zu", zc->path, param_count(g), zc->params);
        check_invariants(g);

        if (zc->small) {
            resolve_ok(g, 2, zc->c, zc->small, zc->small, 10);
            assert_int_equal(g->classes, 10);
            check_invariants(g);
        }
        if (zc->too_small) {
            vdnn_error err;
            vdnn_status st = vdnn_graph_resolve(g, (vdnn_shape){1, zc->c, zc->too_small, zc->too_small}, 0, &err);
            char where[128];
            snprintf(where, sizeof where, "%s:", zc->path);
            vt_assert_error(st, err, VDNN_ERR_SHAPE, where);
            vt_assert_error(st, err, VDNN_ERR_SHAPE, "is smaller than the");
            assert_false(g->resolved);
        }
        vdnn_graph_free(g);
    }
}

static void test_resnet_shapes(void **state)
{
    (void)state;
    vdnn_graph_t *g = load_ok("models/resnet50.cfg");
    resolve_ok(g, 1, 3, 224, 224, 1000);
    assert_out(g, "conv1", 64, 112, 112);
    assert_out(g, "maxpool", 64, 56, 56);
    assert_out(g, "layer1.0.add", 256, 56, 56);
    assert_out(g, "layer2.0.conv2", 128, 28, 28); /* v1.5: the stride is on the 3x3 conv */
    assert_out(g, "layer2.0.conv1", 128, 56, 56);
    assert_out(g, "layer3.5.relu", 1024, 14, 14);
    assert_out(g, "layer4.2.relu", 2048, 7, 7);
    assert_out(g, "avgpool", 2048, 1, 1);
    assert_out(g, "fc", 1000, 1, 1);
    assert_int_equal(layer(g, "maxpool")->n_consumers, 2); /* the first block's branch and its downsample */
    assert_int_equal(layer(g, "layer1.0.relu")->n_consumers, 2);
    assert_int_equal(layer(g, "layer1.0.downsample.0")->n_weight, 64 * 256);
    assert_int_equal(layer(g, "layer1.0.conv1")->n_bias, 0);
    assert_int_equal(layer(g, "fc")->n_weight, 2048 * 1000);
    assert_int_equal(layer(g, "fc")->n_bias, 1000);
    assert_int_equal(layer(g, "layer4.2.bn3")->n_stats, 2 * 2048);
    /* torchvision's ResNet-50 costs 4.09 G multiply-adds (conv and fc). */
    double f = 0;
    for (int i = 0; i < g->n_layers; i++)
        if (g->layers[i].kind == VDNN_LAYER_CONV || g->layers[i].kind == VDNN_LAYER_FC) f += g->layers[i].flops_fwd;
    assert_true(f == 2.0 * 4089184256.0);
    vdnn_graph_free(g);

    g = load_ok("models/resnet18.cfg");
    resolve_ok(g, 4, 3, 32, 32, 10);
    assert_out(g, "layer4.1.relu", 512, 1, 1);
    assert_int_equal(param_count(g), 11689512 - 513000 + 5130);
    assert_true(vdnn_graph_find(g, "layer1.0.downsample.0") < 0); /* 64 -> 64, stride 1: identity shortcut */
    assert_true(vdnn_graph_find(g, "layer2.0.downsample.0") > 0);
    vdnn_graph_free(g);
}

static void test_other_zoo_shapes(void **state)
{
    (void)state;
    vdnn_graph_t *g = load_ok("models/googlenet.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    assert_out(g, "conv1", 64, 112, 112);
    assert_out(g, "pool1", 64, 56, 56);
    assert_out(g, "pool2", 192, 28, 28);
    assert_out(g, "inc3a.output", 256, 28, 28);
    assert_out(g, "inc3b.output", 480, 28, 28);
    assert_out(g, "inc4a.output", 512, 14, 14);
    assert_out(g, "inc4e.output", 832, 14, 14);
    assert_out(g, "inc5b.output", 1024, 7, 7);
    assert_int_equal(layer(g, "inc3a.output")->n_inputs, 4);
    assert_int_equal(layer(g, "pool2")->n_consumers, 4);
    assert_int_equal(layer(g, "inc3a.5x5")->n_weight, 32 * 16 * 5 * 5);
    assert_true(layer(g, "dropout")->p.dropout_p == 0.4f);
    assert_int_equal(layer(g, "norm1")->kind, VDNN_LAYER_LRN);
    vdnn_graph_free(g);

    g = load_ok("models/alexnet.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    assert_out(g, "conv1", 96, 55, 55);
    assert_out(g, "pool1", 96, 27, 27);
    assert_out(g, "pool2", 256, 13, 13);
    assert_out(g, "pool5", 256, 6, 6);
    assert_int_equal(layer(g, "conv2")->n_weight, 256 * 48 * 5 * 5); /* groups=2 halves the fan-in */
    assert_int_equal(layer(g, "conv3")->n_weight, 384 * 256 * 3 * 3);
    assert_int_equal(layer(g, "conv5")->p.groups, 2);
    assert_int_equal(layer(g, "fc6")->n_weight, 4096 * 256 * 6 * 6);
    const vdnn_layer *n1 = layer(g, "norm1");
    assert_int_equal(n1->p.lrn_size, 5);
    assert_true(n1->p.lrn_k == 2.0f && n1->p.lrn_beta == 0.75f && n1->p.lrn_alpha == 1e-4f);
    vdnn_graph_free(g);

    g = load_ok("models/overfeat.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    assert_out(g, "conv1", 96, 56, 56);
    assert_out(g, "pool2", 256, 12, 12);
    assert_out(g, "pool5", 1024, 6, 6);
    resolve_ok(g, 1, 3, 224, 224, 1000); /* the ImageNet size also fits, with 5x5 into fc6 */
    assert_out(g, "pool5", 1024, 5, 5);
    assert_int_equal(param_count(g), 111317864);
    vdnn_graph_free(g);

    g = load_ok("models/lenet.cfg");
    resolve_ok(g, 64, 0, 0, 0, 0);
    assert_out(g, "pool1", 32, 14, 14);
    assert_out(g, "pool2", 64, 7, 7);
    assert_out(g, "flatten", 3136, 1, 1);
    assert_out(g, "fc2", 10, 1, 1);
    assert_int_equal(layer(g, "conv1")->n_bias, 0);
    assert_int_equal(layer(g, "fc1")->n_bias, 256);
    vdnn_graph_free(g);

    g = load_ok("models/vgg16.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    assert_out(g, "conv1_2", 64, 224, 224);
    assert_out(g, "pool5", 512, 7, 7);
    assert_out(g, "fc7", 4096, 1, 1);
    vdnn_graph_free(g);
}

static void test_vgg16_flops(void **state)
{
    (void)state;
    vdnn_graph_t *g = load_ok("models/vgg16.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    double convfc = 0, all = 0, bwd = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const vdnn_layer *L = &g->layers[i];
        all += L->flops_fwd;
        bwd += L->flops_bwd;
        if (L->kind == VDNN_LAYER_CONV || L->kind == VDNN_LAYER_FC) convfc += L->flops_fwd;
    }
    /* 15,470,264,320 multiply-adds in VGG-16's conv and fc layers at 224x224. */
    assert_true(convfc == 2.0 * 15470264320.0);
    assert_true(all > 30.9e9 && all < 31.1e9);
    assert_true(bwd > 1.9 * all && bwd < 2.1 * all);
    /* conv1_1: 64 filters x 224x224 outputs x 3*3*3 fan-in, two FLOPs each. */
    assert_true(layer(g, "conv1_1")->flops_fwd == 2.0 * 64 * 224 * 224 * 27);
    assert_true(layer(g, "conv1_1")->flops_bwd == 2.0 * layer(g, "conv1_1")->flops_fwd);
    assert_true(layer(g, "fc6")->flops_fwd == 2.0 * 4096 * 25088);
    /* FLOPs scale with the batch; parameter counts do not. */
    resolve_ok(g, 8, 0, 0, 0, 0);
    double all8 = 0;
    for (int i = 0; i < g->n_layers; i++) all8 += g->layers[i].flops_fwd;
    assert_true(all8 > 7.999 * all && all8 < 8.001 * all);
    assert_int_equal(param_count(g), 138357544);
    vdnn_graph_free(g);
}

/* ---- malformed fixtures ---- */

typedef struct bad_case {
    const char *file;
    bool at_resolve; /* parses, then fails in vdnn_graph_resolve */
    vdnn_status status;
    int line;
    const char *phrase;
} bad_case;

static const bad_case bad[] = {
    {"unknown_type.cfg", false, VDNN_ERR_PARSE, 7, "unknown layer type 'convv'"},
    {"unknown_key.cfg", false, VDNN_ERR_PARSE, 8, "unknown key 'filtres' for a conv layer"},
    {"missing_input.cfg", false, VDNN_ERR_PARSE, 13, "refers to 'conv9', which is not defined"},
    {"forward_ref.cfg", false, VDNN_ERR_PARSE, 8, "refers to 'relu1', which is not defined before it"},
    {"cycle.cfg", false, VDNN_ERR_PARSE, 8, "cycles are not allowed"},
    {"self_ref.cfg", false, VDNN_ERR_PARSE, 8, "refers to 'relu1', which is not defined before it"},
    {"duplicate_name.cfg", false, VDNN_ERR_PARSE, 11, "duplicate layer name 'conv1'"},
    {"bad_number.cfg", false, VDNN_ERR_PARSE, 9, "bad number 'abc' for size="},
    {"missing_softmax.cfg", false, VDNN_ERR_PARSE, 11, "must end with a softmax layer"},
    {"out_of_range.cfg", false, VDNN_ERR_PARSE, 10, "stride=0 is out of range"},
    {"dropout_p.cfg", false, VDNN_ERR_PARSE, 8, "p=1 is out of range"},
    {"missing_type.cfg", false, VDNN_ERR_PARSE, 6, "layer 'conv1' has no type="},
    {"bad_line.cfg", false, VDNN_ERR_PARSE, 8, "cannot parse 'filters 4'"},
    {"never_used.cfg", false, VDNN_ERR_PARSE, 11, "layer 'side' is never used"},
    {"softmax_not_last.cfg", false, VDNN_ERR_PARSE, 10, "must be the last layer"},
    {"add_one_input.cfg", false, VDNN_ERR_PARSE, 14, "needs at least two inputs"},
    {"missing_filters.cfg", false, VDNN_ERR_PARSE, 6, "needs filters="},
    {"add_shape.cfg", true, VDNN_ERR_SHAPE, 19, "add inputs have different shapes: 'c1' is 4x8x8 but 'c2' is 8x8x8"},
    {"concat_shape.cfg", true, VDNN_ERR_SHAPE, 18, "concat inputs differ in height/width"},
    {"too_small.cfg", true, VDNN_ERR_SHAPE, 15, "layer 'pool2': input 2x2 is smaller than the 3x3 window"},
    {"groups.cfg", true, VDNN_ERR_SHAPE, 6, "groups=2 does not divide the 3 input channels"},
};

static void test_bad_fixtures(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *b = &bad[i];
        char path[256], where[300];
        snprintf(path, sizeof path, "tests/data/bad/%s", b->file);
        snprintf(where, sizeof where, "%s:%d: ", path, b->line);
        vdnn_graph_t *g = NULL;
        vdnn_error err;
        vdnn_status st = vdnn_graph_load(path, &g, &err);
        if (b->at_resolve) {
            vt_assert_ok(st, err);
            st = vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 0, &err);
            assert_false(g->resolved);
            vdnn_graph_free(g);
        } else {
            assert_null(g);
        }
        if (st != b->status || strncmp(err.msg, where, strlen(where)) || !strstr(err.msg, b->phrase))
            fail_msg("%s: expected %s \"%s...%s\", got %s \"%s\"", b->file, vdnn_status_name(b->status), where,
                     b->phrase, vdnn_status_name(st), err.msg);
    }
}

static void test_load_io_error(void **state)
{
    (void)state;
    vdnn_graph_t *g = (vdnn_graph_t *)&g; /* must be reset to NULL */
    vdnn_error err;
    vt_assert_error(vdnn_graph_load("tests/data/bad/no_such_file.cfg", &g, &err), err, VDNN_ERR_IO,
                    "tests/data/bad/no_such_file.cfg: cannot open");
    assert_null(g);
    vt_assert_error(vdnn_graph_parse(NULL, "x", &g, &err), err, VDNN_ERR_INVALID_ARG, "x");
    vt_assert_error(vdnn_graph_load("models/lenet.cfg", NULL, &err), err, VDNN_ERR_INVALID_ARG, "graph_load");
    vdnn_graph_free(NULL);
}

/* ---- parsing from strings ---- */

static const char *small_net =
    "# a small net exercising every layer kind\r\n"
    "[net]\r\n"
    "input = 3x16x16   ; CRLF endings and spaces around '='\r\n"
    "\n"
    "[c1]\n"
    "type=conv\n"
    "filters=8\n"
    "size_h=3\n"
    "size_w=5\n"
    "stride_w=2\n"
    "pad_h=1\n"
    "pad_w=2        # conv: 16x16 -> 16x8\n"
    "[bn]\n"
    "type=batchnorm\n"
    "eps=1e-3\n"
    "momentum=0.2\n"
    "[r]\n"
    "type=relu\n"
    "[n]\n"
    "type=lrn\n"
    "size=3\n"
    "[mp]\n"
    "type=maxpool\n"
    "size=2\n"
    "[ap]\n"
    "type=avgpool\n"
    "input=n\n"
    "size=3\n"
    "stride=2\n"
    "pad=1\n"
    "[cat]\n"
    "type=concat\n"
    "input=mp, ap\n"
    "[c2]\n"
    "type=conv\n"
    "filters=16\n"
    "size=1\n"
    "groups=4\n"
    "bias=0\n"
    "[c3]\n"
    "type=conv\n"
    "input=cat\n"
    "filters=16\n"
    "size=1\n"
    "[sum]\n"
    "type=add\n"
    "input=c2,c3\n"
    "[drop]\n"
    "type=dropout\n"
    "[gap]\n"
    "type=gap\n"
    "[flat]\n"
    "type=flatten\n"
    "[fc]\n"
    "type=fc\n"
    "outputs=7\n"
    "[loss]\n"
    "type=softmax";

static void test_parse_string(void **state)
{
    (void)state;
    vdnn_graph_t *g = parse_ok(small_net);
    assert_string_equal(g->name, "mem"); /* no [net] name=: the source's stem */
    assert_string_equal(g->source, "mem.cfg");
    assert_int_equal(g->n_layers, 16);
    assert_int_equal(g->default_classes, 0);
    const vdnn_layer *c1 = layer(g, "c1");
    assert_int_equal(c1->kind, VDNN_LAYER_CONV);
    assert_int_equal(c1->line, 5);
    assert_int_equal(c1->n_inputs, 1);
    assert_int_equal(c1->inputs[0], 0);
    assert_int_equal(c1->p.kernel_h, 3);
    assert_int_equal(c1->p.kernel_w, 5);
    assert_int_equal(c1->p.stride_h, 1);
    assert_int_equal(c1->p.stride_w, 2);
    assert_int_equal(c1->p.pad_h, 1);
    assert_int_equal(c1->p.pad_w, 2);
    assert_int_equal(c1->p.groups, 1);
    assert_int_equal(c1->p.bias, 1);
    assert_true(layer(g, "bn")->p.bn_eps == 1e-3f && layer(g, "bn")->p.bn_momentum == 0.2f);
    const vdnn_layer *n = layer(g, "n");
    assert_int_equal(n->p.lrn_size, 3);
    assert_true(n->p.lrn_alpha == 1e-4f && n->p.lrn_beta == 0.75f && n->p.lrn_k == 1.0f);
    assert_int_equal(layer(g, "mp")->p.stride_h, 2); /* pool stride defaults to the window */
    assert_int_equal(layer(g, "ap")->p.stride_w, 2);
    assert_int_equal(layer(g, "ap")->inputs[0], vdnn_graph_find(g, "n"));
    assert_int_equal(layer(g, "cat")->n_inputs, 2);
    assert_int_equal(layer(g, "c2")->p.bias, 0);
    assert_true(layer(g, "drop")->p.dropout_p == 0.5f);
    assert_int_equal(layer(g, "fc")->p.filters, 7);
    assert_int_equal(layer(g, "fc")->p.bias, 1);
    assert_int_equal(layer(g, "n")->n_consumers, 2);

    /* No classes anywhere: taken from the softmax input. */
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_int_equal(g->classes, 7);
    assert_out(g, "c1", 8, 16, 8);
    assert_out(g, "mp", 8, 8, 4);
    assert_out(g, "ap", 8, 8, 4);
    assert_out(g, "cat", 16, 8, 4);
    assert_out(g, "sum", 16, 8, 4);
    assert_out(g, "gap", 16, 1, 1);
    assert_out(g, "flat", 16, 1, 1);
    assert_int_equal(layer(g, "c1")->n_weight, 8 * 3 * 3 * 5);
    assert_int_equal(layer(g, "c2")->n_weight, 16 * 4 * 1 * 1);
    assert_int_equal(layer(g, "c2")->n_bias, 0);
    assert_int_equal(layer(g, "bn")->n_stats, 16);
    assert_int_equal(layer(g, "fc")->n_weight, 16 * 7);
    assert_true(layer(g, "c1")->flops_fwd == 2.0 * 2 * 8 * 16 * 8 * 45);
    assert_true(layer(g, "r")->flops_fwd == 2.0 * 8 * 16 * 8);
    assert_true(layer(g, "flat")->flops_fwd == 0);

    /* A second resolve at another size replaces every result; a wrong class count is a shape error. */
    resolve_ok(g, 1, 3, 8, 8, 7);
    assert_out(g, "c1", 8, 8, 4);
    assert_out(g, "cat", 16, 4, 2);
    vdnn_error err;
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 3, 16, 16}, 9, &err), err, VDNN_ERR_SHAPE,
                    "mem.cfg:57: layer 'loss': softmax input is 7x1x1, expected 9x1x1");
    assert_false(g->resolved);
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){0, 3, 16, 16}, 0, &err), err, VDNN_ERR_INVALID_ARG,
                    "batch: 0 is out of range (1 to 1000000)");
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 3, 0, 16}, 0, &err), err, VDNN_ERR_INVALID_ARG,
                    "input: 3x0x16 is out of range");
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 3, 1, 1}, 0, &err), err, VDNN_ERR_SHAPE,
                    "mem.cfg:22: layer 'mp': input 1x1 is smaller than the 2x2 window");
    vdnn_graph_free(g);
}

/* The activations, channel scaling and pooling windows of MobileNet and GoogLeNet: keys, defaults, shapes. */
static const char act_net[] = "[net]\ninput=3x9x9\n"
                              "[mp]\ntype=maxpool\nsize=3\nstride=2\nceil_mode=1\n"       /* 4x4, floor 4 */
                              "[ap]\ntype=avgpool\nsize=2\nceil_mode=1\ncount_include_pad=0\n" /* 2x2 */
                              "[ap2]\ntype=avgpool\nsize=3\nstride=1\npad=1\ninput=data\ncount_include_pad=0\n"
                              "[sg]\ntype=sigmoid\ninput=ap\n"
                              "[hs]\ntype=hardsigmoid\n"
                              "[hs2]\ntype=hardsigmoid\nalpha=0.2\nbeta=0.4\n"
                              "[hw]\ntype=hardswish\n"
                              "[si]\ntype=silu\n"
                              "[r6]\ntype=relu6\n"
                              "[cl]\ntype=clip\nmin=-1.5\nmax=2\n"
                              "[g]\ntype=gap\ninput=ap2\n"
                              "[se]\ntype=channel_mul\ninput=ap2,g\n"
                              "[g2]\ntype=gap\n"
                              "[g3]\ntype=gap\ninput=cl\n"
                              "[cat]\ntype=concat\ninput=g3,g2\n"
                              "[fc]\ntype=fc\noutputs=4\n"
                              "[loss]\ntype=softmax\n";

static void test_act_and_windows(void **state)
{
    (void)state;
    vdnn_graph_t *g = parse_ok(act_net);
    assert_int_equal(layer(g, "mp")->p.ceil_mode, 1);
    assert_int_equal(layer(g, "mp")->p.exclude_pad, 0);
    assert_int_equal(layer(g, "ap")->p.exclude_pad, 1);
    assert_true(layer(g, "hs")->p.alpha == 1.0f / 6.0f && layer(g, "hs")->p.beta == 0.5f); /* PyTorch's */
    assert_true(layer(g, "hs2")->p.alpha == 0.2f && layer(g, "hs2")->p.beta == 0.4f);
    assert_int_equal(layer(g, "r6")->kind, VDNN_LAYER_CLIP);
    assert_true(layer(g, "r6")->p.clip_lo == 0.0f && layer(g, "r6")->p.clip_hi == 6.0f);
    assert_true(layer(g, "cl")->p.clip_lo == -1.5f && layer(g, "cl")->p.clip_hi == 2.0f);
    assert_int_equal(layer(g, "se")->kind, VDNN_LAYER_CHANNEL_MUL);
    assert_int_equal(layer(g, "se")->n_inputs, 2);
    resolve_ok(g, 2, 0, 0, 0, 0);
    /* 9 -> ceil((9 - 3) / 2) + 1 = 4 (floor too); 4 -> 2; ap2 keeps 9x9. */
    assert_out(g, "mp", 3, 4, 4);
    assert_out(g, "ap", 3, 2, 2);
    assert_out(g, "ap2", 3, 9, 9);
    assert_out(g, "cl", 3, 2, 2);
    assert_out(g, "se", 3, 9, 9);
    assert_true(layer(g, "se")->flops_fwd == 2.0 * 3 * 81);
    assert_true(layer(g, "si")->flops_fwd > 0 && layer(g, "si")->flops_bwd > 0);
    assert_int_equal(layer(g, "se")->n_weight + layer(g, "hs")->n_weight + layer(g, "cl")->n_bias, 0);
    /* At 8x8 the ceil rule adds a third window where floor has two (8 - 3 = 5 over stride 2). */
    resolve_ok(g, 1, 3, 8, 8, 0);
    assert_out(g, "mp", 3, 4, 4);
    resolve_ok(g, 1, 3, 7, 7, 0);
    assert_out(g, "mp", 3, 3, 3);
    vdnn_graph_free(g);

    /* PyTorch's output sizes, including the window ceil_mode would start in the right padding. */
    assert_int_equal(vdnn_window_out(8, 3, 2, 0, false), 3);
    assert_int_equal(vdnn_window_out(8, 3, 2, 0, true), 4);
    assert_int_equal(vdnn_window_out(5, 2, 2, 1, true), 3); /* ONNX's formula says 4 */
    assert_int_equal(vdnn_window_out(6, 3, 2, 1, true), 4);
    assert_int_equal(vdnn_window_out(2, 3, 1, 0, true), 0);
    int lo, hi, size;
    vdnn_window_span(3, 6, 3, 2, 1, &lo, &hi, &size); /* starts at 5, ends at the padded end 7 */
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 6);
    assert_int_equal(size, 2);
    vdnn_window_span(0, 6, 3, 2, 1, &lo, &hi, &size);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 2);
    assert_int_equal(size, 3);

    /* The scales must be one value per channel of the maps. */
    g = parse_ok("[net]\ninput=3x4x4\n[c]\ntype=conv\nfilters=2\nsize=1\n[g]\ntype=gap\n"
                 "[se]\ntype=channel_mul\ninput=data,g\n[fc]\ntype=fc\noutputs=2\n[loss]\ntype=softmax\n");
    vdnn_error err;
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 0, &err), err, VDNN_ERR_SHAPE,
                    "channel_mul scales 'data' (3x4x4) by 'g', which is 2x1x1: expected 3x1x1");
    vdnn_graph_free(g);
}

static void test_classes_and_defaults(void **state)
{
    (void)state;
    const char *text = "[net]\nname=tiny\n[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";
    vdnn_graph_t *g = parse_ok(text);
    assert_string_equal(g->name, "tiny");
    assert_int_equal(g->n_layers, 3);
    assert_true(layer(g, "fc")->p.outputs_are_classes);
    vdnn_error err;
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 5, &err), err, VDNN_ERR_INVALID_ARG,
                    "no [net] input=CxHxW");
    vt_assert_error(vdnn_graph_resolve(g, (vdnn_shape){1, 2, 3, 4}, 0, &err), err, VDNN_ERR_INVALID_ARG,
                    "mem.cfg:3: layer 'fc' has outputs=classes but no class count");
    resolve_ok(g, 3, 2, 3, 4, 5);
    assert_int_equal(g->classes, 5);
    assert_int_equal(layer(g, "fc")->p.filters, 5);
    assert_int_equal(layer(g, "fc")->n_weight, 5 * 24);
    assert_int_equal(layer(g, "fc")->n_bias, 5);
    assert_true(layer(g, "fc")->flops_fwd == 2.0 * 3 * 5 * 24);
    resolve_ok(g, 1, 1, 1, 1, 42);
    assert_int_equal(layer(g, "fc")->out.c, 42);
    vdnn_graph_free(g);

    /* [net] classes= is the default; the caller's count wins. */
    g = parse_ok("[net]\ninput=1x2x2\nclasses=3\n[fc]\ntype=fc\noutputs=classes\nbias=0\n[loss]\ntype=softmax\n");
    resolve_ok(g, 1, 0, 0, 0, 0);
    assert_int_equal(g->classes, 3);
    assert_int_equal(layer(g, "fc")->n_bias, 0);
    resolve_ok(g, 1, 0, 0, 0, 11);
    assert_int_equal(g->classes, 11);
    vdnn_graph_free(g);
}

static void test_kind_names_and_find(void **state)
{
    (void)state;
    assert_string_equal(vdnn_layer_kind_name(VDNN_LAYER_INPUT), "input");
    assert_string_equal(vdnn_layer_kind_name(VDNN_LAYER_SOFTMAX_XENT), "softmax");
    assert_string_equal(vdnn_layer_kind_name(VDNN_LAYER_CONV), "conv");
    assert_string_equal(vdnn_layer_kind_name(VDNN_LAYER_GAP), "gap");
    assert_string_equal(vdnn_layer_kind_name(VDNN_LAYER_KIND_COUNT), "unknown");
    /* Every kind but the implicit input can be written in a file under its name. */
    for (int k = 1; k < VDNN_LAYER_KIND_COUNT; k++) {
        char text[512];
        const char *extra = "";
        if (vdnn_layer_kind_internal((vdnn_layer_kind)k)) continue; /* test_lstm_parse_errors refuses them */
        if (k == VDNN_LAYER_LSTM) extra = "hidden=2\n";
        if (k == VDNN_LAYER_CONV) extra = "filters=2\nsize=1\n";
        if (k == VDNN_LAYER_MAXPOOL || k == VDNN_LAYER_AVGPOOL) extra = "size=1\n";
        if (k == VDNN_LAYER_FC) extra = "outputs=2\n";
        if (k == VDNN_LAYER_CONCAT || k == VDNN_LAYER_ADD) extra = "input=data,r\n";
        if (k == VDNN_LAYER_CHANNEL_MUL) extra = "input=r,g\n";
        if (k == VDNN_LAYER_EMBED || k == VDNN_LAYER_LINEAR) extra = "outputs=2\n";
        if (k == VDNN_LAYER_POS_EMBED) extra = "context=4\n";
        if (k == VDNN_LAYER_ATTN_PROBS || k == VDNN_LAYER_ATTN) extra = "heads=1\n";
        if (k == VDNN_LAYER_ATTN_MIX) extra = "input=r,data\n";
        if (k == VDNN_LAYER_SOFTMAX_XENT) {
            snprintf(text, sizeof text, "[r]\ntype=relu\n[fc]\ntype=fc\noutputs=2\n[x]\ntype=softmax\n");
        } else {
            snprintf(text, sizeof text, "[r]\ntype=relu\n%s[x]\ntype=%s\n%s[fc]\ntype=fc\noutputs=2\n[l]\ntype=softmax\n",
                     k == VDNN_LAYER_CHANNEL_MUL ? "[g]\ntype=gap\n" : "", vdnn_layer_kind_name((vdnn_layer_kind)k),
                     extra);
        }
        vdnn_graph_t *g = parse_ok(text);
        /* An lstm becomes its chunk nodes and their gather under its name. */
        assert_int_equal(layer(g, k == VDNN_LAYER_LSTM ? "x.t0" : "x")->kind, k);
        /* The sequence layers resolve in sequence models only (test_sequence_model). */
        if (k < VDNN_LAYER_EMBED || k == VDNN_LAYER_GELU) resolve_ok(g, 1, 2, 2, 2, 0);
        vdnn_graph_free(g);
    }
    vdnn_graph_t *g = load_ok("models/lenet.cfg");
    assert_int_equal(vdnn_graph_find(g, "data"), 0);
    assert_int_equal(vdnn_graph_find(g, "loss"), g->n_layers - 1);
    assert_int_equal(vdnn_graph_find(g, "nope"), -1);
    assert_int_equal(vdnn_graph_find(g, NULL), -1);
    assert_int_equal(vdnn_graph_find(NULL, "data"), -1);
    vdnn_graph_free(g);
}

/* Each text must fail with this status and a message starting "s.cfg:LINE: " and containing the phrase. */
typedef struct string_case {
    const char *text;
    vdnn_status status;
    int line;
    const char *phrase;
} string_case;

#define TAIL "[fc]\ntype=fc\noutputs=2\n[loss]\ntype=softmax\n"
static const string_case string_cases[] = {
    {"size=3\n" TAIL, VDNN_ERR_PARSE, 1, "'size=' comes before any [section]"},
    {"[net]\ninput=3x224\n" TAIL, VDNN_ERR_PARSE, 2, "bad input size '3x224'"},
    {"[net]\ninput=3x0x4\n" TAIL, VDNN_ERR_PARSE, 2, "bad input size"},
    {"[net]\ninput=3x4x4x\n" TAIL, VDNN_ERR_PARSE, 2, "bad input size"},
    {"[net]\nclasses=0\n" TAIL, VDNN_ERR_PARSE, 2, "classes=0 is out of range"},
    {"[net]\nclasses=ten\n" TAIL, VDNN_ERR_PARSE, 2, "bad number 'ten' for classes="},
    {"[net]\nbatch=4\n" TAIL, VDNN_ERR_PARSE, 2, "unknown key 'batch' in [net]"},
    {"[net]\n[net]\n" TAIL, VDNN_ERR_PARSE, 2, "duplicate [net] section"},
    {"[r]\ntype=relu\n[net]\n" TAIL, VDNN_ERR_PARSE, 3, "[net] must come before the layers"},
    {"[r]\ntype=relu\ntype=relu\n" TAIL, VDNN_ERR_PARSE, 3, "duplicate key 'type' (already set at line 2)"},
    {"[r]\ntype=\n" TAIL, VDNN_ERR_PARSE, 2, "type= has no value"},
    {"[r]\n=relu\n" TAIL, VDNN_ERR_PARSE, 2, "missing key before '='"},
    {"[r x]\ntype=relu\n" TAIL, VDNN_ERR_PARSE, 1, "bad layer name 'r x'"},
    {"[r\ntype=relu\n" TAIL, VDNN_ERR_PARSE, 1, "cannot parse '[r'"},
    {"[data]\ntype=relu\n" TAIL, VDNN_ERR_PARSE, 1, "the name 'data' is reserved"},
    {"[a123456789a123456789a123456789a123456789a123456789a123456789a1234]\ntype=relu\n" TAIL, VDNN_ERR_PARSE, 1,
     "is too long"},
    {"[r]\ntype=input\n" TAIL, VDNN_ERR_PARSE, 2, "unknown layer type 'input'"},
    {"[r]\ntype=relu\nsize=3\n" TAIL, VDNN_ERR_PARSE, 3, "unknown key 'size' for a relu layer"},
    {"[c]\ntype=conv\nfilters=4\n" TAIL, VDNN_ERR_PARSE, 1, "needs size="},
    {"[c]\ntype=conv\nfilters=4\nsize_h=3\n" TAIL, VDNN_ERR_PARSE, 1, "needs size="},
    {"[c]\ntype=conv\nfilters=4\nsize=-1\n" TAIL, VDNN_ERR_PARSE, 4, "size=-1 is out of range"},
    {"[c]\ntype=conv\nfilters=4\nsize=3\npad=-1\n" TAIL, VDNN_ERR_PARSE, 5, "pad=-1 is out of range"},
    {"[c]\ntype=conv\nfilters=4\nsize=3.5\n" TAIL, VDNN_ERR_PARSE, 4, "bad number '3.5' for size="},
    {"[c]\ntype=conv\nfilters=4\nsize=99999999999999999999\n" TAIL, VDNN_ERR_PARSE, 4, "bad number"},
    {"[c]\ntype=conv\nfilters=5\nsize=1\ngroups=2\n" TAIL, VDNN_ERR_PARSE, 1, "groups=2 does not divide filters=5"},
    {"[c]\ntype=conv\nfilters=4\nsize=1\ngroups=0\n" TAIL, VDNN_ERR_PARSE, 5, "groups=0 is out of range"},
    {"[c]\ntype=conv\nfilters=4\nsize=1\nbias=2\n" TAIL, VDNN_ERR_PARSE, 5, "bias=2 is out of range"},
    {"[p]\ntype=maxpool\nsize=2\npad=2\n" TAIL, VDNN_ERR_PARSE, 1, "pad 2x2 is out of range"},
    {"[p]\ntype=maxpool\nsize=2\nceil_mode=2\n" TAIL, VDNN_ERR_PARSE, 4, "ceil_mode=2 is out of range"},
    {"[p]\ntype=maxpool\nsize=2\ncount_include_pad=0\n" TAIL, VDNN_ERR_PARSE, 4,
     "unknown key 'count_include_pad' for a maxpool layer"},
    {"[c]\ntype=clip\nmin=6\nmax=0\n" TAIL, VDNN_ERR_PARSE, 1, "layer 'c': min=6 is not below max=0"},
    {"[c]\ntype=relu6\nalpha=1\n" TAIL, VDNN_ERR_PARSE, 3, "unknown key 'alpha' for a clip layer"},
    {"[h]\ntype=hardsigmoid\nalpha=1e31\n" TAIL, VDNN_ERR_PARSE, 3, "alpha=1e31 is out of range"},
    {"[s]\ntype=channel_mul\n" TAIL, VDNN_ERR_PARSE, 1, "needs input= with two layers"},
    {"[r]\ntype=relu\n[s]\ntype=channel_mul\ninput=r\n" TAIL, VDNN_ERR_PARSE, 5, "takes exactly two inputs"},
    {"[d]\ntype=dropout\np=-0.1\n" TAIL, VDNN_ERR_PARSE, 3, "p=-0.1 is out of range (must be in [0, 1))"},
    {"[d]\ntype=dropout\np=x\n" TAIL, VDNN_ERR_PARSE, 3, "bad number 'x' for p="},
    {"[b]\ntype=batchnorm\neps=0\n" TAIL, VDNN_ERR_PARSE, 3, "eps=0 is out of range"},
    {"[b]\ntype=batchnorm\nmomentum=1.5\n" TAIL, VDNN_ERR_PARSE, 3, "momentum=1.5 is out of range"},
    {"[n]\ntype=lrn\nk=0\n" TAIL, VDNN_ERR_PARSE, 3, "k=0 is out of range"},
    {"[n]\ntype=lrn\nbeta=nan\n" TAIL, VDNN_ERR_PARSE, 3, "bad number 'nan'"},
    {"[f]\ntype=fc\n" TAIL, VDNN_ERR_PARSE, 1, "fc layer 'f' needs outputs="},
    {"[f]\ntype=fc\noutputs=all\n" TAIL, VDNN_ERR_PARSE, 3, "bad number 'all' for outputs="},
    {"[f]\ntype=fc\noutputs=0\n" TAIL, VDNN_ERR_PARSE, 3, "outputs=0 is out of range"},
    {"[r]\ntype=relu\n[s]\ntype=relu\ninput=r,data\n" TAIL, VDNN_ERR_PARSE, 5, "takes exactly one input, got 2"},
    {"[r]\ntype=relu\n[s]\ntype=add\ninput=r,r\n" TAIL, VDNN_ERR_PARSE, 5, "lists input 'r' twice"},
    {"[r]\ntype=relu\n[s]\ntype=add\ninput=r,\n" TAIL, VDNN_ERR_PARSE, 5, "empty name in input="},
    {"[r]\ntype=relu\n[s]\ntype=add\ninput=,\n" TAIL, VDNN_ERR_PARSE, 5, "empty name in input="},
    {"[r]\ntype=relu\n[s]\ntype=concat\n" TAIL, VDNN_ERR_PARSE, 3, "needs input= with at least two layers"},
    {"[a]\ntype=relu\n[b]\ntype=relu\n[c]\ntype=relu\n[d]\ntype=relu\n[e]\ntype=relu\n[f]\ntype=relu\n"
     "[g]\ntype=relu\n[h]\ntype=relu\n[s]\ntype=concat\ninput=a,b,c,d,e,f,g,h,data\n" TAIL,
     VDNN_ERR_PARSE, 19, "more than 8 inputs"},
    {"[net]\nname=x\n", VDNN_ERR_PARSE, 2, "no layers"},
    {"", VDNN_ERR_PARSE, 1, "no layers"},
    {"[loss]\ntype=softmax\n[loss2]\ntype=softmax\n", VDNN_ERR_PARSE, 1, "must be the last layer"},
    /* sequence layers */
    {"[e]\ntype=embed\n" TAIL, VDNN_ERR_PARSE, 1, "embed layer 'e' needs outputs= (the embedding width)"},
    {"[e]\ntype=embed\noutputs=classes\n" TAIL, VDNN_ERR_PARSE, 3, "bad number 'classes' for outputs="},
    {"[p]\ntype=pos_embed\n" TAIL, VDNN_ERR_PARSE, 1, "pos_embed layer 'p' needs context="},
    {"[a]\ntype=attn_probs\n" TAIL, VDNN_ERR_PARSE, 1, "attn_probs layer 'a' needs heads="},
    {"[a]\ntype=attn_probs\nheads=0\n" TAIL, VDNN_ERR_PARSE, 3, "heads=0 is out of range"},
    {"[m]\ntype=attn_mix\n" TAIL, VDNN_ERR_PARSE, 1, "needs input= with two layers (the attention probabilities"},
    {"[l]\ntype=linear\n" TAIL, VDNN_ERR_PARSE, 1, "linear layer 'l' needs outputs="},
    /* attention in head groups */
    {"[q]\ntype=linear\noutputs=12\n[a]\ntype=attn_probs\nheads=4\ngroups=3\n" TAIL, VDNN_ERR_PARSE, 4,
     "attn_probs layer 'a': groups=3 does not divide heads=4"},
    {"[r]\ntype=relu\ngroups=2\n" TAIL, VDNN_ERR_PARSE, 3, "unknown key 'groups'"},
    {"[q]\ntype=linear\noutputs=12\n[a]\ntype=attn_probs\nheads=2\ngroups=2\n[r]\ntype=relu\n" TAIL,
     VDNN_ERR_PARSE, 8, "layer 'r': only an attn_mix (its first input) may read the probabilities computed in groups "
     "of 'a'"},
    {"[q]\ntype=linear\noutputs=12\n[a]\ntype=attn_probs\nheads=2\ngroups=2\n[m]\ntype=attn_mix\ninput=a,q\n"
     "[n]\ntype=attn_mix\ninput=a,q\n[s]\ntype=add\ninput=m,n\n" TAIL,
     VDNN_ERR_PARSE, 11, "layer 'n': a second attn_mix reads the grouped probabilities of 'a'"},
    {"[l]\ntype=layernorm\neps=0\n" TAIL, VDNN_ERR_PARSE, 3, "eps=0 is out of range"},
    /* weight tying */
    {"[l]\ntype=linear\noutputs=4\ntie=wte\n" TAIL, VDNN_ERR_PARSE, 4, "layer 'l': tie=wte names no earlier layer"},
    {"[r]\ntype=relu\n[l]\ntype=linear\noutputs=4\ntie=r\n" TAIL, VDNN_ERR_PARSE, 6,
     "tie=r is a relu layer; a linear ties only to an embed layer's table"},
    {"[e]\ntype=embed\noutputs=4\n[l]\ntype=linear\noutputs=4\ntie=e\n[k]\ntype=linear\noutputs=4\ntie=e\n" TAIL,
     VDNN_ERR_PARSE, 11, "tie=e: its table is tied to layer 'l' already"},
    {"[e]\ntype=embed\noutputs=4\ntie=e\n" TAIL, VDNN_ERR_PARSE, 4, "unknown key 'tie' for a embed layer"},
};

/* gpt-mini (docs/sequence.md): B x T x F as Bx1xTxF, the attention probabilities BxHxTxT, one label per token;
 * shape errors of sequence layers name the file, line and what was expected. */
static void test_sequence_model(void **state)
{
    (void)state;
    vdnn_graph_t *g = load_ok("models/gpt-mini.cfg");
    assert_string_equal(g->name, "gpt-mini");
    resolve_ok(g, 3, 0, 0, 0, 0);
    assert_int_equal(g->classes, 256);
    assert_int_equal(param_count(g), 867328);
    assert_out(g, "wte", 1, 64, 128);
    assert_out(g, "h0.qkv", 1, 64, 384);
    assert_out(g, "h0.probs", 4, 64, 64);
    assert_out(g, "h0.mix", 1, 64, 128);
    assert_out(g, "h3.fc", 1, 64, 512);
    assert_out(g, "head", 1, 64, 256);
    assert_int_equal(vdnn_graph_label_count(g), 3 * 64);
    assert_true(vdnn_graph_is_sequence(g));
    /* Bytes the planner counts are the shapes' bytes: probabilities B*H*T*T floats. */
    assert_int_equal(vdnn_shape_bytes(layer(g, "h1.probs")->out), (size_t)3 * 4 * 64 * 64 * 4);
    /* A shorter sequence fits the context; a longer one is refused at the position embedding. */
    resolve_ok(g, 2, 1, 16, 1, 0);
    assert_out(g, "h2.probs", 4, 16, 16);
    assert_int_equal(param_count(g), 867328);
    vdnn_error err;
    vdnn_status st = vdnn_graph_resolve(g, (vdnn_shape){2, 1, 65, 1}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "sequence of 65 tokens is longer than its context=64");
    st = vdnn_graph_resolve(g, (vdnn_shape){2, 3, 8, 8}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "embed reads token ids shaped 1xTx1");
    vdnn_graph_free(g);
    /* Heads that do not divide the width, and a loss over a width other than the vocabulary. */
    const char *bad_heads = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=10\n[q]\ntype=linear\n"
                            "outputs=30\n[p]\ntype=attn_probs\nheads=4\n[m]\ntype=attn_mix\ninput=p,q\n"
                            "[h]\ntype=linear\noutputs=classes\n[loss]\ntype=softmax\n";
    g = parse_ok(bad_heads);
    st = vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "mem.cfg:10: layer 'p': attn_probs reads q, k and v side by side");
    vdnn_graph_free(g);
    const char *bad_loss = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=10\n[h]\ntype=linear\n"
                           "outputs=12\n[loss]\ntype=softmax\n";
    g = parse_ok(bad_loss);
    st = vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "expected 16x1x1 (images) or 1xTx16 (sequences)");
    vdnn_graph_free(g);
    /* A tied output projection: no weight of its own; one whose shape is not the table's is refused. */
    const char *tied = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=10\n[h]\ntype=linear\n"
                       "outputs=classes\ntie=e\nbias=0\n[loss]\ntype=softmax\n";
    g = parse_ok(tied);
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_int_equal(param_count(g), 16 * 10);
    assert_int_equal(layer(g, "h")->p.tie, 1);
    assert_int_equal(layer(g, "e")->p.tied_by, 2);
    vdnn_graph_free(g);
    const char *bad_tie = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=10\n[f]\ntype=linear\n"
                          "outputs=12\n[h]\ntype=linear\noutputs=classes\ntie=e\n[loss]\ntype=softmax\n";
    g = parse_ok(bad_tie);
    st = vdnn_graph_resolve(g, (vdnn_shape){1, 0, 0, 0}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "layer 'h': tie=e: its table is 16 x 10 (vocabulary x width), this "
                    "linear's weight is 16 x 12");
    vdnn_graph_free(g);
}

/* Attention in head groups: a file's groups=G, or vdnn_model_with_head_groups, makes G pairs of nodes per attention
 * (each group's probabilities and their mix) joined by a feat_cat under the mix's name, in order; the same
 * parameters, FLOPs and output; ties and seeds follow the layers' new places. */
static void test_head_groups(void **state)
{
    (void)state;
    vdnn_graph_t *whole = load_ok("models/gpt-mini.cfg");
    resolve_ok(whole, 2, 0, 0, 0, 0);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_with_head_groups(whole, 2, &g, &err), err);
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_int_equal(g->n_layers, whole->n_layers + 4 * 3); /* per block: 2 pairs and a feat_cat for 2 nodes */
    assert_int_equal(param_count(g), param_count(whole));
    double fw = 0, fg = 0;
    for (int l = 1; l < whole->n_layers; l++) fw += whole->layers[l].flops_fwd;
    for (int l = 1; l < g->n_layers; l++) fg += g->layers[l].flops_fwd;
    assert_true(fabs(fg - fw) <= 0.02 * fw); /* the feat_cats' copies */
    const char *order[] = {"h1.qkv", "h1.probs.g0", "h1.mix.g0", "h1.probs.g1", "h1.mix.g1", "h1.mix", "h1.proj"};
    const vdnn_layer *first = layer(g, order[0]);
    for (int k = 1; k < 7; k++) assert_ptr_equal(layer(g, order[k]), first + k);
    assert_out(g, "h1.probs.g1", 2, 64, 64);
    assert_out(g, "h1.mix.g1", 1, 64, 64);
    assert_out(g, "h1.mix", 1, 64, 128);
    assert_int_equal(layer(g, "h1.mix")->kind, VDNN_LAYER_FEAT_CAT);
    assert_int_equal(layer(g, "h1.probs.g1")->p.head0, 2);
    assert_int_equal(layer(g, "h1.mix.g1")->p.heads, 4);
    /* Hashed as the whole attention: checkpoints move between groupings. */
    assert_true(vdnn_graph_hash(g) == vdnn_graph_hash(whole));
    /* Every layer outside the attention seeds its parameters as before. */
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *L = &g->layers[l];
        if (L->kind == VDNN_LAYER_ATTN_PROBS || L->kind == VDNN_LAYER_ATTN_MIX || L->kind == VDNN_LAYER_FEAT_CAT) continue;
        assert_int_equal(vdnn_graph_seed_index(g, l, true), layer(whole, L->name) - whole->layers);
    }
    /* Grouping twice, counts that do not divide the heads, and a model without attention are refused. */
    vdnn_graph_t *again = (vdnn_graph_t *)&again;
    vt_assert_error(vdnn_model_with_head_groups(g, 2, &again, &err), err, VDNN_ERR_UNSUPPORTED,
                    "computes attention 'h0.probs.g0' in groups already");
    assert_null(again);
    vt_assert_error(vdnn_model_with_head_groups(whole, 3, &again, &err), err, VDNN_ERR_INVALID_ARG,
                    "head groups: 3 does not divide the 4 heads of 'h0.probs'");
    vdnn_graph_t *lenet = load_ok("models/lenet.cfg");
    vt_assert_error(vdnn_model_with_head_groups(lenet, 2, &again, &err), err, VDNN_ERR_INVALID_ARG,
                    "has no attention (attn_probs) layer");
    vdnn_graph_free(lenet);
    vdnn_graph_free(g);
    /* In a file, with a tied head after the groups: the tie follows the layers' new indices. */
    const char *file = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=12\n[q]\ntype=linear\n"
                       "outputs=36\n[p]\ntype=attn_probs\nheads=6\ngroups=3\n[m]\ntype=attn_mix\ninput=p,q\n"
                       "[h]\ntype=linear\noutputs=classes\ntie=e\nbias=0\n[loss]\ntype=softmax\n";
    g = parse_ok(file);
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_int_equal(g->n_layers, 1 + 2 + 6 + 1 + 2);
    assert_out(g, "p.g2", 2, 8, 8);
    assert_out(g, "m", 1, 8, 12);
    assert_int_equal(layer(g, "h")->p.tie, 1);
    assert_int_equal(layer(g, "e")->p.tied_by, layer(g, "h") - g->layers);
    /* A tree of feat_cats (more groups than a node's inputs) hashes as the whole attention too, and a real change
     * (another head count) does not. */
    char text[1024];
    const char *fmt = "[net]\ninput=1x8x1\nclasses=16\n[e]\ntype=embed\noutputs=12\n[q]\ntype=linear\n"
                      "outputs=36\n[p]\ntype=attn_probs\nheads=%d\ngroups=%d\n[m]\ntype=attn_mix\ninput=p,q\n"
                      "[h]\ntype=linear\noutputs=classes\ntie=e\nbias=0\n[loss]\ntype=softmax\n";
    const int variants[4][2] = {{6, 1}, {12, 1}, {12, 12}, {6, 2}};
    uint64_t hashes[4];
    for (int k = 0; k < 4; k++) {
        snprintf(text, sizeof text, fmt, variants[k][0], variants[k][1]);
        vdnn_graph_t *v = parse_ok(text);
        resolve_ok(v, 2, 0, 0, 0, 0);
        hashes[k] = vdnn_graph_hash(v);
        vdnn_graph_free(v);
    }
    assert_true(vdnn_graph_hash(g) == hashes[0] && hashes[3] == hashes[0]);
    assert_true(hashes[2] == hashes[1] && hashes[1] != hashes[0]);
    vdnn_graph_free(g);
    vdnn_graph_free(whole);
}

/* LSTM layers (docs/sequence.md, "LSTM"): chunk nodes, one parameter set per layer counted as PyTorch's nn.LSTM,
 * owned by chunk 0 and read by reference by the others, the gather of the last layer, chunks that do not divide the
 * sequence, and parse errors. */
static void test_lstm_model(void **state)
{
    (void)state;
    vdnn_graph_t *g = load_ok("models/lstm-lm.cfg");
    resolve_ok(g, 3, 0, 0, 0, 0);
    assert_int_equal(param_count(g), 1020160);
    /* nn.LSTM(128, 256, num_layers=2): 921,600 parameters, on the two layers' first chunks, once each. */
    const vdnn_layer *p1 = layer(g, "lstm1.t0"), *p2 = layer(g, "lstm2.t0");
    assert_int_equal(p1->n_weight + p1->n_bias + p2->n_weight + p2->n_bias, 921600);
    assert_int_equal(p1->n_weight + p1->n_bias, 395264);
    assert_int_equal(vdnn_graph_find(g, "lstm1.params"), -1); /* no parameter node */
    const int o2 = vdnn_graph_find(g, "lstm2.t0");
    assert_int_equal(p2->p.tie, 0);
    assert_int_equal(p2->p.tied_by, vdnn_graph_find(g, "lstm2.t3")); /* its last reader: the first backward */
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "lstm2.t%d", k);
        const vdnn_layer *c = layer(g, name);
        /* the later chunks read chunk 0's parameters by reference, they own nothing */
        if (k) assert_int_equal(c->n_weight + c->n_bias, 0);
        assert_int_equal(c->p.tie, k ? o2 : 0);
        assert_out(g, name, 1, 32, 512);
        assert_int_equal(c->n_inputs, k ? 2 : 1);
        snprintf(name, sizeof name, "lstm1.t%d", k);
        assert_int_equal(c->inputs[0], vdnn_graph_find(g, name)); /* layer 2 reads layer 1 chunk by chunk */
        if (k) {
            snprintf(name, sizeof name, "lstm2.t%d", k - 1);
            assert_int_equal(c->inputs[1], vdnn_graph_find(g, name)); /* and its own previous chunk */
        }
    }
    assert_int_equal(layer(g, "lstm1.t3")->p.step0, 96);
    /* Stacked layers are emitted chunk by chunk (lstm1.t0, lstm2.t0, lstm1.t1, ...): backward then consumes layer
     * 1's chunk gradients as layer 2 makes them. */
    assert_int_equal(vdnn_graph_find(g, "lstm2.t0"), vdnn_graph_find(g, "lstm1.t0") + 1);
    assert_int_equal(vdnn_graph_find(g, "lstm1.t1"), vdnn_graph_find(g, "lstm2.t0") + 1);
    assert_int_equal(vdnn_graph_find(g, "lstm1"), -1); /* nothing reads layer 1 whole: no gather */
    assert_out(g, "lstm2", 1, 128, 256);
    assert_int_equal(layer(g, "lstm2")->kind, VDNN_LAYER_SEQ_CAT);
    assert_int_equal(vdnn_graph_label_count(g), 3 * 128);
    /* Hashed as the graph was with parameter nodes, so that checkpoints written then still load (the hash of a
     * checkpoint of lstm-lm saved before the parameters were shared by reference). */
    assert_true(vdnn_graph_hash(g) == 0x53e6212b69676b66ULL);
    /* And numbered as then for seeds: lstm1's parameters were node 2 (after the data and wte), the head node 13. */
    assert_int_equal(vdnn_graph_seed_index(g, vdnn_graph_find(g, "lstm1.t0"), true), 2);
    assert_int_equal(vdnn_graph_seed_index(g, vdnn_graph_find(g, "lstm2.t0"), true), 4);
    assert_int_equal(vdnn_graph_seed_index(g, vdnn_graph_find(g, "head"), true), 13);
    char pre[64];
    vdnn_layer_param_prefix(g, vdnn_graph_find(g, "lstm2.t0"), pre, sizeof pre);
    assert_string_equal(pre, "lstm2.params");
    vdnn_graph_free(g);
    /* biglstm: nn.LSTM(1024, 8192, num_layers=2, proj_size=1024) holds 151,126,016 parameters. */
    g = load_ok("models/biglstm.cfg");
    resolve_ok(g, 1, 0, 0, 0, 0);
    p1 = layer(g, "lstm1.t0"), p2 = layer(g, "lstm2.t0");
    assert_int_equal(p1->n_weight + p1->n_bias + p2->n_weight + p2->n_bias, 151126016);
    assert_out(g, "lstm1.t0", 1, 20, 1024 + 8192);
    assert_out(g, "lstm2", 1, 20, 1024);
    vdnn_graph_free(g);
    /* chunk=4 over 10 steps: 4 + 4 + 2; then 9 to 12 steps fit the three chunks, 13 and 8 do not. */
    const char *ten = "[net]\ninput=1x10x1\nclasses=8\n[e]\ntype=embed\noutputs=3\n[l]\ntype=lstm\nhidden=4\n"
                      "proj=2\nchunk=4\n[m]\ntype=lstm\nhidden=3\nchunk=5\n[h]\ntype=linear\noutputs=classes\n"
                      "[loss]\ntype=softmax\n";
    g = parse_ok(ten);
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_out(g, "l.t2", 1, 2, 6);
    /* m cuts the sequence otherwise: it reads l's gather (its h, 2 wide) from step 0 and step 5. */
    assert_out(g, "l", 1, 10, 2);
    assert_int_equal(layer(g, "m.t1")->inputs[0], vdnn_graph_find(g, "l"));
    assert_int_equal(layer(g, "m.t1")->p.step0, 5);
    assert_int_equal(layer(g, "m.t0")->n_weight, 4 * 3 * (2 + 3));
    assert_int_equal(layer(g, "m.t1")->n_weight, 0);
    resolve_ok(g, 2, 1, 9, 1, 0);
    assert_out(g, "l.t2", 1, 1, 6);
    assert_out(g, "m.t1", 1, 4, 6);
    vdnn_error err;
    vdnn_status st = vdnn_graph_resolve(g, (vdnn_shape){2, 1, 13, 1}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "mem.cfg:7: layer 'l.t0': a sequence of 13 steps does not fill 3 chunks "
                    "of chunk=4 steps (this model takes 9 to 12 steps; vdnn_model_with_steps cuts it for others");
    st = vdnn_graph_resolve(g, (vdnn_shape){2, 1, 8, 1}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "does not fill 3 chunks");
    st = vdnn_graph_resolve(g, (vdnn_shape){2, 3, 10, 10}, 0, &err);
    vt_assert_error(st, err, VDNN_ERR_SHAPE, "embed reads token ids");
    /* Cut again from the file for 13 steps (g resolved: the copy starts afresh): l in 4 + 4 + 4 + 1, m in 5 + 5 + 3,
     * the same parameters on the first chunks; for 3 steps one node each. */
    vdnn_graph_t *c = NULL;
    assert_int_equal(vdnn_graph_with_steps(g, 13, &c, &err), VDNN_OK);
    assert_int_equal(c->default_input.h, 13);
    resolve_ok(c, 2, 0, 0, 0, 0);
    assert_out(c, "l.t3", 1, 1, 6);
    assert_out(c, "m.t2", 1, 3, 6);
    assert_int_equal(vdnn_graph_find(c, "l.t4"), -1);
    assert_int_equal(layer(c, "m.t2")->p.step0, 10);
    assert_int_equal(layer(c, "l.t0")->n_weight, 4 * 4 * (3 + 2) + 2 * 4); /* as at 10 steps: 4H (In + P) + P H */
    assert_int_equal(layer(c, "m.t0")->n_weight, 4 * 3 * (2 + 3));
    assert_int_equal(layer(c, "m.t1")->n_weight, 0);
    assert_int_equal(layer(c, "l.t3")->p.tie, vdnn_graph_find(c, "l.t0"));
    vdnn_graph_t *d = NULL;
    assert_int_equal(vdnn_graph_with_steps(c, 3, &d, &err), VDNN_OK);
    resolve_ok(d, 2, 0, 0, 0, 0);
    assert_out(d, "l.t0", 1, 3, 6);
    assert_int_equal(vdnn_graph_find(d, "l.t1"), -1);
    assert_int_equal(vdnn_graph_find(d, "m.t1"), -1);
    vdnn_graph_free(d);
    /* Back at the file's 10 steps: the file's graph, layer for layer. */
    assert_int_equal(vdnn_graph_with_steps(c, 10, &d, &err), VDNN_OK);
    vdnn_graph_free(c);
    c = parse_ok(ten);
    assert_int_equal(d->n_layers, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        assert_string_equal(d->layers[l].name, c->layers[l].name);
        assert_int_equal(d->layers[l].n_consumers, c->layers[l].n_consumers);
    }
    vdnn_graph_free(d);
    vdnn_graph_free(c);
    /* A model without lstm layers has nothing to cut; steps out of range are refused before. */
    c = load_ok("models/gpt-mini.cfg");
    vt_assert_error(vdnn_model_with_steps(c, 32, &d, &err), err, VDNN_ERR_INVALID_ARG,
                    "models/gpt-mini.cfg has no lstm layer to cut for 32 steps");
    assert_int_equal(vdnn_model_lstm_count(c), 0);
    vdnn_graph_free(c);
    c = load_ok("models/lstm-lm.cfg");
    assert_int_equal(vdnn_model_lstm_count(c), 2);
    vt_assert_error(vdnn_model_with_steps(c, 0, &d, &err), err, VDNN_ERR_INVALID_ARG, "steps: 0 is out of range");
    vdnn_graph_free(c);
    vdnn_graph_free(g);
    /* Ten chunks gather through two levels (at most eight inputs a node) in groups of about sqrt(10), each group's
     * gather right after its last chunk, so that backward consumes their gradients soon after making them. */
    g = parse_ok("[net]\ninput=1x20x1\nclasses=8\n[e]\ntype=embed\noutputs=3\n[l]\ntype=lstm\nhidden=4\n"
                 "chunk=2\n[h]\ntype=linear\noutputs=classes\n[loss]\ntype=softmax\n");
    assert_int_equal(layer(g, "l.cat0")->n_inputs, 4);
    assert_int_equal(layer(g, "l.cat1")->n_inputs, 4);
    assert_int_equal(layer(g, "l.cat2")->n_inputs, 2);
    assert_int_equal(layer(g, "l")->n_inputs, 3);
    assert_int_equal(vdnn_graph_find(g, "l.cat0"), vdnn_graph_find(g, "l.t3") + 1);
    resolve_ok(g, 2, 0, 0, 0, 0);
    assert_out(g, "l.cat2", 1, 4, 4);
    assert_out(g, "l", 1, 20, 4);
    vdnn_graph_free(g);
    const struct {
        const char *text, *phrase;
    } bad[] = {
        {"[net]\ninput=1x8x1\n[l]\ntype=lstm\nchunk=2\n", "mem.cfg:3: lstm layer 'l' needs hidden="},
        {"[l]\ntype=lstm\nhidden=4\nchunk=2\n", "mem.cfg:1: lstm layer 'l': needs the sequence length"},
        {"[net]\ninput=1x8x1\n[l]\ntype=lstm\nhidden=4\nchunk=0\n", "mem.cfg:6: chunk=0 is out of range"},
        {"[net]\ninput=1x8x1\n[l]\ntype=lstm\nhidden=4\nproj=-1\n", "mem.cfg:6: proj=-1 is out of range"},
        {"[p]\ntype=params\n", "mem.cfg:2: unknown layer type 'params'"},
        {"[p]\ntype=seq_cat\n", "mem.cfg:2: unknown layer type 'seq_cat'"},
        {"[net]\ninput=1x8x1\n[l]\ntype=lstm\nhidden=4\nheads=2\n", "unknown key 'heads' for a lstm layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s[h]\ntype=linear\noutputs=2\n[loss]\ntype=softmax\n", bad[i].text);
        vdnn_graph_t *h = NULL;
        st = vdnn_graph_parse(text, "mem.cfg", &h, &err);
        vt_assert_error(st, err, VDNN_ERR_PARSE, bad[i].phrase);
        assert_null(h);
    }
}

static void test_string_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof string_cases / sizeof string_cases[0]; i++) {
        const string_case *c = &string_cases[i];
        char where[64];
        snprintf(where, sizeof where, "s.cfg:%d: ", c->line);
        vdnn_graph_t *g = (vdnn_graph_t *)&g;
        vdnn_error err;
        vdnn_status st = vdnn_graph_parse(c->text, "s.cfg", &g, &err);
        if (st != c->status || strncmp(err.msg, where, strlen(where)) || !strstr(err.msg, c->phrase))
            fail_msg("case %zu: expected %s \"%s...%s\", got %s \"%s\"", i, vdnn_status_name(c->status), where,
                     c->phrase, vdnn_status_name(st), err.msg);
        assert_null(g);
    }
}

/* Truncated and corrupted model texts must never crash: each either parses or fails with a located message. */
static void test_mangled_texts(void **state)
{
    (void)state;
    FILE *f = fopen("models/googlenet.cfg", "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    assert_true(n > 1000 && n < sizeof text - 1);
    text[n] = '\0';
    const char *quick = getenv("VDNN_TEST_QUICK");
    size_t step = quick && *quick ? 97 : 13;
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    uint64_t s = 12345;
    for (size_t cut = 0; cut <= n; cut += step) {
        for (int variant = 0; variant < 2; variant++) {
            memcpy(buf, text, n + 1);
            if (variant == 0) {
                buf[cut] = '\0';
            } else {
                /* Overwrite a few bytes with characters that matter to the grammar. */
                static const char chars[] = "[]=,#;\nx0-9. a";
                for (int k = 0; k < 3; k++) {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    size_t pos = (cut + (size_t)(s % 64)) % n;
                    buf[pos] = chars[(s >> 8) % (sizeof chars - 1)];
                }
            }
            vdnn_graph_t *g = NULL;
            vdnn_error err;
            vdnn_status st = vdnn_graph_parse(buf, "m.cfg", &g, &err);
            if (st) {
                assert_null(g);
                if (strncmp(err.msg, "m.cfg:", 6)) fail_msg("unlocated message: %s", err.msg);
                continue;
            }
            st = vdnn_graph_resolve(g, (vdnn_shape){1, 3, 32, 32}, 10, &err);
            if (st && strncmp(err.msg, "m.cfg:", 6) && !strstr(err.msg, "m.cfg")) fail_msg("unlocated: %s", err.msg);
            vdnn_graph_free(g);
        }
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zoo_defaults),      cmocka_unit_test(test_resnet_shapes),
        cmocka_unit_test(test_other_zoo_shapes),  cmocka_unit_test(test_vgg16_flops),
        cmocka_unit_test(test_bad_fixtures),      cmocka_unit_test(test_load_io_error),
        cmocka_unit_test(test_parse_string),      cmocka_unit_test(test_classes_and_defaults),
        cmocka_unit_test(test_kind_names_and_find), cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_head_groups),
        cmocka_unit_test(test_mangled_texts),     cmocka_unit_test(test_act_and_windows),
        cmocka_unit_test(test_sequence_model),
        cmocka_unit_test(test_lstm_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
