/* Expands a model file's lstm layers into graph nodes: one parameter tensor, one node per chunk of time steps and
 * a gather of their outputs, so that plans keep, swap or recompute an LSTM's state chunk by chunk. */
#include "graph/graph.h"

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

typedef struct builder {
    vdnn_layer *out;
    int n, cap;
} builder;

static int emit(builder *b, const vdnn_layer *proto, const char *name, vdnn_layer_kind kind)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        vdnn_layer *l = realloc(b->out, (size_t)cap * sizeof *l);
        if (!l) return -1;
        b->out = l;
        b->cap = cap;
    }
    vdnn_layer *L = &b->out[b->n];
    *L = *proto;
    snprintf(L->name, sizeof L->name, "%s", name);
    L->kind = kind;
    L->n_inputs = 0;
    L->n_consumers = 0;
    return b->n++;
}

/* Gathers the h columns of chunk nodes first..first+n-1 (indices in ids), at most VDNN_MAX_INPUTS per node, the
 * last node named `name`. Returns its index, -1 when out of memory. */
static int gather(builder *b, const vdnn_layer *lstm, const int *ids, int n, const char *name, int *serial)
{
    int level[VDNN_MAX_INPUTS * VDNN_MAX_INPUTS * 64];
    int m = 0;
    if (n <= VDNN_MAX_INPUTS) {
        int at = emit(b, lstm, name, VDNN_LAYER_SEQ_CAT);
        if (at < 0) return -1;
        vdnn_layer *L = &b->out[at];
        L->n_inputs = n;
        memcpy(L->inputs, ids, (size_t)n * sizeof *ids);
        return at;
    }
    for (int k = 0; k < n; k += VDNN_MAX_INPUTS) {
        char part[VDNN_NAME_LEN + 16];
        snprintf(part, sizeof part, "%s.cat%d", lstm->name, (*serial)++);
        int take = n - k < VDNN_MAX_INPUTS ? n - k : VDNN_MAX_INPUTS;
        level[m] = gather(b, lstm, ids + k, take, part, serial);
        if (level[m++] < 0) return -1;
    }
    return gather(b, lstm, level, m, name, serial);
}

vdnn_status vdnn_graph_expand_lstm(vdnn_graph_t *g, vdnn_error *err)
{
    bool any = false;
    for (int i = 1; i < g->n_layers; i++) any |= g->layers[i].kind == VDNN_LAYER_LSTM;
    if (!any) return VDNN_OK;
    const int t = g->default_input.h;
    const int n_old = g->n_layers;
    int *outmap = calloc((size_t)n_old, sizeof *outmap);
    int **chunks = calloc((size_t)n_old, sizeof *chunks);
    builder b = {0};
    vdnn_status st = outmap && chunks ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
    for (int i = 0; i < n_old && !st; i++) {
        const vdnn_layer *L = &g->layers[i];
        if (L->kind != VDNN_LAYER_LSTM) {
            int at = emit(&b, L, L->name, L->kind);
            if (at < 0) {
                st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
                break;
            }
            vdnn_layer *N = &b.out[at];
            N->n_inputs = L->n_inputs;
            for (int k = 0; k < L->n_inputs; k++) N->inputs[k] = outmap[L->inputs[k]];
            outmap[i] = at;
            continue;
        }
        if (L->p.chunk > 0 && g->default_input.c < 1) {
            st = expand_fail(g, L, err, "needs the sequence length ([net] input=1xTx1) to cut it into chunks");
            break;
        }
        if (strlen(L->name) + 16 > VDNN_NAME_LEN) {
            st = expand_fail(g, L, err, "the name is too long for its chunk nodes (at most 47 characters)");
            break;
        }
        const int n = chunk_count(L, t), k_steps = n == 1 ? 0 : L->p.chunk, src = L->inputs[0];
        const bool from_chunks = per_chunk(g, src, i, t);
        if (n > VDNN_MAX_INPUTS * VDNN_MAX_INPUTS * 64) {
            st = expand_fail(g, L, err, "chunk= gives too many chunks (at most 4096)");
            break;
        }
        chunks[i] = calloc((size_t)n, sizeof **chunks);
        char name[VDNN_NAME_LEN + 16];
        snprintf(name, sizeof name, "%s.params", L->name);
        int pa = chunks[i] ? emit(&b, L, name, VDNN_LAYER_PARAMS) : -1;
        if (pa < 0) {
            st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
            break;
        }
        /* The parameters' input is the data, which gives them no gradient: they read nothing. */
        b.out[pa].n_inputs = 1;
        b.out[pa].inputs[0] = 0;
        b.out[pa].p.src = from_chunks ? chunks[src][0] : outmap[src];
        for (int k = 0; k < n && !st; k++) {
            snprintf(name, sizeof name, "%s.t%d", L->name, k);
            int at = emit(&b, L, name, VDNN_LAYER_LSTM);
            if (at < 0) {
                st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
                break;
            }
            vdnn_layer *N = &b.out[at];
            N->p.chunk = k_steps;
            N->p.chunk_index = k;
            N->p.n_chunks = n;
            N->p.step0 = from_chunks ? 0 : k * k_steps;
            N->inputs[N->n_inputs++] = from_chunks ? chunks[src][k] : outmap[src];
            N->inputs[N->n_inputs++] = pa;
            if (k > 0) N->inputs[N->n_inputs++] = chunks[i][k - 1];
            chunks[i][k] = at;
        }
        if (st) break;
        /* A gather only where something other than the next lstm's chunks reads the layer. */
        bool needed = false;
        for (int c = i + 1; c < n_old; c++)
            for (int k = 0; k < g->layers[c].n_inputs; k++)
                needed |= g->layers[c].inputs[k] == i && !per_chunk(g, i, c, t);
        outmap[i] = -1;
        if (needed) {
            int serial = 0;
            outmap[i] = gather(&b, L, chunks[i], n, L->name, &serial);
            if (outmap[i] < 0) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
            else b.out[outmap[i]].p.filters = L->p.proj ? L->p.proj : L->p.filters;
        }
        /* Inner gathers keep the same columns. */
        for (int at = pa; at < b.n; at++)
            if (b.out[at].kind == VDNN_LAYER_SEQ_CAT) b.out[at].p.filters = L->p.proj ? L->p.proj : L->p.filters;
    }
    for (int i = 0; i < n_old && chunks; i++) free(chunks[i]);
    free(chunks);
    free(outmap);
    if (st) {
        free(b.out);
        return st;
    }
    free(g->layers);
    g->layers = b.out;
    g->n_layers = b.n;
    return VDNN_OK;
}
