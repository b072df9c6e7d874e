/* Tests for the IDX/CIFAR readers, dataset specs, normalisation, synthetic data and the batch loader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "train/data.h"

#define FASHION "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

/* ---- file builders ---- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX image file in memory; *len gets its size. */
static uint8_t *idx_images(int count, int rows, int cols, const uint8_t *pix, size_t *len)
{
    size_t n = (size_t)count * rows * cols;
    uint8_t *b = malloc(16 + n);
    put_be32(b, 0x803);
    put_be32(b + 4, (uint32_t)count);
    put_be32(b + 8, (uint32_t)rows);
    put_be32(b + 12, (uint32_t)cols);
    memcpy(b + 16, pix, n);
    *len = 16 + n;
    return b;
}

static uint8_t *idx_labels(int count, const uint8_t *lab, size_t *len)
{
    uint8_t *b = malloc(8 + (size_t)count);
    put_be32(b, 0x801);
    put_be32(b + 4, (uint32_t)count);
    memcpy(b + 8, lab, (size_t)count);
    *len = 8 + (size_t)count;
    return b;
}

static void write_gz(const char *dir, const char *name, const void *data, size_t len, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    gzFile f = gzopen(out, "wb");
    if (!f) fail_msg("gzopen %s", out);
    if (gzwrite(f, data, (unsigned)len) != (int)len) fail_msg("gzwrite %s", out);
    gzclose(f);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) fail_msg("short read %s", path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void random_bytes(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (uint8_t)(s >> 24);
    }
}

static const vdnn_shape no_shape = {0, 0, 0, 0};

/* ---- IDX reader ---- */

static void test_idx_plain_and_gz(void **state)
{
    char dir[256], p1[512], p2[512], p3[512];
    vt_tmpdir(dir, sizeof dir);
    uint8_t pix[3 * 2 * 3], lab[3] = {2, 0, 9};
    for (int i = 0; i < 18; i++) pix[i] = (uint8_t)(i * 37 + 5);
    size_t ilen, llen;
    uint8_t *ib = idx_images(3, 2, 3, pix, &ilen), *lb = idx_labels(3, lab, &llen);
    vt_write_file(dir, "plain-images", ib, ilen, p1, sizeof p1);
    write_gz(dir, "gz-images.gz", ib, ilen, p2, sizeof p2);
    write_gz(dir, "gz-labels.gz", lb, llen, p3, sizeof p3);
    const char *paths[2] = {p1, p2};
    for (int k = 0; k < 2; k++) {
        vdnn_error err;
        int count = 0, rows = 0, cols = 0;
        uint8_t *got = NULL;
        vt_assert_ok(vdnn_idx_read_images(paths[k], &count, &rows, &cols, &got, &err), err);
        assert_int_equal(count, 3);
        assert_int_equal(rows, 2);
        assert_int_equal(cols, 3);
        assert_memory_equal(got, pix, sizeof pix);
        free(got);
    }
    vdnn_error err;
    int count = 0;
    uint8_t *got = NULL;
    vt_assert_ok(vdnn_idx_read_labels(p3, &count, &got, &err), err);
    assert_int_equal(count, 3);
    assert_memory_equal(got, lab, 3);
    free(got);
    free(ib);
    free(lb);
    vt_rmdir(dir);
}

