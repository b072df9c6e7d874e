/* text:FILE: a file's bytes as tokens (vocabulary 256) cut into sequences with next-byte targets, the last tenth
 * held out as the test split. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_internal.h"

#define TEXT_VOCAB 256
/* Whole files are read into memory; beyond this a text is far larger than anything trained here. */
#define TEXT_MAX_BYTES (1ULL << 31)

static vdnn_status read_all(const char *path, unsigned char **buf, size_t *len, vdnn_error *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "text:%s: cannot open it: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    vdnn_status st = b ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "text:%s: out of memory", path);
    while (!st) {
        if (n == cap) {
            unsigned char *nb = cap >= TEXT_MAX_BYTES ? NULL : realloc(b, cap * 2);
            if (!nb) {
                st = vdnn_fail(err, VDNN_ERR_FORMAT, "text:%s: larger than %llu bytes", path,
                               (unsigned long long)TEXT_MAX_BYTES);
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = vdnn_fail(err, VDNN_ERR_IO, "text:%s: read error (a directory?)", path);
            break;
        }
    }
    fclose(f);
    if (st) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return VDNN_OK;
}

/* Splits at 90% of the bytes: the training part is bytes [0, cut), the test part [cut, len). Each part is cut into
 * non-overlapping sequences of seq_len tokens; a sequence's targets are the bytes one further on, so a part of m
 * bytes holds (m - 1) / seq_len sequences. */
vdnn_status vdnn_text_open(const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out, vdnn_error *err)
{
    *out = NULL;
    if (!*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "text: no file given (use --data text:FILE)");
    if (seq_len < 1)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "text:%s: sequence length %d (set --seq-len, 1 or more)", path,
                         seq_len);
    unsigned char *b;
    size_t len;
    vdnn_status st = read_all(path, &b, &len, err);
    if (st) return st;
    if (len == 0) {
        free(b);
        return vdnn_fail(err, VDNN_ERR_FORMAT, "text:%s: the file is empty", path);
    }
    const bool train = split == VDNN_SPLIT_TRAIN;
    const size_t cut = len - len / 10, lo = train ? 0 : cut, hi = train ? cut : len;
    const size_t count = hi - lo > 0 ? (hi - lo - 1) / (size_t)seq_len : 0;
    /* Both parts need a sequence: at least seq_len + 1 bytes in the held-out tenth, so 10 (seq_len + 1) in all. */
    const size_t need = 10 * ((size_t)seq_len + 1);
    const size_t tail = len - cut, tail_seqs = tail > 0 ? (tail - 1) / (size_t)seq_len : 0;
    if (count == 0 || tail_seqs == 0) {
        free(b);
        return vdnn_fail(err, VDNN_ERR_FORMAT,
                         "text:%s: %zu bytes is too short for one sequence of %d tokens (and its next-byte targets) "
                         "in the held-out last tenth; needs at least %zu bytes, or a shorter --seq-len",
                         path, len, seq_len, need);
    }
    if (count > (size_t)1 << 30) {
        free(b);
        return vdnn_fail(err, VDNN_ERR_FORMAT, "text:%s: too many sequences (%zu)", path, count);
    }
    vdnn_dataset_t *ds;
    st = vdnn_dataset_alloc((int)count, 1, seq_len, 1, TEXT_VOCAB, &ds, err);
    int32_t *labels = st ? NULL : realloc(ds->labels, count * (size_t)seq_len * sizeof *labels);
    if (!st && !labels) {
        vdnn_dataset_free(ds);
        st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "text:%s: out of memory for %zu sequences", path, count);
    }
    if (st) {
        free(b);
        return st;
    }
    ds->labels = labels;
    ds->labels_per = seq_len;
    /* Token ids as floats (the model's data layer reads floats; ids below 2^24 are exact). */
    for (size_t s = 0; s < count; s++)
        for (size_t t = 0; t < (size_t)seq_len; t++) {
            const size_t at = lo + s * (size_t)seq_len + t;
            ds->images[s * (size_t)seq_len + t] = (float)b[at];
            ds->labels[s * (size_t)seq_len + t] = b[at + 1];
        }
    snprintf(ds->source, sizeof ds->source, "text:%.400s %s (%zu sequences of %d tokens)", path,
             split == VDNN_SPLIT_TRAIN ? "train" : "test", count, seq_len);
    free(b);
    *out = ds;
    return VDNN_OK;
}
