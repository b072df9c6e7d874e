/* Shared helpers for the cmocka tests. */
#include "testutil.h"

#include "backend/backend.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vt_tmpdir(char *buf, size_t len)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(buf, len, "%s/vdnn-test-XXXXXX", base);
    if (!mkdtemp(buf)) fail_msg("mkdtemp failed for %s", buf);
}

void vt_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void vt_write_file(const char *dir, const char *name, const void *data, size_t len, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    FILE *f = fopen(out, "wb");
    if (!f) fail_msg("cannot write %s", out);
    if (len && fwrite(data, 1, len, f) != len) fail_msg("short write %s", out);
    fclose(f);
}

void vt_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((double)(s >> 11) / 9007199254740992.0);
    }
}

vdnn_graph_t *vt_load_zoo(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.cfg", VDNN_SOURCE_DIR, name);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    return g;
}

void vt_assert_same_checkpoint(const char *what, const vdnn_checkpoint *want, const vdnn_checkpoint *got)
{
    assert_int_equal(want->n_tensors, got->n_tensors);
    assert_true(want->n_tensors > 0);
    for (int i = 0; i < want->n_tensors; i++) {
        const vdnn_ckpt_tensor *a = &want->tensors[i], *b = &got->tensors[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->count, b->count);
        if (memcmp(a->data, b->data, a->count * sizeof(float))) {
            size_t k = 0;
            while (!memcmp(&a->data[k], &b->data[k], sizeof(float))) k++;
            fail_msg("%s: tensor %s differs at [%zu]: %.9g vs %.9g", what, a->name, k, (double)a->data[k],
                     (double)b->data[k]);
        }
    }
}


vdnn_dtype vt_test_precision(void)
{
    const char *v = getenv("VDNN_TEST_PRECISION");
    if (!v || !*v) return VDNN_DTYPE_F32;
    vdnn_dtype t = VDNN_DTYPE_COUNT;
    for (int i = 0; i < VDNN_DTYPE_COUNT; i++)
        if (!strcmp(v, vdnn_dtype_name((vdnn_dtype)i))) t = (vdnn_dtype)i;
    if (t == VDNN_DTYPE_COUNT) {
        fprintf(stderr, "VDNN_TEST_PRECISION=%s: expected fp32, bf16 or fp16\n", v);
        exit(1);
    }
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    if (vdnn_backend_cpu_create(&co, &be, &err) != VDNN_OK) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        exit(1);
    }
    vdnn_status st = vdnn_backend_check_dtype(be, t, &err);
    vdnn_backend_destroy(be);
    if (st != VDNN_OK) {
        printf("skipped: %s\n", err.msg);
        exit(77);
    }
    return t;
}

char *vt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

int vt_cpu_backend_setup(void **state)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    if (vdnn_backend_cpu_create(&co, &be, &err) != VDNN_OK) return -1;
    *state = be;
    return 0;
}

int vt_cpu_backend_teardown(void **state)
{
    vdnn_backend_destroy(*state);
    return 0;
}
