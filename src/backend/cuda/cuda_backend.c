/* The CUDA backend: device selection, streams as the three queues, cuDNN/cuBLAS handles, device and pinned memory,
 * copies, events and the element-wise helpers. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_kernels.h"

struct vdnn_event {
    cudaEvent_t ev;    /* without timing: cheaper to record and wait for */
    cudaEvent_t timed; /* recorded beside ev while the backend's timing is on (created then) */
    bool has_time;     /* the last record carried a time */
};

static cuda_backend *cu(vdnn_backend_t *be) { return (cuda_backend *)be; }

static const char *queue_name(vdnn_queue_id q)
{
    switch (q) {
    case VDNN_QUEUE_COMPUTE: return "compute";
    case VDNN_QUEUE_D2H: return "D2H";
    case VDNN_QUEUE_H2D: return "H2D";
    case VDNN_QUEUE_COUNT: break;
    }
    return "?";
}

static vdnn_status check_queue(vdnn_queue_id q, const char *what, vdnn_error *err)
{
    if ((int)q < 0 || q >= VDNN_QUEUE_COUNT) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no queue %d", what, (int)q);
    return VDNN_OK;
}

/* ---- memory ---- */

static vdnn_status cuda_dev_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    if (!ptr) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "dev_alloc: NULL output pointer");
    *ptr = NULL;
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    /* cudaMalloc(0) may hand back NULL, which callers read as failure. */
    size_t n = bytes ? bytes : 256;
    cudaError_t e = cudaMalloc(ptr, n);
    if (e != cudaSuccess) {
        *ptr = NULL;
        char want[32], fr[32], tot[32];
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError();
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
        return vdnn_cuda_check(e, err, "dev_alloc: cudaMalloc of %zu bytes (%s; %s free of %s on %s)", bytes,
                               vdnn_format_bytes(bytes, want, sizeof want), vdnn_format_bytes(free_b, fr, sizeof fr),
                               vdnn_format_bytes(total_b, tot, sizeof tot), b->device_name);
    }
    return VDNN_OK;
}

static void cuda_dev_free(vdnn_backend_t *be, void *ptr)
{
    if (!ptr) return;
    if (cudaSetDevice(cu(be)->device) != cudaSuccess || cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

static vdnn_status cuda_host_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    if (!ptr) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "host_alloc: NULL output pointer");
    *ptr = NULL;
    vdnn_status st = vdnn_cuda_use(cu(be), err);
    if (st) return st;
    /* Pinned, so the copy engines read and write it while the host thread goes on; portable, so it stays
     * pinned for every device's context. */
    char want[32];
    st = vdnn_cuda_check(cudaHostAlloc(ptr, bytes ? bytes : 64, cudaHostAllocPortable), err,
                         "host_alloc: cudaHostAlloc of %zu bytes (%s) of pinned memory", bytes,
                         vdnn_format_bytes(bytes, want, sizeof want));
    if (st) *ptr = NULL;
    return st;
}

static void cuda_host_free(vdnn_backend_t *be, void *ptr)
{
    if (!ptr) return;
    if (cudaSetDevice(cu(be)->device) != cudaSuccess || cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

static size_t cuda_dev_free_bytes(vdnn_backend_t *be)
{
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(cu(be)->device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return free_b;
}

/* ---- Unified Memory (policy um) ---- */

#if CUDART_VERSION >= 13000
/* CUDA 13 names a location by type and id (CUDA 12 by device ordinal, cudaCpuDeviceId for the host). */
static struct cudaMemLocation location(const cuda_backend *b, bool to_device)
{
    struct cudaMemLocation l;
    memset(&l, 0, sizeof l);
    l.type = to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    l.id = to_device ? b->device : 0; /* the host's id is ignored */
    return l;
}
#endif

/* Managed memory the copy queues can migrate with prefetches while kernels run: that needs concurrent managed
 * access (Pascal and newer on Linux); without it the CPU may not touch managed memory while the GPU works. */
static vdnn_status cuda_managed_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    if (!ptr) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "managed_alloc: NULL output pointer");
    *ptr = NULL;
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    int managed = 0, concurrent = 0;
    st = vdnn_cuda_check(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, b->device), err,
                         "managed_alloc: cudaDeviceGetAttribute(cudaDevAttrManagedMemory)");
    if (!st)
        st = vdnn_cuda_check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, b->device), err,
                             "managed_alloc: cudaDeviceGetAttribute(cudaDevAttrConcurrentManagedAccess)");
    if (st) return st;
    if (!managed || !concurrent)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "Unified Memory: %s %s (policy 'um' needs managed memory that the GPU and the host may access "
                         "concurrently)",
                         b->device_name, managed ? "has no concurrent managed access" : "cannot allocate managed memory");
    char want[32];
    st = vdnn_cuda_check(cudaMallocManaged(ptr, bytes ? bytes : 256, cudaMemAttachGlobal), err,
                         "managed_alloc: cudaMallocManaged of %zu bytes (%s)", bytes,
                         vdnn_format_bytes(bytes, want, sizeof want));
    if (st) {
        *ptr = NULL;
        return st;
    }
    /* Once for the whole pool: the device keeps a mapping of every page wherever it lives, so a kernel that
     * touches a page the plan moved to the host reads it over the link instead of faulting it back. */
