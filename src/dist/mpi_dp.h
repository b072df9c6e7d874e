/* Data parallelism: gradients summed over the ranks of a communicator in buckets that start during the
 * backward pass (MPI_Iallreduce), so communication overlaps the layers still computing. */
#ifndef VDNN_DIST_MPI_DP_H
#define VDNN_DIST_MPI_DP_H

#include "dist/mpi_comm.h"
#include "dist/nccl_comm.h"
#include "exec/net.h"

typedef struct vdnn_dp vdnn_dp;

/* For a net created with hooks (so its weight gradients persist until the update). Buckets hold
 * about bucket_bytes of gradients each, filled in backward order. nccl (borrowed, over dp_comm's ranks; NULL:
 * MPI): each bucket is summed on the device by an NCCL group that waits for the backward pass by event. */
vdnn_status vdnn_dp_create(const vdnn_comm *c, MPI_Comm dp_comm, vdnn_nccl *nccl, vdnn_net_t *net, size_t bucket_bytes,
                           vdnn_dp **out, vdnn_error *err);
void vdnn_dp_free(vdnn_dp *dp);

/* The hook bodies: copy a finished layer's gradients into its bucket and start the bucket's sum once
 * all its layers are done; before the update, wait for every bucket and write back sum / ranks. */
vdnn_status vdnn_dp_grads_ready(vdnn_dp *dp, int layer, vdnn_error *err);
vdnn_status vdnn_dp_before_update(vdnn_dp *dp, vdnn_error *err);

/* Buckets per step and the bytes one rank sends into the sums (for reports). */
int vdnn_dp_buckets(const vdnn_dp *dp);
size_t vdnn_dp_bytes(const vdnn_dp *dp);
/* Mean seconds per step spent in the hooks during backward (copies, starting and polling sums) and in
 * the wait before the update (the sums' part that backward did not hide, and the scaling). */
void vdnn_dp_times(const vdnn_dp *dp, double *hook_s, double *wait_s);

/* Averages the batch-norm running statistics over the ranks (each rank's come from its share of the batch). */
vdnn_status vdnn_dp_average_stats(const vdnn_comm *c, MPI_Comm dp_comm, vdnn_net_t *net, vdnn_error *err);

#endif
