/* The MPI runtime of parallel training (what vdnn-mpi runs): data parallelism over groups of ranks, a pipeline
 * of model-parallel stages inside each group, and its training loop and checkpoints. Part of the build when MPI
 * is found (the vdnn_dist library), not of libvdnn, which never links MPI. */
#ifndef VDNN_DIST_PUBLIC_H
#define VDNN_DIST_PUBLIC_H

#include <mpi.h>

#include "vdnn/vdnn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vdnn_dist_worker vdnn_dist_t; /* one rank's part of a run */

typedef struct vdnn_dist_options {
    int stages;                    /* model-parallel stages per data-parallel group (default 1) */
    size_t bucket_bytes;           /* gradient bucket size (default 4 MiB; 0: every layer its own bucket) */
    double timeout_s;              /* the longest wait on another rank before giving up (default 300 s) */
    bool balance;                  /* place stages by cost even when the model file has stage= keys */
    bool sync_bn;                  /* batch norm normalizes over the whole global batch (CPU backend only) */
    bool no_nccl;                  /* GPU ranks sum gradients through MPI on host memory even when NCCL is built */
    const vdnn_profile_t *profile; /* costs of the full model at the per-group batch, for balancing stages
                                      (NULL: a FLOP-based estimate) */
} vdnn_dist_options;

vdnn_dist_options vdnn_dist_options_default(void);

/* Collective over `world`. o describes the whole model at the global batch (o->batch images per step over all
 * groups); each group trains on its share. The world size must be a multiple of d->stages and the batch of the
 * group count. Messages name the fields at fault ("stages", "batch", "memory.micro_batches", ...). */
vdnn_status vdnn_dist_create(MPI_Comm world, const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_net_options *o,
                             const vdnn_dist_options *d, vdnn_dist_t **out, vdnn_error *err);
void vdnn_dist_free(vdnn_dist_t *w);

/* Collective: every rank loads its part of a checkpoint written by any layout of the same model (or by one
 * device), and the run goes on with that checkpoint's seed. */
vdnn_status vdnn_dist_resume(vdnn_dist_t *w, const char *path, vdnn_error *err);

typedef struct vdnn_dist_run_options {
    vdnn_train_options train;      /* progress and save act on world rank 0 only; record_last is ignored */
    void (*after_step)(void *ctx, long step, int rank); /* called on every rank after every step (tests) */
    void *ctx;
} vdnn_dist_run_options;

/* Collective: the training loop; every rank reads the same shuffled global batches and keeps its group's share.
 * peak_device_bytes is the largest of any rank, images_per_sec the slowest rank's. */
vdnn_status vdnn_dist_train_run(vdnn_dist_t *w, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                                const vdnn_dist_run_options *o, vdnn_train_result *r, vdnn_error *err);

typedef struct vdnn_dist_info {
    char model[64];
    int ranks, rank, stages, groups, stage, group;
    int global_batch, group_batch, micro_batches;
    vdnn_shape input;              /* of the whole model (n: a group's batch) */
    int classes;
    bool sync_bn;                  /* batch norm synchronized over the groups */
    bool dp_nccl, pipe_nccl;       /* gradients summed / stage messages sent by NCCL */
    char split[1024];              /* the stages' layer ranges ("" with one stage) */
    int gradient_buckets;
    size_t gradient_bytes;
    double gradient_hook_s, gradient_wait_s;
} vdnn_dist_info;

void vdnn_dist_get_info(const vdnn_dist_t *w, vdnn_dist_info *i);

#ifdef __cplusplus
}
#endif
#endif
