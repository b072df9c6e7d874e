/* The CPU backend: host memory, copy queues as worker threads (optionally throttled to emulate a PCIe link), events, element-wise helpers. */
#include "backend/cpu/cpu_internal.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#define CPU_ALIGN 64
struct vdnn_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Generations rather than a flag, so a re-record while an older record is
     * still queued cannot be completed by that older record. */
    uint64_t recorded, done;
    double done_at; /* monotonic seconds of the latest completion */
    int refs; /* the owner plus every queued command that names this event */
};

typedef enum cmd_kind { CMD_COPY, CMD_RECORD, CMD_WAIT } cmd_kind;

typedef struct cpu_cmd {
    cmd_kind kind;
    void *dst;
    const void *src;
    size_t bytes;
    vdnn_event *ev;
    uint64_t gen;
    struct cpu_cmd *next;
} cpu_cmd;

struct cpu_copy_queue {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* the worker waits here for commands */
    pthread_cond_t cv_idle; /* sync_all waits here for the queue to drain */
    cpu_cmd *head, *tail;
    size_t pending;         /* queued plus running */
    bool stop;
    double bandwidth;       /* bytes/s; 0: unthrottled */
};

static cpu_backend *cpu(vdnn_backend_t *be) { return (cpu_backend *)be; }

/* ---- events ---- */

static void event_release(vdnn_event *ev)
{
    pthread_mutex_lock(&ev->mu);
    bool last = --ev->refs == 0;
    pthread_mutex_unlock(&ev->mu);
    if (last) {
        pthread_mutex_destroy(&ev->mu);
        pthread_cond_destroy(&ev->cv);
        free(ev);
    }
}

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void event_complete(vdnn_event *ev, uint64_t gen)
{
    double t = monotonic_seconds();
    pthread_mutex_lock(&ev->mu);
    if (gen > ev->done) {
        ev->done = gen;
        ev->done_at = t;
    }
    pthread_cond_broadcast(&ev->cv);
    pthread_mutex_unlock(&ev->mu);
}

static void event_block_until(vdnn_event *ev, uint64_t gen)
{
    pthread_mutex_lock(&ev->mu);
    while (ev->done < gen) pthread_cond_wait(&ev->cv, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
}

static vdnn_status cpu_event_create(vdnn_backend_t *be, vdnn_event **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_create: NULL output pointer");
    vdnn_event *ev = calloc(1, sizeof *ev);
    if (!ev) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "event_create: out of memory");
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cv, NULL);
    ev->refs = 1;
    *out = ev;
    return VDNN_OK;
}

/* Commands still queued keep the event alive until they have run. */
static void cpu_event_destroy(vdnn_backend_t *be, vdnn_event *ev)
{
    if (ev) event_release(ev);
}

/* ---- copy queues ---- */

static void timespec_add(struct timespec *t, double seconds)
{
    double whole = floor(seconds);
    t->tv_sec += (time_t)whole;
    t->tv_nsec += (long)((seconds - whole) * 1e9);
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec += 1;
        t->tv_nsec -= 1000000000L;
    }
}

static void run_copy(cpu_copy_queue *q, const cpu_cmd *c)
{
    struct timespec deadline;
    if (q->bandwidth > 0) clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (c->bytes) memcpy(c->dst, c->src, c->bytes);
    if (q->bandwidth > 0) {
        /* The link's time is the copy's lower bound, so sleep off what memcpy did not use. */
        timespec_add(&deadline, (double)c->bytes / q->bandwidth);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
        }
    }
}

static void *copy_worker(void *arg)
{
    cpu_copy_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->cv_work, &q->mu);
        if (!q->head) break; /* stopped and drained */
        cpu_cmd *c = q->head;
        q->head = c->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);

        switch (c->kind) {
        case CMD_COPY: run_copy(q, c); break;
        case CMD_RECORD: event_complete(c->ev, c->gen); break;
        case CMD_WAIT: event_block_until(c->ev, c->gen); break;
        }
        if (c->ev) event_release(c->ev);
        free(c);

        pthread_mutex_lock(&q->mu);
        if (--q->pending == 0) pthread_cond_broadcast(&q->cv_idle);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void queue_push(cpu_copy_queue *q, cpu_cmd *c)
{
    c->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = c;
    else q->head = c;
    q->tail = c;
    q->pending++;
    pthread_cond_signal(&q->cv_work);
    pthread_mutex_unlock(&q->mu);
}

