/* MPI with deadlines: every wait on a peer polls its request and gives up after a timeout, so a rank that
 * died or stalled turns into an error naming what was awaited, never a hang. */
#ifndef VDNN_DIST_MPI_COMM_H
#define VDNN_DIST_MPI_COMM_H

#include <mpi.h>

#include "core/error.h"

typedef struct vdnn_comm {
    MPI_Comm world;      /* errors return (MPI_ERRORS_RETURN) instead of aborting */
    int rank, size;      /* in world */
    double timeout_s;    /* the longest any single wait may take */
} vdnn_comm;

/* Wraps `world` (a duplicate is not made: the caller keeps it alive) and sets MPI_ERRORS_RETURN on it. */
vdnn_status vdnn_comm_init(vdnn_comm *c, MPI_Comm world, double timeout_s, vdnn_error *err);

/* Turns an MPI return code into a vdnn error naming the call. */
vdnn_status vdnn_comm_check(const vdnn_comm *c, int mpi_rc, const char *what, vdnn_error *err);

/* Waits for all n requests, polling with a growing sleep; fails with VDNN_ERR_IO after timeout_s, saying
 * what was awaited (`what`, e.g. "gradients of step 12") and from which world rank (-1: several). */
vdnn_status vdnn_comm_waitall(const vdnn_comm *c, int n, MPI_Request *reqs, const char *what, int peer,
                              vdnn_error *err);

/* Lets outstanding non-blocking operations progress without waiting (Open MPI progresses only inside calls). */
void vdnn_comm_progress(int n, MPI_Request *reqs);

/* Blocking helpers built on the above, on any communicator whose ranks are named in world ranks by
 * `peer_world` for messages. */
vdnn_status vdnn_comm_send(const vdnn_comm *c, MPI_Comm comm, const void *buf, size_t count, MPI_Datatype type,
                           int dest, int tag, int peer_world, const char *what, vdnn_error *err);
vdnn_status vdnn_comm_recv(const vdnn_comm *c, MPI_Comm comm, void *buf, size_t count, MPI_Datatype type, int src,
                           int tag, int peer_world, const char *what, vdnn_error *err);
vdnn_status vdnn_comm_allreduce(const vdnn_comm *c, MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                                const char *what, vdnn_error *err);
vdnn_status vdnn_comm_bcast(const vdnn_comm *c, MPI_Comm comm, void *buf, int count, MPI_Datatype type, int root,
                            const char *what, vdnn_error *err);
vdnn_status vdnn_comm_barrier(const vdnn_comm *c, MPI_Comm comm, const char *what, vdnn_error *err);

/* The world rank of rank r of comm. */
int vdnn_comm_world_rank(const vdnn_comm *c, MPI_Comm comm, int r);

#endif