static void test_idx_truncated(void **state)
{
    char dir[256], path[512], needle[600];
    vt_tmpdir(dir, sizeof dir);
    uint8_t pix[4 * 3 * 3];
    random_bytes(pix, sizeof pix, 1);
    size_t ilen, llen;
    uint8_t *ib = idx_images(4, 3, 3, pix, &ilen);
    uint8_t lab[4] = {1, 2, 3, 4};
    uint8_t *lb = idx_labels(4, lab, &llen);
    vdnn_error err;
    int count, rows, cols;
    uint8_t *got = NULL;

    /* header cut, plain and gzip */
    vt_write_file(dir, "h", ib, 10, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "truncated header (expected 16 bytes, got 10)");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    write_gz(dir, "h.gz", ib, 10, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "truncated header (expected 16 bytes, got 10)");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    vt_write_file(dir, "lh", lb, 5, path, sizeof path);
    vt_assert_error(vdnn_idx_read_labels(path, &count, &got, &err), err, VDNN_ERR_FORMAT,
                    "truncated header (expected 8 bytes, got 5)");

    /* payload cut */
    vt_write_file(dir, "p", ib, ilen - 7, path, sizeof path);
    snprintf(needle, sizeof needle, "%s: truncated pixel data (expected 36 bytes, got 29)", path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT, needle);
    write_gz(dir, "p.gz", ib, ilen - 7, path, sizeof path);
    snprintf(needle, sizeof needle, "%s: truncated pixel data (expected 36 bytes, got 29)", path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT, needle);
    vt_write_file(dir, "lp", lb, llen - 1, path, sizeof path);
    snprintf(needle, sizeof needle, "%s: truncated label data (expected 4 bytes, got 3)", path);
    vt_assert_error(vdnn_idx_read_labels(path, &count, &got, &err), err, VDNN_ERR_FORMAT, needle);

    /* a .gz file itself cut in half: the deflate stream ends early */
    uint8_t big[100 * 8 * 8];
    random_bytes(big, sizeof big, 2);
    size_t blen;
    uint8_t *bb = idx_images(100, 8, 8, big, &blen);
    write_gz(dir, "cut.gz", bb, blen, path, sizeof path);
    size_t zlen;
    uint8_t *z = slurp(path, &zlen);
    char cut[512];
    vt_write_file(dir, "cut2.gz", z, zlen / 2, cut, sizeof cut);
    vt_assert_error(vdnn_idx_read_images(cut, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT, cut);
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, "truncated pixel data (expected 6400 bytes, got ");
    free(z);
    free(bb);
    free(ib);
    free(lb);
    vt_rmdir(dir);
}

static void test_idx_bad_header(void **state)
{
    char dir[256], path[512];
    vt_tmpdir(dir, sizeof dir);
    uint8_t pix[6] = {0};
    uint8_t lab[2] = {0, 1};
    size_t ilen, llen;
    uint8_t *ib = idx_images(1, 2, 3, pix, &ilen), *lb = idx_labels(2, lab, &llen);
    vdnn_error err;
    int count, rows, cols;
    uint8_t *got = NULL;

    vt_write_file(dir, "labels-as-images", lb, llen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "wrong magic number 0x00000801 (expected 0x00000803");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    vt_write_file(dir, "images-as-labels", ib, ilen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_labels(path, &count, &got, &err), err, VDNN_ERR_FORMAT,
                    "wrong magic number 0x00000803 (expected 0x00000801");
    put_be32(ib, 0x12345678);
    vt_write_file(dir, "garbage", ib, ilen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "0x12345678");
    put_be32(ib, 0x803);

    put_be32(ib + 8, 0); /* rows = 0 */
    vt_write_file(dir, "zero", ib, ilen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "dimension 1 is 0");
    put_be32(ib + 4, 100000);
    put_be32(ib + 8, 1000);
    put_be32(ib + 12, 1000);
    vt_write_file(dir, "huge", ib, ilen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "dimensions claim more than");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    put_be32(ib + 4, 0xffffffffu);
    vt_write_file(dir, "huge2", ib, ilen, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "dimensions claim more than");

    /* trailing bytes after the declared payload are rejected */
    uint8_t *ib2 = idx_images(1, 2, 3, pix, &ilen);
    uint8_t *longer = calloc(1, ilen + 3);
    memcpy(longer, ib2, ilen);
    vt_write_file(dir, "trailing", longer, ilen + 3, path, sizeof path);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "unexpected data after the 6 bytes");

    snprintf(path, sizeof path, "%s/does-not-exist", dir);
    vt_assert_error(vdnn_idx_read_images(path, &count, &rows, &cols, &got, &err), err, VDNN_ERR_IO, path);
    free(longer);
    free(ib2);
    free(ib);
    free(lb);
    vt_rmdir(dir);
}

static void test_idx_corrupt_gzip(void **state)
{
    char dir[256], path[512], bad[512];
    vt_tmpdir(dir, sizeof dir);
    uint8_t pix[50 * 10 * 10];
    /* Compressible but not trivial, so the deflate stream has real structure to damage. */
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (uint8_t)((i % 97) * (i % 13));
    size_t ilen;
    uint8_t *ib = idx_images(50, 10, 10, pix, &ilen);
    write_gz(dir, "ok.gz", ib, ilen, path, sizeof path);
    size_t zlen;
    uint8_t *z = slurp(path, &zlen);
    assert_true(zlen > 64);
    vdnn_error err;
    int count, rows, cols;
    uint8_t *got = NULL;

    /* Damage in many places; each must be reported, never crash or pass. */
    for (size_t off = 12; off + 8 < zlen; off += zlen / 23 + 1) {
        uint8_t *c = malloc(zlen);
        memcpy(c, z, zlen);
        for (size_t k = off; k < off + 6 && k < zlen; k++) c[k] ^= 0xa5;
        vt_write_file(dir, "bad.gz", c, zlen, bad, sizeof bad);
        vdnn_status st = vdnn_idx_read_images(bad, &count, &rows, &cols, &got, &err);
        if (st != VDNN_ERR_FORMAT || !strstr(err.msg, bad))
            fail_msg("corruption at %zu: got %s \"%s\"", off, vdnn_status_name(st), err.msg);
        free(c);
    }
    /* Only the CRC in the trailer wrong: the data decodes fully, the check must still fail. */
    z[zlen - 6] ^= 0xff;
    vt_write_file(dir, "crc.gz", z, zlen, bad, sizeof bad);
    vt_assert_error(vdnn_idx_read_images(bad, &count, &rows, &cols, &got, &err), err, VDNN_ERR_FORMAT,
                    "corrupt gzip stream");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, bad);
    free(z);
    free(ib);
    vt_rmdir(dir);
}

