/* Tests for checkpoint files: bitwise round trip, every kind of corruption, and atomic writes that fail cleanly. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "train/checkpoint.h"

/* A checkpoint with awkward values: empty tensor, NaN payloads, -0, infinities, denormals. */
typedef struct sample {
    vdnn_ckpt_tensor t[4];
    float a[37], b[1000], d[6];
    vdnn_checkpoint ck;
} sample;

static void make_sample(sample *s)
{
    memset(s, 0, sizeof *s);
    vt_fill_uniform(s->a, 37, 1, -3.0f, 3.0f);
    vt_fill_uniform(s->b, 1000, 2, -1e6f, 1e6f);
    const float special[6] = {-0.0f, INFINITY, -INFINITY, 1e-42f, 3.4e38f, 0.0f};
    memcpy(s->d, special, sizeof special);
    uint32_t nan_bits = 0x7fc12345u; /* a NaN with a payload must survive bit for bit */
    memcpy(&s->d[5], &nan_bits, sizeof nan_bits);
    snprintf(s->t[0].name, sizeof s->t[0].name, "conv1.weight");
    s->t[0].count = 37;
    s->t[0].data = s->a;
    snprintf(s->t[1].name, sizeof s->t[1].name, "conv1.weight.momentum");
    s->t[1].count = 1000;
    s->t[1].data = s->b;
    snprintf(s->t[2].name, sizeof s->t[2].name, "empty");
    s->t[2].count = 0;
    s->t[2].data = NULL;
    memset(s->t[3].name, 'n', sizeof s->t[3].name - 1); /* the longest name allowed */
    s->t[3].count = 6;
    s->t[3].data = s->d;
    snprintf(s->ck.model, sizeof s->ck.model, "allops");
    s->ck.model_hash = 0xfedcba9876543210ULL;
    s->ck.step = 123456789012LL;
    s->ck.epoch = -3;
    s->ck.seed = UINT64_MAX - 5;
    s->ck.n_tensors = 4;
    s->ck.tensors = s->t;
}

static void assert_same(const vdnn_checkpoint *want, const vdnn_checkpoint *got)
{
    assert_string_equal(want->model, got->model);
    assert_true(want->model_hash == got->model_hash);
    assert_true(want->step == got->step);
    assert_true(want->epoch == got->epoch);
    assert_true(want->seed == got->seed);
    assert_int_equal(want->precision, got->precision);
    assert_int_equal(want->n_tensors, got->n_tensors);
    for (int i = 0; i < want->n_tensors; i++) {
        assert_string_equal(want->tensors[i].name, got->tensors[i].name);
        assert_int_equal(want->tensors[i].count, got->tensors[i].count);
        assert_non_null(got->tensors[i].data);
        if (want->tensors[i].count)
            assert_memory_equal(want->tensors[i].data, got->tensors[i].data, want->tensors[i].count * sizeof(float));
    }
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) fail_msg("short read %s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Reads `path`, expecting failure `expect` with `needle` and the path in the message,
 * and a checkpoint left empty. */
static void expect_read_error(const char *path, vdnn_status expect, const char *needle)
{
    vdnn_checkpoint ck;
    vdnn_error err;
    vdnn_error_clear(&err);
    vt_assert_error(vdnn_checkpoint_read(path, &ck, &err), err, expect, needle);
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    assert_int_equal(ck.n_tensors, 0);
    assert_null(ck.tensors);
}

static void write_sample(const char *dir, char *path, size_t len, unsigned char **bytes, size_t *n)
{
    sample s;
    make_sample(&s);
    vdnn_error err;
    snprintf(path, len, "%s/ck.vdnn", dir);
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    *bytes = slurp(path, n);
}

static void set_crc(unsigned char *b, size_t n)
{
    uint32_t c = (uint32_t)crc32(0L, b, (uInt)(n - 4));
    for (int i = 0; i < 4; i++) b[n - 4 + i] = (unsigned char)(c >> (8 * i));
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[512], path[600];
    vt_tmpdir(dir, sizeof dir);
    sample s;
    make_sample(&s);
    vdnn_error err;
    snprintf(path, sizeof path, "%s/ck.vdnn", dir);
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    assert_int_equal(count_entries(dir), 1); /* no temporary left behind */

    vdnn_checkpoint got;
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&s.ck, &got);
    assert_ptr_equal(vdnn_checkpoint_find(&got, "conv1.weight.momentum"), &got.tensors[1]);
    assert_null(vdnn_checkpoint_find(&got, "conv1"));
    assert_null(vdnn_checkpoint_find(&got, "nope"));
    vdnn_checkpoint_release(&got);
    assert_int_equal(got.n_tensors, 0);
    vdnn_checkpoint_release(&got); /* twice is harmless */

    /* Overwriting replaces the contents. */
    s.ck.step = 7;
    s.ck.n_tensors = 1;
    s.a[0] = 42.0f;
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&s.ck, &got);
    vdnn_checkpoint_release(&got);

    /* An empty checkpoint is valid too. */
    s.ck.n_tensors = 0;
    s.ck.tensors = NULL;
    s.ck.model[0] = '\0';
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&s.ck, &got);
    vdnn_checkpoint_release(&got);
    vt_rmdir(dir);
}

