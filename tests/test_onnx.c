/* Tests of ONNX import: each supported op maps to the expected layers, parameters and shapes; layer names are
 * made valid and unique; initializers become the initial parameters (through the net too); three PyTorch exports
 * load, and their eval-mode probabilities and logits (vdnn_net_predict, vdnn_net_forward) on the CPU backend
 * match PyTorch's. Models: tests/data/onnx/make_models.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx.h"
#include "backend/backend.h"
#include "vdnn/net.h"
#include "testutil.h"

#define DATA VDNN_SOURCE_DIR "/tests/data/onnx/"

static vdnn_graph_t *load(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    assert_non_null(g);
    return g;
}

static void resolve(vdnn_graph_t *g, int batch)
{
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, 0, 0, 0}, 0, &err), err);
}

static const vdnn_layer *layer(const vdnn_graph_t *g, const char *name)
{
    int i = vdnn_graph_find(g, name);
    if (i < 0) fail_msg("no layer '%s' in %s", name, g->name);
    return &g->layers[i];
}

/* The layer list: names and kinds in order, after the input. */
static void assert_layers(const vdnn_graph_t *g, const char *const *names, const vdnn_layer_kind *kinds, int n)
{
    assert_string_equal(g->layers[0].name, "data");
    if (g->n_layers != n + 1) fail_msg("%s: %d layers, want %d", g->name, g->n_layers - 1, n);
    for (int i = 0; i < n; i++) {
        const vdnn_layer *L = &g->layers[i + 1];
        if (strcmp(L->name, names[i]) || L->kind != kinds[i])
            fail_msg("%s: layer %d is '%s' (%s), want '%s' (%s)", g->name, i + 1, L->name,
                     vdnn_layer_kind_name(L->kind), names[i], vdnn_layer_kind_name(kinds[i]));
    }
}

static void assert_shape(const vdnn_graph_t *g, const char *name, int c, int h, int w)
{
    vdnn_shape s = layer(g, name)->out;
    if (s.c != c || s.h != h || s.w != w) fail_msg("%s: %dx%dx%d, want %dx%dx%d", name, s.c, s.h, s.w, c, h, w);
}

static void assert_window(const vdnn_layer *L, int kh, int kw, int sh, int sw, int ph, int pw)
{
    const vdnn_layer_params *p = &L->p;
    if (p->kernel_h != kh || p->kernel_w != kw || p->stride_h != sh || p->stride_w != sw || p->pad_h != ph ||
        p->pad_w != pw)
        fail_msg("%s: kernel %dx%d stride %dx%d pad %dx%d, want %dx%d %dx%d %dx%d", L->name, p->kernel_h,
                 p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w, kh, kw, sh, sw, ph, pw);
}

/* make_models.py's values(): element i is offset + scale * ((i % 7) - 3) / 3, as float32. */
static float gen(size_t i, double scale, double offset) { return (float)(offset + scale * ((double)(i % 7) - 3) / 3.0); }

static const vdnn_param_init *init_of(const vdnn_graph_t *g, const char *name, size_t count)
{
    const vdnn_param_init *p = vdnn_graph_param_init(g, name);
    if (!p) fail_msg("%s: no initial value for '%s'", g->name, name);
    if (p->count != count) fail_msg("%s: '%s' has %zu values, want %zu", g->name, name, p->count, count);
    return p;
}

static void assert_init_gen(const vdnn_graph_t *g, const char *name, size_t count, double scale, double offset)
{
    const vdnn_param_init *p = init_of(g, name, count);
    for (size_t i = 0; i < count; i++)
        if (p->values[i] != gen(i, scale, offset))
            fail_msg("%s[%zu] = %.9g, want %.9g", name, i, (double)p->values[i], (double)gen(i, scale, offset));
}