/* ---- idx:DIR datasets and normalisation ---- */

static const uint8_t train_pix[4 * 4] = {0, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 210, 220, 230};
static const uint8_t train_lab[4] = {0, 2, 1, 2};
static const uint8_t test_pix[2 * 4] = {0, 128, 255, 7, 8, 9, 10, 11};
static const uint8_t test_lab[2] = {1, 0};

static void write_idx_dir(const char *dir, int train_labels, const uint8_t *tlab, int test_rows)
{
    char p[512];
    size_t len;
    uint8_t *b = idx_images(4, 2, 2, train_pix, &len);
    write_gz(dir, "train-images-idx3-ubyte.gz", b, len, p, sizeof p);
    free(b);
    b = idx_labels(train_labels, train_lab, &len);
    write_gz(dir, "train-labels-idx1-ubyte.gz", b, len, p, sizeof p);
    free(b);
    b = idx_images(2, test_rows, 4 / test_rows, test_pix, &len);
    vt_write_file(dir, "t10k-images-idx3-ubyte", b, len, p, sizeof p);
    free(b);
    b = idx_labels(2, tlab, &len);
    vt_write_file(dir, "t10k-labels-idx1-ubyte", b, len, p, sizeof p);
    free(b);
}

static void test_dataset_idx(void **state)
{
    char dir[256], spec[300];
    vt_tmpdir(dir, sizeof dir);
    write_idx_dir(dir, 4, test_lab, 2);
    snprintf(spec, sizeof spec, "idx:%s", dir);
    double s = 0, s2 = 0;
    for (int i = 0; i < 16; i++) {
        s += train_pix[i] / 255.0;
        s2 += (train_pix[i] / 255.0) * (train_pix[i] / 255.0);
    }
    double mean = s / 16, sd = sqrt(s2 / 16 - mean * mean);

    vdnn_error err;
    vdnn_dataset_t *tr = NULL, *te = NULL;
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &tr, &err), err);
    assert_int_equal(tr->count, 4);
    assert_int_equal(tr->c, 1);
    assert_int_equal(tr->h, 2);
    assert_int_equal(tr->w, 2);
    assert_int_equal(tr->classes, 3); /* max label + 1 */
    double ns = 0, ns2 = 0;
    for (int i = 0; i < 16; i++) {
        assert_float_equal(tr->images[i], (train_pix[i] / 255.0 - mean) / sd, 1e-5);
        ns += tr->images[i];
        ns2 += tr->images[i] * tr->images[i];
    }
    assert_float_equal(ns / 16, 0.0, 1e-5);
    assert_float_equal(ns2 / 16, 1.0, 1e-4);
    for (int i = 0; i < 4; i++) assert_int_equal(tr->labels[i], train_lab[i]);
    assert_non_null(strstr(tr->source, "train"));

    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, no_shape, 0, 0, &te, &err), err);
    assert_int_equal(te->count, 2);
    assert_int_equal(te->classes, 3);
    for (int i = 0; i < 8; i++) assert_float_equal(te->images[i], (test_pix[i] / 255.0 - mean) / sd, 1e-5);
    assert_int_equal(te->labels[0], 1);
    assert_int_equal(te->labels[1], 0);
    vdnn_dataset_free(tr);
    vdnn_dataset_free(te);
    vt_rmdir(dir);
}

