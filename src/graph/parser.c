/* Reads model files (INI-like [net] and named [layer] sections) into a vdnn_graph with inputs linked. */
#include "graph/graph.h"
#include "graph/onnx.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KB(k) (1u << (k))
#define POOL_KINDS (KB(VDNN_LAYER_MAXPOOL) | KB(VDNN_LAYER_AVGPOOL))
#define WINDOW_KINDS (KB(VDNN_LAYER_CONV) | POOL_KINDS)
#define NO_FIELD ((size_t)-1)
#define MAX_DIM (1L << 16)   /* kernels, strides, pads: far beyond any real net, small enough for int math */
#define MAX_COUNT (1L << 24) /* filters, outputs, groups */

typedef struct kv {
    char *key, *val;
    int line;
} kv;

/* Integer keys: where they apply, their range, and the field(s) they set. */
typedef struct int_key {
    const char *key;
    unsigned kinds;
    long lo, hi;
    size_t f1, f2;
} int_key;

#define PF(x) offsetof(vdnn_layer_params, x)
static const int_key int_keys[] = {
    {"size", WINDOW_KINDS, 1, MAX_DIM, PF(kernel_h), PF(kernel_w)},
    {"size_h", WINDOW_KINDS, 1, MAX_DIM, PF(kernel_h), NO_FIELD},
    {"size_w", WINDOW_KINDS, 1, MAX_DIM, PF(kernel_w), NO_FIELD},
    {"stride", WINDOW_KINDS, 1, MAX_DIM, PF(stride_h), PF(stride_w)},
    {"stride_h", WINDOW_KINDS, 1, MAX_DIM, PF(stride_h), NO_FIELD},
    {"stride_w", WINDOW_KINDS, 1, MAX_DIM, PF(stride_w), NO_FIELD},
    {"pad", WINDOW_KINDS, 0, MAX_DIM, PF(pad_h), PF(pad_w)},
    {"pad_h", WINDOW_KINDS, 0, MAX_DIM, PF(pad_h), NO_FIELD},
    {"pad_w", WINDOW_KINDS, 0, MAX_DIM, PF(pad_w), NO_FIELD},
    {"groups", KB(VDNN_LAYER_CONV) | KB(VDNN_LAYER_ATTN_PROBS), 1, MAX_COUNT, PF(groups), NO_FIELD},
    {"filters", KB(VDNN_LAYER_CONV), 1, MAX_COUNT, PF(filters), NO_FIELD},
    {"bias", KB(VDNN_LAYER_CONV) | KB(VDNN_LAYER_FC) | KB(VDNN_LAYER_LINEAR), 0, 1, PF(bias), NO_FIELD},
    {"context", KB(VDNN_LAYER_POS_EMBED), 1, MAX_COUNT, PF(context), NO_FIELD},
    {"heads", KB(VDNN_LAYER_ATTN_PROBS) | KB(VDNN_LAYER_ATTN), 1, 4096, PF(heads), NO_FIELD},
    {"hidden", KB(VDNN_LAYER_LSTM), 1, MAX_COUNT, PF(filters), NO_FIELD},
    {"proj", KB(VDNN_LAYER_LSTM), 1, MAX_COUNT, PF(proj), NO_FIELD},
    {"chunk", KB(VDNN_LAYER_LSTM), 1, MAX_COUNT, PF(chunk), NO_FIELD},
    {"size", KB(VDNN_LAYER_LRN), 1, MAX_DIM, PF(lrn_size), NO_FIELD},
    {"ceil_mode", POOL_KINDS, 0, 1, PF(ceil_mode), NO_FIELD},
};

/* Float keys with their open/closed ranges (range is the text used in messages). */
typedef struct float_key {
    const char *key;
    unsigned kinds;
    double lo, hi;
    bool lo_open, hi_open;
    const char *range;
    size_t f;
} float_key;

