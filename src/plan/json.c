/* A small recursive-descent JSON reader: strict RFC 8259 syntax, bounded nesting, positions in messages. */
#include "plan/json.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deep enough for any file vdnn writes; bounded so hostile input cannot exhaust the stack. */
#define JSON_MAX_DEPTH 64
#define JSON_MAX_FILE ((size_t)256 << 20)

typedef struct parser {
    const char *s, *end;
    const char *src;
    int line;
    const char *line_start;
    vdnn_error *err;
} parser;

static int col_of(const parser *p) { return (int)(p->s - p->line_start) + 1; }

static vdnn_status bad(parser *p, const char *what)
{
    if (p->s >= p->end) return vdnn_fail(p->err, VDNN_ERR_FORMAT, "%s:%d:%d: %s (the file ends early)", p->src, p->line, col_of(p), what);
    unsigned char c = (unsigned char)*p->s;
    if (c >= 0x20 && c < 0x7f)
        return vdnn_fail(p->err, VDNN_ERR_FORMAT, "%s:%d:%d: %s (found '%c')", p->src, p->line, col_of(p), what, c);
    return vdnn_fail(p->err, VDNN_ERR_FORMAT, "%s:%d:%d: %s (found byte 0x%02x)", p->src, p->line, col_of(p), what, c);
}

static void skip_ws(parser *p)
{
    while (p->s < p->end) {
        char c = *p->s;
        if (c == '\n') {
            p->line++;
            p->line_start = p->s + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->s++;
    }
}

static bool literal(parser *p, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n)) return false;
    p->s += n;
    return true;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* At the opening quote; the decoded text is never longer than the literal. */
static vdnn_status parse_string(parser *p, char **out)
{
    p->s++;
    const char *start = p->s;
    while (p->s < p->end && *p->s != '"') p->s += *p->s == '\\' && p->s + 1 < p->end ? 2 : 1;
    if (p->s >= p->end) return bad(p, "unterminated string");
    size_t cap = (size_t)(p->s - start) + 1;
    char *buf = malloc(cap), *o = buf;
    if (!buf) return vdnn_fail(p->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", p->src);
    p->s = start;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) {
            free(buf);
            return bad(p, "control character inside a string");
        }
        if (c != '\\') {
            *o++ = (char)c;
            p->s++;
            continue;
        }
        char e = p->s[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            *o++ = map[simple - "\"\\/bfnrt"];
            p->s += 2;
            continue;
        }
        if (e != 'u' || p->end - p->s < 6 || hex4(p->s + 2) < 0) {
            free(buf);
            return bad(p, "invalid escape in a string");
        }
        uint32_t cp = (uint32_t)hex4(p->s + 2);
        size_t used = 6;
        if (cp >= 0xd800 && cp < 0xdc00) {
            int lo = p->end - p->s >= 12 && p->s[6] == '\\' && p->s[7] == 'u' ? hex4(p->s + 8) : -1;
            if (lo < 0xdc00 || lo > 0xdfff) {
                free(buf);
                return bad(p, "unpaired surrogate in a \\u escape");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
            used = 12;
        } else if (cp >= 0xdc00 && cp < 0xe000) {
            free(buf);
            return bad(p, "unpaired surrogate in a \\u escape");
        }
        if (cp == 0) {
            free(buf);
            return bad(p, "\\u0000 is not allowed in a string");
        }
        o += put_utf8(o, cp);
        p->s += used;
    }
    *o = '\0';
    p->s++;
    *out = buf;
    return VDNN_OK;
}

static vdnn_status parse_number(parser *p, double *out)
{
    const char *t = p->s;
    if (t < p->end && *t == '-') t++;
    if (t >= p->end || !(*t >= '0' && *t <= '9')) return bad(p, "expected a value");
    if (*t == '0') t++;
    else while (t < p->end && *t >= '0' && *t <= '9') t++;
    if (t < p->end && *t == '.') {
        t++;
        if (t >= p->end || !(*t >= '0' && *t <= '9')) {
            p->s = t;
            return bad(p, "expected a digit after the decimal point");
        }
        while (t < p->end && *t >= '0' && *t <= '9') t++;
    }
    if (t < p->end && (*t == 'e' || *t == 'E')) {
        t++;
        if (t < p->end && (*t == '+' || *t == '-')) t++;
        if (t >= p->end || !(*t >= '0' && *t <= '9')) {
            p->s = t;
            return bad(p, "expected a digit in the exponent");
        }
        while (t < p->end && *t >= '0' && *t <= '9') t++;
    }
    char buf[64];
    size_t n = (size_t)(t - p->s);
    if (n >= sizeof buf) return bad(p, "number literal too long");
    memcpy(buf, p->s, n);
    buf[n] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (!isfinite(v)) return bad(p, "number out of range");
    *out = v;
    p->s = t;
    return VDNN_OK;
}

