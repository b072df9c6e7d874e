/* Time-to-train projection: step times of data-parallel and hybrid layouts from a profile, scaled by the
 * epochs a global batch needs to converge. */
#include "dist/project.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vdnn_status vdnn_epochs_table_parse(const char *text, const char *source, vdnn_epochs_table *t, vdnn_error *err)
{
    memset(t, 0, sizeof *t);
    int line = 0;
    const char *p = text;
    while (p && *p) {
        line++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char buf[256];
        if (len >= sizeof buf) return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: line too long", source, line);
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = end ? end + 1 : NULL;
        buf[strcspn(buf, "#")] = '\0';
        for (char *c = buf; *c; c++)
            if (*c == ',' || *c == '\t' || *c == ':') *c = ' ';
        char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) continue;
        double b, e;
        char tail[2];
        if (sscanf(s, "%lf %lf %1s", &b, &e, tail) != 2)
            return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: expected 'GLOBAL_BATCH EPOCHS', got '%s'", source, line, s);
        if (!(b >= 1 && b < 1e12) || !(e > 0 && e < 1e9))
            return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: batch %g / epochs %g out of range (batch >= 1, epochs > 0)",
                             source, line, b, e);
        if (t->n && b <= t->batch[t->n - 1])
            return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: batch %g does not increase (the previous row has %g)", source,
                             line, b, t->batch[t->n - 1]);
        if (t->n == VDNN_EPOCHS_MAX)
            return vdnn_fail(err, VDNN_ERR_PARSE, "%s:%d: more than %d rows", source, line, VDNN_EPOCHS_MAX);
        t->batch[t->n] = b;
        t->epochs[t->n] = e;
        t->n++;
    }
    if (!t->n) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: no 'GLOBAL_BATCH EPOCHS' rows", source);
    return VDNN_OK;
}

vdnn_status vdnn_epochs_table_read(const char *path, vdnn_epochs_table *t, vdnn_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open the epochs table: %s", path, strerror(errno));
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    if (more) return vdnn_fail(err, VDNN_ERR_PARSE, "%s: the epochs table is larger than %zu bytes", path, sizeof buf - 1);
    buf[n] = '\0';
    return vdnn_epochs_table_parse(buf, path, t, err);
}

double vdnn_epochs_at(const vdnn_epochs_table *t, double batch, bool *extrapolated)
{
    if (extrapolated) *extrapolated = false;
    if (t->n == 1 || batch <= t->batch[0]) {
        if (extrapolated && t->n == 1 && batch > t->batch[0]) *extrapolated = true;
        return t->epochs[0];
    }
    int i = 1;
    while (i < t->n - 1 && batch > t->batch[i]) i++;
    if (batch > t->batch[t->n - 1] && extrapolated) *extrapolated = true;
    double x0 = log2(t->batch[i - 1]), x1 = log2(t->batch[i]);
    double y = t->epochs[i - 1] + (t->epochs[i] - t->epochs[i - 1]) * (log2(batch) - x0) / (x1 - x0);
    return y > t->epochs[0] * 1e-3 ? y : t->epochs[0] * 1e-3;
}

double vdnn_ring_allreduce_s(double bytes, int n, double bytes_per_s, double latency_s)
{
    if (n <= 1 || bytes <= 0) return 0;
    return 2.0 * (n - 1) * latency_s + 2.0 * (n - 1) / n * bytes / bytes_per_s;
}

/* The layer whose parameters layer l uses besides (or instead of) its own, or 0: a tied output projection's
 * embedding, an lstm chunk's first chunk (graph.h's tie). A pipeline stage that holds l but not that layer keeps a
 * copy of those parameters, whose gradient goes to the owner's stage and whose values come back (mpi_tie.c): the
 * copy is neither summed over the workers nor updated on its own stage. */
static int shared_owner(const vdnn_graph_t *g, int l) { return g->layers[l].p.tie; }

/* The owner of parameters that layer l, of a stage holding layers [first, last], reads from another stage, when l
 * is the stage's first such reader (the stage keeps one copy, however many of its layers read it), else 0. */
