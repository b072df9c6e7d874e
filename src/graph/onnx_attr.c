/* Reading a node's attributes with defaults, type checks and ranges; errors name the node and the attribute. */
#include "graph/onnx_map.h"

#include <stdio.h>
#include <string.h>

static const Onnx__AttributeProto *find_attr(const onnx_map *x, const char *name)
{
    for (size_t i = 0; i < x->node->n_attribute; i++)
        if (!strcmp(vdnn_onnx_str(x->node->attribute[i]->name), name)) return x->node->attribute[i];
    return NULL;
}

bool onnx_has_attr(const onnx_map *x, const char *name) { return find_attr(x, name) != NULL; }

/* Older writers leave `type` unset; then the field that holds a value decides. */
static vdnn_status want_type(onnx_map *x, const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t,
                             bool present, const char *what)
{
    if (a->has_type ? a->type == t : present) return VDNN_OK;
    return onnx_fail(x, VDNN_ERR_PARSE, "attribute '%s' is not %s", a->name, what);
}

vdnn_status onnx_attr_int(onnx_map *x, const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    const Onnx__AttributeProto *a = find_attr(x, name);
    *out = def;
    if (!a) return VDNN_OK;
    vdnn_status st = want_type(x, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i, "an integer");
    if (st) return st;
    if (a->i < lo || a->i > hi)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "%s=%lld is not supported (vdnn takes %lld to %lld)", name,
                         (long long)a->i, (long long)lo, (long long)hi);
    *out = a->i;
    return VDNN_OK;
}

vdnn_status onnx_attr_float(onnx_map *x, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a = find_attr(x, name);
    *out = def;
    if (!a) return VDNN_OK;
    vdnn_status st = want_type(x, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, a->has_f, "a float");
    if (!st) *out = a->f;
    return st;
}

vdnn_status onnx_attr_ints(onnx_map *x, const char *name, int64_t *out, int max, int *n)
{
    const Onnx__AttributeProto *a = find_attr(x, name);
    *n = 0;
    if (!a) return VDNN_OK;
    vdnn_status st = want_type(x, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, a->n_ints > 0, "a list of integers");
    if (st) return st;
    if (a->n_ints > (size_t)max)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "attribute '%s' has %zu values (vdnn takes at most %d here)", name,
                         a->n_ints, max);
    if (a->n_ints) memcpy(out, a->ints, a->n_ints * sizeof *out);
    *n = (int)a->n_ints;
    return VDNN_OK;
}

vdnn_status onnx_attr_string(onnx_map *x, const char *name, const char *def, char *out, size_t len)
{
    const Onnx__AttributeProto *a = find_attr(x, name);
    snprintf(out, len, "%s", def);
    if (!a) return VDNN_OK;
    vdnn_status st = want_type(x, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, a->has_s, "a string");
    if (st) return st;
    if (a->s.len >= len || (a->s.len && memchr(a->s.data, 0, a->s.len)))
        return onnx_fail(x, VDNN_ERR_PARSE, "attribute '%s' is not a short text", name);
    if (a->s.len) memcpy(out, a->s.data, a->s.len);
    out[a->s.len] = '\0';
    return VDNN_OK;
}
