/* MPI with deadlines: polled waits that fail with a clear message instead of hanging on a dead peer. */
#include "dist/mpi_comm.h"

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

vdnn_status vdnn_comm_check(const vdnn_comm *c, int mpi_rc, const char *what, vdnn_error *err)
{
    if (mpi_rc == MPI_SUCCESS) return VDNN_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = '\0';
    return vdnn_fail(err, VDNN_ERR_IO, "rank %d: MPI failed in %s: %s", c->rank, what, len ? msg : "unknown error");
}

vdnn_status vdnn_comm_init(vdnn_comm *c, MPI_Comm world, double timeout_s, vdnn_error *err)
{
    c->world = world;
    c->rank = 0;
    c->size = 1;
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
    vdnn_status rc = vdnn_comm_check(c, MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", err);
    if (rc == VDNN_OK) rc = vdnn_comm_check(c, MPI_Comm_rank(world, &c->rank), "MPI_Comm_rank", err);
    if (rc == VDNN_OK) rc = vdnn_comm_check(c, MPI_Comm_size(world, &c->size), "MPI_Comm_size", err);
    return rc;
}

void vdnn_comm_progress(int n, MPI_Request *reqs)
{
    int done;
    if (n > 0) (void)MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
}

vdnn_status vdnn_comm_waitall(const vdnn_comm *c, int n, MPI_Request *reqs, const char *what, int peer,
                              vdnn_error *err)
{
    const double start = now_s(), deadline = start + c->timeout_s;
    long nap_ns = 0;
    for (long polls = 0;; polls++) {
        int done = 0;
        int mrc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (mrc != MPI_SUCCESS) return vdnn_comm_check(c, mrc, what, err);
        if (done) return VDNN_OK;
        /* Large messages move in fragments, each needing a poll: poll without pause (yielding the core,
         * as ranks may outnumber cores) while data is likely flowing, then sleep longer and longer so a
         * rank waiting on a slow peer leaves its core to the ranks that compute. */
        double t = (polls & 63) == 0 ? now_s() : 0;
        if (t > deadline) {
            if (peer >= 0)
                return vdnn_fail(err, VDNN_ERR_IO,
                                 "rank %d: timed out after %.0f s waiting for %s from rank %d: that rank has died or "
                                 "stalled (see dist.timeout_s)",
                                 c->rank, c->timeout_s, what, peer);
            return vdnn_fail(err, VDNN_ERR_IO,
                             "rank %d: timed out after %.0f s waiting for %s: another rank has died or stalled (see "
                             "dist.timeout_s)",
                             c->rank, c->timeout_s, what);
        }
        if (nap_ns == 0 && t - start < 0.25) {
            sched_yield();
            continue;
        }
        nap_ns = nap_ns ? nap_ns * 2 : 10000;
        if (nap_ns > 1000000) nap_ns = 1000000;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
    }
}

static vdnn_status check_count(const vdnn_comm *c, size_t count, const char *what, vdnn_error *err)
{
    if (count > INT_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "rank %d: %s has %zu elements, more than one MPI message takes",
                         c->rank, what, count);
    return VDNN_OK;
}

vdnn_status vdnn_comm_send(const vdnn_comm *c, MPI_Comm comm, const void *buf, size_t count, MPI_Datatype type,
                           int dest, int tag, int peer_world, const char *what, vdnn_error *err)
{
    vdnn_status rc = check_count(c, count, what, err);
    if (rc) return rc;
    MPI_Request r;
    rc = vdnn_comm_check(c, MPI_Isend(buf, (int)count, type, dest, tag, comm, &r), what, err);
    return rc ? rc : vdnn_comm_waitall(c, 1, &r, what, peer_world, err);
}

vdnn_status vdnn_comm_recv(const vdnn_comm *c, MPI_Comm comm, void *buf, size_t count, MPI_Datatype type, int src,
                           int tag, int peer_world, const char *what, vdnn_error *err)
{
    vdnn_status rc = check_count(c, count, what, err);
    if (rc) return rc;
    MPI_Request r;
    rc = vdnn_comm_check(c, MPI_Irecv(buf, (int)count, type, src, tag, comm, &r), what, err);
    return rc ? rc : vdnn_comm_waitall(c, 1, &r, what, peer_world, err);
}

vdnn_status vdnn_comm_allreduce(const vdnn_comm *c, MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                                const char *what, vdnn_error *err)
{
    MPI_Request r;
    vdnn_status rc = vdnn_comm_check(c, MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, op, comm, &r), what, err);
    return rc ? rc : vdnn_comm_waitall(c, 1, &r, what, -1, err);
}

vdnn_status vdnn_comm_bcast(const vdnn_comm *c, MPI_Comm comm, void *buf, int count, MPI_Datatype type, int root,
                            const char *what, vdnn_error *err)
{
    MPI_Request r;
    vdnn_status rc = vdnn_comm_check(c, MPI_Ibcast(buf, count, type, root, comm, &r), what, err);
    return rc ? rc : vdnn_comm_waitall(c, 1, &r, what, vdnn_comm_world_rank(c, comm, root), err);
}

vdnn_status vdnn_comm_barrier(const vdnn_comm *c, MPI_Comm comm, const char *what, vdnn_error *err)
{
    MPI_Request r;
    vdnn_status rc = vdnn_comm_check(c, MPI_Ibarrier(comm, &r), what, err);
    return rc ? rc : vdnn_comm_waitall(c, 1, &r, what, -1, err);
}

int vdnn_comm_world_rank(const vdnn_comm *c, MPI_Comm comm, int r)
{
    MPI_Group g, wg;
    int out = -1;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS) return -1;
    if (MPI_Comm_group(c->world, &wg) == MPI_SUCCESS) {
        if (MPI_Group_translate_ranks(g, 1, &r, wg, &out) != MPI_SUCCESS) out = -1;
        MPI_Group_free(&wg);
    }
    MPI_Group_free(&g);
    return out;
}
