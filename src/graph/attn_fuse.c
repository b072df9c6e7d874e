/* Fuses attention: each attn_probs and the attn_mix reading it become one attention node under the mix's name, so
 * that the probabilities are never a tensor (docs/sequence.md, "Fused attention"). The other layers keep their names,
 * inputs and places for parameter seeding, so a model fused starts from the same parameters. */
#include "graph/graph_build.h"

#include <stdio.h>
#include <stdlib.h>

static vdnn_status fuse_fail(const vdnn_graph_t *g, const vdnn_layer *L, vdnn_error *err, const char *what)
{
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s:%d: layer '%s': %s", g->source, L->line, L->name, what);
}

/* The attn_mix that is probabilities p's only reader, reading p's qkv too; -1 if there is none such. */
static int sole_mix(const vdnn_graph_t *g, int p)
{
    int mix = -1, readers = 0;
    for (int l = p + 1; l < g->n_layers; l++)
        for (int i = 0; i < g->layers[l].n_inputs; i++)
            if (g->layers[l].inputs[i] == p) {
                readers++;
                if (g->layers[l].kind == VDNN_LAYER_ATTN_MIX && i == 0) mix = l;
            }
    if (readers != 1 || mix < 0 || g->layers[mix].inputs[1] != g->layers[p].inputs[0]) return -1;
    return mix;
}

vdnn_status vdnn_graph_fuse_attention(vdnn_graph_t *g, const bool *which, vdnn_error *err)
{
    const int n_old = g->n_layers;
    int *outmap = calloc((size_t)n_old, sizeof *outmap);
    /* fused[l]: layer l is a probabilities layer or a mix being fused. */
    bool *fused = calloc((size_t)n_old, sizeof *fused);
    vdnn_graph_builder b = {0};
    vdnn_status st = outmap && fused ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
    for (int i = 0, a = 0; i < n_old && !st; i++)
        if (g->layers[i].kind == VDNN_LAYER_ATTN_PROBS && (!which || which[a++])) {
            fused[i] = true;
            const int mix = sole_mix(g, i);
            if (mix >= 0) fused[mix] = true;
        }
    for (int i = 0; i < n_old && !st; i++) {
        const vdnn_layer *L = &g->layers[i];
        if (L->kind == VDNN_LAYER_ATTN_PROBS && fused[i]) {
            if (L->p.head_count || L->p.groups > 1)
                st = fuse_fail(g, L, err, "attention computed in head groups is not fused (fused attention holds no "
                               "probabilities to group)");
            else if (sole_mix(g, i) < 0)
                st = fuse_fail(g, L, err, "fusing needs one attn_mix as the probabilities' only reader, reading "
                               "the same qkv");
            outmap[i] = -1;
            continue;
        }
        const bool mix = L->kind == VDNN_LAYER_ATTN_MIX && fused[i];
        const int at = vdnn_graph_builder_emit(&b, L, L->name, mix ? VDNN_LAYER_ATTN : L->kind);
        if (at < 0) {
            st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", g->source);
            break;
        }
        vdnn_layer *N = &b.out[at];
        if (!N->origin) N->origin = 1 + i;
        if (mix) {
            const vdnn_layer *P = &g->layers[L->inputs[0]];
            N->p.heads = P->p.heads;
            snprintf(N->fused_probs, sizeof N->fused_probs, "%s", P->name);
            N->fused_probs_origin = P->origin ? P->origin : 1 + L->inputs[0];
            N->n_inputs = 1;
            N->inputs[0] = outmap[P->inputs[0]];
        } else {
            N->n_inputs = L->n_inputs;
            for (int k = 0; k < L->n_inputs; k++) N->inputs[k] = outmap[L->inputs[k]];
        }
        outmap[i] = at;
    }
    if (!st) vdnn_graph_builder_retie(&b, outmap);
    free(outmap);
    free(fused);
    return vdnn_graph_builder_finish(&b, g, st);
}