static void test_conv(void **state)
{
    vdnn_graph_t *g = load("conv.onnx");
    static const char *const names[] = {"c1", "c2", "r", "gap", "fc_flatten", "fc", "loss"};
    static const vdnn_layer_kind kinds[] = {VDNN_LAYER_CONV, VDNN_LAYER_CONV,    VDNN_LAYER_RELU, VDNN_LAYER_GAP,
                                            VDNN_LAYER_FLATTEN, VDNN_LAYER_FC, VDNN_LAYER_SOFTMAX_XENT};
    assert_layers(g, names, kinds, 7);
    assert_int_equal(g->default_input.c, 3);
    assert_int_equal(g->default_input.h, 8);
    assert_int_equal(g->default_classes, 5);
    resolve(g, 2);
    const vdnn_layer *c1 = layer(g, "c1"), *c2 = layer(g, "c2");
    assert_window(c1, 3, 1, 2, 1, 1, 0);
    assert_int_equal(c1->p.filters, 6);
    assert_int_equal(c1->p.bias, 1);
    assert_window(c2, 1, 1, 1, 1, 0, 0);
    assert_int_equal(c2->p.groups, 2);
    assert_int_equal(c2->p.bias, 0);
    assert_shape(g, "c1", 6, 4, 8);
    assert_shape(g, "c2", 4, 4, 8);
    assert_shape(g, "fc", 5, 1, 1);
    assert_int_equal(c2->n_weight, 12);
    assert_init_gen(g, "c1.weight", 54, 0.3, 0);
    assert_init_gen(g, "c1.bias", 6, 0.1, 0.5);
    assert_init_gen(g, "c2.weight", 12, 0.4, 0);
    assert_null(vdnn_graph_param_init(g, "c2.bias"));
    /* Gemm with transB=1: B is outputs x inputs, vdnn's layout, so the values are as stored. */
    assert_init_gen(g, "fc.weight", 20, 0.2, 0);
    assert_init_gen(g, "fc.bias", 5, 0.05, 0);
    vdnn_graph_free(g);
}

static void test_pool(void **state)
{
    vdnn_graph_t *g = load("pool.onnx");
    static const char *const names[] = {"mp", "ap", "ap2", "mean", "fc", "prob"};
    static const vdnn_layer_kind kinds[] = {VDNN_LAYER_MAXPOOL, VDNN_LAYER_AVGPOOL, VDNN_LAYER_AVGPOOL,
                                            VDNN_LAYER_GAP,     VDNN_LAYER_FC,      VDNN_LAYER_SOFTMAX_XENT};
    /* The final Softmax is dropped; vdnn's loss, which computes it, takes its name. */
    assert_layers(g, names, kinds, 6);
    resolve(g, 3);
    assert_window(layer(g, "mp"), 3, 3, 2, 2, 1, 1);
    assert_window(layer(g, "ap"), 3, 3, 1, 1, 1, 1);
    assert_window(layer(g, "ap2"), 2, 2, 2, 2, 0, 0);
    assert_shape(g, "mp", 3, 4, 4);
    assert_shape(g, "ap", 3, 4, 4);
    assert_shape(g, "ap2", 3, 2, 2);
    assert_shape(g, "mean", 3, 1, 1);
    assert_int_equal(layer(g, "fc")->p.bias, 0);
    assert_int_equal(layer(g, "fc")->inputs[0], vdnn_graph_find(g, "mean"));
    assert_int_equal(g->classes, 5);
    vdnn_graph_free(g);
}

/* The activations: Clip as ReLU6, as another clip and as a ReLU; x * Sigmoid(x) one SiLU layer and
 * HardSigmoid(x) * x one hard-swish layer, each named after its first node; the squeeze-and-excitation product a
 * channel_mul of the maps and the gate, whichever order the Mul lists them in. */
