/* ONNX import: maps a checked ONNX model node by node through the op table to vdnn layers, adds the loss,
 * and validates the result at the model's input size before anything else sees it. */
#include "graph/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/onnx_map.h"

static const onnx_op *find_op(const char *type)
{
    for (const onnx_op *op = vdnn_onnx_ops; op->op_type; op++)
        if (!strcmp(op->op_type, type)) return op;
    return NULL;
}

static vdnn_status unknown_op(onnx_map *x)
{
    char list[1024] = "";
    size_t n = 0;
    for (const onnx_op *op = vdnn_onnx_ops; op->op_type && n + 1 < sizeof list; op++)
        if (op->map) n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", op->op_type);
    return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "op type '%s' is not supported (vdnn maps %s)", x->node->op_type, list);
}

/* A word of a space-separated list. */
static bool listed(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; n && (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return true;
    return false;
}

static vdnn_status map_node(onnx_map *x, int i)
{
    const Onnx__NodeProto *n = x->m->graph->node[i];
    x->node = n;
    x->node_index = i;
    x->bound = 0;
    const char *domain = vdnn_onnx_str(n->domain);
    if (*domain && strcmp(domain, "ai.onnx"))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "domain '%s' is not supported (vdnn reads the ai.onnx domain)",
                         domain);
    const onnx_op *op = find_op(n->op_type);
    if (!op) return unknown_op(x);
    if (!op->map)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "op type %s is not supported%s (%s)", n->op_type,
                         strncmp(op->later, "planned", 7) ? "" : " yet", op->later);
    if ((int)n->n_input < op->min_inputs || (op->max_inputs >= 0 && (int)n->n_input > op->max_inputs))
        return onnx_fail(x, VDNN_ERR_PARSE, "has %zu inputs (%s takes %d to %d)", n->n_input, n->op_type,
                         op->min_inputs, op->max_inputs >= 0 ? op->max_inputs : VDNN_MAX_INPUTS);
    if (!n->n_output) return onnx_fail(x, VDNN_ERR_PARSE, "has no outputs");
    for (size_t k = 0; k < n->n_attribute; k++) {
        const char *a = vdnn_onnx_str(n->attribute[k]->name);
        if (!listed(op->attrs, a))
            return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "attribute '%s' is not supported (vdnn reads %s)", a,
                             *op->attrs ? op->attrs : "none");
    }
    vdnn_status st = op->map(x);
    if (st) return st;
    /* Outputs a handler does not produce (batch-norm statistics, dropout masks, pooling indices) may only be
     * there unused: a consumer would read something vdnn never computes. */
    for (size_t k = (size_t)x->bound; k < n->n_output; k++)
        if (n->output[k][0] && onnx_uses(x, n->output[k]))
            return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "output %zu ('%s') is used, and vdnn does not compute it", k,
                             n->output[k]);
    return VDNN_OK;
}

/* vdnn's loss on the graph output, named after the dropped final Softmax if there was one. */
static vdnn_status add_loss(onnx_map *x)
{
    const vdnn_onnx_model *m = x->m;
    const onnx_value *v = NULL;
    for (int i = x->n_vals - 1; i >= 0 && !v; i--)
        if (!strcmp(x->vals[i].name, m->output)) v = &x->vals[i];
    if (!v)
        return vdnn_fail(x->err, VDNN_ERR_PARSE, "%s: the graph output '%s' is not produced by any node", m->source,
                         m->output);
    if (v->pad_h || v->pad_w)
        return vdnn_fail(x->err, VDNN_ERR_UNSUPPORTED, "%s: the graph output '%s' is a Pad's output (vdnn maps Pad "
                         "only before a Conv or an AveragePool)", m->source, m->output);
    if (v->layer <= 0)
        return vdnn_fail(x->err, VDNN_ERR_UNSUPPORTED, "%s: the graph output '%s' is %s, not a computed tensor",
                         m->source, m->output, v->layer ? "a constant" : "the input");
    int in = v->layer;
    const Onnx__NodeProto *sm = x->softmax;
    vdnn_layer *L;
    vdnn_status st = onnx_new_layer(x, sm ? vdnn_onnx_str(sm->name) : "loss", "softmax", (int)m->graph->n_node, &L);
    if (st) return st;
    L->kind = VDNN_LAYER_SOFTMAX_XENT;
    L->n_inputs = 1;
    L->inputs[0] = in;
    x->layer_node[x->g->n_layers - 1] = -1;
    return VDNN_OK;
}

static void at_node(onnx_map *x, int node)
{
    x->node = x->m->graph->node[node];
    x->node_index = node;
}

/* Every layer but the loss feeds a later one, as the .cfg reader demands. */
static vdnn_status check_used(onnx_map *x)
{
    vdnn_graph_t *g = x->g;
    for (int i = 0; i < g->n_layers; i++) g->layers[i].n_consumers = 0;
    for (int i = 1; i < g->n_layers; i++)
        for (int k = 0; k < g->layers[i].n_inputs; k++) g->layers[g->layers[i].inputs[k]].n_consumers++;
    for (int i = 1; i < g->n_layers - 1; i++)
        if (!g->layers[i].n_consumers) {
            at_node(x, x->layer_node[i]);
            return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                             "its output does not lead to the graph output '%s' (vdnn runs only what the loss uses)",
                             x->m->output);
        }
    return VDNN_OK;
}

