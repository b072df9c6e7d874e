/* Profile files: a flat JSON object written with exact (round-trip) numbers and read back with checks
 * against the graph it is used for. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/outfile.h"
#include "plan/profile_json.h"

/* ---- writing ---- */

static bool valid_time(double x) { return isfinite(x) && x >= 0; }

static vdnn_status check_writable(const char *path, const vdnn_profile *p, vdnn_error *err)
{
    if (p->n_layers < 1 || !p->names || !p->fwd_s || !p->bwd_s)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: the profile is not initialised", path);
    for (int l = 1; l < p->n_layers; l++) {
        if (!p->names[l][0])
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: layer %d of the profile has no name (use vdnn_profile_init_graph)", path, l);
        if (!valid_time(p->fwd_s[l]) || !valid_time(p->bwd_s[l]))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: layer '%s' has time %g / %g s (must be finite and >= 0)", path,
                             p->names[l], p->fwd_s[l], p->bwd_s[l]);
    }
    if (!valid_time(p->load_s) || !valid_time(p->update_s))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: load %g s / update %g s must be finite and >= 0", path, p->load_s, p->update_s);
    const vdnn_copy_model *m[2] = {&p->d2h, &p->h2d};
    for (int i = 0; i < 2; i++)
        if (!valid_time(m[i]->latency_s) || !(isfinite(m[i]->bytes_per_s) && m[i]->bytes_per_s > 0))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %s copy model (latency %g s, %g B/s) is not usable", path,
                             i ? "host-to-device" : "device-to-host", m[i]->latency_s, m[i]->bytes_per_s);
    const vdnn_copy_model *busy[2] = {&p->d2h_busy, &p->h2d_busy};
    for (int i = 0; i < 2; i++)
        if (busy[i]->bytes_per_s != 0 && (!valid_time(busy[i]->latency_s) || !(isfinite(busy[i]->bytes_per_s) && busy[i]->bytes_per_s > 0)))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %s copy model under compute (latency %g s, %g B/s) is not usable", path,
                             i ? "host-to-device" : "device-to-host", busy[i]->latency_s, busy[i]->bytes_per_s);
    if (!(isfinite(p->accum_bytes_per_s) && p->accum_bytes_per_s > 0))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: accumulation rate %g B/s must be positive", path, p->accum_bytes_per_s);
    if (p->n_samples < 0 || (p->n_samples && (!p->sample_bytes || !p->sample_d2h_s || !p->sample_h2d_s)))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: the profile's copy samples are not allocated", path);
    for (int i = 0; i < p->n_samples; i++)
        if (!valid_time(p->sample_d2h_s[i]) || !valid_time(p->sample_h2d_s[i]))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: copy sample %d has time %g / %g s", path, i, p->sample_d2h_s[i],
                             p->sample_h2d_s[i]);
    return VDNN_OK;
}

