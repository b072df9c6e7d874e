/* Distributed training on MPI, inside: a rank's worker (its group and stage, communicators, stage graph, net and
 * hooks), and the calls between the runtime's files. The public calls are in vdnn/dist.h. */
#ifndef VDNN_DIST_DIST_H
#define VDNN_DIST_DIST_H

#include <mpi.h>

#include "dist/mpi_comm.h"
#include "dist/mpi_dp.h"
#include "dist/mpi_pipe.h"
#include "dist/mpi_tie.h"
#include "dist/stages.h"
#include "plan/profile.h"
#include "train/net_checkpoint.h"
#include "train/train.h"
#include "vdnn/dist.h"

/* One rank's part: world rank r is stage r % stages of group r / stages. */
struct vdnn_dist_worker {
    vdnn_comm comm;
    int stages, groups, stage, group;
    MPI_Comm dp_comm;            /* the same stage of every group */
    MPI_Comm pipe_comm;          /* the stages of this group */
    MPI_Comm bn_comm;            /* with sync_bn: dp_comm's ranks, apart from the gradient sums' traffic */
    bool sync_bn;
    vdnn_reduce bn_reduce;       /* the net's batch-norm sums over bn_comm */
    double *bn_buf;              /* their messages: the sums and two check values */
    size_t bn_cap;
    vdnn_graph_t *full;          /* the whole model, resolved at the per-group batch (owned) */
    vdnn_graph_t *sub;           /* this stage's graph (NULL with one stage: the net runs `full`) */
    vdnn_stage_split split;
    vdnn_net_t *net;
    vdnn_dp *dp;                 /* NULL with one group */
    vdnn_nccl *dp_nccl;          /* NCCL over dp_comm: every rank of it on a GPU, NCCL built and not refused */
    vdnn_nccl *pipe_nccl;        /* NCCL over pipe_comm, likewise */
    vdnn_pipe *pipe;             /* NULL with one stage */
    vdnn_tie *tie;               /* NULL unless the split puts a table and its tied reader in different stages */
    vdnn_grad_hooks hooks;
    vdnn_net_options opt;        /* of the net (batch: per group) */
    vdnn_net_extras x;           /* its hooks, batch-norm sums and dropout seeds */
    vdnn_net_options full_opt;   /* of a one-device net of the whole model at the per-group batch */
    int global_batch;
    uint64_t seed;               /* the run's seed */
    uint64_t model_hash;         /* of the full model, as a one-device checkpoint names it */
};

/* Sets the run's seed (shuffling and dropout masks; a resume takes the checkpoint's): the net's own seed
 * then also carries this rank's group and stage (see mpi_worker.c). */
vdnn_status vdnn_dist_set_seed(vdnn_dist_t *w, uint64_t seed, vdnn_error *err);

/* Collective. World rank 0 writes one checkpoint of the whole model (the format of a one-device run,
 * so `vdnn eval` and one-device resumes read it); batch-norm statistics are first averaged over groups. */
vdnn_status vdnn_dist_save(vdnn_dist_t *w, const char *path, vdnn_error *err);
/* Collective: accuracy and mean loss over ds on every rank. */
vdnn_status vdnn_dist_evaluate(vdnn_dist_t *w, const vdnn_dataset_t *ds, double *accuracy, double *loss,
                               vdnn_error *err);

#endif