static const float_key float_keys[] = {
    {"alpha", KB(VDNN_LAYER_LRN), 0, 1e30, false, false, "at least 0", PF(lrn_alpha)},
    {"beta", KB(VDNN_LAYER_LRN), 0, 1e30, false, false, "at least 0", PF(lrn_beta)},
    {"k", KB(VDNN_LAYER_LRN), 0, 1e30, true, false, "greater than 0", PF(lrn_k)},
    {"eps", KB(VDNN_LAYER_BATCHNORM) | KB(VDNN_LAYER_LAYERNORM), 0, 1, true, false, "in (0, 1]", PF(bn_eps)},
    {"momentum", KB(VDNN_LAYER_BATCHNORM), 0, 1, false, false, "in [0, 1]", PF(bn_momentum)},
    {"p", KB(VDNN_LAYER_DROPOUT), 0, 1, false, true, "in [0, 1)", PF(dropout_p)},
    {"alpha", KB(VDNN_LAYER_HARDSIGMOID), -1e30, 1e30, false, false, "a finite number", PF(alpha)},
    {"beta", KB(VDNN_LAYER_HARDSIGMOID), -1e30, 1e30, false, false, "a finite number", PF(beta)},
    {"min", KB(VDNN_LAYER_CLIP), -1e30, 1e30, false, false, "a finite number", PF(clip_lo)},
    {"max", KB(VDNN_LAYER_CLIP), -1e30, 1e30, false, false, "a finite number", PF(clip_hi)},
};
#undef PF

typedef struct parser {
    const char *src;
    vdnn_error *err;
    vdnn_graph_t *g;
    int cap;
    /* Per layer: the raw input= value (NULL: the previous layer) and its line. */
    char **in_spec;
    int *in_line;
    /* The section being read: -1 none, 0 [net], else the pending layer's header line. */
    int sec_line;
    bool sec_is_net, seen_net;
    char *sec_name;
    kv *kvs;
    int n_kv, cap_kv;
} parser;

