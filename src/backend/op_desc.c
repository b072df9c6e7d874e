/* Builds the backend's op description of one layer from a resolved graph. */
#include "backend/backend.h"

#include <string.h>

void vdnn_op_desc_from_layer(const vdnn_graph_t *g, int i, bool training, vdnn_op_desc *d)
{
    const vdnn_layer *l = &g->layers[i];
    memset(d, 0, sizeof *d);
    d->kind = l->kind;
    d->n_inputs = l->n_inputs;
    for (int k = 0; k < l->n_inputs; k++) d->in[k] = g->layers[l->inputs[k]].out;
    d->out = l->out;
    d->p = l->p;
    d->training = training;
}
