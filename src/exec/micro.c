/* Micro-batches: a training step as separate forward, backward and update calls, so that a pipeline stage
 * can hold several micro-batches between their passes (GPipe) and a device can sum gradients over them. */
#include <string.h>

#include "exec/net_impl.h"

int vdnn_net_micro_batch(const vdnn_net_t *net) { return net->g->input.n; }

/* Persistent storages at their offsets and, with `held`, the current slot's held blocks (what that
 * micro-batch's forward pass left on the device); every other storage off the device. */
static void bind_slot(vdnn_net_t *net, const vdnn_plan_t *p, bool held)
{
    for (int i = 0; i < p->n_storages; i++) net->ptr[i] = NULL;
    for (int b = 0; b < p->n_blocks; b++) {
        const vdnn_block *k = &p->blocks[b];
        if (p->st[k->storage].persistent) net->ptr[k->storage] = (char *)net->dev + k->offset;
        else if (held && k->held)
            net->ptr[k->storage] = (char *)net->dev + k->offset + (size_t)net->slot * p->held_stride;
    }
}

/* After a failure the executor has ended every non-persistent block: the step starts over. */
static vdnn_status abandon(vdnn_net_t *net, vdnn_status rc)
{
    net->be->ops->sync_all(net->be, NULL);
    vdnn_arena_give_all_but(&net->arena, -1);
    net->fwd_done = net->bwd_done = 0;
    net->micro = net->slot = 0;
    net->micro_loss = 0;
    net->fetch_storage = -1;
    return rc;
}

static vdnn_status out_of_order(vdnn_net_t *net, const char *what, int micro, vdnn_error *err)
{
    vdnn_status rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                               "%s of micro-batch %d out of order: of %d micro-batches, %d are through forward and %d "
                               "through backward%s; the step is abandoned",
                               what, micro, net->opt.memory.micro_batches, net->fwd_done, net->bwd_done,
                               net->opt.memory.pipelined ? "" : " (the net holds one micro-batch at a time)");
    return abandon(net, rc);
}

vdnn_status vdnn_net_micro_forward(vdnn_net_t *net, int micro, const float *images, const int32_t *labels,
                                   float *loss, vdnn_error *err)
{
    const int m = net->opt.memory.micro_batches, b = net->g->input.n;
    if (micro != net->fwd_done || micro >= m || (!net->opt.memory.pipelined && net->bwd_done != micro))
        return out_of_order(net, "forward", micro, err);
    const size_t per = vdnn_graph_labels_per_sample(net->g); /* labels per image (tokens of a sequence) */
    for (int i = 0; i < (int)((size_t)b * per); i++)
        if (labels[i] < 0 || labels[i] >= net->g->classes)
            return abandon(net, vdnn_fail(err, VDNN_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", labels[i],
                                          micro * b + i, net->g->classes - 1));
    const vdnn_plan_t *p = net->plan_train;
    net->micro = micro;
    net->slot = net->opt.memory.pipelined ? micro : 0;
    if (micro == 0) net->micro_loss = 0;
    bind_slot(net, p, false);
    if (net->opt.memory.pipelined)
        memcpy(net->micro_labels + (size_t)micro * (size_t)b * per, labels, sizeof *labels * (size_t)b * per);
    vdnn_status rc = vdnn_exec_steps(net, p, net->ops_train, 0, p->bwd_begin, images, labels, 0.0f, err);
    float l = 0;
    if (rc == VDNN_OK) rc = net->be->ops->download(net->be, &l, net->ptr[p->loss], sizeof l, err);
    if (rc != VDNN_OK) return abandon(net, rc);
    net->micro_loss += l;
    if (loss) *loss = l;
    net->fwd_done++;
    return VDNN_OK;
}

vdnn_status vdnn_net_backward(vdnn_net_t *net, int micro, vdnn_error *err)
{
    if (micro != net->bwd_done || micro >= net->fwd_done) return out_of_order(net, "backward", micro, err);
    const vdnn_plan_t *p = net->plan_train;
    const int b = net->g->input.n;
    net->micro = micro;
    net->slot = net->opt.memory.pipelined ? micro : 0;
    vdnn_status rc = VDNN_OK;
    if (net->opt.memory.pipelined) {
        /* Other micro-batches ran since this one's forward pass: its held blocks are where its slot is, and the
         * labels (one persistent storage) are another micro-batch's. */
        bind_slot(net, p, true);
        const size_t per = vdnn_graph_labels_per_sample(net->g);
        rc = net->be->ops->upload(net->be, net->ptr[p->labels], net->micro_labels + (size_t)micro * (size_t)b * per,
                                  sizeof(int32_t) * (size_t)b * per, err);
    }
    if (rc == VDNN_OK)
        rc = vdnn_exec_steps(net, p, net->ops_train, p->bwd_begin, p->update_begin, NULL, NULL, 0.0f, err);
    if (rc != VDNN_OK) return abandon(net, rc);
    net->bwd_done++;
    return VDNN_OK;
}

vdnn_status vdnn_net_update(vdnn_net_t *net, float lr, vdnn_error *err)
{
    const int m = net->opt.memory.micro_batches;
    if (net->bwd_done != m) return out_of_order(net, "update after the backward pass", net->bwd_done, err);
    const vdnn_plan_t *p = net->plan_train;
    net->micro = m - 1;
    /* The update step, or a clipped plan's update steps (one per layer, from update_begin on). */
    vdnn_status rc = vdnn_exec_steps(net, p, net->ops_train, p->update_begin, p->n_steps, NULL, NULL, lr, err);
    if (rc != VDNN_OK) return abandon(net, rc);
    net->fwd_done = net->bwd_done = 0;
    net->micro = net->slot = 0;
    net->step++;
    return VDNN_OK;
}

vdnn_status vdnn_net_micro_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err)
{
    const int m = net->opt.memory.micro_batches, b = net->g->input.n;
    const size_t img = vdnn_shape_bytes(net->g->input) / sizeof(float) / (size_t)b;
    vdnn_status rc = VDNN_OK;
    /* Pipelined, as a GPipe stage runs them: every forward pass, then every backward pass. */
    for (int j = 0; rc == VDNN_OK && j < m; j++) {
        rc = vdnn_net_micro_forward(net, j, images + (size_t)j * (size_t)b * img,
                                    labels + (size_t)j * (size_t)b * vdnn_graph_labels_per_sample(net->g), NULL,
                                    err);
        if (rc == VDNN_OK && !net->opt.memory.pipelined) rc = vdnn_net_backward(net, j, err);
    }
    for (int j = 0; rc == VDNN_OK && net->opt.memory.pipelined && j < m; j++) rc = vdnn_net_backward(net, j, err);
    if (rc == VDNN_OK && loss) *loss = (float)(net->micro_loss / m);
    return rc == VDNN_OK ? vdnn_net_update(net, lr, err) : rc;
}