VDNN_PRINTF(4, 5)
static vdnn_status perr(parser *ps, vdnn_status st, int line, const char *fmt, ...)
{
    char what[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vdnn_fail(ps->err, st, "%s:%d: %s", ps->src, line, what);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static bool valid_name(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-') return false;
    return true;
}

static vdnn_status parse_int_value(parser *ps, const kv *e, long lo, long hi, long *out)
{
    if (!vdnn_parse_int(e->val, out))
        return perr(ps, VDNN_ERR_PARSE, e->line, "bad number '%s' for %s= (expected an integer)", e->val, e->key);
    if (*out < lo || *out > hi)
        return perr(ps, VDNN_ERR_PARSE, e->line, "%s=%s is out of range (must be between %ld and %ld)", e->key,
                    e->val, lo, hi);
    return VDNN_OK;
}

static vdnn_status grow_layers(parser *ps)
{
    vdnn_graph_t *g = ps->g;
    if (g->n_layers < ps->cap) return VDNN_OK;
    int cap = ps->cap ? 2 * ps->cap : 64;
    vdnn_layer *l = realloc(g->layers, (size_t)cap * sizeof *l);
    if (l) g->layers = l;
    char **s = realloc(ps->in_spec, (size_t)cap * sizeof *s);
    if (s) ps->in_spec = s;
    int *n = realloc(ps->in_line, (size_t)cap * sizeof *n);
    if (n) ps->in_line = n;
    if (!l || !s || !n) return vdnn_fail(ps->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", ps->src);
    ps->cap = cap;
    return VDNN_OK;
}

static vdnn_status parse_net_key(parser *ps, const kv *e)
{
    vdnn_graph_t *g = ps->g;
    if (!strcmp(e->key, "name")) {
        if (strlen(e->val) >= sizeof g->name)
            return perr(ps, VDNN_ERR_PARSE, e->line, "name '%s' is too long (at most %zu characters)", e->val,
                        sizeof g->name - 1);
        strcpy(g->name, e->val);
        return VDNN_OK;
    }
    if (!strcmp(e->key, "classes")) {
        long v;
        vdnn_status st = parse_int_value(ps, e, 1, MAX_COUNT, &v);
        if (!st) g->default_classes = (int)v;
        return st;
    }
    if (!strcmp(e->key, "input")) {
        long d[3];
        char *p = e->val;
        for (int i = 0; i < 3; i++) {
            char *end;
            errno = 0;
            d[i] = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
            bool sep_ok = i < 2 ? (d[i] >= 0 && (*end == 'x' || *end == 'X')) : (d[i] >= 0 && *end == '\0');
            if (errno || !sep_ok || d[i] < 1 || d[i] > MAX_COUNT)
                return perr(ps, VDNN_ERR_PARSE, e->line,
                            "bad input size '%s' (expected CxHxW with each between 1 and %ld, e.g. 3x224x224)",
                            e->val, MAX_COUNT);
            p = end + 1;
        }
        g->default_input = (vdnn_shape){0, (int)d[0], (int)d[1], (int)d[2]};
        return VDNN_OK;
    }
    return perr(ps, VDNN_ERR_PARSE, e->line, "unknown key '%s' in [net] (expected name, input or classes)", e->key);
}

static bool kind_from_name(const char *s, vdnn_layer_kind *k)
{
    /* ReLU6 is a clip with the default bounds, 0 and 6. */
    if (!strcmp(s, "relu6")) {
        *k = VDNN_LAYER_CLIP;
        return true;
    }
    for (int i = 1; i < VDNN_LAYER_KIND_COUNT; i++)
        if (!vdnn_layer_kind_internal((vdnn_layer_kind)i) && !strcmp(s, vdnn_layer_kind_name((vdnn_layer_kind)i))) {
            *k = (vdnn_layer_kind)i;
            return true;
        }
    return false;
}

static void set_defaults(vdnn_layer_params *p, vdnn_layer_kind k)
{
    memset(p, 0, sizeof *p);
    p->stride_h = p->stride_w = 1;
    p->groups = 1;
    p->bias = (k == VDNN_LAYER_CONV || k == VDNN_LAYER_FC || k == VDNN_LAYER_LINEAR);
    p->lrn_size = 5;
    p->lrn_alpha = 1e-4f;
    p->lrn_beta = 0.75f;
    p->lrn_k = 1.0f;
    p->bn_eps = 1e-5f;
    p->bn_momentum = 0.1f;
    p->dropout_p = 0.5f;
    p->alpha = 1.0f / 6.0f; /* PyTorch's Hardsigmoid */
    p->beta = 0.5f;
    p->clip_lo = 0.0f;      /* ReLU6 */
    p->clip_hi = 6.0f;
}

/* Applies one key of a layer section; *seen records which required keys were given. */
static vdnn_status parse_layer_key(parser *ps, vdnn_layer *L, const kv *e, unsigned *seen)
{
    vdnn_layer_params *p = &L->p;
    const char *kname = vdnn_layer_kind_name(L->kind);
    /* PyTorch's name, the inverse of the field's sense (padding counted is the default). */
    if (!strcmp(e->key, "count_include_pad") && L->kind == VDNN_LAYER_AVGPOOL) {
        long v;
        vdnn_status st = parse_int_value(ps, e, 0, 1, &v);
        if (!st) p->exclude_pad = !v;
        return st;
    }
    if (!strcmp(e->key, "outputs") &&
        (L->kind == VDNN_LAYER_FC || L->kind == VDNN_LAYER_LINEAR || L->kind == VDNN_LAYER_EMBED)) {
        *seen |= 1;
        if (!strcmp(e->val, "classes") && L->kind != VDNN_LAYER_EMBED) {
            p->outputs_are_classes = 1;
            return VDNN_OK;
        }
        long v;
        if (!vdnn_parse_int(e->val, &v))
            return perr(ps, VDNN_ERR_PARSE, e->line, "bad number '%s' for outputs= (expected an integer or 'classes')",
                        e->val);
        if (v < 1 || v > MAX_COUNT)
            return perr(ps, VDNN_ERR_PARSE, e->line, "outputs=%s is out of range (must be between 1 and %ld)", e->val,
                        MAX_COUNT);
        p->filters = (int)v;
        return VDNN_OK;
    }
    for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++) {
        const int_key *d = &int_keys[i];
        if (strcmp(e->key, d->key) || !(d->kinds & KB(L->kind))) continue;
        long v;
        vdnn_status st = parse_int_value(ps, e, d->lo, d->hi, &v);
        if (st) return st;
        *(int *)((char *)p + d->f1) = (int)v;
        if (d->f2 != NO_FIELD) *(int *)((char *)p + d->f2) = (int)v;
        if (!strcmp(d->key, "filters")) *seen |= 1;
        if (!strcmp(d->key, "size") || !strcmp(d->key, "size_h")) *seen |= 2;
        if (!strcmp(d->key, "size") || !strcmp(d->key, "size_w")) *seen |= 4;
        if (!strncmp(d->key, "stride", 6)) *seen |= 8;
        if (!strcmp(d->key, "context") || !strcmp(d->key, "heads") || !strcmp(d->key, "hidden")) *seen |= 16;
        return VDNN_OK;
    }
    for (size_t i = 0; i < sizeof float_keys / sizeof float_keys[0]; i++) {
        const float_key *d = &float_keys[i];
        if (strcmp(e->key, d->key) || !(d->kinds & KB(L->kind))) continue;
        double v;
        if (!vdnn_parse_float(e->val, &v))
            return perr(ps, VDNN_ERR_PARSE, e->line, "bad number '%s' for %s= (expected a number)", e->val, e->key);
        bool ok = (d->lo_open ? v > d->lo : v >= d->lo) && (d->hi_open ? v < d->hi : v <= d->hi);
        if (!ok)
            return perr(ps, VDNN_ERR_PARSE, e->line, "%s=%s is out of range (must be %s)", e->key, e->val, d->range);
        *(float *)((char *)p + d->f) = (float)v;
        return VDNN_OK;
    }
    return perr(ps, VDNN_ERR_PARSE, e->line, "unknown key '%s' for a %s layer", e->key, kname);
}

/* Turns the collected keys of a [layer] section into a layer. */
static vdnn_status finish_layer(parser *ps)
{
    const kv *type = NULL;
    for (int i = 0; i < ps->n_kv; i++)
        if (!strcmp(ps->kvs[i].key, "type")) type = &ps->kvs[i];
    if (!type) return perr(ps, VDNN_ERR_PARSE, ps->sec_line, "layer '%s' has no type= line", ps->sec_name);
    vdnn_layer_kind kind;
    if (!kind_from_name(type->val, &kind))
        return perr(ps, VDNN_ERR_PARSE, type->line,
                    "unknown layer type '%s' (expected conv, maxpool, avgpool, relu, lrn, batchnorm, dropout, fc, "
                    "concat, add, gap, flatten, sigmoid, hardsigmoid, hardswish, silu, clip, relu6, channel_mul, "
                    "embed, pos_embed, layernorm, linear, attn_probs, attn_mix, gelu, lstm or softmax)",
                    type->val);
    vdnn_status st = grow_layers(ps);
    if (st) return st;
    vdnn_graph_t *g = ps->g;
    int idx = g->n_layers;
    vdnn_layer *L = &g->layers[idx];
    memset(L, 0, sizeof *L);
    strcpy(L->name, ps->sec_name); /* length checked at the header */
    L->kind = kind;
    L->line = ps->sec_line;
    set_defaults(&L->p, kind);
    ps->in_spec[idx] = NULL;
    ps->in_line[idx] = ps->sec_line;

    unsigned seen = 0;
    bool stage_given = false;
    for (int i = 0; i < ps->n_kv; i++) {
        const kv *e = &ps->kvs[i];
        if (e == type) continue;
        if (!strcmp(e->key, "input")) {
            ps->in_spec[idx] = e->val;
            ps->in_line[idx] = e->line;
            continue;
        }
        if (!strcmp(e->key, "tie") && kind == VDNN_LAYER_LINEAR) {
            /* The table of an earlier embed layer is this linear's weight (GPT-2's tied output projection). */
            int j = vdnn_graph_find(g, e->val);
            if (j < 0 || j >= idx)
                return perr(ps, VDNN_ERR_PARSE, e->line, "layer '%s': tie=%s names no earlier layer", ps->sec_name,
                            e->val);
            if (g->layers[j].kind != VDNN_LAYER_EMBED)
                return perr(ps, VDNN_ERR_PARSE, e->line, "layer '%s': tie=%s is a %s layer; a linear ties only to an "
                            "embed layer's table", ps->sec_name, e->val, vdnn_layer_kind_name(g->layers[j].kind));
            if (g->layers[j].p.tied_by)
                return perr(ps, VDNN_ERR_PARSE, e->line, "layer '%s': tie=%s: its table is tied to layer '%s' already",
                            ps->sec_name, e->val, g->layers[g->layers[j].p.tied_by].name);
            L->p.tie = j;
            g->layers[j].p.tied_by = idx;
            continue;
        }
        if (!strcmp(e->key, "stage")) {
            /* Pipelines run stages in file order, so a placement never goes back to an earlier stage. */
            long v;
            st = parse_int_value(ps, e, g->layers[idx - 1].stage, 255, &v);
            if (st) return st;
            L->stage = (int)v;
            stage_given = true;
            continue;
        }
        st = parse_layer_key(ps, L, e, &seen);
        if (st) return st;
    }
    if (!stage_given) L->stage = g->layers[idx - 1].stage;
    vdnn_layer_params *p = &L->p;
    const char *kname = vdnn_layer_kind_name(kind);
    if (kind == VDNN_LAYER_CONV && !(seen & 1))
        return perr(ps, VDNN_ERR_PARSE, L->line, "conv layer '%s' needs filters=", L->name);
    if ((kind == VDNN_LAYER_FC || kind == VDNN_LAYER_LINEAR) && !(seen & 1))
        return perr(ps, VDNN_ERR_PARSE, L->line, "%s layer '%s' needs outputs= (a number or 'classes')", kname,
                    L->name);
    if (kind == VDNN_LAYER_EMBED && !(seen & 1))
        return perr(ps, VDNN_ERR_PARSE, L->line, "embed layer '%s' needs outputs= (the embedding width)", L->name);
    if (kind == VDNN_LAYER_POS_EMBED && !(seen & 16))
        return perr(ps, VDNN_ERR_PARSE, L->line, "pos_embed layer '%s' needs context= (the longest sequence)",
                    L->name);
    if ((kind == VDNN_LAYER_ATTN_PROBS || kind == VDNN_LAYER_ATTN) && !(seen & 16))
        return perr(ps, VDNN_ERR_PARSE, L->line, "%s layer '%s' needs heads=", kname, L->name);
    if (kind == VDNN_LAYER_LSTM && !(seen & 16))
        return perr(ps, VDNN_ERR_PARSE, L->line, "lstm layer '%s' needs hidden= (the cell width)", L->name);
    if ((KB(kind) & WINDOW_KINDS) && (seen & 6) != 6)
        return perr(ps, VDNN_ERR_PARSE, L->line, "%s layer '%s' needs size= (or size_h= and size_w=)", kname,
                    L->name);
    if (kind == VDNN_LAYER_ATTN_PROBS && p->heads % p->groups)
        return perr(ps, VDNN_ERR_PARSE, L->line, "attn_probs layer '%s': groups=%d does not divide heads=%d", L->name,
                    p->groups, p->heads);
    if (kind == VDNN_LAYER_CONV && p->filters % p->groups)
        return perr(ps, VDNN_ERR_PARSE, L->line, "layer '%s': groups=%d does not divide filters=%d", L->name,
                    p->groups, p->filters);
    if (kind == VDNN_LAYER_MAXPOOL || kind == VDNN_LAYER_AVGPOOL) {
        /* Pooling defaults to non-overlapping windows; only explicit stride keys override that. */
        if (!(seen & 8)) {
            p->stride_h = p->kernel_h;
            p->stride_w = p->kernel_w;
        }
        /* Larger padding would give windows that see nothing but padding. */
        if (2 * p->pad_h > p->kernel_h || 2 * p->pad_w > p->kernel_w)
            return perr(ps, VDNN_ERR_PARSE, L->line, "layer '%s': pad %dx%d is out of range (at most half the %dx%d window)",
                        L->name, p->pad_h, p->pad_w, p->kernel_h, p->kernel_w);
    }
    if (kind == VDNN_LAYER_CLIP && !(p->clip_lo < p->clip_hi))
        return perr(ps, VDNN_ERR_PARSE, L->line, "layer '%s': min=%g is not below max=%g", L->name,
                    (double)p->clip_lo, (double)p->clip_hi);
    g->n_layers++;
    return VDNN_OK;
}

static vdnn_status finish_section(parser *ps)
{
    vdnn_status st = VDNN_OK;
    if (ps->sec_line > 0) {
        if (ps->sec_is_net) {
            for (int i = 0; i < ps->n_kv && !st; i++) st = parse_net_key(ps, &ps->kvs[i]);
        } else {
            st = finish_layer(ps);
        }
    }
    ps->n_kv = 0;
    ps->sec_line = -1;
    return st;
}

static vdnn_status start_section(parser *ps, char *name, int line)
{
    vdnn_status st = finish_section(ps);
    if (st) return st;
    if (!strcmp(name, "net")) {
        if (ps->seen_net) return perr(ps, VDNN_ERR_PARSE, line, "duplicate [net] section");
        if (ps->g->n_layers > 1)
            return perr(ps, VDNN_ERR_PARSE, line, "[net] must come before the layers");
        ps->seen_net = ps->sec_is_net = true;
        ps->sec_line = line;
        return VDNN_OK;
    }
    if (!valid_name(name))
        return perr(ps, VDNN_ERR_PARSE, line, "bad layer name '%s' (use letters, digits, '_', '.' and '-')", name);
    if (strlen(name) >= VDNN_NAME_LEN)
        return perr(ps, VDNN_ERR_PARSE, line, "layer name '%s' is too long (at most %d characters)", name,
                    VDNN_NAME_LEN - 1);
    if (!strcmp(name, "data"))
        return perr(ps, VDNN_ERR_PARSE, line, "the name 'data' is reserved for the input");
    int prev = vdnn_graph_find(ps->g, name);
    if (prev >= 0)
        return perr(ps, VDNN_ERR_PARSE, line, "duplicate layer name '%s' (first defined at line %d)", name,
                    ps->g->layers[prev].line);
    ps->sec_is_net = false;
    ps->sec_name = name;
    ps->sec_line = line;
    return VDNN_OK;
}

static vdnn_status add_kv(parser *ps, char *key, char *val, int line)
{
    if (ps->sec_line < 0)
        return perr(ps, VDNN_ERR_PARSE, line, "'%s=' comes before any [section]", key);
    if (!*key) return perr(ps, VDNN_ERR_PARSE, line, "missing key before '='");
    if (!*val) return perr(ps, VDNN_ERR_PARSE, line, "%s= has no value", key);
    for (int i = 0; i < ps->n_kv; i++)
        if (!strcmp(ps->kvs[i].key, key))
            return perr(ps, VDNN_ERR_PARSE, line, "duplicate key '%s' (already set at line %d)", key,
                        ps->kvs[i].line);
    if (ps->n_kv == ps->cap_kv) {
        int cap = ps->cap_kv ? 2 * ps->cap_kv : 16;
        kv *k = realloc(ps->kvs, (size_t)cap * sizeof *k);
        if (!k) return vdnn_fail(ps->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", ps->src);
        ps->kvs = k;
        ps->cap_kv = cap;
    }
    ps->kvs[ps->n_kv++] = (kv){key, val, line};
    return VDNN_OK;
}

static vdnn_status read_lines(parser *ps, char *buf)
{
    int line = 0;
    char *next = buf;
    while (next && *next) {
        char *s = next;
        line++;
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        s[strcspn(s, "#;")] = '\0';
        s = trim(s);
        if (!*s) continue;
        vdnn_status st;
        if (*s == '[') {
            size_t n = strlen(s);
            if (s[n - 1] != ']' || n < 3)
                return perr(ps, VDNN_ERR_PARSE, line, "cannot parse '%s' (expected [name])", s);
            s[n - 1] = '\0';
            st = start_section(ps, trim(s + 1), line);
        } else {
            char *eq = strchr(s, '=');
            if (!eq)
                return perr(ps, VDNN_ERR_PARSE, line,
                            "cannot parse '%s' (expected [section], key=value, a comment or a blank line)", s);
            *eq = '\0';
            st = add_kv(ps, trim(s), trim(eq + 1), line);
        }
        if (st) return st;
    }
    vdnn_status st = finish_section(ps);
    if (st) return st;
    if (ps->g->n_layers < 2)
        return perr(ps, VDNN_ERR_PARSE, line > 0 ? line : 1, "no layers (a model needs at least a softmax layer)");
    return VDNN_OK;
}

/* Resolves input= names to indices of earlier layers; unset input= means the previous layer. */
static vdnn_status link_inputs(parser *ps, int idx)
{
    vdnn_graph_t *g = ps->g;
    vdnn_layer *L = &g->layers[idx];
    int line = ps->in_line[idx];
    char *spec = ps->in_spec[idx];
    bool multi = L->kind == VDNN_LAYER_CONCAT || L->kind == VDNN_LAYER_ADD;
    bool pair = L->kind == VDNN_LAYER_CHANNEL_MUL || L->kind == VDNN_LAYER_ATTN_MIX;
    const char *kname = vdnn_layer_kind_name(L->kind);
    if (!spec) {
        if (multi)
            return perr(ps, VDNN_ERR_PARSE, line, "%s layer '%s' needs input= with at least two layers", kname,
                        L->name);
        if (pair)
            return perr(ps, VDNN_ERR_PARSE, line, "%s layer '%s' needs input= with two layers (%s)", kname, L->name,
                        L->kind == VDNN_LAYER_ATTN_MIX ? "the attention probabilities, then qkv"
                                                       : "the maps, then the per-channel scales");
        L->n_inputs = 1;
        L->inputs[0] = idx - 1;
        return VDNN_OK;
    }
    L->n_inputs = 0;
    for (char *tok = spec, *comma; tok; tok = comma) {
        comma = strchr(tok, ',');
        if (comma) *comma++ = '\0';
        char *name = trim(tok);
        if (!*name) return perr(ps, VDNN_ERR_PARSE, line, "layer '%s': empty name in input=", L->name);
        int j = vdnn_graph_find(g, name);
        if (j < 0)
            return perr(ps, VDNN_ERR_PARSE, line, "layer '%s' refers to '%s', which is not defined anywhere",
                        L->name, name);
        if (j >= idx)
            return perr(ps, VDNN_ERR_PARSE, line,
                        "layer '%s' refers to '%s', which is not defined before it (model files must list "
                        "layers after their inputs; cycles are not allowed)",
                        L->name, name);
        for (int k = 0; k < L->n_inputs; k++)
            if (L->inputs[k] == j)
                return perr(ps, VDNN_ERR_PARSE, line, "layer '%s' lists input '%s' twice", L->name, name);
        if (L->n_inputs == VDNN_MAX_INPUTS)
            return perr(ps, VDNN_ERR_PARSE, line, "layer '%s' has more than %d inputs", L->name, VDNN_MAX_INPUTS);
        L->inputs[L->n_inputs++] = j;
    }
    if (multi && L->n_inputs < 2)
        return perr(ps, VDNN_ERR_PARSE, line, "%s layer '%s' needs at least two inputs, got 1", kname, L->name);
    if (pair && L->n_inputs != 2)
        return perr(ps, VDNN_ERR_PARSE, line, "%s layer '%s' takes exactly two inputs (%s), got %d", kname, L->name,
                    L->kind == VDNN_LAYER_ATTN_MIX ? "the attention probabilities, then qkv"
                                                   : "the maps, then the per-channel scales",
                    L->n_inputs);
    if (!multi && !pair && L->n_inputs != 1)
        return perr(ps, VDNN_ERR_PARSE, line, "%s layer '%s' takes exactly one input, got %d", kname, L->name,
                    L->n_inputs);
    return VDNN_OK;
}

/* Whole-graph rules: one softmax, last; every other layer feeds a later one. */
static vdnn_status check_graph(parser *ps)
{
    vdnn_graph_t *g = ps->g;
    for (int i = 1; i < g->n_layers; i++) {
        vdnn_status st = link_inputs(ps, i);
        if (st) return st;
    }
    /* Kept as read, for copies cut to another sequence length (vdnn_graph_with_steps). */
    g->file_layers = malloc(sizeof *g->layers * (size_t)g->n_layers);
    if (!g->file_layers) return vdnn_fail(ps->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", ps->src);
    memcpy(g->file_layers, g->layers, sizeof *g->layers * (size_t)g->n_layers);
    g->n_file_layers = g->n_layers;
    vdnn_status st = vdnn_graph_expand_lstm(g, ps->err);
    if (!st) st = vdnn_graph_expand_attention(g, ps->err);
    if (st) return st;
    vdnn_graph_count_consumers(g);
    int last = g->n_layers - 1;
    for (int i = 1; i < last; i++)
        if (g->layers[i].kind == VDNN_LAYER_SOFTMAX_XENT)
            return perr(ps, VDNN_ERR_PARSE, g->layers[i].line,
                        "softmax layer '%s' must be the last layer (a model has exactly one softmax)",
                        g->layers[i].name);
    if (g->layers[last].kind != VDNN_LAYER_SOFTMAX_XENT)
        return perr(ps, VDNN_ERR_PARSE, g->layers[last].line,
                    "the last layer '%s' (%s) is not a softmax; a model must end with a softmax layer (type=softmax)",
                    g->layers[last].name, vdnn_layer_kind_name(g->layers[last].kind));
    for (int i = 1; i < last; i++)
        if (!g->layers[i].n_consumers)
            return perr(ps, VDNN_ERR_PARSE, g->layers[i].line,
                        "layer '%s' is never used (every layer but the softmax must feed a later layer)",
                        g->layers[i].name);
    return VDNN_OK;
}

void vdnn_graph_name_from_source(vdnn_graph_t *g, const char *src)
{
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    size_t n = strcspn(base, ".");
    if (n == 0) n = strlen(base);
    if (n >= sizeof g->name) n = sizeof g->name - 1;
    memcpy(g->name, base, n);
    g->name[n] = '\0';
}

vdnn_status vdnn_graph_parse(const char *text, const char *source, vdnn_graph_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "graph_parse: no output pointer");
    *out = NULL;
    if (!source) source = "<model>";
    if (!text) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no model text", source);
    parser ps = {.src = source, .err = err, .sec_line = -1};
    char *buf = strdup(text);
    ps.g = calloc(1, sizeof *ps.g);
    vdnn_status st = (!buf || !ps.g) ? vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", source) : VDNN_OK;
    if (!st) st = grow_layers(&ps);
    if (!st) {
        vdnn_graph_t *g = ps.g;
        snprintf(g->source, sizeof g->source, "%s", source);
        ps.src = g->source;
        vdnn_layer *L0 = &g->layers[0];
        memset(L0, 0, sizeof *L0);
        strcpy(L0->name, "data");
        L0->kind = VDNN_LAYER_INPUT;
        g->n_layers = 1;
        st = read_lines(&ps, buf);
    }
    if (!st) st = check_graph(&ps);
    if (!st && !ps.g->name[0]) vdnn_graph_name_from_source(ps.g, source);
    free(buf);
    free(ps.kvs);
    free(ps.in_spec);
    free(ps.in_line);
    if (st) {
        vdnn_graph_free(ps.g);
        return st;
    }
    *out = ps.g;
    vdnn_error_clear(err);
    return VDNN_OK;
}

vdnn_status vdnn_graph_load(const char *path, vdnn_graph_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "graph_load: no output pointer");
    *out = NULL;
    if (!path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "graph_load: no path");
    size_t len = strlen(path);
    if (len > 5 && !strcmp(path + len - 5, ".onnx")) return vdnn_onnx_load(path, out, err);
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open model file: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    vdnn_status st = text ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", path);
    while (!st) {
        if (n + 1 >= cap) {
            char *t = cap > (64u << 20) ? NULL : realloc(text, cap * 2);
            if (!t) {
                st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: model file is too large (over 64 MiB)", path);
                break;
            }
            text = t;
            cap *= 2;
        }
        size_t got = fread(text + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) st = vdnn_fail(err, VDNN_ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (!st) {
        text[n] = '\0';
        if (strlen(text) != n) st = vdnn_fail(err, VDNN_ERR_PARSE, "%s: contains a NUL byte (not a text file)", path);
    }
    if (!st) st = vdnn_graph_parse(text, path, out, err);
    free(text);
    return st;
}