static size_t layer_needs(const vdnn_layer *L, const char *suffix)
{
    if (!strcmp(suffix, ".weight")) return L->n_weight;
    if (!strcmp(suffix, ".bias")) return L->n_bias;
    return L->n_stats;
}

/* Shape-dependent rules, once the graph is resolved at the model's input size. */
static vdnn_status check_resolved(onnx_map *x)
{
    const vdnn_graph_t *g = x->g;
    char shape[64];
    for (int i = 0; i < x->n_checks; i++) {
        const onnx_feature_check *c = &x->checks[i];
        vdnn_shape s = g->layers[c->layer].out;
        long long have = (long long)s.c * s.h * s.w;
        if (have != c->features) {
            at_node(x, c->node);
            return onnx_fail(x, VDNN_ERR_SHAPE, "reshapes to %lld features per sample, but its input has %lld (%dx%dx%d)",
                             c->features, have, s.c, s.h, s.w);
        }
    }
    for (int i = 0; i < g->n_init; i++) {
        const onnx_init_src *src = &x->init_src[i];
        const vdnn_layer *L = &g->layers[src->layer];
        const char *suffix = g->init[i].name + strlen(L->name);
        size_t need = layer_needs(L, suffix);
        if (g->init[i].count != need) {
            vdnn_shape in = g->layers[L->inputs[0]].out;
            snprintf(shape, sizeof shape, "%dx%dx%d", in.c, in.h, in.w);
            at_node(x, src->node);
            return onnx_fail(x, VDNN_ERR_SHAPE,
                             "tensor '%s' (%s, %zu values) does not fit its input %s: the layer needs %zu %s values",
                             src->tensor, src->dims, g->init[i].count, shape, need, suffix + 1);
        }
    }
    return VDNN_OK;
}

static vdnn_status map_graph(onnx_map *x)
{
    const vdnn_onnx_model *m = x->m;
    const Onnx__GraphProto *og = m->graph;
    vdnn_graph_t *g = x->g;
    vdnn_layer *L0;
    vdnn_status st = onnx_new_layer(x, "data", "input", -1, &L0);
    if (st) return st;
    strcpy(L0->name, "data");
    L0->kind = VDNN_LAYER_INPUT;
    L0->line = 0;
    x->layer_node[0] = -1;
    st = onnx_add_input(x, m->input);
    for (size_t i = 0; !st && i < og->n_initializer; i++)
        st = onnx_add_const(x, og->initializer[i]->name, og->initializer[i]);
    for (size_t i = 0; !st && i < og->n_node; i++) st = map_node(x, (int)i);
    if (!st) st = add_loss(x);
    if (!st) st = check_used(x);
    g->default_input = (vdnn_shape){0, (int)m->in_dims[1], (int)m->in_dims[2], (int)m->in_dims[3]};
    if (!st) st = vdnn_graph_resolve(g, (vdnn_shape){1, g->default_input.c, g->default_input.h, g->default_input.w},
                                     0, x->err);
    if (!st) st = check_resolved(x);
    if (!st) g->default_classes = g->classes;
    return st;
}

vdnn_status onnx_map_model(vdnn_onnx_model *m, vdnn_graph_t **out, onnx_init_src **srcs, vdnn_error *err)
{
    *out = NULL;
    if (srcs) *srcs = NULL;
    onnx_map x = {.m = m, .err = err};
    const char *source = m->source;
    vdnn_status st = VDNN_OK;
    x.g = calloc(1, sizeof *x.g);
    if (!x.g) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", m->source);
    if (!st) {
        snprintf(x.g->source, sizeof x.g->source, "%s", m->source);
        vdnn_graph_name_from_source(x.g, m->source);
        m->source = x.g->source;
        st = map_graph(&x);
    }
    free(x.vals);
    free(x.checks);
    free(x.layer_node);
    if (st) {
        m->source = source; /* not the freed graph's copy */
        free(x.init_src);
        vdnn_graph_free(x.g);
        return st;
    }
    if (srcs)
        *srcs = x.init_src;
    else
        free(x.init_src);
    x.g->resolved = false; /* resolved only to check it; callers resolve at their own sizes */
    *out = x.g;
    return VDNN_OK;
}

vdnn_status vdnn_onnx_parse(const void *data, size_t len, const char *source, vdnn_graph_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "onnx_parse: no output pointer");
    *out = NULL;
    if (!source) source = "<onnx>";
    vdnn_onnx_model m;
    vdnn_status st = vdnn_onnx_read(data, len, source, &m, err);
    if (st) return st;
    st = onnx_map_model(&m, out, NULL, err);
    vdnn_onnx_model_free(&m);
    if (!st) vdnn_error_clear(err);
    return st;
}

vdnn_status vdnn_onnx_load(const char *path, vdnn_graph_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "onnx_load: no output pointer");
    *out = NULL;
    if (!path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "onnx_load: no path");
    uint8_t *data;
    size_t len;
    vdnn_status st = vdnn_onnx_read_file(path, &data, &len, err);
    if (st) return st;
    st = vdnn_onnx_parse(data, len, path, out, err);
    free(data);
    return st;
}