static vdnn_status parse_value(parser *p, vdnn_json *v, int depth);

static vdnn_status grow_items(parser *p, vdnn_json *v, int *cap, bool keys)
{
    if (v->n < *cap) return VDNN_OK;
    int nc = *cap ? *cap * 2 : 8;
    vdnn_json *items = realloc(v->items, (size_t)nc * sizeof *items);
    if (items) v->items = items;
    char **k = NULL;
    if (items && keys) {
        k = realloc(v->keys, (size_t)nc * sizeof *k);
        if (k) v->keys = k;
    }
    if (!items || (keys && !k)) return vdnn_fail(p->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", p->src);
    *cap = nc;
    return VDNN_OK;
}

static vdnn_status parse_container(parser *p, vdnn_json *v, int depth, bool object)
{
    char close = object ? '}' : ']';
    v->type = object ? VDNN_JSON_OBJECT : VDNN_JSON_ARRAY;
    p->s++;
    int cap = 0;
    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return VDNN_OK;
    }
    for (;;) {
        vdnn_status rc = grow_items(p, v, &cap, object);
        if (rc) return rc;
        vdnn_json *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        skip_ws(p);
        if (object) {
            v->keys[v->n] = NULL;
            if (p->s >= p->end || *p->s != '"') return bad(p, "expected a member name in quotes");
            /* Count the member before parsing its value, so that a failure frees what was read. */
            v->n++;
            rc = parse_string(p, &v->keys[v->n - 1]);
            if (rc) return rc;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') return bad(p, "expected ':' after a member name");
            p->s++;
            skip_ws(p);
        } else {
            v->n++;
        }
        rc = parse_value(p, item, depth + 1);
        if (rc) return rc;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return VDNN_OK;
        }
        return bad(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static vdnn_status parse_value(parser *p, vdnn_json *v, int depth)
{
    memset(v, 0, sizeof *v);
    v->line = p->line;
    v->col = col_of(p);
    if (depth > JSON_MAX_DEPTH) return bad(p, "nested too deeply");
    if (p->s >= p->end) return bad(p, "expected a value");
    switch (*p->s) {
    case '{': return parse_container(p, v, depth, true);
    case '[': return parse_container(p, v, depth, false);
    case '"': v->type = VDNN_JSON_STRING; return parse_string(p, &v->string);
    case 't':
    case 'f':
    case 'n':
        if (literal(p, "true") || literal(p, "false")) {
            v->type = VDNN_JSON_BOOL;
            v->boolean = p->s[-4] == 't';
            return VDNN_OK;
        }
        if (literal(p, "null")) return VDNN_OK;
        return bad(p, "expected a value");
    default: v->type = VDNN_JSON_NUMBER; return parse_number(p, &v->number);
    }
}

static void release(vdnn_json *v)
{
    free(v->string);
    for (int i = 0; i < v->n; i++) {
        release(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void vdnn_json_free(vdnn_json *v)
{
    if (!v) return;
    release(v);
    free(v);
}

vdnn_status vdnn_json_parse(const char *text, size_t len, const char *source, vdnn_json **out, vdnn_error *err)
{
    *out = NULL;
    parser p = {text, text + len, source, 1, text, err};
    vdnn_json *v = calloc(1, sizeof *v);
    if (!v) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", source);
    skip_ws(&p);
    vdnn_status rc = parse_value(&p, v, 0);
    if (rc == VDNN_OK) {
        skip_ws(&p);
        if (p.s < p.end) rc = bad(&p, "unexpected text after the JSON value");
    }
    if (rc) {
        vdnn_json_free(v);
        return rc;
    }
    *out = v;
    return VDNN_OK;
}

vdnn_status vdnn_json_read_file(const char *path, vdnn_json **out, vdnn_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    vdnn_status rc = buf ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", path);
    while (rc == VDNN_OK) {
        if (n == cap) {
            if (cap >= JSON_MAX_FILE) {
                rc = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: larger than %zu MiB, not a vdnn JSON file", path, JSON_MAX_FILE >> 20);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = vdnn_fail(err, VDNN_ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc == VDNN_OK && n == 0) rc = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: the file is empty", path);
    if (rc == VDNN_OK) rc = vdnn_json_parse(buf, n, path, out, err);
    free(buf);
    return rc;
}

const vdnn_json *vdnn_json_get(const vdnn_json *v, const char *key)
{
    if (!v || v->type != VDNN_JSON_OBJECT) return NULL;
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

void vdnn_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}
