/* NCCL for GPU ranks: one non-blocking communicator per MPI communicator, its work on a stream of its own
 * that waits for the backend's compute queue by events, and host waits polled against the MPI timeout. */
#include "dist/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_backend.h"

struct vdnn_nccl {
    const vdnn_comm *c;
    vdnn_backend_t *be;
    int device, rank, ranks;
    ncclComm_t comm;
    bool aborted;
    cudaStream_t stream;        /* NCCL's own: collectives overlap the compute that follows them */
    cudaStream_t compute;       /* the backend's compute queue */
    cudaEvent_t ready, done;    /* compute -> NCCL, NCCL -> compute and host */
};

bool vdnn_nccl_built(void) { return true; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static vdnn_status cuda_fail(const vdnn_nccl *n, cudaError_t e, const char *call, vdnn_error *err)
{
    return vdnn_fail(err, VDNN_ERR_BACKEND, "rank %d: %s failed: %s", n->c->rank, call, cudaGetErrorString(e));
}

/* Non-blocking NCCL calls may return ncclInProgress: poll until the communicator settles, at most the
 * timeout; then abort it, so nothing waits on a peer that is gone. */
static vdnn_status settle(vdnn_nccl *n, ncclResult_t r, const char *what, vdnn_error *err)
{
    const double deadline = now_s() + n->c->timeout_s;
    while (r == ncclInProgress) {
        if (now_s() > deadline) {
            ncclCommAbort(n->comm);
            n->aborted = true;
            return vdnn_fail(err, VDNN_ERR_IO,
                             "rank %d: timed out after %.0f s in NCCL (%s): another rank has died or stalled (see "
                             "dist.timeout_s)",
                             n->c->rank, n->c->timeout_s, what);
        }
        sched_yield();
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess) break;
    }
    if (r == ncclSuccess) return VDNN_OK;
    const char *last = ncclGetLastError(n->comm);
    return vdnn_fail(err, VDNN_ERR_IO, "rank %d: NCCL failed in %s: %s%s%s", n->c->rank, what, ncclGetErrorString(r),
                     last && *last ? ": " : "", last ? last : "");
}

vdnn_status vdnn_nccl_create(const vdnn_comm *c, MPI_Comm comm, vdnn_backend_t *be, vdnn_nccl **out, vdnn_error *err)
{
    *out = NULL;
    void *compute = vdnn_cuda_stream(be, VDNN_QUEUE_COMPUTE);
    if (!compute)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "NCCL needs the CUDA backend (this rank runs %s)", be->ops->name);
    vdnn_nccl *n = calloc(1, sizeof *n);
    if (!n) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    n->c = c;
    n->be = be;
    n->device = vdnn_cuda_device(be);
    n->compute = (cudaStream_t)compute;
    vdnn_status rc = vdnn_comm_check(c, MPI_Comm_rank(comm, &n->rank), "MPI_Comm_rank", err);
    if (rc == VDNN_OK) rc = vdnn_comm_check(c, MPI_Comm_size(comm, &n->ranks), "MPI_Comm_size", err);
    cudaError_t e = cudaSetDevice(n->device);
    if (rc == VDNN_OK && e != cudaSuccess) rc = cuda_fail(n, e, "cudaSetDevice", err);
    /* Every rank takes part in the broadcast and the check after it, failed or not, so that a rank that
     * cannot go on makes the others fail at once instead of waiting in NCCL for it. */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int ok = rc == VDNN_OK;
    if (n->rank == 0 && ok && ncclGetUniqueId(&id) != ncclSuccess) {
        rc = vdnn_fail(err, VDNN_ERR_IO, "rank %d: ncclGetUniqueId failed", c->rank);
        ok = 0;
    }
    vdnn_error e2;
    vdnn_status crc = vdnn_comm_bcast(c, comm, &id, (int)sizeof id, MPI_BYTE, 0, "the NCCL id", &e2);
    if (crc == VDNN_OK) crc = vdnn_comm_allreduce(c, comm, &ok, 1, MPI_INT, MPI_MIN, "NCCL set-up", &e2);
    if (rc == VDNN_OK && crc) {
        rc = crc;
        if (err) *err = e2;
    }
    if (rc == VDNN_OK && !ok) rc = vdnn_fail(err, VDNN_ERR_IO, "rank %d: another rank could not set up NCCL", c->rank);
    if (rc == VDNN_OK && (e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking)) != cudaSuccess)
        rc = cuda_fail(n, e, "cudaStreamCreateWithFlags", err);
    if (rc == VDNN_OK && (e = cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming)) != cudaSuccess)
        rc = cuda_fail(n, e, "cudaEventCreateWithFlags", err);
    if (rc == VDNN_OK && (e = cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming)) != cudaSuccess)
        rc = cuda_fail(n, e, "cudaEventCreateWithFlags", err);
    if (rc == VDNN_OK) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&n->comm, n->ranks, id, n->rank, &cfg);
        if (r == ncclSuccess || r == ncclInProgress) rc = settle(n, r, "ncclCommInitRank", err);
        else rc = vdnn_fail(err, VDNN_ERR_IO, "rank %d: ncclCommInitRank failed: %s", c->rank, ncclGetErrorString(r));
    }
    if (rc != VDNN_OK) {
        vdnn_nccl_free(n);
        return rc;
    }
    *out = n;
    return VDNN_OK;
}