static void write_body(FILE *f, const vdnn_profile *p)
{
    fprintf(f, "{\n  \"format\": \"vdnn-profile\",\n  \"version\": %d,\n  \"device\": ", VDNN_PROFILE_VERSION);
    vdnn_json_write_string(f, p->device);
    fprintf(f, ",\n  \"model\": ");
    vdnn_json_write_string(f, p->model);
    fprintf(f, ",\n  \"batch\": %d,\n  \"input\": \"%dx%dx%d\",\n  \"classes\": %d,\n  \"measured\": %s,\n", p->input.n,
            p->input.c, p->input.h, p->input.w, p->classes, p->measured ? "true" : "false");
    vdnn_profile_write_device(f, p);
    fprintf(f, "  \"load_s\": %.17g,\n  \"update_s\": %.17g,\n  \"accum_bytes_per_s\": %.17g,\n", p->load_s, p->update_s,
            p->accum_bytes_per_s);
    fprintf(f, "  \"copy_compute_slowdown\": %.17g,\n", p->copy_slowdown);
    fprintf(f, "  \"d2h\": {\"latency_s\": %.17g, \"bytes_per_s\": %.17g},\n", p->d2h.latency_s, p->d2h.bytes_per_s);
    fprintf(f, "  \"h2d\": {\"latency_s\": %.17g, \"bytes_per_s\": %.17g},\n", p->h2d.latency_s, p->h2d.bytes_per_s);
    if (p->d2h_busy.bytes_per_s > 0)
        fprintf(f, "  \"d2h_busy\": {\"latency_s\": %.17g, \"bytes_per_s\": %.17g},\n", p->d2h_busy.latency_s, p->d2h_busy.bytes_per_s);
    if (p->h2d_busy.bytes_per_s > 0)
        fprintf(f, "  \"h2d_busy\": {\"latency_s\": %.17g, \"bytes_per_s\": %.17g},\n", p->h2d_busy.latency_s, p->h2d_busy.bytes_per_s);
    fprintf(f, "  \"samples\": [");
    for (int i = 0; i < p->n_samples; i++)
        fprintf(f, "%s\n    {\"bytes\": %zu, \"d2h_s\": %.17g, \"h2d_s\": %.17g}", i ? "," : "", p->sample_bytes[i],
                p->sample_d2h_s[i], p->sample_h2d_s[i]);
    fprintf(f, "%s],\n  \"layers\": [", p->n_samples ? "\n  " : "");
    for (int l = 1; l < p->n_layers; l++) {
        fprintf(f, "%s\n    {\"name\": ", l > 1 ? "," : "");
        vdnn_json_write_string(f, p->names[l]);
        vdnn_profile_write_layer_shape(f, p, l);
        fprintf(f, ", \"fwd_s\": %.17g, \"bwd_s\": %.17g", p->fwd_s[l], p->bwd_s[l]);
        if (p->n_algos[l] > 1) {
            const double *t[2] = {p->algo_fwd_s[l], p->algo_bwd_s[l]};
            for (int k = 0; k < 2; k++) {
                fprintf(f, ", \"%s\": [", k ? "algo_bwd_s" : "algo_fwd_s");
                for (int a = 0; a < p->n_algos[l]; a++) fprintf(f, "%s%.17g", a ? ", " : "", t[k][a]);
                fputc(']', f);
            }
        }
        vdnn_profile_write_layer_ops(f, p, l);
        fputc('}', f);
    }
    fprintf(f, "%s]\n}\n", p->n_layers > 1 ? "\n  " : "");
}

vdnn_status vdnn_profile_write(const char *path, const vdnn_profile *p, vdnn_error *err)
{
    vdnn_status rc = check_writable(path, p, err);
    if (rc) return rc;
    vdnn_outfile o;
    if ((rc = vdnn_outfile_open(&o, path, err))) return rc;
    write_body(o.f, p);
    return vdnn_outfile_commit(&o, err);
}

/* ---- reading ---- */

vdnn_status vdnn_pjson_missing(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key)
{
    return vdnn_fail(r->err, VDNN_ERR_FORMAT, "%s:%d:%d: missing \"%s\"", r->path, obj->line, obj->col, key);
}

vdnn_status vdnn_pjson_wrong(const vdnn_pjson_reader *r, const vdnn_json *v, const char *key, const char *what)
{
    return vdnn_fail(r->err, VDNN_ERR_FORMAT, "%s:%d:%d: \"%s\" must be %s", r->path, v->line, v->col, key, what);
}

vdnn_status vdnn_pjson_get(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, vdnn_json_type t,
                           const char *what, const vdnn_json **out)
{
    const vdnn_json *v = vdnn_json_get(obj, key);
    if (!v) return vdnn_pjson_missing(r, obj, key);
    if (v->type != t) return vdnn_pjson_wrong(r, v, key, what);
    *out = v;
    return VDNN_OK;
}

vdnn_status vdnn_pjson_num(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, bool rate, double *out)
{
    const char *what = rate ? "a positive number" : "a number >= 0";
    const vdnn_json *v = NULL;
    vdnn_status rc = vdnn_pjson_get(r, obj, key, VDNN_JSON_NUMBER, what, &v);
    if (rc) return rc;
    if (v->number < 0 || (rate && v->number == 0)) return vdnn_pjson_wrong(r, v, key, what);
    *out = v->number;
    return VDNN_OK;
}

