/* Checkpoints of nets: what vdnn_net_save writes and vdnn_net_load reads, built on the net's declared
 * functions (its parameters by name, its position), so checkpoint I/O lives with training, not in the net. */
#include "train/net_checkpoint.h"

#include <stdlib.h>
#include <string.h>

vdnn_status vdnn_net_export(vdnn_net_t *net, vdnn_checkpoint *ck, vdnn_error *err)
{
    memset(ck, 0, sizeof *ck);
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    snprintf(ck->model, sizeof ck->model, "%s", st.model);
    ck->model_hash = vdnn_net_model_hash(net);
    ck->step = st.step;
    ck->epoch = st.epoch;
    ck->seed = st.seed;
    ck->precision = (uint32_t)st.precision;
    const int n = vdnn_net_param_count(net);
    ck->tensors = calloc((size_t)n + 1, sizeof *ck->tensors);
    if (!ck->tensors) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory exporting parameters");
    for (int i = 0; i < n; i++) {
        vdnn_param_info pi;
        vdnn_status rc = vdnn_net_param_info(net, i, &pi, err);
        if (rc != VDNN_OK) return rc;
        vdnn_ckpt_tensor *t = &ck->tensors[ck->n_tensors];
        snprintf(t->name, sizeof t->name, "%s", pi.name);
        t->count = pi.count;
        t->data = malloc(pi.count * sizeof(float) + 1);
        if (!t->data) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory exporting parameters");
        ck->n_tensors++;
        rc = vdnn_net_get(net, pi.name, t->data, pi.count, err);
        if (rc != VDNN_OK) return rc;
    }
    return VDNN_OK;
}

vdnn_status vdnn_net_import(vdnn_net_t *net, const vdnn_checkpoint *ck, const char *path, vdnn_error *err)
{
    if (ck->model_hash != vdnn_net_model_hash(net))
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "%s: checkpoint of model '%s' does not match model '%s' at this input size",
                         path, ck->model, vdnn_net_graph(net)->name);
    const int n = vdnn_net_param_count(net);
    for (int i = 0; i < n; i++) {
        vdnn_param_info pi;
        vdnn_status rc = vdnn_net_param_info(net, i, &pi, err);
        if (rc != VDNN_OK) return rc;
        const vdnn_ckpt_tensor *t = vdnn_checkpoint_find(ck, pi.name);
        if (!t || t->count != pi.count)
            return vdnn_fail(err, VDNN_ERR_MISMATCH, "%s: tensor '%s' is %s", path, pi.name,
                             t ? "of another size" : "missing");
        rc = vdnn_net_set(net, pi.name, t->data, t->count, err);
        if (rc != VDNN_OK) return rc;
    }
    /* Master weights are fp32 in every precision, so a checkpoint loads into a net of another; the caller hears
     * of it through vdnn_net_stats.checkpoint_precision. */
    vdnn_net_set_checkpoint_precision(net, (vdnn_precision)ck->precision);
    /* The run goes on as it began: the same shuffling and dropout masks. */
    vdnn_net_set_seed(net, ck->seed, vdnn_net_extras_of(net)->dropout_seed);
    vdnn_net_set_position(net, ck->step, ck->epoch);
    return VDNN_OK;
}

vdnn_status vdnn_net_save(vdnn_net_t *net, const char *path, vdnn_error *err)
{
    if (!path || !*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "save: no checkpoint path");
    vdnn_checkpoint ck;
    vdnn_status rc = vdnn_net_export(net, &ck, err);
    if (rc == VDNN_OK) rc = vdnn_checkpoint_write(path, &ck, err);
    vdnn_checkpoint_release(&ck);
    return rc;
}

vdnn_status vdnn_net_load(vdnn_net_t *net, const char *path, vdnn_error *err)
{
    if (!path || !*path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "load: no checkpoint path");
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    vdnn_status rc = vdnn_checkpoint_read(path, &ck, err);
    if (rc == VDNN_OK) rc = vdnn_net_import(net, &ck, path, err);
    vdnn_checkpoint_release(&ck);
    return rc;
}