static void test_layout_is_documented(void **state)
{
    (void)state;
    char dir[512], path[600];
    vt_tmpdir(dir, sizeof dir);
    unsigned char *b;
    size_t n;
    write_sample(dir, path, sizeof path, &b, &n);
    assert_memory_equal(b, "VDNNCKPT", 8);
    assert_int_equal(b[8], VDNN_CKPT_VERSION);
    uint64_t size = 0;
    for (int i = 7; i >= 0; i--) size = (size << 8) | b[12 + i];
    assert_int_equal(size, n);
    /* header + "allops" + precision + 4 tensors (names 12, 21, 5, 95 bytes) + data + crc */
    size_t expect = 60 + 6 + 4 + 4 * 12 + (12 + 21 + 5 + 95) + (37 + 1000 + 0 + 6) * 4 + 4;
    assert_int_equal(n, expect);
    free(b);
    vt_rmdir(dir);
}

static void test_truncated(void **state)
{
    (void)state;
    char dir[512], path[600], cut[600];
    vt_tmpdir(dir, sizeof dir);
    unsigned char *b;
    size_t n;
    write_sample(dir, path, sizeof path, &b, &n);
    const size_t offsets[] = {0, 3, 8, 11, 12, 19, 20, 40, 59, 60, 66, 100, n / 2, n - 5, n - 4, n - 1};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        vt_write_file(dir, "cut.vdnn", b, offsets[i], cut, sizeof cut);
        char needle[128];
        if (offsets[i] >= 20) snprintf(needle, sizeof needle, "truncated: expected %zu bytes, file has %zu", n, offsets[i]);
        else snprintf(needle, sizeof needle, "truncated: expected at least 64 bytes, file has %zu", offsets[i]);
        expect_read_error(cut, VDNN_ERR_FORMAT, needle);
    }
    free(b);
    vt_rmdir(dir);
}

static void test_every_flipped_byte_is_caught(void **state)
{
    (void)state;
    char dir[512], path[600], bad[600];
    vt_tmpdir(dir, sizeof dir);
    unsigned char *b;
    size_t n;
    write_sample(dir, path, sizeof path, &b, &n);
    size_t stride = getenv("VDNN_TEST_QUICK") ? 7 : 1;
    for (size_t i = 0; i < n; i += stride) {
        for (int bit = 0; bit < 8; bit += 3) {
            b[i] ^= (unsigned char)(1u << bit);
            vt_write_file(dir, "bad.vdnn", b, n, bad, sizeof bad);
            const char *needle = "checksum mismatch: file is corrupt";
            if (i < 8) needle = "not a vdnn checkpoint";
            else if (i < 20) needle = ""; /* version or size field: any format error */
            expect_read_error(bad, VDNN_ERR_FORMAT, needle);
            b[i] ^= (unsigned char)(1u << bit);
        }
    }
    free(b);
    vt_rmdir(dir);
}

