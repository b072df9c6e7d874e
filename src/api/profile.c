/* The public profile calls: estimates, files, and measurements on a backend, each for a model at one batch and
 * input (a resolved copy of it). */
#include <stdlib.h>
#include <string.h>

#include "exec/profiler.h"
#include "plan/profile.h"

static vdnn_status new_profile(vdnn_profile **out, vdnn_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for a profile");
}

void vdnn_profile_free(vdnn_profile_t *p)
{
    if (!p) return;
    vdnn_profile_release(p);
    free(p);
}

/* Frees *p and the graph unless rc is VDNN_OK. */
static vdnn_status finish(vdnn_status rc, vdnn_graph_t *g, vdnn_profile **p)
{
    vdnn_graph_free(g);
    if (rc != VDNN_OK) {
        vdnn_profile_free(*p);
        *p = NULL;
    }
    return rc;
}

vdnn_status vdnn_profile_estimate_model(const vdnn_model_t *m, vdnn_shape input, int classes, double flops_per_s,
                                        double mem_bytes_per_s, double link_d2h_bytes_per_s,
                                        double link_h2d_bytes_per_s, vdnn_profile_t **out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_estimate: no model or no place for it");
    *out = NULL;
    if (!(link_h2d_bytes_per_s > 0))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "link_h2d_bytes_per_s: %g is out of range (more than 0)",
                         link_h2d_bytes_per_s);
    vdnn_graph_t *g = NULL;
    vdnn_status rc = vdnn_graph_resolved_copy(m, input, classes, &g, err);
    if (rc == VDNN_OK) rc = new_profile(out, err);
    /* The estimate has one link rate; the two directions may differ. */
    if (rc == VDNN_OK) rc = vdnn_profile_estimate(g, flops_per_s, mem_bytes_per_s, link_d2h_bytes_per_s, *out, err);
    if (rc == VDNN_OK) (*out)->h2d.bytes_per_s = link_h2d_bytes_per_s;
    return finish(rc, g, out);
}

