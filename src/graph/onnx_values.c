/* The ONNX mapping's tensor values and layers: looking inputs up, binding outputs, adding named layers. */
#include "graph/onnx_map.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vdnn_status onnx_fail(onnx_map *x, vdnn_status st, const char *fmt, ...)
{
    char what[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = x->node;
    const char *name = vdnn_onnx_str(n->name);
    if (*name)
        return vdnn_fail(x->err, st, "%s: node '%s' (%s): %s", x->m->source, name, n->op_type, what);
    return vdnn_fail(x->err, st, "%s: node %d (%s, no name): %s", x->m->source, x->node_index, n->op_type, what);
}

static const onnx_value *find_value(const onnx_map *x, const char *name)
{
    for (int i = x->n_vals - 1; i >= 0; i--)
        if (!strcmp(x->vals[i].name, name)) return &x->vals[i];
    return NULL;
}

bool onnx_has_input(const onnx_map *x, int k)
{
    return k >= 0 && (size_t)k < x->node->n_input && x->node->input[k][0];
}

vdnn_status onnx_input(onnx_map *x, int k, const onnx_value **v)
{
    if (!onnx_has_input(x, k)) return onnx_fail(x, VDNN_ERR_PARSE, "input %d is missing", k);
    const char *name = x->node->input[k];
    *v = find_value(x, name);
    if (!*v)
        return onnx_fail(x, VDNN_ERR_PARSE,
                         "input %d ('%s') is neither an initializer nor the output of an earlier node (ONNX nodes "
                         "come in topological order)",
                         k, name);
    return VDNN_OK;
}

static vdnn_status input_layer(onnx_map *x, int k, int rank, const onnx_value **v)
{
    vdnn_status st = onnx_input(x, k, v);
    if (st) return st;
    if ((*v)->layer < 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "input %d ('%s') is a constant; vdnn maps this op only on a computed tensor", k,
                         (*v)->name);
    if (rank && (*v)->rank != rank)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "input %d ('%s') has rank %d; vdnn maps this op only at rank %d%s",
                         k, (*v)->name, (*v)->rank, rank,
                         rank == 4 ? " (N x C x H x W)" : " (N x features: Flatten first)");
    return VDNN_OK;
}

vdnn_status onnx_input_layer(onnx_map *x, int k, int rank, const onnx_value **v)
{
    vdnn_status st = input_layer(x, k, rank, v);
    if (!st && ((*v)->pad_h || (*v)->pad_w))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "input %d ('%s') is the output of a Pad, which vdnn maps only before a Conv or an "
                         "AveragePool",
                         k, (*v)->name);
    return st;
}

vdnn_status onnx_input_padded(onnx_map *x, int k, const onnx_value **v) { return input_layer(x, k, 4, v); }

vdnn_status onnx_input_const(onnx_map *x, int k, const Onnx__TensorProto **t)
{
    const onnx_value *v;
    vdnn_status st = onnx_input(x, k, &v);
    if (st) return st;
    if (v->layer >= 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "input %d ('%s') is computed in the graph; vdnn needs a constant (an initializer) here", k,
                         v->name);
    *t = v->konst;
    return VDNN_OK;
}

int onnx_uses(const onnx_map *x, const char *name)
{
    const Onnx__GraphProto *g = x->m->graph;
    int uses = !strcmp(name, x->m->output);
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++) uses += !strcmp(g->node[i]->input[k], name);
    return uses;
}