static void queue_drain(cpu_copy_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->pending) pthread_cond_wait(&q->cv_idle, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

static vdnn_status queue_start(cpu_copy_queue **out, double bandwidth, const char *name, vdnn_error *err)
{
    cpu_copy_queue *q = calloc(1, sizeof *q);
    if (!q) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cpu backend: out of memory for the %s queue", name);
    q->bandwidth = bandwidth;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_work, NULL);
    pthread_cond_init(&q->cv_idle, NULL);
    int rc = pthread_create(&q->thread, NULL, copy_worker, q);
    if (rc) {
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv_work);
        pthread_cond_destroy(&q->cv_idle);
        free(q);
        return vdnn_fail(err, VDNN_ERR_BACKEND, "cpu backend: cannot start the %s copy thread: %s", name,
                         strerror(rc));
    }
    *out = q;
    return VDNN_OK;
}

/* Runs what is queued, then joins the worker. */
static void queue_stop(cpu_copy_queue *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_signal(&q->cv_work);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv_work);
    pthread_cond_destroy(&q->cv_idle);
    free(q);
}

static vdnn_status check_queue(vdnn_queue_id q, const char *what, vdnn_error *err)
{
    if ((int)q < 0 || q >= VDNN_QUEUE_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no queue %d", what, (int)q);
    return VDNN_OK;
}

static vdnn_status enqueue(cpu_backend *b, vdnn_queue_id q, cmd_kind kind, void *dst, const void *src,
                           size_t bytes, vdnn_event *ev, uint64_t gen, vdnn_error *err)
{
    cpu_cmd *c = calloc(1, sizeof *c);
    if (!c) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cpu backend: out of memory queueing a command");
    c->kind = kind;
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    c->ev = ev;
    c->gen = gen;
    queue_push(b->copyq[q], c);
    return VDNN_OK;
}

static vdnn_status cpu_copy_async(vdnn_backend_t *be, vdnn_queue_id q, void *dst, const void *src, size_t bytes,
                                  vdnn_copy_kind kind, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "copy_async", err);
    if (st) return st;
    if (kind != VDNN_COPY_D2H && kind != VDNN_COPY_H2D && kind != VDNN_COPY_D2D)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "copy_async: bad copy kind %d", (int)kind);
    if (bytes && (!dst || !src))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "copy_async: NULL %s for %zu bytes", dst ? "source" : "destination",
                         bytes);
    if (q == VDNN_QUEUE_COMPUTE) {
        if (bytes) memcpy(dst, src, bytes);
        return VDNN_OK;
    }
    return enqueue(cpu(be), q, CMD_COPY, dst, src, bytes, NULL, 0, err);
}

static vdnn_status cpu_event_record(vdnn_backend_t *be, vdnn_event *ev, vdnn_queue_id q, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "event_record", err);
    if (st) return st;
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_record: NULL event");
    cpu_cmd *c = NULL;
    if (q != VDNN_QUEUE_COMPUTE) {
        c = calloc(1, sizeof *c);
        if (!c) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "event_record: out of memory");
    }
    pthread_mutex_lock(&ev->mu);
    uint64_t gen = ++ev->recorded;
    if (!c) {
        /* Compute is synchronous: everything before this point has already happened. */
        ev->done = gen;
        ev->done_at = monotonic_seconds();
        pthread_cond_broadcast(&ev->cv);
    } else {
        ev->refs++;
    }
    pthread_mutex_unlock(&ev->mu);
    if (c) {
        c->kind = CMD_RECORD;
        c->ev = ev;
        c->gen = gen;
        queue_push(cpu(be)->copyq[q], c);
    }
    return VDNN_OK;
}

