/* Building a graph's layer array anew: appending nodes and joining many into one through a tree of concatenations. */
#include "graph/graph_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vdnn_graph_builder_emit(vdnn_graph_builder *b, const vdnn_layer *proto, const char *name, vdnn_layer_kind kind)
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

int vdnn_graph_builder_join(vdnn_graph_builder *b, const vdnn_layer *proto, const int *ids, int n, const char *name,
                            vdnn_layer_kind kind, const vdnn_layer_params *params)
{
    if (n <= VDNN_MAX_INPUTS) {
        int at = vdnn_graph_builder_emit(b, proto, name, kind);
        if (at < 0) return -1;
        vdnn_layer *L = &b->out[at];
        L->n_inputs = n;
        memcpy(L->inputs, ids, (size_t)n * sizeof *ids);
        L->p = *params;
        return at;
    }
    int *level = malloc((size_t)(n + VDNN_MAX_INPUTS - 1) / VDNN_MAX_INPUTS * sizeof *level), m = 0;
    if (!level) return -1;
    for (int k = 0; k < n; k += VDNN_MAX_INPUTS) {
        char part[2 * VDNN_NAME_LEN];
        snprintf(part, sizeof part, "%s.%d", name, m);
        int take = n - k < VDNN_MAX_INPUTS ? n - k : VDNN_MAX_INPUTS;
        level[m] = vdnn_graph_builder_join(b, proto, ids + k, take, part, kind, params);
        if (level[m++] < 0) {
            free(level);
            return -1;
        }
    }
    int at = vdnn_graph_builder_join(b, proto, level, m, name, kind, params);
    free(level);
    return at;
}

void vdnn_graph_builder_retie(vdnn_graph_builder *b, const int *outmap)
{
    for (int i = 0; i < b->n; i++)
        if (b->out[i].p.tie) {
            b->out[i].p.tie = outmap[b->out[i].p.tie];
            b->out[b->out[i].p.tie].p.tied_by = i;
        }
}

vdnn_status vdnn_graph_builder_finish(vdnn_graph_builder *b, vdnn_graph_t *g, vdnn_status st)
{
    if (st) {
        free(b->out);
        b->out = NULL;
        return st;
    }
    free(g->layers);
    g->layers = b->out;
    g->n_layers = b->n;
    b->out = NULL;
    return VDNN_OK;
}
