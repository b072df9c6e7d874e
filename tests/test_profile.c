/* Profiles: the roofline estimate worked out by hand, the copy-link fit, the JSON file round trip, and
 * files that are corrupt, truncated or made for another configuration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "exec/net_impl.h"
#include "exec/profiler.h"
#include "plan/json.h"
#include "plan/profile.h"
#include "testutil.h"

/* data 1x4x4 -> conv 3x3 pad 1 (2 filters, bias) -> fc (3 classes) -> softmax, at batch 2. */
static const char *net_text = "[net]\nname=tiny\ninput=1x4x4\nclasses=3\n"
                              "[c]\ntype=conv\nfilters=2\nsize=3\npad=1\n"
                              "[fc]\ntype=fc\noutputs=classes\n"
                              "[loss]\ntype=softmax\n";

static vdnn_graph_t *graph_at(const char *text, int batch, int c, int h, int w)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(text, "tiny.cfg", &g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, c, h, w}, 0, &err), err);
    return g;
}

static vdnn_graph_t *tiny(void) { return graph_at(net_text, 2, 1, 4, 4); }

static void assert_close(double got, double want, double rel, const char *what)
{
    if (!(fabs(got - want) <= rel * fabs(want) + 1e-300)) fail_msg("%s: got %.17g, want %.17g", what, got, want);
}

/* With 1000 flop/s, 1000 B/s of memory and a 100 B/s link:
 *   conv: 2x2x4x4 outputs x 9 MACs = 1152 flops, 128 B in + 256 B out: fwd max(1.152, 0.384) s,
 *         backward 2304 flops, twice the bytes: max(2.304, 0.768) s
 *   fc:   2 x 2 x 96 = 384 flops, 256 + 24 B: fwd max(0.384, 0.28), bwd max(0.768, 0.56)
 *   softmax: 4 x 6 = 24 flops, 24 + 24 B: fwd max(0.024, 0.048) (memory-bound), bwd max(0.006, 0.096)
 *   load: 128 B of images + 8 B of labels over the link: 1.36 s
 *   update: (18 + 2 + 96 + 3) floats = 476 B, five streams: 2.38 s; accumulation 1000/3 B/s. */
static void test_estimate(void **state)
{
    (void)state;
    vdnn_graph_t *g = tiny();
    vdnn_profile p;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate(g, 1000, 1000, 100, &p, &err), err);
    assert_int_equal(p.n_layers, 4);
    assert_string_equal(p.model, "tiny");
    assert_string_equal(p.device, "estimate");
    assert_false(p.measured);
    assert_int_equal(p.input.n, 2);
    assert_int_equal(p.input.c, 1);
    assert_int_equal(p.classes, 3);
    assert_string_equal(p.names[0], "data");
    assert_string_equal(p.names[2], "fc");
    const double fwd[] = {0, 1.152, 0.384, 0.048}, bwd[] = {0, 2.304, 0.768, 0.096};
    for (int l = 1; l < 4; l++) {
        assert_close(p.fwd_s[l], fwd[l], 1e-12, p.names[l]);
        assert_close(p.bwd_s[l], bwd[l], 1e-12, p.names[l]);
    }
    assert_close(p.load_s, 1.36, 1e-12, "load");
    assert_close(p.update_s, 2.38, 1e-12, "update");
    assert_close(p.accum_bytes_per_s, 1000.0 / 3, 1e-12, "accumulation");
    assert_close(p.d2h.bytes_per_s, 100, 0, "d2h");
    assert_close(p.h2d.bytes_per_s, 100, 0, "h2d");
    assert_close(p.d2h.latency_s, 10e-6, 0, "latency");
    assert_close(vdnn_copy_seconds(&p.d2h, 50), 0.5 + 10e-6, 1e-12, "copy of 50 B");
    assert_true(vdnn_copy_seconds(&p.d2h, 0) == 0);
    vdnn_profile_release(&p);
    assert_null(p.fwd_s);

    vt_assert_error(vdnn_profile_estimate(g, 0, 1, 1, &p, &err), err, VDNN_ERR_INVALID_ARG, "compute rate");
    vt_assert_error(vdnn_profile_estimate(g, 1, NAN, 1, &p, &err), err, VDNN_ERR_INVALID_ARG, "memory bandwidth");
    vt_assert_error(vdnn_profile_estimate(g, 1, 1, -5, &p, &err), err, VDNN_ERR_INVALID_ARG, "link bandwidth");
    vdnn_graph_free(g);

    /* A layer with no parameters reading only the data has no backward (no gradient is wanted). */
    g = graph_at("[net]\nname=pool\n[p]\ntype=maxpool\nsize=2\n[f]\ntype=flatten\n[loss]\ntype=softmax\n", 1, 4, 2, 2);
    vt_assert_ok(vdnn_profile_estimate(g, 1e9, 1e9, 1e9, &p, &err), err);
    assert_true(p.fwd_s[1] > 0);
    assert_true(p.bwd_s[1] == 0);
    /* flatten: no flops, 16 + 16 B each way: memory-bound. */
    assert_close(p.fwd_s[2], 32 / 1e9, 1e-12, "flatten fwd");
    assert_close(p.bwd_s[2], 64 / 1e9, 1e-12, "flatten bwd");
    assert_close(p.update_s, 0, 0, "no parameters");
    vdnn_profile_release(&p);
    vdnn_graph_free(g);
}

