/* Checkpoint files: writing atomically (temporary, fsync, rename) and reading with full verification.
 *
 * Layout (integers little-endian; float data in host order, which is little-endian on
 * every platform vdnn builds for):
 *   offset  size  field
 *        0     8  magic "VDNNCKPT"
 *        8     4  u32 version (VDNN_CKPT_VERSION)
 *       12     8  u64 file size in bytes, checksum included
 *       20     8  u64 model_hash
 *       28     8  i64 step
 *       36     8  i64 epoch
 *       44     8  u64 seed
 *       52     4  u32 n_tensors
 *       56     4  u32 model name length L (0..63), then L bytes of name (no NUL)
 *              4  u32 precision of the net's maps, 0 fp32, 1 bf16, 2 fp16 (version 2 on; version 1: fp32)
 *   per tensor:
 *              4  u32 name length (1..95), then the name bytes (no NUL)
 *              8  u64 element count, then count float32 values
 *   last       4  u32 CRC-32 (zlib crc32) of every byte before it
 * The size field lets a truncated file be reported as such before anything else is parsed;
 * the version sits at a fixed offset so that files from newer releases are recognised. */
#include "train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char CKPT_MAGIC[8] = {'V', 'D', 'N', 'N', 'C', 'K', 'P', 'T'};
#define CKPT_FIXED_HEADER 60u /* bytes up to and including the model name length */
#define CKPT_MIN_SIZE (CKPT_FIXED_HEADER + 4u)
#define CKPT_TENSOR_MIN (4u + 1u + 8u)
#define CKPT_MODEL_MAX ((uint32_t)sizeof(((vdnn_checkpoint *)0)->model) - 1u)
#define CKPT_NAME_MAX ((uint32_t)sizeof(((vdnn_ckpt_tensor *)0)->name) - 1u)
#define CKPT_CHUNK ((size_t)1 << 20)

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- writing ---- */

typedef struct ckpt_writer {
    FILE *f;
    uLong crc;
    bool failed;
} ckpt_writer;

static void w_bytes(ckpt_writer *w, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (!w->failed && len > 0) {
        size_t n = len < CKPT_CHUNK ? len : CKPT_CHUNK;
        if (fwrite(p, 1, n, w->f) != n) {
            w->failed = true;
            return;
        }
        w->crc = crc32(w->crc, p, (uInt)n);
        p += n;
        len -= n;
    }
}

static void w_u32(ckpt_writer *w, uint32_t v)
{
    unsigned char b[4];
    put_u32(b, v);
    w_bytes(w, b, sizeof b);
}

static void w_u64(ckpt_writer *w, uint64_t v)
{
    unsigned char b[8];
    put_u64(b, v);
    w_bytes(w, b, sizeof b);
}

static vdnn_status check_for_write(const char *path, const vdnn_checkpoint *ck, uint64_t *size, vdnn_error *err)
{
    if (!path || !*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "checkpoint path is empty");
    if (!ck) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no checkpoint to write", path);
    if (memchr(ck->model, '\0', sizeof ck->model) == NULL)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: model name is not terminated", path);
    if (ck->n_tensors < 0 || (ck->n_tensors > 0 && !ck->tensors))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: bad tensor list (%d tensors)", path, ck->n_tensors);
    if (ck->precision > 2)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: precision %u is out of range (0 fp32, 1 bf16, 2 fp16)", path,
                         ck->precision);
    uint64_t total = CKPT_FIXED_HEADER + strlen(ck->model) + 4u + 4u; /* the precision, the checksum */
    for (int i = 0; i < ck->n_tensors; i++) {
        const vdnn_ckpt_tensor *t = &ck->tensors[i];
        const char *nul = memchr(t->name, '\0', sizeof t->name);
        if (!nul || nul == t->name)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: tensor %d has an empty or unterminated name", path, i);
        if (t->count > 0 && !t->data)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: tensor '%s' has no data", path, t->name);
        if (t->count > (UINT64_MAX - total) / 8)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: tensor '%s' is too large", path, t->name);
        total += 4u + (uint64_t)(nul - t->name) + 8u + (uint64_t)t->count * sizeof(float);
    }
    *size = total;
    return VDNN_OK;
}

