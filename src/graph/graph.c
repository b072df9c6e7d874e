/* Layer kind names, lookup, freeing, and shape inference with parameter, consumer and FLOP counts. */
#include "graph/graph.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[VDNN_LAYER_KIND_COUNT] = {
    [VDNN_LAYER_INPUT] = "input",         [VDNN_LAYER_CONV] = "conv",
    [VDNN_LAYER_MAXPOOL] = "maxpool",     [VDNN_LAYER_AVGPOOL] = "avgpool",
    [VDNN_LAYER_RELU] = "relu",           [VDNN_LAYER_LRN] = "lrn",
    [VDNN_LAYER_BATCHNORM] = "batchnorm", [VDNN_LAYER_DROPOUT] = "dropout",
    [VDNN_LAYER_FC] = "fc",               [VDNN_LAYER_CONCAT] = "concat",
    [VDNN_LAYER_ADD] = "add",             [VDNN_LAYER_GAP] = "gap",
    [VDNN_LAYER_FLATTEN] = "flatten",     [VDNN_LAYER_SOFTMAX_XENT] = "softmax",
    [VDNN_LAYER_SIGMOID] = "sigmoid",     [VDNN_LAYER_HARDSIGMOID] = "hardsigmoid",
    [VDNN_LAYER_HARDSWISH] = "hardswish", [VDNN_LAYER_SILU] = "silu",
    [VDNN_LAYER_CLIP] = "clip",           [VDNN_LAYER_CHANNEL_MUL] = "channel_mul",
    [VDNN_LAYER_EMBED] = "embed",         [VDNN_LAYER_POS_EMBED] = "pos_embed",
    [VDNN_LAYER_LAYERNORM] = "layernorm", [VDNN_LAYER_LINEAR] = "linear",
    [VDNN_LAYER_ATTN_PROBS] = "attn_probs", [VDNN_LAYER_ATTN_MIX] = "attn_mix",
    [VDNN_LAYER_GELU] = "gelu",
    [VDNN_LAYER_LSTM] = "lstm",
    [VDNN_LAYER_SEQ_CAT] = "seq_cat", [VDNN_LAYER_FEAT_CAT] = "feat_cat",
    [VDNN_LAYER_ATTN] = "attention",
};

const char *vdnn_layer_kind_name(vdnn_layer_kind k)
{
    if ((unsigned)k >= VDNN_LAYER_KIND_COUNT) return "unknown";
    return kind_names[k];
}

int vdnn_graph_find(const vdnn_graph_t *g, const char *name)
{
    if (!g || !name) return -1;
    for (int i = 0; i < g->n_layers; i++)
        if (!strcmp(g->layers[i].name, name)) return i;
    return -1;
}

const vdnn_param_init *vdnn_graph_param_init(const vdnn_graph_t *g, const char *name)
{
    for (int i = 0; g && name && i < g->n_init; i++)
        if (!strcmp(g->init[i].name, name)) return &g->init[i];
    return NULL;
}

void vdnn_graph_free(vdnn_graph_t *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_init; i++) free(g->init[i].values);
    free(g->init);
    free(g->layers);
    free(g->file_layers);
    free(g);
}

void vdnn_graph_count_consumers(vdnn_graph_t *g)
{
    for (int i = 0; i < g->n_layers; i++) g->layers[i].n_consumers = 0;
    for (int i = 1; i < g->n_layers; i++)
        for (int k = 0; k < g->layers[i].n_inputs; k++) g->layers[g->layers[i].inputs[k]].n_consumers++;
}

vdnn_status vdnn_graph_clone(const vdnn_graph_t *g, vdnn_graph_t **out, vdnn_error *err)
{
    *out = NULL;
    vdnn_graph_t *c = malloc(sizeof *c);
    vdnn_layer *layers = malloc(sizeof *layers * (size_t)(g->n_layers ? g->n_layers : 1));
    if (!c || !layers) {
        free(c);
        free(layers);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory copying model %s", g->name);
    }
    *c = *g;
    memcpy(layers, g->layers, sizeof *layers * (size_t)g->n_layers);
    c->layers = layers;
    c->file_layers = NULL;
    if (g->file_layers && !(c->file_layers = malloc(sizeof *layers * (size_t)g->n_file_layers))) {
        c->init = NULL;
        c->n_init = 0;
        vdnn_graph_free(c);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory copying model %s", g->name);
    }
    if (g->file_layers) memcpy(c->file_layers, g->file_layers, sizeof *layers * (size_t)g->n_file_layers);
    /* The initial values (a model file's trained parameters) are owned by each copy. */
    c->init = NULL;
    c->n_init = 0;
    if (g->n_init) {
        c->init = calloc((size_t)g->n_init, sizeof *c->init);
        if (!c->init) {
            vdnn_graph_free(c);
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory copying model %s", g->name);
        }
        for (int i = 0; i < g->n_init; i++, c->n_init++) {
            c->init[i] = g->init[i];
            c->init[i].values = malloc(sizeof(float) * (g->init[i].count ? g->init[i].count : 1));
            if (!c->init[i].values) {
                vdnn_graph_free(c);
                return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory copying model %s", g->name);
            }
            memcpy(c->init[i].values, g->init[i].values, sizeof(float) * g->init[i].count);
        }
    }
    *out = c;
    return VDNN_OK;
}