static void test_fit(void **state)
{
    (void)state;
    const size_t bytes[] = {1000, 1 << 20, 10 << 20, 100 << 20, (size_t)1 << 30};
    double s[5];
    /* Exact data: the fit recovers both numbers. */
    for (int i = 0; i < 5; i++) s[i] = 7e-6 + (double)bytes[i] / 12.5e9;
    vdnn_copy_model m = vdnn_copy_model_fit(bytes, s, 5);
    assert_close(m.latency_s, 7e-6, 1e-6, "latency");
    assert_close(m.bytes_per_s, 12.5e9, 1e-9, "bandwidth");
    /* Noise of +-2 %: still close. */
    for (int i = 0; i < 5; i++) s[i] = (7e-6 + (double)bytes[i] / 12.5e9) * (i % 2 ? 1.02 : 0.98);
    m = vdnn_copy_model_fit(bytes, s, 5);
    assert_close(m.bytes_per_s, 12.5e9, 0.05, "noisy bandwidth");
    assert_true(m.latency_s >= 0);
    /* Samples whose line crosses zero above zero bytes: latency clamps to 0, the line goes through
     * the origin (least squares: sum(x^2) / sum(xy)). */
    const size_t b2[] = {1 << 20, 2 << 20, 4 << 20};
    double s2[3];
    for (int i = 0; i < 3; i++) s2[i] = (double)b2[i] / 1e9 - 1e-4;
    m = vdnn_copy_model_fit(b2, s2, 3);
    assert_true(m.latency_s == 0);
    double sxx = 0, sxy = 0;
    for (int i = 0; i < 3; i++) {
        sxx += (double)b2[i] * (double)b2[i];
        sxy += (double)b2[i] * s2[i];
    }
    assert_close(m.bytes_per_s, sxx / sxy, 1e-12, "through the origin");
    /* One sample, or all of one size: bandwidth from the mean, no latency. */
    m = vdnn_copy_model_fit(b2, s2, 1);
    assert_true(m.latency_s == 0);
    assert_close(m.bytes_per_s, (double)b2[0] / s2[0], 1e-12, "one sample");
    const size_t same[] = {4096, 4096, 4096};
    const double ts[] = {1e-6, 2e-6, 3e-6};
    m = vdnn_copy_model_fit(same, ts, 3);
    assert_true(m.latency_s == 0);
    assert_close(m.bytes_per_s, 4096 / 2e-6, 1e-9, "same size");
    /* Nothing usable: no model. */
    const double bad[] = {NAN, -1, INFINITY};
    m = vdnn_copy_model_fit(same, bad, 3);
    assert_true(m.bytes_per_s == 0 && m.latency_s == 0);
    m = vdnn_copy_model_fit(NULL, NULL, 0);
    assert_true(m.bytes_per_s == 0);
    /* Invalid samples are skipped, not averaged in. */
    const double mixed[] = {1e-6, NAN, 3e-6};
    const size_t mb[] = {1000, 5000, 3000};
    m = vdnn_copy_model_fit(mb, mixed, 3);
    assert_close(m.bytes_per_s, 1e9, 1e-9, "skips NaN");
    assert_close(m.latency_s, 0, 1, "skips NaN latency");
}


