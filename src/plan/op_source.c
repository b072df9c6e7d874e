/* Op info for planning from a live backend or from the candidates a profile recorded on its device. */
#include "plan/op_source.h"

#include <stdio.h>
#include <string.h>

/* The profile must describe g as it is planned: a plan at another batch (micro-batches, say) or input needs the op
 * sizes of that shape, which only the device can give. */
static vdnn_status check_profile(const vdnn_profile *p, const vdnn_graph_t *g, bool training, vdnn_error *err)
{
    if (!p->ops)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "the profile of %s records no op info (an estimate, or written before profiles did): plan "
                         "with a backend, or profile again", p->model);
    if (!training)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "the profile records the training ops only: an evaluation plan needs a backend");
    if (strcmp(p->model, g->name) || p->n_layers != g->n_layers)
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "the profile's op info is for model '%s' (%d layers), not '%s' (%d)",
                         p->model, p->n_layers, g->name, g->n_layers);
    const vdnn_shape a = p->input, b = g->input;
    if (a.n != b.n || a.c != b.c || a.h != b.h || a.w != b.w)
        return vdnn_fail(err, VDNN_ERR_MISMATCH,
                         "the profile's op info is for batch %d at %dx%dx%d, the plan is for batch %d at %dx%dx%d (with "
                         "micro-batches: images per micro-batch): op sizes depend on both; profile at that batch and "
                         "input, or plan with the device itself",
                         a.n, a.c, a.h, a.w, b.n, b.c, b.h, b.w);
    for (int l = 1; l < g->n_layers; l++) {
        if (strcmp(p->names[l], g->layers[l].name))
            return vdnn_fail(err, VDNN_ERR_MISMATCH, "the profile's layer %d is '%s', the model's '%s'", l, p->names[l],
                             g->layers[l].name);
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, training, &d);
        if (d.dtype != p->dtype)
            return vdnn_fail(err, VDNN_ERR_MISMATCH,
                             "the profile's op info is for %s maps, layer '%s' is planned with %s: profile in that "
                             "precision", vdnn_dtype_name(p->dtype), g->layers[l].name, vdnn_dtype_name(d.dtype));
    }
    return VDNN_OK;
}

vdnn_status vdnn_op_source_algos(const vdnn_op_source *s, const vdnn_graph_t *g, bool training, vdnn_layer_algos *algos,
                                 vdnn_op_info *info, vdnn_error *err)
{
    if (s->be) return vdnn_plan_query_algos(g, s->be, training, algos, info, err);
    if (!s->prof) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op info: neither a backend nor a profile to ask");
    vdnn_status rc = check_profile(s->prof, g, training, err);
    if (rc != VDNN_OK) return rc;
    memset(&algos[0], 0, sizeof algos[0]);
    if (info) memset(&info[0], 0, sizeof info[0]);
    for (int l = 1; l < g->n_layers; l++) {
        algos[l] = s->prof->ops[l];
        if (info) info[l] = algos[l].a[0].info;
    }
    return VDNN_OK;
}

void vdnn_op_source_name(const vdnn_op_source *s, char *buf, size_t n)
{
    if (s->be) {
        snprintf(buf, n, "the %s backend", s->be->ops->name);
        return;
    }
    const vdnn_device_info *d = s->prof ? &s->prof->dev : NULL;
    if (d && d->name[0]) snprintf(buf, n, "profile (%s: %s)", d->backend, d->name);
    else snprintf(buf, n, "profile (%s)", s->prof ? s->prof->device : "none");
}
