/* Replays a plan: allocations at planned offsets, copies on the copy queues ordered by events, and each
 * step's compute. It makes no decisions of its own; it only checks that what it is told is sound. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "exec/net_impl.h"

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

/* A streamed input (vdnn_stream): its host copy and device place, in chunks of the layer's op. Forward queues
 * every chunk's copy out before the op starts and lets the op wait for each; backward keeps two chunks in
 * flight through the two buffers. */
typedef struct stream_run {
    vdnn_net_t *net;
    char *host, *dev, *buf[2];
    size_t img_bytes;
    int chunk, n_images, n_chunks, first_event;
} stream_run;

static vdnn_event *chunk_event(const stream_run *r, int c) { return r->net->events[r->first_event + c]; }

static size_t chunk_bytes(const stream_run *r, int c)
{
    return (size_t)vdnn_chunk_images(r->n_images, r->chunk, c) * r->img_bytes;
}

/* Queues chunk c's copy (in: host copy to buffer c % 2; out: device to host copy) after the compute so far. */
static vdnn_status stream_copy(stream_run *r, int c, bool in, vdnn_error *err)
{
    vdnn_backend_t *be = r->net->be;
    vdnn_event *marker = r->net->events[r->net->n_events - 1];
    const vdnn_queue_id q = in ? VDNN_QUEUE_H2D : VDNN_QUEUE_D2H;
    const size_t off = (size_t)c * (size_t)r->chunk * r->img_bytes;
    BE_CALL(be->ops->event_record(be, marker, VDNN_QUEUE_COMPUTE, err));
    BE_CALL(be->ops->event_wait(be, q, marker, err));
    if (in) BE_CALL(be->ops->copy_async(be, q, r->buf[c % 2], r->host + off, chunk_bytes(r, c), VDNN_COPY_H2D, err));
    else BE_CALL(be->ops->copy_async(be, q, r->host + off, r->dev + off, chunk_bytes(r, c), VDNN_COPY_D2H, err));
    return be->ops->event_record(be, chunk_event(r, c), q, err);
}

/* Evaluation: nothing is saved, a chunk's output may take its input's place once the op has read it. */
static vdnn_status stream_nothing_to_save(void *ctx, int c, vdnn_error *err)
{
    (void)ctx, (void)c, (void)err;
    return VDNN_OK;
}

static vdnn_status stream_x_read(void *ctx, int c, vdnn_error *err)
{
    stream_run *r = ctx;
    if (c < 0 || c >= r->n_chunks) return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: streamed chunk %d of %d", c, r->n_chunks);
    return r->net->be->ops->event_wait(r->net->be, VDNN_QUEUE_COMPUTE, chunk_event(r, c), err);
}

static vdnn_status stream_x_chunk(void *ctx, int c, const float **x, vdnn_error *err)
{
    stream_run *r = ctx;
    if (c < 0 || c >= r->n_chunks) return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: streamed chunk %d of %d", c, r->n_chunks);
    /* Chunk c - 1 is done with its buffer: chunk c + 1 takes it. */
    if (c >= 1 && c + 1 < r->n_chunks) BE_CALL(stream_copy(r, c + 1, true, err));
    BE_CALL(r->net->be->ops->event_wait(r->net->be, VDNN_QUEUE_COMPUTE, chunk_event(r, c), err));
    *x = (const float *)r->buf[c % 2];
    return VDNN_OK;
}

