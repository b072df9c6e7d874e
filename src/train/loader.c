/* Batch loader: a background thread copies the next (shuffled) batch into a second buffer while the caller uses the current one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_internal.h"

/* Life of the buffer the worker owns (the one the caller does not hold). */
typedef enum prep_state { PREP_REQUESTED, PREP_WORKING, PREP_READY } prep_state;

struct vdnn_loader {
    const vdnn_dataset_t *ds;
    int batch;
    bool shuffle;
    uint64_t seed;
    int per_epoch;     /* batches per epoch */
    size_t sample;     /* floats per image */
    float *images[2];  /* double buffer */
    int32_t *labels[2];
    int n[2];

    /* Worker-private: the permutation of perm_epoch (-1 before the first). */
    int32_t *perm;
    long perm_epoch;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Guarded by mu. The worker fills images[prep_buf] for prep_step; the caller
     * may change prep_step/prep_buf only while the state is not PREP_WORKING. */
    long cur_step;     /* the step the next vdnn_loader_next returns */
    long prep_step;
    int prep_buf;
    prep_state state;
    bool stop;
};

/* Fisher-Yates with a generator seeded from (seed, epoch) alone, so any epoch's order can be rebuilt after a seek
 * or a restart, and by a caller feeding its own steps (vdnn_dataset_order). */
static void shuffle_order(int count, uint64_t seed, long epoch, int32_t *perm)
{
    for (int i = 0; i < count; i++) perm[i] = i;
    uint64_t s = vdnn_rng_mix(seed, (uint64_t)epoch);
    for (int i = count - 1; i > 0; i--) {
        int j = (int)vdnn_rng_below(&s, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

vdnn_status vdnn_dataset_order(const vdnn_dataset_t *ds, uint64_t seed, long epoch, int32_t *order, vdnn_error *err)
{
    if (!ds || !order) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "dataset_order: no dataset or no place for the order");
    if (epoch < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "epoch: %ld is out of range (0 and more)", epoch);
    shuffle_order(ds->count, seed, epoch, order);
    return VDNN_OK;
}

static void build_perm(vdnn_loader *l, long epoch)
{
    if (l->shuffle) shuffle_order(l->ds->count, l->seed, epoch, l->perm);
    else
        for (int i = 0; i < l->ds->count; i++) l->perm[i] = i;
    l->perm_epoch = epoch;
}

static void fill(vdnn_loader *l, int buf, long step)
{
    long epoch = step / l->per_epoch;
    int first = (int)(step % l->per_epoch) * l->batch;
    if (epoch != l->perm_epoch) build_perm(l, epoch);
    int n = l->ds->count - first < l->batch ? l->ds->count - first : l->batch;
    for (int i = 0; i < n; i++) {
        int s = l->perm[first + i];
        memcpy(l->images[buf] + (size_t)i * l->sample, l->ds->images + (size_t)s * l->sample,
               l->sample * sizeof(float));
        const size_t per = (size_t)l->ds->labels_per;
        memcpy(l->labels[buf] + (size_t)i * per, l->ds->labels + (size_t)s * per, per * sizeof(int32_t));
    }
    l->n[buf] = n;
}

static void *worker(void *arg)
{
    vdnn_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->state != PREP_REQUESTED) pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        l->state = PREP_WORKING;
        long step = l->prep_step;
        int buf = l->prep_buf;
        pthread_mutex_unlock(&l->mu);
        fill(l, buf, step);
        pthread_mutex_lock(&l->mu);
        l->state = PREP_READY;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Caller side, mu held: asks the worker for cur_step unless it already has or is
 * making it. A batch in progress for another step is left to finish first. */
static void request_current(vdnn_loader *l)
{
    if (l->state == PREP_WORKING || l->prep_step == l->cur_step) return;
    l->prep_step = l->cur_step;
    l->state = PREP_REQUESTED;
    pthread_cond_broadcast(&l->cv);
}

/* Frees the loader and its buffers (the thread, if any, is already gone). */
static void free_memory(vdnn_loader *l)
{
    free(l->perm);
    for (int b = 0; b < 2; b++) {
        free(l->images[b]);
        free(l->labels[b]);
    }
    free(l);
}

vdnn_status vdnn_loader_create(const vdnn_dataset_t *ds, int batch, bool shuffle, uint64_t seed, vdnn_loader **out,
                               vdnn_error *err)
{
    if (!ds || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_loader_create: NULL argument");
    if (ds->count <= 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: dataset is empty", ds->source);
    if (batch <= 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch size %d: must be at least 1", batch);
    if (batch > ds->count)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch size %d is larger than the dataset (%d images in %s)",
                         batch, ds->count, ds->source);
    vdnn_loader *l = calloc(1, sizeof *l);
    if (!l) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cannot allocate a loader");
    l->ds = ds;
    l->batch = batch;
    l->shuffle = shuffle;
    l->seed = seed;
    l->per_epoch = shuffle ? ds->count / batch : (ds->count + batch - 1) / batch;
    l->sample = (size_t)ds->c * ds->h * ds->w;
    l->perm_epoch = -1;
    l->perm = malloc((size_t)ds->count * sizeof *l->perm);
    for (int b = 0; b < 2; b++) {
        l->images[b] = malloc((size_t)batch * l->sample * sizeof(float));
        l->labels[b] = malloc((size_t)batch * (size_t)ds->labels_per * sizeof(int32_t));
    }
    if (!l->perm || !l->images[0] || !l->images[1] || !l->labels[0] || !l->labels[1]) {
        free_memory(l);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cannot allocate two batches of %d images", batch);
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    /* Start on step 0 straight away so the first batch is ready sooner. */
    l->cur_step = 0;
    l->prep_step = 0;
    l->prep_buf = 0;
    l->state = PREP_REQUESTED;
    if (pthread_create(&l->thread, NULL, worker, l)) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free_memory(l);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cannot start the loader thread");
    }
    *out = l;
    return VDNN_OK;
}

vdnn_status vdnn_loader_seek(vdnn_loader *l, long step, vdnn_error *err)
{
    if (!l) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_loader_seek: NULL loader");
    if (step < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "loader seek to step %ld: must be >= 0", step);
    pthread_mutex_lock(&l->mu);
    l->cur_step = step;
    request_current(l);
    pthread_mutex_unlock(&l->mu);
    return VDNN_OK;
}

vdnn_status vdnn_loader_next(vdnn_loader *l, const float **images, const int32_t **labels, int *n_out, vdnn_error *err)
{
    if (!l || !images || !labels || !n_out)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "vdnn_loader_next: NULL argument");
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->state == PREP_READY && l->prep_step == l->cur_step) break;
        request_current(l);
        pthread_cond_wait(&l->cv, &l->mu);
    }
    int buf = l->prep_buf;
    *images = l->images[buf];
    *labels = l->labels[buf];
    *n_out = l->n[buf];
    /* The buffer handed out last time is free again: prepare the following step in it. */
    l->cur_step++;
    l->prep_buf = 1 - buf;
    l->prep_step = l->cur_step;
    l->state = PREP_REQUESTED;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return VDNN_OK;
}

int vdnn_loader_batches_per_epoch(const vdnn_loader *l)
{
    return l ? l->per_epoch : 0;
}

void vdnn_loader_free(vdnn_loader *l)
{
    if (!l) return;
    /* A batch in progress finishes (it is a bounded copy); the worker then sees stop. */
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free_memory(l);
}
