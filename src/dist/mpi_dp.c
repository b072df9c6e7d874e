/* Data parallelism: bucketed gradient sums started from the backward pass, waited for before the update. */
#include "dist/mpi_dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct dp_item {
    float *grad;           /* the gradient storage (device memory; host memory on the CPU backend) */
    size_t count;
    size_t offset;         /* in the packed buffer */
} dp_item;

typedef struct dp_bucket {
    size_t offset, count;  /* floats of the packed buffer */
    int layers, pending;   /* layers with gradients in it, and those not finished this step */
    bool started;
} dp_bucket;

struct vdnn_dp {
    const vdnn_comm *c;
    vdnn_nccl *nccl;       /* borrowed; set: GPU gradients are summed by NCCL where they lie */
    float **nccl_bufs;     /* one bucket's gradients, for its NCCL group */
    size_t *nccl_counts;
    MPI_Comm comm;
    int ranks;
    vdnn_net_t *net;
    bool in_place;         /* sum the gradients where they are: host memory (CPU backend), device memory (NCCL) */
    float *buf;            /* otherwise every gradient, packed in backward order */
    size_t total;
    int n_items;
    dp_item *items;
    int *layer_first, *layer_n; /* per layer: its items */
    int *layer_bucket;     /* per layer: its bucket, -1 without gradients */
    int n_buckets;
    dp_bucket *buckets;
    MPI_Request *reqs;     /* per bucket (packed), per item (in place) */
    int n_reqs;
    double hook_s, wait_s; /* time spent in grads_ready and in before_update, summed over steps */
    long steps;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int add_grad(vdnn_dp *dp, const vdnn_plan_t *p, int storage)
{
    if (storage < 0) return 0;
    size_t count = 0;
    float *ptr = vdnn_net_param_ptr(dp->net, p->st[storage].name, &count);
    if (!ptr) return -1;
    dp->items[dp->n_items++] = (dp_item){ptr, count, dp->total};
    dp->total += count;
    return 1;
}

vdnn_status vdnn_dp_create(const vdnn_comm *c, MPI_Comm dp_comm, vdnn_nccl *nccl, vdnn_net_t *net, size_t bucket_bytes,
                           vdnn_dp **out, vdnn_error *err)
{
    *out = NULL;
    const vdnn_plan_t *p = vdnn_net_plan(net);
    if (!vdnn_net_extras_of(net)->keep_weight_grads || p->fused_update)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "data parallelism needs a net created with gradient hooks");
    const vdnn_graph_t *g = vdnn_net_graph(net);
    const int L = g->n_layers;
    vdnn_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    dp->c = c;
    dp->comm = dp_comm;
    dp->net = net;
    vdnn_status rc = vdnn_comm_check(c, MPI_Comm_size(dp_comm, &dp->ranks), "MPI_Comm_size", err);
    dp->items = calloc((size_t)2 * (size_t)L, sizeof *dp->items);
    dp->layer_first = calloc((size_t)L, sizeof(int));
    dp->layer_n = calloc((size_t)L, sizeof(int));
    dp->layer_bucket = malloc((size_t)L * sizeof(int));
    dp->buckets = calloc((size_t)L, sizeof *dp->buckets);
    dp->nccl = nccl;
    /* In place: host gradients for MPI (the CPU backend), device gradients for NCCL. */
    dp->in_place = nccl || !strcmp(vdnn_net_backend(net)->ops->name, "cpu");
    dp->reqs = malloc((size_t)2 * (size_t)L * sizeof *dp->reqs);
    dp->nccl_bufs = malloc((size_t)2 * (size_t)L * sizeof *dp->nccl_bufs);
    dp->nccl_counts = malloc((size_t)2 * (size_t)L * sizeof *dp->nccl_counts);
    if (!dp->items || !dp->layer_first || !dp->layer_n || !dp->layer_bucket || !dp->buckets || !dp->reqs ||
        !dp->nccl_bufs || !dp->nccl_counts)
        rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    /* Backward runs from the last layer to the first: pack in that order, so each bucket fills from
     * layers that finish together, and close a bucket once it holds bucket_bytes. */
    dp_bucket *cur = NULL;
    for (int l = L - 1; rc == VDNN_OK && l >= 1; l--) {
        dp->layer_bucket[l] = -1;
        dp->layer_first[l] = dp->n_items;
        /* A tied layer's part of its owner's gradient (a tied linear's of the table, an lstm chunk's of the layer's
         * parameters) is summed into the owner's, which is reduced; so is a table copy's (on another stage). */
        const vdnn_layer *ly = &g->layers[l];
        const int dw = ly->p.tie || ly->weight_of[0] ? -1 : p->ls[l].dw, db = ly->p.tie && !ly->n_bias ? -1 : p->ls[l].db;
        int a = add_grad(dp, p, dw), b = add_grad(dp, p, db);
        if (a < 0 || b < 0) {
            rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "layer '%s': its gradients are not kept until the update",
                           g->layers[l].name);
            break;
        }
        dp->layer_n[l] = a + b;
        if (!dp->layer_n[l]) continue;
        if (!cur) {
            cur = &dp->buckets[dp->n_buckets++];
            cur->offset = dp->items[dp->layer_first[l]].offset;
        }
        dp->layer_bucket[l] = (int)(cur - dp->buckets);
        cur->layers++;
        cur->count = dp->total - cur->offset;
        if (cur->count * sizeof(float) >= bucket_bytes) cur = NULL;
    }
    if (rc == VDNN_OK && dp->total && !dp->in_place) {
        dp->buf = malloc(dp->total * sizeof(float));
        if (!dp->buf) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for %zu gradient values", dp->total);
    }
    dp->n_reqs = nccl ? 0 : dp->in_place ? dp->n_items : dp->n_buckets;
    for (int i = 0; rc == VDNN_OK && i < dp->n_buckets; i++) dp->buckets[i].pending = dp->buckets[i].layers;
    for (int i = 0; rc == VDNN_OK && i < dp->n_reqs; i++) dp->reqs[i] = MPI_REQUEST_NULL;
    if (rc != VDNN_OK) {
        vdnn_dp_free(dp);
        return rc;
    }
    *out = dp;
    return VDNN_OK;
}