#if CUDART_VERSION >= 13000
    st = vdnn_cuda_check(cudaMemAdvise(*ptr, bytes ? bytes : 256, cudaMemAdviseSetAccessedBy, location(b, true)), err,
                         "managed_alloc: cudaMemAdvise(SetAccessedBy device) of %zu bytes", bytes);
#else
    st = vdnn_cuda_check(cudaMemAdvise(*ptr, bytes ? bytes : 256, cudaMemAdviseSetAccessedBy, b->device), err,
                         "managed_alloc: cudaMemAdvise(SetAccessedBy device) of %zu bytes", bytes);
#endif
    if (st) {
        cuda_dev_free(be, *ptr);
        *ptr = NULL;
    }
    return st;
}

static void cuda_managed_free(vdnn_backend_t *be, void *ptr) { cuda_dev_free(be, ptr); }


/* OC-DNN's offload and prefetch: the pages of a swapped map move in order on a copy queue, between the compute
 * steps the plan puts around them. No advice per move: cudaMemAdvise is a host call that takes effect at once, out
 * of queue order; the pool gets its advice once, when it is allocated. */
static vdnn_status cuda_mem_prefetch(vdnn_backend_t *be, void *ptr, size_t bytes, bool to_device, vdnn_queue_id q,
                                     vdnn_error *err)
{
    vdnn_status st = check_queue(q, "mem_prefetch", err);
    if (st || !bytes) return st;
    if (!ptr) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "mem_prefetch: NULL range of %zu bytes", bytes);
    cuda_backend *b = cu(be);
    st = vdnn_cuda_use(b, err);
    if (st) return st;
    const char *where = to_device ? "the device" : "the host";
#if CUDART_VERSION >= 13000
    return vdnn_cuda_check(cudaMemPrefetchAsync(ptr, bytes, location(b, to_device), 0, b->stream[q]), err,
                           "mem_prefetch: cudaMemPrefetchAsync of %zu bytes to %s on the %s queue", bytes, where,
                           queue_name(q));
#else
    return vdnn_cuda_check(cudaMemPrefetchAsync(ptr, bytes, to_device ? b->device : cudaCpuDeviceId, b->stream[q]), err,
                           "mem_prefetch: cudaMemPrefetchAsync of %zu bytes to %s on the %s queue", bytes, where,
                           queue_name(q));
#endif
}

/* ---- copies ---- */

static vdnn_status cuda_copy_async(vdnn_backend_t *be, vdnn_queue_id q, void *dst, const void *src, size_t bytes,
                                   vdnn_copy_kind kind, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "copy_async", err);
    if (st) return st;
    enum cudaMemcpyKind k;
    switch (kind) {
    case VDNN_COPY_D2H: k = cudaMemcpyDeviceToHost; break;
    case VDNN_COPY_H2D: k = cudaMemcpyHostToDevice; break;
    case VDNN_COPY_D2D: k = cudaMemcpyDeviceToDevice; break;
    default: return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "copy_async: bad copy kind %d", (int)kind);
    }
    if (!bytes) return VDNN_OK;
    if (!dst || !src)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "copy_async: NULL %s for %zu bytes", dst ? "source" : "destination",
                         bytes);
    cuda_backend *b = cu(be);
    st = vdnn_cuda_use(b, err);
    if (st) return st;
    return vdnn_cuda_check(cudaMemcpyAsync(dst, src, bytes, k, b->stream[q]), err,
                           "copy_async: cudaMemcpyAsync of %zu bytes on the %s queue", bytes, queue_name(q));
}

static vdnn_status sync_streams(cuda_backend *b, const char *what, vdnn_error *err)
{
    /* Compute first: copies were made to wait for it, so they may still run after it is done. */
    for (int q = 0; q < VDNN_QUEUE_COUNT; q++) {
        vdnn_status st = vdnn_cuda_check(cudaStreamSynchronize(b->stream[q]), err,
                                         "%s: cudaStreamSynchronize of the %s queue (an earlier kernel or copy may be at fault)",
                                         what, queue_name((vdnn_queue_id)q));
        if (st) return st;
    }
    return VDNN_OK;
}

/* Blocking copies see everything queued before them and leave nothing running. Pageable host memory
 * is fine here: the copy goes through the compute stream and is waited for. The runtime infers the direction
 * (cudaMemcpyDefault) because the device side may be managed memory (policy um). */