static void test_dataset_idx_errors(void **state)
{
    char dir[256], spec[300], needle[600];
    vdnn_error err;
    vdnn_dataset_t *ds = NULL;

    vt_tmpdir(dir, sizeof dir);
    write_idx_dir(dir, 3, test_lab, 2); /* 3 labels for 4 images */
    snprintf(spec, sizeof spec, "idx:%s", dir);
    snprintf(needle, sizeof needle, "%s/train-labels-idx1-ubyte.gz: 3 labels but", dir);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err, VDNN_ERR_FORMAT,
                    needle);
    vt_rmdir(dir);

    vt_tmpdir(dir, sizeof dir);
    const uint8_t bad_lab[2] = {1, 5}; /* training labels only go to 2 */
    write_idx_dir(dir, 4, bad_lab, 2);
    snprintf(spec, sizeof spec, "idx:%s", dir);
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err);
    vdnn_dataset_free(ds);
    snprintf(needle, sizeof needle, "%s/t10k-labels-idx1-ubyte: label 5 at index 1 is out of range (expected 0..2)",
             dir);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, no_shape, 0, 0, &ds, &err), err, VDNN_ERR_FORMAT,
                    needle);
    vt_rmdir(dir);

    vt_tmpdir(dir, sizeof dir);
    write_idx_dir(dir, 4, test_lab, 1); /* test images 1x4, train 2x2 */
    snprintf(spec, sizeof spec, "idx:%s", dir);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, no_shape, 0, 0, &ds, &err), err, VDNN_ERR_FORMAT,
                    "images are 1x4 but the training images");
    char p[512];
    vt_write_file(dir, "train-labels-idx1-ubyte.gz", "junk", 4, p, sizeof p);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err, VDNN_ERR_FORMAT, p);
    unlink(p);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err, VDNN_ERR_IO,
                    "train-labels-idx1-ubyte.gz exists");
    vt_rmdir(dir);

    vt_assert_error(vdnn_dataset_open("idx:/nonexistent-vdnn-dir", VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err,
                    VDNN_ERR_IO, "/nonexistent-vdnn-dir/train-images-idx3-ubyte");
    vt_assert_error(vdnn_dataset_open("idx:", VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err,
                    VDNN_ERR_INVALID_ARG, "unknown data spec \"idx:\"");
    vt_assert_error(vdnn_dataset_open("mnist", VDNN_SPLIT_TRAIN, no_shape, 0, 0, &ds, &err), err,
                    VDNN_ERR_INVALID_ARG, "expected fashion-mnist, idx:DIR, cifar10:DIR, text:FILE, tokens:FILE or synthetic");
}

/* ---- CIFAR-10 ---- */

/* n records; record i has label (i + seed) % 10 and channel c's pixels around 60 + 50*c. */
static uint8_t *cifar_records(int n, int seed, size_t *len)
{
    uint8_t *b = malloc((size_t)n * 3073);
    for (int i = 0; i < n; i++) {
        uint8_t *r = b + (size_t)i * 3073;
        r[0] = (uint8_t)((i + seed) % 10);
        for (int k = 0; k < 3072; k++) r[1 + k] = (uint8_t)(60 + 50 * (k / 1024) + (k * 7 + i * 13 + seed) % 41);
    }
    *len = (size_t)n * 3073;
    return b;
}

static void test_cifar_reader(void **state)
{
    char dir[256], path[512];
    vt_tmpdir(dir, sizeof dir);
    size_t len;
    uint8_t *b = cifar_records(3, 4, &len);
    vt_write_file(dir, "batch.bin", b, len, path, sizeof path);
    vdnn_error err;
    int count = 0;
    uint8_t *pix = NULL, *lab = NULL;
    vt_assert_ok(vdnn_cifar_read_batch(path, &count, &pix, &lab, &err), err);
    assert_int_equal(count, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lab[i], b[i * 3073]);
        assert_memory_equal(pix + i * 3072, b + i * 3073 + 1, 3072);
    }
    free(pix);
    free(lab);

    vt_write_file(dir, "odd.bin", b, len - 5, path, sizeof path);
    vt_assert_error(vdnn_cifar_read_batch(path, &count, &pix, &lab, &err), err, VDNN_ERR_FORMAT,
                    "is not a positive multiple of the 3073-byte");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    vt_write_file(dir, "empty.bin", b, 0, path, sizeof path);
    vt_assert_error(vdnn_cifar_read_batch(path, &count, &pix, &lab, &err), err, VDNN_ERR_FORMAT, "size 0 bytes");
    b[3073] = 10;
    vt_write_file(dir, "label.bin", b, len, path, sizeof path);
    vt_assert_error(vdnn_cifar_read_batch(path, &count, &pix, &lab, &err), err, VDNN_ERR_FORMAT,
                    "record 1 has label 10 (expected 0..9)");
    vt_assert_error(VDNN_ERR_FORMAT, err, VDNN_ERR_FORMAT, path);
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    vt_assert_error(vdnn_cifar_read_batch(path, &count, &pix, &lab, &err), err, VDNN_ERR_IO, path);
    free(b);
    vt_rmdir(dir);
}