vdnn_status vdnn_graph_resolved_copy(const vdnn_graph_t *g, vdnn_shape input, int classes, vdnn_graph_t **out,
                                     vdnn_error *err)
{
    vdnn_status rc = vdnn_graph_clone(g, out, err);
    if (rc == VDNN_OK) rc = vdnn_graph_resolve(*out, input, classes, err);
    if (rc != VDNN_OK) {
        vdnn_graph_free(*out);
        *out = NULL;
    }
    return rc;
}

/* Lstm owners (first chunks) at indices below l, or up to l inclusive. */
static int owners_before(const vdnn_graph_t *g, int l, bool inclusive)
{
    int n = 0;
    for (int i = 1; i < l + inclusive && i < g->n_layers; i++) n += vdnn_lstm_owner(&g->layers[i]);
    return n;
}

int vdnn_graph_seed_index(const vdnn_graph_t *g, int l, bool params)
{
    /* Each owner had its parameter node just before it; attention in head groups counts as before grouping. */
    const vdnn_layer *L = &g->layers[l];
    const bool owner = vdnn_lstm_owner(L);
    return (L->origin ? L->origin - 1 : l) + owners_before(g, l, true) - (params && owner);
}

void vdnn_layer_param_prefix(const vdnn_graph_t *g, int l, char *buf, size_t n)
{
    const vdnn_layer *L = &g->layers[l];
    if (L->kind != VDNN_LAYER_LSTM) {
        snprintf(buf, n, "%s", L->name);
        return;
    }
    /* "lstm1.t0" -> "lstm1.params" */
    const char *dot = strrchr(L->name, '.');
    const int len = dot ? (int)(dot - L->name) : (int)strlen(L->name);
    snprintf(buf, n, "%.*s.params", len, L->name);
}

/* The kind numbers the hash was made of while VDNN_LAYER_PARAMS (then after VDNN_LAYER_LSTM) existed. */
#define HASH_PARAMS_KIND ((int)VDNN_LAYER_LSTM + 1)
static int hash_kind(vdnn_layer_kind k) { return (int)k > (int)VDNN_LAYER_LSTM ? (int)k + 1 : (int)k; }

/* Whether feat_cat node l is an inner node of a tree of them (a later feat_cat reads it). */
static bool inner_cat(const vdnn_graph_t *g, int l)
{
    for (int c = l + 1; c < g->n_layers; c++)
        for (int i = 0; g->layers[c].kind == VDNN_LAYER_FEAT_CAT && i < g->layers[c].n_inputs; i++)
            if (g->layers[c].inputs[i] == l) return true;
    return false;
}

/* The first group's attn_mix under the feat_cat (tree) at l. */
static const vdnn_layer *first_group_mix(const vdnn_graph_t *g, int l)
{
    while (g->layers[l].kind == VDNN_LAYER_FEAT_CAT) l = g->layers[l].inputs[0];
    return &g->layers[l];
}

