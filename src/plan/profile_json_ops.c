/* The parts of a profile file that describe the device rather than its times: the device and its settings, the
 * op type, each layer's kind and shape, and each layer's op candidates (what plans read instead of asking a
 * backend). Hand-written files (tests/data/gpu-fixture-*.json) are read by the same rules, so every candidate
 * field is required and an unknown one refused: a misspelt key must not become a zero. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/profile_json.h"

/* ---- writing ---- */

static void write_size(FILE *f, const char *key, size_t v)
{
    if (v != SIZE_MAX) fprintf(f, ", \"%s\": %zu", key, v);
}

static void write_switch(FILE *f, const char *key, int v)
{
    if (v >= 0) fprintf(f, ", \"%s\": %s", key, v ? "true" : "false");
}

static void write_text(FILE *f, const char *key, const char *v)
{
    fprintf(f, ", \"%s\": ", key);
    vdnn_json_write_string(f, v);
}

void vdnn_profile_write_device(FILE *f, const vdnn_profile *p)
{
    const vdnn_device_info *d = &p->dev;
    if (d->backend[0]) {
        fprintf(f, "  \"device_info\": {\"backend\": ");
        vdnn_json_write_string(f, d->backend);
        write_text(f, "name", d->name);
        write_size(f, "total_bytes", d->total_bytes);
        write_size(f, "free_bytes", d->free_bytes);
        write_text(f, "compute", d->compute);
        write_text(f, "runtime", d->runtime);
        write_text(f, "library", d->library);
        write_switch(f, "tf32", d->tf32);
        write_switch(f, "deterministic", d->deterministic);
        write_switch(f, "benchmark", d->benchmark);
        write_text(f, "settings", d->settings);
        fprintf(f, "},\n");
    }
    if (p->ops) {
        fprintf(f, "  \"precision\": \"%s\",\n  \"op_info_source\": ", vdnn_dtype_name(p->dtype));
        vdnn_json_write_string(f, p->op_info_source[0] ? p->op_info_source : "backend");
        fprintf(f, ",\n");
    }
    if (p->note[0]) {
        fprintf(f, "  \"note\": ");
        vdnn_json_write_string(f, p->note);
        fprintf(f, ",\n");
    }
}

void vdnn_profile_write_layer_shape(FILE *f, const vdnn_profile *p, int l)
{
    const vdnn_shape s = p->outs ? p->outs[l] : (vdnn_shape){0, 0, 0, 0};
    if (!s.n) return; /* a profile made without its graph */
    fprintf(f, ", \"kind\": \"%s\", \"out\": \"%dx%dx%dx%d\"", vdnn_layer_kind_name(p->kinds[l]), s.n, s.c, s.h, s.w);
}

void vdnn_profile_write_layer_ops(FILE *f, const vdnn_profile *p, int l)
{
    if (!p->ops) return;
    const vdnn_layer_algos *a = &p->ops[l];
    fprintf(f, ", \"ops\": [");
    for (int k = 0; k < a->n; k++) {
        const vdnn_op_algo *c = &a->a[k];
        const vdnn_op_info *i = &c->info;
        fprintf(f, "%s\n      {\"algo\": ", k ? "," : "");
        vdnn_json_write_string(f, c->name);
        fprintf(f, ", \"numerics\": %d, \"aux_bytes\": %zu, \"fwd_ws_bytes\": %zu, \"bwd_ws_bytes\": %zu, "
                   "\"bwd_needs_x\": %s, \"bwd_needs_y\": %s, \"inplace_ok\": %s, \"bwd_inplace_ok\": %s, "
                   "\"stream_ok\": %s, \"chunk_images\": %d",
                c->numerics, i->aux_bytes, i->fwd_ws_bytes, i->bwd_ws_bytes, i->bwd_needs_x ? "true" : "false",
                i->bwd_needs_y ? "true" : "false", i->inplace_ok ? "true" : "false", i->bwd_inplace_ok ? "true" : "false",
                i->stream_ok ? "true" : "false", i->chunk_images);
        /* What the candidate runs (cuDNN's algorithms per pass), for people reading the profile. */
        if (c->detail[0]) {
            fprintf(f, ", \"detail\": ");
            vdnn_json_write_string(f, c->detail);
        }
        fputc('}', f);
    }
    fputc(']', f);
}