static void test_dataset_cifar(void **state)
{
    char dir[256], path[512], spec[300];
    vt_tmpdir(dir, sizeof dir);
    uint8_t *all = malloc(10 * 3073);
    for (int f = 0; f < 5; f++) {
        size_t len;
        uint8_t *b = cifar_records(2, f, &len);
        char name[64];
        snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
        vt_write_file(dir, name, b, len, path, sizeof path);
        memcpy(all + (size_t)f * 2 * 3073, b, len);
        free(b);
    }
    size_t len;
    uint8_t *tb = cifar_records(3, 9, &len);
    vt_write_file(dir, "test_batch.bin", tb, len, path, sizeof path);
    snprintf(spec, sizeof spec, "cifar10:%s", dir);

    double mean[3] = {0}, sd[3] = {0};
    for (int c = 0; c < 3; c++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < 10; i++)
            for (int k = 0; k < 1024; k++) {
                double v = all[(size_t)i * 3073 + 1 + c * 1024 + k] / 255.0;
                s += v;
                s2 += v * v;
            }
        mean[c] = s / 10240;
        sd[c] = sqrt(s2 / 10240 - mean[c] * mean[c]);
    }

    vdnn_error err;
    vdnn_dataset_t *tr = NULL, *te = NULL;
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, no_shape, 0, 0, &tr, &err), err);
    assert_int_equal(tr->count, 10);
    assert_int_equal(tr->c, 3);
    assert_int_equal(tr->h, 32);
    assert_int_equal(tr->w, 32);
    assert_int_equal(tr->classes, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(tr->labels[i], all[(size_t)i * 3073]);
        for (int k = 0; k < 3072; k += 101) {
            int c = k / 1024;
            double want = (all[(size_t)i * 3073 + 1 + k] / 255.0 - mean[c]) / sd[c];
            assert_float_equal(tr->images[(size_t)i * 3072 + k], want, 1e-5);
        }
    }
    for (int c = 0; c < 3; c++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < 10; i++)
            for (int k = 0; k < 1024; k++) {
                double v = tr->images[(size_t)i * 3072 + c * 1024 + k];
                s += v;
                s2 += v * v;
            }
        assert_float_equal(s / 10240, 0.0, 1e-4);
        assert_float_equal(s2 / 10240, 1.0, 1e-3);
    }
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, no_shape, 0, 0, &te, &err), err);
    assert_int_equal(te->count, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(te->labels[i], tb[(size_t)i * 3073]);
        for (int k = 0; k < 3072; k += 97) {
            double want = (tb[(size_t)i * 3073 + 1 + k] / 255.0 - mean[k / 1024]) / sd[k / 1024];
            assert_float_equal(te->images[(size_t)i * 3072 + k], want, 1e-5);
        }
    }
    vdnn_dataset_free(tr);
    vdnn_dataset_free(te);

    snprintf(path, sizeof path, "%s/data_batch_3.bin", dir);
    unlink(path);
    vt_assert_error(vdnn_dataset_open(spec, VDNN_SPLIT_TEST, no_shape, 0, 0, &te, &err), err, VDNN_ERR_IO, path);
    free(all);
    free(tb);
    vt_rmdir(dir);
}

/* ---- the real Fashion-MNIST ---- */

static void test_fashion_mnist(void **state)
{
    if (access(FASHION, R_OK) != 0) {
        print_message("skipping: %s missing (install the Debian package dataset-fashion-mnist)\n", FASHION);
        skip();
    }
    vdnn_error err;
    const int want_count[2] = {60000, 10000};
    for (int sp = 0; sp < 2; sp++) {
        vdnn_dataset_t *ds = NULL;
        vt_assert_ok(vdnn_dataset_open("fashion-mnist", (vdnn_split)sp, no_shape, 0, 0, &ds, &err), err);
        assert_int_equal(ds->count, want_count[sp]);
        assert_int_equal(ds->c, 1);
        assert_int_equal(ds->h, 28);
        assert_int_equal(ds->w, 28);
        assert_int_equal(ds->classes, 10);
        int hist[10] = {0};
        for (int i = 0; i < ds->count; i++) {
            assert_in_range(ds->labels[i], 0, 9);
            hist[ds->labels[i]]++;
        }
        for (int k = 0; k < 10; k++) assert_int_equal(hist[k], want_count[sp] / 10); /* balanced classes */
        double s = 0, s2 = 0;
        size_t n = (size_t)ds->count * 784;
        for (size_t i = 0; i < n; i++) {
            s += ds->images[i];
            s2 += (double)ds->images[i] * ds->images[i];
        }
        if (sp == 0) {
            assert_float_equal(s / (double)n, 0.0, 1e-4);
            assert_float_equal(s2 / (double)n, 1.0, 1e-3);
        } else { /* the test split is close to, not exactly, standardised */
            assert_float_equal(s / (double)n, 0.0, 0.05);
            assert_float_equal(s2 / (double)n, 1.0, 0.05);
        }
        vdnn_dataset_free(ds);
    }
}

