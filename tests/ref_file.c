/* Reads VDNNREF1 reference files (tests/reference/README.md) array by array, little-endian on any host. */
#include "ref_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct reader {
    FILE *f;
    const char *path;
} reader;

static void take(reader *r, void *buf, size_t n, const char *what)
{
    if (n && fread(buf, 1, n, r->f) != n) fail_msg("%s: truncated in %s", r->path, what);
}

static uint32_t le32(const unsigned char *b)
{
    return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint32_t take32(reader *r, const char *what)
{
    unsigned char b[4];
    take(r, b, 4, what);
    return le32(b);
}

/* The data as stored, turned into host order in place. */
static void to_host(vt_ref_array *a)
{
    unsigned char *b = a->data;
    for (size_t k = 0; k < a->count; k++) {
        if (a->dtype == VT_REF_U64) {
            uint64_t v = le32(b + 8 * k) | (uint64_t)le32(b + 8 * k + 4) << 32;
            memcpy(b + 8 * k, &v, 8);
        } else {
            uint32_t v = le32(b + 4 * k);
            memcpy(b + 4 * k, &v, 4);
        }
    }
}

void vt_ref_load(const char *path, vt_ref_file *rf)
{
    memset(rf, 0, sizeof *rf);
    reader r = {fopen(path, "rb"), path};
    if (!r.f) fail_msg("cannot open %s", path);
    char magic[8];
    take(&r, magic, 8, "the magic");
    if (memcmp(magic, "VDNNREF1", 8)) fail_msg("%s: bad magic", path);
    uint32_t n = take32(&r, "the array count");
    if (n > 1u << 20) fail_msg("%s: %u arrays", path, n);
    rf->a = calloc(n ? n : 1, sizeof *rf->a);
    assert_non_null(rf->a);
    rf->cap = (int)n;
    for (uint32_t i = 0; i < n; i++) {
        vt_ref_array *a = &rf->a[rf->n++];
        uint32_t ln = take32(&r, "a name length");
        if (ln == 0 || ln >= sizeof a->name) fail_msg("%s: array %u has a name of %u bytes", path, i, ln);
        take(&r, a->name, ln, "a name");
        a->dtype = (int)take32(&r, a->name);
        uint32_t nd = take32(&r, a->name);
        if (nd > 5 || a->dtype < VT_REF_F32 || a->dtype > VT_REF_U64)
            fail_msg("%s: array '%s' has dtype %d, %u dimensions", path, a->name, a->dtype, nd);
        a->ndim = (int)nd;
        a->count = 1;
        for (uint32_t d = 0; d < nd; d++) a->count *= a->dims[d] = take32(&r, a->name);
        const size_t esz = a->dtype == VT_REF_U64 ? 8 : 4;
        a->data = malloc(a->count * esz + 1);
        assert_non_null(a->data);
        take(&r, a->data, a->count * esz, a->name);
        to_host(a);
    }
    if (fgetc(r.f) != EOF) fail_msg("%s: bytes after the last array", path);
    fclose(r.f);
}

void vt_ref_free(vt_ref_file *rf)
{
    for (int i = 0; i < rf->n; i++) free(rf->a[i].data);
    free(rf->a);
    memset(rf, 0, sizeof *rf);
}

vt_ref_array *vt_ref_find(vt_ref_file *rf, const char *name)
{
    for (int i = 0; i < rf->n; i++)
        if (!strcmp(rf->a[i].name, name)) return &rf->a[i];
    return NULL;
}

vt_ref_array *vt_ref_get(vt_ref_file *rf, const char *name, int dtype, size_t count)
{
    vt_ref_array *a = vt_ref_find(rf, name);
    if (!a) fail_msg("reference has no array '%s'", name);
    if (a->dtype != dtype || a->count != count)
        fail_msg("reference '%s': dtype %d with %zu values, expected dtype %d with %zu", name, a->dtype, a->count,
                 dtype, count);
    return a;
}