static void test_act(void **state)
{
    vdnn_graph_t *g = load("act.onnx");
    static const char *const names[] = {"sig",     "hsig",   "hswish",  "relu6",   "clip",   "clip0",
                                        "silu_sigmoid", "hs_gate", "se_pool", "se_conv", "se_gate", "se_mul",
                                        "gap",     "fc_flatten", "fc", "loss"};
    static const vdnn_layer_kind kinds[] = {
        VDNN_LAYER_SIGMOID, VDNN_LAYER_HARDSIGMOID, VDNN_LAYER_HARDSWISH, VDNN_LAYER_CLIP, VDNN_LAYER_CLIP,
        VDNN_LAYER_RELU,    VDNN_LAYER_SILU,        VDNN_LAYER_HARDSWISH, VDNN_LAYER_GAP,  VDNN_LAYER_CONV,
        VDNN_LAYER_SIGMOID, VDNN_LAYER_CHANNEL_MUL, VDNN_LAYER_GAP,       VDNN_LAYER_FLATTEN, VDNN_LAYER_FC,
        VDNN_LAYER_SOFTMAX_XENT};
    assert_layers(g, names, kinds, 16);
    assert_true(layer(g, "hsig")->p.alpha == 0.25f && layer(g, "hsig")->p.beta == 0.4f);
    assert_true(layer(g, "relu6")->p.clip_lo == 0.0f && layer(g, "relu6")->p.clip_hi == 6.0f);
    assert_true(layer(g, "clip")->p.clip_lo == -0.5f && layer(g, "clip")->p.clip_hi == 0.75f);
    const vdnn_layer *silu = layer(g, "silu_sigmoid"), *hs = layer(g, "hs_gate"), *se = layer(g, "se_mul");
    assert_int_equal(silu->inputs[0], vdnn_graph_find(g, "clip0"));
    assert_int_equal(hs->inputs[0], vdnn_graph_find(g, "silu_sigmoid"));
    assert_int_equal(se->n_inputs, 2);
    assert_int_equal(se->inputs[0], vdnn_graph_find(g, "hs_gate"));
    assert_int_equal(se->inputs[1], vdnn_graph_find(g, "se_gate"));
    resolve(g, 2);
    assert_shape(g, "se_mul", 3, 8, 8);
    assert_shape(g, "se_gate", 3, 1, 1);
    vdnn_graph_free(g);

    g = load("clip10.onnx"); /* opset 10: the bounds are attributes */
    assert_int_equal(layer(g, "clip")->kind, VDNN_LAYER_CLIP);
    assert_true(layer(g, "clip")->p.clip_lo == -1.0f && layer(g, "clip")->p.clip_hi == 2.5f);
    vdnn_graph_free(g);
}

/* ceil_mode and count_include_pad: PyTorch's output sizes, padding left out only where the node has its own. */
static void test_pool_ceil(void **state)
{
    vdnn_graph_t *g = load("pool_ceil.onnx");
    resolve(g, 2);
    const vdnn_layer *mp = layer(g, "mp"), *ap = layer(g, "ap"), *ex = layer(g, "ex"), *ap2 = layer(g, "ap2");
    assert_window(mp, 3, 3, 2, 2, 0, 0);
    assert_window(ap, 3, 3, 2, 2, 1, 1);
    assert_window(ex, 3, 3, 1, 1, 1, 1);
    assert_int_equal(mp->p.ceil_mode + ap->p.ceil_mode + ap2->p.ceil_mode, 3);
    assert_int_equal(ex->p.ceil_mode, 0);
    assert_int_equal(ap->p.exclude_pad, 0);
    assert_int_equal(ex->p.exclude_pad, 1);  /* ONNX's default count_include_pad is 0 */
    assert_int_equal(ap2->p.exclude_pad, 0); /* no pads: nothing to leave out */
    assert_shape(g, "mp", 3, 4, 4);
    assert_shape(g, "ap", 3, 3, 3);
    assert_shape(g, "ex", 3, 3, 3);
    assert_shape(g, "ap2", 3, 2, 2);
    vdnn_graph_free(g);
}