void vdnn_dp_free(vdnn_dp *dp)
{
    if (!dp) return;
    /* Requests still in flight belong to an aborted step; MPI_Abort or MPI_Finalize ends them. */
    free(dp->buf);
    free(dp->items);
    free(dp->layer_first);
    free(dp->layer_n);
    free(dp->layer_bucket);
    free(dp->buckets);
    free(dp->reqs);
    free(dp->nccl_bufs);
    free(dp->nccl_counts);
    free(dp);
}

int vdnn_dp_buckets(const vdnn_dp *dp) { return dp->n_buckets; }

void vdnn_dp_times(const vdnn_dp *dp, double *hook_s, double *wait_s)
{
    *hook_s = dp->steps ? dp->hook_s / (double)dp->steps : 0;
    *wait_s = dp->steps ? dp->wait_s / (double)dp->steps : 0;
}
size_t vdnn_dp_bytes(const vdnn_dp *dp) { return dp->total * sizeof(float); }

/* Starts the sum of bucket b: one packed message, or one per gradient where they lie. */
static vdnn_status start_bucket(vdnn_dp *dp, int b, vdnn_error *err)
{
    dp_bucket *bk = &dp->buckets[b];
    char what[64];
    snprintf(what, sizeof what, "gradient bucket %d of step %lld", b, (long long)vdnn_net_step(dp->net));
    if (dp->nccl) {
        /* One NCCL group per bucket, on NCCL's stream once the compute queue has produced the gradients. */
        int k = 0;
        for (int i = 0; i < dp->n_items; i++) {
            const dp_item *it = &dp->items[i];
            if (it->offset < bk->offset || it->offset >= bk->offset + bk->count) continue;
            dp->nccl_bufs[k] = it->grad;
            dp->nccl_counts[k++] = it->count;
        }
        return vdnn_nccl_allreduce(dp->nccl, dp->nccl_bufs, dp->nccl_counts, k, what, err);
    }
    if (!dp->in_place)
        return vdnn_comm_check(dp->c,
                               MPI_Iallreduce(MPI_IN_PLACE, dp->buf + bk->offset, (int)bk->count, MPI_FLOAT, MPI_SUM,
                                              dp->comm, &dp->reqs[b]),
                               what, err);
    for (int i = 0; i < dp->n_items; i++) {
        const dp_item *it = &dp->items[i];
        if (it->offset < bk->offset || it->offset >= bk->offset + bk->count) continue;
        vdnn_status rc = vdnn_comm_check(
            dp->c, MPI_Iallreduce(MPI_IN_PLACE, it->grad, (int)it->count, MPI_FLOAT, MPI_SUM, dp->comm, &dp->reqs[i]),
            what, err);
        if (rc) return rc;
    }
    return VDNN_OK;
}

