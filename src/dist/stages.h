/* Model-parallel stages: contiguous layer ranges of a graph, where a graph may be cut, balanced splits,
 * and the graph each stage runs on its own device. No MPI here: the projection uses it too. */
#ifndef VDNN_DIST_STAGES_H
#define VDNN_DIST_STAGES_H

#include <stdbool.h>

#include "graph/graph.h"
#include "vdnn/project.h"

/* vdnn_stage_split (public, vdnn/project.h): stage k runs layers first[k]..last[k] of the full graph. */

/* A stage's graph starts with the data (the previous stage's output) and an identity layer named
 * VDNN_STAGE_INPUT whose output gradient is the one sent back; the stage's own layers follow, so full
 * layer l is stage layer l - first + VDNN_STAGE_PREFIX. A stage other than the last ends with a flatten
 * and a softmax over its output (VDNN_STAGE_TAIL layers): the runtime overwrites that softmax's input
 * gradient with the one the next stage sends back. */
#define VDNN_STAGE_PREFIX 2
#define VDNN_STAGE_TAIL 2
#define VDNN_STAGE_INPUT "stage.in"

/* cut_ok[l] (n_layers entries) is true when a stage may end after layer l: only l's output is read by
 * later layers. Never true for the data or the softmax. */
void vdnn_stage_cuts(const vdnn_graph_t *g, bool *cut_ok);

/* Whether the model file places layers on stages (some stage=K with K > 0). */
bool vdnn_graph_has_stages(const vdnn_graph_t *g);

/* The split the model file's stage= keys give; it must have exactly `stages` stages. */
vdnn_status vdnn_stage_split_from_model(const vdnn_graph_t *g, int stages, vdnn_stage_split *s, vdnn_error *err);

/* May layers [first, last] run on one device? (ctx from the caller.) */
typedef bool (*vdnn_stage_fits_fn)(void *ctx, int first, int last);

/* The split into `stages` stages at valid cuts that minimises the largest stage cost (the sum of
 * cost[l] over its layers), among splits whose stages all fit (fits may be NULL). */
vdnn_status vdnn_stage_split_balance(const vdnn_graph_t *g, const double *cost, int stages, vdnn_stage_fits_fn fits,
                                     void *ctx, vdnn_stage_split *s, vdnn_error *err);

/* Ranges cover layers 1..n-1 in order, none empty, every boundary a valid cut. */
vdnn_status vdnn_stage_split_check(const vdnn_graph_t *g, const vdnn_stage_split *s, vdnn_error *err);


/* The graph of stage k of a resolved graph (unresolved; resolve with the stage's input shape, from
 * vdnn_stage_input_shape, and class count, from vdnn_stage_classes). fc layers keep their resolved
 * widths. The caller frees it with vdnn_graph_free. */
vdnn_status vdnn_stage_graph(const vdnn_graph_t *g, const vdnn_stage_split *s, int k, vdnn_graph_t **out,
                             vdnn_error *err);
/* Whether layers owner and reader of a resolved graph may lie in different stages although they share parameters:
 * an embedding whose one reader is a tied linear (GPT-2's output projection). The reader's stage graph then holds a
 * copy of the table (vdnn_layer.weight_of) and the runtime exchanges its gradient and values (mpi_tie.c). */
bool vdnn_stage_table_split(const vdnn_graph_t *g, int owner, int reader);
/* The stage holding layer l of the split (-1: none). */
int vdnn_stage_of(const vdnn_stage_split *s, int l);
vdnn_shape vdnn_stage_input_shape(const vdnn_graph_t *g, const vdnn_stage_split *s, int k);
int vdnn_stage_classes(const vdnn_graph_t *g, const vdnn_stage_split *s, int k);

#endif
