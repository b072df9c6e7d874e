/* vdnn_plan_create: a model's training plan without a net, by the call a net's creation makes too. */
#include <stdlib.h>
#include <string.h>

#include "plan/op_source.h"
#include "plan/plan.h"

vdnn_status vdnn_plan_create(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_profile_t *prof, vdnn_shape input,
                             int classes, const vdnn_memory_options *mem, vdnn_plan_t **out, vdnn_error *err)
{
    if (!m || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "plan_create: no model or no place for the plan");
    *out = NULL;
    const vdnn_memory_options mo = mem ? *mem : vdnn_memory_options_default();
    vdnn_status rc = vdnn_memory_options_check(&mo, err);
    if (rc != VDNN_OK) return rc;
    if (input.n < 1 || input.n > VDNN_MAX_BATCH)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch: %d is out of range (1 to %d)", input.n, VDNN_MAX_BATCH);
    if (input.n % mo.micro_batches)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "memory.micro_batches: a batch of %d images does not split into %d micro-batches", input.n,
                         mo.micro_batches);
    /* The plan is made for one micro-batch, as a net's is. */
    input.n /= mo.micro_batches;
    vdnn_graph_t *g = NULL;
    vdnn_backend_t *own_be = NULL;
    vdnn_op_info *info = NULL;
    vdnn_layer_algos *algos = NULL;
    rc = vdnn_graph_resolved_copy(m, input, classes, &g, err);
    if (rc == VDNN_OK) g->dtype = (vdnn_dtype)mo.precision;
    /* Op info: the backend's; else the one the profile recorded on its device (the plan is then that device's,
     * made here without it); else the CPU backend's, which needs no device. */
    vdnn_op_source src = vdnn_op_source_backend(be);
    if (!be && prof && prof->ops) src = vdnn_op_source_profile(prof);
    else if (rc == VDNN_OK && !be) rc = vdnn_backend_open("cpu", 0, &own_be, err);
    if (own_be) src = vdnn_op_source_backend(own_be);
    /* A backend says whether it runs the precision; a profile's recorded op info is taken as given. */
    if (rc == VDNN_OK && (be || own_be)) rc = vdnn_backend_check_dtype(be ? be : own_be, g->dtype, g, err);
    if (rc == VDNN_OK) {
        info = calloc((size_t)g->n_layers, sizeof *info);
        algos = calloc((size_t)g->n_layers, sizeof *algos);
        if (!info || !algos) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory planning");
    }
    if (rc == VDNN_OK) rc = vdnn_op_source_algos(&src, g, true, algos, info, err);
    /* An fp16 net scales its loss by default (exec/loss_scale.h): every gradient is checked before any update, so
     * gradients are kept until a separate update step, as that net's plan keeps them. */
    const bool keep_grads = mo.precision == VDNN_PRECISION_FP16;
    if (rc == VDNN_OK) rc = vdnn_plan_training(g, info, algos, &mo, prof, keep_grads, out, err);
    if (rc == VDNN_OK) (*out)->own_g = g;
    else vdnn_graph_free(g);
    free(info);
    free(algos);
    vdnn_backend_destroy(own_be);
    return rc;
}