static void test_bn_lrn_dropout_matmul(void **state)
{
    vdnn_graph_t *g = load("bn.onnx");
    static const char *const names[] = {"bn", "lrn", "drop", "flat", "mm", "loss"};
    static const vdnn_layer_kind kinds[] = {VDNN_LAYER_BATCHNORM, VDNN_LAYER_LRN, VDNN_LAYER_DROPOUT,
                                            VDNN_LAYER_FLATTEN,   VDNN_LAYER_FC,  VDNN_LAYER_SOFTMAX_XENT};
    assert_layers(g, names, kinds, 6);
    resolve(g, 2);
    const vdnn_layer *bn = layer(g, "bn"), *lrn = layer(g, "lrn"), *fc = layer(g, "mm");
    assert_float_equal(bn->p.bn_eps, 1e-3, 1e-9);
    /* ONNX momentum 0.8 keeps 80% of the running value: PyTorch's (and vdnn's) momentum 0.2. */
    assert_float_equal(bn->p.bn_momentum, 0.2, 1e-6);
    assert_int_equal(lrn->p.lrn_size, 3);
    assert_float_equal(lrn->p.lrn_alpha, 0.5, 0);
    assert_float_equal(lrn->p.lrn_beta, 0.75, 0);
    assert_float_equal(lrn->p.lrn_k, 2.0, 0);
    assert_float_equal(layer(g, "drop")->p.dropout_p, 0.25, 0);
    assert_int_equal(fc->p.filters, 5);
    assert_int_equal(fc->p.bias, 1);
    assert_shape(g, "flat", 48, 1, 1);
    assert_init_gen(g, "bn.weight", 3, 0.2, 1.0);
    assert_init_gen(g, "bn.bias", 3, 0.1, 0);
    const vdnn_param_init *stats = init_of(g, "bn.stats", 6);
    for (size_t i = 0; i < 3; i++) {
        assert_float_equal(stats->values[i], gen(i, 0.05, 0.01), 0);
        assert_float_equal(stats->values[3 + i], gen(i, 0.2, 1.5), 0);
    }
    /* MatMul's B is inputs x outputs (48 x 5); the fc weight is its transpose. */
    const vdnn_param_init *w = init_of(g, "mm.weight", 240);
    for (size_t i = 0; i < 48; i++)
        for (size_t o = 0; o < 5; o++) assert_float_equal(w->values[o * 48 + i], gen(i * 5 + o, 0.3, 0), 0);
    assert_init_gen(g, "mm.bias", 5, 0.1, 0);
    vdnn_graph_free(g);
}

static void test_names_concat_add_reshape(void **state)
{
    vdnn_graph_t *g = load("names.onnx");
    /* '/' becomes '_' (leading ones dropped); an unnamed node is op_index; a clash gets _2; 'data' is the
     * input's; an over-long name keeps its end from a word start. Identity adds no layer. */
    static const char *const names[] = {"branch_Conv", "conv_1", "branch_Conv_2",
                                        "name_very_long_module_name_very_long_module_name_Conv",
                                        "data_2", "rows", "dropout_7", "fc", "loss"};
    static const vdnn_layer_kind kinds[] = {VDNN_LAYER_CONV, VDNN_LAYER_CONV,    VDNN_LAYER_CONCAT,
                                            VDNN_LAYER_CONV, VDNN_LAYER_ADD,     VDNN_LAYER_FLATTEN,
                                            VDNN_LAYER_DROPOUT, VDNN_LAYER_FC, VDNN_LAYER_SOFTMAX_XENT};
    assert_layers(g, names, kinds, 9);
    const vdnn_layer *cat = layer(g, "branch_Conv_2"), *add = layer(g, "data_2");
    assert_int_equal(cat->n_inputs, 2);
    assert_int_equal(cat->inputs[0], 1);
    assert_int_equal(cat->inputs[1], 2);
    assert_int_equal(add->inputs[0], 3);
    assert_int_equal(add->inputs[1], 4);
    assert_float_equal(layer(g, "dropout_7")->p.dropout_p, 0.1, 1e-7);
    resolve(g, 2);
    assert_shape(g, "branch_Conv_2", 4, 8, 8);
    assert_shape(g, "rows", 256, 1, 1);
    assert_non_null(vdnn_graph_param_init(g, "name_very_long_module_name_very_long_module_name_Conv.weight"));
    vdnn_graph_free(g);
}

