/* Expands a model file's lstm layers into graph nodes: one node per chunk of time steps, sharing one parameter set
 * by reference, and a gather of their outputs, so that plans keep, swap or recompute an LSTM's state chunk by chunk. */
#include "graph/graph_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vdnn_status expand_fail(const vdnn_graph_t *g, const vdnn_layer *L, vdnn_error *err, const char *what)
{
    return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: lstm layer '%s': %s", g->source, L->line, L->name, what);
}

/* Chunks of an lstm layer over a sequence of t steps: a file's chunk=K, 0 or K >= t meaning one node. */
static int chunk_count(const vdnn_layer *L, int t)
{
    const int k = L->p.chunk;
    return k <= 0 || k >= t ? 1 : (t + k - 1) / k;
}

/* Whether lstm layer c reads lstm layer i chunk by chunk (same chunking) rather than through its gather. */
static bool per_chunk(const vdnn_graph_t *g, int i, int c, int t)
{
    const vdnn_layer *a = &g->layers[i], *b = &g->layers[c];
    return a->kind == VDNN_LAYER_LSTM && b->kind == VDNN_LAYER_LSTM && b->inputs[0] == i &&
           chunk_count(a, t) == chunk_count(b, t) && (chunk_count(a, t) == 1 || a->p.chunk == b->p.chunk);
}

/* Gathers the h columns of the n nodes ids[] along time (graph_build.h's join: a tree of seq_cat nodes, the last one
 * named `name`). Returns its index, -1 when out of memory. */
static int gather(vdnn_graph_builder *b, const vdnn_layer *lstm, const int *ids, int n, const char *name)
{
    vdnn_layer_params p = lstm->p;
    p.filters = vdnn_lstm_h_width(&lstm->p);
    return vdnn_graph_builder_join(b, lstm, ids, n, name, VDNN_LAYER_SEQ_CAT, &p);
}

/* The expansion's state: the layers built so far, and per layer of the file where its output is now. */
typedef struct expander {
    vdnn_graph_t *g;
    vdnn_error *err;
    vdnn_graph_builder b;
    int t;          /* the file's sequence length */
    int *outmap;    /* file layer -> the node holding its output (an lstm's gather; -1 where nothing reads it whole) */
    int **chunks;   /* file lstm layer -> its chunk nodes */
    int group[64];  /* a stack of lstm layers, each read chunk by chunk by the next, not yet emitted */
    int m;
} expander;