vdnn_status vdnn_pjson_int(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, double max, double *out)
{
    const vdnn_json *v = NULL;
    vdnn_status rc = vdnn_pjson_get(r, obj, key, VDNN_JSON_NUMBER, "a whole number", &v);
    if (rc) return rc;
    if (v->number < 0 || v->number > max || v->number != floor(v->number))
        return vdnn_pjson_wrong(r, v, key, "a whole number >= 0");
    *out = v->number;
    return VDNN_OK;
}

static vdnn_status get_copy_model(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, vdnn_copy_model *m)
{
    const vdnn_json *v = NULL;
    vdnn_status rc = vdnn_pjson_get(r, obj, key, VDNN_JSON_OBJECT, "an object {latency_s, bytes_per_s}", &v);
    if (!rc) rc = vdnn_pjson_num(r, v, "latency_s", false, &m->latency_s);
    if (!rc) rc = vdnn_pjson_num(r, v, "bytes_per_s", true, &m->bytes_per_s);
    return rc;
}

/* "format" and "version" (absent in version 1 files, which had neither). A newer version is refused by name rather
 * than read in part: its new fields may change what the old ones mean. */
static vdnn_status read_version(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p)
{
    const vdnn_json *f = vdnn_json_get(root, "format"), *v = vdnn_json_get(root, "version");
    if (f && (f->type != VDNN_JSON_STRING || strcmp(f->string, "vdnn-profile")))
        return vdnn_pjson_wrong(r, f, "format", "\"vdnn-profile\" (is this a vdnn profile?)");
    p->version = 1;
    if (!v) return VDNN_OK;
    if (v->type != VDNN_JSON_NUMBER || v->number < 1 || v->number != floor(v->number))
        return vdnn_pjson_wrong(r, v, "version", "a whole number >= 1");
    if (v->number > VDNN_PROFILE_VERSION)
        return vdnn_fail(r->err, VDNN_ERR_FORMAT,
                         "%s:%d:%d: profile format version %.0f is newer than this vdnn reads (1 to %d): update vdnn, or "
                         "profile again with this one",
                         r->path, v->line, v->col, v->number, VDNN_PROFILE_VERSION);
    p->version = (int)v->number;
    return VDNN_OK;
}

static vdnn_status read_header(const vdnn_pjson_reader *r, const vdnn_json *root, const vdnn_graph_t *g, vdnn_profile *p)
{
    const vdnn_json *v = NULL;
    vdnn_status rc = vdnn_pjson_get(r, root, "device", VDNN_JSON_STRING, "a string", &v);
    if (rc) return rc;
    snprintf(p->device, sizeof p->device, "%.63s", v->string);
    if ((rc = vdnn_pjson_get(r, root, "model", VDNN_JSON_STRING, "a string", &v))) return rc;
    if (strcmp(v->string, g->name))
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s: profile is for model '%.64s', not '%s'", r->path, v->string, g->name);
    double batch, classes;
    if ((rc = vdnn_pjson_int(r, root, "batch", INT_MAX, &batch))) return rc;
    if ((int)batch != g->input.n)
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s: profile is for batch %d, but %s runs at batch %d (profile again)",
                         r->path, (int)batch, g->name, g->input.n);
    if ((rc = vdnn_pjson_get(r, root, "input", VDNN_JSON_STRING, "a string \"CxHxW\"", &v))) return rc;
    int c, h, w;
    char tail;
    if (sscanf(v->string, "%dx%dx%d%c", &c, &h, &w, &tail) != 3) return vdnn_pjson_wrong(r, v, "input", "a string \"CxHxW\"");
    if (c != g->input.c || h != g->input.h || w != g->input.w)
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s: profile is for input %dx%dx%d, but %s runs at %dx%dx%d (profile again)",
                         r->path, c, h, w, g->name, g->input.c, g->input.h, g->input.w);
    if ((rc = vdnn_pjson_int(r, root, "classes", INT_MAX, &classes))) return rc;
    if ((int)classes != g->classes)
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s: profile is for %d classes, but %s has %d (profile again)", r->path,
                         (int)classes, g->name, g->classes);
    if ((rc = vdnn_pjson_get(r, root, "measured", VDNN_JSON_BOOL, "true or false", &v))) return rc;
    p->measured = v->boolean;
    return VDNN_OK;
}

