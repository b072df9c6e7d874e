/* Tables shared across pipeline stages: the reader's gradient parts to the owner every micro-batch, the owner's
 * updated table back to the reader's copy every step. */
#include "dist/mpi_tie.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One table this stage shares with another: as its owner (the embedding) or as the reader holding a copy. */
typedef struct tie_pair {
    bool owner;
    int layer;              /* in this stage's graph: the embedding, or the linear holding the copy */
    int peer;               /* the other stage (pipe_comm's rank) and its world rank, for messages */
    int peer_world;
    char table[VDNN_NAME_LEN + 8]; /* the table's parameter name, the same in both stages ("wte.weight") */
    size_t n;               /* its values */
    float *parts;           /* m micro-batches' parts of the gradient: received (owner) or sent (reader) */
    float *buf;             /* the owner's own part of a micro-batch (to add to), and the table either way */
    MPI_Request *reqs;      /* m parts, then the table */
} tie_pair;

struct vdnn_tie {
    const vdnn_comm *c;
    MPI_Comm comm;          /* a duplicate of pipe_comm: its tags never meet the activations' */
    vdnn_net_t *net;
    int stage, m, n_pairs;
    tie_pair *pairs;
};

static int tag_part(const vdnn_tie *t, int i, int j) { return i * (t->m + 1) + j; }
static int tag_table(const vdnn_tie *t, int i) { return i * (t->m + 1) + t->m; }

/* Whether layer l of full reads a table the split puts in another stage (*owner: that table's layer). */
static bool split_reader(const vdnn_graph_t *full, const vdnn_stage_split *s, int l, int *owner)
{
    *owner = full->layers[l].p.tie;
    return *owner && vdnn_stage_of(s, *owner) != vdnn_stage_of(s, l) && vdnn_stage_table_split(full, *owner, l);
}

/* Whether this stage holds either end of that table. */
static bool holds_end(const vdnn_stage_split *s, int stage, int owner, int reader)
{
    return vdnn_stage_of(s, owner) == stage || vdnn_stage_of(s, reader) == stage;
}

void vdnn_tie_free(vdnn_tie *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_pairs; i++) {
        free(t->pairs[i].parts);
        free(t->pairs[i].buf);
        free(t->pairs[i].reqs);
    }
    free(t->pairs);
    /* Requests still in flight belong to an aborted step; MPI_Abort or MPI_Finalize ends them. */
    if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
    free(t);
}

static vdnn_status add_pair(vdnn_tie *t, const vdnn_graph_t *full, const vdnn_stage_split *s, int owner, int reader,
                            MPI_Comm pipe_comm, vdnn_error *err)
{
    const bool own = vdnn_stage_of(s, owner) == t->stage;
    tie_pair *p = &t->pairs[t->n_pairs++];
    p->owner = own;
    p->layer = (own ? owner : reader) - s->first[t->stage] + VDNN_STAGE_PREFIX;
    p->peer = vdnn_stage_of(s, own ? reader : owner);
    p->peer_world = vdnn_comm_world_rank(t->c, pipe_comm, p->peer);
    snprintf(p->table, sizeof p->table, "%s.weight", full->layers[owner].name);
    p->n = full->layers[owner].n_weight;
    const vdnn_graph_t *g = vdnn_net_graph(t->net);
    if (p->layer >= g->n_layers || strcmp(g->layers[p->layer].name, full->layers[own ? owner : reader].name))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "stage %d: the net does not run the split's stage graph", t->stage);
    if (p->n > INT_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "table '%s': %zu values, too many for one message", p->table, p->n);
    const size_t m = (size_t)t->m;
    p->parts = malloc(m * p->n * sizeof(float));
    p->buf = malloc(p->n * sizeof(float));
    p->reqs = malloc((m + 1) * sizeof *p->reqs);
    if (!p->parts || !p->buf || !p->reqs)
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for the exchanges of table '%s' (%zu values, %d "
                         "micro-batches)", p->table, p->n, t->m);
    for (size_t j = 0; j <= m; j++) p->reqs[j] = MPI_REQUEST_NULL;
    return VDNN_OK;
}

vdnn_status vdnn_tie_create(const vdnn_comm *c, MPI_Comm pipe_comm, const vdnn_graph_t *full,
                            const vdnn_stage_split *split, int stage, vdnn_net_t *net, vdnn_tie **out,
                            vdnn_error *err)
{
    *out = NULL;
    /* Every stage makes one when any stage shares a table, since the communicator's duplication is collective. */
    int n = 0, any = 0;
    for (int l = 1, o; l < full->n_layers; l++)
        if (split_reader(full, split, l, &o)) {
            any++;
            n += holds_end(split, stage, o, l);
        }
    if (!any) return VDNN_OK;
    vdnn_tie *t = calloc(1, sizeof *t);
    if (!t) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    t->c = c;
    t->comm = MPI_COMM_NULL;
    t->net = net;
    t->stage = stage;
    t->m = vdnn_net_options_of(net)->memory.micro_batches;
    t->pairs = calloc((size_t)n + 1, sizeof *t->pairs);
    vdnn_status rc = t->pairs ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    if (rc == VDNN_OK) rc = vdnn_comm_check(c, MPI_Comm_dup(pipe_comm, &t->comm), "MPI_Comm_dup", err);
    for (int l = 1, o; rc == VDNN_OK && l < full->n_layers; l++)
        if (split_reader(full, split, l, &o) && holds_end(split, stage, o, l))
            rc = add_pair(t, full, split, o, l, pipe_comm, err);
    if (rc != VDNN_OK) {
        vdnn_tie_free(t);
        return rc;
    }
    *out = t;
    return VDNN_OK;
}

