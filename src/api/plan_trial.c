/* vdnn_plan_trial: a plan of one model variant with estimated costs or costs composed from measured profiles,
 * summarized. */
#include "api/plan_trial.h"

vdnn_status vdnn_plan_trial(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                            const vdnn_memory_options *mem, const vdnn_trial_costs *costs, vdnn_plan_t **plan,
                            vdnn_plan_summary *sum, vdnn_error *err)
{
    vdnn_profile_t *prof = NULL;
    vdnn_plan_t *p = NULL;
    vdnn_status rc = VDNN_OK;
    const double *rates = costs->rates;
    if (costs->n_profiles > 0)
        rc = vdnn_profile_compose(costs->profiles, costs->n_profiles, m, &prof, err);
    else if (rates[0] > 0 || rates[1] > 0 || rates[2] > 0 || rates[3] > 0)
        rc = vdnn_profile_estimate_model(m, input, classes, rates[0] > 0 ? rates[0] : VDNN_ESTIMATE_FLOPS_PER_S,
                                         rates[1] > 0 ? rates[1] : VDNN_ESTIMATE_MEM_BYTES_PER_S,
                                         rates[2] > 0 ? rates[2] : VDNN_ESTIMATE_LINK_BYTES_PER_S,
                                         rates[3] > 0 ? rates[3] : VDNN_ESTIMATE_LINK_BYTES_PER_S, &prof, err);
    if (rc == VDNN_OK) rc = vdnn_plan_create(m, be, prof, input, classes, mem, &p, err);
    if (rc == VDNN_OK) rc = vdnn_plan_summarize(p, sum, err);
    if (rc == VDNN_OK && plan) {
        *plan = p;
        p = NULL;
    }
    vdnn_plan_free(p);
    vdnn_profile_free(prof);
    return rc;
}