static vdnn_status blocking_copy(cuda_backend *b, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k,
                                 const char *what, vdnn_error *err)
{
    if (!bytes) return VDNN_OK;
    if (!dst || !src)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL %s for %zu bytes", what, dst ? "source" : "destination",
                         bytes);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (!st) st = sync_streams(b, what, err);
    if (!st)
        st = vdnn_cuda_check(cudaMemcpyAsync(dst, src, bytes, k, b->stream[VDNN_QUEUE_COMPUTE]), err,
                             "%s: cudaMemcpyAsync of %zu bytes", what, bytes);
    if (!st)
        st = vdnn_cuda_check(cudaStreamSynchronize(b->stream[VDNN_QUEUE_COMPUTE]), err,
                             "%s: cudaStreamSynchronize after copying %zu bytes", what, bytes);
    return st;
}

static bool is_pinned(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* One staging chunk in by all cores in pieces of 1 MiB: one core copies pageable memory slower than the link. */
static void stage_chunk(char *dst, const char *src, size_t n)
{
    const size_t piece = (size_t)1 << 20;
    const long pieces = (long)((n + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (long k = 0; k < pieces; k++) {
        const size_t off = (size_t)k * piece;
        memcpy(dst + off, src + off, n - off < piece ? n - off : piece);
    }
}

/* From pageable memory: chunks go through two pinned staging buffers, the host copying one chunk in while the
 * copy engine moves the other out, on the H2D queue; the call returns once the last chunk has landed. */
static vdnn_status staged_upload(cuda_backend *b, char *dst, const char *src, size_t bytes, vdnn_error *err)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; !st && i < 2; i++) {
        if (!b->stage[i])
            st = vdnn_cuda_check(cudaHostAlloc(&b->stage[i], VDNN_CUDA_STAGE_BYTES, cudaHostAllocPortable), err,
                                 "upload: cudaHostAlloc of a %zu-byte staging buffer", VDNN_CUDA_STAGE_BYTES);
        if (!st && !b->stage_done[i])
            st = vdnn_cuda_check(cudaEventCreateWithFlags(&b->stage_done[i], cudaEventDisableTiming), err,
                                 "upload: cudaEventCreateWithFlags");
    }
    cudaStream_t h2d = b->stream[VDNN_QUEUE_H2D];
    for (size_t off = 0, k = 0; !st && off < bytes; off += VDNN_CUDA_STAGE_BYTES, k++) {
        const int i = (int)(k % 2);
        const size_t n = bytes - off < VDNN_CUDA_STAGE_BYTES ? bytes - off : VDNN_CUDA_STAGE_BYTES;
        /* The buffer's previous chunk must have left before it is overwritten. */
        if (k >= 2) st = vdnn_cuda_check(cudaEventSynchronize(b->stage_done[i]), err, "upload: staging wait");
        if (st) break;
        stage_chunk(b->stage[i], src + off, n);
        st = vdnn_cuda_check(cudaMemcpyAsync(dst + off, b->stage[i], n, cudaMemcpyHostToDevice, h2d), err,
                             "upload: cudaMemcpyAsync of %zu bytes from staging", n);
        if (!st) st = vdnn_cuda_check(cudaEventRecord(b->stage_done[i], h2d), err, "upload: cudaEventRecord");
    }
    if (!st) st = vdnn_cuda_check(cudaStreamSynchronize(h2d), err, "upload: cudaStreamSynchronize after %zu bytes", bytes);
    return st;
}

/* Everything queued before is waited for; the copy runs on the H2D queue, from pinned memory directly (a batch the
 * caller staged there) or through the staging buffers; nothing is left running. */
static vdnn_status cuda_upload(vdnn_backend_t *be, void *dst, const void *src, size_t bytes, vdnn_error *err)
{
    cuda_backend *b = cu(be);
    if (!bytes) return VDNN_OK;
    if (!dst || !src) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "upload: NULL %s for %zu bytes", dst ? "source" : "destination", bytes);
    struct cudaPointerAttributes a;
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    /* Managed destinations (policy um) keep the runtime's own path. */
    if (cudaPointerGetAttributes(&a, dst) != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        (void)cudaGetLastError();
        return blocking_copy(b, dst, src, bytes, cudaMemcpyDefault, "upload", err);
    }
    st = sync_streams(b, "upload", err);
    if (st) return st;
    if (!is_pinned(src) && bytes > VDNN_CUDA_STAGE_BYTES) return staged_upload(b, dst, src, bytes, err);
    st = vdnn_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, b->stream[VDNN_QUEUE_H2D]), err,
                         "upload: cudaMemcpyAsync of %zu bytes", bytes);
    if (!st)
        st = vdnn_cuda_check(cudaStreamSynchronize(b->stream[VDNN_QUEUE_H2D]), err,
                             "upload: cudaStreamSynchronize after copying %zu bytes", bytes);
    return st;
}

static vdnn_status cuda_download(vdnn_backend_t *be, void *dst, const void *src, size_t bytes, vdnn_error *err)
{
    return blocking_copy(cu(be), dst, src, bytes, cudaMemcpyDefault, "download", err);
}

/* ---- events ---- */

