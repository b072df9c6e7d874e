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
    d->dtype = g->dtype;
}

vdnn_status vdnn_backend_check_dtype(vdnn_backend_t *be, vdnn_dtype t, vdnn_error *err)
{
    if (t == VDNN_DTYPE_F32) return VDNN_OK;
    if (!vdnn_dtype_valid(t))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.precision: %d is out of range (fp32, bf16 or fp16)",
                         (int)t);
    /* The backends check a type the same way for every op, so one small ReLU answers for the net; asking here,
     * before any plan, gives one message in the option's name rather than a layer's. */
    vdnn_op_desc d = {.kind = VDNN_LAYER_RELU, .n_inputs = 1, .in = {{1, 1, 1, 1}}, .out = {1, 1, 1, 1}, .dtype = t};
    vdnn_op_info info;
    vdnn_error e = {0};
    vdnn_status st = be->ops->op_query(be, &d, &info, &e);
    if (st == VDNN_OK) return VDNN_OK;
    /* The reason without the probe's own name ("cpu relu: "): it is about the net, not a ReLU. */
    const char *why = strstr(e.msg, "relu: ");
    why = why ? why + strlen("relu: ") : e.msg;
    return vdnn_fail(err, st, "memory.precision: %s does not run on the %s backend: %s", vdnn_dtype_name(t),
                     be->ops->name, why);
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
