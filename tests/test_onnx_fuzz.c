/* Fuzzing ONNX import and export: every committed tests/data/onnx model, mutated deterministically (bit flips,
 * special bytes, runs, deletions, insertions, copied chunks, splices of two files, truncations, huge length
 * varints), must load or fail with an error naming the file, never crash (the point of running it under ASan and
 * UBSan); some mutants that load are exported, and the export must load again with the same layers.
 * VDNN_TEST_ITERATIONS overrides the mutant count; VDNN_TEST_QUICK=1 (the sanitizer build) runs a fifth. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/onnx.h"
#include "testutil.h"

#define DATA VDNN_SOURCE_DIR "/tests/data/onnx"
#define MAX_FILES 128
#define ITERATIONS 300000
#define EXPORT_EVERY 16  /* export one loading mutant in this many (each export is a synced file) */
#define MAX_EXPORTS 60

typedef struct corpus {
    int n;
    char *name[MAX_FILES];
    uint8_t *data[MAX_FILES];
    size_t len[MAX_FILES];
} corpus;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every .onnx file of the data directory, in name order (the mutants depend on it). */
static void load_corpus(corpus *c)
{
    memset(c, 0, sizeof *c);
    DIR *d = opendir(DATA);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) && c->n < MAX_FILES;) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".onnx")) c->name[c->n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(c->name, (size_t)c->n, sizeof *c->name, by_name);
    for (int i = 0; i < c->n; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "/%s", c->name[i]);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        fseek(f, 0, SEEK_END);
        c->len[i] = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        c->data[i] = malloc(c->len[i] + 1);
        assert_non_null(c->data[i]);
        assert_int_equal(fread(c->data[i], 1, c->len[i], f), c->len[i]);
        fclose(f);
    }
    assert_true(c->n >= 30);
}

static void free_corpus(corpus *c)
{
    for (int i = 0; i < c->n; i++) free(c->name[i]), free(c->data[i]);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t below(uint64_t *s, size_t n) { return n ? (size_t)(next(s) % n) : 0; }

/* One mutation of buf[0 .. *len) in place (cap bytes of room); `other` is another file, for splices. */
static void mutate(uint8_t *buf, size_t *len, size_t cap, const uint8_t *other, size_t other_len, uint64_t *s)
{
    static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12, 0x1a, 0x22};
    size_t n = *len;
    switch (next(s) % 9) {
    case 0: /* a bit */
        if (n) buf[below(s, n)] ^= (uint8_t)(1u << below(s, 8));
        break;
    case 1: /* a byte to a value that means something to protobuf: a tag, a length, a varint's continuation */
        if (n) buf[below(s, n)] = special[below(s, sizeof special)];
        break;
    case 2: { /* a run of random bytes */
        size_t at = below(s, n), k = 1 + below(s, 8);
        for (size_t i = at; i < n && i < at + k; i++) buf[i] = (uint8_t)next(s);
        break;
    }
    case 3: { /* delete a range */
        size_t at = below(s, n), k = 1 + below(s, 16);
        if (at + k > n) k = n - at;
        memmove(buf + at, buf + at + k, n - at - k);
        *len = n - k;
        break;
    }
    case 4: { /* insert random bytes */
        size_t at = below(s, n + 1), k = 1 + below(s, 16);
        if (n + k > cap) break;
        memmove(buf + at + k, buf + at, n - at);
        for (size_t i = 0; i < k; i++) buf[at + i] = (uint8_t)next(s);
        *len = n + k;
        break;
    }
    case 5: { /* a chunk copied over another place (repeated fields, nested messages) */
        if (n < 2) break;
        size_t from = below(s, n), to = below(s, n), k = 1 + below(s, 64);
        if (from + k > n) k = n - from;
        if (to + k > n) k = n - to;
        memmove(buf + to, buf + from, k);
        break;
    }
    case 6: { /* this file's head, another's tail */
        size_t head = below(s, n + 1), tail = below(s, other_len + 1);
        if (head + tail > cap) tail = cap - head;
        memcpy(buf + head, other + other_len - tail, tail);
        *len = head + tail;
        break;
    }
    case 7: /* truncated */
        *len = below(s, n + 1);
        break;
    default: { /* a huge varint: a length or a dimension of billions */
        static const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
        size_t at = below(s, n);
        for (size_t i = 0; i < sizeof big && at + i < n; i++) buf[at + i] = big[i];
        break;
    }
    }
}