/* Sets up layer l's streamed input for its forward (copies out queued) or backward (first two chunks in). */
static vdnn_status stream_begin(vdnn_net_t *net, const vdnn_plan_t *plan, int l, bool backward, stream_run *r,
                                vdnn_stream *sm, vdnn_error *err)
{
    const vdnn_storage *xs = &plan->st[plan->ls[l].xs];
    const vdnn_shape in = net->g->layers[net->g->layers[l].inputs[0]].out;
    *r = (stream_run){.net = net, .host = (char *)net->host + xs->host_offset,
                      .img_bytes = vdnn_map_bytes(net->g, in) / (size_t)in.n,
                      .n_images = in.n, .first_event = xs->first_event};
    r->chunk = vdnn_plan_stream_chunk(plan, l, &r->n_chunks);
    *sm = (vdnn_stream){.x_read = stream_x_read, .x_chunk = stream_x_chunk, .ctx = r};
    if (!backward) {
        BE_CALL(resident(net, plan, plan->ls[l].out, net->g->layers[l].name, &r->dev, err));
        for (int c = 0; c < r->n_chunks; c++) BE_CALL(stream_copy(r, c, false, err));
        return VDNN_OK;
    }
    char *b;
    BE_CALL(resident(net, plan, plan->ls[l].xb, net->g->layers[l].name, &b, err));
    r->buf[0] = b;
    r->buf[1] = b + (size_t)r->chunk * r->img_bytes;
    for (int c = 0; c < 2 && c < r->n_chunks; c++) BE_CALL(stream_copy(r, c, true, err));
    return VDNN_OK;
}

/* Dropout masks: each micro-batch of a step draws its own; without micro-batches the step alone numbers them. */
static uint64_t mask_seed(const vdnn_net_t *net, int l)
{
    return net->x.dropout_seed(net->opt.seed, net->step * net->opt.memory.micro_batches + net->micro,
                               vdnn_graph_seed_index(net->g, l, false));
}

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
    a.seed = mask_seed(net, l);
    /* A recompute sums again, so it normalizes with the same statistics as the first forward. */
    a.reduce = plan->training ? net->x.bn_reduce : NULL;
    a.reduce_key = l;
    stream_run r;
    vdnn_stream sm = {.x_read = stream_nothing_to_save};
    if (s->in_place && s->xs < 0) a.stream = &sm;
    if (s->xs >= 0) {
        if (recompute) return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: recompute of %s, which streams its input", ly->name);
        BE_CALL(stream_begin(net, plan, l, false, &r, &sm, err));
        a.stream = &sm;
    }
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
        if (info->bwd_needs_x && s->xs < 0) RES(plan->ls[ly->inputs[i]].out, a.x[i]);
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
    /* Micro-batches after the first write their gradients aside; sum_micro adds them to the first's. A tied layer
     * writes its part of the shared parameters' gradient aside (s->dw, s->db, every micro-batch: it has no dwm, dbm). */
    RES(vdnn_net_micro_grad_storage(net, plan, s->dw, s->dwm), a.dw);
    RES(vdnn_net_micro_grad_storage(net, plan, s->db, s->dbm), a.db);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) RES(plan->labels, a.labels);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT && net->loss_scaling) a.grad_scale = net->scaler.scale;
    a.seed = mask_seed(net, l);
    a.reduce = net->x.bn_reduce;
    a.reduce_key = l;
    stream_run r;
    vdnn_stream sm;
    if (s->xs >= 0) {
        BE_CALL(stream_begin(net, plan, l, true, &r, &sm, err));
        a.stream = &sm;
    }
    BE_CALL(net->be->ops->op_backward(net->be, ops[l], &a, err));
    /* Shared parameters' gradient, in a fixed order (docs/sequence.md, "Weight tying"): the readers' parts summed
     * in backward order, the last reader's first (it wrote the sum, s->dwt of the owner), each other reader's
     * added as its backward ends; the owner's own part plus that sum last. For an lstm layer of chunks t0 (the
     * owner) .. tn: t0 + (((tn + tn-1) + ...) + t1), the same bits as summing tn, tn-1, ..., t0 left to right (a + b
     * rounds alike either way); for a tied table, embed + linear, as PyTorch sums them. */
    if (ly->p.tie) {
        const vdnn_layer_storage *o = &plan->ls[ly->p.tie];
        const vdnn_layer *E = &net->g->layers[ly->p.tie];
        char *t;
        if (s->dw != o->dwt) {
            BE_CALL(resident(net, plan, o->dwt, "shared gradient", &t, err));
            BE_CALL(net->be->ops->accumulate(net->be, (float *)t, (const float *)a.dw, E->n_weight, err));
        }
        if (o->dbt >= 0 && s->db != o->dbt) {
            BE_CALL(resident(net, plan, o->dbt, "shared gradient", &t, err));
            BE_CALL(net->be->ops->accumulate(net->be, (float *)t, (const float *)a.db, E->n_bias, err));
        }
    }
    if (s->dwt >= 0) {
        char *t;
        BE_CALL(resident(net, plan, s->dwt, "shared gradient", &t, err));
        BE_CALL(net->be->ops->accumulate(net->be, (float *)a.dw, (const float *)t, ly->n_weight, err));
    }
    if (s->dbt >= 0) {
        char *t;
        BE_CALL(resident(net, plan, s->dbt, "shared gradient", &t, err));
        BE_CALL(net->be->ops->accumulate(net->be, (float *)a.db, (const float *)t, ly->n_bias, err));
    }
    return VDNN_OK;
}