static void test_wrong_magic_and_future_version(void **state)
{
    (void)state;
    char dir[512], path[600], bad[600];
    vt_tmpdir(dir, sizeof dir);
    unsigned char *b;
    size_t n;
    write_sample(dir, path, sizeof path, &b, &n);

    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    memcpy(c, "VDNNCKPX", 8);
    vt_write_file(dir, "magic.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "not a vdnn checkpoint");
    vt_write_file(dir, "text.vdnn", "[net]\nname=x\n", 13, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "not a vdnn checkpoint");
    vt_write_file(dir, "short.vdnn", "ab", 2, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "not a vdnn checkpoint");

    /* A newer version is named as such even though its checksum and size are right. */
    memcpy(c, b, n);
    put32(c + 8, 7);
    set_crc(c, n);
    vt_write_file(dir, "v7.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "version 7 is newer than this vdnn (2)");
    /* ...even when it is too short for the rest of this version's header. */
    vt_write_file(dir, "v7short.vdnn", c, 12, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "version 7 is newer than this vdnn (2)");

    /* Trailing bytes after a good file. */
    unsigned char *longer = calloc(n + 3, 1);
    memcpy(longer, b, n);
    vt_write_file(dir, "long.vdnn", longer, n + 3, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "trailing data");
    free(longer);
    free(c);
    free(b);
    vt_rmdir(dir);
}

/* Counts that are absurd but carry a valid checksum (a buggy or hostile writer) must be
 * rejected by their bounds, without allocating what they claim. */
/* The precision is recorded (a bf16 net's checkpoint says so), and a version 1 file, written before precisions
 * existed, still reads: as an fp32 net's. */
static void test_precision_and_version1(void **state)
{
    (void)state;
    char dir[512], path[600], old[600];
    vt_tmpdir(dir, sizeof dir);
    sample s;
    make_sample(&s);
    s.ck.precision = 1;
    vdnn_error err;
    snprintf(path, sizeof path, "%s/bf16.vdnn", dir);
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    vdnn_checkpoint got;
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_int_equal(got.precision, 1);
    assert_same(&s.ck, &got);
    vdnn_checkpoint_release(&got);
    /* The same file as version 1 wrote it: no precision field, the size 4 bytes less. */
    size_t n;
    unsigned char *b = slurp(path, &n);
    const size_t at = 60 + strlen(s.ck.model);
    memmove(b + at, b + at + 4, n - at - 4);
    n -= 4;
    put32(b + 8, 1);
    put64(b + 12, n);
    set_crc(b, n);
    vt_write_file(dir, "v1.vdnn", b, n, old, sizeof old);
    vt_assert_ok(vdnn_checkpoint_read(old, &got, &err), err);
    assert_int_equal(got.precision, 0);
    got.precision = 1;
    assert_same(&s.ck, &got);
    vdnn_checkpoint_release(&got);
    s.ck.precision = 3;
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "precision 3 is out of range");
    free(b);
    vt_rmdir(dir);
}

static void test_absurd_counts(void **state)
{
    (void)state;
    char dir[512], path[600], bad[600];
    vt_tmpdir(dir, sizeof dir);
    unsigned char *b;
    size_t n;
    write_sample(dir, path, sizeof path, &b, &n);
    unsigned char *c = malloc(n);
    const size_t t0 = 60 + 6 + 4; /* first tensor record: after the model name and the precision */

    memcpy(c, b, n);
    put32(c + 52, 0xffffffffu); /* n_tensors */
    set_crc(c, n);
    vt_write_file(dir, "ntensors.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "4294967295 tensors cannot fit");

    memcpy(c, b, n);
    put32(c + 52, 5); /* one more tensor than present */
    set_crc(c, n);
    vt_write_file(dir, "ntensors5.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "corrupt");

    memcpy(c, b, n);
    put32(c + 56, 1000); /* model name length */
    set_crc(c, n);
    vt_write_file(dir, "model.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "model name length 1000");

    memcpy(c, b, n);
    put32(c + t0 - 4, 7); /* no such precision */
    set_crc(c, n);
    vt_write_file(dir, "precision.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "corrupt: precision 7");

    memcpy(c, b, n);
    put32(c + t0, 96); /* tensor name length over the limit */
    set_crc(c, n);
    vt_write_file(dir, "name.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "tensor name length 96");

    memcpy(c, b, n);
    put32(c + t0, 0);
    set_crc(c, n);
    vt_write_file(dir, "name0.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "tensor name length 0");

    memcpy(c, b, n);
    c[t0 + 4 + 2] = '\0'; /* NUL inside a name */
    set_crc(c, n);
    vt_write_file(dir, "nul.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "NUL");

    memcpy(c, b, n);
    put64(c + t0 + 4 + 12, UINT64_MAX / 2); /* element count of conv1.weight */
    set_crc(c, n);
    vt_write_file(dir, "count.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "claims 9223372036854775807 values");

    memcpy(c, b, n);
    put64(c + t0 + 4 + 12, 36); /* one value fewer: the rest no longer lines up */
    set_crc(c, n);
    vt_write_file(dir, "count36.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "corrupt");

    memcpy(c, b, n);
    put64(c + 12, 10); /* size field below the smallest file */
    vt_write_file(dir, "size.vdnn", c, n, bad, sizeof bad);
    expect_read_error(bad, VDNN_ERR_FORMAT, "file size of 10 bytes");
    free(c);
    free(b);
    vt_rmdir(dir);
}

static void test_read_io_errors(void **state)
{
    (void)state;
    char dir[512], path[600];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/missing.vdnn", dir);
    expect_read_error(path, VDNN_ERR_IO, "cannot open");
    expect_read_error(dir, VDNN_ERR_IO, "not a regular file");
    vdnn_checkpoint ck;
    vdnn_error err;
    vt_assert_error(vdnn_checkpoint_read(NULL, &ck, &err), err, VDNN_ERR_INVALID_ARG, "path");
    vt_rmdir(dir);
}

static void test_write_into_missing_directory(void **state)
{
    (void)state;
    char dir[512], path[600];
    vt_tmpdir(dir, sizeof dir);
    sample s;
    make_sample(&s);
    vdnn_error err;
    snprintf(path, sizeof path, "%s/no/such/dir/ck.vdnn", dir);
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_IO, path);
    assert_int_equal(count_entries(dir), 0);

    /* A parent that is a regular file. */
    char file[600];
    vt_write_file(dir, "plain", "x", 1, file, sizeof file);
    snprintf(path, sizeof path, "%s/plain/ck.vdnn", dir);
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_IO, path);
    assert_int_equal(count_entries(dir), 1);
    vt_rmdir(dir);
}

/* A good checkpoint at PATH must survive every way an overwrite can fail. */
static void test_failed_overwrite_keeps_old_file(void **state)
{
    (void)state;
    char dir[512], path[600], tmp[700];
    vt_tmpdir(dir, sizeof dir);
    sample s;
    make_sample(&s);
    vdnn_error err;
    snprintf(path, sizeof path, "%s/ck.vdnn", dir);
    vt_assert_ok(vdnn_checkpoint_write(path, &s.ck, &err), err);
    vdnn_checkpoint old = s.ck;
    sample s2;
    make_sample(&s2);
    s2.ck.step = 999;
    s2.b[10] = -1.0f;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());

    /* Disk full: the temporary leads to /dev/full, so writes fail with ENOSPC (even as root). */
    if (symlink("/dev/full", tmp) != 0) fail_msg("symlink %s", tmp);
    vt_assert_error(vdnn_checkpoint_write(path, &s2.ck, &err), err, VDNN_ERR_IO, path);
    assert_non_null(strstr(err.msg, "No space left"));
    struct stat sb;
    assert_int_equal(lstat(tmp, &sb), -1); /* the temporary was removed */
    assert_int_equal(count_entries(dir), 1);
    vdnn_checkpoint got;
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&old, &got);
    vdnn_checkpoint_release(&got);

    /* The temporary cannot be created (a directory is in the way): it is not ours to remove. */
    assert_int_equal(mkdir(tmp, 0755), 0);
    vt_assert_error(vdnn_checkpoint_write(path, &s2.ck, &err), err, VDNN_ERR_IO, path);
    assert_int_equal(stat(tmp, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(rmdir(tmp), 0);
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&old, &got);
    vdnn_checkpoint_release(&got);

    /* The final rename fails (PATH is a non-empty directory): no temporary is left. */
    char dpath[600], inner[700];
    snprintf(dpath, sizeof dpath, "%s/ckdir", dir);
    assert_int_equal(mkdir(dpath, 0755), 0);
    vt_write_file(dpath, "keep", "k", 1, inner, sizeof inner);
    vt_assert_error(vdnn_checkpoint_write(dpath, &s2.ck, &err), err, VDNN_ERR_IO, dpath);
    assert_int_equal(count_entries(dir), 2);
    assert_int_equal(count_entries(dpath), 1);
    vt_rmdir(dpath);

    /* After all that, a normal overwrite still works. */
    vt_assert_ok(vdnn_checkpoint_write(path, &s2.ck, &err), err);
    vt_assert_ok(vdnn_checkpoint_read(path, &got, &err), err);
    assert_same(&s2.ck, &got);
    vdnn_checkpoint_release(&got);
    vt_rmdir(dir);
}

static void test_write_rejects_bad_arguments(void **state)
{
    (void)state;
    char dir[512], path[600];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.vdnn", dir);
    sample s;
    vdnn_error err;

    make_sample(&s);
    vt_assert_error(vdnn_checkpoint_write(NULL, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "path");
    vt_assert_error(vdnn_checkpoint_write(path, NULL, &err), err, VDNN_ERR_INVALID_ARG, path);
    s.t[1].data = NULL;
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "conv1.weight.momentum");
    make_sample(&s);
    memset(s.t[3].name, 'x', sizeof s.t[3].name);
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "tensor 3");
    make_sample(&s);
    s.t[0].name[0] = '\0';
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "tensor 0");
    make_sample(&s);
    memset(s.ck.model, 'm', sizeof s.ck.model);
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "model name");
    make_sample(&s);
    s.ck.n_tensors = -1;
    vt_assert_error(vdnn_checkpoint_write(path, &s.ck, &err), err, VDNN_ERR_INVALID_ARG, "-1 tensors");
    assert_int_equal(count_entries(dir), 0);
    vt_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_layout_is_documented),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_every_flipped_byte_is_caught),
        cmocka_unit_test(test_wrong_magic_and_future_version),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_precision_and_version1),
        cmocka_unit_test(test_read_io_errors),
        cmocka_unit_test(test_write_into_missing_directory),
        cmocka_unit_test(test_failed_overwrite_keeps_old_file),
        cmocka_unit_test(test_write_rejects_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