uint64_t vdnn_graph_hash(const vdnn_graph_t *g)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v)                                          \
    do {                                                \
        h ^= (uint64_t)(v);                             \
        h *= 1099511628211ULL;                          \
    } while (0)
    /* Hashed as the graph was when every lstm layer had a parameter node before its first chunk (holding the
     * parameters, read by every chunk as its input 1): the same model keeps its hash, so its checkpoints load. */
    /* Attention in head groups is hashed as the whole attention it computes (its first group's probabilities standing
     * for the layer, the root feat_cat for the attn_mix), so that checkpoints move between groupings. */
    for (int l = 0; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        const bool grouped = ly->p.head_count && (ly->kind == VDNN_LAYER_ATTN_PROBS || ly->kind == VDNN_LAYER_ATTN_MIX);
        if ((grouped && (ly->kind == VDNN_LAYER_ATTN_MIX || ly->p.head0)) ||
            (ly->kind == VDNN_LAYER_FEAT_CAT && inner_cat(g, l)))
            continue;
        if (grouped || ly->kind == VDNN_LAYER_FEAT_CAT) {
            const bool probs = grouped;
            const vdnn_layer *m = probs ? NULL : first_group_mix(g, l);
            const size_t name_len = probs ? strlen(ly->name) - 3 : strlen(ly->name); /* probs: less ".g0" */
            for (size_t c = 0; c < name_len; c++) MIX((unsigned char)ly->name[c]);
            MIX(hash_kind(probs ? VDNN_LAYER_ATTN_PROBS : VDNN_LAYER_ATTN_MIX));
            MIX(probs ? ly->p.heads : ly->out.c);
            MIX(ly->out.h);
            MIX(ly->out.w);
            MIX(0);
            MIX(0);
            MIX(0);
            if (probs) {
                MIX(vdnn_graph_seed_index(g, ly->inputs[0], false));
            } else {
                MIX(vdnn_graph_seed_index(g, m->inputs[0], false));
                MIX(vdnn_graph_seed_index(g, m->inputs[1], false));
            }
            continue;
        }
        if (ly->kind == VDNN_LAYER_ATTN && ly->fused_probs[0]) {
            /* Fused attention hashes as the attn_probs and attn_mix it stands for. */
            const int qkv = vdnn_graph_seed_index(g, ly->inputs[0], false);
            for (const char *c = ly->fused_probs; *c; c++) MIX((unsigned char)*c);
            MIX(hash_kind(VDNN_LAYER_ATTN_PROBS));
            MIX(ly->p.heads);
            MIX(ly->out.h);
            MIX(ly->out.h);
            MIX(0);
            MIX(0);
            MIX(0);
            MIX(qkv);
            for (const char *c = ly->name; *c; c++) MIX((unsigned char)*c);
            MIX(hash_kind(VDNN_LAYER_ATTN_MIX));
            MIX(ly->out.c);
            MIX(ly->out.h);
            MIX(ly->out.w);
            MIX(0);
            MIX(0);
            MIX(0);
            MIX(ly->fused_probs_origin - 1 + owners_before(g, l, true));
            MIX(qkv);
            continue;
        }
        const bool lstm = ly->kind == VDNN_LAYER_LSTM;
        const int owner = !lstm ? 0 : ly->p.tie ? ly->p.tie : l;
        if (lstm && owner == l) {
            char pre[VDNN_NAME_LEN + 16];
            vdnn_layer_param_prefix(g, l, pre, sizeof pre);
            for (const char *c = pre; *c; c++) MIX((unsigned char)*c);
            MIX(HASH_PARAMS_KIND);
            MIX(1);
            MIX(1);
            MIX(ly->n_weight + ly->n_bias);
            MIX(ly->n_weight);
            MIX(ly->n_bias);
            MIX(0);
            MIX(0); /* its input, the data */
        }
        for (const char *c = ly->name; *c; c++) MIX((unsigned char)*c);
        MIX(hash_kind(ly->kind));
        MIX(ly->out.c);
        MIX(ly->out.h);
        MIX(ly->out.w);
        MIX(lstm ? 0 : ly->n_weight);
        MIX(lstm ? 0 : ly->n_bias);
        MIX(ly->n_stats);
        if (ly->p.tie && !lstm) MIX(vdnn_graph_seed_index(g, ly->p.tie, false)); /* only where tied: the hashes of other models stay as they were */
        for (int i = 0; i < ly->n_inputs; i++) {
            MIX(vdnn_graph_seed_index(g, ly->inputs[i], false));
            if (lstm && i == 0) MIX(vdnn_graph_seed_index(g, owner, true));
        }
    }
#undef MIX
    return h;
}

/* A shape error at a layer: "file:line: layer 'x': ...". */
VDNN_PRINTF(4, 5)
static vdnn_status layer_fail(const vdnn_graph_t *g, const vdnn_layer *L, vdnn_error *err, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return vdnn_fail(err, VDNN_ERR_SHAPE, "%s:%d: layer '%s': %s", g->source, L->line, L->name, what);
}