/* ---- synthetic ---- */

static void test_synthetic(void **state)
{
    vdnn_shape shape = {0, 3, 8, 8};
    vdnn_error err;
    vdnn_dataset_t *a = NULL, *b = NULL, *c = NULL, *te = NULL;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, shape, 5, 42, &a, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, shape, 5, 42, &b, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, shape, 5, 43, &c, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TEST, shape, 5, 42, &te, &err), err);
    assert_int_equal(a->count, 1024);
    assert_int_equal(te->count, 256);
    assert_int_equal(a->c, 3);
    assert_int_equal(a->h, 8);
    assert_int_equal(a->w, 8);
    assert_int_equal(a->classes, 5);
    size_t chw = 3 * 8 * 8;
    assert_memory_equal(a->images, b->images, 1024 * chw * sizeof(float));
    assert_memory_equal(a->labels, b->labels, 1024 * sizeof(int32_t));
    assert_memory_not_equal(a->images, c->images, 1024 * chw * sizeof(float));
    assert_memory_not_equal(a->images, te->images, 256 * chw * sizeof(float));

    int hist[5] = {0};
    for (int i = 0; i < 1024; i++) {
        assert_in_range(a->labels[i], 0, 4);
        hist[a->labels[i]]++;
    }
    for (int k = 0; k < 5; k++) assert_in_range(hist[k], 204, 205);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < 1024 * chw; i++) {
        s += a->images[i];
        s2 += a->images[i] * a->images[i];
    }
    assert_float_equal(s / (1024.0 * chw), 0.0, 0.2);
    assert_float_equal(s2 / (1024.0 * chw), 1.0, 0.3);

    /* Learnable: nearest class mean from the training split classifies the test split. */
    double *centroid = calloc(5 * chw, sizeof *centroid);
    for (int i = 0; i < 1024; i++)
        for (size_t k = 0; k < chw; k++) centroid[a->labels[i] * chw + k] += a->images[i * chw + k] / hist[a->labels[i]];
    int correct = 0;
    for (int i = 0; i < 256; i++) {
        int best = -1;
        double bestd = 0;
        for (int k = 0; k < 5; k++) {
            double d = 0;
            for (size_t j = 0; j < chw; j++) {
                double t = te->images[i * chw + j] - centroid[k * chw + j];
                d += t * t;
            }
            if (best < 0 || d < bestd) best = k, bestd = d;
        }
        correct += best == te->labels[i];
    }
    assert_true(correct > 0.9 * 256);
    free(centroid);

    /* shape.n above 1024 asks for that many training images (a batch that large fits); the test split stays. */
    vdnn_shape big = {1500, 3, 8, 8};
    vdnn_dataset_t *bt = NULL, *bte = NULL;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, big, 5, 42, &bt, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TEST, big, 5, 42, &bte, &err), err);
    assert_int_equal(bt->count, 1500);
    assert_int_equal(bte->count, 256);
    vdnn_dataset_free(bt);
    vdnn_dataset_free(bte);

    vdnn_dataset_t *bad = NULL;
    vdnn_shape zero = {0, 0, 8, 8};
    vt_assert_error(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, zero, 5, 1, &bad, &err), err,
                    VDNN_ERR_INVALID_ARG, "bad image shape 0x8x8");
    vt_assert_error(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, shape, 0, 1, &bad, &err), err,
                    VDNN_ERR_INVALID_ARG, "bad class count 0");
    vdnn_dataset_free(a);
    vdnn_dataset_free(b);
    vdnn_dataset_free(c);
    vdnn_dataset_free(te);
}

/* ---- loader ---- */