/* A measured-looking profile of the tiny net with copy samples. */
static void sample_profile(const vdnn_graph_t *g, vdnn_profile *p)
{
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate(g, 1.234567e12, 3.3e11, 1.6e10, p, &err), err);
    snprintf(p->device, sizeof p->device, "cuda:Test \"GPU\" \\ 1");
    p->measured = true;
    p->fwd_s[2] = 0.1 + 0.2; /* not representable in decimal with few digits */
    p->n_samples = 3;
    p->sample_bytes = calloc(3, sizeof(size_t));
    p->sample_d2h_s = calloc(3, sizeof(double));
    p->sample_h2d_s = calloc(3, sizeof(double));
    assert_true(p->sample_bytes && p->sample_d2h_s && p->sample_h2d_s);
    for (int i = 0; i < 3; i++) {
        p->sample_bytes[i] = (size_t)1 << (10 * (i + 1));
        p->sample_d2h_s[i] = 1e-5 + (double)p->sample_bytes[i] / 1.2e10;
        p->sample_h2d_s[i] = 2e-5 + (double)p->sample_bytes[i] / 1.3e10;
    }
    p->d2h = vdnn_copy_model_fit(p->sample_bytes, p->sample_d2h_s, 3);
    p->h2d = vdnn_copy_model_fit(p->sample_bytes, p->sample_h2d_s, 3);
    p->d2h_busy = (vdnn_copy_model){3e-5, 0.7e10};
    p->h2d_busy = (vdnn_copy_model){4e-5, 0.9e10};
    p->copy_slowdown = 0.03;
}

static void test_round_trip(void **state)
{
    (void)state;
    vdnn_graph_t *g = tiny();
    vdnn_profile a, b;
    sample_profile(g, &a);
    char dir[256], path[512], tmp[520];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tiny.json", dir);
    vdnn_error err;
    vt_assert_ok(vdnn_profile_write(path, &a, &err), err);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct stat st;
    assert_true(stat(tmp, &st) != 0); /* renamed into place */
    vt_assert_ok(vdnn_profile_read(path, g, &b, &err), err);
    assert_string_equal(b.device, a.device);
    assert_string_equal(b.model, "tiny");
    assert_true(b.measured);
    assert_int_equal(b.n_layers, a.n_layers);
    assert_memory_equal(&b.input, &a.input, sizeof a.input);
    assert_int_equal(b.classes, 3);
    /* Bit for bit: %.17g round-trips every double. */
    for (int l = 1; l < a.n_layers; l++) {
        assert_string_equal(b.names[l], a.names[l]);
        assert_memory_equal(&b.fwd_s[l], &a.fwd_s[l], sizeof(double));
        assert_memory_equal(&b.bwd_s[l], &a.bwd_s[l], sizeof(double));
    }
    assert_memory_equal(&b.load_s, &a.load_s, sizeof(double));
    assert_memory_equal(&b.update_s, &a.update_s, sizeof(double));
    assert_memory_equal(&b.accum_bytes_per_s, &a.accum_bytes_per_s, sizeof(double));
    assert_memory_equal(&b.d2h, &a.d2h, sizeof a.d2h);
    assert_memory_equal(&b.h2d, &a.h2d, sizeof a.h2d);
    assert_memory_equal(&b.d2h_busy, &a.d2h_busy, sizeof a.d2h_busy);
    assert_memory_equal(&b.h2d_busy, &a.h2d_busy, sizeof a.h2d_busy);
    assert_memory_equal(&b.copy_slowdown, &a.copy_slowdown, sizeof(double));
    assert_true(vdnn_profile_link(&b, true) == &b.d2h_busy);
    assert_true(vdnn_profile_link(&b, false) == &b.h2d_busy);
    assert_int_equal(b.n_samples, 3);
    assert_memory_equal(b.sample_bytes, a.sample_bytes, 3 * sizeof(size_t));
    assert_memory_equal(b.sample_d2h_s, a.sample_d2h_s, 3 * sizeof(double));
    assert_memory_equal(b.sample_h2d_s, a.sample_h2d_s, 3 * sizeof(double));
    vdnn_profile_release(&b);

    /* An estimate has no samples and reads back with none. */
    vdnn_profile e;
    vt_assert_ok(vdnn_profile_estimate(g, 1e12, 1e11, 1e10, &e, &err), err);
    vt_assert_ok(vdnn_profile_write(path, &e, &err), err);
    vt_assert_ok(vdnn_profile_read(path, g, &b, &err), err);
    assert_int_equal(b.n_samples, 0);
    assert_false(b.measured);
    /* Without a busy link the plans use the idle one. */
    assert_true(b.d2h_busy.bytes_per_s == 0 && b.h2d_busy.bytes_per_s == 0);
    assert_true(vdnn_profile_link(&b, true) == &b.d2h);
    assert_true(vdnn_profile_link(&b, false) == &b.h2d);
    assert_memory_equal(b.fwd_s, e.fwd_s, (size_t)e.n_layers * sizeof(double));
    vdnn_profile_release(&b);
    vdnn_profile_release(&e);

    /* Writing refuses what could not be read back, and leaves no file on failure. */
    vdnn_profile bare;
    vt_assert_ok(vdnn_profile_init(&bare, 4, &err), err);
    bare.d2h = bare.h2d = (vdnn_copy_model){0, 1};
    bare.accum_bytes_per_s = 1;
    vt_assert_error(vdnn_profile_write(path, &bare, &err), err, VDNN_ERR_INVALID_ARG, "has no name");
    vdnn_profile_release(&bare);
    a.fwd_s[1] = -1;
    vt_assert_error(vdnn_profile_write(path, &a, &err), err, VDNN_ERR_INVALID_ARG, "layer 'c'");
    a.fwd_s[1] = 1;
    a.d2h.bytes_per_s = INFINITY;
    vt_assert_error(vdnn_profile_write(path, &a, &err), err, VDNN_ERR_INVALID_ARG, "device-to-host");
    a.d2h.bytes_per_s = 1e9;
    a.h2d_busy.latency_s = -1;
    vt_assert_error(vdnn_profile_write(path, &a, &err), err, VDNN_ERR_INVALID_ARG, "host-to-device copy model under compute");
    a.h2d_busy.latency_s = 0;
    char bad[600];
    snprintf(bad, sizeof bad, "%s/none/p.json", dir);
    vt_assert_error(vdnn_profile_write(bad, &a, &err), err, VDNN_ERR_IO, "none/p.json.tmp");
    vdnn_profile_release(&a);
    vt_rmdir(dir);
    vdnn_graph_free(g);
}

