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

vdnn_status vdnn_op_algos_single(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n,
                                 vdnn_error *err)
{
    vdnn_op_desc d0 = *d;
    d0.algo = 0;
    memset(&algos[0], 0, sizeof algos[0]);
    strcpy(algos[0].name, "default");
    vdnn_status st = be->ops->op_query(be, &d0, &algos[0].info, err);
    *n = st == VDNN_OK ? 1 : 0;
    return st;
}