static vdnn_status cuda_event_create(vdnn_backend_t *be, vdnn_event **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_create: NULL output pointer");
    *out = NULL;
    vdnn_status st = vdnn_cuda_use(cu(be), err);
    if (st) return st;
    vdnn_event *ev = calloc(1, sizeof *ev);
    if (!ev) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "event_create: out of memory");
    st = vdnn_cuda_check(cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming), err,
                         "event_create: cudaEventCreateWithFlags");
    if (st) {
        free(ev);
        return st;
    }
    *out = ev;
    return VDNN_OK;
}

static void cuda_event_destroy(vdnn_backend_t *be, vdnn_event *ev)
{
    if (!ev) return;
    /* CUDA releases an event's resources only once its pending work is done, so this is safe at any time. */
    if (cudaSetDevice(cu(be)->device) != cudaSuccess || cudaEventDestroy(ev->ev) != cudaSuccess) (void)cudaGetLastError();
    if (ev->timed && cudaEventDestroy(ev->timed) != cudaSuccess) (void)cudaGetLastError();
    free(ev);
}

static vdnn_status cuda_event_record(vdnn_backend_t *be, vdnn_event *ev, vdnn_queue_id q, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "event_record", err);
    if (st) return st;
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_record: NULL event");
    cuda_backend *b = cu(be);
    st = vdnn_cuda_use(b, err);
    if (st) return st;
    st = vdnn_cuda_check(cudaEventRecord(ev->ev, b->stream[q]), err, "event_record: cudaEventRecord on the %s queue",
                         queue_name(q));
    ev->has_time = false;
    if (st || !b->timing) return st;
    if (!ev->timed)
        st = vdnn_cuda_check(cudaEventCreateWithFlags(&ev->timed, cudaEventDefault), err,
                             "event_record: cudaEventCreateWithFlags (timed)");
    if (!st)
        st = vdnn_cuda_check(cudaEventRecord(ev->timed, b->stream[q]), err,
                             "event_record: cudaEventRecord (timed) on the %s queue", queue_name(q));
    ev->has_time = !st;
    return st;
}

static vdnn_status cuda_event_wait(vdnn_backend_t *be, vdnn_queue_id q, vdnn_event *ev, vdnn_error *err)
{
    vdnn_status st = check_queue(q, "event_wait", err);
    if (st) return st;
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_wait: NULL event");
    cuda_backend *b = cu(be);
    st = vdnn_cuda_use(b, err);
    if (st) return st;
    /* The queue waits, not the host: the compute queue too, so the executor's WAIT orders kernels after copies. */
    return vdnn_cuda_check(cudaStreamWaitEvent(b->stream[q], ev->ev, 0), err,
                           "event_wait: cudaStreamWaitEvent on the %s queue", queue_name(q));
}

static vdnn_status cuda_event_sync(vdnn_backend_t *be, vdnn_event *ev, vdnn_error *err)
{
    if (!ev) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_sync: NULL event");
    vdnn_status st = vdnn_cuda_use(cu(be), err);
    if (st) return st;
    return vdnn_cuda_check(cudaEventSynchronize(ev->ev), err,
                           "event_sync: cudaEventSynchronize (an earlier kernel or copy may be at fault)");
}

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Host time once the compute stream is drained; also re-anchors GPU event times to the host clock. */
static double cuda_now(vdnn_backend_t *be)
{
    cuda_backend *b = cu(be);
    if (cudaSetDevice(b->device) != cudaSuccess) (void)cudaGetLastError();
    if (!b->clock_ref && cudaEventCreateWithFlags(&b->clock_ref, cudaEventDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        b->clock_ref = NULL;
    }
    if (b->clock_ref && cudaEventRecord(b->clock_ref, b->stream[VDNN_QUEUE_COMPUTE]) == cudaSuccess &&
        cudaEventSynchronize(b->clock_ref) == cudaSuccess) {
        b->clock_ref_host = monotonic_seconds();
        return b->clock_ref_host;
    }
    (void)cudaGetLastError();
    if (cudaStreamSynchronize(b->stream[VDNN_QUEUE_COMPUTE]) != cudaSuccess) (void)cudaGetLastError();
    return monotonic_seconds();
}

static vdnn_status cuda_event_time(vdnn_backend_t *be, vdnn_event *ev, double *seconds, vdnn_error *err)
{
    cuda_backend *b = cu(be);
    vdnn_status st = cuda_event_sync(be, ev, err);
    if (st) return st;
    if (!ev->has_time)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "event_time: the event was recorded while timing was off (set_timing)");
    if (!b->clock_ref) cuda_now(be);
    if (!b->clock_ref) return vdnn_fail(err, VDNN_ERR_BACKEND, "event_time: no reference event");
    float ms = 0;
    st = vdnn_cuda_check(cudaEventElapsedTime(&ms, b->clock_ref, ev->timed), err, "event_time: cudaEventElapsedTime");
    if (!st) *seconds = b->clock_ref_host + 1e-3 * (double)ms;
    return st;
}

static void cuda_set_timing(vdnn_backend_t *be, bool on) { cu(be)->timing = on; }

