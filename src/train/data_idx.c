/* IDX file reader (MNIST-style images and labels), plain or gzip-compressed, with strict validation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "train/data_internal.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u

/* Reads up to `want` bytes; returns how many arrived. *zerr is set to zlib's
 * message when the stream is damaged or unreadable (as opposed to merely ending
 * early) and *zcode to its code (Z_ERRNO for an operating-system read error). */
static size_t read_some(gzFile f, const char *path, void *buf, size_t want, const char **zerr, int *zcode)
{
    size_t got = 0;
    *zerr = NULL;
    *zcode = Z_OK;
    while (got < want) {
        size_t chunk = want - got;
        if (chunk > (1u << 30)) chunk = 1u << 30;
        int r = gzread(f, (char *)buf + got, (unsigned)chunk);
        if (r <= 0) break;
        got += (size_t)r;
    }
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    /* Z_BUF_ERROR is zlib's "unexpected end of file": a cut .gz, reported as truncation. */
    if (errnum != Z_OK && errnum != Z_BUF_ERROR) {
        /* zlib prefixes its message with the path, which our messages already carry. */
        size_t plen = strlen(path);
        if (!strncmp(msg, path, plen) && !strncmp(msg + plen, ": ", 2)) msg += plen + 2;
        *zerr = msg;
        *zcode = errnum;
    }
    return got;
}

/* Explains why fewer than `want` bytes of `what` arrived. */
static vdnn_status short_read(const char *path, const char *what, size_t want, size_t got, const char *zerr, int zcode,
                              vdnn_error *err)
{
    if (zcode == Z_ERRNO) return vdnn_fail(err, VDNN_ERR_IO, "%s: read error in the %s (%s)", path, what, zerr);
    /* zlib inflates ahead of what we ask for, so a damaged stream may surface on any
     * read: the message does not pretend to know which part was hit. */
    if (zerr) return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt gzip stream (zlib: %s)", path, zerr);
    return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: truncated %s (expected %zu bytes, got %zu)", path, what, want, got);
}

static vdnn_status read_exact(gzFile f, const char *path, void *buf, size_t want, const char *what,
                              vdnn_error *err)
{
    const char *zerr;
    int zcode;
    size_t got = read_some(f, path, buf, want, &zerr, &zcode);
    if (got != want || zerr) return short_read(path, what, want, got, zerr, zcode, err);
    return VDNN_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Opens path, checks the magic and reads ndims dimensions, each in 1..INT_MAX and
 * with a product no larger than VDNN_DATA_MAX_BYTES. */
static vdnn_status open_idx(const char *path, uint32_t magic, int ndims, int *dims, size_t *total, gzFile *out,
                            vdnn_error *err)
{
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open (%s)", path,
                         errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1u << 17);
    unsigned char hdr[4 + 4 * 3];
    size_t hlen = 4 + 4 * (size_t)ndims;
    /* The magic alone first, so a file of the wrong kind is named as such even when
     * it is shorter than the header we expected. */
    const char *zerr;
    int zcode;
    size_t got = read_some(f, path, hdr, 4, &zerr, &zcode);
    vdnn_status st = VDNN_OK;
    if (got == 4 && be32(hdr) != magic) {
        st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: wrong magic number 0x%08x (expected 0x%08x, an IDX %s file)", path,
                       be32(hdr), magic, magic == IDX_IMAGES_MAGIC ? "image" : "label");
        goto fail;
    }
    if (got == 4) got += read_some(f, path, hdr + 4, hlen - 4, &zerr, &zcode);
    if (got != hlen) st = short_read(path, "header", hlen, got, zerr, zcode, err);
    if (st) goto fail;
    unsigned long long prod = 1;
    for (int i = 0; i < ndims; i++) {
        uint32_t d = be32(hdr + 4 + 4 * i);
        if (d == 0) {
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: dimension %d is 0", path, i);
            goto fail;
        }
        prod *= d; /* cannot overflow: prod <= 1e8 before, d < 2^32 */
        if (prod > VDNN_DATA_MAX_BYTES) {
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: dimensions claim more than %llu bytes (dimension %d is %u)",
                           path, VDNN_DATA_MAX_BYTES, i, d);
            goto fail;
        }
        dims[i] = (int)d;
    }
    *total = (size_t)prod;
    *out = f;
    return VDNN_OK;
fail:
    gzclose(f);
    return st;
}

/* Reads the payload and insists the file ends right after it: trailing bytes mean the
 * header disagrees with the contents, so they are rejected rather than ignored. */
static vdnn_status read_payload(gzFile f, const char *path, size_t total, const char *what, uint8_t **out,
                                vdnn_error *err)
{
    uint8_t *buf = malloc(total);
    if (!buf) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", path, total);
    vdnn_status st = read_exact(f, path, buf, total, what, err);
    if (st == VDNN_OK) {
        /* Reading past the end also makes zlib verify the gzip CRC. */
        unsigned char extra[64];
        const char *zerr;
        int zcode;
        size_t more = read_some(f, path, extra, sizeof extra, &zerr, &zcode);
        if (zerr)
            st = short_read(path, what, 0, 0, zerr, zcode, err);
        else if (more)
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: unexpected data after the %zu bytes of %s the header declares",
                           path, total, what);
    }
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    return VDNN_OK;
}

vdnn_status vdnn_idx_read_images(const char *path, int *count, int *rows, int *cols, uint8_t **pixels, vdnn_error *err)
{
    if (!path || !count || !rows || !cols || !pixels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_idx_read_images: NULL argument");
    int dims[3] = {0};
    size_t total = 0;
    gzFile f = NULL;
    vdnn_status st = open_idx(path, IDX_IMAGES_MAGIC, 3, dims, &total, &f, err);
    if (st) return st;
    st = read_payload(f, path, total, "pixel data", pixels, err);
    gzclose(f);
    if (st) return st;
    *count = dims[0];
    *rows = dims[1];
    *cols = dims[2];
    return VDNN_OK;
}

vdnn_status vdnn_idx_read_labels(const char *path, int *count, uint8_t **labels, vdnn_error *err)
{
    if (!path || !count || !labels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_idx_read_labels: NULL argument");
    int dims[1] = {0};
    size_t total = 0;
    gzFile f = NULL;
    vdnn_status st = open_idx(path, IDX_LABELS_MAGIC, 1, dims, &total, &f, err);
    if (st) return st;
    st = read_payload(f, path, total, "label data", labels, err);
    gzclose(f);
    if (st) return st;
    *count = dims[0];
    return VDNN_OK;
}