void vdnn_tie_progress(vdnn_tie *t)
{
    for (int i = 0; t && i < t->n_pairs; i++) vdnn_comm_progress(t->m + 1, t->pairs[i].reqs);
}

vdnn_status vdnn_tie_begin_step(vdnn_tie *t, vdnn_error *err)
{
    char what[160];
    for (int i = 0; i < t->n_pairs; i++) {
        tie_pair *p = &t->pairs[i];
        if (!p->owner) continue;
        snprintf(what, sizeof what, "posting the receives of table '%s''s gradient parts of step %lld", p->table,
                 (long long)vdnn_net_step(t->net));
        for (int j = 0; j < t->m; j++) {
            vdnn_status rc = vdnn_comm_check(t->c, MPI_Irecv(p->parts + (size_t)j * p->n, (int)p->n, MPI_FLOAT, p->peer,
                                                             tag_part(t, i, j), t->comm, &p->reqs[j]),
                                             what, err);
            if (rc) return rc;
        }
    }
    return VDNN_OK;
}

/* Micro-batch j's gradient of the table as the net's backward op wrote it, on the device. */
static float *micro_grad(vdnn_tie *t, const tie_pair *p, vdnn_error *err, vdnn_status *rc)
{
    size_t n = 0;
    float *g = vdnn_net_micro_weight_grad(t->net, p->layer, &n);
    *rc = g && n == p->n ? VDNN_OK
                         : vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the gradient of table '%s' is not on the device "
                                     "after its backward step", t->stage, p->table);
    return g;
}

vdnn_status vdnn_tie_backward_done(vdnn_tie *t, int layer, vdnn_error *err)
{
    vdnn_backend_t *be = vdnn_net_backend(t->net);
    const int j = vdnn_net_current_micro(t->net);
    const long long step = (long long)vdnn_net_step(t->net);
    char what[160];
    for (int i = 0; i < t->n_pairs; i++) {
        tie_pair *p = &t->pairs[i];
        if (p->layer != layer) continue;
        vdnn_status rc;
        float *g = micro_grad(t, p, err, &rc);
        if (rc) return rc;
        if (!p->owner) {
            float *part = p->parts + (size_t)j * p->n;
            rc = be->ops->download(be, part, g, p->n * sizeof(float), err);
            snprintf(what, sizeof what, "sending table '%s''s gradient part of micro-batch %d of step %lld", p->table,
                     j, step);
            if (rc == VDNN_OK)
                rc = vdnn_comm_check(t->c, MPI_Isend(part, (int)p->n, MPI_FLOAT, p->peer, tag_part(t, i, j), t->comm,
                                                     &p->reqs[j]),
                                     what, err);
            if (rc) return rc;
            continue;
        }
        snprintf(what, sizeof what, "table '%s''s gradient part of micro-batch %d of step %lld from stage %d", p->table,
                 j, step, p->peer);
        rc = vdnn_comm_waitall(t->c, 1, &p->reqs[j], what, p->peer_world, err);
        /* The embedding's part plus the reader's, element by element: what a one-device net's tied sum adds. */
        if (rc == VDNN_OK) rc = be->ops->download(be, p->buf, g, p->n * sizeof(float), err);
        if (rc) return rc;
        const float *part = p->parts + (size_t)j * p->n;
        for (size_t k = 0; k < p->n; k++) p->buf[k] += part[k];
        rc = be->ops->upload(be, g, p->buf, p->n * sizeof(float), err);
        if (rc) return rc;
    }
    return VDNN_OK;
}

vdnn_status vdnn_tie_end_step(vdnn_tie *t, vdnn_error *err)
{
    const long long step = (long long)vdnn_net_step(t->net);
    char what[160];
    vdnn_status rc = VDNN_OK;
    for (int i = 0; rc == VDNN_OK && i < t->n_pairs; i++) {
        tie_pair *p = &t->pairs[i];
        MPI_Request *tr = &p->reqs[t->m];
        if (p->owner) {
            snprintf(what, sizeof what, "sending table '%s' after step %lld to stage %d", p->table, step, p->peer);
            rc = vdnn_net_get(t->net, p->table, p->buf, p->n, err);
            if (rc == VDNN_OK)
                rc = vdnn_comm_check(t->c, MPI_Isend(p->buf, (int)p->n, MPI_FLOAT, p->peer, tag_table(t, i), t->comm, tr),
                                     what, err);
        } else {
            snprintf(what, sizeof what, "table '%s' after step %lld from stage %d", p->table, step, p->peer);
            rc = vdnn_comm_check(t->c, MPI_Irecv(p->buf, (int)p->n, MPI_FLOAT, p->peer, tag_table(t, i), t->comm, tr),
                                 what, err);
        }
        /* The parts went or came during backward; the table moves now, both sides waiting for it. */
        if (rc == VDNN_OK) rc = vdnn_comm_waitall(t->c, t->m + 1, p->reqs, what, p->peer_world, err);
        if (rc == VDNN_OK && !p->owner) rc = vdnn_net_set(t->net, p->table, p->buf, p->n, err);
    }
    return rc;
}