static vdnn_status cpu_event_wait(vdnn_backend_t *be, vdnn_queue_id q, vdnn_event *ev, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "event_wait", err);
    if (st) return st;
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_wait: NULL event");
    pthread_mutex_lock(&ev->mu);
    uint64_t gen = ev->recorded; /* waits on the latest record, as CUDA does */
    bool done = ev->done >= gen;
    if (!done && q != VDNN_QUEUE_COMPUTE) ev->refs++;
    pthread_mutex_unlock(&ev->mu);
    if (done) return VDNN_OK;
    if (q == VDNN_QUEUE_COMPUTE) {
        event_block_until(ev, gen);
        return VDNN_OK;
    }
    st = enqueue(cpu(be), q, CMD_WAIT, NULL, NULL, 0, ev, gen, err);
    if (st) event_release(ev);
    return st;
}

static vdnn_status cpu_event_sync(vdnn_backend_t *be, vdnn_event *ev, vdnn_error *err)
{
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_sync: NULL event");
    pthread_mutex_lock(&ev->mu);
    uint64_t gen = ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    event_block_until(ev, gen);
    return VDNN_OK;
}

static vdnn_status cpu_event_time(vdnn_backend_t *be, vdnn_event *ev, double *seconds, vdnn_error *err)
{
    vdnn_status st = cpu_event_sync(be, ev, err);
    if (st) return st;
    pthread_mutex_lock(&ev->mu);
    *seconds = ev->done_at;
    pthread_mutex_unlock(&ev->mu);
    return VDNN_OK;
}

/* Compute runs in the caller, so everything queued on it has finished by now. */
static double cpu_now(vdnn_backend_t *be) { return monotonic_seconds(); }

static vdnn_status cpu_sync_all(vdnn_backend_t *be, vdnn_error *err)
{
    cpu_backend *b = cpu(be);
    queue_drain(b->copyq[VDNN_QUEUE_D2H]);
    queue_drain(b->copyq[VDNN_QUEUE_H2D]);
    return VDNN_OK;
}

/* ---- memory ---- */

static vdnn_status aligned_block(size_t bytes, void **ptr, const char *what, vdnn_error *err)
{
    if (!ptr) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL output pointer", what);
    size_t rounded = bytes ? bytes : 1;
    if (rounded > SIZE_MAX - CPU_ALIGN)
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", what, bytes);
    rounded = (rounded + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, CPU_ALIGN, rounded) != 0) {
        *ptr = NULL;
        char buf[32];
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes (%s)", what, bytes,
                         vdnn_format_bytes(bytes, buf, sizeof buf));
    }
    *ptr = p;
    return VDNN_OK;
}

/* Like device memory, the block is backed from the start: touching every page here keeps
 * the kernel's page faults (and zeroing) out of the first training step. */
static vdnn_status cpu_dev_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    vdnn_status st = aligned_block(bytes, ptr, "dev_alloc", err);
    if (!st && bytes) memset(*ptr, 0, bytes);
    return st;
}

static vdnn_status cpu_host_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    return aligned_block(bytes, ptr, "host_alloc", err);
}

static void cpu_free_block(vdnn_backend_t *be, void *ptr) { free(ptr); }

static size_t cpu_dev_free_bytes(vdnn_backend_t *be) { return SIZE_MAX; }

static vdnn_status blocking_copy(void *dst, const void *src, size_t bytes, const char *what, vdnn_error *err)
{
    if (bytes && (!dst || !src))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL %s for %zu bytes", what,
                         dst ? "source" : "destination", bytes);
    if (bytes) memcpy(dst, src, bytes);
    return VDNN_OK;
}

static vdnn_status cpu_upload(vdnn_backend_t *be, void *dst, const void *src, size_t bytes, vdnn_error *err)
{
    return blocking_copy(dst, src, bytes, "upload", err);
}

static vdnn_status cpu_download(vdnn_backend_t *be, void *dst, const void *src, size_t bytes, vdnn_error *err)
{
    return blocking_copy(dst, src, bytes, "download", err);
}

/* ---- element-wise helpers ---- */

