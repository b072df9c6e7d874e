/* Building a graph's layer array anew, for the expansions that turn one layer of a model file into several nodes
 * (lstm_expand.c, attn_expand.c). */
#ifndef VDNN_GRAPH_BUILD_H
#define VDNN_GRAPH_BUILD_H

#include "graph/graph.h"

typedef struct vdnn_graph_builder {
    vdnn_layer *out;
    int n, cap;
} vdnn_graph_builder;

/* Appends a copy of proto named `name` of kind `kind`, with no inputs and no consumers yet. Returns its index, -1 when
 * out of memory. */
int vdnn_graph_builder_emit(vdnn_graph_builder *b, const vdnn_layer *proto, const char *name, vdnn_layer_kind kind);

/* Joins the n nodes ids[] with layers of kind `kind` (a concatenation) whose parameters are params: at most
 * VDNN_MAX_INPUTS inputs a node, so more make a tree whose inner nodes are named `name`.0, `name`.1, ...; the root is
 * named `name`. Returns the root's index, -1 when out of memory. */
int vdnn_graph_builder_join(vdnn_graph_builder *b, const vdnn_layer *proto, const int *ids, int n, const char *name,
                            vdnn_layer_kind kind, const vdnn_layer_params *params);

/* Tying names layers by index: each node's tie= (and its owner's tied_by) moved to the new places, outmap[old] the
 * node that stands for old layer `old`. */
void vdnn_graph_builder_retie(vdnn_graph_builder *b, const int *outmap);

/* g's layers replaced by the builder's where st is VDNN_OK, else the builder's dropped; returns st. */
vdnn_status vdnn_graph_builder_finish(vdnn_graph_builder *b, vdnn_graph_t *g, vdnn_status st);

#endif