vdnn_status vdnn_dp_grads_ready(vdnn_dp *dp, int layer, vdnn_error *err)
{
    int b = dp->layer_bucket[layer];
    if (b < 0) return VDNN_OK;
    const double t0 = now_s();
    vdnn_backend_t *be = vdnn_net_backend(dp->net);
    for (int i = dp->layer_first[layer]; !dp->in_place && i < dp->layer_first[layer] + dp->layer_n[layer]; i++) {
        const dp_item *it = &dp->items[i];
        vdnn_status rc = be->ops->download(be, dp->buf + it->offset, it->grad, it->count * sizeof(float), err);
        if (rc) return rc;
    }
    dp_bucket *bk = &dp->buckets[b];
    if (--bk->pending == 0) {
        /* Every rank runs the same plan, so buckets start in the same order everywhere. */
        vdnn_status rc = start_bucket(dp, b, err);
        if (rc) return rc;
        bk->started = true;
    }
    vdnn_comm_progress(dp->n_reqs, dp->reqs);
    dp->hook_s += now_s() - t0;
    return VDNN_OK;
}

vdnn_status vdnn_dp_before_update(vdnn_dp *dp, vdnn_error *err)
{
    for (int b = 0; b < dp->n_buckets; b++)
        if (!dp->buckets[b].started)
            return vdnn_fail(err, VDNN_ERR_BACKEND, "rank %d: gradient bucket %d was not complete at the update",
                             dp->c->rank, b);
    const double t0 = now_s();
    char what[64];
    snprintf(what, sizeof what, "the gradient sums of step %lld", (long long)vdnn_net_step(dp->net));
    vdnn_status rc = dp->nccl ? vdnn_nccl_wait(dp->nccl, what, err) : vdnn_comm_waitall(dp->c, dp->n_reqs, dp->reqs, what, -1, err);
    if (rc) return rc;
    /* The loss is a mean over each rank's share of the batch: the mean over ranks is that over the whole. */
    const float scale = 1.0f / (float)dp->ranks;
    vdnn_backend_t *be = vdnn_net_backend(dp->net);
    for (int i = 0; dp->nccl && i < dp->n_items && rc == VDNN_OK; i++)
        rc = be->ops->scale(be, dp->items[i].grad, scale, dp->items[i].count, err);
    for (int i = 0; !dp->nccl && i < dp->n_items && rc == VDNN_OK; i++) {
        const dp_item *it = &dp->items[i];
        float *x = dp->in_place ? it->grad : dp->buf + it->offset;
        for (size_t k = 0; k < it->count; k++) x[k] *= scale;
        if (!dp->in_place) rc = be->ops->upload(be, it->grad, x, it->count * sizeof(float), err);
    }
    for (int b = 0; b < dp->n_buckets; b++) {
        dp->buckets[b].pending = dp->buckets[b].layers;
        dp->buckets[b].started = false;
    }
    dp->wait_s += now_s() - t0;
    dp->steps++;
    return rc;
}

vdnn_status vdnn_dp_average_stats(const vdnn_comm *c, MPI_Comm dp_comm, vdnn_net_t *net, vdnn_error *err)
{
    int ranks = 1;
    vdnn_status rc = vdnn_comm_check(c, MPI_Comm_size(dp_comm, &ranks), "MPI_Comm_size", err);
    const vdnn_plan_t *p = vdnn_net_plan(net);
    for (int l = 1; rc == VDNN_OK && ranks > 1 && l < p->n_layers; l++) {
        int st = p->ls[l].stats;
        if (st < 0) continue;
        size_t n = p->st[st].bytes / sizeof(float);
        float *tmp = malloc(p->st[st].bytes);
        if (!tmp) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
        rc = vdnn_net_get(net, p->st[st].name, tmp, n, err);
        if (rc == VDNN_OK) rc = vdnn_comm_allreduce(c, dp_comm, tmp, (int)n, MPI_FLOAT, MPI_SUM, "batch-norm statistics", err);
        for (size_t i = 0; i < n; i++) tmp[i] /= (float)ranks;
        if (rc == VDNN_OK) rc = vdnn_net_set(net, p->st[st].name, tmp, n, err);
        free(tmp);
    }
    return rc;
}
