/* Model parallelism: one stage of a pipeline of nets, each on its own rank, exchanging activations forward
 * and their gradients backward with MPI point-to-point messages from inside the stage's iteration. */
#ifndef VDNN_DIST_MPI_PIPE_H
#define VDNN_DIST_MPI_PIPE_H

#include "dist/mpi_comm.h"
#include "exec/net.h"

typedef struct vdnn_pipe vdnn_pipe;

/* net runs a stage graph (vdnn_stage_graph) with hooks; pipe_comm's rank k is stage k. */
vdnn_status vdnn_pipe_create(const vdnn_comm *c, MPI_Comm pipe_comm, vdnn_net_t *net, int stage, int stages,
                             vdnn_pipe **out, vdnn_error *err);
void vdnn_pipe_free(vdnn_pipe *p);

/* Stage > 0, before its training step: receives the previous stage's output, the net's input. */
vdnn_status vdnn_pipe_recv_input(vdnn_pipe *p, const float **input, vdnn_error *err);
/* Before each training step: the stage's output is captured when the executor lets it go. */
void vdnn_pipe_begin_step(vdnn_pipe *p);
/* The hook body. At the tail softmax (the first backward step of a stage other than the last): send the
 * stage's output on, receive the gradient of it, and put it where the softmax left its own. At the
 * stage's input layer (its last backward step): send the input's gradient back. */
vdnn_status vdnn_pipe_grads_ready(vdnn_pipe *p, int layer, vdnn_error *err);
/* After the step: waits until this step's messages have left. */
vdnn_status vdnn_pipe_end_step(vdnn_pipe *p, vdnn_error *err);

#endif
