/* NCCL for ranks whose device is a GPU: collectives and point-to-point messages on device memory, on a
 * stream of their own ordered after the backend's compute queue, with MPI only to share the NCCL id.
 * Free of CUDA and NCCL headers: builds without NCCL link nccl_absent.c, whose calls say so. */
#ifndef VDNN_DIST_NCCL_COMM_H
#define VDNN_DIST_NCCL_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "dist/mpi_comm.h"

typedef struct vdnn_nccl vdnn_nccl;

/* Whether this build has NCCL (and the CUDA backend it needs). */
bool vdnn_nccl_built(void);

/* Collective over comm: rank 0 of comm makes an NCCL id, MPI broadcasts it, and every rank joins one NCCL
 * communicator on be's device (be: the CUDA backend, VDNN_ERR_UNSUPPORTED otherwise or without NCCL).
 * Joining is non-blocking and polled, so a rank that never comes fails after c->timeout_s. */
vdnn_status vdnn_nccl_create(const vdnn_comm *c, MPI_Comm comm, vdnn_backend_t *be, vdnn_nccl **out, vdnn_error *err);
void vdnn_nccl_free(vdnn_nccl *n);

/* k in-place float sums over the communicator, as one NCCL group, started once the work the backend's
 * compute queue holds now is done. Returns at once. */
vdnn_status vdnn_nccl_allreduce(vdnn_nccl *n, float *const *bufs, const size_t *counts, int k, const char *what,
                                vdnn_error *err);
/* A send or receive of device memory to or from rank `peer` of the communicator, ordered the same way. */
vdnn_status vdnn_nccl_send(vdnn_nccl *n, const float *buf, size_t count, int peer, const char *what, vdnn_error *err);
vdnn_status vdnn_nccl_recv(vdnn_nccl *n, float *buf, size_t count, int peer, const char *what, vdnn_error *err);

/* Waits (polling, at most the timeout, then aborting the communicator) until everything enqueued on the
 * NCCL stream so far is done, and makes the compute queue wait for it too. `what` names it in errors. */
vdnn_status vdnn_nccl_wait(vdnn_nccl *n, const char *what, vdnn_error *err);

#endif