/* ---- reading ---- */

/* An optional string member into buf (at most n - 1 bytes). */
static vdnn_status read_text(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, char *buf, size_t n)
{
    const vdnn_json *v = vdnn_json_get(obj, key);
    if (!v) return VDNN_OK;
    if (v->type != VDNN_JSON_STRING || strlen(v->string) >= n) {
        char what[48];
        snprintf(what, sizeof what, "a string of at most %zu bytes", n - 1);
        return vdnn_pjson_wrong(r, v, key, what);
    }
    snprintf(buf, n, "%s", v->string);
    return VDNN_OK;
}

/* An optional whole number (absent: SIZE_MAX, unlimited). */
static vdnn_status read_size(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, size_t *out)
{
    *out = SIZE_MAX;
    if (!vdnn_json_get(obj, key)) return VDNN_OK;
    double v;
    vdnn_status rc = vdnn_pjson_int(r, obj, key, VDNN_PJSON_MAX_INT, &v);
    if (rc == VDNN_OK) *out = (size_t)v;
    return rc;
}

/* An optional switch (absent: -1, the backend has none). */
static vdnn_status read_switch(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, int *out)
{
    *out = -1;
    const vdnn_json *v = vdnn_json_get(obj, key);
    if (!v) return VDNN_OK;
    if (v->type != VDNN_JSON_BOOL) return vdnn_pjson_wrong(r, v, key, "true or false");
    *out = v->boolean;
    return VDNN_OK;
}

static vdnn_status read_precision(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p)
{
    p->dtype = VDNN_DTYPE_F32; /* files before other types were planned */
    const vdnn_json *v = vdnn_json_get(root, "precision");
    if (!v) return VDNN_OK;
    for (int t = 0; v->type == VDNN_JSON_STRING && t < VDNN_DTYPE_COUNT; t++)
        if (!strcmp(v->string, vdnn_dtype_name((vdnn_dtype)t))) {
            p->dtype = (vdnn_dtype)t;
            return VDNN_OK;
        }
    return vdnn_pjson_wrong(r, v, "precision", "\"fp32\", \"bf16\" or \"fp16\"");
}

/* "backend" or "described"; absent: "" (files without op info). */
static vdnn_status read_op_source(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p)
{
    const vdnn_json *v = vdnn_json_get(root, "op_info_source");
    if (!v) return VDNN_OK;
    if (v->type != VDNN_JSON_STRING || (strcmp(v->string, "backend") && strcmp(v->string, "described")))
        return vdnn_pjson_wrong(r, v, "op_info_source",
                                "\"backend\" (asked of the backend on the device) or \"described\" (from its rules, "
                                "without the device)");
    snprintf(p->op_info_source, sizeof p->op_info_source, "%s", v->string);
    return VDNN_OK;
}

vdnn_status vdnn_profile_read_device(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p)
{
    vdnn_status rc = read_precision(r, root, p);
    if (!rc) rc = read_op_source(r, root, p);
    if (!rc) rc = read_text(r, root, "note", p->note, sizeof p->note);
    const vdnn_json *d = vdnn_json_get(root, "device_info");
    if (rc || !d) return rc;
    if (d->type != VDNN_JSON_OBJECT) return vdnn_pjson_wrong(r, d, "device_info", "an object");
    vdnn_device_info *o = &p->dev;
    const vdnn_json *b;
    rc = vdnn_pjson_get(r, d, "backend", VDNN_JSON_STRING, "a string", &b);
    if (!rc) rc = read_text(r, d, "backend", o->backend, sizeof o->backend);
    if (!rc && !o->backend[0]) rc = vdnn_pjson_wrong(r, b, "backend", "a backend's name, such as \"cuda\"");
    if (!rc) rc = read_text(r, d, "name", o->name, sizeof o->name);
    if (!rc) rc = read_size(r, d, "total_bytes", &o->total_bytes);
    if (!rc) rc = read_size(r, d, "free_bytes", &o->free_bytes);
    if (!rc) rc = read_text(r, d, "compute", o->compute, sizeof o->compute);
    if (!rc) rc = read_text(r, d, "runtime", o->runtime, sizeof o->runtime);
    if (!rc) rc = read_text(r, d, "library", o->library, sizeof o->library);
    if (!rc) rc = read_switch(r, d, "tf32", &o->tf32);
    if (!rc) rc = read_switch(r, d, "deterministic", &o->deterministic);
    if (!rc) rc = read_switch(r, d, "benchmark", &o->benchmark);
    if (!rc) rc = read_text(r, d, "settings", o->settings, sizeof o->settings);
    return rc;
}

