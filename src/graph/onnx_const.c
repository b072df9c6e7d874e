/* Constant tensors of an ONNX model (initializers, Constant nodes): their sizes and values, and their use as a
 * layer's initial parameters. */
#include "graph/onnx_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* raw_data is little-endian by the ONNX spec; it is copied as is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data decoding assumes a little-endian host"
#endif

#define MAX_ELEMENTS ((size_t)1 << 31)

static const char *tname(const Onnx__TensorProto *t) { return vdnn_onnx_str(t->name); }

void onnx_dims_str(const Onnx__TensorProto *t, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%s", t->n_dims ? "" : "scalar");
    for (size_t i = 0; i < t->n_dims && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "x" : "", (long long)t->dims[i]);
}

vdnn_status onnx_const_count(onnx_map *x, const Onnx__TensorProto *t, size_t *count)
{
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "tensor '%s' is stored in an external file (vdnn reads models with their weights inside)",
                         tname(t));
    if (t->segment) return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "tensor '%s' is segmented", tname(t));
    size_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || (t->dims[i] && n > MAX_ELEMENTS / (size_t)t->dims[i]))
            return onnx_fail(x, VDNN_ERR_PARSE, "tensor '%s' has a bad shape (dimension %lld)", tname(t),
                             (long long)t->dims[i]);
        n *= (size_t)t->dims[i];
    }
    *count = n;
    return VDNN_OK;
}

/* Values from raw_data (elem bytes each) or from the typed field with `typed_n` entries. */
static vdnn_status stored_as(onnx_map *x, const Onnx__TensorProto *t, size_t count, size_t elem, size_t typed_n,
                             bool *raw)
{
    *raw = t->has_raw_data;
    if (*raw ? t->raw_data.len == count * elem : typed_n == count) return VDNN_OK;
    return onnx_fail(x, VDNN_ERR_FORMAT, "tensor '%s' holds %zu values but its shape needs %zu", tname(t),
                     *raw ? t->raw_data.len / elem : typed_n, count);
}

/* Element i, from raw_data or the typed field, into v[i] as float (float and double tensors) or int64_t
 * (int32 and int64 tensors). */
static void convert(const Onnx__TensorProto *t, bool raw, size_t i, void *v)
{
    float f;
    double d;
    int32_t w;
    int64_t l;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        if (raw) memcpy(&f, t->raw_data.data + i * sizeof f, sizeof f);
        else f = t->float_data[i];
        ((float *)v)[i] = f;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        if (raw) memcpy(&d, t->raw_data.data + i * sizeof d, sizeof d);
        else d = t->double_data[i];
        ((float *)v)[i] = (float)d;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        if (raw) memcpy(&w, t->raw_data.data + i * sizeof w, sizeof w);
        else w = t->int32_data[i];
        ((int64_t *)v)[i] = w;
        break;
    default:
        if (raw) memcpy(&l, t->raw_data.data + i * sizeof l, sizeof l);
        else l = t->int64_data[i];
        ((int64_t *)v)[i] = l;
    }
}

static vdnn_status const_values(onnx_map *x, const Onnx__TensorProto *t, bool ints, void **out, size_t *count)
{
    *out = NULL;
    vdnn_status st = onnx_const_count(x, t, count);
    if (st) return st;
    size_t n = *count, elem = 0, typed_n = 0;
    bool is_int = false;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: elem = sizeof(float), typed_n = t->n_float_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: elem = sizeof(double), typed_n = t->n_double_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: elem = sizeof(int32_t), typed_n = t->n_int32_data, is_int = true; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: elem = sizeof(int64_t), typed_n = t->n_int64_data, is_int = true; break;
    default: break;
    }
    if (!elem || is_int != ints)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "tensor '%s' has data type %d (vdnn reads %s here)", tname(t),
                         (int)t->data_type, ints ? "integers" : "float32 values");
    bool raw;
    if ((st = stored_as(x, t, n, elem, typed_n, &raw))) return st;
    void *v = malloc(n ? n * (ints ? sizeof(int64_t) : sizeof(float)) : 1);
    if (!v) return onnx_fail(x, VDNN_ERR_NO_MEMORY, "out of memory for tensor '%s'", tname(t));
    for (size_t i = 0; i < n; i++) convert(t, raw, i, v);
    *out = v;
    return VDNN_OK;
}

/* On failure no values and a count of 0, so a caller's loop over them does nothing. */
vdnn_status onnx_const_floats(onnx_map *x, const Onnx__TensorProto *t, float **out, size_t *count)
{
    void *v;
    vdnn_status st = const_values(x, t, false, &v, count);
    *out = v;
    if (st) *count = 0;
    return st;
}

vdnn_status onnx_const_ints(onnx_map *x, const Onnx__TensorProto *t, int64_t **out, size_t *count)
{
    void *v;
    vdnn_status st = const_values(x, t, true, &v, count);
    *out = v;
    if (st) *count = 0;
    return st;
}

vdnn_status onnx_const_scalar(onnx_map *x, const Onnx__TensorProto *t, double *out)
{
    float *v;
    size_t n;
    vdnn_status st = onnx_const_floats(x, t, &v, &n);
    if (!st && n != 1) st = onnx_fail(x, VDNN_ERR_PARSE, "tensor '%s' holds %zu values, expected one", tname(t), n);
    if (!st) *out = v[0];
    free(v);
    return st;
}

vdnn_status onnx_set_init(onnx_map *x, int layer, const char *suffix, float *values, size_t count,
                          const Onnx__TensorProto *from)
{
    vdnn_graph_t *g = x->g;
    int cap = x->cap_init;
    vdnn_status st = onnx_grow(x, &g->init, sizeof *g->init, g->n_init, &cap);
    if (!st) st = onnx_grow(x, &x->init_src, sizeof *x->init_src, g->n_init, &x->cap_init);
    if (st) {
        free(values);
        return st;
    }
    vdnn_param_init *pi = &g->init[g->n_init];
    snprintf(pi->name, sizeof pi->name, "%s%s", g->layers[layer].name, suffix);
    snprintf(pi->source, sizeof pi->source, "%s", tname(from));
    pi->count = count;
    pi->values = values;
    onnx_init_src *src = &x->init_src[g->n_init];
    src->layer = layer;
    src->node = x->node_index;
    src->tensor = tname(from);
    src->from = from;
    src->from_var = NULL;
    src->transposed = false;
    onnx_dims_str(from, src->dims, sizeof src->dims);
    g->n_init++;
    return VDNN_OK;
}

vdnn_status onnx_init_from(onnx_map *x, int layer, const char *suffix, const Onnx__TensorProto *t)
{
    float *v;
    size_t n;
    vdnn_status st = onnx_const_floats(x, t, &v, &n);
    return st ? st : onnx_set_init(x, layer, suffix, v, n, t);
}