static int foreign_owner(const vdnn_graph_t *g, int l, int first, int last)
{
    const int o = shared_owner(g, l);
    if (!o || (o >= first && o <= last)) return 0;
    for (int k = first; k < l; k++)
        if (shared_owner(g, k) == o) return 0;
    return o;
}

/* Parameters of layer l that its stage sums over the workers and updates: its own (a copy of parameters another
 * stage owns is exchanged with that stage instead, below). */
static double stage_layer_params(const vdnn_graph_t *g, int l)
{
    return (double)(g->layers[l].n_weight + g->layers[l].n_bias);
}

/* Per-layer backward time without the layer's share of the SGD update (the profile's backward includes
 * the fused update; a data-parallel step updates once, after the sums). */
static double bwd_only(const vdnn_graph_t *g, const vdnn_profile *p, int l, double total_params)
{
    double params = (double)(g->layers[l].n_weight + g->layers[l].n_bias);
    double upd = total_params > 0 ? p->update_s * params / total_params : 0;
    return p->bwd_s[l] > upd ? p->bwd_s[l] - upd : 0;
}

/* The backward of layers [first, last] from `start` with times scaled by `scale`, gradients summed over
 * `workers` in buckets as they fill: when the backward ends and when the last sum does. */
static void backward_with_sums(const vdnn_graph_t *g, const vdnn_profile *p, const vdnn_project_config *c, int first,
                               int last, double start, double scale, int workers, double total_params,
                               double *bwd_end, double *comm_end, double *comm_total)
{
    double t = start, link_free = start, bucket = 0;
    *comm_total = 0;
    for (int l = last; l >= first; l--) {
        t += bwd_only(g, p, l, total_params) * scale;
        bucket += stage_layer_params(g, l) * sizeof(float);
        if (bucket > 0 && (bucket >= (double)c->bucket_bytes || l == first)) {
            double d = vdnn_ring_allreduce_s(bucket, workers, c->allreduce_bytes_per_s, c->allreduce_latency_s);
            link_free = (link_free > t ? link_free : t) + d;
            *comm_total += d;
            bucket = 0;
        }
    }
    *bwd_end = t;
    *comm_end = link_free > t ? link_free : t;
}

static vdnn_status check_config(const vdnn_graph_t *g, const vdnn_profile *p, const vdnn_project_config *c, int stages,
                                vdnn_error *err)
{
    if (!g->resolved || p->n_layers != g->n_layers || p->input.n < 1)
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "projection: the profile (%d layers) does not describe %s (%d layers)",
                         p->n_layers, g->name, g->n_layers);
    if (c->devices < 1 || stages < 1 || c->devices % stages)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "projection: %d devices cannot form groups of %d stages", c->devices,
                         stages);
    if (c->batch < 1 || c->micro_batches < 1 || (stages > 1 && c->micro_batches > c->batch))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "projection: batch %d per worker, %d micro-batches", c->batch,
                         c->micro_batches);
    if (!(c->allreduce_bytes_per_s > 0) || !(c->p2p_bytes_per_s > 0) || c->allreduce_latency_s < 0 ||
        c->p2p_latency_s < 0 || !(c->dataset_images >= 1) || !c->epochs)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "projection: bandwidths, dataset size and the epochs table must be set");
    return VDNN_OK;
}

