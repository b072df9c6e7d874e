/* Replays a plan: allocations at planned offsets, copies on the copy queues ordered by events, and each
 * step's compute. It makes no decisions of its own; it only checks that what it is told is sound. */
#include <string.h>

#include "exec/net.h"

#define BE_CALL(call)                               \
    do {                                            \
        vdnn_status rc_ = (call);                   \
        if (rc_ != VDNN_OK) return rc_;             \
    } while (0)

static vdnn_status resident(const vdnn_net_t *net, const vdnn_plan_t *plan, int st, const char *what, char **out,
                            vdnn_error *err)
{
    *out = NULL;
    if (st < 0) return VDNN_OK;
    if (!net->ptr[st])
        return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: %s needs '%s', which is not on the device", what,
                         plan->st[st].name);
    *out = net->ptr[st];
    return VDNN_OK;
}

#define RES(st, dst)                                                      \
    do {                                                                  \
        char *p_;                                                         \
        BE_CALL(resident(net, plan, (st), ly->name, &p_, err));           \
        dst = (void *)p_;                                                 \
    } while (0)

/* Forward of layer l into its current blocks. A recompute (ws_st given) must not update statistics:
 * the first forward of this iteration already did. */
static vdnn_status compute_forward(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, int l, bool recompute,
                                   int ws_st, vdnn_error *err)
{
    const vdnn_layer *ly = &net->g->layers[l];
    const vdnn_layer_storage *s = &plan->ls[l];
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < ly->n_inputs; i++) RES(plan->ls[ly->inputs[i]].out, a.x[i]);
    RES(s->out, a.y);
    RES(s->w, a.w);
    RES(s->b, a.b);
    RES(s->stats, a.stats);
    RES(s->aux, a.aux);
    RES(recompute ? ws_st : plan->steps[l].ws, a.ws);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) {
        RES(plan->labels, a.labels);
        RES(plan->loss, a.loss);
    }
    a.update_stats = plan->training && !recompute;
    a.seed = net->cfg.dropout_seed(net->cfg.seed, net->step, l);
    return net->be->ops->op_forward(net->be, ops[l], &a, err);
}

static vdnn_status compute_backward(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const vdnn_step *st,
                                    vdnn_error *err)
{
    const int l = st->layer;
    const vdnn_layer *ly = &net->g->layers[l];
    const vdnn_layer_storage *s = &plan->ls[l];
    const vdnn_op_info *info = &plan->info[l];
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    bool wanted = s->dw >= 0 || s->db >= 0;
    for (int i = 0; i < ly->n_inputs; i++) {
        if (info->bwd_needs_x) RES(plan->ls[ly->inputs[i]].out, a.x[i]);
        RES(st->dx[i], a.dx[i]);
        wanted |= st->dx[i] >= 0;
    }
    if (!wanted) return VDNN_OK;
    if (info->bwd_needs_y) RES(s->out, a.y);
    RES(s->w, a.w);
    RES(s->b, a.b);
    RES(s->stats, a.stats);
    RES(s->aux, a.aux);
    RES(st->ws, a.ws);
    RES(s->grad, a.dy);
    RES(s->dw, a.dw);
    RES(s->db, a.db);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) RES(plan->labels, a.labels);
    a.seed = net->cfg.dropout_seed(net->cfg.seed, net->step, l);
    return net->be->ops->op_backward(net->be, ops[l], &a, err);
}

/* SGD on the parameters of layers [first, last]. */
static vdnn_status update(vdnn_net_t *net, const vdnn_plan_t *plan, int first, int last, float lr, vdnn_error *err)
{
    const vdnn_backend_ops *o = net->be->ops;
    for (int l = first; l <= last; l++) {
        const vdnn_layer_storage *s = &plan->ls[l];
        const vdnn_layer *ly = &net->g->layers[l];
        if (s->w >= 0)
            BE_CALL(o->sgd_update(net->be, (float *)net->ptr[s->w], (const float *)net->ptr[s->dw],
                                  (float *)net->ptr[s->vw], ly->n_weight, lr, net->cfg.momentum,
                                  net->cfg.weight_decay, err));
        if (s->b >= 0)
            BE_CALL(o->sgd_update(net->be, (float *)net->ptr[s->b], (const float *)net->ptr[s->db],
                                  (float *)net->ptr[s->vb], ly->n_bias, lr, net->cfg.momentum, net->cfg.weight_decay,
                                  err));
    }
    return VDNN_OK;
}