/* Whether this net updates layer l's weight: it has one and it is not a copy of a table another pipeline stage
 * owns (graph.h's weight_of), which is neither summed, clipped nor updated here. */
static bool updated_weight(const vdnn_layer *ly) { return ly->n_weight && !ly->weight_of[0]; }

/* Gradient accumulation over micro-batches, in micro-batch order: sum = g0 + g1 + ...; after the last,
 * sum / M, the gradient of the mean loss over the step's batch (each micro-batch's loss is a mean). */
static vdnn_status sum_micro(vdnn_net_t *net, const vdnn_plan_t *plan, int l, vdnn_error *err)
{
    const vdnn_layer_storage *s = &plan->ls[l];
    const vdnn_layer *ly = &net->g->layers[l];
    vdnn_backend_t *be = net->be;
    /* A table's copy: its part of each micro-batch went to the owner's stage (backward_done); nothing to sum. */
    const int pair[2][3] = {{s->dw, s->dwm, updated_weight(ly) ? (int)ly->n_weight : 0}, {s->db, s->dbm, (int)ly->n_bias}};
    for (int k = 0; k < 2; k++) {
        if (pair[k][0] < 0) continue;
        float *sum = (float *)net->ptr[pair[k][0]];
        const size_t n = (size_t)pair[k][2];
        if (!n) continue; /* a tied linear's weight: summed by the embed layer */
        if (net->micro > 0) BE_CALL(be->ops->accumulate(be, sum, (const float *)net->ptr[pair[k][1]], n, err));
        if (net->micro == plan->micro_batches - 1)
            BE_CALL(be->ops->scale(be, sum, 1.0f / (float)plan->micro_batches, n, err));
    }
    return VDNN_OK;
}

/* PyTorch's clip_grad_norm_: the L2 norm over every parameter gradient of the step, summed in layer order (so the
 * same under every plan), and when it exceeds the limit each gradient scaled by limit / (norm + 1e-6).
 * net->clip_parts holds each layer's weight and bias squared sums at 2l and 2l + 1, then, from 2 * n_layers on,
 * the same in order for the sum. */
static vdnn_status grad_parts(vdnn_net_t *net, const vdnn_plan_t *plan, int l, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    const vdnn_layer_storage *s = &plan->ls[l];
    const vdnn_layer *ly = &net->g->layers[l];
    double *at = net->clip_parts + 2 * l;
    if (s->dw >= 0 && updated_weight(ly)) BE_CALL(be->ops->sum_squares(be, (const float *)net->ptr[s->dw], ly->n_weight, &at[0], err));
    if (s->db >= 0 && ly->n_bias) BE_CALL(be->ops->sum_squares(be, (const float *)net->ptr[s->db], ly->n_bias, &at[1], err));
    return VDNN_OK;
}

