/* Checkpoints and evaluation of a distributed run: stages' parameters gathered on world rank 0 into the
 * one-device checkpoint format, each rank's part loaded back, and evaluation spread over the groups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

enum { TAG_CK_N = 21, TAG_CK_HEAD = 22, TAG_CK_DATA = 23 };

typedef struct ck_head {
    char name[96];
    uint64_t count;
} ck_head;

/* Whether the stage's tensor `name` is a copy of a table an earlier stage owns and saves (graph.h's weight_of). */
static bool table_copy(const vdnn_graph_t *g, const char *name)
{
    for (int l = 1; l < g->n_layers; l++) {
        const char *o = g->layers[l].weight_of;
        const size_t n = strlen(o);
        if (n && !strncmp(name, o, n) && !strcmp(name + n, ".weight")) return true;
    }
    return false;
}

/* Stage k of group 0 sends its tensors to stage 0 of group 0 (world rank 0), a table's copy left out. */
static vdnn_status send_part(vdnn_dist_t *w, vdnn_error *err)
{
    vdnn_checkpoint ck;
    vdnn_status rc = vdnn_net_export(w->net, &ck, err);
    if (rc == VDNN_OK) {
        const vdnn_graph_t *g = vdnn_net_graph(w->net);
        int kept = 0;
        for (int i = 0; i < ck.n_tensors; i++) {
            if (table_copy(g, ck.tensors[i].name)) free(ck.tensors[i].data);
            else ck.tensors[kept++] = ck.tensors[i];
        }
        ck.n_tensors = kept;
    }
    int n = ck.n_tensors;
    ck_head *h = calloc((size_t)n + 1, sizeof *h);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += ck.tensors[i].count;
    float *data = malloc((total + 1) * sizeof *data);
    if (rc == VDNN_OK && (!h || !data)) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory gathering parameters");
    size_t at = 0;
    for (int i = 0; rc == VDNN_OK && i < n; i++) {
        snprintf(h[i].name, sizeof h[i].name, "%s", ck.tensors[i].name);
        h[i].count = ck.tensors[i].count;
        memcpy(data + at, ck.tensors[i].data, ck.tensors[i].count * sizeof *data);
        at += ck.tensors[i].count;
    }
    const vdnn_comm *c = &w->comm;
    int root = vdnn_comm_world_rank(c, w->pipe_comm, 0);
    if (rc == VDNN_OK) rc = vdnn_comm_send(c, w->pipe_comm, &n, 1, MPI_INT, 0, TAG_CK_N, root, "parameter count", err);
    if (rc == VDNN_OK)
        rc = vdnn_comm_send(c, w->pipe_comm, h, (size_t)n * sizeof *h, MPI_BYTE, 0, TAG_CK_HEAD, root, "parameter names", err);
    if (rc == VDNN_OK) rc = vdnn_comm_send(c, w->pipe_comm, data, total, MPI_FLOAT, 0, TAG_CK_DATA, root, "parameters", err);
    free(h);
    free(data);
    vdnn_checkpoint_release(&ck);
    return rc;
}

static vdnn_status take_part(vdnn_dist_t *w, int stage, vdnn_checkpoint *ck, vdnn_error *err)
{
    const vdnn_comm *c = &w->comm;
    int peer = vdnn_comm_world_rank(c, w->pipe_comm, stage), n = 0;
    vdnn_status rc = vdnn_comm_recv(c, w->pipe_comm, &n, 1, MPI_INT, stage, TAG_CK_N, peer, "parameter count", err);
    if (rc) return rc;
    ck_head *h = calloc((size_t)n + 1, sizeof *h);
    vdnn_ckpt_tensor *t = realloc(ck->tensors, (size_t)(ck->n_tensors + n + 1) * sizeof *t);
    if (t) ck->tensors = t;
    if (!h || !t) {
        free(h);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory gathering parameters");
    }
    rc = vdnn_comm_recv(c, w->pipe_comm, h, (size_t)n * sizeof *h, MPI_BYTE, stage, TAG_CK_HEAD, peer, "parameter names", err);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += h[i].count;
    float *data = rc == VDNN_OK ? malloc((total + 1) * sizeof *data) : NULL;
    if (rc == VDNN_OK && !data) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory gathering parameters");
    if (rc == VDNN_OK) rc = vdnn_comm_recv(c, w->pipe_comm, data, total, MPI_FLOAT, stage, TAG_CK_DATA, peer, "parameters", err);
    size_t at = 0;
    for (int i = 0; rc == VDNN_OK && i < n; i++) {
        vdnn_ckpt_tensor *x = &ck->tensors[ck->n_tensors];
        h[i].name[sizeof h[i].name - 1] = '\0';
        snprintf(x->name, sizeof x->name, "%s", h[i].name);
        x->count = h[i].count;
        x->data = malloc(x->count * sizeof(float) + 1);
        if (!x->data) {
            rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory gathering parameters");
            break;
        }
        memcpy(x->data, data + at, x->count * sizeof(float));
        at += x->count;
        ck->n_tensors++;
    }
    free(h);
    free(data);
    return rc;
}