/* Loading from bytes in memory gives the same graph as from the file; the name in messages is the caller's. */
static void test_from_memory(void **state)
{
    FILE *f = fopen(DATA "tiny_cnn.onnx", "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    vdnn_graph_t *a = load("tiny_cnn.onnx"), *b = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_onnx_parse(buf, n, "mem.onnx", &b, &err), err);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->n_init, b->n_init);
    for (int i = 0; i < a->n_layers; i++) assert_string_equal(a->layers[i].name, b->layers[i].name);
    assert_string_equal(b->source, "mem.onnx");
    assert_string_equal(b->name, "mem");
    vdnn_graph_free(a);
    vdnn_graph_free(b);
}

/* ---- PyTorch exports ---- */

typedef struct ref_array {
    char name[64];
    size_t n;
    float *v;
} ref_array;

/* make_models.py's reference text: "name ndim dims..." then the values, one per line. */
static int read_ref(const char *file, ref_array *out, int max)
{
    char path[512], line[256];
    snprintf(path, sizeof path, DATA "%s", file);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        assert_true(n < max);
        ref_array *a = &out[n++];
        int ndim, used;
        assert_int_equal(sscanf(line, "%63s %d%n", a->name, &ndim, &used), 2);
        a->n = 1;
        for (int d = 0; d < ndim; d++) {
            int dim, more;
            assert_int_equal(sscanf(line + used, "%d%n", &dim, &more), 1);
            used += more;
            a->n *= (size_t)dim;
        }
        a->v = malloc(a->n * sizeof *a->v);
        assert_non_null(a->v);
        for (size_t i = 0; i < a->n; i++) {
            assert_non_null(fgets(line, sizeof line, f));
            a->v[i] = strtof(line, NULL);
        }
    }
    fclose(f);
    return n;
}

static const ref_array *ref(const ref_array *r, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].name, name)) return &r[i];
    fail_msg("no array '%s' in the reference", name);
    return NULL;
}

static void free_ref(ref_array *r, int n)
{
    for (int i = 0; i < n; i++) free(r[i].v);
}