void vdnn_nccl_free(vdnn_nccl *n)
{
    if (!n) return;
    if (n->comm && !n->aborted) {
        /* Finalize flushes what is in flight (polled: settle aborts at the deadline). */
        vdnn_error e;
        if (settle(n, ncclCommFinalize(n->comm), "ncclCommFinalize", &e) == VDNN_OK) ncclCommDestroy(n->comm);
        else if (!n->aborted) ncclCommAbort(n->comm);
    }
    if (n->stream) cudaStreamDestroy(n->stream);
    if (n->ready) cudaEventDestroy(n->ready);
    if (n->done) cudaEventDestroy(n->done);
    free(n);
}

/* The NCCL stream waits for what the compute queue holds now. */
static vdnn_status after_compute(vdnn_nccl *n, vdnn_error *err)
{
    if (n->aborted) return vdnn_fail(err, VDNN_ERR_IO, "rank %d: the NCCL communicator was aborted", n->c->rank);
    cudaError_t e = cudaEventRecord(n->ready, n->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(n->stream, n->ready, 0);
    return e == cudaSuccess ? VDNN_OK : cuda_fail(n, e, "ordering NCCL after compute", err);
}

vdnn_status vdnn_nccl_allreduce(vdnn_nccl *n, float *const *bufs, const size_t *counts, int k, const char *what,
                                vdnn_error *err)
{
    vdnn_status rc = after_compute(n, err);
    if (rc) return rc;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; r == ncclSuccess && i < k; i++)
        r = ncclAllReduce(bufs[i], bufs[i], counts[i], ncclFloat, ncclSum, n->comm, n->stream);
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = end;
    return settle(n, r, what, err);
}

vdnn_status vdnn_nccl_send(vdnn_nccl *n, const float *buf, size_t count, int peer, const char *what, vdnn_error *err)
{
    vdnn_status rc = after_compute(n, err);
    return rc ? rc : settle(n, ncclSend(buf, count, ncclFloat, peer, n->comm, n->stream), what, err);
}

vdnn_status vdnn_nccl_recv(vdnn_nccl *n, float *buf, size_t count, int peer, const char *what, vdnn_error *err)
{
    vdnn_status rc = after_compute(n, err);
    return rc ? rc : settle(n, ncclRecv(buf, count, ncclFloat, peer, n->comm, n->stream), what, err);
}

vdnn_status vdnn_nccl_wait(vdnn_nccl *n, const char *what, vdnn_error *err)
{
    if (n->aborted) return vdnn_fail(err, VDNN_ERR_IO, "rank %d: the NCCL communicator was aborted", n->c->rank);
    cudaError_t e = cudaEventRecord(n->done, n->stream);
    if (e != cudaSuccess) return cuda_fail(n, e, "cudaEventRecord", err);
    /* A kernel waiting on a dead peer never ends: poll, and abort the communicator at the deadline. */
    const double start = now_s(), deadline = start + n->c->timeout_s;
    long nap_ns = 0;
    for (;;) {
        e = cudaEventQuery(n->done);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) return cuda_fail(n, e, what, err);
        ncclResult_t r = ncclSuccess;
        if (ncclCommGetAsyncError(n->comm, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
            return settle(n, r, what, err);
        const double t = now_s();
        if (t > deadline) {
            ncclCommAbort(n->comm);
            n->aborted = true;
            return vdnn_fail(err, VDNN_ERR_IO,
                             "rank %d: timed out after %.0f s waiting for %s (NCCL): another rank has died or "
                             "stalled (see dist.timeout_s)",
                             n->c->rank, n->c->timeout_s, what);
        }
        if (t - start < 0.25) {
            sched_yield();
            continue;
        }
        nap_ns = nap_ns ? (nap_ns < 500000 ? nap_ns * 2 : 1000000) : 10000;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
    }
    e = cudaStreamWaitEvent(n->compute, n->done, 0);
    return e == cudaSuccess ? VDNN_OK : cuda_fail(n, e, "ordering compute after NCCL", err);
}