/* Writes `text` with the first `from` replaced by `to` and expects reading it to fail. */
static void expect_edit_fails(const char *dir, const vdnn_graph_t *g, const char *text, const char *from, const char *to,
                              vdnn_status want, const char *needle)
{
    const char *at = strstr(text, from);
    if (!at) fail_msg("'%s' not in the profile text", from);
    size_t n = strlen(text), k = strlen(from), m = strlen(to);
    char *buf = malloc(n - k + m + 1);
    assert_non_null(buf);
    memcpy(buf, text, (size_t)(at - text));
    memcpy(buf + (at - text), to, m);
    strcpy(buf + (at - text) + m, at + k);
    char path[600];
    vt_write_file(dir, "edit.json", buf, strlen(buf), path, sizeof path);
    vdnn_profile p;
    vdnn_error err;
    vt_assert_error(vdnn_profile_read(path, g, &p, &err), err, want, needle);
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    assert_null(p.fwd_s); /* nothing to release after a failure */
    free(buf);
}

static void test_bad_files(void **state)
{
    (void)state;
    vdnn_graph_t *g = tiny();
    vdnn_profile a, p;
    sample_profile(g, &a);
    char dir[256], path[512], bad[600];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tiny.json", dir);
    vdnn_error err;
    vt_assert_ok(vdnn_profile_write(path, &a, &err), err);
    vdnn_profile_release(&a);
    size_t len;
    char *text = vt_read_file(path, &len);

    snprintf(bad, sizeof bad, "%s/absent.json", dir);
    vt_assert_error(vdnn_profile_read(bad, g, &p, &err), err, VDNN_ERR_IO, "absent.json: cannot open");
    vt_write_file(dir, "empty.json", "", 0, bad, sizeof bad);
    vt_assert_error(vdnn_profile_read(bad, g, &p, &err), err, VDNN_ERR_FORMAT, "empty");

    /* Every proper prefix is an error that names the file (the whole text up to its closing brace is
     * the shortest valid one). */
    size_t last = (size_t)(strrchr(text, '}') - text);
    for (size_t k = 0; k <= last; k++) {
        vt_write_file(dir, "cut.json", text, k, bad, sizeof bad);
        vdnn_status st = vdnn_profile_read(bad, g, &p, &err);
        if (st != VDNN_ERR_FORMAT || !strstr(err.msg, "cut.json")) fail_msg("prefix of %zu bytes: %s %s", k, vdnn_status_name(st), err.msg);
    }
    /* Random bytes over the text: errors (or, rarely, a still-valid file), never a crash. */
    char *junk = malloc(len + 1);
    assert_non_null(junk);
    uint64_t x = 88172645463325252ULL;
    for (int round = 0; round < 300; round++) {
        memcpy(junk, text, len);
        for (int j = 0; j < 4; j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk[x % len] = (char)(x >> 40);
        }
        vt_write_file(dir, "junk.json", junk, len, bad, sizeof bad);
        if (vdnn_profile_read(bad, g, &p, &err) == VDNN_OK) vdnn_profile_release(&p);
        else if (!strstr(err.msg, "junk.json")) fail_msg("unlocated: %s", err.msg);
    }
    free(junk);
    /* Nesting deep enough to exhaust a naive parser's stack. */
    size_t deep = 200000;
    char *nest = malloc(deep);
    assert_non_null(nest);
    memset(nest, '[', deep);
    vt_write_file(dir, "deep.json", nest, deep, bad, sizeof bad);
    free(nest);
    vt_assert_error(vdnn_profile_read(bad, g, &p, &err), err, VDNN_ERR_FORMAT, "nested too deeply");
    vt_write_file(dir, "array.json", "[1, 2]", 6, bad, sizeof bad);
    vt_assert_error(vdnn_profile_read(bad, g, &p, &err), err, VDNN_ERR_FORMAT, "not a profile");

    /* Types, ranges and missing members, located by line and column. */
    expect_edit_fails(dir, g, text, "\"load_s\": ", "\"load_s\": \"fast\", \"x\": ", VDNN_ERR_FORMAT, ":10:13: \"load_s\" must be a number");
    expect_edit_fails(dir, g, text, "\"update_s\"", "\"updates\"", VDNN_ERR_FORMAT, "missing \"update_s\"");
    expect_edit_fails(dir, g, text, "\"bwd_s\": ", "\"bwd_s\": -", VDNN_ERR_FORMAT, "\"bwd_s\" must be a number >= 0");
    expect_edit_fails(dir, g, text, "\"bytes_per_s\": ", "\"bytes_per_s\": 0, \"x\": ", VDNN_ERR_FORMAT, "\"bytes_per_s\" must be a positive");
    expect_edit_fails(dir, g, text, "\"h2d_busy\": {\"latency_s\": ", "\"h2d_busy\": {\"latency_s\": -", VDNN_ERR_FORMAT,
                      "\"latency_s\" must be a number >= 0");
    expect_edit_fails(dir, g, text, "\"d2h_busy\": {", "\"d2h_busy\": 3, \"x\": {", VDNN_ERR_FORMAT, "\"d2h_busy\" must be an object");
    expect_edit_fails(dir, g, text, "\"batch\": 2", "\"batch\": 2.5", VDNN_ERR_FORMAT, "\"batch\" must be a whole number");
    expect_edit_fails(dir, g, text, "\"measured\": true", "\"measured\": 1", VDNN_ERR_FORMAT, "\"measured\" must be true or false");
    expect_edit_fails(dir, g, text, "\"input\": \"1x4x4\"", "\"input\": \"1x4\"", VDNN_ERR_FORMAT, "\"input\" must be");
    expect_edit_fails(dir, g, text, "{\"bytes\": 1024", "{\"bytes\": 1e300", VDNN_ERR_FORMAT, "\"bytes\" must be a whole number");
    expect_edit_fails(dir, g, text, "\"samples\": [", "\"samples\": [7, ", VDNN_ERR_FORMAT, "\"samples\" must be an array of");
    expect_edit_fails(dir, g, text, "\"fwd_s\": 1", "\"fwd_s\": 1e999", VDNN_ERR_FORMAT, "number out of range");
    expect_edit_fails(dir, g, text, "\"c\"", "\"c\\u0000\"", VDNN_ERR_FORMAT, "\\u0000 is not allowed");

    /* Made for something else. */
    expect_edit_fails(dir, g, text, "\"model\": \"tiny\"", "\"model\": \"vgg16\"", VDNN_ERR_MISMATCH, "profile is for model 'vgg16', not 'tiny'");
    expect_edit_fails(dir, g, text, "{\"name\": \"fc\"", "{\"name\": \"fc2\"", VDNN_ERR_MISMATCH, "layer 2 is 'fc2' in the profile but 'fc'");
    expect_edit_fails(dir, g, text, "\"classes\": 3", "\"classes\": 10", VDNN_ERR_MISMATCH, "10 classes");
    const char *fc_entry = strstr(text, "{\"name\": \"fc\"");
    const char *fc_end = strstr(fc_entry, "},") + 2;
    char one[256];
    snprintf(one, sizeof one, "%.*s", (int)(fc_end - fc_entry), fc_entry);
    expect_edit_fails(dir, g, text, one, "", VDNN_ERR_MISMATCH, "profile has 2 layers, but model tiny has 3");

    /* The same file against the net at another batch or input size. */
    vdnn_graph_t *g4 = graph_at(net_text, 4, 1, 4, 4);
    vt_assert_error(vdnn_profile_read(path, g4, &p, &err), err, VDNN_ERR_MISMATCH, "profile is for batch 2, but tiny runs at batch 4");
    vdnn_graph_free(g4);
    vdnn_graph_t *g8 = graph_at(net_text, 2, 1, 8, 8);
    vt_assert_error(vdnn_profile_read(path, g8, &p, &err), err, VDNN_ERR_MISMATCH, "input 1x4x4, but tiny runs at 1x8x8");
    vdnn_graph_free(g8);
    /* The untouched file still reads. */
    vt_assert_ok(vdnn_profile_read(path, g, &p, &err), err);
    vdnn_profile_release(&p);
    free(text);
    vt_rmdir(dir);
    vdnn_graph_free(g);
}

