/* Model-parallel stages: valid cuts, splits from the model file or balanced by cost, and stage graphs. */
#include "dist/stages.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vdnn_stage_cuts(const vdnn_graph_t *g, bool *cut_ok)
{
    const int n = g->n_layers;
    /* A cut after l is clean when nothing before l is read after l. */
    int reach = 0; /* the furthest consumer of any layer before the current one */
    int *last_use = calloc((size_t)n, sizeof *last_use);
    for (int l = 0; l < n; l++) cut_ok[l] = false;
    if (!last_use) return; /* no cuts: callers then report that the graph cannot be split */
    for (int j = 1; j < n; j++)
        for (int i = 0; i < g->layers[j].n_inputs; i++)
            if (j > last_use[g->layers[j].inputs[i]]) last_use[g->layers[j].inputs[i]] = j;
    for (int l = 1; l < n - 1; l++) {
        if (last_use[l - 1] > reach) reach = last_use[l - 1];
        cut_ok[l] = reach <= l;
    }
    free(last_use);
}

bool vdnn_graph_has_stages(const vdnn_graph_t *g)
{
    for (int l = 1; l < g->n_layers; l++)
        if (g->layers[l].stage > 0) return true;
    return false;
}

const char *vdnn_stage_split_format(const vdnn_graph_t *g, const vdnn_stage_split *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < s->stages && used < len; k++) {
        int w = snprintf(buf + used, len - used, "%s%s..%s", k ? " | " : "", g->layers[s->first[k]].name,
                         g->layers[s->last[k]].name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

static vdnn_status not_a_cut(const vdnn_graph_t *g, int l, const char *why, vdnn_error *err)
{
    /* Name a tensor that crosses the cut, so the user knows which edge to move. */
    for (int j = l + 1; j < g->n_layers; j++)
        for (int i = 0; i < g->layers[j].n_inputs; i++) {
            int in = g->layers[j].inputs[i];
            if (in < l)
                return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                                 "%s:%d: %s after layer '%s' is not possible: layer '%s' (in a later stage) reads "
                                 "'%s' (an earlier one); a stage boundary may be crossed by one tensor only",
                                 g->source, g->layers[l].line, why, g->layers[l].name, g->layers[j].name,
                                 g->layers[in].name);
        }
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %s after layer '%s' is not possible", g->source, why,
                     g->layers[l].name);
}

vdnn_status vdnn_stage_split_check(const vdnn_graph_t *g, const vdnn_stage_split *s, vdnn_error *err)
{
    const int n = g->n_layers;
    if (s->stages < 1 || s->stages > VDNN_MAX_STAGES)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%d stages (must be 1 to %d)", s->stages, VDNN_MAX_STAGES);
    if (s->stages > n - 1)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %d stages but only %d layers", g->source, s->stages, n - 1);
    bool *cut = malloc((size_t)n * sizeof *cut);
    if (!cut) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory checking stages");
    vdnn_stage_cuts(g, cut);
    vdnn_status rc = VDNN_OK;
    for (int k = 0; k < s->stages && rc == VDNN_OK; k++) {
        int want_first = k ? s->last[k - 1] + 1 : 1;
        if (s->first[k] != want_first || s->last[k] < s->first[k] || s->last[k] >= n)
            rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: stage %d (layers %d..%d) is empty or out of order", g->source,
                           k, s->first[k], s->last[k]);
        else if (k < s->stages - 1 && !cut[s->last[k]])
            rc = not_a_cut(g, s->last[k], "ending a stage", err);
    }
    if (rc == VDNN_OK && s->last[s->stages - 1] != n - 1)
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: the last stage must end with the softmax", g->source);
    free(cut);
    return rc;
}

vdnn_status vdnn_stage_split_from_model(const vdnn_graph_t *g, int stages, vdnn_stage_split *s, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    const int n = g->n_layers;
    int top = g->layers[n - 1].stage;
    if (top + 1 != stages)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "%s places layers on %d stages (stage= keys), but %d were asked for (dist.balance places them "
                         "by cost instead)",
                         g->source, top + 1, stages);
    if (stages > VDNN_MAX_STAGES)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %d stages (at most %d)", g->source, stages, VDNN_MAX_STAGES);
    s->stages = stages;
    for (int k = 0; k < stages; k++) s->first[k] = -1;
    for (int l = 1; l < n; l++) {
        int k = g->layers[l].stage;
        if (s->first[k] < 0) s->first[k] = l;
        s->last[k] = l;
    }
    for (int k = 0; k < stages; k++)
        if (s->first[k] < 0)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no layer is placed on stage %d (stages are numbered from 0 "
                             "and may not be skipped)", g->source, k);
    return vdnn_stage_split_check(g, s, err);
}