/* count images of 1x1x2 holding {i, -i}, so every sample names itself; labels i % 7. */
static vdnn_dataset_t *id_dataset(int count)
{
    vdnn_dataset_t *ds = calloc(1, sizeof *ds);
    ds->count = count;
    ds->c = 1;
    ds->h = 1;
    ds->w = 2;
    ds->classes = 7;
    ds->images = malloc((size_t)count * 2 * sizeof(float));
    ds->labels = malloc((size_t)count * sizeof(int32_t));
    ds->labels_per = 1;
    for (int i = 0; i < count; i++) {
        ds->images[2 * i] = (float)i;
        ds->images[2 * i + 1] = (float)-i;
        ds->labels[i] = i % 7;
    }
    snprintf(ds->source, sizeof ds->source, "id dataset");
    return ds;
}

/* Takes one batch and writes its sample ids into ids (returns the batch size), checking
 * that images and labels travelled together. */
static int take(vdnn_loader *l, int *ids)
{
    const float *img;
    const int32_t *lab;
    int n = -1;
    vdnn_error err;
    vt_assert_ok(vdnn_loader_next(l, &img, &lab, &n, &err), err);
    for (int i = 0; i < n; i++) {
        int id = (int)img[2 * i];
        assert_true(img[2 * i + 1] == (float)-id);
        assert_int_equal(lab[i], id % 7);
        ids[i] = id;
    }
    return n;
}

static void test_loader_epochs(void **state)
{
    vdnn_dataset_t *ds = id_dataset(100);
    vdnn_error err;
    vdnn_loader *l = NULL;
    vt_assert_ok(vdnn_loader_create(ds, 10, true, 7, &l, &err), err);
    assert_int_equal(vdnn_loader_batches_per_epoch(l), 10);
    int order[2][100];
    for (int e = 0; e < 2; e++) {
        int seen[100] = {0};
        for (int b = 0; b < 10; b++) {
            assert_int_equal(take(l, order[e] + b * 10), 10);
            for (int i = 0; i < 10; i++) seen[order[e][b * 10 + i]]++;
        }
        for (int i = 0; i < 100; i++) assert_int_equal(seen[i], 1);
    }
    assert_memory_not_equal(order[0], order[1], sizeof order[0]);
    int identity[100];
    for (int i = 0; i < 100; i++) identity[i] = i;
    assert_memory_not_equal(order[0], identity, sizeof identity);

    /* same seed, same order; another seed, another order */
    vdnn_loader *same = NULL, *other = NULL;
    vt_assert_ok(vdnn_loader_create(ds, 10, true, 7, &same, &err), err);
    vt_assert_ok(vdnn_loader_create(ds, 10, true, 8, &other, &err), err);
    int a[100], o[100];
    for (int b = 0; b < 10; b++) {
        take(same, a + b * 10);
        take(other, o + b * 10);
    }
    assert_memory_equal(a, order[0], sizeof a);
    assert_memory_not_equal(o, order[0], sizeof o);
    vdnn_loader_free(l);
    vdnn_loader_free(same);
    vdnn_loader_free(other);
    vdnn_dataset_free(ds);
}

static void test_loader_drop_last_and_seek(void **state)
{
    vdnn_dataset_t *ds = id_dataset(100);
    vdnn_error err;
    vdnn_loader *l = NULL, *s = NULL;
    vt_assert_ok(vdnn_loader_create(ds, 16, true, 99, &l, &err), err);
    assert_int_equal(vdnn_loader_batches_per_epoch(l), 6); /* 100/16, last partial dropped */
    enum { STEPS = 20 };
    int ids[STEPS][16];
    for (int st = 0; st < STEPS; st++) assert_int_equal(take(l, ids[st]), 16);
    for (int e = 0; e < 3; e++) {
        int seen[100] = {0};
        for (int b = 0; b < 6; b++)
            for (int i = 0; i < 16; i++) seen[ids[e * 6 + b][i]]++;
        int once = 0;
        for (int i = 0; i < 100; i++) {
            assert_in_range(seen[i], 0, 1);
            once += seen[i];
        }
        assert_int_equal(once, 96);
    }

    vt_assert_ok(vdnn_loader_create(ds, 16, true, 99, &s, &err), err);
    const int targets[] = {13, 13, 18, 0, 6, 5, 17, 2};
    int got[16];
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        vt_assert_ok(vdnn_loader_seek(s, targets[t], &err), err);
        take(s, got);
        assert_memory_equal(got, ids[targets[t]], sizeof got);
        take(s, got); /* and it carries on from there */
        assert_memory_equal(got, ids[targets[t] + 1], sizeof got);
    }
    /* seek while a prefetch for another step is likely in flight */
    for (int r = 0; r < 50; r++) {
        int t = (r * 7) % (STEPS - 1);
        vt_assert_ok(vdnn_loader_seek(s, t, &err), err);
        take(s, got);
        assert_memory_equal(got, ids[t], sizeof got);
    }
    vt_assert_error(vdnn_loader_seek(s, -1, &err), err, VDNN_ERR_INVALID_ARG, "-1");
    vdnn_loader_free(l);
    vdnn_loader_free(s);
    vdnn_dataset_free(ds);
}