static vdnn_status oom(expander *x) { return vdnn_fail(x->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", x->g->source); }

/* Whether something other than the next lstm's chunks reads file layer i: it then needs its gather. */
static bool gather_needed(const expander *x, int i)
{
    const vdnn_graph_t *g = x->g;
    for (int c = i + 1; c < g->n_layers; c++)
        for (int k = 0; k < g->layers[c].n_inputs; k++)
            if (g->layers[c].inputs[k] == i && !per_chunk(g, i, c, x->t)) return true;
    return false;
}

/* Emits the pending stack chunk by chunk: chunk k of every layer before chunk k+1 of any, so that backward, which
 * runs in reverse, consumes each chunk's gradient soon after it is made (a layer's whole sequence of chunk gradients
 * is never alive at once). A gathered layer's gather is cut into groups of about sqrt(n) chunks, each emitted after
 * its last chunk for the same reason. */
static vdnn_status flush(expander *x)
{
    vdnn_graph_t *g = x->g;
    const int m = x->m;
    x->m = 0;
    if (!m) return VDNN_OK;
    const vdnn_layer *first = &g->layers[x->group[0]];
    const int n = chunk_count(first, x->t);
    int *cats[64] = {0}, n_cats[64] = {0};
    bool needed[64];
    int gsz = 1;
    while (gsz * gsz < n) gsz++;
    while ((n + gsz - 1) / gsz > VDNN_MAX_INPUTS) gsz++;
    vdnn_status st = VDNN_OK;
    for (int j = 0; j < m && !st; j++) {
        const vdnn_layer *L = &g->layers[x->group[j]];
        if (L->p.chunk > 0 && g->default_input.c < 1)
            st = expand_fail(g, L, x->err, "needs the sequence length ([net] input=1xTx1) to cut it into chunks");
        else if (strlen(L->name) + 16 > VDNN_NAME_LEN)
            st = expand_fail(g, L, x->err, "the name is too long for its chunk nodes (at most 47 characters)");
        else if (n > 4096)
            st = expand_fail(g, L, x->err, "chunk= gives too many chunks (at most 4096)");
        else if (!(x->chunks[x->group[j]] = calloc((size_t)n, sizeof(int))) ||
                 !(cats[j] = calloc((size_t)n, sizeof(int))))
            st = oom(x);
        needed[j] = gather_needed(x, x->group[j]);
    }
    char name[VDNN_NAME_LEN + 16];
    for (int k = 0; k < n && !st; k++)
        for (int j = 0; j < m && !st; j++) {
            const int li = x->group[j];
            const vdnn_layer *L = &g->layers[li];
            const int src = L->inputs[0], k_steps = n == 1 ? 0 : L->p.chunk;
            /* The stack's first layer reads an earlier stack's chunks or a whole sequence; the others the layer
             * below. */
            const bool from_chunks = j > 0 || (x->chunks[src] && per_chunk(g, src, li, x->t));
            snprintf(name, sizeof name, "%s.t%d", L->name, k);
            const int at = vdnn_graph_builder_emit(&x->b, L, name, VDNN_LAYER_LSTM);
            if (at < 0) {
                st = oom(x);
                break;
            }
            vdnn_layer *N = &x->b.out[at];
            N->p.chunk = k_steps;
            N->p.chunk_index = k;
            N->p.n_chunks = n;
            N->p.step0 = from_chunks ? 0 : k * k_steps;
            N->inputs[N->n_inputs++] = from_chunks ? x->chunks[src][k] : x->outmap[src];
            /* Chunk 0 owns the layer's parameters, the others read them by reference (graph.h's tie). */
            if (k > 0) {
                N->inputs[N->n_inputs++] = x->chunks[li][k - 1];
                N->p.tie = x->chunks[li][0];
                x->b.out[x->chunks[li][0]].p.tied_by = at;
            }
            x->chunks[li][k] = at;
            if (needed[j] && n > VDNN_MAX_INPUTS && ((k + 1) % gsz == 0 || k == n - 1)) {
                const int len = k % gsz + 1;
                snprintf(name, sizeof name, "%s.cat%d", L->name, n_cats[j]);
                if ((cats[j][n_cats[j]++] = gather(&x->b, L, x->chunks[li] + k + 1 - len, len, name)) < 0)
                    st = oom(x);
            }
        }
    for (int j = 0; j < m && !st; j++) {
        const int li = x->group[j];
        const vdnn_layer *L = &g->layers[li];
        x->outmap[li] = -1;
        if (!needed[j]) continue;
        const bool tree = n > VDNN_MAX_INPUTS;
        if ((x->outmap[li] = gather(&x->b, L, tree ? cats[j] : x->chunks[li], tree ? n_cats[j] : n, L->name)) < 0)
            st = oom(x);
    }
    for (int j = 0; j < m; j++) free(cats[j]);
    return st;
}

vdnn_status vdnn_graph_expand_lstm(vdnn_graph_t *g, vdnn_error *err)
{
    bool any = false;
    for (int i = 1; i < g->n_layers; i++) any |= g->layers[i].kind == VDNN_LAYER_LSTM;
    if (!any) return VDNN_OK;
    const int n_old = g->n_layers;
    expander x = {.g = g, .err = err, .t = g->default_input.h};
    x.outmap = calloc((size_t)n_old, sizeof *x.outmap);
    x.chunks = calloc((size_t)n_old, sizeof *x.chunks);
    vdnn_status st = x.outmap && x.chunks ? VDNN_OK : oom(&x);
    for (int i = 0; i < n_old && !st; i++) {
        const vdnn_layer *L = &g->layers[i];
        if (L->kind == VDNN_LAYER_LSTM) {
            const bool stacks = x.m > 0 && x.m < 64 && x.group[x.m - 1] == L->inputs[0] &&
                                per_chunk(g, L->inputs[0], i, x.t) && !gather_needed(&x, L->inputs[0]);
            if (!stacks) st = flush(&x);
            x.group[x.m++] = i;
            continue;
        }
        if ((st = flush(&x))) break;
        const int at = vdnn_graph_builder_emit(&x.b, L, L->name, L->kind);
        if (at < 0) {
            st = oom(&x);
            break;
        }
        vdnn_layer *N = &x.b.out[at];
        N->n_inputs = L->n_inputs;
        for (int k = 0; k < L->n_inputs; k++) N->inputs[k] = x.outmap[L->inputs[k]];
        /* A tied linear's table (an earlier embed, never an lstm) moves with the renumbering. */
        N->p.tied_by = 0;
        if (N->p.tie) {
            N->p.tie = x.outmap[N->p.tie];
            x.b.out[N->p.tie].p.tied_by = at;
        }
        x.outmap[i] = at;
    }
    if (!st) st = flush(&x);
    for (int i = 0; i < n_old && x.chunks; i++) free(x.chunks[i]);
    free(x.chunks);
    free(x.outmap);
    if (st) {
        free(x.b.out);
        return st;
    }
    free(g->layers);
    g->layers = x.b.out;
    g->n_layers = x.b.n;
    return VDNN_OK;
}

vdnn_status vdnn_graph_with_steps(const vdnn_graph_t *g, int steps, vdnn_graph_t **out, vdnn_error *err)
{
    *out = NULL;
    if (!g->file_layers)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "steps: %s was not read from a model file, so its lstm layers "
                         "cannot be cut again", g->source);
    int lstm = 0;
    for (int i = 1; i < g->n_file_layers; i++) lstm += g->file_layers[i].kind == VDNN_LAYER_LSTM;
    if (!lstm)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "steps: %s has no lstm layer to cut for %d steps (a "
                         "transformer's length is its context)", g->source, steps);
    /* Head groups and fused attention are copies' changes the file does not hold: they would be lost. */
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *L = &g->layers[l];
        if (L->kind == VDNN_LAYER_ATTN || (L->kind == VDNN_LAYER_ATTN_PROBS && L->p.head_count))
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "steps: %s's attention '%s' is %s: cut the model for its "
                             "sequence length first", g->source, L->name,
                             L->kind == VDNN_LAYER_ATTN ? "fused" : "in head groups");
    }
    vdnn_graph_t *c = NULL;
    vdnn_status st = vdnn_graph_clone(g, &c, err);
    vdnn_layer *layers = st ? NULL : malloc(sizeof *layers * (size_t)g->n_file_layers);
    if (!st && !layers) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
    if (!st) {
        memcpy(layers, g->file_layers, sizeof *layers * (size_t)g->n_file_layers);
        free(c->layers);
        c->layers = layers;
        c->n_layers = g->n_file_layers;
        /* A context set on the copy (vdnn_graph's pos_embed layers keep their file names). */
        for (int i = 1; i < c->n_layers; i++)
            for (int l = 1; c->layers[i].kind == VDNN_LAYER_POS_EMBED && l < g->n_layers; l++)
                if (!strcmp(g->layers[l].name, c->layers[i].name)) c->layers[i].p.context = g->layers[l].p.context;
        c->default_input = (vdnn_shape){0, 1, steps, 1};
        c->resolved = false;
        st = vdnn_graph_expand_lstm(c, err);
    }
    if (!st) st = vdnn_graph_expand_attention(c, err);
    if (st) {
        vdnn_graph_free(c);
        return st;
    }
    vdnn_graph_count_consumers(c);
    *out = c;
    return VDNN_OK;
}
