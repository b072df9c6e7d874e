/* A profile of one variant of a model put together from measured profiles of other variants (the model with no
 * attention fused and with all fused): each layer's times and op info from the first profile that has a layer of
 * its name and kind, the device-wide figures (link, batch upload, update, copies' slowdown) from the first. */
#include "plan/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool same_shape(vdnn_shape a, vdnn_shape b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

static int find_layer(const vdnn_profile *p, const vdnn_layer *ly)
{
    for (int l = 1; l < p->n_layers; l++)
        if (p->kinds[l] == ly->kind && !strcmp(p->names[l], ly->name)) return l;
    return -1;
}

static vdnn_status copy_globals(vdnn_profile *out, const vdnn_profile *a, vdnn_error *err)
{
    snprintf(out->device, sizeof out->device, "%s", a->device);
    snprintf(out->model, sizeof out->model, "%s", a->model);
    out->input = a->input;
    out->classes = a->classes;
    out->load_s = a->load_s;
    out->update_s = a->update_s;
    out->accum_bytes_per_s = a->accum_bytes_per_s;
    out->d2h = a->d2h, out->h2d = a->h2d, out->d2h_busy = a->d2h_busy, out->h2d_busy = a->h2d_busy;
    out->copy_slowdown = a->copy_slowdown;
    out->measured = a->measured;
    out->dev = a->dev;
    out->dtype = a->dtype;
    snprintf(out->op_info_source, sizeof out->op_info_source, "%s", a->op_info_source);
    snprintf(out->note, sizeof out->note, "composed from profiles of variants of %s", a->model);
    if (a->n_samples) {
        out->sample_bytes = malloc((size_t)a->n_samples * sizeof *out->sample_bytes);
        out->sample_d2h_s = malloc((size_t)a->n_samples * sizeof *out->sample_d2h_s);
        out->sample_h2d_s = malloc((size_t)a->n_samples * sizeof *out->sample_h2d_s);
        if (!out->sample_bytes || !out->sample_d2h_s || !out->sample_h2d_s)
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
        memcpy(out->sample_bytes, a->sample_bytes, (size_t)a->n_samples * sizeof *out->sample_bytes);
        memcpy(out->sample_d2h_s, a->sample_d2h_s, (size_t)a->n_samples * sizeof *out->sample_d2h_s);
        memcpy(out->sample_h2d_s, a->sample_h2d_s, (size_t)a->n_samples * sizeof *out->sample_h2d_s);
        out->n_samples = a->n_samples;
    }
    return VDNN_OK;
}

/* Profiles from[0..n) must be of the same device, batch, input and classes, and all hold op info or none do. */
static vdnn_status same_setting(const vdnn_profile *const *from, int n, vdnn_error *err)
{
    const vdnn_profile *a = from[0];
    for (int i = 1; i < n; i++) {
        const vdnn_profile *b = from[i];
        const bool same = !strcmp(a->device, b->device) && !strcmp(a->model, b->model) &&
                          same_shape(a->input, b->input) && a->classes == b->classes && a->dtype == b->dtype &&
                          !a->ops == !b->ops;
        if (!same)
            return vdnn_fail(err, VDNN_ERR_MISMATCH, "profiles to compose: %s of %s at batch %d (%s%s) and %s of %s at "
                             "batch %d (%s%s) are not of one model, device, batch and precision", a->device, a->model,
                             a->input.n, vdnn_dtype_name(a->dtype), a->ops ? ", op info" : "", b->device, b->model,
                             b->input.n, vdnn_dtype_name(b->dtype), b->ops ? ", op info" : "");
    }
    return VDNN_OK;
}

vdnn_status vdnn_profile_compose_into(const vdnn_profile *const *from, int n, const vdnn_graph_t *g,
                                      vdnn_profile *out, vdnn_error *err)
{
    memset(out, 0, sizeof *out);
    if (!from || n < 1 || !g) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_compose: no profiles or no model");
    vdnn_status rc = same_setting(from, n, err);
    if (!rc) rc = vdnn_profile_init(out, g->n_layers, err);
    if (!rc) rc = copy_globals(out, from[0], err);
    if (!rc && from[0]->ops && !(out->ops = calloc((size_t)g->n_layers, sizeof *out->ops)))
        rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory");
    if (!rc) {
        snprintf(out->names[0], sizeof out->names[0], "%s", g->layers[0].name);
        out->kinds[0] = g->layers[0].kind;
        out->outs[0] = from[0]->outs[0];
    }
    for (int l = 1; l < g->n_layers && !rc; l++) {
        const vdnn_layer *ly = &g->layers[l];
        int i = 0, at = -1;
        for (; i < n && at < 0; i++) at = find_layer(from[i], ly);
        if (at < 0) {
            rc = vdnn_fail(err, VDNN_ERR_MISMATCH, "profiles to compose: layer '%s' (%s) of %s is in none of the %d "
                           "profiles", ly->name, vdnn_layer_kind_name(ly->kind), g->name, n);
            break;
        }
        const vdnn_profile *p = from[i - 1];
        snprintf(out->names[l], sizeof out->names[l], "%s", ly->name);
        out->kinds[l] = ly->kind;
        out->outs[l] = p->outs[at];
        out->fwd_s[l] = p->fwd_s[at];
        out->bwd_s[l] = p->bwd_s[at];
        out->n_algos[l] = p->n_algos[at];
        memcpy(out->algo_fwd_s[l], p->algo_fwd_s[at], sizeof out->algo_fwd_s[l]);
        memcpy(out->algo_bwd_s[l], p->algo_bwd_s[at], sizeof out->algo_bwd_s[l]);
        if (out->ops) out->ops[l] = p->ops[at];
    }
    if (rc) vdnn_profile_release(out);
    return rc;
}