static void test_tiny_cnn_structure(void **state)
{
    vdnn_graph_t *g = load("tiny_cnn.onnx");
    static const char *const names[] = {
        "conv1_Conv",       "bn1_BatchNormalization",       "relu_Relu",         "pool_MaxPool",
        "block_conv1_Conv", "block_bn1_BatchNormalization", "block_relu_Relu",   "block_conv2_Conv",
        "block_bn2_BatchNormalization", "block_Add",        "block_relu_1_Relu", "branch_a_Conv",
        "branch_b_AveragePool",         "Concat",           "gap_GlobalAveragePool", "Flatten",
        "drop_Dropout",     "fc_Gemm",                      "loss"};
    static const vdnn_layer_kind kinds[] = {
        VDNN_LAYER_CONV, VDNN_LAYER_BATCHNORM, VDNN_LAYER_RELU,    VDNN_LAYER_MAXPOOL, VDNN_LAYER_CONV,
        VDNN_LAYER_BATCHNORM, VDNN_LAYER_RELU, VDNN_LAYER_CONV,    VDNN_LAYER_BATCHNORM, VDNN_LAYER_ADD,
        VDNN_LAYER_RELU, VDNN_LAYER_CONV,      VDNN_LAYER_AVGPOOL, VDNN_LAYER_CONCAT,  VDNN_LAYER_GAP,
        VDNN_LAYER_FLATTEN, VDNN_LAYER_DROPOUT, VDNN_LAYER_FC,     VDNN_LAYER_SOFTMAX_XENT};
    assert_layers(g, names, kinds, 19);
    assert_int_equal(g->default_input.c, 3);
    assert_int_equal(g->default_input.h, 16);
    assert_int_equal(g->default_classes, 10);
    resolve(g, 4);
    assert_shape(g, "pool_MaxPool", 8, 8, 8);
    assert_shape(g, "branch_a_Conv", 4, 4, 4);
    assert_shape(g, "branch_b_AveragePool", 8, 4, 4);
    assert_shape(g, "Concat", 12, 4, 4);
    assert_shape(g, "fc_Gemm", 10, 1, 1);
    /* AvgPool2d(3, 2, padding=1) exports as Pad + AveragePool; the pad is folded into the pooling. */
    assert_window(layer(g, "branch_b_AveragePool"), 3, 3, 2, 2, 1, 1);
    assert_window(layer(g, "branch_a_Conv"), 3, 1, 2, 2, 1, 0);
    assert_int_equal(layer(g, "branch_a_Conv")->p.groups, 2);
    assert_float_equal(layer(g, "bn1_BatchNormalization")->p.bn_momentum, 0.1, 1e-6);
    assert_float_equal(layer(g, "drop_Dropout")->p.dropout_p, 0.2, 1e-7);
    /* PyTorch's parameter counts: conv1 216, three batch norms 16 each, block convs 576 each, branch_a
     * 4*4*3*1 + 4 = 52, fc 12*10 + 10 = 130. */
    size_t total = 0, stats = 0;
    for (int i = 0; i < g->n_layers; i++) {
        total += g->layers[i].n_weight + g->layers[i].n_bias;
        stats += g->layers[i].n_stats;
    }
    assert_int_equal(total, 216 + 3 * 16 + 2 * 576 + 52 + 130);
    assert_int_equal(stats, 3 * 16);
    assert_int_equal(layer(g, "block_conv1_Conv")->n_weight, 576);
    assert_int_equal(layer(g, "block_conv1_Conv")->n_bias, 0);
    /* Every parameter, statistics included, comes from an initializer. */
    for (int i = 1; i < g->n_layers; i++) {
        const vdnn_layer *L = &g->layers[i];
        char name[96];
        const char *suffix[] = {".weight", ".bias", ".stats"};
        const size_t counts[] = {L->n_weight, L->n_bias, L->n_stats};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s%s", L->name, suffix[k]);
            const vdnn_param_init *p = vdnn_graph_param_init(g, name);
            if (counts[k] && (!p || p->count != counts[k])) fail_msg("'%s' has no initial value of its size", name);
            if (!counts[k] && p) fail_msg("'%s' has an initial value but no storage", name);
        }
    }
    vdnn_graph_free(g);
}

static void net_config(const vdnn_graph_t *g, int batch, int c, int h, int w, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = batch;
    cfg->in_c = c;
    cfg->in_h = h;
    cfg->in_w = w;
    cfg->classes = g->default_classes;
}

/* A PyTorch export, its reference arrays, and a CPU net of it at batch 2. */
typedef struct imported {
    ref_array r[8];
    int nr;
    vdnn_graph_t *g;
    vdnn_net_t *net;
} imported;

static void import(vdnn_backend_t *be, const char *name, int c, int h, int w, imported *im)
{
    char file[64];
    snprintf(file, sizeof file, "%s.ref", name);
    im->nr = read_ref(file, im->r, 8);
    snprintf(file, sizeof file, "%s.onnx", name);
    im->g = load(file);
    vdnn_net_options cfg;
    net_config(im->g, 2, c, h, w, &cfg);
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(im->g, be, &cfg, &im->net, &err), err);
}

static void release(imported *im)
{
    vdnn_net_free(im->net);
    vdnn_graph_free(im->g);
    free_ref(im->r, im->nr);
}

static const float *ref_of(const imported *im, const char *name) { return ref(im->r, im->nr, name)->v; }

static void assert_close(const char *what, const float *got, const float *want, size_t n, double abs_tol,
                         double rel_tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= abs_tol + rel_tol * fabs(want[i])))
            fail_msg("%s[%zu] = %.9g, want %.9g", what, i, (double)got[i], (double)want[i]);
}

/* The imported net's eval-mode class probabilities on the reference's 2 inputs against PyTorch's softmax of its
 * logits (10 classes), and their logarithms, which are the logits up to a per-sample constant. */
