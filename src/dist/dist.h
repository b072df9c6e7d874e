/* Distributed training on MPI: data parallelism across groups of ranks, model parallelism (a pipeline of
 * stages) inside each group, and the training loop, checkpoints and evaluation that go with them. */
#ifndef VDNN_DIST_DIST_H
#define VDNN_DIST_DIST_H

#include <mpi.h>

#include "dist/mpi_comm.h"
#include "dist/mpi_dp.h"
#include "dist/mpi_pipe.h"
#include "dist/stages.h"
#include "plan/profile.h"
#include "train/train.h"

typedef struct vdnn_dist_config {
    int stages;                  /* model-parallel stages per data-parallel group (1: data parallelism) */
    size_t bucket_bytes;         /* gradient bucket size (0: every layer its own bucket) */
    double timeout_s;            /* the longest wait on another rank before giving up (<= 0: 300 s) */
    bool balance;                /* place stages by cost even when the model file has stage= keys */
    bool sync_bn;                /* batch norm normalizes over the whole global batch (its statistics summed over
                                    the groups at each layer), so a BN net trains like one device at the global
                                    batch; false: over each group's share. CPU backend only. */
    bool no_nccl;                /* GPU ranks sum gradients through MPI on host memory even when NCCL is built */
    const vdnn_profile *profile; /* measured costs of the full graph at the per-group batch, for balancing
                                    (NULL: a FLOP-based estimate) */
} vdnn_dist_config;

/* One rank's part: world rank r is stage r % stages of group r / stages. */
typedef struct vdnn_dist_worker {
    vdnn_comm comm;
    int stages, groups, stage, group;
    MPI_Comm dp_comm;            /* the same stage of every group */
    MPI_Comm pipe_comm;          /* the stages of this group */
    MPI_Comm bn_comm;            /* with sync_bn: dp_comm's ranks, apart from the gradient sums' traffic */
    bool sync_bn;
    vdnn_reduce bn_reduce;       /* the net's batch-norm sums over bn_comm */
    double *bn_buf;              /* their messages: the sums and two check values */
    size_t bn_cap;
    vdnn_graph_t *full;          /* borrowed; resolved at the per-group batch */
    vdnn_graph_t *sub;           /* this stage's graph (NULL with one stage: the net runs `full`) */
    vdnn_stage_split split;
    vdnn_net_t *net;
    vdnn_dp *dp;                 /* NULL with one group */
    vdnn_nccl *dp_nccl;          /* NCCL over dp_comm: every rank of it on a GPU, NCCL built and not refused */
    vdnn_nccl *pipe_nccl;        /* NCCL over pipe_comm, likewise */
    vdnn_pipe *pipe;             /* NULL with one stage */
    vdnn_grad_hooks hooks;
    vdnn_net_config cfg;         /* of the net (batch: per group) */
    vdnn_net_config full_cfg;    /* of a one-device net of the whole model at the per-group batch */
    int global_batch;
    uint64_t seed;               /* the run's seed */
    uint64_t model_hash;         /* of the full model, as a one-device checkpoint names it */
} vdnn_dist_worker;

/* Collective over `world`. cfg describes the whole model at the global batch (cfg->batch images per step
 * over all groups); each group trains on its share of every batch. The world size must be a multiple
 * of dc->stages and the batch of the group count. With stages > 1 the split comes from the model's
 * stage= keys if it has them (and dc->balance is false), else balances per-layer costs over the cuts
 * where one tensor alone crosses, keeping each stage within cfg->budget. */
vdnn_status vdnn_dist_create(MPI_Comm world, vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_config *cfg,
                             const vdnn_dist_config *dc, vdnn_dist_worker **out, vdnn_error *err);
void vdnn_dist_free(vdnn_dist_worker *w);

/* Sets the run's seed (shuffling and dropout masks; a resume takes the checkpoint's): the net's own seed
 * then also carries this rank's group and stage (see mpi_worker.c). */
vdnn_status vdnn_dist_set_seed(vdnn_dist_worker *w, uint64_t seed, vdnn_error *err);

/* Collective. World rank 0 writes one checkpoint of the whole model (the format of a one-device run,
 * so `vdnn eval` and one-device resumes read it); batch-norm statistics are first averaged over groups. */
vdnn_status vdnn_dist_save(vdnn_dist_worker *w, const char *path, vdnn_error *err);
/* Every rank loads its part of a checkpoint (written by any layout of the same model). */
vdnn_status vdnn_dist_resume(vdnn_dist_worker *w, const char *path, vdnn_error *err);
/* Collective: accuracy and mean loss over ds on every rank. */
vdnn_status vdnn_dist_evaluate(vdnn_dist_worker *w, const vdnn_dataset_t *ds, double *accuracy, double *loss,
                               vdnn_error *err);

typedef struct vdnn_dist_run_options {
    vdnn_train_options train;    /* log and save act on world rank 0 only; record_last is ignored */
    void (*after_step)(void *ctx, long step, int rank); /* called on every rank after every step (tests) */
    void *ctx;
} vdnn_dist_run_options;

/* The training loop: every rank reads the same shuffled global batches and keeps its group's share. */
vdnn_status vdnn_dist_train_run(vdnn_dist_worker *w, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                                const vdnn_dist_run_options *o, vdnn_train_result *r, vdnn_error *err);

#endif