static void test_loader_eval(void **state)
{
    vdnn_dataset_t *ds = id_dataset(100);
    vdnn_error err;
    vdnn_loader *l = NULL;
    vt_assert_ok(vdnn_loader_create(ds, 16, false, 3, &l, &err), err);
    assert_int_equal(vdnn_loader_batches_per_epoch(l), 7);
    int ids[16];
    for (int e = 0; e < 2; e++) {
        int next = 0;
        for (int b = 0; b < 7; b++) {
            int n = take(l, ids);
            assert_int_equal(n, b < 6 ? 16 : 4);
            for (int i = 0; i < n; i++) assert_int_equal(ids[i], next++);
        }
        assert_int_equal(next, 100);
    }
    vt_assert_ok(vdnn_loader_seek(l, 6, &err), err);
    assert_int_equal(take(l, ids), 4);
    assert_int_equal(ids[0], 96);
    vdnn_loader_free(l);

    /* batch == count is fine; larger is a clear error */
    vt_assert_ok(vdnn_loader_create(ds, 100, true, 3, &l, &err), err);
    assert_int_equal(vdnn_loader_batches_per_epoch(l), 1);
    vdnn_loader_free(l);
    vt_assert_error(vdnn_loader_create(ds, 101, true, 3, &l, &err), err, VDNN_ERR_INVALID_ARG,
                    "batch size 101 is larger than the dataset (100 images");
    vt_assert_error(vdnn_loader_create(ds, 101, false, 3, &l, &err), err, VDNN_ERR_INVALID_ARG, "larger");
    vt_assert_error(vdnn_loader_create(ds, 0, true, 3, &l, &err), err, VDNN_ERR_INVALID_ARG, "batch size 0");
    vdnn_dataset_free(ds);
}

static void test_loader_shutdown(void **state)
{
    vdnn_shape shape = {0, 3, 32, 32};
    vdnn_error err;
    vdnn_dataset_t *ds = NULL;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, shape, 10, 1, &ds, &err), err);
    int rounds = getenv("VDNN_TEST_QUICK") ? 10 : 40;
    for (int r = 0; r < rounds; r++) {
        vdnn_loader *l = NULL;
        vt_assert_ok(vdnn_loader_create(ds, 512, true, (uint64_t)r, &l, &err), err);
        if (r % 2) {
            const float *img;
            const int32_t *lab;
            int n;
            vt_assert_ok(vdnn_loader_next(l, &img, &lab, &n, &err), err);
            assert_int_equal(n, 512);
        }
        vdnn_loader_free(l); /* the next batch is usually still being copied */
    }

    /* a loader over synthetic data delivers that data, deterministically */
    vdnn_loader *a = NULL, *b = NULL;
    vt_assert_ok(vdnn_loader_create(ds, 32, true, 5, &a, &err), err);
    vt_assert_ok(vdnn_loader_create(ds, 32, true, 5, &b, &err), err);
    for (int st = 0; st < 40; st++) {
        const float *ia, *ib;
        const int32_t *la, *lb;
        int na, nb;
        vt_assert_ok(vdnn_loader_next(a, &ia, &la, &na, &err), err);
        vt_assert_ok(vdnn_loader_next(b, &ib, &lb, &nb, &err), err);
        assert_int_equal(na, 32);
        assert_int_equal(nb, 32);
        assert_memory_equal(ia, ib, 32 * 3072 * sizeof(float));
        assert_memory_equal(la, lb, 32 * sizeof(int32_t));
    }
    vdnn_loader_free(a);
    vdnn_loader_free(b);
    vdnn_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_plain_and_gz),
        cmocka_unit_test(test_idx_truncated),
        cmocka_unit_test(test_idx_bad_header),
        cmocka_unit_test(test_idx_corrupt_gzip),
        cmocka_unit_test(test_dataset_idx),
        cmocka_unit_test(test_dataset_idx_errors),
        cmocka_unit_test(test_cifar_reader),
        cmocka_unit_test(test_dataset_cifar),
        cmocka_unit_test(test_fashion_mnist),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_loader_epochs),
        cmocka_unit_test(test_loader_drop_last_and_seek),
        cmocka_unit_test(test_loader_eval),
        cmocka_unit_test(test_loader_shutdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
