/* Decodes an ONNX file with the generated protobuf-c code and checks what every mapping relies on. */
#include "graph/onnx_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE_BYTES ((size_t)2 << 30)
#define MAX_INPUT_DIM (1L << 24)

vdnn_status vdnn_onnx_read_file(const char *path, uint8_t **data, size_t *len, vdnn_error *err)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open model file: %s", path, strerror(errno));
    struct stat sb;
    vdnn_status st = VDNN_OK;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        st = vdnn_fail(err, VDNN_ERR_IO, "%s: not a regular file", path);
    else if ((unsigned long long)sb.st_size > MAX_FILE_BYTES)
        st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: model file is too large (over 2 GiB)", path);
    size_t n = st ? 0 : (size_t)sb.st_size;
    uint8_t *buf = st ? NULL : malloc(n ? n : 1);
    if (!st && !buf) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory reading %zu bytes", path, n);
    if (!st && fread(buf, 1, n, f) != n) st = vdnn_fail(err, VDNN_ERR_IO, "%s: read error", path);
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = n;
    return VDNN_OK;
}

void vdnn_onnx_model_free(vdnn_onnx_model *m)
{
    if (m && m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
    if (m) memset(m, 0, sizeof *m);
}

static vdnn_status check_opset(vdnn_onnx_model *m, vdnn_error *err)
{
    const Onnx__ModelProto *p = m->proto;
    if (!p->has_ir_version || p->ir_version < 3)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: ONNX IR version %lld is not supported (vdnn reads IR version 3 and later, which "
                         "declare their opsets)",
                         m->source, p->has_ir_version ? (long long)p->ir_version : 0LL);
    bool found = false;
    for (size_t i = 0; i < p->n_opset_import; i++) {
        const char *d = vdnn_onnx_str(p->opset_import[i]->domain);
        if (strcmp(d, "") && strcmp(d, "ai.onnx")) continue;
        found = true;
        m->opset = p->opset_import[i]->has_version ? p->opset_import[i]->version : 0;
    }
    if (!found)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: the model declares no opset for the default domain ai.onnx",
                         m->source);
    if (m->opset < VDNN_ONNX_OPSET_MIN || m->opset > VDNN_ONNX_OPSET_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: opset %lld of ai.onnx is not supported (vdnn reads opsets %d to %d)", m->source,
                         (long long)m->opset, VDNN_ONNX_OPSET_MIN, VDNN_ONNX_OPSET_MAX);
    return VDNN_OK;
}

static bool is_initializer(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (!strcmp(vdnn_onnx_str(g->initializer[i]->name), name)) return true;
    return false;
}

/* The image input: float, rank 4, C, H and W fixed; the batch may be symbolic (a dim_param or unset). */
static vdnn_status check_input_type(vdnn_onnx_model *m, const Onnx__ValueInfoProto *v, vdnn_error *err)
{
    const char *name = m->input;
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", m->source, name);
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    if (!tt->has_elem_type || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: input '%s' has element type %d (vdnn takes float32 images)",
                         m->source, name, tt->has_elem_type ? (int)tt->elem_type : 0);
    if (!tt->shape)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: input '%s' has no shape (vdnn needs N x C x H x W with C, H and W fixed)", m->source,
                         name);
    if (tt->shape->n_dim != 4)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: input '%s' has rank %zu (vdnn takes images: N x C x H x W)", m->source, name,
                         tt->shape->n_dim);
    static const char *const axis[4] = {"N", "C", "H", "W"};
    for (int k = 0; k < 4; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        bool fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (!fixed && k == 0) {
            m->in_dims[0] = 0;
            continue;
        }
        if (!fixed)
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                             "%s: input '%s' has a symbolic %s ('%s'): only the batch dimension may be symbolic, "
                             "C, H and W must be fixed",
                             m->source, name, axis[k],
                             d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                 ? vdnn_onnx_str(d->dim_param)
                                 : "unknown");
        if (d->dim_value < 1 || d->dim_value > MAX_INPUT_DIM)
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: input '%s' has %s = %lld (must be between 1 and %ld)",
                             m->source, name, axis[k], (long long)d->dim_value, MAX_INPUT_DIM);
        m->in_dims[k] = d->dim_value;
    }
    return VDNN_OK;
}

static vdnn_status check_io(vdnn_onnx_model *m, vdnn_error *err)
{
    const Onnx__GraphProto *g = m->graph;
    const Onnx__ValueInfoProto *in = NULL;
    size_t n_in = 0;
    char names[256] = "";
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = vdnn_onnx_str(g->input[i]->name);
        if (is_initializer(g, name)) continue; /* IR < 4 lists initializers as inputs too */
        if (!in) in = g->input[i];
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s'%s'", n_in ? ", " : "", name);
        n_in++;
    }
    if (n_in != 1)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: the graph has %zu inputs besides its initializers%s%s (vdnn models take exactly one "
                         "image input)",
                         m->source, n_in, n_in ? ": " : "", names);
    m->input = vdnn_onnx_str(in->name);
    if (!*m->input) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: the graph input has no name", m->source);
    vdnn_status st = check_input_type(m, in, err);
    if (st) return st;
    if (g->n_output != 1)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "%s: the graph has %zu outputs (vdnn models have exactly one: the logits its loss reads)",
                         m->source, g->n_output);
    m->output = vdnn_onnx_str(g->output[0]->name);
    if (!*m->output) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: the graph output has no name", m->source);
    return VDNN_OK;
}

static vdnn_status check_graph(vdnn_onnx_model *m, vdnn_error *err)
{
    const Onnx__GraphProto *g = m->graph;
    if (g->n_sparse_initializer)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", m->source);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const char *name = vdnn_onnx_str(g->initializer[i]->name);
        if (!*name) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: initializer %zu has no name", m->source, i);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(name, vdnn_onnx_str(g->initializer[j]->name)))
                return vdnn_fail(err, VDNN_ERR_PARSE, "%s: two initializers are named '%s'", m->source, name);
    }
    for (size_t i = 0; i < g->n_node; i++)
        if (!*vdnn_onnx_str(g->node[i]->op_type))
            return vdnn_fail(err, VDNN_ERR_PARSE, "%s: node %zu ('%s') has no op type", m->source, i,
                             vdnn_onnx_str(g->node[i]->name));
    if (!g->n_node) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: the graph has no nodes", m->source);
    return check_io(m, err);
}

vdnn_status vdnn_onnx_read(const void *data, size_t len, const char *source, vdnn_onnx_model *m, vdnn_error *err)
{
    memset(m, 0, sizeof *m);
    m->source = source ? source : "<onnx>";
    if (!data || !len) return vdnn_fail(err, VDNN_ERR_FORMAT, "%s: the ONNX model is empty", m->source);
    m->proto = onnx__model_proto__unpack(NULL, len, data);
    if (!m->proto)
        return vdnn_fail(err, VDNN_ERR_FORMAT,
                         "%s: not a valid ONNX model (protobuf decoding failed: the file is truncated, corrupt or "
                         "not ONNX)",
                         m->source);
    vdnn_status st = check_opset(m, err);
    if (!st && !m->proto->graph) st = vdnn_fail(err, VDNN_ERR_PARSE, "%s: the ONNX model has no graph", m->source);
    if (!st) {
        m->graph = m->proto->graph;
        st = check_graph(m, err);
    }
    if (st) vdnn_onnx_model_free(m);
    return st;
}