vdnn_status onnx_grow(onnx_map *x, void *array, size_t elem, int n, int *cap)
{
    if (n < *cap) return VDNN_OK;
    int c = *cap ? 2 * *cap : 32;
    void *p;
    memcpy(&p, array, sizeof p);
    p = realloc(p, (size_t)c * elem);
    if (!p) return vdnn_fail(x->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", x->m->source);
    memcpy(array, &p, sizeof p);
    *cap = c;
    return VDNN_OK;
}

static vdnn_status add_value(onnx_map *x, onnx_value v)
{
    vdnn_status st = onnx_grow(x, &x->vals, sizeof *x->vals, x->n_vals, &x->cap_vals);
    if (!st) x->vals[x->n_vals++] = v;
    return st;
}

vdnn_status onnx_add_const(onnx_map *x, const char *name, const Onnx__TensorProto *t)
{
    return add_value(x, (onnx_value){.name = name, .layer = -1, .konst = t});
}

vdnn_status onnx_add_input(onnx_map *x, const char *name)
{
    return add_value(x, (onnx_value){.name = name, .layer = 0, .rank = 4});
}

vdnn_status onnx_bind(onnx_map *x, int out, const onnx_value *v)
{
    const Onnx__NodeProto *n = x->node;
    if ((size_t)out >= n->n_output || !n->output[out][0])
        return onnx_fail(x, VDNN_ERR_PARSE, "output %d is missing", out);
    const char *name = n->output[out];
    if (find_value(x, name))
        return onnx_fail(x, VDNN_ERR_PARSE,
                         "output '%s' is already an initializer or another node's output (ONNX assigns each "
                         "tensor once)",
                         name);
    onnx_value copy = *v;
    copy.name = name;
    if (out + 1 > x->bound) x->bound = out + 1;
    return add_value(x, copy);
}

static bool name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-'; }

/* A valid, unique vdnn layer name for `want` (the node's name, or op_index when it has none): characters the
 * model-file names do not allow become '_' (leading ones are dropped), an over-long name keeps its end (the
 * op part, which differs between siblings) from a word start on, and a clash gets _2, _3, ... appended. */
void onnx_layer_name(const vdnn_graph_t *g, const char *want, const char *op, int index, char out[VDNN_NAME_LEN])
{
    char base[VDNN_NAME_LEN * 4];
    size_t n = 0;
    for (const char *c = want; *c && n + 1 < sizeof base; c++) {
        if (!n && !name_char(*c)) continue;
        base[n++] = name_char(*c) ? *c : '_';
    }
    base[n] = '\0';
    if (!n) {
        for (const char *c = op; *c && n + 12 < sizeof base; c++)
            base[n++] = name_char(*c) ? (char)tolower((unsigned char)*c) : '_';
        snprintf(base + n, sizeof base - n, "_%d", index);
        n = strlen(base);
    }
    enum { ROOM = VDNN_NAME_LEN - 8 }; /* leaves space for a _N suffix */
    const char *b = n > ROOM ? base + (n - ROOM) : base;
    const char *word = strchr(b, '_');
    if (b != base && word && word[1]) b = word + 1;
    snprintf(out, VDNN_NAME_LEN, "%.*s", (int)ROOM, b);
    for (unsigned k = 2; !strcmp(out, "data") || vdnn_graph_find(g, out) >= 0; k++)
        snprintf(out, VDNN_NAME_LEN, "%.*s_%u", (int)ROOM, b, k % 1000000u);
}

vdnn_status onnx_new_layer(onnx_map *x, const char *want, const char *op, int node, vdnn_layer **out)
{
    vdnn_graph_t *g = x->g;
    int cap = x->cap_layers;
    vdnn_status st = onnx_grow(x, &g->layers, sizeof *g->layers, g->n_layers, &cap);
    if (!st) st = onnx_grow(x, &x->layer_node, sizeof *x->layer_node, g->n_layers, &x->cap_layers);
    if (st) return st;
    vdnn_layer *L = &g->layers[g->n_layers];
    memset(L, 0, sizeof *L);
    onnx_layer_name(g, want, op, node, L->name);
    L->line = node + 1;
    L->p.stride_h = L->p.stride_w = 1;
    L->p.groups = 1;
    x->layer_node[g->n_layers] = node;
    g->n_layers++;
    *out = L;
    return VDNN_OK;
}

vdnn_status onnx_add_layer(onnx_map *x, vdnn_layer_kind kind, const int *inputs, int n_inputs, int rank, int *layer)
{
    if (n_inputs > VDNN_MAX_INPUTS)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "%d inputs (vdnn layers take at most %d)", n_inputs,
                         VDNN_MAX_INPUTS);
    vdnn_layer *L;
    vdnn_status st = onnx_new_layer(x, vdnn_onnx_str(x->node->name), x->node->op_type, x->node_index, &L);
    if (st) return st;
    L->kind = kind;
    L->n_inputs = n_inputs;
    memcpy(L->inputs, inputs, (size_t)n_inputs * sizeof *inputs);
    *layer = x->g->n_layers - 1;
    return onnx_bind(x, 0, &(onnx_value){.layer = *layer, .rank = rank});
}

vdnn_status onnx_add_feature_check(onnx_map *x, int layer, long long features)
{
    vdnn_status st = onnx_grow(x, &x->checks, sizeof *x->checks, x->n_checks, &x->cap_checks);
    if (st) return st;
    x->checks[x->n_checks++] = (onnx_feature_check){.layer = layer, .node = x->node_index, .features = features};
    return VDNN_OK;
}

vdnn_status onnx_shape(onnx_map *x, int layer, vdnn_shape *s)
{
    const int64_t *d = x->m->in_dims;
    const vdnn_shape in = {1, (int)d[1], (int)d[2], (int)d[3]};
    if (layer == 0) {
        *s = in;
        return VDNN_OK;
    }
    vdnn_status st = vdnn_graph_resolve(x->g, in, 0, x->err);
    x->g->resolved = false; /* a partial graph; the whole one is resolved at the end */
    if (!st) *s = x->g->layers[layer].out;
    return st;
}
