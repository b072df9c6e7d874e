/* Loss scaling in the training step: the parameter gradients checked for inf and NaN before the update, then
 * unscaled or the update skipped (the rule is exec/loss_scale.c's). */
#include <stdlib.h>

#include "exec/net_impl.h"
#include "plan/plan.h"

vdnn_status vdnn_net_loss_scale_check(vdnn_net_t *net, const vdnn_plan_t *plan, bool *apply, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    const int nl = net->g->n_layers;
    const float **x = calloc(2 * (size_t)nl, sizeof *x);
    size_t *n = calloc(2 * (size_t)nl, sizeof *n);
    if (!x || !n) {
        free(x);
        free(n);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "loss scaling: out of memory");
    }
    int count = 0;
    for (int l = 1; l < nl; l++) {
        const vdnn_layer_storage *s = &plan->ls[l];
        const vdnn_layer *ly = &net->g->layers[l];
        /* A tied layer's dw, db hold its part of its owner's gradient, already summed into the owner's. */
        if (s->dw >= 0 && ly->n_weight) x[count] = (const float *)net->ptr[s->dw], n[count++] = ly->n_weight;
        if (s->db >= 0 && ly->n_bias) x[count] = (const float *)net->ptr[s->db], n[count++] = ly->n_bias;
    }
    bool finite = false;
    vdnn_status rc = be->ops->all_finite(be, x, n, count, &finite, err);
    /* The scale this step's gradients carry: the scaler may change it below. */
    const float inv = 1.0f / net->scaler.scale;
    if (rc == VDNN_OK) *apply = vdnn_loss_scaler_step(&net->scaler, finite);
    for (int i = 0; rc == VDNN_OK && *apply && i < count; i++) rc = be->ops->scale(be, (float *)x[i], inv, n[i], err);
    free(x);
    free(n);
    return rc;
}
