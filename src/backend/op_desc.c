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

/* The reason in an op's refusal without the op's own name ("cpu relu: "). */
static const char *reason(const char *msg, const char *kind)
{
    const char *why = strstr(msg, kind);
    return why && !strncmp(why + strlen(kind), ": ", 2) ? why + strlen(kind) + 2 : msg;
}

vdnn_status vdnn_backend_check_dtype(vdnn_backend_t *be, vdnn_dtype t, const vdnn_graph_t *g, vdnn_error *err)
{
    if (t == VDNN_DTYPE_F32) return VDNN_OK;
    if (!vdnn_dtype_valid(t))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.precision: %d is out of range (fp32, bf16 or fp16)",
                         (int)t);
    vdnn_op_info info;
    vdnn_error e = {0};
    /* A backend may run a type for some ops only (the CPU runs a transformer's ops in bf16 on any CPU, a
     * convolution only with AVX-512 BF16): asking every layer, before any plan, gives one message in the option's
     * name that says which layer. Other failures are left to the planner's own checks. */
    for (int i = 0; g && i < g->n_layers; i++) {
        if (g->layers[i].kind == VDNN_LAYER_INPUT) continue;
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, i, true, &d);
        d.dtype = t;
        if (be->ops->op_query(be, &d, &info, &e) != VDNN_ERR_UNSUPPORTED) continue;
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "memory.precision: %s does not run on the %s backend: layer '%s': %s",
                         vdnn_dtype_name(t), be->ops->name, g->layers[i].name,
                         reason(e.msg, vdnn_layer_kind_name(d.kind)));
    }
    if (g) return VDNN_OK;
    /* No net: one small ReLU answers for the ops that run the type only where the device has it. */
    vdnn_op_desc d = {.kind = VDNN_LAYER_RELU, .n_inputs = 1, .in = {{1, 1, 1, 1}}, .out = {1, 1, 1, 1}, .dtype = t};
    vdnn_status st = be->ops->op_query(be, &d, &info, &e);
    if (st == VDNN_OK) return VDNN_OK;
    return vdnn_fail(err, st, "memory.precision: %s does not run on the %s backend: %s", vdnn_dtype_name(t),
                     be->ops->name, reason(e.msg, "relu"));
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