/* Overflow-checked product; sizes come from user files, so wrapping must be an error, not a surprise. */
static bool mul_ok(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

/* Per-sample element counts are kept within int so every dimension and c*h*w stays an int. */
static bool shape_ok(vdnn_shape s)
{
    return s.n >= 1 && s.c >= 1 && s.h >= 1 && s.w >= 1 &&
           (long long)s.c * s.h * s.w <= INT_MAX;
}

int vdnn_window_out(int in, int k, int stride, int pad, bool ceil_mode)
{
    long span = (long)in + 2L * pad - k;
    if (span < 0 || stride < 1) return 0;
    long out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    /* PyTorch's rule: with ceil_mode, no window may start in the right padding. */
    if (ceil_mode && (out - 1) * stride >= (long)in + pad) out--;
    return (int)out;
}

void vdnn_window_span(int o, int in, int k, int stride, int pad, int *lo, int *hi, int *size)
{
    int start = o * stride - pad, end = start + k < in + pad ? start + k : in + pad;
    *size = end - start;
    *lo = start > 0 ? start : 0;
    *hi = end < in ? end : in;
}

static vdnn_status window_out(const vdnn_graph_t *g, const vdnn_layer *L, vdnn_shape in, vdnn_shape *out,
                              vdnn_error *err)
{
    const vdnn_layer_params *p = &L->p;
    long ph = (long)in.h + 2L * p->pad_h, pw = (long)in.w + 2L * p->pad_w;
    if (ph < p->kernel_h || pw < p->kernel_w) {
        if (p->pad_h || p->pad_w)
            return layer_fail(g, L, err, "input %dx%d (padded to %ldx%ld) is smaller than the %dx%d window",
                              in.h, in.w, ph, pw, p->kernel_h, p->kernel_w);
        return layer_fail(g, L, err, "input %dx%d is smaller than the %dx%d window", in.h, in.w, p->kernel_h,
                          p->kernel_w);
    }
    out->n = in.n;
    out->h = vdnn_window_out(in.h, p->kernel_h, p->stride_h, p->pad_h, p->ceil_mode);
    out->w = vdnn_window_out(in.w, p->kernel_w, p->stride_w, p->pad_w, p->ceil_mode);
    return VDNN_OK;
}

static const char *shape_str(vdnn_shape s, char *buf, size_t len)
{
    snprintf(buf, len, "%dx%dx%d", s.c, s.h, s.w);
    return buf;
}

/* Output shape, parameter counts and FLOPs of one layer whose inputs are already resolved. */
static vdnn_status resolve_layer(vdnn_graph_t *g, int idx, vdnn_error *err)
{
    vdnn_layer *L = &g->layers[idx];
    vdnn_layer_params *p = &L->p;
    vdnn_shape in = g->layers[L->inputs[0]].out;
    vdnn_shape out = in;
    size_t in_count = vdnn_shape_count(in);
    char a[64], b[64];

    L->n_weight = L->n_bias = L->n_stats = 0;
    L->flops_fwd = L->flops_bwd = 0;

    switch (L->kind) {
    case VDNN_LAYER_INPUT:
        return layer_fail(g, L, err, "the input layer can only be layer 0");
    case VDNN_LAYER_CONV: {
        if (in.c % p->groups)
            return layer_fail(g, L, err, "groups=%d does not divide the %d input channels", p->groups, in.c);
        vdnn_status st = window_out(g, L, in, &out, err);
        if (st) return st;
        out.c = p->filters;
        size_t per_filter;
        if (!mul_ok((size_t)(in.c / p->groups), (size_t)p->kernel_h * (size_t)p->kernel_w, &per_filter) ||
            !mul_ok(per_filter, (size_t)p->filters, &L->n_weight))
            return layer_fail(g, L, err, "the weight count overflows");
        L->n_bias = p->bias ? (size_t)p->filters : 0;
        double macs = (double)out.n * out.c * out.h * out.w * (double)per_filter;
        L->flops_fwd = 2.0 * macs;
        /* Data and weight gradients each cost about one forward pass. */
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    }
    case VDNN_LAYER_MAXPOOL:
    case VDNN_LAYER_AVGPOOL: {
        vdnn_status st = window_out(g, L, in, &out, err);
        if (st) return st;
        double win = (double)p->kernel_h * p->kernel_w;
        L->flops_fwd = (double)out.n * out.c * out.h * out.w * win;
        L->flops_bwd = L->flops_fwd;
        break;
    }
    case VDNN_LAYER_RELU:
    case VDNN_LAYER_DROPOUT:
        L->flops_fwd = L->flops_bwd = (double)in_count;
        break;
    case VDNN_LAYER_LRN:
        /* A window sum of squares, then a power and a product per element. */
        L->flops_fwd = (double)in_count * (2.0 * p->lrn_size + 3.0);
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    case VDNN_LAYER_BATCHNORM:
        L->n_weight = L->n_bias = (size_t)in.c;
        L->n_stats = 2 * (size_t)in.c;
        /* Mean, variance, normalise, scale and shift; backward about twice that. */
        L->flops_fwd = 5.0 * (double)in_count;
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    case VDNN_LAYER_FC: {
        size_t features = (size_t)in.c * (size_t)in.h * (size_t)in.w;
        p->filters = p->outputs_are_classes ? g->classes : p->filters;
        if (!mul_ok(features, (size_t)p->filters, &L->n_weight))
            return layer_fail(g, L, err, "fc input of %zu features times %d outputs overflows", features,
                              p->filters);
        L->n_bias = p->bias ? (size_t)p->filters : 0;
        out.c = p->filters;
        out.h = out.w = 1;
        L->flops_fwd = 2.0 * (double)in.n * (double)L->n_weight;
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    }
    case VDNN_LAYER_CONCAT: {
        long long c = 0;
        for (int k = 0; k < L->n_inputs; k++) {
            const vdnn_layer *src = &g->layers[L->inputs[k]];
            if (src->out.h != in.h || src->out.w != in.w)
                return layer_fail(g, L, err, "concat inputs differ in height/width: '%s' is %s but '%s' is %s",
                                  g->layers[L->inputs[0]].name, shape_str(in, a, sizeof a), src->name,
                                  shape_str(src->out, b, sizeof b));
            c += src->out.c;
        }
        if (c > INT_MAX) return layer_fail(g, L, err, "concat has too many channels");
        out.c = (int)c;
        break;
    }
    case VDNN_LAYER_ADD:
        for (int k = 1; k < L->n_inputs; k++) {
            const vdnn_layer *src = &g->layers[L->inputs[k]];
            if (src->out.c != in.c || src->out.h != in.h || src->out.w != in.w)
                return layer_fail(g, L, err, "add inputs have different shapes: '%s' is %s but '%s' is %s",
                                  g->layers[L->inputs[0]].name, shape_str(in, a, sizeof a), src->name,
                                  shape_str(src->out, b, sizeof b));
        }
        L->flops_fwd = (double)(L->n_inputs - 1) * (double)in_count;
        break;
    case VDNN_LAYER_GAP:
        out.h = out.w = 1;
        L->flops_fwd = L->flops_bwd = (double)in_count;
        break;
    case VDNN_LAYER_FLATTEN:
        out.c = in.c * in.h * in.w; /* fits: shape_ok holds for the input */
        out.h = out.w = 1;
        break;
    case VDNN_LAYER_SIGMOID:
    case VDNN_LAYER_HARDSIGMOID:
    case VDNN_LAYER_HARDSWISH:
    case VDNN_LAYER_SILU:
    case VDNN_LAYER_CLIP: {
        /* Operations per element, forward and backward (exp and division count as one). */
        static const double per[][2] = {[VDNN_LAYER_SIGMOID] = {3, 3}, [VDNN_LAYER_HARDSIGMOID] = {4, 3},
                                        [VDNN_LAYER_HARDSWISH] = {5, 5}, [VDNN_LAYER_SILU] = {4, 6},
                                        [VDNN_LAYER_CLIP] = {2, 2}};
        L->flops_fwd = per[L->kind][0] * (double)in_count;
        L->flops_bwd = per[L->kind][1] * (double)in_count;
        break;
    }
    case VDNN_LAYER_CHANNEL_MUL: {
        const vdnn_layer *s = &g->layers[L->inputs[1]];
        if (s->out.c != in.c || s->out.h != 1 || s->out.w != 1)
            return layer_fail(g, L, err, "channel_mul scales '%s' (%s) by '%s', which is %s: expected %dx1x1 (one "
                              "value per channel)", g->layers[L->inputs[0]].name, shape_str(in, a, sizeof a), s->name,
                              shape_str(s->out, b, sizeof b), in.c);
        /* Backward: dx = dy * s, and ds sums dy * x over each plane. */
        L->flops_fwd = (double)in_count;
        L->flops_bwd = 3.0 * (double)in_count;
        break;
    }
    case VDNN_LAYER_EMBED:
        /* Token ids, one per position: the data {B, 1, T, 1}. */
        if (in.c != 1 || in.w != 1)
            return layer_fail(g, L, err, "embed reads token ids shaped 1xTx1 (the data of a sequence model, "
                              "input=1xTx1), got %s", shape_str(in, a, sizeof a));
        p->vocab = p->model_vocab ? p->model_vocab : g->classes;
        if (p->vocab < 1) return layer_fail(g, L, err, "embed needs the vocabulary size ([net] classes=)");
        out.w = p->filters;
        L->n_weight = (size_t)p->vocab * (size_t)p->filters;
        /* A copy per token forward; backward adds each token's gradient into its row. */
        L->flops_fwd = (double)vdnn_shape_count((vdnn_shape){in.n, 1, in.h, p->filters});
        L->flops_bwd = L->flops_fwd;
        break;
    case VDNN_LAYER_POS_EMBED:
        if (in.c != 1)
            return layer_fail(g, L, err, "pos_embed reads a sequence 1xTxF, got %s", shape_str(in, a, sizeof a));
        if (in.h > p->context)
            return layer_fail(g, L, err, "sequence of %d tokens is longer than its context=%d", in.h, p->context);
        L->n_weight = (size_t)p->context * (size_t)in.w;
        L->flops_fwd = (double)in_count;
        L->flops_bwd = (double)in_count;
        break;
    case VDNN_LAYER_LAYERNORM:
        L->n_weight = L->n_bias = (size_t)in.w;
        /* Mean, variance, normalise, scale and shift per element; backward about twice that. */
        L->flops_fwd = 5.0 * (double)in_count;
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    case VDNN_LAYER_LINEAR: {
        p->filters = p->outputs_are_classes ? g->classes : p->filters;
        if (!mul_ok((size_t)in.w, (size_t)p->filters, &L->n_weight))
            return layer_fail(g, L, err, "linear of %d features times %d outputs overflows", in.w, p->filters);
        L->n_bias = p->bias ? (size_t)p->filters : 0;
        out.w = p->filters;
        double rows = (double)in_count / in.w;
        L->flops_fwd = 2.0 * rows * (double)L->n_weight;
        L->flops_bwd = 2.0 * L->flops_fwd;
        if (p->tie) {
            /* The embed's table, vocabulary x width, is this layer's weight, outputs x inputs: one parameter. */
            const vdnn_layer *E = &g->layers[p->tie];
            if (p->filters != E->p.vocab || in.w != E->p.filters)
                return layer_fail(g, L, err, "tie=%s: its table is %d x %d (vocabulary x width), this linear's weight "
                                  "is %d x %d (outputs x inputs)", E->name, E->p.vocab, E->p.filters, p->filters, in.w);
            L->n_weight = 0;
        }
        break;
    }
    case VDNN_LAYER_ATTN_PROBS: {
        const int hn = p->head_count ? p->head_count : p->heads;
        if (p->heads < 1 || in.c != 1 || in.w % 3 || (in.w / 3) % p->heads)
            return layer_fail(g, L, err, "attn_probs reads q, k and v side by side (1xTx3F with F a multiple of "
                              "heads=%d), got %s", p->heads, shape_str(in, a, sizeof a));
        if (hn < 1 || p->head0 < 0 || p->head0 > p->heads - hn)
            return layer_fail(g, L, err, "attn_probs: heads %d to %d of %d", p->head0, p->head0 + hn - 1, p->heads);
        out.c = hn;
        out.w = in.h;
        /* Q K^T over the causal half (counted whole: the GEMMs run whole), then the softmax; a group of heads
         * reads a share of the width. */
        double f = (double)(in.w / 3) * hn / p->heads, t = in.h;
        L->flops_fwd = 2.0 * in.n * t * t * f + 5.0 * in.n * hn * t * t;
        L->flops_bwd = 4.0 * in.n * t * t * f + 5.0 * in.n * hn * t * t;
        break;
    }
    case VDNN_LAYER_ATTN_MIX: {
        const vdnn_layer *q = &g->layers[L->inputs[1]];
        const int heads = p->heads ? p->heads : in.c;
        if (in.c < 1 || in.h != in.w || q->out.c != 1 || q->out.h != in.h || q->out.w % 3 ||
            (q->out.w / 3) % heads || p->head0 < 0 || p->head0 > heads - in.c)
            return layer_fail(g, L, err, "attn_mix reads probabilities HxTxT then qkv 1xTx3F (F a multiple of H), "
                              "got %s and %s", shape_str(in, a, sizeof a), shape_str(q->out, b, sizeof b));
        out = q->out;
        out.w = q->out.w / 3 / heads * in.c;
        double f = out.w, t = in.h;
        L->flops_fwd = 2.0 * in.n * t * t * f;
        L->flops_bwd = 2.0 * L->flops_fwd;
        break;
    }
    case VDNN_LAYER_ATTN: {
        if (p->heads < 1 || in.c != 1 || in.w % 3 || (in.w / 3) % p->heads)
            return layer_fail(g, L, err, "attention reads q, k and v side by side (1xTx3F with F a multiple of "
                              "heads=%d), got %s", p->heads, shape_str(in, a, sizeof a));
        out.w = in.w / 3;
        /* The causal pairs alone (a block of query rows meets only the keys up to its last row): forward the
         * scores, the softmax and P V; backward the scores and probabilities again, dP, dS and dQ, dK, dV. */
        const double pairs = (double)in.n * in.h * (in.h + 1) / 2, f = out.w;
        L->flops_fwd = 4.0 * pairs * f + 5.0 * pairs * p->heads;
        L->flops_bwd = 10.0 * pairs * f + 8.0 * pairs * p->heads;
        break;
    }
    case VDNN_LAYER_GELU:
        /* tanh, a cube and a few products per element. */
        L->flops_fwd = 8.0 * (double)in_count;
        L->flops_bwd = 12.0 * (double)in_count;
        break;
    case VDNN_LAYER_LSTM: {
        const vdnn_layer *x = &g->layers[L->inputs[0]];
        const int pw = vdnn_lstm_h_width(p), hh = p->filters;
        int steps = in.h;
        if (in.c != 1) return layer_fail(g, L, err, "lstm reads a sequence 1xTxF, got %s", shape_str(in, a, sizeof a));
        if (x->kind == VDNN_LAYER_LSTM) {
            p->lstm_in = vdnn_lstm_h_width(&x->p);
            p->step0 = 0;
        } else {
            p->lstm_in = in.w;
            if (p->n_chunks > 1) {
                const int k = p->chunk, n = p->n_chunks;
                const int last = in.h - (n - 1) * k;
                if (last < 1 || last > k)
                    return layer_fail(g, L, err, "a sequence of %d steps does not fill %d chunks of chunk=%d steps "
                                      "(this model takes %d to %d steps; vdnn_model_with_steps cuts it for others, as --seq-len does)", in.h, n, k, (n - 1) * k + 1, n * k);
                steps = p->chunk_index < n - 1 ? k : last;
                p->step0 = p->chunk_index * k;
            }
        }
        /* PyTorch's nn.LSTM layout: weight_ih 4H x In, weight_hh 4H x P, weight_hr P x H, then bias_ih, bias_hh; on
         * chunk 0 only, the later chunks read them by reference. */
        const vdnn_layer *o = p->tie ? &g->layers[p->tie] : NULL;
        if (o && (o->kind != VDNN_LAYER_LSTM || o->p.lstm_in != p->lstm_in || o->p.filters != p->filters ||
                  o->p.proj != p->proj))
            return layer_fail(g, L, err, "lstm's parameters (of '%s') are for %d input features, its input has %d",
                              o->name, o->p.lstm_in, p->lstm_in);
        if (!o) {
            vdnn_lstm_param_counts(p, &L->n_weight, &L->n_bias);
            if (L->n_weight + L->n_bias > (size_t)INT_MAX) return layer_fail(g, L, err, "the lstm's parameters overflow");
        }
        if (L->n_inputs > 1) {
            const vdnn_shape s = g->layers[L->inputs[1]].out;
            if (s.n != in.n || s.w != pw + hh)
                return layer_fail(g, L, err, "the previous chunk is %s, expected rows of %d (h then c)",
                                  shape_str(s, a, sizeof a), pw + hh);
        }
        out = (vdnn_shape){in.n, 1, steps, pw + hh};
        /* Per step: the input and recurrent GEMMs, the projection, and about ten operations per cell value. */
        const double rows = (double)in.n * steps;
        const double gemm = 2.0 * rows * 4.0 * hh * (p->lstm_in + pw) + (p->proj ? 2.0 * rows * hh * pw : 0.0);
        L->flops_fwd = gemm + 10.0 * rows * hh;
        L->flops_bwd = 2.0 * gemm + 20.0 * rows * hh;
        break;
    }
    case VDNN_LAYER_SEQ_CAT: {
        long long t = 0;
        for (int k = 0; k < L->n_inputs; k++) {
            const vdnn_shape s = g->layers[L->inputs[k]].out;
            if (s.n != in.n || s.c != 1 || s.w < p->filters)
                return layer_fail(g, L, err, "seq_cat input '%s' is %s, expected 1xTx%d or wider",
                                  g->layers[L->inputs[k]].name, shape_str(s, a, sizeof a), p->filters);
            t += s.h;
        }
        if (t > INT_MAX) return layer_fail(g, L, err, "seq_cat's sequence is too long");
        out = (vdnn_shape){in.n, 1, (int)t, p->filters};
        L->flops_fwd = L->flops_bwd = (double)vdnn_shape_count(out);
        break;
    }
    case VDNN_LAYER_FEAT_CAT: {
        long long w = 0;
        for (int k = 0; k < L->n_inputs; k++) {
            const vdnn_shape s = g->layers[L->inputs[k]].out;
            if (s.n != in.n || s.c != in.c || s.h != in.h)
                return layer_fail(g, L, err, "feat_cat input '%s' is %s, expected %dx%dx%d rows like its first",
                                  g->layers[L->inputs[k]].name, shape_str(s, a, sizeof a), in.n, in.c, in.h);
            w += s.w;
        }
        if (w > INT_MAX) return layer_fail(g, L, err, "feat_cat's rows are too wide");
        out.w = (int)w;
        L->flops_fwd = L->flops_bwd = (double)vdnn_shape_count(out);
        break;
    }
    case VDNN_LAYER_SOFTMAX_XENT:
        if (in.h == 1 && in.w == 1 ? in.c != g->classes : in.c != 1 || in.w != g->classes)
            return layer_fail(g, L, err, "softmax input is %s, expected %dx1x1 (images) or 1xTx%d (sequences) "
                              "for %d classes", shape_str(in, a, sizeof a), g->classes, g->classes, g->classes);
        /* exp, sum, divide and log per element; the gradient is p - onehot. */
        L->flops_fwd = 4.0 * (double)in_count;
        L->flops_bwd = (double)in_count;
        break;
    default:
        return layer_fail(g, L, err, "unknown layer kind %d", (int)L->kind);
    }
    if (!shape_ok(out))
        return layer_fail(g, L, err, "output %s is empty or too large", shape_str(out, a, sizeof a));
    L->out = out;
    return VDNN_OK;
}

vdnn_status vdnn_graph_resolve(vdnn_graph_t *g, vdnn_shape input, int classes, vdnn_error *err)
{
    if (!g || g->n_layers < 2) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "resolve: empty graph");
    g->resolved = false;
    if (input.c == 0 && input.h == 0 && input.w == 0) {
        if (g->default_input.c < 1)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "%s: no input size given and the model has no [net] input=CxHxW", g->source);
        input.c = g->default_input.c;
        input.h = g->default_input.h;
        input.w = g->default_input.w;
    }
    if (input.n < 1 || input.n > VDNN_MAX_BATCH)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch: %d is out of range (1 to %d)", input.n, VDNN_MAX_BATCH);
    if (!shape_ok(input) || input.c > VDNN_MAX_SIDE || input.h > VDNN_MAX_SIDE || input.w > VDNN_MAX_SIDE)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "input: %dx%dx%d is out of range (each of C, H and W 1 to %d, C*H*W at most %d)", input.c,
                         input.h, input.w, VDNN_MAX_SIDE, INT_MAX);
    if (classes < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "class count %d is negative", classes);
    /* Classes come from the caller, else [net] classes=, else (0 here) the width of what the
     * softmax reads, so a file with only explicit fc sizes needs no class count. */
    g->classes = classes > 0 ? classes : g->default_classes;
    for (int i = 1; i < g->n_layers && g->classes < 1; i++)
        if (g->layers[i].kind == VDNN_LAYER_FC && g->layers[i].p.outputs_are_classes)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "%s:%d: layer '%s' has outputs=classes but no class count was given "
                             "(set [net] classes= or pass one)",
                             g->source, g->layers[i].line, g->layers[i].name);
    g->input = input;

    for (int i = 0; i < g->n_layers; i++) g->layers[i].n_consumers = 0;
    vdnn_layer *L0 = &g->layers[0];
    L0->out = input;
    L0->n_weight = L0->n_bias = L0->n_stats = 0;
    L0->flops_fwd = L0->flops_bwd = 0;
    for (int i = 1; i < g->n_layers; i++) {
        vdnn_layer *L = &g->layers[i];
        for (int k = 0; k < L->n_inputs; k++) g->layers[L->inputs[k]].n_consumers++;
        if (L->kind == VDNN_LAYER_SOFTMAX_XENT && g->classes < 1) {
            const vdnn_shape x = g->layers[L->inputs[0]].out;
            g->classes = x.h == 1 && x.w == 1 ? x.c : x.w;
        }
        vdnn_status st = resolve_layer(g, i, err);
        if (st) return st;
    }
    g->resolved = true;
    return VDNN_OK;
}