static vdnn_status cuda_sync_all(vdnn_backend_t *be, vdnn_error *err)
{
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    return st ? st : sync_streams(b, "sync_all", err);
}

/* ---- element-wise helpers (compute queue) ---- */

static vdnn_status cuda_fill(vdnn_backend_t *be, float *dst, float value, size_t n, vdnn_error *err)
{
    if (!n) return VDNN_OK;
    if (!dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fill: NULL destination for %zu floats", n);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    return vdnn_cuda_check(vdnn_cuda_k_fill(b->stream[VDNN_QUEUE_COMPUTE], dst, value, n), err, "fill kernel (%zu floats)", n);
}

static vdnn_status cuda_accumulate(vdnn_backend_t *be, float *dst, const float *src, size_t n, vdnn_error *err)
{
    if (!n) return VDNN_OK;
    if (!dst || !src) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "accumulate: NULL pointer for %zu floats", n);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    return vdnn_cuda_check(vdnn_cuda_k_accumulate(b->stream[VDNN_QUEUE_COMPUTE], dst, src, n), err,
                           "accumulate kernel (%zu floats)", n);
}

static vdnn_status cuda_scale(vdnn_backend_t *be, float *dst, float alpha, size_t n, vdnn_error *err)
{
    if (!n) return VDNN_OK;
    if (!dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "scale: NULL pointer for %zu floats", n);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    return vdnn_cuda_check(vdnn_cuda_k_scale(b->stream[VDNN_QUEUE_COMPUTE], dst, alpha, n), err, "scale kernel (%zu floats)",
                           n);
}

static vdnn_status cuda_sgd_update(vdnn_backend_t *be, float *w, const float *dw, float *v, size_t n, float lr,
                                   float momentum, float weight_decay, vdnn_error *err)
{
    if (!n) return VDNN_OK;
    if (!w || !dw || !v) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "sgd_update: NULL pointer for %zu floats", n);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    return vdnn_cuda_check(vdnn_cuda_k_sgd(b->stream[VDNN_QUEUE_COMPUTE], w, dw, v, n, lr, momentum, weight_decay), err,
                           "sgd_update kernel (%zu floats)", n);
}

static vdnn_status cuda_adamw_update(vdnn_backend_t *be, float *w, const float *dw, float *m, float *v, size_t n,
                                     float lr, float beta1, float beta2, float eps, float weight_decay, long step,
                                     vdnn_error *err)
{
    if (n && (!w || !dw || !m || !v))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "adamw_update: NULL pointer for %zu floats", n);
    if (step < 1) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "adamw_update: step %ld (counts from 1)", step);
    if (!n) return VDNN_OK;
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    /* The CPU backend's constants, computed as it does: bias corrections in double, rounded once. */
    const float step_size = (float)((double)lr / (1.0 - pow((double)beta1, (double)step)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    const float decay = 1.0f - lr * weight_decay;
    return vdnn_cuda_check(vdnn_cuda_k_adamw(b->stream[VDNN_QUEUE_COMPUTE], w, dw, m, v, n, decay, beta1, beta2, eps,
                                             step_size, bc2_sqrt),
                           err, "adamw_update kernel (%zu floats)", n);
}

/* One flag for all the tensors, read once: the check waits for the compute queue a single time. */
static vdnn_status cuda_all_finite(vdnn_backend_t *be, const float *const *x, const size_t *n, int count, bool *finite,
                                   vdnn_error *err)
{
    if (!finite || (count > 0 && (!x || !n)) || count < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "all_finite: NULL argument or %d tensors", count);
    for (int i = 0; i < count; i++)
        if (n[i] && !x[i]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "all_finite: tensor %d is NULL", i);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    cudaStream_t s = b->stream[VDNN_QUEUE_COMPUTE];
    unsigned flag = 0;
    st = vdnn_cuda_check(cudaMemsetAsync(b->finite_flag, 0, sizeof flag, s), err, "all_finite: cudaMemsetAsync");
    for (int i = 0; i < count && !st; i++)
        st = vdnn_cuda_check(vdnn_cuda_k_nonfinite(s, b->finite_flag, x[i], n[i]), err,
                             "all_finite kernel (tensor %d, %zu floats)", i, n[i]);
    if (!st)
        st = vdnn_cuda_check(cudaMemcpyAsync(&flag, b->finite_flag, sizeof flag, cudaMemcpyDeviceToHost, s), err,
                             "all_finite: cudaMemcpyAsync of the flag");
    if (!st) st = vdnn_cuda_check(cudaStreamSynchronize(s), err, "all_finite: cudaStreamSynchronize");
    if (!st) *finite = flag == 0;
    return st;
}

/* Gradient clipping's squares, summed on the device in double (the reduction scratch holds the result) and read
 * back: the clipping factor is decided on the host, as on the CPU. */
static vdnn_status cuda_sum_squares(vdnn_backend_t *be, const float *x, size_t n, double *sum, vdnn_error *err)
{
    if (!sum || (n && !x)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "sum_squares: NULL pointer for %zu floats", n);
    *sum = 0.0;
    if (!n) return VDNN_OK;
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    cudaStream_t s = b->stream[VDNN_QUEUE_COMPUTE];
    double *out = b->sum_scratch;
    st = vdnn_cuda_check(vdnn_cuda_k_sum_squares(s, out, x, n), err, "sum_squares kernel (%zu floats)", n);
    if (!st)
        st = vdnn_cuda_check(cudaMemcpyAsync(sum, out, sizeof *sum, cudaMemcpyDeviceToHost, s), err,
                             "sum_squares: cudaMemcpyAsync of the sum");
    if (!st) st = vdnn_cuda_check(cudaStreamSynchronize(s), err, "sum_squares: cudaStreamSynchronize");
    return st;
}

static vdnn_status cuda_poison(vdnn_backend_t *be, void *dst, size_t bytes, vdnn_error *err)
{
    if (!bytes) return VDNN_OK;
    if (!dst) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "poison: NULL destination for %zu bytes", bytes);
    cuda_backend *b = cu(be);
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    /* All-ones bytes make every float a quiet NaN. */
    return vdnn_cuda_check(cudaMemsetAsync(dst, 0xff, bytes, b->stream[VDNN_QUEUE_COMPUTE]), err,
                           "poison: cudaMemsetAsync of %zu bytes", bytes);
}