/* net->clip_k from the parts of every layer (grad_parts, done), in layer order. */
static vdnn_status clip_factor(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_error *err)
{
    const double *slot = net->clip_parts;
    double *parts = net->clip_parts + 2 * net->g->n_layers;
    int n = 0;
    for (int l = 1; l < net->g->n_layers; l++) {
        if (plan->ls[l].dw >= 0 && updated_weight(&net->g->layers[l])) parts[n++] = slot[2 * l];
        if (plan->ls[l].db >= 0 && net->g->layers[l].n_bias) parts[n++] = slot[2 * l + 1];
    }
    /* One running sum in this order: a pipeline's stages sum every stage's parts in the same order (norm_sum), so
     * they find the one-device norm bit for bit. */
    double sum = 0.0;
    if (net->x.hooks && net->x.hooks->norm_sum) BE_CALL(net->x.hooks->norm_sum(net->x.hooks_ctx, net, parts, n, &sum, err));
    else
        for (int i = 0; i < n; i++) sum += parts[i];
    /* PyTorch scales by min(1, limit / (norm + 1e-6)); a factor of 1 changes nothing. */
    net->clip_k = (double)net->opt.clip_grad_norm / (sqrt(sum) + 1e-6);
    return VDNN_OK;
}

/* Layer l's gradients times clip_k where that is below 1. */
static vdnn_status clip_layer(vdnn_net_t *net, const vdnn_plan_t *plan, int l, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    const vdnn_layer_storage *s = &plan->ls[l];
    const vdnn_layer *ly = &net->g->layers[l];
    const float k = (float)net->clip_k;
    if (!(net->clip_k < 1.0)) return VDNN_OK;
    if (s->dw >= 0 && updated_weight(ly)) BE_CALL(be->ops->scale(be, (float *)net->ptr[s->dw], k, ly->n_weight, err));
    if (s->db >= 0 && ly->n_bias) BE_CALL(be->ops->scale(be, (float *)net->ptr[s->db], k, ly->n_bias, err));
    return VDNN_OK;
}

/* Every gradient at once, in a single update step. */
static vdnn_status clip_grads(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_error *err)
{
    for (int l = 1; l < net->g->n_layers; l++) BE_CALL(grad_parts(net, plan, l, err));
    BE_CALL(clip_factor(net, plan, err));
    for (int l = 1; l < net->g->n_layers; l++) BE_CALL(clip_layer(net, plan, l, err));
    return VDNN_OK;
}

/* SGD or AdamW on the parameters of layers [first, last]. */
static vdnn_status update(vdnn_net_t *net, const vdnn_plan_t *plan, int first, int last, float lr, vdnn_error *err)
{
    const vdnn_backend_ops *o = net->be->ops;
    const vdnn_net_options *no = &net->opt;
    for (int l = first; l <= last; l++) {
        const vdnn_layer_storage *s = &plan->ls[l];
        const vdnn_layer *ly = &net->g->layers[l];
        if (no->optimizer == VDNN_OPTIMIZER_ADAMW) {
            /* The update being made, from 1: net->step counts the steps done, skipped ones (loss scaling) too. */
            const long t = (long)(net->step - net->scaler.skipped) + 1;
            if (s->w >= 0 && updated_weight(ly))
                BE_CALL(o->adamw_update(net->be, (float *)net->ptr[s->w], (const float *)net->ptr[s->dw],
                                        (float *)net->ptr[s->vw], (float *)net->ptr[s->vw2], ly->n_weight, lr,
                                        no->beta1, no->beta2, no->eps, no->weight_decay, t, err));
            if (s->b >= 0 && ly->n_bias)
                BE_CALL(o->adamw_update(net->be, (float *)net->ptr[s->b], (const float *)net->ptr[s->db],
                                        (float *)net->ptr[s->vb], (float *)net->ptr[s->vb2], ly->n_bias, lr,
                                        no->beta1, no->beta2, no->eps, no->weight_decay, t, err));
            continue;
        }
        if (s->w >= 0 && updated_weight(ly))
            BE_CALL(o->sgd_update(net->be, (float *)net->ptr[s->w], (const float *)net->ptr[s->dw],
                                  (float *)net->ptr[s->vw], ly->n_weight, lr, net->opt.momentum,
                                  net->opt.weight_decay, err));
        if (s->b >= 0 && ly->n_bias)
            BE_CALL(o->sgd_update(net->be, (float *)net->ptr[s->b], (const float *)net->ptr[s->db],
                                  (float *)net->ptr[s->vb], ly->n_bias, lr, net->opt.momentum, net->opt.weight_decay,
                                  err));
    }
    return VDNN_OK;
}

