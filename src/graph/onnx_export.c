/* ONNX export: the model file as it was read, with trained values written over the tensors that import made
 * parameters of, re-encoded with the generated protobuf-c code and written whole or not at all. */
#include "graph/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/onnx_map.h"

/* raw_data is little-endian by the ONNX spec; values are copied into it as they are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data encoding assumes a little-endian host"
#endif

typedef struct export_ctx {
    const char *out;                  /* for messages */
    const Onnx__TensorProto **done;   /* tensors written so far, to catch one shared by two parameters */
    const char **done_by;             /* the storage that wrote each */
    int n_done, cap_done;
    vdnn_error *err;
} export_ctx;

static size_t elem_bytes(const Onnx__TensorProto *t)
{
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return sizeof(float);
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) return sizeof(double);
    return 0; /* import reads parameters only from float and double tensors */
}

/* Puts n values into tensor t (as raw_data of its own element type, replacing whatever field held them), on
 * behalf of storage `by`. A tensor import read into two storages (weights shared by two nodes) is written once;
 * the second write must agree, since ONNX holds one value where vdnn trained two. */
static vdnn_status put(export_ctx *c, const Onnx__TensorProto *ct, const float *v, size_t n, const char *by)
{
    const char *name = vdnn_onnx_str(ct->name);
    size_t count = 1;
    for (size_t k = 0; k < ct->n_dims; k++) count *= (size_t)ct->dims[k];
    const size_t elem = elem_bytes(ct);
    if (!elem || count != n)
        return vdnn_fail(c->err, VDNN_ERR_MISMATCH, "%s: tensor '%s' (%zu values) cannot take '%s' (%zu values)",
                         c->out, name, count, by, n);
    uint8_t *buf = malloc(n * elem + 1);
    if (!buf) return vdnn_fail(c->err, VDNN_ERR_NO_MEMORY, "%s: out of memory for tensor '%s'", c->out, name);
    if (elem == sizeof(float)) {
        memcpy(buf, v, n * elem);
    } else {
        for (size_t i = 0; i < n; i++) {
            double d = v[i];
            memcpy(buf + i * elem, &d, elem);
        }
    }
    for (int i = 0; i < c->n_done; i++) {
        if (c->done[i] != ct) continue;
        bool same = ct->raw_data.len == n * elem && !memcmp(ct->raw_data.data, buf, n * elem);
        free(buf);
        if (same) return VDNN_OK;
        return vdnn_fail(c->err, VDNN_ERR_UNSUPPORTED,
                         "%s: tensor '%s' is both '%s' and '%s', which training made different: an ONNX file "
                         "holds one value for them",
                         c->out, name, c->done_by[i], by);
    }
    if (c->n_done == c->cap_done) {
        int cap = c->cap_done ? 2 * c->cap_done : 64;
        const Onnx__TensorProto **d = realloc(c->done, (size_t)cap * sizeof *d);
        if (d) c->done = d;
        const char **b = d ? realloc(c->done_by, (size_t)cap * sizeof *b) : NULL;
        if (b) c->done_by = b;
        if (!d || !b) {
            free(buf);
            return vdnn_fail(c->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", c->out);
        }
        c->cap_done = cap;
    }
    c->done[c->n_done] = ct;
    c->done_by[c->n_done++] = by;
    /* The model is ours (decoded for this export), and the tensor is one of its own: the const is import's
     * promise not to change it, which export, alone, does not need. The generated free releases these fields
     * with free() (protobuf-c's default allocator), so they are swapped for malloc'd ones. */
    Onnx__TensorProto *t = (Onnx__TensorProto *)(uintptr_t)ct;
    free(t->raw_data.data);
    t->raw_data.data = buf;
    t->raw_data.len = n * elem;
    t->has_raw_data = 1;
    free(t->float_data);
    t->float_data = NULL;
    t->n_float_data = 0;
    free(t->double_data);
    t->double_data = NULL;
    t->n_double_data = 0;
    return VDNN_OK;
}

/* One storage's trained values back to where import read them from, in ONNX's layout. */
static vdnn_status put_storage(export_ctx *c, const onnx_init_src *s, const char *name, float *v, size_t n)
{
    if (s->from_var) { /* batch norm: running means, then variances */
        vdnn_status st = put(c, s->from, v, n / 2, name);
        return st ? st : put(c, s->from_var, v + n / 2, n / 2, name);
    }
    if (!s->transposed) return put(c, s->from, v, n, name);
    /* vdnn's fc weight is outputs x inputs; the MatMul's B is inputs x outputs. */
    const Onnx__TensorProto *t = s->from;
    const size_t outputs = t->n_dims == 2 ? (size_t)t->dims[1] : 0;
    if (!outputs || n % outputs)
        return vdnn_fail(c->err, VDNN_ERR_MISMATCH, "%s: '%s' (%zu values) does not fit tensor '%s'", c->out, name, n,
                         vdnn_onnx_str(t->name));
    const size_t inputs = n / outputs;
    float *w = malloc(n * sizeof *w + 1);
    if (!w) return vdnn_fail(c->err, VDNN_ERR_NO_MEMORY, "%s: out of memory", c->out);
    for (size_t o = 0; o < outputs; o++)
        for (size_t i = 0; i < inputs; i++) w[i * outputs + o] = v[o * inputs + i];
    vdnn_status st = put(c, t, w, n, name);
    free(w);
    return st;
}

/* PATH.tmp.<pid> beside PATH (so the rename stays in one file system), written, synced, renamed over PATH; on
 * any failure the temporary is removed and PATH is as it was. */
static vdnn_status write_whole(const char *path, const uint8_t *data, size_t len, vdnn_error *err)
{
    char tmp[4200];
    int k = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (k < 0 || (size_t)k >= sizeof tmp) return vdnn_fail(err, VDNN_ERR_IO, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot write the exported model (creating %s: %s)", path, tmp,
                         strerror(errno));
    int e = 0;
    for (size_t done = 0; !e && done < len;) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) e = w < 0 ? errno : EIO;
        else done += (size_t)w;
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot write the exported model: %s", path, strerror(e));
    }
    return VDNN_OK;
}