static vdnn_status read_samples(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p)
{
    const vdnn_json *arr = vdnn_json_get(root, "samples");
    if (!arr) return VDNN_OK; /* estimates have none */
    if (arr->type != VDNN_JSON_ARRAY) return vdnn_pjson_wrong(r, arr, "samples", "an array");
    if (!arr->n) return VDNN_OK;
    p->sample_bytes = calloc((size_t)arr->n, sizeof *p->sample_bytes);
    p->sample_d2h_s = calloc((size_t)arr->n, sizeof *p->sample_d2h_s);
    p->sample_h2d_s = calloc((size_t)arr->n, sizeof *p->sample_h2d_s);
    if (!p->sample_bytes || !p->sample_d2h_s || !p->sample_h2d_s)
        return vdnn_fail(r->err, VDNN_ERR_NO_MEMORY, "%s: out of memory for %d samples", r->path, arr->n);
    for (int i = 0; i < arr->n; i++) {
        const vdnn_json *s = &arr->items[i];
        if (s->type != VDNN_JSON_OBJECT) return vdnn_pjson_wrong(r, s, "samples", "an array of {bytes, d2h_s, h2d_s}");
        double bytes = 0;
        vdnn_status rc = vdnn_pjson_int(r, s, "bytes", VDNN_PJSON_MAX_INT, &bytes);
        if (!rc) rc = vdnn_pjson_num(r, s, "d2h_s", false, &p->sample_d2h_s[i]);
        if (!rc) rc = vdnn_pjson_num(r, s, "h2d_s", false, &p->sample_h2d_s[i]);
        if (rc) return rc;
        p->sample_bytes[i] = (size_t)bytes;
        p->n_samples = i + 1;
    }
    return VDNN_OK;
}

/* Optional per-algorithm times: two arrays of equal length, 2..VDNN_MAX_ALGOS numbers >= 0. */
static vdnn_status read_algo_times(const vdnn_pjson_reader *r, const vdnn_json *ly, vdnn_profile *p, int l)
{
    const vdnn_json *fa = vdnn_json_get(ly, "algo_fwd_s"), *ba = vdnn_json_get(ly, "algo_bwd_s");
    if (!fa && !ba) return VDNN_OK;
    if (!fa || !ba) return vdnn_pjson_missing(r, ly, fa ? "algo_bwd_s" : "algo_fwd_s");
    const char *what = "an array of 2 to 4 numbers >= 0, as many as the other algorithm array";
    if (fa->type != VDNN_JSON_ARRAY || fa->n < 2 || fa->n > VDNN_MAX_ALGOS) return vdnn_pjson_wrong(r, fa, "algo_fwd_s", what);
    if (ba->type != VDNN_JSON_ARRAY || ba->n != fa->n) return vdnn_pjson_wrong(r, ba, "algo_bwd_s", what);
    for (int a = 0; a < fa->n; a++) {
        const vdnn_json *x = &fa->items[a], *y = &ba->items[a];
        if (x->type != VDNN_JSON_NUMBER || !(x->number >= 0)) return vdnn_pjson_wrong(r, x, "algo_fwd_s", what);
        if (y->type != VDNN_JSON_NUMBER || !(y->number >= 0)) return vdnn_pjson_wrong(r, y, "algo_bwd_s", what);
        p->algo_fwd_s[l][a] = x->number;
        p->algo_bwd_s[l][a] = y->number;
    }
    p->n_algos[l] = fa->n;
    return VDNN_OK;
}