static void w_body(ckpt_writer *w, const vdnn_checkpoint *ck, uint64_t size)
{
    w_bytes(w, CKPT_MAGIC, sizeof CKPT_MAGIC);
    w_u32(w, VDNN_CKPT_VERSION);
    w_u64(w, size);
    w_u64(w, ck->model_hash);
    w_u64(w, (uint64_t)ck->step);
    w_u64(w, (uint64_t)ck->epoch);
    w_u64(w, ck->seed);
    w_u32(w, (uint32_t)ck->n_tensors);
    uint32_t mlen = (uint32_t)strlen(ck->model);
    w_u32(w, mlen);
    w_bytes(w, ck->model, mlen);
    w_u32(w, ck->precision);
    for (int i = 0; i < ck->n_tensors; i++) {
        const vdnn_ckpt_tensor *t = &ck->tensors[i];
        uint32_t nlen = (uint32_t)strlen(t->name);
        w_u32(w, nlen);
        w_bytes(w, t->name, nlen);
        w_u64(w, (uint64_t)t->count);
        if (t->count) w_bytes(w, t->data, t->count * sizeof(float));
    }
    unsigned char b[4];
    put_u32(b, (uint32_t)w->crc);
    w_bytes(w, b, sizeof b);
}

/* The rename is only durable once the directory entry is on disk. A failure here is not
 * reported: the new file is already complete at its final name, which is all callers rely on. */
static void sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

vdnn_status vdnn_checkpoint_write(const char *path, const vdnn_checkpoint *ck, vdnn_error *err)
{
    uint64_t size = 0;
    vdnn_status st = check_for_write(path, ck, &size, err);
    if (st != VDNN_OK) return st;

    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: checkpoint path is too long", path);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot create temporary checkpoint %s: %s", path, tmp,
                         strerror(errno));
    ckpt_writer w = {.f = fdopen(fd, "wb"), .crc = crc32(0L, Z_NULL, 0), .failed = false};
    if (!w.f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot write checkpoint: %s", path, strerror(e));
    }

    errno = 0;
    w_body(&w, ck, size);
    int e = 0;
    if (w.failed || fflush(w.f) != 0) e = errno ? errno : EIO;
    else if (fsync(fileno(w.f)) != 0) e = errno;
    if (fclose(w.f) != 0 && !e) e = errno ? errno : EIO;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot write checkpoint: %s", path, strerror(e));
    }
    sync_parent_dir(path);
    return VDNN_OK;
}

/* ---- reading ---- */

typedef struct ckpt_reader {
    FILE *f;
    const char *path;
    uint64_t pos;
    uint64_t body_end; /* offset of the checksum */
} ckpt_reader;

static vdnn_status r_bytes(ckpt_reader *r, void *dst, size_t len, vdnn_error *err)
{
    if (len > r->body_end - r->pos)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: a record at byte %llu runs past the end of the data",
                         r->path, (unsigned long long)r->pos);
    if (len && fread(dst, 1, len, r->f) != len)
        return vdnn_fail(err, VDNN_ERR_IO, "%s: read error at byte %llu", r->path, (unsigned long long)r->pos);
    r->pos += len;
    return VDNN_OK;
}

static vdnn_status r_u32(ckpt_reader *r, uint32_t *v, vdnn_error *err)
{
    unsigned char b[4];
    vdnn_status st = r_bytes(r, b, sizeof b, err);
    if (st == VDNN_OK) *v = get_u32(b);
    return st;
}

static vdnn_status r_u64(ckpt_reader *r, uint64_t *v, vdnn_error *err)
{
    unsigned char b[8];
    vdnn_status st = r_bytes(r, b, sizeof b, err);
    if (st == VDNN_OK) *v = get_u64(b);
    return st;
}