vdnn_status vdnn_stage_split_balance(const vdnn_graph_t *g, const double *cost, int stages, vdnn_stage_fits_fn fits,
                                     void *ctx, vdnn_stage_split *s, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    const int n = g->n_layers;
    if (stages < 1 || stages > VDNN_MAX_STAGES)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%d stages (must be 1 to %d)", stages, VDNN_MAX_STAGES);
    bool *cut = malloc((size_t)n * sizeof *cut);
    int *ends = malloc((size_t)(n + 1) * sizeof *ends);
    double *prefix = malloc((size_t)(n + 1) * sizeof *prefix);
    if (!cut || !ends || !prefix) {
        free(cut), free(ends), free(prefix);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory balancing stages");
    }
    vdnn_stage_cuts(g, cut);
    /* Candidate stage ends: 0 (before the first layer), every clean cut, the softmax. */
    int ne = 0;
    ends[ne++] = 0;
    for (int l = 1; l < n - 1; l++)
        if (cut[l]) ends[ne++] = l;
    ends[ne++] = n - 1;
    prefix[0] = 0;
    for (int l = 1; l < n; l++) prefix[l] = prefix[l - 1] + (cost ? cost[l] : 1.0);
    vdnn_status rc = VDNN_OK;
    if (stages > ne - 1)
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                       "%s cannot be split into %d stages: it has only %d places where one tensor alone crosses "
                       "between layers",
                       g->source, stages, ne - 2);
    /* best[k*ne + e]: the smallest largest-stage cost of layers 1..ends[e] in k+1 stages; from[]: the
     * previous end. fit[] caches fits() per (start, end) pair: -1 unknown. */
    double *best = NULL;
    int *from = NULL;
    signed char *fit = NULL;
    if (rc == VDNN_OK) {
        best = malloc((size_t)stages * (size_t)ne * sizeof *best);
        from = malloc((size_t)stages * (size_t)ne * sizeof *from);
        fit = malloc((size_t)ne * (size_t)ne);
        if (!best || !from || !fit) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory balancing stages");
    }
    if (rc == VDNN_OK) {
        memset(fit, -1, (size_t)ne * (size_t)ne);
        for (int i = 0; i < stages * ne; i++) best[i] = DBL_MAX, from[i] = -1;
        for (int k = 0; k < stages; k++)
            for (int e = 1; e < ne; e++)
                for (int p = (k ? 1 : 0); p < e; p++) {
                    if (k == 0 && p != 0) break;
                    double before = k ? best[(k - 1) * ne + p] : 0;
                    if (before == DBL_MAX) continue;
                    double c = prefix[ends[e]] - prefix[ends[p]];
                    double v = before > c ? before : c;
                    if (v >= best[k * ne + e]) continue;
                    signed char *f = &fit[p * ne + e];
                    if (*f < 0) *f = fits ? (signed char)fits(ctx, ends[p] + 1, ends[e]) : 1;
                    if (!*f) continue;
                    best[k * ne + e] = v;
                    from[k * ne + e] = p;
                }
        if (best[(stages - 1) * ne + ne - 1] == DBL_MAX) {
            rc = vdnn_fail(err, VDNN_ERR_BUDGET,
                           "%s cannot be split into %d stages that each fit their device's memory budget", g->source,
                           stages);
        } else {
            s->stages = stages;
            int e = ne - 1;
            for (int k = stages - 1; k >= 0; k--) {
                int p = from[k * ne + e];
                s->first[k] = ends[p] + 1;
                s->last[k] = ends[e];
                e = p;
            }
        }
    }
    free(cut), free(ends), free(prefix), free(best), free(from), free(fit);
    return rc;
}

vdnn_shape vdnn_stage_input_shape(const vdnn_graph_t *g, const vdnn_stage_split *s, int k)
{
    return g->layers[s->first[k] - 1].out;
}

int vdnn_stage_classes(const vdnn_graph_t *g, const vdnn_stage_split *s, int k)
{
    if (k == s->stages - 1) return g->classes;
    vdnn_shape o = g->layers[s->last[k]].out;
    return o.c * o.h * o.w;
}

static void add_layer(vdnn_graph_t *sg, const char *name, vdnn_layer_kind kind, int input)
{
    vdnn_layer *L = &sg->layers[sg->n_layers++];
    memset(L, 0, sizeof *L);
    snprintf(L->name, sizeof L->name, "%s", name);
    L->kind = kind;
    L->n_inputs = 1;
    L->inputs[0] = input;
    L->p.stride_h = L->p.stride_w = 1;
    L->p.groups = 1;
}

int vdnn_stage_of(const vdnn_stage_split *s, int l)
{
    for (int k = 0; k < s->stages; k++)
        if (l >= s->first[k] && l <= s->last[k]) return k;
    return -1;
}

