/* vdnn_dataset_open: parses a data spec, loads one split and normalises it with the training split's statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/data_internal.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define MAX_CHANNELS 3

typedef enum source_kind { SRC_FASHION, SRC_IDX, SRC_CIFAR } source_kind;

/* A split as read from disk, before normalisation. */
typedef struct raw_split {
    int count, c, h, w;
    uint8_t *pix, *lab;
    char images_path[4096]; /* for messages */
    char labels_path[4096];
} raw_split;

vdnn_status vdnn_dataset_alloc(int count, int c, int h, int w, int classes, vdnn_dataset_t **out, vdnn_error *err)
{
    vdnn_dataset_t *ds = calloc(1, sizeof *ds);
    size_t n = (size_t)count * c * h * w;
    if (ds) {
        ds->images = malloc(n * sizeof *ds->images);
        ds->labels = malloc((size_t)count * sizeof *ds->labels);
    }
    if (!ds || !ds->images || !ds->labels) {
        vdnn_dataset_free(ds);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cannot allocate a dataset of %d images of %dx%dx%d", count, c, h, w);
    }
    ds->count = count;
    ds->c = c;
    ds->h = h;
    ds->w = w;
    ds->classes = classes;
    ds->labels_per = 1;
    *out = ds;
    return VDNN_OK;
}

void vdnn_dataset_free(vdnn_dataset_t *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds);
}

static void raw_free(raw_split *r)
{
    free(r->pix);
    free(r->lab);
    r->pix = r->lab = NULL;
}

/* Picks DIR/base, else DIR/base.gz. */
static vdnn_status find_idx_file(const char *dir, const char *base, source_kind kind, char *out, size_t len,
                                 vdnn_error *err)
{
    int n = snprintf(out, len, "%s/%s", dir, base);
    if (n < 0 || (size_t)n + 3 >= len) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "idx:%s: directory name too long", dir);
    if (access(out, F_OK) == 0) return VDNN_OK;
    strcat(out, ".gz");
    if (access(out, F_OK) == 0) return VDNN_OK;
    if (kind == SRC_FASHION)
        return vdnn_fail(err, VDNN_ERR_IO,
                         "fashion-mnist: %s not found; install the Debian package dataset-fashion-mnist", out);
    return vdnn_fail(err, VDNN_ERR_IO, "idx:%s: neither %s/%s nor %s exists", dir, dir, base, out);
}

static vdnn_status read_idx_split(const char *dir, source_kind kind, vdnn_split split, raw_split *r, vdnn_error *err)
{
    const char *prefix = split == VDNN_SPLIT_TRAIN ? "train" : "t10k";
    char base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    vdnn_status st = find_idx_file(dir, base, kind, r->images_path, sizeof r->images_path, err);
    if (st) return st;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    st = find_idx_file(dir, base, kind, r->labels_path, sizeof r->labels_path, err);
    if (st) return st;
    st = vdnn_idx_read_images(r->images_path, &r->count, &r->h, &r->w, &r->pix, err);
    if (st) return st;
    r->c = 1;
    int nlab;
    st = vdnn_idx_read_labels(r->labels_path, &nlab, &r->lab, err);
    if (st) return st;
    if (nlab != r->count)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: %d labels but %s holds %d images", r->labels_path, nlab,
                         r->images_path, r->count);
    return VDNN_OK;
}

static vdnn_status read_cifar_split(const char *dir, vdnn_split split, raw_split *r, vdnn_error *err)
{
    snprintf(r->images_path, sizeof r->images_path, "cifar10:%s (%s)", dir,
             split == VDNN_SPLIT_TRAIN ? "data_batch_1..5.bin" : "test_batch.bin");
    snprintf(r->labels_path, sizeof r->labels_path, "%s", r->images_path);
    r->c = 3;
    r->h = r->w = 32;
    return vdnn_cifar_read_split(dir, split, &r->count, &r->pix, &r->lab, err);
}

static vdnn_status read_split(const char *dir, source_kind kind, vdnn_split split, raw_split *r, vdnn_error *err)
{
    return kind == SRC_CIFAR ? read_cifar_split(dir, split, r, err) : read_idx_split(dir, kind, split, r, err);
}

static vdnn_status check_labels(const raw_split *r, int classes, vdnn_error *err)
{
    for (int i = 0; i < r->count; i++)
        if (r->lab[i] >= classes)
            return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: label %u at index %d is out of range (expected 0..%d)",
                             r->labels_path, r->lab[i], i, classes - 1);
    return VDNN_OK;
}

/* Per-channel mean and standard deviation of pixel/255, from exact integer sums so
 * that every run (and the test split) gets bit-identical numbers. */
static void channel_stats(const raw_split *r, double *mean, double *std)
{
    size_t hw = (size_t)r->h * r->w;
    for (int c = 0; c < r->c; c++) {
        uint64_t s = 0, s2 = 0;
        for (int i = 0; i < r->count; i++) {
            const uint8_t *p = r->pix + ((size_t)i * r->c + c) * hw;
            for (size_t k = 0; k < hw; k++) {
                s += p[k];
                s2 += (uint64_t)p[k] * p[k];
            }
        }
        double n = (double)r->count * (double)hw;
        double m = (double)s / n / 255.0;
        double var = (double)s2 / n / (255.0 * 255.0) - m * m;
        mean[c] = m;
        /* A constant channel has no spread to divide by; leave its scale alone. */
        std[c] = var > 1e-12 ? sqrt(var) : 1.0;
    }
}