/* Reads a length-prefixed name into buf (max `cap` bytes plus NUL). */
static vdnn_status r_name(ckpt_reader *r, char *buf, uint32_t cap, bool allow_empty, const char *what,
                          vdnn_error *err)
{
    uint32_t len;
    vdnn_status st = r_u32(r, &len, err);
    if (st != VDNN_OK) return st;
    if (len > cap || (!allow_empty && len == 0))
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: %s name length %u (must be %s%u)", r->path, what,
                         len, allow_empty ? "0.." : "1..", cap);
    if ((st = r_bytes(r, buf, len, err)) != VDNN_OK) return st;
    buf[len] = '\0';
    if (strlen(buf) != len)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: %s name contains a NUL byte", r->path, what);
    return VDNN_OK;
}

/* First pass: the checksum over the whole body, so that any corruption is reported as such
 * before a damaged count could mislead the parser. */
static vdnn_status verify_crc(ckpt_reader *r, vdnn_error *err)
{
    unsigned char *buf = malloc(CKPT_CHUNK);
    if (!buf) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: no memory for checksum buffer", r->path);
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t left = r->body_end;
    vdnn_status st = VDNN_OK;
    while (left > 0) {
        size_t n = left < CKPT_CHUNK ? (size_t)left : CKPT_CHUNK;
        if (fread(buf, 1, n, r->f) != n) {
            st = vdnn_fail(err, VDNN_ERR_IO, "%s: read error", r->path);
            break;
        }
        crc = crc32(crc, buf, (uInt)n);
        left -= n;
    }
    if (st == VDNN_OK) {
        if (fread(buf, 1, 4, r->f) != 4) st = vdnn_fail(err, VDNN_ERR_IO, "%s: read error", r->path);
        else if (get_u32(buf) != (uint32_t)crc)
            st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: checksum mismatch: file is corrupt", r->path);
    }
    free(buf);
    return st;
}

/* Magic, version and size, from the first bytes and the real file size. */
static vdnn_status check_prefix(ckpt_reader *r, uint64_t fsize, vdnn_error *err)
{
    unsigned char h[20];
    size_t have = fsize < sizeof h ? (size_t)fsize : sizeof h;
    if (fread(h, 1, have, r->f) != have) return vdnn_fail(err, VDNN_ERR_IO, "%s: read error", r->path);
    size_t mlen = have < sizeof CKPT_MAGIC ? have : sizeof CKPT_MAGIC;
    if (memcmp(h, CKPT_MAGIC, mlen) != 0) return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: not a vdnn checkpoint", r->path);
    if (have >= 12) {
        uint32_t version = get_u32(h + 8);
        if (version > VDNN_CKPT_VERSION)
            return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: version %u is newer than this vdnn (%d)", r->path, version,
                             VDNN_CKPT_VERSION);
        if (version == 0)
            return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: version 0", r->path);
    }
    if (have < sizeof h)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: truncated: expected at least %u bytes, file has %llu", r->path,
                         CKPT_MIN_SIZE, (unsigned long long)fsize);
    uint64_t expect = get_u64(h + 12);
    if (expect < CKPT_MIN_SIZE)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: header gives a file size of %llu bytes", r->path,
                         (unsigned long long)expect);
    if (expect > fsize)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: truncated: expected %llu bytes, file has %llu", r->path,
                         (unsigned long long)expect, (unsigned long long)fsize);
    if (expect < fsize)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: expected %llu bytes, file has %llu (trailing data)",
                         r->path, (unsigned long long)expect, (unsigned long long)fsize);
    r->body_end = fsize - 4;
    return VDNN_OK;
}