/* The busy link, measured for real: lenet at batch 32 on the CPU backend with a 200 MB/s link. Every copy of
 * a plan that swaps every map takes bytes / 200 MB/s plus a little (memcpy itself runs at gigabytes per
 * second, and waking the copy thread takes well under the 10-20 ms of lenet's larger copies), so the fitted
 * model must charge the largest map within [0.9, 1.6] times that; the slowdown is a sane fraction. */
static void test_measure_busy(void **state)
{
    (void)state;
    const double bw = 200e6;
    vdnn_cpu_options co = {.threads = 2, .link_bandwidth_d2h = bw, .link_bandwidth_h2d = bw};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    vdnn_graph_t *g = vt_load_zoo("lenet");
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = 32;
    cfg.in_c = 1;
    cfg.in_h = cfg.in_w = 28;
    cfg.classes = 10;
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    const size_t n = (size_t)32 * 28 * 28;
    float *x = malloc(n * sizeof *x);
    int32_t y[32];
    assert_non_null(x);
    vt_fill_uniform(x, n, 5, -1, 1);
    for (int i = 0; i < 32; i++) y[i] = i % 10;
    vdnn_profile prof;
    memset(&prof, 0, sizeof prof);
    vt_assert_ok(vdnn_profile_measure(net, x, y, 2, 1 << 20, &prof, &err), err);
    vdnn_net_free(net);
    assert_true(prof.d2h_busy.bytes_per_s == 0 && prof.copy_slowdown == 0);
    bool measured = false;
    vt_assert_ok(vdnn_profile_measure_busy(g, be, &cfg, x, y, 2, &prof, &measured, &err), err);
    assert_true(measured);
    size_t big = 0;
    for (int l = 1; l < g->n_layers; l++)
        if (vdnn_shape_bytes(g->layers[l].out) > big) big = vdnn_shape_bytes(g->layers[l].out);
    for (int d = 0; d < 2; d++) {
        const vdnn_copy_model *m = d ? &prof.h2d_busy : &prof.d2h_busy;
        assert_true(m->bytes_per_s > 0 && m->latency_s >= 0);
        double t = vdnn_copy_seconds(m, big), link = (double)big / bw;
        if (!(t >= 0.9 * link && t <= 1.6 * link))
            fail_msg("%s busy model: %zu bytes in %g s, the link needs %g s", d ? "h2d" : "d2h", big, t, link);
        assert_true(vdnn_profile_link(&prof, d == 0) == m);
    }
    assert_true(prof.copy_slowdown >= 0 && prof.copy_slowdown <= 4);
    vdnn_profile_release(&prof);
    free(x);
    vdnn_graph_free(g);
    vdnn_backend_destroy(be);
}

