/* Tables shared across pipeline stages: an embedding's table in one stage and, in a later stage, the tied linear
 * that reads it (GPT-2's output projection), which holds a copy (dist/stages.c, graph.h's weight_of). */
#ifndef VDNN_DIST_MPI_TIE_H
#define VDNN_DIST_MPI_TIE_H

#include "dist/mpi_comm.h"
#include "dist/stages.h"
#include "exec/net.h"

typedef struct vdnn_tie vdnn_tie;

/* Collective over pipe_comm. The exchanges of stage `stage` (pipe_comm's rank) of the split of `full`, for every
 * table of it that the split puts in another stage than its reader (none for a stage in between); *out is NULL when
 * the split shares no table across stages. net runs the stage's graph with micro-batches of the pipeline's count. */
vdnn_status vdnn_tie_create(const vdnn_comm *c, MPI_Comm pipe_comm, const vdnn_graph_t *full,
                            const vdnn_stage_split *split, int stage, vdnn_net_t *net, vdnn_tie **out,
                            vdnn_error *err);
void vdnn_tie_free(vdnn_tie *t);

/* A step's exchanges, as a one-device net sums a tied table's gradient (exec.c): the owner's part of micro-batch j
 * plus the reader's part of the same micro-batch, then the micro-batches' sum, its reduction over data-parallel
 * groups, clipping and the update on the owner's stage alone, so the table trains bit for bit as on one device.
 * begin_step (before the step) posts the owner's receives of the reader's parts. backward_done (the net's hook,
 * after each layer's backward op): at the reader, its part of the running micro-batch goes to the owner; at the
 * owner, the reader's part of that micro-batch is added to the embedding's own. end_step (after the update): the
 * owner sends the updated table, and the reader's copy takes it before its step ends. */
vdnn_status vdnn_tie_begin_step(vdnn_tie *t, vdnn_error *err);
vdnn_status vdnn_tie_backward_done(vdnn_tie *t, int layer, vdnn_error *err);
vdnn_status vdnn_tie_end_step(vdnn_tie *t, vdnn_error *err);
/* Lets the step's messages progress (called between layers). */
void vdnn_tie_progress(vdnn_tie *t);

#endif