static vdnn_status compute(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const vdnn_step *st,
                           const float *images, const int32_t *labels, float lr, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    switch (st->kind) {
    case VDNN_STEP_LOAD:
        BE_CALL(be->ops->upload(be, net->ptr[plan->ls[0].out], images, vdnn_shape_bytes(net->g->input), err));
        return be->ops->upload(be, net->ptr[plan->labels], labels, sizeof(int32_t) * (size_t)net->g->input.n, err);
    case VDNN_STEP_FWD: return compute_forward(net, plan, ops, st->layer, false, -1, err);
    case VDNN_STEP_BWD:
        BE_CALL(compute_backward(net, plan, ops, st, err));
        /* The layer's weights have no later use in this iteration: update them now and let the
         * gradients go (the same arithmetic as a separate update step). */
        return plan->fused_update ? update(net, plan, st->layer, st->layer, lr, err) : VDNN_OK;
    case VDNN_STEP_UPDATE: return plan->fused_update ? VDNN_OK : update(net, plan, 1, net->g->n_layers - 1, lr, err);
    }
    return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: unknown step kind");
}

static vdnn_status copy(vdnn_net_t *net, const vdnn_plan_t *plan, const vdnn_action *a, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    const vdnn_storage *s = &plan->st[a->a];
    vdnn_event *marker = net->events[net->n_events - 1];
    bool out = a->kind == VDNN_ACT_OFFLOAD;
    vdnn_queue_id q = out ? VDNN_QUEUE_D2H : VDNN_QUEUE_H2D;
    char *host = (char *)net->host + s->host_offset;
    if (!net->ptr[a->a])
        return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: copy of '%s' while it has no device block", s->name);
    /* The copy must not start before the compute queue has reached this point. */
    BE_CALL(be->ops->event_record(be, marker, VDNN_QUEUE_COMPUTE, err));
    BE_CALL(be->ops->event_wait(be, q, marker, err));
    if (out) BE_CALL(be->ops->copy_async(be, q, host, net->ptr[a->a], s->bytes, VDNN_COPY_D2H, err));
    else BE_CALL(be->ops->copy_async(be, q, net->ptr[a->a], host, s->bytes, VDNN_COPY_H2D, err));
    return be->ops->event_record(be, net->events[a->event], q, err);
}

vdnn_status vdnn_exec_iteration(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const float *images,
                                const int32_t *labels, float lr, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    for (int si = 0; si < plan->n_steps; si++) {
        const vdnn_step *st = &plan->steps[si];
        for (int k = 0; k < st->n_actions; k++) {
            const vdnn_action *a = &plan->actions[st->first_action + k];
            switch (a->kind) {
            case VDNN_ACT_ALLOC: {
                const vdnn_block *b = &plan->blocks[a->a];
                BE_CALL(vdnn_arena_take(&net->arena, b->offset, b->bytes, a->a, err));
                net->ptr[b->storage] = (char *)net->dev + b->offset;
                if (net->cfg.poison) BE_CALL(be->ops->poison(be, net->ptr[b->storage], b->bytes, err));
                break;
            }
            case VDNN_ACT_FREE: {
                const vdnn_block *b = &plan->blocks[a->a];
                if (b->storage == net->fetch_storage)
                    BE_CALL(be->ops->download(be, net->fetch_dst, net->ptr[b->storage], plan->st[b->storage].bytes, err));
                if (net->cfg.poison) BE_CALL(be->ops->poison(be, net->ptr[b->storage], b->bytes, err));
                BE_CALL(vdnn_arena_give(&net->arena, a->a, err));
                net->ptr[b->storage] = NULL;
                break;
            }
            case VDNN_ACT_OFFLOAD:
            case VDNN_ACT_PREFETCH: BE_CALL(copy(net, plan, a, err)); break;
            case VDNN_ACT_WAIT: BE_CALL(be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, net->events[a->event], err)); break;
            case VDNN_ACT_COMPUTE: BE_CALL(compute(net, plan, ops, st, images, labels, lr, err)); break;
            case VDNN_ACT_RECOMPUTE: BE_CALL(compute_forward(net, plan, ops, a->a, true, a->b, err)); break;
            case VDNN_ACT_ACCUM:
                BE_CALL(be->ops->accumulate(be, (float *)net->ptr[a->a], (const float *)net->ptr[a->b],
                                            plan->st[a->b].bytes / sizeof(float), err));
                break;
            }
        }
    }
    return be->ops->sync_all(be, err);
}