/* A sequence model profiles like an image net: its random batch is token ids below the vocabulary and one
 * label per token (a batch of images and one label per sample made the loss refuse a label). */
static void test_measure_sequence(void **state)
{
    (void)state;
    static const char *gpt = "[net]\nname=tiny-gpt\ninput=1x8x1\nclasses=16\n"
                             "[wte]\ntype=embed\noutputs=8\n[wpe]\ntype=pos_embed\ncontext=8\n"
                             "[ln]\ntype=layernorm\n[qkv]\ntype=linear\noutputs=24\n"
                             "[probs]\ntype=attn_probs\nheads=2\n[mix]\ntype=attn_mix\ninput=probs,qkv\n"
                             "[head]\ntype=linear\noutputs=classes\n[loss]\ntype=softmax\n";
    vdnn_cpu_options co = {.threads = 1};
    vdnn_backend_t *be = NULL;
    vdnn_model_t *m = NULL;
    vdnn_profile_t *prof = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    vt_assert_ok(vdnn_model_parse(gpt, "tiny-gpt.cfg", &m, &err), err);
    vt_assert_ok(vdnn_profile_measure_model(m, be, (vdnn_shape){3, 1, 8, 1}, 16, NULL, 1, &prof, NULL, &err), err);
    vdnn_profile_summary s;
    vdnn_profile_summarize(prof, &s);
    assert_true(s.forward_s > 0 && s.backward_s > 0);
    vdnn_profile_free(prof);
    vdnn_model_free(m);
    vdnn_backend_destroy(be);
}

