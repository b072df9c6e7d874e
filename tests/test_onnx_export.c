/* Tests of ONNX export: a net's parameters, set to values of our own, come back bit for bit when the exported file
 * is imported again (conv, batch norm with its statistics, Gemm, MatMul's transposed weight); the checkpoint route
 * writes the same bytes as the net route; and each failure (a .cfg model, another model's checkpoint, an
 * unwritable path) is a clear error that leaves no file behind and an existing output as it was. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "graph/onnx.h"
#include "vdnn/model.h"
#include "vdnn/net.h"
#include "testutil.h"

#define DATA VDNN_SOURCE_DIR "/tests/data/onnx/"

static vdnn_net_t *make_net(vdnn_backend_t *be, const vdnn_graph_t *g)
{
    vdnn_net_options o = vdnn_net_options_default();
    o.batch = 2;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(g, be, &o, &net, &err), err);
    return net;
}

static vdnn_graph_t *load(const char *path)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    return g;
}

/* Whether storage i is one an ONNX file holds (momentum is vdnn's own). */
static bool exported_kind(const vdnn_param_info *pi)
{
    return !strcmp(pi->kind, "weight") || !strcmp(pi->kind, "bias") || !strcmp(pi->kind, "stats");
}

/* Gives every parameter and statistic values unlike the file's (positive, so variances stay valid). */
static void set_params(vdnn_net_t *net, uint64_t seed)
{
    vdnn_error err;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        if (!exported_kind(&pi)) continue;
        float *v = malloc(pi.count * sizeof *v);
        vt_fill_uniform(v, pi.count, seed + (uint64_t)i, 0.1f, 2.0f);
        vt_assert_ok(vdnn_net_set(net, pi.name, v, pi.count, &err), err);
        free(v);
    }
}

/* The exported file imports to the same layers, with initial values equal to the net's, bit for bit. */
static void assert_round_trip(vdnn_net_t *net, const vdnn_graph_t *g, const char *exported)
{
    vdnn_graph_t *g2 = load(exported);
    assert_int_equal(g2->n_layers, g->n_layers);
    for (int l = 0; l < g->n_layers; l++) {
        assert_string_equal(g2->layers[l].name, g->layers[l].name);
        assert_int_equal(g2->layers[l].kind, g->layers[l].kind);
    }
    vdnn_error err;
    int checked = 0;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        if (!exported_kind(&pi)) continue;
        const vdnn_param_init *p = vdnn_graph_param_init(g2, pi.name);
        if (!p || p->count != pi.count) fail_msg("%s: no initial value of %zu for '%s'", exported, pi.count, pi.name);
        float *v = malloc(pi.count * sizeof *v);
        vt_assert_ok(vdnn_net_get(net, pi.name, v, pi.count, &err), err);
        if (memcmp(v, p->values, pi.count * sizeof *v))
            fail_msg("%s: '%s' differs after the round trip", exported, pi.name);
        free(v);
        checked++;
    }
    assert_int_equal(checked, g2->n_init);
    vdnn_graph_free(g2);
}


static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* Import, set, export (from the net and from its checkpoint), import again: the values are the net's and the
 * two routes write the same bytes. tiny_cnn: convs, batch norm, Gemm; bn: opset 10's batch norm and MatMul + Add
 * (the weight transposed back); tiny_mlp: MatMul + Add at a fixed batch with a final Softmax; tiny_se: the
 * activations and squeeze-and-excitation. */
static void test_round_trip(void **state)
{
    static const char *const models[] = {"tiny_cnn", "bn", "tiny_mlp", "tiny_se"};
    char dir[512], path[1024], out[1024], out2[1024], ckpt[1024];
    vt_tmpdir(dir, sizeof dir);
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        snprintf(path, sizeof path, DATA "%s.onnx", models[k]);
        vdnn_graph_t *g = load(path);
        vdnn_net_t *net = make_net(*state, g);
        set_params(net, 100 * k + 1);
        snprintf(out, sizeof out, "%s/%s.onnx", dir, models[k]);
        snprintf(out2, sizeof out2, "%s/%s_ckpt.onnx", dir, models[k]);
        snprintf(ckpt, sizeof ckpt, "%s/%s.ckpt", dir, models[k]);
        vdnn_error err;
        vt_assert_ok(vdnn_net_export_onnx(net, out, &err), err);
        assert_round_trip(net, g, out);
        vt_assert_ok(vdnn_net_save(net, ckpt, &err), err);
        vt_assert_ok(vdnn_model_export_onnx(g, ckpt, out2, &err), err);
        size_t n1, n2;
        char *a = vt_read_file(out, &n1), *b = vt_read_file(out2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);
        vdnn_net_free(net);
        vdnn_graph_free(g);
    }
    /* Nothing else there: no temporaries left behind. */
    assert_int_equal(dir_entries(dir), 3 * (int)(sizeof models / sizeof *models));
    vt_rmdir(dir);
}