/* The images, fp32 from the caller, into the data map in the net's type. A 16-bit net rounds them on the host
 * (to nearest even, as the backends' convert does), so only half the bytes cross the link; all cores round, since
 * one alone takes longer than the link (a VGG-16 batch of 64 in bf16: 17 ms on one core of a GPU host). */
static vdnn_status upload_images(vdnn_net_t *net, const vdnn_plan_t *plan, const float *images, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    const long n = (long)vdnn_shape_count(net->g->input);
    void *dst = net->ptr[plan->ls[0].out];
    uint16_t *h = net->host_images;
    switch (net->g->dtype) {
    case VDNN_DTYPE_F32: return be->ops->upload(be, dst, images, (size_t)n * sizeof(float), err);
    case VDNN_DTYPE_BF16:
#pragma omp parallel for schedule(static) if (n >= 65536)
        for (long i = 0; i < n; i++) h[i] = vdnn_bf16_from_float(images[i]);
        break;
    case VDNN_DTYPE_F16:
#pragma omp parallel for schedule(static) if (n >= 65536)
        for (long i = 0; i < n; i++) h[i] = vdnn_f16_from_float(images[i]);
        break;
    default: return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: unknown map type %d", (int)net->g->dtype);
    }
    return be->ops->upload(be, dst, h, (size_t)n * sizeof(uint16_t), err);
}