/* Export's parameter values: distinct and finite, whatever the storage. */
static vdnn_status fill(void *ctx, const char *name, float *dst, size_t count, vdnn_error *err)
{
    for (size_t i = 0; i < count; i++) dst[i] = 0.25f + (float)(i % 13) * 0.125f;
    return VDNN_OK;
}

typedef struct stats {
    int loaded, refused, exported, export_refused;
} stats;

/* The mutant in a buffer of exactly its size (so ASan sees a read past its end): loads, or fails naming it. */
static void try_one(const uint8_t *mut, size_t len, const char *dir, stats *st)
{
    uint8_t *exact = malloc(len ? len : 1);
    assert_non_null(exact);
    memcpy(exact, mut, len);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vdnn_status rc = vdnn_onnx_parse(exact, len, "fuzz.onnx", &g, &err);
    if (rc != VDNN_OK) {
        assert_null(g);
        if (strncmp(err.msg, "fuzz.onnx", 9)) fail_msg("an error without the file's name: %s", err.msg);
        st->refused++;
        free(exact);
        return;
    }
    st->loaded++;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 0, 0, 0}, 0, &err), err);
    if (st->loaded % EXPORT_EVERY == 0 && st->exported + st->export_refused < MAX_EXPORTS) {
        /* Export it: what loads exports to something that loads again, the same layers in the same order. */
        char in[1024], out[1024];
        vt_write_file(dir, "mutant.onnx", exact, len, in, sizeof in);
        snprintf(out, sizeof out, "%s/exported.onnx", dir);
        rc = vdnn_onnx_export(in, fill, NULL, out, &err);
        if (rc == VDNN_OK) {
            vdnn_graph_t *g2 = NULL;
            vt_assert_ok(vdnn_graph_load(out, &g2, &err), err);
            assert_int_equal(g2->n_layers, g->n_layers);
            for (int l = 0; l < g->n_layers; l++) assert_string_equal(g2->layers[l].name, g->layers[l].name);
            vdnn_graph_free(g2);
            st->exported++;
        } else {
            /* Only a tensor two parameters share, given two values, has no export. */
            if (rc != VDNN_ERR_UNSUPPORTED || !strstr(err.msg, "an ONNX file holds one value"))
                fail_msg("export of a model that loads failed: %s", err.msg);
            st->export_refused++;
        }
    }
    vdnn_graph_free(g);
    free(exact);
}

static void test_fuzz(void **state)
{
    corpus c;
    load_corpus(&c);
    long iterations = ITERATIONS;
    const char *q = getenv("VDNN_TEST_QUICK"), *it = getenv("VDNN_TEST_ITERATIONS");
    if (q && *q && strcmp(q, "0")) iterations /= 5;
    if (it && atol(it) > 0) iterations = atol(it);
    size_t cap = 0;
    for (int i = 0; i < c.n; i++) cap = c.len[i] > cap ? c.len[i] : cap;
    cap *= 2;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    char dir[512];
    vt_tmpdir(dir, sizeof dir);
    stats st = {0};
    uint64_t s = 0x2545f4914f6cdd1dULL;
    const clock_t t0 = clock();
    for (long k = 0; k < iterations; k++) {
        const int f = (int)(k % c.n), o = (int)below(&s, (size_t)c.n);
        size_t len = c.len[f];
        memcpy(buf, c.data[f], len);
        const int mutations = 1 + (int)below(&s, 3);
        for (int m = 0; m < mutations; m++) mutate(buf, &len, cap, c.data[o], c.len[o], &s);
        try_one(buf, len, dir, &st);
    }
    printf("%ld mutants of %d files in %.1f s: %d loaded, %d refused; %d exported and loaded again, %d exports "
           "refused (a shared tensor)\n",
           iterations, c.n, (double)(clock() - t0) / CLOCKS_PER_SEC, st.loaded, st.refused, st.exported,
           st.export_refused);
    /* Both outcomes happened: the mutants reached the mapping, not only the decoder. */
    assert_true(st.loaded > 0 && st.refused > 0 && st.exported > 0);
    vt_rmdir(dir);
    free(buf);
    free_corpus(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
