/* CIFAR-10 binary reader: one batch file, and a whole split (data_batch_1..5 or test_batch). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/data_internal.h"

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10

vdnn_status vdnn_cifar_read_batch(const char *path, int *count, uint8_t **pixels, uint8_t **labels, vdnn_error *err)
{
    if (!path || !count || !pixels || !labels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_cifar_read_batch: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: not a regular file", path);
    }
    unsigned long long size = (unsigned long long)sb.st_size;
    vdnn_status st = VDNN_OK;
    if (size == 0 || size % CIFAR_RECORD) {
        st = vdnn_fail(err, VDNN_ERR_FORMAT,
                       "%s: size %llu bytes is not a positive multiple of the %d-byte CIFAR-10 record "
                       "(1 label + %d pixels)",
                       path, size, CIFAR_RECORD, CIFAR_PIXELS);
    } else if (size > VDNN_DATA_MAX_BYTES) {
        st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: %llu bytes is more than any CIFAR-10 batch file (limit %llu)", path,
                       size, VDNN_DATA_MAX_BYTES);
    }
    if (st) {
        fclose(f);
        return st;
    }
    size_t n = (size_t)(size / CIFAR_RECORD);
    uint8_t *raw = malloc((size_t)size);
    uint8_t *pix = malloc(n * CIFAR_PIXELS);
    uint8_t *lab = malloc(n);
    if (!raw || !pix || !lab) {
        st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: cannot allocate %llu bytes", path, size);
        goto done;
    }
    size_t got = fread(raw, 1, (size_t)size, f);
    if (got != (size_t)size) {
        st = vdnn_fail(err, VDNN_ERR_IO, "%s: read error (expected %llu bytes, got %zu)", path, size, got);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = raw + i * CIFAR_RECORD;
        if (rec[0] >= CIFAR_CLASSES) {
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: record %zu has label %u (expected 0..%d)", path, i, rec[0],
                           CIFAR_CLASSES - 1);
            goto done;
        }
        lab[i] = rec[0];
        memcpy(pix + i * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    *count = (int)n;
    *pixels = pix;
    *labels = lab;
    pix = lab = NULL;
done:
    fclose(f);
    free(raw);
    free(pix);
    free(lab);
    return st;
}

static vdnn_status append(uint8_t **dst, size_t have, const uint8_t *src, size_t n, const char *path, vdnn_error *err)
{
    uint8_t *p = realloc(*dst, have + n);
    if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", path, have + n);
    memcpy(p + have, src, n);
    *dst = p;
    return VDNN_OK;
}

vdnn_status vdnn_cifar_read_split(const char *dir, vdnn_split split, int *count, uint8_t **pixels, uint8_t **labels,
                                  vdnn_error *err)
{
    int nfiles = split == VDNN_SPLIT_TRAIN ? 5 : 1;
    uint8_t *pix = NULL, *lab = NULL;
    size_t total = 0;
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < nfiles && !st; i++) {
        char path[4096];
        int len = split == VDNN_SPLIT_TRAIN ? snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i + 1)
                                            : snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        if (len < 0 || (size_t)len >= sizeof path) {
            st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cifar10:%s: directory name too long", dir);
            break;
        }
        int n;
        uint8_t *p, *l;
        st = vdnn_cifar_read_batch(path, &n, &p, &l, err);
        if (st) break;
        st = append(&pix, total * CIFAR_PIXELS, p, (size_t)n * CIFAR_PIXELS, path, err);
        if (!st) st = append(&lab, total, l, (size_t)n, path, err);
        free(p);
        free(l);
        total += (size_t)n;
    }
    if (st) {
        free(pix);
        free(lab);
        return st;
    }
    *count = (int)total;
    *pixels = pix;
    *labels = lab;
    return VDNN_OK;
}
