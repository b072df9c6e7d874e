/* text:FILE: a file's bytes as tokens (vocabulary 256; text:DIR, a directory's text files as one), and tokens:FILE: llm.c's pre-tokenized .bin files (a
 * 256-int32 header, then uint16 token ids), cut into sequences with next-token targets, the last tenth held out as
 * the test split. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/data_internal.h"

#define TEXT_VOCAB 256
/* Whole files are read into memory; beyond this a text is far larger than anything trained here. */
#define TEXT_MAX_BYTES (1ULL << 31)
/* llm.c's token files: header[0] the magic, header[1] the version (1: uint16 ids), header[2] the token count. */
#define TOKENS_HEADER_INTS 256
#define TOKENS_MAGIC 20240520
#define TOKENS_VERSION 1

vdnn_status vdnn_text_read_file(const char *kind, const char *path, unsigned char **buf, size_t *len, vdnn_error *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s:%s: cannot open it: %s", kind, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    vdnn_status st = b ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s:%s: out of memory", kind, path);
    while (!st) {
        if (n == cap) {
            unsigned char *nb = cap >= TEXT_MAX_BYTES ? NULL : realloc(b, cap * 2);
            if (!nb) {
                st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s:%s: larger than %llu bytes", kind, path,
                               (unsigned long long)TEXT_MAX_BYTES);
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = vdnn_fail(err, VDNN_ERR_IO, "%s:%s: read error (a directory?)", kind, path);
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

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The token ids of a tokens:FILE, checked against its header; *vocab: the largest id + 1. */
static vdnn_status token_ids(const char *path, const unsigned char *b, size_t len, uint32_t **ids, size_t *n,
                             int *vocab, vdnn_error *err)
{
    const size_t head = TOKENS_HEADER_INTS * 4;
    if (len < head)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "tokens:%s: %zu bytes, shorter than the %zu-byte header (llm.c's .bin "
                         "layout: 256 int32, magic %d, version %d, token count, then uint16 ids)", path, len, head,
                         TOKENS_MAGIC, TOKENS_VERSION);
    if (le32(b) != TOKENS_MAGIC)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "tokens:%s: magic %u, expected %d (not a token file in llm.c's .bin "
                         "layout)", path, le32(b), TOKENS_MAGIC);
    if (le32(b + 4) != TOKENS_VERSION)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "tokens:%s: version %u; this build reads version %d (uint16 ids)",
                         path, le32(b + 4), TOKENS_VERSION);
    const size_t count = le32(b + 8);
    if (len - head != 2 * count)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "tokens:%s: the header says %zu tokens (%zu bytes after it), the file "
                         "has %zu bytes after it%s", path, count, 2 * count, len - head,
                         len - head < 2 * count ? ": truncated" : "");
    *ids = malloc((count ? count : 1) * sizeof **ids);
    if (!*ids) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "tokens:%s: out of memory for %zu tokens", path, count);
    uint32_t top = 0;
    for (size_t i = 0; i < count; i++) {
        (*ids)[i] = (uint32_t)b[head + 2 * i] | (uint32_t)b[head + 2 * i + 1] << 8;
        if ((*ids)[i] > top) top = (*ids)[i];
    }
    *n = count;
    *vocab = count ? (int)top + 1 : 0;
    return VDNN_OK;
}

/* Splits at 90% of the tokens: the training part is tokens [0, cut), the test part [cut, len). Each part is cut
 * into non-overlapping sequences of seq_len tokens; a sequence's targets are the tokens one further on, so a part of
 * m tokens holds (m - 1) / seq_len sequences. text:FILE's tokens are its bytes (vocabulary 256); tokens:FILE's
 * vocabulary is its largest id + 1 (or --classes), the same for both splits, which read the whole file. */
static vdnn_status seq_open(const char *kind, const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out,
                            vdnn_error *err)
{
    *out = NULL;
    const bool text = !strcmp(kind, "text");
    if (!*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no file given (use --data %s:FILE)", kind, kind);
    if (seq_len < 1)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s:%s: sequence length %d (set --seq-len, 1 or more)", kind, path,
                         seq_len);
    unsigned char *b;
    size_t bytes;
    struct stat sb;
    const bool dir = text && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    vdnn_status st = dir ? vdnn_text_read_dir(path, &b, &bytes, err) : vdnn_text_read_file(kind, path, &b, &bytes, err);
    if (st) return st;
    uint32_t *ids = NULL;
    size_t len = bytes;
    int vocab = TEXT_VOCAB;
    if (!text) {
        st = token_ids(path, b, bytes, &ids, &len, &vocab, err);
        free(b);
        b = NULL;
        if (st) return st;
    }
    if (len == 0) {
        free(b), free(ids);
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s:%s: the file %s", kind, path, text ? "is empty" : "holds no tokens");
    }
    const bool train = split == VDNN_SPLIT_TRAIN;
    const size_t cut = len - len / 10, lo = train ? 0 : cut, hi = train ? cut : len;
    const size_t count = hi - lo > 0 ? (hi - lo - 1) / (size_t)seq_len : 0;
    /* Both parts need a sequence: at least seq_len + 1 tokens in the held-out tenth, so 10 (seq_len + 1) in all. */
    const size_t need = 10 * ((size_t)seq_len + 1);
    const size_t tail = len - cut, tail_seqs = tail > 0 ? (tail - 1) / (size_t)seq_len : 0;
    if (count == 0 || tail_seqs == 0) {
        free(b), free(ids);
        return vdnn_fail(err, VDNN_ERR_FORMAT,
                         "%s:%s: %zu %s is too short for one sequence of %d tokens (and its next-token targets) "
                         "in the held-out last tenth; needs at least %zu %s, or a shorter --seq-len",
                         kind, path, len, text ? "bytes" : "tokens", seq_len, need, text ? "bytes" : "tokens");
    }
    if (count > (size_t)1 << 30) {
        free(b), free(ids);
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s:%s: too many sequences (%zu)", kind, path, count);
    }
    vdnn_dataset_t *ds;
    st = vdnn_dataset_alloc((int)count, 1, seq_len, 1, vocab < 2 ? 2 : vocab, &ds, err);
    int32_t *labels = st ? NULL : realloc(ds->labels, count * (size_t)seq_len * sizeof *labels);
    if (!st && !labels) {
        vdnn_dataset_free(ds);
        st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s:%s: out of memory for %zu sequences", kind, path, count);
    }
    if (st) {
        free(b), free(ids);
        return st;
    }
    ds->labels = labels;
    ds->labels_per = seq_len;
    /* Token ids as floats (the model's data layer reads floats; ids below 2^24 are exact). */
    for (size_t s = 0; s < count; s++)
        for (size_t t = 0; t < (size_t)seq_len; t++) {
            const size_t at = lo + s * (size_t)seq_len + t;
            const uint32_t id = text ? b[at] : ids[at], next = text ? b[at + 1] : ids[at + 1];
            ds->images[s * (size_t)seq_len + t] = (float)id;
            ds->labels[s * (size_t)seq_len + t] = (int32_t)next;
        }
    snprintf(ds->source, sizeof ds->source, "%s:%.400s %s (%zu sequences of %d tokens)", kind, path,
             split == VDNN_SPLIT_TRAIN ? "train" : "test", count, seq_len);
    free(b), free(ids);
    *out = ds;
    return VDNN_OK;
}

vdnn_status vdnn_text_open(const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out, vdnn_error *err)
{
    return seq_open("text", path, seq_len, split, out, err);
}

vdnn_status vdnn_tokens_open(const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out, vdnn_error *err)
{
    return seq_open("tokens", path, seq_len, split, out, err);
}
