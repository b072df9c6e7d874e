/* Expands attention computed in head groups: a file's attn_probs groups=G and the attn_mix that reads it become G
 * pairs of nodes (each group's probabilities, then their mix of its values) and a feat_cat of the mixes, so that a
 * plan keeps, swaps or recomputes one group's T x T probabilities at a time (docs/sequence.md). */
#include "graph/graph_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grouped(const vdnn_layer *L)
{
    return L->kind == VDNN_LAYER_ATTN_PROBS && L->p.groups > 1 && L->p.head_count == 0;
}

static vdnn_status expand_fail(const vdnn_graph_t *g, const vdnn_layer *L, vdnn_error *err, const char *what,
                               const char *other)
{
    return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: layer '%s': %s%s%s", g->source, L->line, L->name, what,
                     other ? other : "", other ? "'" : "");
}

/* Emits the G pairs of probabilities and mix for attn_mix M reading the grouped attn_probs P, then their feat_cat
 * under M's name. Returns the feat_cat's index, -1 when out of memory. */
static int emit_groups(vdnn_graph_builder *b, const vdnn_layer *P, int p_old, const vdnn_layer *M, const int *outmap)
{
    const int groups = P->p.groups, per = P->p.heads / groups;
    int mixes[4096];
    char name[VDNN_NAME_LEN + 16];
    for (int k = 0; k < groups; k++) {
        snprintf(name, sizeof name, "%s.g%d", P->name, k);
        const int pr = vdnn_graph_builder_emit(b, P, name, VDNN_LAYER_ATTN_PROBS);
        if (pr < 0) return -1;
        vdnn_layer *N = &b->out[pr];
        N->origin = 1 + p_old; /* the probabilities' own place (vdnn_graph_seed_index, the hash) */
        N->p.head0 = k * per;
        N->p.head_count = per;
        N->n_inputs = 1;
        N->inputs[0] = outmap[P->inputs[0]];
        snprintf(name, sizeof name, "%s.g%d", M->name, k);
        if ((mixes[k] = vdnn_graph_builder_emit(b, M, name, VDNN_LAYER_ATTN_MIX)) < 0) return -1;
        N = &b->out[mixes[k]];
        N->p.heads = P->p.heads;
        N->p.head0 = k * per;
        N->p.head_count = per;
        N->n_inputs = 2;
        N->inputs[0] = pr;
        N->inputs[1] = outmap[M->inputs[1]];
    }
    const vdnn_layer_params none = {0};
    return vdnn_graph_builder_join(b, M, mixes, groups, M->name, VDNN_LAYER_FEAT_CAT, &none);
}

vdnn_status vdnn_graph_expand_attention(vdnn_graph_t *g, vdnn_error *err)
{
    bool any = false;
    for (int i = 1; i < g->n_layers; i++) any |= grouped(&g->layers[i]);
    if (!any) return VDNN_OK;
    const int n_old = g->n_layers;
    int *outmap = calloc((size_t)n_old, sizeof *outmap);
    bool *done = calloc((size_t)n_old, sizeof *done);
    vdnn_graph_builder b = {0};
    vdnn_status st = outmap && done ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
    for (int i = 0; i < n_old && !st; i++) {
        const vdnn_layer *L = &g->layers[i];
        if (grouped(L)) {
            if (strlen(L->name) + 6 > VDNN_NAME_LEN - 1 || L->p.groups > 4096)
                st = expand_fail(g, L, err, "the name is too long for its groups' nodes (at most 57 characters)",
                                 NULL);
            outmap[i] = -1;
            continue;
        }
        const vdnn_layer *P = L->kind == VDNN_LAYER_ATTN_MIX ? &g->layers[L->inputs[0]] : NULL;
        if (P && grouped(P)) {
            if (done[L->inputs[0]])
                st = expand_fail(g, L, err, "a second attn_mix reads the grouped probabilities of '", P->name);
            else if (strlen(L->name) + 6 > VDNN_NAME_LEN - 1)
                st = expand_fail(g, L, err, "the name is too long for its groups' nodes (at most 57 characters)",
                                 NULL);
            else if ((outmap[i] = emit_groups(&b, P, L->inputs[0], L, outmap)) < 0)
                st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
            done[L->inputs[0]] = true;
            continue;
        }
        const int at = vdnn_graph_builder_emit(&b, L, L->name, L->kind);
        if (at < 0) {
            st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
            break;
        }
        vdnn_layer *N = &b.out[at];
        N->n_inputs = L->n_inputs;
        for (int k = 0; k < L->n_inputs && !st; k++) {
            if (grouped(&g->layers[L->inputs[k]]))
                st = expand_fail(g, L, err, "only an attn_mix (its first input) may read the probabilities computed "
                                 "in groups of '", g->layers[L->inputs[k]].name);
            N->inputs[k] = outmap[L->inputs[k]];
        }
        outmap[i] = at;
    }
    for (int i = 0, o = 0; i < b.n && !st; i++) {
        /* Each old layer's last node is the one that stands for it (a group's feat_cat for its attn_mix). */
        while (o < n_old && outmap[o] < i) o++;
        if (!b.out[i].origin) b.out[i].origin = 1 + (o < n_old ? o : n_old - 1);
    }
    if (!st) vdnn_graph_builder_retie(&b, outmap);
    for (int i = 1; i < n_old && !st; i++)
        if (grouped(&g->layers[i]) && !done[i])
            st = expand_fail(g, &g->layers[i], err, "probabilities computed in groups need an attn_mix reading them",
                             NULL);
    free(outmap);
    free(done);
    return vdnn_graph_builder_finish(&b, g, st);
}