static vdnn_status cpu_fill(vdnn_backend_t *be, float *dst, float value, size_t n, vdnn_error *err)
{
    if (n && !dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fill: NULL destination for %zu floats", n);
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for if (m > CPU_PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) dst[i] = value;
    return VDNN_OK;
}

static vdnn_status cpu_accumulate(vdnn_backend_t *be, float *dst, const float *src, size_t n, vdnn_error *err)
{
    if (n && (!dst || !src)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "accumulate: NULL pointer for %zu floats", n);
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for if (m > CPU_PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) dst[i] += src[i];
    return VDNN_OK;
}

static vdnn_status cpu_scale(vdnn_backend_t *be, float *dst, float alpha, size_t n, vdnn_error *err)
{
    if (n && !dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "scale: NULL pointer for %zu floats", n);
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for if (m > CPU_PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) dst[i] *= alpha;
    return VDNN_OK;
}

/* OpenBLAS's dsdot: float inputs, double accumulation; its split over threads depends only on n and the thread
 * count, so the same gradients give the same sum under every memory plan. */
static vdnn_status cpu_sum_squares(vdnn_backend_t *be, const float *x, size_t n, double *sum, vdnn_error *err)
{
    (void)be;
    if (n && !x) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "sum_squares: NULL pointer for %zu floats", n);
    if (n > (size_t)INT_MAX) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "sum_squares: %zu floats are too many", n);
    *sum = n ? cblas_dsdot((int)n, x, 1, x, 1) : 0.0;
    return VDNN_OK;
}

/* The three tensors never overlap (the plan places them apart), so the loop may be vectorized: the compiler could not
 * prove that on its own, and the scalar loop stalled on every load (VGG-16's fc7, 16.8 M weights: about 30 ms a step
 * on one core). Every element still takes the same operations in the same order, so the bits are unchanged. */
static void sgd_loop(float *restrict w, const float *restrict dw, float *restrict v, ptrdiff_t m, float lr,
                     float momentum, float weight_decay)
{
#pragma omp parallel for simd if (m > CPU_PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) {
        float g = dw[i] + weight_decay * w[i];
        float vi = momentum * v[i] + g;
        v[i] = vi;
        w[i] -= lr * vi;
    }
}

static vdnn_status cpu_sgd_update(vdnn_backend_t *be, float *w, const float *dw, float *v, size_t n, float lr,
                                  float momentum, float weight_decay, vdnn_error *err)
{
    (void)be;
    if (n && (!w || !dw || !v)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "sgd_update: NULL pointer for %zu floats", n);
    sgd_loop(w, dw, v, (ptrdiff_t)n, lr, momentum, weight_decay);
    return VDNN_OK;
}

static vdnn_status cpu_adamw_update(vdnn_backend_t *be, float *w, const float *dw, float *m, float *v, size_t n,
                                    float lr, float beta1, float beta2, float eps, float weight_decay, long step,
                                    vdnn_error *err)
{
    if (n && (!w || !dw || !m || !v))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "adamw_update: NULL pointer for %zu floats", n);
    if (step < 1) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "adamw_update: step %ld (counts from 1)", step);
    /* Bias corrections in double, rounded once, as PyTorch computes them in Python floats. */
    const float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)step)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    const float decay = 1.0f - lr * weight_decay;
    ptrdiff_t k = (ptrdiff_t)n;
#pragma omp parallel for if (k > CPU_PAR_MIN)
    for (ptrdiff_t i = 0; i < k; i++) {
        const float g = dw[i];
        w[i] *= decay;
        m[i] = m[i] * beta1 + g * (1.0f - beta1);
        v[i] = v[i] * beta2 + (1.0f - beta2) * g * g;
        w[i] += -step_size * (m[i] / (sqrtf(v[i]) / bc2_sqrt + eps));
    }
    return VDNN_OK;
}

static vdnn_status cpu_all_finite(vdnn_backend_t *be, const float *const *x, const size_t *n, int count, bool *finite,
                                  vdnn_error *err)
{
    if (!finite || (count > 0 && (!x || !n)) || count < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "all_finite: NULL argument or %d tensors", count);
    bool ok = true;
    for (int t = 0; t < count && ok; t++) {
        if (n[t] && !x[t]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "all_finite: tensor %d is NULL", t);
        const float *p = x[t];
        const ptrdiff_t m = (ptrdiff_t)n[t];
        int bad = 0;
        /* An OR over the values: the answer does not depend on the threads' order. */
#pragma omp parallel for reduction(| : bad) if (m > CPU_PAR_MIN)
        for (ptrdiff_t i = 0; i < m; i++) bad |= !isfinite(p[i]);
        ok = !bad;
    }
    *finite = ok;
    return VDNN_OK;
}