bool vdnn_stage_table_split(const vdnn_graph_t *g, int owner, int reader)
{
    const vdnn_layer *E = &g->layers[owner], *R = &g->layers[reader];
    return E->kind == VDNN_LAYER_EMBED && R->kind == VDNN_LAYER_LINEAR && R->p.tie == owner &&
           E->p.tied_by == reader;
}

vdnn_status vdnn_stage_graph(const vdnn_graph_t *g, const vdnn_stage_split *s, int k, vdnn_graph_t **out,
                             vdnn_error *err)
{
    *out = NULL;
    if (!g->resolved) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: stage graphs need a resolved graph", g->source);
    if (k < 0 || k >= s->stages) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no stage %d of %d", k, s->stages);
    static const char *reserved[] = {VDNN_STAGE_INPUT, "stage.flatten", "stage.loss"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (vdnn_graph_find(g, reserved[i]) >= 0)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: the layer name '%s' is reserved for model parallelism",
                             g->source, reserved[i]);
    const int first = s->first[k], last = s->last[k];
    const bool is_last = k == s->stages - 1;
    int n = VDNN_STAGE_PREFIX + (last - first + 1) + (is_last ? 0 : VDNN_STAGE_TAIL);
    vdnn_graph_t *sg = calloc(1, sizeof *sg);
    if (sg) sg->layers = calloc((size_t)n, sizeof *sg->layers);
    if (!sg || !sg->layers) {
        vdnn_graph_free(sg);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory building stage %d", k);
    }
    snprintf(sg->name, sizeof sg->name, "%s", g->name);
    snprintf(sg->source, sizeof sg->source, "%.480s (stage %d)", g->source, k);
    vdnn_shape in = vdnn_stage_input_shape(g, s, k);
    sg->default_input = (vdnn_shape){0, in.c, in.h, in.w};
    sg->default_classes = vdnn_stage_classes(g, s, k);
    add_layer(sg, "data", VDNN_LAYER_INPUT, 0);
    sg->layers[0].n_inputs = 0;
    /* Dropout with p = 0 copies exactly, forward and backward: the identity whose gradient goes back. */
    add_layer(sg, VDNN_STAGE_INPUT, VDNN_LAYER_DROPOUT, 0);
    vdnn_status rc = VDNN_OK;
    for (int l = first; l <= last && rc == VDNN_OK; l++) {
        vdnn_layer *L = &sg->layers[sg->n_layers];
        *L = g->layers[l];
        L->stage = 0;
        L->n_consumers = 0;
        if (L->kind == VDNN_LAYER_FC && L->p.outputs_are_classes) L->p.outputs_are_classes = 0;
        if (L->kind == VDNN_LAYER_EMBED) L->p.model_vocab = g->classes;
        for (int i = 0; i < L->n_inputs; i++) {
            int in_l = L->inputs[i];
            if (in_l >= first) L->inputs[i] = in_l - first + VDNN_STAGE_PREFIX;
            else if (in_l == first - 1) L->inputs[i] = 1;
            else rc = not_a_cut(g, first - 1, "starting a stage", err);
        }
        /* A tied table within the stage follows the renumbering. An embedding whose one reader, a tied linear, is
         * in a later stage keeps its table; the reader's stage holds a copy (weight_of) whose gradient the runtime
         * exchanges (mpi_tie.c). Other parameters shared across stages (an lstm layer's chunks) are refused. */
        const int t = L->p.tie ? L->p.tie : L->p.tied_by;
        if (rc == VDNN_OK && t && (t < first || t > last)) {
            const int owner = L->p.tie ? t : l, reader = L->p.tie ? l : t;
            if (vdnn_stage_table_split(g, owner, reader)) {
                if (L->p.tie) snprintf(L->weight_of, sizeof L->weight_of, "%s", g->layers[owner].name);
                L->p.tie = L->p.tied_by = 0;
            } else {
                rc = vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: layer '%s' shares its parameters with layer '%s' of "
                               "another stage: pipelines split only an embedding's table from the tied linear that "
                               "reads it", g->source, L->name, g->layers[t].name);
            }
        }
        if (L->p.tie) L->p.tie = L->p.tie - first + VDNN_STAGE_PREFIX;
        if (L->p.tied_by) L->p.tied_by = L->p.tied_by - first + VDNN_STAGE_PREFIX;
        sg->n_layers++;
    }
    if (rc == VDNN_OK && !is_last) {
        add_layer(sg, "stage.flatten", VDNN_LAYER_FLATTEN, sg->n_layers - 1);
        add_layer(sg, "stage.loss", VDNN_LAYER_SOFTMAX_XENT, sg->n_layers - 1);
    }
    if (rc != VDNN_OK) {
        vdnn_graph_free(sg);
        return rc;
    }
    *out = sg;
    return VDNN_OK;
}