/* ---- life cycle ---- */

static void cuda_destroy(vdnn_backend_t *be)
{
    cuda_backend *b = cu(be);
    if (cudaSetDevice(b->device) != cudaSuccess) (void)cudaGetLastError();
    for (int q = 0; q < VDNN_QUEUE_COUNT; q++)
        if (b->stream[q] && cudaStreamSynchronize(b->stream[q]) != cudaSuccess) (void)cudaGetLastError();
    if (b->clock_ref && cudaEventDestroy(b->clock_ref) != cudaSuccess) (void)cudaGetLastError();
    vdnn_conv_cache_close(b->conv_cache);
    if (b->sum_scratch && cudaFree(b->sum_scratch) != cudaSuccess) (void)cudaGetLastError();
    if (b->finite_flag && cudaFree(b->finite_flag) != cudaSuccess) (void)cudaGetLastError();
    for (int i = 0; i < 2; i++) {
        if (b->stage[i] && cudaFreeHost(b->stage[i]) != cudaSuccess) (void)cudaGetLastError();
        if (b->stage_done[i] && cudaEventDestroy(b->stage_done[i]) != cudaSuccess) (void)cudaGetLastError();
    }
    if (b->cublas) cublasDestroy(b->cublas);
    if (b->cudnn) cudnnDestroy(b->cudnn);
    for (int q = 0; q < VDNN_QUEUE_COUNT; q++)
        if (b->stream[q] && cudaStreamDestroy(b->stream[q]) != cudaSuccess) (void)cudaGetLastError();
    free(b);
}

static const vdnn_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .dev_alloc = cuda_dev_alloc,
    .dev_free = cuda_dev_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .dev_free_bytes = cuda_dev_free_bytes,
    .describe = vdnn_cuda_describe,
    .copy_async = cuda_copy_async,
    .upload = cuda_upload,
    .download = cuda_download,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_sync = cuda_event_sync,
    .event_time = cuda_event_time,
    .set_timing = cuda_set_timing,
    .now = cuda_now,
    .sync_all = cuda_sync_all,
    .op_query = vdnn_cuda_op_query,
    .op_algos = vdnn_cuda_op_algos,
    .op_create = vdnn_cuda_op_create,
    .op_destroy = vdnn_cuda_op_destroy,
    .op_forward = vdnn_cuda_op_forward,
    .op_backward = vdnn_cuda_op_backward,
    .fill = cuda_fill,
    .accumulate = cuda_accumulate,
    .scale = cuda_scale,
    .sgd_update = cuda_sgd_update,
    .adamw_update = cuda_adamw_update,
    .all_finite = cuda_all_finite,
    .sum_squares = cuda_sum_squares,
    .poison = cuda_poison,
    .convert = vdnn_cuda_convert,
    .accumulate_typed = vdnn_cuda_accumulate_typed,
    .managed_alloc = cuda_managed_alloc,
    .managed_free = cuda_managed_free,
    .mem_prefetch = cuda_mem_prefetch,
};

bool vdnn_cuda_settings(const vdnn_backend_t *be, vdnn_cuda_options *out)
{
    if (!be || be->ops != &cuda_ops) return false;
    if (out) *out = ((const cuda_backend *)be)->opt;
    return true;
}

void *vdnn_cuda_stream(vdnn_backend_t *be, vdnn_queue_id q)
{
    if (!be || be->ops != &cuda_ops || (int)q < 0 || q >= VDNN_QUEUE_COUNT) return NULL;
    return (void *)((cuda_backend *)be)->stream[q];
}