vdnn_status vdnn_profile_check_layer_shape(const vdnn_pjson_reader *r, const vdnn_json *ly, const vdnn_graph_t *g, int l)
{
    const vdnn_layer *L = &g->layers[l];
    const vdnn_json *k = vdnn_json_get(ly, "kind"), *o = vdnn_json_get(ly, "out");
    if (k && (k->type != VDNN_JSON_STRING || strcmp(k->string, vdnn_layer_kind_name(L->kind))))
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s:%d:%d: layer '%s' is a %s in model %s, not what the profile says",
                         r->path, k->line, k->col, L->name, vdnn_layer_kind_name(L->kind), g->name);
    if (!o) return VDNN_OK;
    char want[64];
    snprintf(want, sizeof want, "%dx%dx%dx%d", L->out.n, L->out.c, L->out.h, L->out.w);
    if (o->type != VDNN_JSON_STRING || strcmp(o->string, want))
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH,
                         "%s:%d:%d: layer '%s' has output %.40s in the profile but %s in model %s (another definition "
                         "of the model: profile again)",
                         r->path, o->line, o->col, L->name, o->type == VDNN_JSON_STRING ? o->string : "?", want, g->name);
    return VDNN_OK;
}

static const char *const cand_keys[] = {"algo",        "numerics",       "aux_bytes", "fwd_ws_bytes",
                                        "bwd_ws_bytes", "bwd_needs_x",   "bwd_needs_y", "inplace_ok",
                                        "bwd_inplace_ok", "stream_ok",   "chunk_images", "detail"};
#define N_CAND_KEYS (int)(sizeof cand_keys / sizeof cand_keys[0])

static vdnn_status read_flag(const vdnn_pjson_reader *r, const vdnn_json *c, const char *key, bool *out)
{
    const vdnn_json *v;
    vdnn_status rc = vdnn_pjson_get(r, c, key, VDNN_JSON_BOOL, "true or false", &v);
    if (rc == VDNN_OK) *out = v->boolean;
    return rc;
}

static vdnn_status read_bytes(const vdnn_pjson_reader *r, const vdnn_json *c, const char *key, size_t *out)
{
    double v;
    vdnn_status rc = vdnn_pjson_int(r, c, key, VDNN_PJSON_MAX_INT, &v);
    if (rc == VDNN_OK) *out = (size_t)v;
    return rc;
}