vdnn_status vdnn_project_estimate(const vdnn_graph_t *g, const vdnn_profile *p, const vdnn_project_config *c, int stages,
                                vdnn_layout_estimate *e, vdnn_error *err)
{
    memset(e, 0, sizeof *e);
    vdnn_status rc = check_config(g, p, c, stages, err);
    if (rc) return rc;
    const int L = g->n_layers;
    const double b0 = p->input.n;
    double total_params = 0;
    for (int l = 1; l < L; l++) total_params += (double)(g->layers[l].n_weight + g->layers[l].n_bias);
    e->stages = stages;
    e->workers = c->devices / stages;
    e->global_batch = e->workers * c->batch;
    const int M = stages > 1 ? c->micro_batches : 1;
    e->micro_batches = M;
    double *cost = malloc((size_t)L * sizeof *cost);
    if (!cost) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    for (int l = 0; l < L; l++) cost[l] = l ? p->fwd_s[l] + bwd_only(g, p, l, total_params) : 0;
    rc = vdnn_stage_split_balance(g, cost, stages, NULL, NULL, &e->split, err);
    free(cost);
    if (rc) return rc;

    const double load = p->load_s * c->batch / b0;
    const double mb = (double)c->batch / M; /* images per micro-batch */
    const double scale = mb / b0;
    double slot_f = 0, slot_b = 0, max_f = 0, max_b = 0, max_update = 0;
    double bs[VDNN_MAX_STAGES];
    for (int s = 0; s < stages; s++) {
        double f = 0, b = 0, params = 0;
        for (int l = e->split.first[s]; l <= e->split.last[s]; l++) {
            f += p->fwd_s[l] * scale;
            b += bwd_only(g, p, l, total_params) * scale;
            params += stage_layer_params(g, l);
        }
        bs[s] = b;
        /* Sending the stage's output forward and the gradient of its input back, per micro-batch. */
        double xf = 0, xb = 0;
        if (s < stages - 1)
            xf = c->p2p_latency_s + (double)vdnn_shape_bytes(g->layers[e->split.last[s]].out) / b0 * mb / c->p2p_bytes_per_s;
        if (s > 0)
            xb = c->p2p_latency_s + (double)vdnn_shape_bytes(g->layers[e->split.first[s] - 1].out) / b0 * mb / c->p2p_bytes_per_s;
        slot_f = fmax(slot_f, f + xf);
        slot_b = fmax(slot_b, b + xb);
        max_f = fmax(max_f, f);
        max_b = fmax(max_b, b);
        double upd = total_params > 0 ? p->update_s * params / total_params : 0;
        max_update = fmax(max_update, upd);
    }
    /* GPipe: all micro-batches forward, then all backward; stage s runs micro-batch j in slot s + j. */
    const double slots = M + stages - 1;
    const double t_fwd_end = load + slots * slot_f;
    double step_end = 0;
    for (int s = 0; s < stages; s++) {
        /* Stage s's last backward (micro-batch M-1) fills slot (stages-1-s) + (M-1) of the backward phase:
         * its gradients are final when it ends, and their sums overlap that micro-batch's backward. */
        double last_end = t_fwd_end + (slots - s) * slot_b;
        double bwd_end, comm_end, comm_total;
        backward_with_sums(g, p, c, e->split.first[s], e->split.last[s], last_end - bs[s], scale, e->workers,
                           total_params, &bwd_end, &comm_end, &comm_total);
        step_end = fmax(step_end, comm_end);
        e->comm_s = fmax(e->comm_s, comm_total);
    }
    /* Shared parameters split over two stages: one message of their size on the step's path. The runtime
     * (mpi_tie.c) sends the reader's part every micro-batch, overlapping backward, and the table back after the
     * update; the last part and the table are what the step waits for, charged here as one. */
    double shared = 0;
    for (int l = 1; l < L; l++) {
        const int sl = vdnn_stage_of(&e->split, l);
        const int o = sl < 0 ? 0 : foreign_owner(g, l, e->split.first[sl], e->split.last[sl]);
        if (o)
            shared += c->p2p_latency_s + (double)(g->layers[o].n_weight + g->layers[o].n_bias) * sizeof(float) /
                                             c->p2p_bytes_per_s;
    }
    step_end += shared;
    e->comm_s += shared;
    e->compute_s = load + slots * (max_f + max_b) + max_update;
    e->bubble_s = (stages - 1) * (max_f + max_b);
    e->step_s = step_end + max_update;
    e->exposed_s = e->step_s - e->compute_s > 0 ? e->step_s - e->compute_s : 0;
    e->images_per_s = e->global_batch / e->step_s;
    e->epochs = vdnn_epochs_at(c->epochs, e->global_batch, &e->extrapolated);
    e->steps_per_epoch = ceil(c->dataset_images / e->global_batch);
    e->train_s = e->epochs * e->steps_per_epoch * e->step_s;
    return VDNN_OK;
}