/* Group 0 only: on world rank 0, *ck gets the whole model's parameters, named as a one-device net names them. */
static vdnn_status gather(vdnn_dist_t *w, vdnn_checkpoint *ck, vdnn_error *err)
{
    memset(ck, 0, sizeof *ck);
    if (w->stage > 0) return send_part(w, err);
    vdnn_status rc = vdnn_net_export(w->net, ck, err);
    for (int k = 1; rc == VDNN_OK && k < w->stages; k++) rc = take_part(w, k, ck, err);
    snprintf(ck->model, sizeof ck->model, "%s", w->full->name);
    ck->model_hash = w->model_hash;
    ck->seed = w->seed;
    return rc;
}

/* World rank 0's outcome, on every rank. */
static vdnn_status share_outcome(vdnn_dist_t *w, vdnn_status rc, vdnn_error *err, double *vals, int n_vals)
{
    struct {
        int status;
        double vals[4];
        char msg[sizeof err->msg];
    } o;
    memset(&o, 0, sizeof o);
    if (w->comm.rank == 0) {
        o.status = (int)rc;
        if (rc) snprintf(o.msg, sizeof o.msg, "%s", err->msg);
        for (int i = 0; i < n_vals; i++) o.vals[i] = vals[i];
    }
    vdnn_error e2;
    vdnn_status src = vdnn_comm_bcast(&w->comm, w->comm.world, &o, (int)sizeof o, MPI_BYTE, 0, "rank 0's outcome", &e2);
    if (src) {
        if (err) *err = e2;
        return src;
    }
    for (int i = 0; i < n_vals; i++) vals[i] = o.vals[i];
    if (o.status != VDNN_OK) return vdnn_fail(err, (vdnn_status)o.status, "%s", o.msg);
    return VDNN_OK;
}

vdnn_status vdnn_dist_save(vdnn_dist_t *w, const char *path, vdnn_error *err)
{
    vdnn_status rc = VDNN_OK;
    /* Synchronized batch norm keeps the statistics equal on every group: nothing to average. */
    if (w->groups > 1 && !w->sync_bn) rc = vdnn_dp_average_stats(&w->comm, w->dp_comm, w->net, err);
    if (rc) return rc; /* a failed sum: the others time out too */
    if (w->group == 0) {
        if (w->stages == 1) {
            if (w->comm.rank == 0) {
                vdnn_checkpoint ck;
                rc = vdnn_net_export(w->net, &ck, err);
                ck.seed = w->seed; /* not the net's, which also carries its group */
                if (rc == VDNN_OK) rc = vdnn_checkpoint_write(path, &ck, err);
                vdnn_checkpoint_release(&ck);
            }
        } else {
            vdnn_checkpoint ck;
            rc = gather(w, &ck, err);
            if (rc == VDNN_OK && w->comm.rank == 0) {
                vdnn_net_stats st;
                vdnn_net_get_stats(w->net, &st);
                ck.step = st.step;
                ck.epoch = st.epoch;
                rc = vdnn_checkpoint_write(path, &ck, err);
            }
            vdnn_checkpoint_release(&ck);
            if (rc && w->comm.rank != 0) return rc;
        }
    }
    return share_outcome(w, rc, err, NULL, 0);
}