static void assert_eval_logits(imported *im)
{
    vdnn_error err;
    float probs[20];
    vt_assert_ok(vdnn_net_predict(im->net, ref_of(im, "input"), 2, probs, &err), err);
    const float *logits = ref_of(im, "logits");
    float want[20], logp[20], want_logp[20];
    for (int s = 0; s < 2; s++) {
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < 10; k++) mx = fmax(mx, logits[s * 10 + k]);
        for (int k = 0; k < 10; k++) sum += exp(logits[s * 10 + k] - mx);
        for (int k = 0; k < 10; k++) {
            want_logp[s * 10 + k] = (float)(logits[s * 10 + k] - mx - log(sum));
            want[s * 10 + k] = expf(want_logp[s * 10 + k]);
            logp[s * 10 + k] = logf(probs[s * 10 + k]);
        }
    }
    assert_close("probability", probs, want, 20, 1e-6, 0);
    /* Log-probabilities are the logits up to a per-sample constant, so this compares the logits themselves. */
    assert_close("log-probability", logp, want_logp, 20, 1e-6, 1e-6);
    /* And vdnn_net_forward gives them as they are, the graph output before vdnn's softmax. */
    float got[20];
    vt_assert_ok(vdnn_net_forward(im->net, ref_of(im, "input"), 2, got, &err), err);
    assert_close("logit", got, logits, 20, 1e-6, 1e-6);
    /* One image: the net pads the batch, and image 0's logits do not depend on the padding. */
    vt_assert_ok(vdnn_net_forward(im->net, ref_of(im, "input"), 1, got, &err), err);
    assert_close("logit (one image)", got, logits, 10, 1e-6, 1e-6);
}

/* The net starts from the initializers (read back from the net's own storages), and its eval-mode class
 * probabilities equal PyTorch's softmax of its logits. Tolerance: oneDNN and PyTorch sum in different orders,
 * so float32 results differ in the last bits (here about 1e-8); 1e-6 on probabilities and log-probabilities
 * of magnitude ~1 leaves room for that and is far below what a mapping mistake does (a wrong pad or a missed
 * statistic moves them by 1e-2 or more). */
static void test_tiny_cnn_forward(void **state)
{
    imported im;
    import(*state, "tiny_cnn", 3, 16, 16, &im);
    vdnn_net_t *net = im.net;
    vdnn_error err;
    float buf[216];
    vt_assert_ok(vdnn_net_get(net, "conv1_Conv.weight", buf, 216, &err), err);
    assert_memory_equal(buf, ref_of(&im, "conv1.weight"), 216 * sizeof *buf);
    vt_assert_ok(vdnn_net_get(net, "block_bn2_BatchNormalization.stats", buf, 16, &err), err);
    assert_memory_equal(buf, ref_of(&im, "block.bn2.running_mean"), 8 * sizeof *buf);
    assert_memory_equal(buf + 8, ref_of(&im, "block.bn2.running_var"), 8 * sizeof *buf);
    vt_assert_ok(vdnn_net_get(net, "fc_Gemm.bias", buf, 10, &err), err);
    assert_memory_equal(buf, ref_of(&im, "fc.bias"), 10 * sizeof *buf);

    assert_eval_logits(&im);
    release(&im);
}

/* The activations, squeeze-and-excitation and ceil-mode pooling of a PyTorch export (make_models.py's TinySE)
 * compute what PyTorch does, within the same tolerance and for the same reason as test_tiny_cnn_forward. */
static void test_tiny_se_forward(void **state)
{
    imported im;
    import(*state, "tiny_se", 3, 16, 16, &im);
    assert_int_equal(layer(im.g, "pool_MaxPool")->p.ceil_mode, 1);
    assert_int_equal(layer(im.g, "avg_AveragePool")->p.exclude_pad, 1);
    assert_int_equal(layer(im.g, "stem_stem.2_HardSigmoid")->kind, VDNN_LAYER_HARDSWISH);
    assert_int_equal(layer(im.g, "conv2_conv2.1_Sigmoid")->kind, VDNN_LAYER_SILU);
    assert_int_equal(layer(im.g, "conv3_conv3.1_Clip")->kind, VDNN_LAYER_CLIP);
    assert_int_equal(layer(im.g, "se1_Mul")->kind, VDNN_LAYER_CHANNEL_MUL);
    assert_eval_logits(&im);
    release(&im);
}