static vdnn_status compute(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const vdnn_step *st,
                           const float *images, const int32_t *labels, float lr, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    switch (st->kind) {
    case VDNN_STEP_LOAD:
        BE_CALL(upload_images(net, plan, images, err));
        return be->ops->upload(be, net->ptr[plan->labels], labels, sizeof(int32_t) * vdnn_graph_label_count(net->g), err);
    case VDNN_STEP_FWD:
        BE_CALL(compute_forward(net, plan, ops, st->layer, false, -1, err));
        if (net->x.hooks && net->x.hooks->forward_done)
            BE_CALL(net->x.hooks->forward_done(net->x.hooks_ctx, net, st->layer, err));
        return VDNN_OK;
    case VDNN_STEP_BWD:
        BE_CALL(compute_backward(net, plan, ops, st, err));
        if (net->x.hooks && net->x.hooks->backward_done)
            BE_CALL(net->x.hooks->backward_done(net->x.hooks_ctx, net, st->layer, err));
        if (plan->micro_batches > 1) BE_CALL(sum_micro(net, plan, st->layer, err));
        /* Update steps: the layer's squares now, while its gradients are here (homed ones leave after this step). */
        if (plan->update_steps && net->opt.clip_grad_norm > 0) BE_CALL(grad_parts(net, plan, st->layer, err));
        if (net->x.hooks && net->x.hooks->grads_ready)
            BE_CALL(net->x.hooks->grads_ready(net->x.hooks_ctx, net, st->layer, err));
        /* The layer's weights have no later use in this iteration: update them now and let the
         * gradients go (the same arithmetic as a separate update step), unless an update step of its own does. */
        return plan->fused_update && plan->ls[st->layer].upd < 0 ? update(net, plan, st->layer, st->layer, lr, err)
                                                                  : VDNN_OK;
    case VDNN_STEP_UPDATE:
        /* A fused plan's shared parameters (shared_steps) in their owner's step; the others' were in backward. */
        if (plan->fused_update) return st->layer > 0 ? update(net, plan, st->layer, st->layer, lr, err) : VDNN_OK;
        if (st->layer > 0) {
            /* Update steps (clipping without kept gradients): the first finds the factor from the squares backward
             * summed; each then scales and updates its own layer (homed parameters and gradients fetched for it).
             * The same float operations as clip_grads in one step, so the same bits. */
            if (net->opt.clip_grad_norm > 0) {
                if (st == &plan->steps[plan->update_begin]) BE_CALL(clip_factor(net, plan, err));
                BE_CALL(clip_layer(net, plan, st->layer, err));
            }
            return update(net, plan, st->layer, st->layer, lr, err);
        }
        if (net->x.hooks && net->x.hooks->before_update)
            BE_CALL(net->x.hooks->before_update(net->x.hooks_ctx, net, err));
        if (net->loss_scaling) {
            bool apply = false;
            BE_CALL(vdnn_net_loss_scale_check(net, plan, &apply, err));
            if (!apply) return VDNN_OK;
        }
        if (net->opt.clip_grad_norm > 0) BE_CALL(clip_grads(net, plan, err));
        return update(net, plan, 1, net->g->n_layers - 1, lr, err);
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
    const bool um = plan->policy == VDNN_POLICY_UM;
    /* um has no pinned pool */
    char *host = um ? NULL : (char *)net->host + s->host_offset + (size_t)net->slot * plan->host_stride;
    if (!net->ptr[a->a])
        return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: copy of '%s' while it has no device block", s->name);
    /* The copy must not start before the compute queue has reached this point. */
    BE_CALL(be->ops->event_record(be, marker, VDNN_QUEUE_COMPUTE, err));
    BE_CALL(be->ops->event_wait(be, q, marker, err));
    /* OC-DNN: the storage stays at its managed range; only its pages move, between device and host. */
    if (um) BE_CALL(be->ops->mem_prefetch(be, net->ptr[a->a], s->bytes, !out, q, err));
    else if (out) BE_CALL(be->ops->copy_async(be, q, host, net->ptr[a->a], s->bytes, VDNN_COPY_D2H, err));
    else BE_CALL(be->ops->copy_async(be, q, net->ptr[a->a], host, s->bytes, VDNN_COPY_H2D, err));
    return be->ops->event_record(be, net->events[a->event], q, err);
}

static void action_label(const vdnn_net_t *net, const vdnn_plan_t *plan, const vdnn_step *st, const vdnn_action *a,
                         char *buf, size_t n, vdnn_span_kind *kind)
{
    const vdnn_graph_t *g = net->g;
    switch (a->kind) {
    case VDNN_ACT_RECOMPUTE:
        *kind = VDNN_SPAN_RECOMPUTE;
        snprintf(buf, n, "recompute %s", g->layers[a->a].name);
        return;
    case VDNN_ACT_ACCUM:
        *kind = VDNN_SPAN_ACCUM;
        snprintf(buf, n, "accum %.80s", plan->st[a->a].name);
        return;
    case VDNN_ACT_OFFLOAD:
    case VDNN_ACT_PREFETCH:
        *kind = a->kind == VDNN_ACT_OFFLOAD ? VDNN_SPAN_D2H : VDNN_SPAN_H2D;
        snprintf(buf, n, "%s %.80s", a->kind == VDNN_ACT_OFFLOAD ? "d2h" : "h2d", plan->st[a->a].name);
        return;
    case VDNN_ACT_WAIT:
        *kind = VDNN_SPAN_STALL;
        snprintf(buf, n, "wait %.80s", plan->st[a->a].name);
        return;
    default: break;
    }
    switch (st->kind) {
    case VDNN_STEP_LOAD: *kind = VDNN_SPAN_LOAD; snprintf(buf, n, "load"); break;
    case VDNN_STEP_UPDATE: *kind = VDNN_SPAN_UPDATE; snprintf(buf, n, "update"); break;
    case VDNN_STEP_FWD: *kind = VDNN_SPAN_FWD; snprintf(buf, n, "fwd %s", g->layers[st->layer].name); break;
    case VDNN_STEP_BWD: *kind = VDNN_SPAN_BWD; snprintf(buf, n, "bwd %s", g->layers[st->layer].name); break;
    }
}

/* After the iteration: each recorded copy ran from when its lane was free (copies on a lane run in
 * order) to when its event completed. */
static vdnn_status record_copies(vdnn_net_t *net, vdnn_error *err)
{
    vdnn_recorder *r = &net->rec;
    double lane_end[3] = {0, 0, 0};
    for (int i = 0; i < r->n_copies; i++) {
        const struct vdnn_rec_copy *c = &r->copies[i];
        double end;
        BE_CALL(net->be->ops->event_time(net->be, net->events[c->event], &end, err));
        end -= r->t0;
        double start = c->issued > lane_end[c->lane] ? c->issued : lane_end[c->lane];
        if (start > end) start = end;
        lane_end[c->lane] = end;
        BE_CALL(vdnn_record_span(r, c->lane, c->lane == VDNN_LANE_D2H ? VDNN_SPAN_D2H : VDNN_SPAN_H2D, c->step, c->action,
                                 start, end, c->label, err));
    }
    return VDNN_OK;
}

static vdnn_status run_action(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const vdnn_step *st,
                              const vdnn_action *a, const float *images, const int32_t *labels, float lr,
                              vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    switch (a->kind) {
    case VDNN_ACT_ALLOC: {
        const vdnn_block *b = &plan->blocks[a->a];
        /* A held block has one copy per held micro-batch, each live under its own id. */
        const size_t shift = b->held ? (size_t)net->slot * plan->held_stride : 0;
        BE_CALL(vdnn_arena_take(&net->arena, b->offset + shift, b->bytes, vdnn_exec_block_id(net, plan, a->a), err));
        net->ptr[b->storage] = (char *)net->dev + b->offset + shift;
        if (net->opt.memory.poison) BE_CALL(be->ops->poison(be, net->ptr[b->storage], b->bytes, err));
        return VDNN_OK;
    }
    case VDNN_ACT_FREE: {
        const vdnn_block *b = &plan->blocks[a->a];
        if (b->storage == net->fetch_storage)
            BE_CALL(be->ops->download(be, net->fetch_dst, net->ptr[b->storage], plan->st[b->storage].bytes, err));
        if (net->opt.memory.poison) BE_CALL(be->ops->poison(be, net->ptr[b->storage], b->bytes, err));
        BE_CALL(vdnn_arena_give(&net->arena, vdnn_exec_block_id(net, plan, a->a), err));
        net->ptr[b->storage] = NULL;
        return VDNN_OK;
    }
    case VDNN_ACT_OFFLOAD:
    case VDNN_ACT_PREFETCH: return copy(net, plan, a, err);
    case VDNN_ACT_WAIT: return be->ops->event_wait(be, VDNN_QUEUE_COMPUTE, net->events[a->event], err);
    case VDNN_ACT_COMPUTE: return compute(net, plan, ops, st, images, labels, lr, err);
    case VDNN_ACT_RECOMPUTE: return compute_forward(net, plan, ops, a->a, true, a->b, err);
    case VDNN_ACT_ACCUM:
        /* Gradient maps of a tensor several layers read: in the net's type, summed in fp32, rounded once. */
        if (net->g->dtype != VDNN_DTYPE_F32) {
            if (!be->ops->accumulate_typed)
                return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "the %s backend cannot sum %s gradient maps",
                                 be->ops->name, vdnn_dtype_name(net->g->dtype));
            return be->ops->accumulate_typed(be, net->g->dtype, net->ptr[a->a], net->ptr[a->b],
                                             plan->st[a->b].bytes / vdnn_dtype_size(net->g->dtype), err);
        }
        return be->ops->accumulate(be, (float *)net->ptr[a->a], (const float *)net->ptr[a->b],
                                   plan->st[a->b].bytes / sizeof(float), err);
    }
    return vdnn_fail(err, VDNN_ERR_BACKEND, "executor: unknown action %d", (int)a->kind);
}

