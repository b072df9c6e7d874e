/* What code outside the executor reads and sets on a net: its graph, options and position, the storages a
 * distributed runtime exchanges, and the figures a caller reports. */
#include <string.h>

#include "exec/net_impl.h"

const vdnn_graph_t *vdnn_net_graph(const vdnn_net_t *net) { return net->g; }
vdnn_backend_t *vdnn_net_backend(const vdnn_net_t *net) { return net->be; }
const vdnn_net_options *vdnn_net_options_of(const vdnn_net_t *net) { return &net->opt; }
const vdnn_net_extras *vdnn_net_extras_of(const vdnn_net_t *net) { return &net->x; }
int64_t vdnn_net_step(const vdnn_net_t *net) { return net->step; }
int vdnn_net_current_micro(const vdnn_net_t *net) { return net->micro; }
const vdnn_plan_t *vdnn_net_plan(const vdnn_net_t *net) { return net->plan_train; }

void vdnn_net_set_position(vdnn_net_t *net, int64_t step, int64_t epoch)
{
    net->step = step;
    net->epoch = epoch;
}

void vdnn_net_set_checkpoint_precision(vdnn_net_t *net, vdnn_precision p) { net->ckpt_precision = p; }

void vdnn_net_set_seed(vdnn_net_t *net, uint64_t seed, vdnn_dropout_seed_fn dropout_seed)
{
    net->opt.seed = seed;
    net->x.dropout_seed = dropout_seed ? dropout_seed : vdnn_net_dropout_seed;
}

float *vdnn_net_micro_weight_grad(const vdnn_net_t *net, int l, size_t *count)
{
    const vdnn_plan_t *p = net->plan_train;
    *count = 0;
    if (l < 1 || l >= net->g->n_layers || !net->g->layers[l].n_weight) return NULL;
    *count = net->g->layers[l].n_weight;
    return vdnn_exec_storage_ptr(net, vdnn_net_micro_grad_storage(net, p, p->ls[l].dw, p->ls[l].dwm));
}

float *vdnn_exec_storage_ptr(const vdnn_net_t *net, int storage)
{
    return storage >= 0 ? (float *)net->ptr[storage] : NULL;
}

void vdnn_exec_fetch(vdnn_net_t *net, int storage, float *dst)
{
    net->fetch_storage = dst ? storage : -1;
    net->fetch_dst = dst;
}

void vdnn_net_get_stats(const vdnn_net_t *net, vdnn_net_stats *s)
{
    memset(s, 0, sizeof *s);
    const vdnn_plan_t *p = net->plan_train;
    snprintf(s->model, sizeof s->model, "%s", net->g->name);
    snprintf(s->backend, sizeof s->backend, "%s", net->be->ops->name);
    s->policy = p->policy;
    s->batch = net->opt.batch;
    s->micro_batches = net->opt.memory.micro_batches;
    s->input = net->g->input;
    s->classes = net->g->classes;
    s->step = net->step;
    s->epoch = net->epoch;
    s->seed = net->opt.seed;
    s->device_bytes = net->dev_bytes;
    s->peak_device_bytes = net->arena.high_water;
    s->host_bytes = net->host_bytes;
    s->managed_bytes = net->managed_bytes;
    s->oversubscribed = net->oversubscribed;
    s->bytes_moved = p->bytes_moved;
    s->last_step_s = net->last_step_s;
    s->offload_params = p->offload_params;
    s->streamed_layers = vdnn_plan_streamed_layers(p);
    s->precision = net->opt.memory.precision;
    s->checkpoint_precision = net->ckpt_precision;
    s->loss_scaling = net->loss_scaling;
    s->loss_scale = net->loss_scaling ? net->scaler.scale : 0.0f;
    s->skipped_steps = net->scaler.skipped;
}

void vdnn_net_record(vdnn_net_t *net, struct vdnn_timeline *tl) { net->rec.tl = tl; }