static vdnn_status cpu_poison(vdnn_backend_t *be, void *dst, size_t bytes, vdnn_error *err)
{
    if (bytes && !dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "poison: NULL destination for %zu bytes", bytes);
    /* All-ones bytes are NaN as fp32, bf16 and fp16 alike (as on CUDA), so a 16-bit map shows unwritten values too. */
    memset(dst, 0xff, bytes);
    return VDNN_OK;
}

/* ---- life cycle ---- */

static void cpu_destroy(vdnn_backend_t *be)
{
    cpu_backend *b = cpu(be);
    queue_stop(b->copyq[VDNN_QUEUE_D2H]);
    queue_stop(b->copyq[VDNN_QUEUE_H2D]);
    if (b->stream) dnnl_stream_destroy(b->stream);
    if (b->engine) dnnl_engine_destroy(b->engine);
    free(b);
}

static const vdnn_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_free_block,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free_block,
    .dev_free_bytes = cpu_dev_free_bytes,
    .describe = vdnn_cpu_describe,
    .copy_async = cpu_copy_async,
    .upload = cpu_upload,
    .download = cpu_download,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .event_time = cpu_event_time,
    .now = cpu_now,
    .sync_all = cpu_sync_all,
    .op_query = vdnn_cpu_op_query,
    .op_algos = vdnn_cpu_op_algos,
    .op_create = vdnn_cpu_op_create,
    .op_destroy = vdnn_cpu_op_destroy,
    .op_forward = vdnn_cpu_op_forward,
    .op_backward = vdnn_cpu_op_backward,
    .fill = cpu_fill,
    .accumulate = cpu_accumulate,
    .scale = cpu_scale,
    .sgd_update = cpu_sgd_update,
    .adamw_update = cpu_adamw_update,
    .all_finite = cpu_all_finite,
    .sum_squares = cpu_sum_squares,
    .poison = cpu_poison,
    .convert = vdnn_cpu_convert,
    .accumulate_typed = vdnn_cpu_accumulate_typed,
};

static vdnn_status check_bandwidth(double bw, const char *name, vdnn_error *err)
{
    if (!(bw >= 0) || isinf(bw))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu backend: %s link bandwidth %g bytes/s is not a finite number >= 0",
                         name, bw);
    return VDNN_OK;
}

vdnn_status vdnn_backend_cpu_create(const vdnn_cpu_options *opt, vdnn_backend_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu backend: NULL output pointer");
    *out = NULL;
    vdnn_cpu_options o = {0};
    if (opt) o = *opt;
    if (o.threads < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu backend: threads %d is negative", o.threads);
    vdnn_status st = check_bandwidth(o.link_bandwidth_d2h, "D2H", err);
    if (!st) st = check_bandwidth(o.link_bandwidth_h2d, "H2D", err);
    if (st) return st;

    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cpu backend: out of memory");
    b->base.ops = &cpu_ops;
    b->opt = o;
    if (o.threads > 0) omp_set_num_threads(o.threads);
    b->base.threads = o.threads > 0 ? o.threads : omp_get_max_threads();
    st = vdnn_cpu_isa_resolve(b, err);
    if (st) {
        free(b);
        return st;
    }

    st = vdnn_cpu_dnnl_check(dnnl_engine_create(&b->engine, dnnl_cpu, 0), "dnnl_engine_create", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_stream_create(&b->stream, b->engine, dnnl_stream_default_flags),
                                 "dnnl_stream_create", err);
    if (!st) st = queue_start(&b->copyq[VDNN_QUEUE_D2H], o.link_bandwidth_d2h, "D2H", err);
    if (!st) st = queue_start(&b->copyq[VDNN_QUEUE_H2D], o.link_bandwidth_h2d, "H2D", err);
    if (st) {
        cpu_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return VDNN_OK;
}