static vdnn_status to_dataset(const raw_split *r, int classes, const double *mean, const double *std,
                              const char *what, vdnn_dataset_t **out, vdnn_error *err)
{
    vdnn_dataset_t *ds;
    vdnn_status st = vdnn_dataset_alloc(r->count, r->c, r->h, r->w, classes, &ds, err);
    if (st) return st;
    size_t hw = (size_t)r->h * r->w;
    for (int c = 0; c < r->c; c++) {
        float lut[256];
        for (int v = 0; v < 256; v++) lut[v] = (float)((v / 255.0 - mean[c]) / std[c]);
        for (int i = 0; i < r->count; i++) {
            size_t off = ((size_t)i * r->c + c) * hw;
            for (size_t k = 0; k < hw; k++) ds->images[off + k] = lut[r->pix[off + k]];
        }
    }
    for (int i = 0; i < r->count; i++) ds->labels[i] = r->lab[i];
    /* Built at full length, then cut to fit: a long directory only shortens the label. */
    char full[sizeof r->images_path + 640];
    snprintf(full, sizeof full, "%s (%s)", what, r->images_path);
    size_t len = strlen(full);
    if (len >= sizeof ds->source) len = sizeof ds->source - 1;
    memcpy(ds->source, full, len);
    ds->source[len] = '\0';
    *out = ds;
    return VDNN_OK;
}

/* Loads a file-backed split. The training split is always read: it fixes the class
 * count and the normalisation statistics that the test split must share. */
static vdnn_status open_files(const char *dir, source_kind kind, const char *spec, vdnn_split split,
                              vdnn_dataset_t **out, vdnn_error *err)
{
    raw_split train = {0}, test = {0};
    vdnn_status st = read_split(dir, kind, VDNN_SPLIT_TRAIN, &train, err);
    int classes = 10;
    if (!st && kind == SRC_IDX) {
        classes = 0;
        for (int i = 0; i < train.count; i++)
            if (train.lab[i] >= classes) classes = train.lab[i] + 1;
    }
    if (!st) st = check_labels(&train, classes, err);
    double mean[MAX_CHANNELS], std[MAX_CHANNELS];
    if (!st) channel_stats(&train, mean, std);
    if (!st && split == VDNN_SPLIT_TEST) {
        st = read_split(dir, kind, VDNN_SPLIT_TEST, &test, err);
        if (!st && (test.h != train.h || test.w != train.w))
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: images are %dx%d but the training images (%s) are %dx%d",
                           test.images_path, test.h, test.w, train.images_path, train.h, train.w);
        if (!st) st = check_labels(&test, classes, err);
    }
    if (!st) {
        char what[600];
        snprintf(what, sizeof what, "%.500s %s", spec, split == VDNN_SPLIT_TRAIN ? "train" : "test");
        st = to_dataset(split == VDNN_SPLIT_TRAIN ? &train : &test, classes, mean, std, what, out, err);
    }
    raw_free(&train);
    raw_free(&test);
    return st;
}

vdnn_status vdnn_dataset_open(const char *spec, vdnn_split split, vdnn_shape synthetic_shape, int synthetic_classes,
                              uint64_t seed, vdnn_dataset_t **out, vdnn_error *err)
{
    if (!spec || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_dataset_open: NULL argument");
    if (split != VDNN_SPLIT_TRAIN && split != VDNN_SPLIT_TEST)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: unknown split %d", spec, (int)split);
    if (!strcmp(spec, "synthetic"))
        return vdnn_synthetic_open(synthetic_shape, synthetic_classes, seed, split, out, err);
    if (!strcmp(spec, "fashion-mnist")) return open_files(FASHION_DIR, SRC_FASHION, spec, split, out, err);
    if (!strncmp(spec, "idx:", 4) && spec[4]) return open_files(spec + 4, SRC_IDX, spec, split, out, err);
    if (!strncmp(spec, "cifar10:", 8) && spec[8]) return open_files(spec + 8, SRC_CIFAR, spec, split, out, err);
    if (!strncmp(spec, "text:", 5)) return vdnn_text_open(spec + 5, synthetic_shape.h, split, out, err);
    if (!strncmp(spec, "tokens:", 7)) return vdnn_tokens_open(spec + 7, synthetic_shape.h, split, out, err);
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                     "unknown data spec \"%s\" (expected fashion-mnist, idx:DIR, cifar10:DIR, text:FILE, tokens:FILE or synthetic)",
                     spec);
}

vdnn_shape vdnn_dataset_shape(const vdnn_dataset_t *ds) { return (vdnn_shape){ds->count, ds->c, ds->h, ds->w}; }
int vdnn_dataset_classes(const vdnn_dataset_t *ds) { return ds->classes; }
const char *vdnn_dataset_source(const vdnn_dataset_t *ds) { return ds->source; }
const float *vdnn_dataset_images(const vdnn_dataset_t *ds) { return ds->images; }
const int32_t *vdnn_dataset_labels(const vdnn_dataset_t *ds) { return ds->labels; }
int vdnn_dataset_labels_per_image(const vdnn_dataset_t *ds) { return ds->labels_per; }
