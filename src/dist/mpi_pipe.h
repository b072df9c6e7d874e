/* Model parallelism: one stage of a pipeline of nets, each on its own rank, running a step's micro-batches on a
 * GPipe schedule and exchanging activations forward and their gradients backward as MPI point-to-point messages. */
#ifndef VDNN_DIST_MPI_PIPE_H
#define VDNN_DIST_MPI_PIPE_H

#include "dist/mpi_comm.h"
#include "dist/nccl_comm.h"
#include "exec/net.h"

typedef struct vdnn_pipe vdnn_pipe;

/* net runs a stage graph (vdnn_stage_graph) with hooks, pipelined when it has micro-batches; pipe_comm's rank
 * k is stage k. Every stage of a pipeline has the same micro-batch count and size. nccl (borrowed, over
 * pipe_comm's ranks; NULL: MPI on host memory): activations and gradients go device to device by NCCL send and
 * receive, each enqueued when its data is needed or ready (one NCCL stream runs them in order, so nothing is
 * posted ahead), through device staging buffers. */
vdnn_status vdnn_pipe_create(const vdnn_comm *c, MPI_Comm pipe_comm, vdnn_nccl *nccl, vdnn_net_t *net, int stage,
                             int stages, vdnn_pipe **out, vdnn_error *err);
void vdnn_pipe_free(vdnn_pipe *p);

/* One training step of this stage: the forward passes of micro-batches 0..M-1 (stage 0 reads them from
 * `images`, net->cfg.batch images; a later stage receives each from the previous stage and sends its own
 * output on as soon as it has it), then their backward passes in the same order (each waits for its output
 * gradient from the next stage and sends its input gradient back), then one update. Every receive is posted
 * when the step starts and every send is non-blocking, so messages move while later micro-batches compute.
 * labels: the last stage's (net->cfg.batch); *loss: the last stage's mean over the micro-batches, else 0. */
vdnn_status vdnn_pipe_train_step(vdnn_pipe *p, const float *images, const int32_t *labels, float lr, float *loss,
                                 vdnn_error *err);

/* The hook bodies. At the tail softmax (the first backward step of a stage other than the last): wait for the
 * gradient of the running micro-batch's output and put it where the softmax left its own. At the stage's
 * input layer (its last backward step): send the input's gradient back. */
vdnn_status vdnn_pipe_grads_ready(vdnn_pipe *p, int layer, vdnn_error *err);
/* Lets this step's messages progress (Open MPI moves them only inside MPI calls); called between layers. */
void vdnn_pipe_progress(vdnn_pipe *p);

#endif