static vdnn_status read_layers(const vdnn_pjson_reader *r, const vdnn_json *root, const vdnn_graph_t *g, vdnn_profile *p)
{
    const vdnn_json *arr = NULL;
    vdnn_status rc = vdnn_pjson_get(r, root, "layers", VDNN_JSON_ARRAY, "an array", &arr);
    if (rc) return rc;
    if (arr->n != g->n_layers - 1)
        return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s: profile has %d layers, but model %s has %d (from %s)", r->path, arr->n,
                         g->name, g->n_layers - 1, g->source);
    for (int i = 0; i < arr->n; i++) {
        const vdnn_json *ly = &arr->items[i], *name = NULL;
        if (ly->type != VDNN_JSON_OBJECT) return vdnn_pjson_wrong(r, ly, "layers", "an array of {name, fwd_s, bwd_s}");
        if ((rc = vdnn_pjson_get(r, ly, "name", VDNN_JSON_STRING, "a string", &name))) return rc;
        if (strcmp(name->string, g->layers[i + 1].name))
            return vdnn_fail(r->err, VDNN_ERR_MISMATCH, "%s:%d:%d: layer %d is '%.64s' in the profile but '%s' in model %s", r->path,
                             name->line, name->col, i + 1, name->string, g->layers[i + 1].name, g->name);
        if ((rc = vdnn_pjson_num(r, ly, "fwd_s", false, &p->fwd_s[i + 1]))) return rc;
        if ((rc = vdnn_pjson_num(r, ly, "bwd_s", false, &p->bwd_s[i + 1]))) return rc;
        if ((rc = read_algo_times(r, ly, p, i + 1))) return rc;
        if ((rc = vdnn_profile_check_layer_shape(r, ly, g, i + 1))) return rc;
        if ((rc = vdnn_profile_read_layer_ops(r, ly, p, i + 1))) return rc;
    }
    return VDNN_OK;
}

vdnn_status vdnn_profile_read(const char *path, const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err)
{
    memset(p, 0, sizeof *p);
    vdnn_json *root = NULL;
    vdnn_status rc = vdnn_json_read_file(path, &root, err);
    if (rc) return rc;
    vdnn_pjson_reader r = {path, err};
    if (root->type != VDNN_JSON_OBJECT) rc = vdnn_fail(err, VDNN_ERR_FORMAT, "%s: not a profile (expected a JSON object)", path);
    if (!rc) rc = vdnn_profile_init_graph(p, g, err);
    if (!rc) rc = read_version(&r, root, p);
    if (!rc) rc = read_header(&r, root, g, p);
    if (!rc) rc = vdnn_profile_read_device(&r, root, p);
    if (!rc) rc = vdnn_pjson_num(&r, root, "load_s", false, &p->load_s);
    if (!rc) rc = vdnn_pjson_num(&r, root, "update_s", false, &p->update_s);
    if (!rc) rc = vdnn_pjson_num(&r, root, "accum_bytes_per_s", true, &p->accum_bytes_per_s);
    /* Optional: profiles written before it was measured have none. */
    if (!rc && vdnn_json_get(root, "copy_compute_slowdown"))
        rc = vdnn_pjson_num(&r, root, "copy_compute_slowdown", false, &p->copy_slowdown);
    if (!rc) rc = get_copy_model(&r, root, "d2h", &p->d2h);
    if (!rc) rc = get_copy_model(&r, root, "h2d", &p->h2d);
    /* Optional: the link under compute, where a swapping run measured it. */
    if (!rc && vdnn_json_get(root, "d2h_busy")) rc = get_copy_model(&r, root, "d2h_busy", &p->d2h_busy);
    if (!rc && vdnn_json_get(root, "h2d_busy")) rc = get_copy_model(&r, root, "h2d_busy", &p->h2d_busy);
    if (!rc) rc = read_samples(&r, root, p);
    if (!rc) rc = read_layers(&r, root, g, p);
    /* Op info is only usable knowing whose it is and how it was obtained: plans print both. */
    if (!rc && p->ops && !p->dev.backend[0]) rc = vdnn_pjson_missing(&r, root, "device_info");
    if (!rc && p->ops && !p->op_info_source[0]) rc = vdnn_pjson_missing(&r, root, "op_info_source");
    vdnn_json_free(root);
    if (rc) vdnn_profile_release(p);
    return rc;
}