/* The JSON reader on its own: escapes, numbers and what it must refuse. */
static void test_json(void **state)
{
    (void)state;
    vdnn_json *v = NULL;
    vdnn_error err;
    const char *ok = " {\"a\": [1, -0.5e3, 2E+2, true, false, null], \"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"/\\/\", \"o\": {}} ";
    vt_assert_ok(vdnn_json_parse(ok, strlen(ok), "x", &v, &err), err);
    const vdnn_json *a = vdnn_json_get(v, "a");
    assert_int_equal(a->type, VDNN_JSON_ARRAY);
    assert_int_equal(a->n, 6);
    assert_true(a->items[1].number == -500 && a->items[2].number == 200);
    assert_true(a->items[3].type == VDNN_JSON_BOOL && a->items[3].boolean);
    assert_true(a->items[4].type == VDNN_JSON_BOOL && !a->items[4].boolean);
    assert_int_equal(a->items[5].type, VDNN_JSON_NULL);
    assert_string_equal(vdnn_json_get(v, "s")->string, "\xc3\xa9\xf0\x9f\x98\x80\n\"//");
    assert_int_equal(vdnn_json_get(v, "o")->n, 0);
    assert_null(vdnn_json_get(v, "missing"));
    assert_null(vdnn_json_get(a, "a"));
    vdnn_json_free(v);
    static const struct { const char *text, *needle; } bad[] = {
        {"01", "unexpected text"},       {"1.", "digit after the decimal point"}, {"1e", "digit in the exponent"},
        {"[1,]", "expected a value"},    {"{\"a\" 1}", "expected ':'"},           {"{\"a\": 1,}", "member name"},
        {"\"\\x\"", "invalid escape"},   {"\"\\ud800\"", "unpaired surrogate"},   {"\"a\nb\"", "control character"},
        {"tru", "expected a value"},     {"[1] 2", "unexpected text"},            {"", "expected a value"},
        {"\"abc", "unterminated string"}, {"{\"a\": [1, 2}", "expected ',' or ']'"}, {"-", "expected a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = (vdnn_json *)&v;
        vdnn_status st = vdnn_json_parse(bad[i].text, strlen(bad[i].text), "b.json", &v, &err);
        if (st != VDNN_ERR_FORMAT || !strstr(err.msg, bad[i].needle) || strncmp(err.msg, "b.json:1:", 9))
            fail_msg("'%s': %s %s", bad[i].text, vdnn_status_name(st), err.msg);
        assert_null(v);
    }
    /* Positions count lines. */
    vt_assert_error(vdnn_json_parse("{\n\n  x", 6, "p.json", &v, &err), err, VDNN_ERR_FORMAT, "p.json:3:3:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate),   cmocka_unit_test(test_fit),  cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_files), cmocka_unit_test(test_measure_busy),  cmocka_unit_test(test_json),
        cmocka_unit_test(test_measure_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