vdnn_status vdnn_dist_resume(vdnn_dist_t *w, const char *path, vdnn_error *err)
{
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    vdnn_status rc = vdnn_checkpoint_read(path, &ck, err);
    if (rc == VDNN_OK && ck.model_hash != w->model_hash)
        rc = vdnn_fail(err, VDNN_ERR_MISMATCH, "%s: checkpoint of model '%s' does not match model '%s' at this input size",
                       path, ck.model, w->full->name);
    if (rc == VDNN_OK) {
        /* A stage net loads the tensors of its own layers, found by name. */
        vdnn_checkpoint view = ck;
        view.model_hash = vdnn_net_model_hash(w->net);
        rc = vdnn_net_import(w->net, &view, path, err);
    }
    /* The run goes on with the seed it began with (the import set the net's to it, without the group). */
    if (rc == VDNN_OK) rc = vdnn_dist_set_seed(w, ck.seed, err);
    vdnn_checkpoint_release(&ck);
    return rc;
}

/* Stages: world rank 0 evaluates the gathered model as one net; the others wait for its figures. */
static vdnn_status evaluate_gathered(vdnn_dist_t *w, const vdnn_dataset_t *ds, double *vals, vdnn_error *err)
{
    vdnn_status rc = VDNN_OK;
    if (w->group != 0) return share_outcome(w, rc, err, vals, 2);
    vdnn_checkpoint ck;
    rc = gather(w, &ck, err);
    if (rc && w->comm.rank != 0) {
        vdnn_checkpoint_release(&ck);
        return rc;
    }
    if (w->comm.rank == 0) {
        vdnn_net_t *net = NULL;
        if (rc == VDNN_OK) rc = vdnn_net_create(w->full, vdnn_net_backend(w->net), &w->full_opt, &net, err);
        if (rc == VDNN_OK) rc = vdnn_net_import(net, &ck, "the gathered model", err);
        if (rc == VDNN_OK) rc = vdnn_net_evaluate(net, ds, &vals[0], &vals[1], err);
        vdnn_net_free(net);
    }
    vdnn_checkpoint_release(&ck);
    return share_outcome(w, rc, err, vals, 2);
}

vdnn_status vdnn_dist_evaluate(vdnn_dist_t *w, const vdnn_dataset_t *ds, double *accuracy, double *loss,
                               vdnn_error *err)
{
    double vals[3] = {0, 0, 0};
    vdnn_status rc = VDNN_OK;
    /* Synchronized batch norm keeps the statistics equal on every group: nothing to average. */
    if (w->groups > 1 && !w->sync_bn) rc = vdnn_dp_average_stats(&w->comm, w->dp_comm, w->net, err);
    if (rc) return rc;
    if (w->stages > 1) {
        rc = evaluate_gathered(w, ds, vals, err);
    } else {
        /* Each group evaluates its own contiguous share of the split. */
        vdnn_dataset_t view = *ds;
        size_t img = (size_t)ds->c * (size_t)ds->h * (size_t)ds->w;
        int lo = (int)((long long)ds->count * w->group / w->groups);
        int hi = (int)((long long)ds->count * (w->group + 1) / w->groups);
        view.count = hi - lo;
        view.images = ds->images + (size_t)lo * img;
        view.labels = ds->labels + (size_t)lo * (size_t)(ds->labels_per > 0 ? ds->labels_per : 1);
        double acc = 0, ls = 0;
        if (view.count > 0) rc = vdnn_net_evaluate(w->net, &view, &acc, &ls, err);
        /* correct, loss sum, images; a local failure still joins the sum so nobody waits for it */
        double part[3] = {acc * view.count, ls * view.count, rc == VDNN_OK ? view.count : -1e18};
        vdnn_error e2;
        vdnn_status src = vdnn_comm_allreduce(&w->comm, w->dp_comm, part, 3, MPI_DOUBLE, MPI_SUM, "evaluation figures", &e2);
        if (rc) return rc;
        if (src) {
            if (err) *err = e2;
            return src;
        }
        if (part[2] < 0) return vdnn_fail(err, VDNN_ERR_BACKEND, "rank %d: another rank failed to evaluate", w->comm.rank);
        vals[0] = part[2] > 0 ? part[0] / part[2] : 0;
        vals[1] = part[2] > 0 ? part[1] / part[2] : 0;
    }
    if (rc == VDNN_OK) {
        *accuracy = vals[0];
        if (loss) *loss = vals[1];
    }
    return rc;
}