vdnn_status vdnn_profile_load(const char *path, const vdnn_model_t *m, vdnn_shape input, int classes,
                              vdnn_profile_t **out, vdnn_error *err)
{
    if (!path || !m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_load: no path, model or place for it");
    *out = NULL;
    vdnn_graph_t *g = NULL;
    vdnn_status rc = vdnn_graph_resolved_copy(m, input, classes, &g, err);
    if (rc == VDNN_OK) rc = new_profile(out, err);
    if (rc == VDNN_OK) rc = vdnn_profile_read(path, g, *out, err);
    return finish(rc, g, out);
}

vdnn_status vdnn_profile_save(const vdnn_profile_t *p, const char *path, vdnn_error *err)
{
    if (!p || !path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_save: no profile or no path");
    return vdnn_profile_write(path, p, err);
}

/* Seeded random images in [-0.5, 0.5) (token ids below the vocabulary for a sequence model) and labels, one per
 * row of the loss: what the measured steps run on. */
static vdnn_status random_batch(const vdnn_graph_t *g, float **images, int32_t **labels, vdnn_error *err)
{
    const size_t n = vdnn_shape_count(g->input);
    const size_t n_labels = vdnn_graph_label_count(g);
    const bool tokens = vdnn_graph_is_sequence(g);
    *images = malloc(n * sizeof **images);
    *labels = malloc(n_labels * sizeof **labels);
    if (!*images || !*labels) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    const uint64_t z = 12345;
    for (size_t i = 0; i < n; i++)
        (*images)[i] = tokens ? (float)(vdnn_mix64(z + i) % (uint64_t)g->classes)
                              : (float)((double)(vdnn_mix64(z + i) >> 11) / 9007199254740992.0) - 0.5f;
    for (size_t i = 0; i < n_labels; i++) (*labels)[i] = (int32_t)(vdnn_mix64(z ^ (uint64_t)i) % (uint64_t)g->classes);
    return VDNN_OK;
}

vdnn_status vdnn_profile_measure_model(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                                       const vdnn_memory_options *mem, int iterations, vdnn_profile_t **out,
                                       bool *link_busy_measured, vdnn_error *err)
{
    if (!m || !be || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_measure: no model, backend or place for it");
    *out = NULL;
    if (link_busy_measured) *link_busy_measured = false;
    if (iterations < 1 || iterations > 1000)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "iterations: %d is out of range (1 to 1000)", iterations);
    vdnn_net_options o = vdnn_net_options_default();
    o.batch = input.n;
    o.in_c = input.c, o.in_h = input.h, o.in_w = input.w;
    o.classes = classes;
    if (mem) o.memory = *mem;
    vdnn_graph_t *g = NULL;
    vdnn_net_t *net = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    vdnn_status rc = new_profile(out, err);
    if (rc == VDNN_OK) rc = vdnn_net_create(m, be, &o, &net, err);
    if (rc == VDNN_OK) rc = vdnn_graph_clone(vdnn_net_graph(net), &g, err);
    if (rc == VDNN_OK) rc = random_batch(g, &images, &labels, err);
    /* Copies up to the largest feature map (at most 256 MiB): the sizes a plan moves. */
    size_t max_copy = 64u << 10;
    for (int l = 0; rc == VDNN_OK && l < g->n_layers; l++)
        if (vdnn_map_bytes(g, g->layers[l].out) > max_copy) max_copy = vdnn_map_bytes(g, g->layers[l].out);
    if (max_copy > (256u << 20)) max_copy = 256u << 20;
    if (rc == VDNN_OK) rc = vdnn_profile_measure(net, images, labels, iterations, max_copy, *out, err);
    /* The other convolution algorithms and the busy link, each on a net of its own once this one is gone. */
    vdnn_net_free(net);
    if (rc == VDNN_OK) rc = vdnn_profile_measure_algos(g, be, &o, images, labels, iterations, *out, err);
    bool busy = false;
    if (rc == VDNN_OK) rc = vdnn_profile_measure_busy(g, be, &o, images, labels, iterations, *out, &busy, err);
    if (rc == VDNN_OK && link_busy_measured) *link_busy_measured = busy;
    /* What plans need besides times, asked of the same backend and settings the times were measured under. */
    if (rc == VDNN_OK) rc = vdnn_profile_record_ops(*out, g, be, err);
    free(images);
    free(labels);
    return finish(rc, g, out);
}

void vdnn_profile_summarize(const vdnn_profile_t *p, vdnn_profile_summary *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->device, sizeof s->device, "%s", p->device);
    s->measured = p->measured;
    for (int l = 1; l < p->n_layers; l++) {
        s->forward_s += p->fwd_s[l];
        s->backward_s += p->bwd_s[l];
    }
    s->d2h_bytes_per_s = p->d2h.bytes_per_s;
    s->h2d_bytes_per_s = p->h2d.bytes_per_s;
    s->d2h_latency_s = p->d2h.latency_s;
    s->h2d_latency_s = p->h2d.latency_s;
    s->d2h_busy_bytes_per_s = vdnn_profile_link(p, true)->bytes_per_s;
    s->h2d_busy_bytes_per_s = vdnn_profile_link(p, false)->bytes_per_s;
    s->copy_slowdown = p->copy_slowdown;
    s->op_info = p->ops != NULL;
    s->device_info = p->dev;
    snprintf(s->op_info_source, sizeof s->op_info_source, "%s", p->op_info_source);
    s->version = p->version;
}

vdnn_status vdnn_profile_check_backend(const vdnn_profile_t *p, const vdnn_model_t *m, vdnn_backend_t *be,
                                       vdnn_error *err)
{
    if (!p || !m || !be) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_check_backend: no profile, model or backend");
    if (!p->ops) return VDNN_OK;
    vdnn_graph_t *g = NULL;
    vdnn_status rc = vdnn_graph_resolved_copy(m, p->input, p->classes, &g, err);
    vdnn_layer_algos *algos = rc == VDNN_OK ? calloc((size_t)g->n_layers, sizeof *algos) : NULL;
    if (rc == VDNN_OK && !algos) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory checking a profile");
    if (rc == VDNN_OK && g->n_layers != p->n_layers)
        rc = vdnn_fail(err, VDNN_ERR_MISMATCH, "the profile describes %d layers, model %s has %d", p->n_layers - 1,
                       g->name, g->n_layers - 1);
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(g, be, true, algos, NULL, err);
    char why[256];
    if (rc == VDNN_OK && vdnn_profile_ops_differ(p, algos, why, sizeof why))
        rc = vdnn_fail(err, VDNN_ERR_MISMATCH,
                       "the profile's op info (%s%s%s) is not this %s backend's: %s; plans made from the profile are "
                       "not the plans a run here makes",
                       p->dev.backend, p->dev.name[0] ? ": " : "", p->dev.name, be->ops->name, why);
    free(algos);
    vdnn_graph_free(g);
    return rc;
}

vdnn_status vdnn_profile_compose(const vdnn_profile_t *const *from, int n, const vdnn_model_t *m,
                                 vdnn_profile_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_compose: no place for the profile");
    vdnn_status rc = new_profile(out, err);
    if (rc == VDNN_OK) rc = vdnn_profile_compose_into(from, n, m, *out, err);
    if (rc != VDNN_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}