/* Export from a net that trained: the trained values, batch norm's moved statistics included, go out. */
static void test_trained(void **state)
{
    vdnn_graph_t *g = load(DATA "tiny_cnn.onnx");
    vdnn_net_t *net = make_net(*state, g);
    float x[2 * 3 * 16 * 16];
    vt_fill_uniform(x, sizeof x / sizeof *x, 7, -1.0f, 1.0f);
    const int32_t y[2] = {1, 4};
    vdnn_error err;
    for (int i = 0; i < 3; i++) vt_assert_ok(vdnn_net_train_step(net, x, y, 0.05f, NULL, &err), err);
    char dir[512], out[1024];
    vt_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/trained.onnx", dir);
    vt_assert_ok(vdnn_net_export_onnx(net, out, &err), err);
    assert_round_trip(net, g, out);
    /* The exported net computes what the trained one does. */
    vdnn_graph_t *g2 = load(out);
    vdnn_net_t *net2 = make_net(*state, g2);
    float a[20], b[20];
    vt_assert_ok(vdnn_net_forward(net, x, 2, a, &err), err);
    vt_assert_ok(vdnn_net_forward(net2, x, 2, b, &err), err);
    assert_memory_equal(a, b, sizeof a);
    vdnn_net_free(net2);
    vdnn_graph_free(g2);
    vdnn_net_free(net);
    vdnn_graph_free(g);
    vt_rmdir(dir);
}

static void test_errors(void **state)
{
    char dir[512], out[1024], ckpt[1024], notdir[1024];
    vt_tmpdir(dir, sizeof dir);
    vdnn_error err;
    /* A .cfg model has no ONNX file to write back. */
    vdnn_graph_t *cfg = vt_load_zoo("lenet");
    snprintf(out, sizeof out, "%s/out.onnx", dir);
    snprintf(ckpt, sizeof ckpt, "%s/se.ckpt", dir);
    vt_assert_error(vdnn_model_export_onnx(cfg, ckpt, out, &err), err, VDNN_ERR_UNSUPPORTED, "not an ONNX model");
    vdnn_net_t *cnet = make_net(*state, cfg);
    vt_assert_error(vdnn_net_export_onnx(cnet, out, &err), err, VDNN_ERR_UNSUPPORTED, "not an ONNX model");
    vdnn_net_free(cnet);
    vdnn_graph_free(cfg);

    /* Another model's checkpoint: the first parameter it lacks is named, and an existing output stays. */
    vdnn_graph_t *se = load(DATA "tiny_se.onnx");
    vdnn_net_t *net = make_net(*state, se);
    vt_assert_ok(vdnn_net_save(net, ckpt, &err), err);
    vdnn_net_free(net);
    vdnn_graph_t *cnn = load(DATA "tiny_cnn.onnx");
    FILE *f = fopen(out, "w");
    fputs("keep", f);
    fclose(f);
    vt_assert_error(vdnn_model_export_onnx(cnn, ckpt, out, &err), err, VDNN_ERR_MISMATCH,
                    "checkpoint has no 'conv1_Conv.weight'");
    size_t n;
    char *kept = vt_read_file(out, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(kept, "keep", 4);
    free(kept);
    /* A checkpoint that is not one. */
    vt_assert_error(vdnn_model_export_onnx(cnn, out, out, &err), err, VDNN_ERR_FORMAT, out);

    /* An unwritable output: its directory is a file. */
    net = make_net(*state, cnn);
    snprintf(notdir, sizeof notdir, "%s/out.onnx/trained.onnx", dir);
    vt_assert_error(vdnn_net_export_onnx(net, notdir, &err), err, VDNN_ERR_IO, "cannot write the exported model");
    assert_non_null(strstr(err.msg, notdir));
    vt_assert_error(vdnn_net_export_onnx(net, "", &err), err, VDNN_ERR_INVALID_ARG, "no");
    vdnn_net_free(net);
    assert_int_equal(dir_entries(dir), 2); /* out.onnx and se.ckpt, no temporaries */
    vdnn_graph_free(cnn);
    vdnn_graph_free(se);
    vt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_trained),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, vt_cpu_backend_setup, vt_cpu_backend_teardown);
}