int vdnn_cuda_device(const vdnn_backend_t *be)
{
    if (!be || be->ops != &cuda_ops) return -1;
    return ((const cuda_backend *)be)->device;
}

/* ---- creation ---- */

void vdnn_cuda_options_default(vdnn_cuda_options *o)
{
    memset(o, 0, sizeof *o);
    o->tf32 = -1;
    o->deterministic = -1;
    o->benchmark = -1;
}

/* -1 resolves to the environment: set and not "0" or empty means on. */
static vdnn_status env_switch(int v, const char *name, bool dflt, bool *out, vdnn_error *err)
{
    if (v == 0 || v == 1) {
        *out = v == 1;
        return VDNN_OK;
    }
    if (v != -1) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: option for %s is %d (must be -1, 0 or 1)", name, v);
    const char *e = getenv(name);
    *out = e ? (e[0] != '\0' && strcmp(e, "0") != 0) : dflt;
    return VDNN_OK;
}

vdnn_status vdnn_cuda_resolve_options(const vdnn_cuda_options *in, vdnn_cuda_options *o, vdnn_error *err)
{
    *o = *in;
    if (o->device < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: device %d is negative", o->device);
    if (o->threads < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: threads %d is negative", o->threads);
    bool no_tf32 = false, det = false, bench = false;
    vdnn_status st = VDNN_OK;
    if (in->tf32 == -1) {
        st = env_switch(-1, "VDNN_NO_TF32", false, &no_tf32, err);
        o->tf32 = !no_tf32;
    } else if (in->tf32 == 0 || in->tf32 == 1) {
        o->tf32 = in->tf32;
    } else {
        st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: option tf32 is %d (must be -1, 0 or 1)", in->tf32);
    }
    if (!st) st = env_switch(in->deterministic, "VDNN_DETERMINISTIC", false, &det, err);
    if (!st) st = env_switch(in->benchmark, "VDNN_CUDNN_BENCHMARK", false, &bench, err);
    if (st) return st;
    o->deterministic = det;
    o->benchmark = bench && !det; /* timing noise would make the choice, and so the results, vary */
    if (!o->conv_ws_limit) {
        const char *e = getenv("VDNN_CONV_WS_LIMIT");
        size_t lim = SIZE_MAX;
        if (e && *e && !vdnn_parse_size(e, &lim))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "cuda backend: VDNN_CONV_WS_LIMIT='%s' is not a size (e.g. 512MiB, unlimited)", e);
        o->conv_ws_limit = lim ? lim : SIZE_MAX;
    }
    if (!o->tensor_values) {
        const char *e = getenv("VDNN_CUDA_TENSOR_VALUES");
        size_t v = VDNN_CUDA_MAX_TENSOR_VALUES;
        if (e && *e && (!vdnn_parse_size(e, &v) || v == 0))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "cuda backend: VDNN_CUDA_TENSOR_VALUES='%s' is not a positive count of values", e);
        o->tensor_values = v;
    }
    if (o->tensor_values > VDNN_CUDA_MAX_TENSOR_VALUES)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: tensor_values %zu is above cuDNN's limit of %zu values",
                         o->tensor_values, VDNN_CUDA_MAX_TENSOR_VALUES);
    if (!o->conv_find_limit) {
        const char *e = getenv("VDNN_CONV_FIND_LIMIT");
        size_t lim = (size_t)4 << 30;
        if (e && *e && !vdnn_parse_size(e, &lim))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                             "cuda backend: VDNN_CONV_FIND_LIMIT='%s' is not a size (e.g. 1GiB, 0 to never measure)", e);
        o->conv_find_limit = e && *e ? lim : (size_t)4 << 30;
    }
    return VDNN_OK;
}

/* The failures that mean "no usable GPU here" rather than "the GPU failed": the CLI then falls back to the CPU. */
static vdnn_status no_device(cudaError_t e, int device, vdnn_error *err)
{
    (void)cudaGetLastError();
    switch (e) {
    case cudaErrorInsufficientDriver: {
        int drv = 0, rt = 0;
        if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
        if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = CUDART_VERSION;
        (void)cudaGetLastError();
        char have[96];
        if (drv > 0) snprintf(have, sizeof have, "the installed driver supports CUDA %d.%d", drv / 1000, drv % 1000 / 10);
        else snprintf(have, sizeof have, "no NVIDIA driver is installed");
        return vdnn_fail(err, VDNN_ERR_NO_DEVICE,
                         "no GPU: CUDA driver is insufficient for the CUDA runtime (%s): this build uses CUDA %d.%d, "
                         "which needs an NVIDIA driver %s or newer; %s",
                         cudaGetErrorName(e), rt / 1000, rt % 1000 / 10, vdnn_cuda_min_driver(rt / 1000), have);
    }
    case cudaErrorNoDevice: return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "no GPU: no CUDA device found");
    default:
        return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "no GPU: CUDA device %d cannot be used: %s (%s)", device,
                         cudaGetErrorString(e), cudaGetErrorName(e));
    }
}