/* Second pass: the fields, every count bounded by the bytes that remain. */
static vdnn_status parse_body(ckpt_reader *r, vdnn_checkpoint *ck, vdnn_error *err)
{
    vdnn_status st;
    uint64_t size_field, step, epoch;
    uint32_t n_tensors;
    char magic_version[12]; /* already checked by check_prefix */
    if ((st = r_bytes(r, magic_version, sizeof magic_version, err)) != VDNN_OK) return st;
    if ((st = r_u64(r, &size_field, err)) != VDNN_OK) return st;
    if ((st = r_u64(r, &ck->model_hash, err)) != VDNN_OK) return st;
    if ((st = r_u64(r, &step, err)) != VDNN_OK) return st;
    if ((st = r_u64(r, &epoch, err)) != VDNN_OK) return st;
    if ((st = r_u64(r, &ck->seed, err)) != VDNN_OK) return st;
    if ((st = r_u32(r, &n_tensors, err)) != VDNN_OK) return st;
    ck->step = (int64_t)step;
    ck->epoch = (int64_t)epoch;
    if ((st = r_name(r, ck->model, CKPT_MODEL_MAX, true, "model", err)) != VDNN_OK) return st;
    ck->precision = 0;
    if (get_u32((const unsigned char *)magic_version + 8) >= 2 && (st = r_u32(r, &ck->precision, err)) != VDNN_OK)
        return st;
    if (ck->precision > 2)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: precision %u (0 fp32, 1 bf16, 2 fp16)", r->path,
                         ck->precision);

    uint64_t left = r->body_end - r->pos;
    if (n_tensors > INT_MAX || n_tensors > left / CKPT_TENSOR_MIN)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: %u tensors cannot fit in %llu bytes", r->path,
                         n_tensors, (unsigned long long)left);
    if (n_tensors > 0) {
        ck->tensors = calloc(n_tensors, sizeof *ck->tensors);
        if (!ck->tensors) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: no memory for %u tensors", r->path, n_tensors);
    }
    for (uint32_t i = 0; i < n_tensors; i++) {
        vdnn_ckpt_tensor *t = &ck->tensors[i];
        ck->n_tensors = (int)i + 1; /* so that release frees what was read so far */
        if ((st = r_name(r, t->name, CKPT_NAME_MAX, false, "tensor", err)) != VDNN_OK) return st;
        uint64_t count;
        if ((st = r_u64(r, &count, err)) != VDNN_OK) return st;
        left = r->body_end - r->pos;
        if (count > left / sizeof(float) || count > SIZE_MAX / sizeof(float))
            return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: tensor '%s' claims %llu values but %llu bytes remain",
                             r->path, t->name, (unsigned long long)count, (unsigned long long)left);
        t->count = (size_t)count;
        /* Never NULL, even when empty, so callers may pass it to memcpy. */
        t->data = malloc(count ? t->count * sizeof(float) : sizeof(float));
        if (!t->data)
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: no memory for tensor '%s' (%llu values)", r->path, t->name,
                             (unsigned long long)count);
        if ((st = r_bytes(r, t->data, t->count * sizeof(float), err)) != VDNN_OK) return st;
    }
    if (r->pos != r->body_end)
        return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: corrupt: %llu unexplained bytes after the last tensor", r->path,
                         (unsigned long long)(r->body_end - r->pos));
    return VDNN_OK;
}

vdnn_status vdnn_checkpoint_read(const char *path, vdnn_checkpoint *ck, vdnn_error *err)
{
    if (!ck) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no checkpoint to read into");
    memset(ck, 0, sizeof *ck);
    if (!path || !*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "checkpoint path is empty");

    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open checkpoint: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: not a regular file", path);
    }
    ckpt_reader r = {.f = f, .path = path, .pos = 0, .body_end = 0};
    vdnn_status st = check_prefix(&r, (uint64_t)sb.st_size, err);
    if (st == VDNN_OK && fseek(f, 0, SEEK_SET) != 0) st = vdnn_fail(err, VDNN_ERR_IO, "%s: cannot seek", path);
    if (st == VDNN_OK) st = verify_crc(&r, err);
    if (st == VDNN_OK && fseek(f, 0, SEEK_SET) != 0) st = vdnn_fail(err, VDNN_ERR_IO, "%s: cannot seek", path);
    if (st == VDNN_OK) st = parse_body(&r, ck, err);
    fclose(f);
    if (st != VDNN_OK) vdnn_checkpoint_release(ck);
    return st;
}

void vdnn_checkpoint_release(vdnn_checkpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_tensors && ck->tensors; i++) free(ck->tensors[i].data);
    free(ck->tensors);
    ck->tensors = NULL;
    ck->n_tensors = 0;
}

const vdnn_ckpt_tensor *vdnn_checkpoint_find(const vdnn_checkpoint *ck, const char *name)
{
    if (!ck || !name) return NULL;
    for (int i = 0; i < ck->n_tensors; i++)
        if (!strcmp(ck->tensors[i].name, name)) return &ck->tensors[i];
    return NULL;
}
