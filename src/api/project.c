/* vdnn_project_layout for a model and its profile: the estimate on a copy of the model resolved as the profile
 * was measured. */
#include "dist/project.h"

vdnn_status vdnn_project_layout(const vdnn_model_t *m, const vdnn_profile_t *p, const vdnn_project_config *c,
                                int stages, vdnn_layout_estimate *e, vdnn_error *err)
{
    if (!m || !p || !c || !e) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "project_layout: missing model, profile, configuration or result");
    vdnn_graph_t *g = NULL;
    vdnn_status rc = vdnn_graph_resolved_copy(m, p->input, p->classes, &g, err);
    if (rc == VDNN_OK) rc = vdnn_project_estimate(g, p, c, stages, e, err);
    vdnn_graph_free(g);
    return rc;
}
