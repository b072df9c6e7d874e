/* A profile's op info: recording the device's description and every layer's training op candidates, and telling
 * whether a backend's candidates are the ones recorded (a plan from the profile is then the plan a run makes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/profile.h"

vdnn_status vdnn_profile_record_ops(vdnn_profile *p, const vdnn_graph_t *g, vdnn_backend_t *be, vdnn_error *err)
{
    if (p->n_layers != g->n_layers)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile: %d layers, the model %s %d", p->n_layers, g->name,
                         g->n_layers);
    vdnn_layer_algos *ops = calloc((size_t)g->n_layers, sizeof *ops);
    if (!ops) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory for the op info of %d layers", g->n_layers);
    vdnn_status rc = vdnn_plan_query_algos(g, be, true, ops, NULL, err);
    if (rc == VDNN_OK) rc = vdnn_backend_describe(be, &p->dev, err);
    if (rc != VDNN_OK) {
        free(ops);
        return rc;
    }
    vdnn_op_desc d;
    memset(&d, 0, sizeof d);
    if (g->n_layers > 1) vdnn_op_desc_from_layer(g, 1, true, &d);
    p->dtype = d.dtype;
    free(p->ops);
    p->ops = ops;
    snprintf(p->op_info_source, sizeof p->op_info_source, "backend");
    return VDNN_OK;
}

/* The first field in which two candidates differ, or NULL. */
static const char *info_diff(const vdnn_op_algo *a, const vdnn_op_algo *b, char *vals, size_t n)
{
    const vdnn_op_info *x = &a->info, *y = &b->info;
#define SIZE_FIELD(f)                                                   \
    if (x->f != y->f) {                                                 \
        snprintf(vals, n, "%zu recorded, %zu here", x->f, y->f);        \
        return #f;                                                      \
    }
#define INT_FIELD(f)                                                    \
    if ((int)x->f != (int)y->f) {                                       \
        snprintf(vals, n, "%d recorded, %d here", (int)x->f, (int)y->f); \
        return #f;                                                      \
    }
    if (strcmp(a->name, b->name)) {
        snprintf(vals, n, "'%s' recorded, '%s' here", a->name, b->name);
        return "name";
    }
    SIZE_FIELD(aux_bytes)
    SIZE_FIELD(fwd_ws_bytes)
    SIZE_FIELD(bwd_ws_bytes)
    INT_FIELD(bwd_needs_x)
    INT_FIELD(bwd_needs_y)
    INT_FIELD(inplace_ok)
    INT_FIELD(bwd_inplace_ok)
    INT_FIELD(stream_ok)
    INT_FIELD(chunk_images)
    if (a->numerics != b->numerics) {
        snprintf(vals, n, "%d recorded, %d here", a->numerics, b->numerics);
        return "numerics";
    }
#undef SIZE_FIELD
#undef INT_FIELD
    return NULL;
}

bool vdnn_profile_ops_differ(const vdnn_profile *p, const vdnn_layer_algos *algos, char *why, size_t n)
{
    if (!p->ops) return false;
    char vals[96];
    for (int l = 1; l < p->n_layers; l++) {
        const vdnn_layer_algos *r = &p->ops[l], *h = &algos[l];
        if (r->n != h->n) {
            if (why) snprintf(why, n, "layer '%s' has %d candidates here, the profile %d", p->names[l], h->n, r->n);
            return true;
        }
        for (int k = 0; k < r->n; k++) {
            const char *f = info_diff(&r->a[k], &h->a[k], vals, sizeof vals);
            if (!f) continue;
            if (why) snprintf(why, n, "layer '%s', candidate %d ('%s'): %s %s", p->names[l], k, r->a[k].name, f, vals);
            return true;
        }
    }
    return false;
}