int vdnn_exec_block_id(const vdnn_net_t *net, const vdnn_plan_t *plan, int block)
{
    return plan->blocks[block].held ? net->slot * plan->n_blocks + block : block;
}

static vdnn_status iteration(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, int first, int last,
                             const float *images, const int32_t *labels, float lr, vdnn_error *err)
{
    vdnn_backend_t *be = net->be;
    /* A recorded timeline is one whole iteration. */
    const bool whole = first == 0 && last == plan->n_steps;
    vdnn_recorder *rec = whole && net->rec.tl && be->ops->now && be->ops->event_time ? &net->rec : NULL;
    if (rec) {
        BE_CALL(be->ops->sync_all(be, err));
        rec->t0 = be->ops->now(be);
        rec->n_copies = rec->n_actions = rec->n_stamps = 0;
    }
    for (int si = first; si < last; si++) {
        const vdnn_step *st = &plan->steps[si];
        for (int k = 0; k < st->n_actions; k++) {
            const int ai = st->first_action + k;
            const vdnn_action *a = &plan->actions[ai];
            struct vdnn_rec_action r = {.step = si, .action = ai, .kind = VDNN_SPAN_FWD};
            if (rec) BE_CALL(vdnn_record_stamp(rec, be, &r.start, err));
            BE_CALL(run_action(net, plan, ops, st, a, images, labels, lr, err));
            if (!rec) continue;
            BE_CALL(vdnn_record_stamp(rec, be, &r.end, err));
            r.mem = a->kind == VDNN_ACT_ALLOC || a->kind == VDNN_ACT_FREE;
            r.bytes = net->arena.live_bytes;
            r.copy = a->kind == VDNN_ACT_OFFLOAD || a->kind == VDNN_ACT_PREFETCH;
            r.lane = a->kind == VDNN_ACT_OFFLOAD ? VDNN_LANE_D2H : VDNN_LANE_H2D;
            r.event = a->event;
            if (!r.mem) action_label(net, plan, st, a, r.label, sizeof r.label, &r.kind);
            BE_CALL(vdnn_record_action(rec, &r, err));
        }
    }
    BE_CALL(be->ops->sync_all(be, err));
    if (rec) {
        BE_CALL(vdnn_record_resolve(rec, be, err));
        BE_CALL(record_copies(net, err));
        double end = be->ops->now(be) - rec->t0;
        if (end > rec->tl->iteration_s) rec->tl->iteration_s = end;
    }
    return VDNN_OK;
}

vdnn_status vdnn_exec_iteration(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const float *images,
                                const int32_t *labels, float lr, vdnn_error *err)
{
    return vdnn_exec_steps(net, plan, ops, 0, plan->n_steps, images, labels, lr, err);
}

vdnn_status vdnn_exec_steps(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, int first, int last,
                            const float *images, const int32_t *labels, float lr, vdnn_error *err)
{
    /* A recorded iteration reads when its copies ended: its events carry times. */
    const bool timed = net->rec.tl && net->be->ops->set_timing;
    if (timed) net->be->ops->set_timing(net->be, true);
    vdnn_status rc = iteration(net, plan, ops, first, last, images, labels, lr, err);
    if (timed) net->be->ops->set_timing(net->be, false);
    if (rc != VDNN_OK) {
        /* Stopped midway: let queued copies finish before their memory is reused, and end the blocks
         * it left allocated, so that the next iteration starts from the persistent state alone. */
        net->be->ops->sync_all(net->be, NULL);
        vdnn_arena_give_all_but(&net->arena, -1);
    }
    return rc;
}