static vdnn_status read_candidate(const vdnn_pjson_reader *r, const vdnn_json *c, vdnn_op_algo *a)
{
    if (c->type != VDNN_JSON_OBJECT) return vdnn_pjson_wrong(r, c, "ops", "an array of candidate objects");
    for (int i = 0; i < c->n; i++) {
        int k = 0;
        while (k < N_CAND_KEYS && strcmp(c->keys[i], cand_keys[k])) k++;
        if (k == N_CAND_KEYS)
            return vdnn_fail(r->err, VDNN_ERR_FORMAT,
                             "%s:%d:%d: unknown key \"%.40s\" in an op candidate (algo, numerics, aux_bytes, "
                             "fwd_ws_bytes, bwd_ws_bytes, bwd_needs_x, bwd_needs_y, inplace_ok, bwd_inplace_ok, "
                             "stream_ok, chunk_images, detail)",
                             r->path, c->items[i].line, c->items[i].col, c->keys[i]);
    }
    memset(a, 0, sizeof *a);
    vdnn_op_info *i = &a->info;
    const vdnn_json *name, *num;
    vdnn_status rc = vdnn_pjson_get(r, c, "algo", VDNN_JSON_STRING, "a string", &name);
    if (!rc && (!name->string[0] || strlen(name->string) >= sizeof a->name))
        rc = vdnn_pjson_wrong(r, name, "algo", "a name of 1 to 23 bytes");
    if (!rc) snprintf(a->name, sizeof a->name, "%s", name->string);
    if (!rc) rc = vdnn_pjson_get(r, c, "numerics", VDNN_JSON_NUMBER, "a whole number", &num);
    if (!rc && (num->number != floor(num->number) || fabs(num->number) > INT32_MAX))
        rc = vdnn_pjson_wrong(r, num, "numerics", "a whole number (negative: not reproducible)");
    if (!rc) a->numerics = (int)num->number;
    if (!rc) rc = read_bytes(r, c, "aux_bytes", &i->aux_bytes);
    if (!rc) rc = read_bytes(r, c, "fwd_ws_bytes", &i->fwd_ws_bytes);
    if (!rc) rc = read_bytes(r, c, "bwd_ws_bytes", &i->bwd_ws_bytes);
    if (!rc) rc = read_flag(r, c, "bwd_needs_x", &i->bwd_needs_x);
    if (!rc) rc = read_flag(r, c, "bwd_needs_y", &i->bwd_needs_y);
    if (!rc) rc = read_flag(r, c, "inplace_ok", &i->inplace_ok);
    if (!rc) rc = read_flag(r, c, "bwd_inplace_ok", &i->bwd_inplace_ok);
    if (!rc) rc = read_flag(r, c, "stream_ok", &i->stream_ok);
    double chunk;
    if (!rc) rc = vdnn_pjson_int(r, c, "chunk_images", INT32_MAX, &chunk);
    if (!rc) i->chunk_images = (int)chunk;
    if (!rc) rc = read_text(r, c, "detail", a->detail, sizeof a->detail);
    return rc;
}

vdnn_status vdnn_profile_read_layer_ops(const vdnn_pjson_reader *r, const vdnn_json *ly, vdnn_profile *p, int l)
{
    const vdnn_json *arr = vdnn_json_get(ly, "ops");
    /* All layers or none: the first layer decides. */
    if (!arr) {
        if (!p->ops) return VDNN_OK;
        return vdnn_fail(r->err, VDNN_ERR_FORMAT, "%s:%d:%d: layer '%s' has no \"ops\", but the layers before it do "
                         "(op info is recorded for every layer or none)", r->path, ly->line, ly->col, p->names[l]);
    }
    if (!p->ops && l > 1)
        return vdnn_fail(r->err, VDNN_ERR_FORMAT, "%s:%d:%d: layer '%s' has \"ops\", but layer '%s' before it has none "
                         "(op info is recorded for every layer or none)", r->path, arr->line, arr->col, p->names[l], p->names[1]);
    if (arr->type != VDNN_JSON_ARRAY || arr->n < 1 || arr->n > VDNN_MAX_ALGOS)
        return vdnn_pjson_wrong(r, arr, "ops", "an array of 1 to 4 candidates, the default first");
    if (!p->ops && !(p->ops = calloc((size_t)p->n_layers, sizeof *p->ops)))
        return vdnn_fail(r->err, VDNN_ERR_NO_MEMORY, "%s: out of memory for the op info", r->path);
    vdnn_layer_algos *a = &p->ops[l];
    for (int k = 0; k < arr->n; k++) {
        vdnn_status rc = read_candidate(r, &arr->items[k], &a->a[k]);
        if (rc) return rc;
        a->n = k + 1;
    }
    if (p->n_algos[l] > a->n)
        return vdnn_fail(r->err, VDNN_ERR_FORMAT, "%s:%d:%d: layer '%s' has times of %d algorithms but %d candidates",
                         r->path, arr->line, arr->col, p->names[l], p->n_algos[l], a->n);
    return VDNN_OK;
}
