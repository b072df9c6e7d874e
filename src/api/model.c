/* The public model calls: a model is a parsed graph that nothing resolves in place (nets and plans resolve
 * copies), so one model serves any number of them at different sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "graph/graph.h"

vdnn_status vdnn_model_load(const char *path, vdnn_model_t **out, vdnn_error *err)
{
    if (!path || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_load: no path or no place for the model");
    return vdnn_graph_load(path, out, err);
}

vdnn_status vdnn_model_parse(const char *text, const char *source, vdnn_model_t **out, vdnn_error *err)
{
    if (!text || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_parse: no text or no place for the model");
    return vdnn_graph_parse(text, source ? source : "<string>", out, err);
}

void vdnn_model_free(vdnn_model_t *m) { vdnn_graph_free(m); }
const char *vdnn_model_name(const vdnn_model_t *m) { return m->name; }
const char *vdnn_model_source(const vdnn_model_t *m) { return m->source; }
int vdnn_model_layer_count(const vdnn_model_t *m) { return m->n_layers; }

void vdnn_model_defaults(const vdnn_model_t *m, vdnn_shape *input, int *classes)
{
    if (input) *input = (vdnn_shape){0, m->default_input.c, m->default_input.h, m->default_input.w};
    if (classes) *classes = m->default_classes;
}

vdnn_status vdnn_model_with_context(const vdnn_model_t *m, int context, vdnn_model_t **out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_with_context: no model or no place for the copy");
    *out = NULL;
    int tables = 0;
    for (int l = 1; l < m->n_layers; l++) tables += m->layers[l].kind == VDNN_LAYER_POS_EMBED;
    if (!tables)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "context: %s has no pos_embed layer (a context is a sequence "
                         "model's)", m->source);
    if (context < 1 || context > VDNN_MAX_SIDE)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "context: %d is out of range (1 to %d)", context, VDNN_MAX_SIDE);
    if (m->n_init)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "context: %s carries trained parameters, whose position table "
                         "has the file's size", m->source);
    vdnn_status rc = vdnn_graph_clone(m, out, err);
    if (rc != VDNN_OK) return rc;
    for (int l = 1; l < m->n_layers; l++)
        if ((*out)->layers[l].kind == VDNN_LAYER_POS_EMBED) (*out)->layers[l].p.context = context;
    (*out)->default_input = (vdnn_shape){0, 1, context, 1};
    return VDNN_OK;
}

vdnn_status vdnn_model_with_steps(const vdnn_model_t *m, int steps, vdnn_model_t **out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_with_steps: no model or no place for the copy");
    *out = NULL;
    if (steps < 1 || steps > VDNN_MAX_SIDE)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "steps: %d is out of range (1 to %d)", steps, VDNN_MAX_SIDE);
    return vdnn_graph_with_steps(m, steps, out, err);
}

int vdnn_model_lstm_count(const vdnn_model_t *m)
{
    int n = 0;
    for (int l = 1; m && l < m->n_layers; l++) n += m->layers[l].kind == VDNN_LAYER_LSTM && !m->layers[l].p.chunk_index;
    return n;
}

vdnn_status vdnn_model_with_head_groups(const vdnn_model_t *m, int groups, vdnn_model_t **out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_with_head_groups: no model or no place for the copy");
    *out = NULL;
    int attention = 0;
    for (int l = 1; l < m->n_layers; l++) {
        const vdnn_layer *L = &m->layers[l];
        if (L->kind != VDNN_LAYER_ATTN_PROBS) continue;
        attention++;
        if (L->p.head_count)
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "head groups: %s computes attention '%s' in groups already",
                             m->source, L->name);
        if (groups < 1 || L->p.heads % groups)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "head groups: %d does not divide the %d heads of '%s' (%s)",
                             groups, L->p.heads, L->name, m->source);
    }
    if (!attention)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "head groups: %s has no attention (attn_probs) layer", m->source);
    vdnn_status rc = vdnn_graph_clone(m, out, err);
    if (rc != VDNN_OK) return rc;
    for (int l = 1; l < m->n_layers; l++)
        if ((*out)->layers[l].kind == VDNN_LAYER_ATTN_PROBS) (*out)->layers[l].p.groups = groups;
    if ((rc = vdnn_graph_expand_attention(*out, err)) != VDNN_OK) {
        vdnn_graph_free(*out);
        *out = NULL;
    }
    return rc;
}

int vdnn_model_attention_count(const vdnn_model_t *m)
{
    int n = 0;
    for (int l = 1; m && l < m->n_layers; l++) n += m->layers[l].kind == VDNN_LAYER_ATTN_PROBS;
    return n;
}

vdnn_status vdnn_model_with_fused_attentions(const vdnn_model_t *m, const bool *fuse, int count, vdnn_model_t **out,
                                             vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_with_fused_attention: no model or no place for the copy");
    *out = NULL;
    const int n = vdnn_model_attention_count(m);
    if (!n) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fused attention: %s has no attention (attn_probs) layer", m->source);
    if (fuse && count != n)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fused attention: %d choices given, %s has %d attentions", count,
                         m->source, n);
    vdnn_status rc = vdnn_graph_clone(m, out, err);
    if (rc == VDNN_OK) rc = vdnn_graph_fuse_attention(*out, fuse, err);
    if (rc != VDNN_OK) {
        vdnn_graph_free(*out);
        *out = NULL;
    }
    return rc;
}

vdnn_status vdnn_model_with_fused_attention(const vdnn_model_t *m, vdnn_model_t **out, vdnn_error *err)
{
    return vdnn_model_with_fused_attentions(m, NULL, 0, out, err);
}

vdnn_status vdnn_model_layers(const vdnn_model_t *m, vdnn_shape input, int classes, vdnn_backend_t *be,
                              vdnn_layer_info *out, vdnn_error *err)
{
    return vdnn_model_layers_precision(m, input, classes, be, VDNN_PRECISION_FP32, out, err);
}

vdnn_status vdnn_model_layers_precision(const vdnn_model_t *m, vdnn_shape input, int classes, vdnn_backend_t *be,
                                        vdnn_precision precision, vdnn_layer_info *out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_layers: no model or no place for the layers");
    if ((unsigned)precision >= VDNN_PRECISION_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.precision: %d is out of range (fp32, bf16 or fp16)",
                         (int)precision);
    vdnn_graph_t *g = NULL;
    vdnn_status rc = vdnn_graph_resolved_copy(m, input, classes, &g, err);
    if (rc == VDNN_OK) g->dtype = (vdnn_dtype)precision;
    if (rc == VDNN_OK && be) rc = vdnn_backend_check_dtype(be, g->dtype, g, err);
    for (int l = 0; rc == VDNN_OK && l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        vdnn_layer_info *o = &out[l];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", ly->name);
        snprintf(o->type, sizeof o->type, "%s", vdnn_layer_kind_name(ly->kind));
        o->n_inputs = ly->n_inputs;
        memcpy(o->inputs, ly->inputs, sizeof o->inputs);
        o->out = ly->out;
        o->out_bytes = vdnn_map_bytes(g, ly->out);
        o->weights = ly->n_weight;
        o->biases = ly->n_bias;
        o->stats = ly->n_stats;
        o->flops_fwd = ly->flops_fwd;
        o->flops_bwd = ly->flops_bwd;
        if (be && l > 0) {
            vdnn_op_desc d;
            vdnn_op_info info;
            vdnn_op_desc_from_layer(g, l, true, &d);
            rc = be->ops->op_query(be, &d, &info, err);
            o->aux_bytes = info.aux_bytes;
            o->fwd_ws_bytes = info.fwd_ws_bytes;
            o->bwd_ws_bytes = info.bwd_ws_bytes;
        }
    }
    vdnn_graph_free(g);
    return rc;
}