static vdnn_status open_device(cuda_backend *b, vdnn_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return no_device(e, b->device, err);
    if (count < 1) return no_device(cudaErrorNoDevice, b->device, err);
    if (b->device >= count)
        return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "no GPU: CUDA device %d requested but only %d present", b->device, count);
    e = cudaSetDevice(b->device);
    /* cudaFree(NULL) creates the context now, so a failure shows here and not in the first op. */
    if (e == cudaSuccess) e = cudaFree(NULL);
    if (e != cudaSuccess) return no_device(e, b->device, err);
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, b->device);
    if (e != cudaSuccess) return no_device(e, b->device, err);
    snprintf(b->device_name, sizeof b->device_name, "%s", prop.name);
    b->cc_major = prop.major;
    b->cc_minor = prop.minor;
    snprintf(b->cache_scope, sizeof b->cache_scope, "%.256s|sm%d%d|cudnn%zu|tf32 %d", prop.name, prop.major, prop.minor,
             cudnnGetVersion(), b->opt.tf32 ? 1 : 0);
    e = vdnn_cuda_k_probe();
    if (e != cudaSuccess)
        return vdnn_fail(err, VDNN_ERR_NO_DEVICE,
                         "no GPU: %s (compute capability %d.%d) cannot run this build's kernels (%s); rebuild with "
                         "-DVDNN_CUDA_ARCHITECTURES=%d%d",
                         prop.name, prop.major, prop.minor, cudaGetErrorName(e), prop.major, prop.minor);
    return VDNN_OK;
}

static vdnn_status open_libraries(cuda_backend *b, vdnn_error *err)
{
    /* The header this was compiled with and the library loaded at run time must share a major version. */
    size_t v = cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR)
        return vdnn_fail(err, VDNN_ERR_BACKEND, "cuDNN: built against version %d.%d but loaded %zu.%zu", CUDNN_MAJOR,
                         CUDNN_MINOR, v / 10000, v / 100 % 100);
    for (int q = 0; q < VDNN_QUEUE_COUNT; q++) {
        /* Non-blocking: none of them waits for the legacy default stream (or it for them). */
        vdnn_status st = vdnn_cuda_check(cudaStreamCreateWithFlags(&b->stream[q], cudaStreamNonBlocking), err,
                                         "cudaStreamCreateWithFlags (%s queue)", queue_name((vdnn_queue_id)q));
        if (st) return st;
    }
    cudaStream_t compute = b->stream[VDNN_QUEUE_COMPUTE];
    vdnn_status st = VDNN_CUDNN_CHECK(cudnnCreate(&b->cudnn), err, "cudnnCreate");
    if (!st) st = VDNN_CUDNN_CHECK(cudnnSetStream(b->cudnn, compute), err, "cudnnSetStream");
    if (!st) st = vdnn_cublas_check(cublasCreate(&b->cublas), err, "cublasCreate");
    if (!st) st = vdnn_cublas_check(cublasSetStream(b->cublas, compute), err, "cublasSetStream");
    /* Partial sums of the per-channel reductions: fixed and small, outside any plan's budget. */
    if (!st)
        st = vdnn_cuda_check(cudaMalloc((void **)&b->sum_scratch, VDNN_CUDA_SUM_SCRATCH_BYTES), err,
                             "cudaMalloc of the reduction scratch (%zu bytes)", VDNN_CUDA_SUM_SCRATCH_BYTES);
    if (!st)
        st = vdnn_cuda_check(cudaMalloc((void **)&b->finite_flag, sizeof *b->finite_flag), err,
                             "cudaMalloc of the finite check's flag");
    /* As PyTorch: FP32 GEMMs may run as TF32 unless strict FP32 was asked for. */
    if (!st)
        st = vdnn_cublas_check(cublasSetMathMode(b->cublas, b->opt.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                               err, "cublasSetMathMode");
    return st;
}

vdnn_status vdnn_backend_cuda_create_ex(const vdnn_cuda_options *opt, vdnn_backend_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda backend: NULL output pointer");
    *out = NULL;
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    if (opt) o = *opt;
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "cuda backend: out of memory");
    b->base.ops = &cuda_ops;
    vdnn_status st = vdnn_cuda_resolve_options(&o, &b->opt, err);
    if (st) {
        free(b);
        return st;
    }
    b->device = b->opt.device;
    b->base.threads = b->opt.threads > 0 ? b->opt.threads : 1;
    st = open_device(b, err);
    if (st) {
        free(b); /* nothing was created on the device yet */
        return st;
    }
    size_t free_b = 0;
    if (cudaMemGetInfo(&free_b, &b->base.total_bytes) != cudaSuccess) (void)cudaGetLastError();
    st = open_libraries(b, err);
    if (st) {
        cuda_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return VDNN_OK;
}

vdnn_status vdnn_backend_cuda_create(int device, int threads, vdnn_backend_t **out, vdnn_error *err)
{
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.device = device;
    o.threads = threads;
    return vdnn_backend_cuda_create_ex(&o, out, err);
}