/* The fixed-batch export: Reshape to (2, -1), MatMul + Add as one fc, and a final softmax (dropped; vdnn's
 * loss output is that softmax). */
static void test_tiny_mlp_forward(void **state)
{
    imported im;
    import(*state, "tiny_mlp", 1, 6, 6, &im);
    const vdnn_graph_t *g = im.g;
    assert_int_equal(layer(g, "Reshape")->kind, VDNN_LAYER_FLATTEN);
    assert_int_equal(layer(g, "MatMul")->kind, VDNN_LAYER_FC);
    assert_int_equal(layer(g, "MatMul")->p.bias, 1);
    assert_int_equal(g->layers[g->n_layers - 1].kind, VDNN_LAYER_SOFTMAX_XENT);
    assert_string_equal(g->layers[g->n_layers - 1].name, "Softmax");
    vdnn_error err;
    float probs[10];
    vt_assert_ok(vdnn_net_predict(im.net, ref_of(&im, "input"), 2, probs, &err), err);
    assert_close("probability", probs, ref_of(&im, "probs"), 10, 1e-6, 1e-5);
    /* vdnn_net_forward gives the dropped Softmax's input: its softmax is PyTorch's output. */
    float logits[10], soft[10];
    vt_assert_ok(vdnn_net_forward(im.net, ref_of(&im, "input"), 2, logits, &err), err);
    for (int s = 0; s < 2; s++) {
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < 5; k++) mx = fmax(mx, logits[s * 5 + k]);
        for (int k = 0; k < 5; k++) sum += exp(logits[s * 5 + k] - mx);
        for (int k = 0; k < 5; k++) soft[s * 5 + k] = (float)(exp(logits[s * 5 + k] - mx) / sum);
    }
    assert_close("softmax of the logits", soft, ref_of(&im, "probs"), 10, 1e-6, 1e-5);
    vt_assert_error(vdnn_net_forward(im.net, ref_of(&im, "input"), 3, logits, &err), err, VDNN_ERR_INVALID_ARG,
                    "out of range");
    release(&im);
}

/* An imported net trains: one step from the initializers gives a finite loss that later steps lower. */
static void test_tiny_cnn_trains(void **state)
{
    imported im;
    import(*state, "tiny_cnn", 3, 16, 16, &im);
    const int32_t labels[2] = {3, 7};
    float l0, l1;
    vdnn_error err;
    vt_assert_ok(vdnn_net_train_step(im.net, ref_of(&im, "input"), labels, 0.05f, &l0, &err), err);
    for (int i = 0; i < 5; i++)
        vt_assert_ok(vdnn_net_train_step(im.net, ref_of(&im, "input"), labels, 0.05f, &l1, &err), err);
    assert_true(isfinite(l0) && isfinite(l1));
    assert_true(l1 < l0);
    release(&im);
}

/* A different input size changes the fc's input: the initial weights no longer fit, and the net says so. */
static void test_other_input_size(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_graph_t *g = load("bn.onnx");
    vdnn_net_options cfg;
    net_config(g, 2, 3, 8, 8, &cfg);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_SHAPE, "'mm.weight' has 240 values");
    assert_non_null(strstr(err.msg, "another input size"));
    assert_null(net);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_act),
        cmocka_unit_test(test_pool_ceil),
        cmocka_unit_test(test_bn_lrn_dropout_matmul),
        cmocka_unit_test(test_names_concat_add_reshape),
        cmocka_unit_test(test_from_memory),
        cmocka_unit_test(test_tiny_cnn_structure),
        cmocka_unit_test(test_tiny_cnn_forward),
        cmocka_unit_test(test_tiny_se_forward),
        cmocka_unit_test(test_tiny_mlp_forward),
        cmocka_unit_test(test_tiny_cnn_trains),
        cmocka_unit_test(test_other_input_size),
    };
    return cmocka_run_group_tests(tests, vt_cpu_backend_setup, vt_cpu_backend_teardown);
}