static vdnn_status export_values(export_ctx *c, const vdnn_graph_t *g, const onnx_init_src *srcs,
                                 vdnn_onnx_param_fn get, void *ctx)
{
    for (int i = 0; i < g->n_init; i++) {
        const vdnn_param_init *pi = &g->init[i];
        float *v = malloc(pi->count * sizeof *v + 1);
        if (!v) return vdnn_fail(c->err, VDNN_ERR_NO_MEMORY, "%s: out of memory for '%s'", c->out, pi->name);
        vdnn_status st = get(ctx, pi->name, v, pi->count, c->err);
        if (!st) st = put_storage(c, &srcs[i], pi->name, v, pi->count);
        free(v);
        if (st) return st;
    }
    return VDNN_OK;
}

vdnn_status vdnn_onnx_export(const char *model, vdnn_onnx_param_fn get, void *ctx, const char *out, vdnn_error *err)
{
    if (!model || !get || !out || !*out)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "onnx_export: no model, parameters or output path");
    uint8_t *data;
    size_t len;
    vdnn_status st = vdnn_onnx_read_file(model, &data, &len, err);
    if (st) return st;
    vdnn_onnx_model m;
    st = vdnn_onnx_read(data, len, model, &m, err);
    free(data);
    if (st) return st;
    /* Mapped again, as at import, to learn which tensors hold which parameters and in which layout. */
    vdnn_graph_t *g = NULL;
    onnx_init_src *srcs = NULL;
    st = onnx_map_model(&m, &g, &srcs, err);
    export_ctx c = {.out = out, .err = err};
    if (!st) st = export_values(&c, g, srcs, get, ctx);
    uint8_t *buf = NULL;
    size_t n = 0;
    if (!st) {
        n = onnx__model_proto__get_packed_size(m.proto);
        buf = malloc(n + 1);
        if (!buf) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory for %zu bytes", out, n);
    }
    if (!st && onnx__model_proto__pack(m.proto, buf) != n)
        st = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: protobuf encoding gave an unexpected size", out);
    if (!st) st = write_whole(out, buf, n, err);
    free(buf);
    free(c.done);
    free(c.done_by);
    free(srcs);
    vdnn_graph_free(g);
    vdnn_onnx_model_free(&m);
    if (!st) vdnn_error_clear(err);
    return st;
}
