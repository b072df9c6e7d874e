/* A trainable network: sizes, plans and budget checks, ops, arena and host pool, and its parameters. */
#include "exec/net_impl.h"

#include "plan/planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

vdnn_net_options vdnn_net_options_default(void)
{
    return (vdnn_net_options){.batch = 64, .seed = 1, .momentum = 0.9f, .weight_decay = 5e-4f,
                              .memory = vdnn_memory_options_default(), .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

uint64_t vdnn_net_dropout_seed(uint64_t run_seed, int64_t step, int layer)
{
    return vdnn_mix64(run_seed ^ vdnn_mix64(((uint64_t)step << 16) ^ (uint64_t)layer));
}

uint64_t vdnn_net_model_hash(const vdnn_net_t *net) { return vdnn_graph_hash(net->g); }

vdnn_status vdnn_net_create_ops(vdnn_net_t *net, bool training, vdnn_op ***out, vdnn_error *err)
{
    const vdnn_plan_t *plan = training ? net->plan_train : net->plan_eval;
    vdnn_op **ops = calloc((size_t)net->g->n_layers, sizeof *ops);
    if (!ops) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating ops");
    *out = ops;
    for (int l = 1; l < net->g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(net->g, l, training, &d);
        d.algo = plan->algo[l];
        vdnn_status rc = net->be->ops->op_create(net->be, &d, &ops[l], err);
        if (rc != VDNN_OK) return rc;
    }
    return VDNN_OK;
}

void vdnn_net_destroy_ops(vdnn_net_t *net, vdnn_op **ops)
{
    if (!ops) return;
    for (int l = 1; l < net->g->n_layers; l++)
        if (ops[l]) net->be->ops->op_destroy(net->be, ops[l]);
    free(ops);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* The evaluation plan: every map kept only as long as forward needs it, the parameters read where the training
 * plan keeps them (above variable_base). Where the planners may choose algorithms, the defaults, or the leanest
 * if the defaults need more than `budget`. */
static vdnn_status build_eval_plan(vdnn_net_t *net, size_t budget, size_t variable_base, bool offload_params, bool stream,
                                   vdnn_plan_t **out, vdnn_error *err)
{
    const bool choose = net->opt.memory.conv_algo == VDNN_ALGO_CHOOSE;
    vdnn_plan_request re = vdnn_plan_request_default();
    re.training = false;
    re.memory.budget = budget ? budget : 1;
    re.memory.conv_algo = choose ? VDNN_ALGO_DEFAULT : net->opt.memory.conv_algo;
    re.memory.offload_params = offload_params;
    re.memory.stream_inputs = stream;
    re.variable_base = variable_base;
    re.algos = net->algos_eval;
    vdnn_status rc = vdnn_plan_build(net->g, net->info_eval, &re, out, err);
    if (rc == VDNN_OK && choose && (*out)->peak_device_bytes > budget) {
        vdnn_plan_free(*out);
        *out = NULL;
        re.memory.conv_algo = VDNN_ALGO_LEANEST;
        rc = vdnn_plan_build(net->g, net->info_eval, &re, out, err);
    }
    return rc;
}

/* The evaluation plan's least need were the parameters homed in host memory (the training plan's persistent
 * state is then the same under every classification). */
static vdnn_status homed_eval_need(vdnn_net_t *net, bool stream, size_t *out)
{
    vdnn_error e;
    vdnn_plan_t *t = NULL, *v = NULL;
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.conv_algo = net->opt.memory.conv_algo;
    rq.memory.offload_params = true;
    rq.memory.optimizer_moments = net->opt.memory.optimizer_moments;
    rq.algos = net->algos_train;
    vdnn_status rc = vdnn_plan_build(net->g, net->info_train, &rq, &t, &e);
    if (rc == VDNN_OK) rc = build_eval_plan(net, 0, t->persistent_bytes, true, stream, &v, &e);
    if (rc == VDNN_OK) *out = v->peak_device_bytes;
    vdnn_plan_free(t);
    vdnn_plan_free(v);
    return rc;
}

static vdnn_status budget_error(vdnn_net_t *net, vdnn_error *err)
{
    char need[32], have[32], best[32];
    const vdnn_plan_t *p = net->plan_train;
    size_t device_need = max_sz(p->peak_device_bytes, net->plan_eval->peak_device_bytes);
    if (p->host_bytes + p->managed_bytes > p->req.memory.host_budget) {
        return vdnn_fail(err, VDNN_ERR_BUDGET,
                         "host budget too small: policy '%s' needs %s of host memory, the host budget is %s",
                         vdnn_policy_name(p->policy),
                         vdnn_format_bytes(p->host_bytes + p->managed_bytes, need, sizeof need),
                         vdnn_format_bytes(p->req.memory.host_budget, have, sizeof have));
    }
    /* Name the smallest budget any plan reaches, so the user knows what to ask for: over the planners'
     * classifications with this net's options, and (policy auto does that by itself) with the parameters
     * homed in host memory; the evaluation plan shares the arena, so its need is a floor. */
    size_t best_peak = device_need;
    vdnn_policy best_pol = p->policy;
    const char *opt = p->offload_params ? " memory.offload_params" : "";
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.micro_batches = p->micro_batches;
    rq.memory.pipelined = p->held_batches > 1;
    rq.memory.conv_algo = net->opt.memory.conv_algo;
    rq.memory.offload_params = p->offload_params;
    rq.memory.optimizer_moments = net->opt.memory.optimizer_moments;
    rq.keep_weight_grads = net->x.keep_weight_grads;
    rq.memory.clip_grads = net->opt.memory.clip_grads;
    rq.algos = net->algos_train;
    vdnn_error e2;
    size_t mb = SIZE_MAX;
    if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK) {
        mb = max_sz(mb, net->plan_eval->peak_device_bytes);
        if (mb < best_peak) best_peak = mb, best_pol = VDNN_POLICY_AUTO;
    }
    const char *no_home;
    size_t eval_homed = SIZE_MAX;
    if (!p->offload_params && vdnn_plan_offload_supported(&rq, &no_home) && homed_eval_need(net, false, &eval_homed) == VDNN_OK) {
        rq.memory.offload_params = true;
        if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK && max_sz(mb, eval_homed) < best_peak) {
            best_peak = max_sz(mb, eval_homed);
            best_pol = VDNN_POLICY_AUTO;
            opt = " (which homes the parameters in host memory, as memory.offload_params does)";
        }
    }
    /* And with convolution inputs streamed as well, which auto also does by itself where nothing else fits. */
    if (!vdnn_plan_streamed_layers(p) && vdnn_plan_stream_supported(&rq, &no_home) &&
        vdnn_plan_offload_supported(&rq, &no_home) && homed_eval_need(net, true, &eval_homed) == VDNN_OK) {
        rq.memory.offload_params = rq.memory.stream_inputs = true;
        if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK && max_sz(mb, eval_homed) < best_peak) {
            best_peak = max_sz(mb, eval_homed);
            best_pol = VDNN_POLICY_AUTO;
            opt = " (which homes the parameters in host memory and streams convolution inputs, as "
                  "memory.offload_params memory.stream_inputs do)";
        }
    }
    char what[160] = "", held[32];
    if (p->held_batches > 1)
        snprintf(what, sizeof what, " in %d micro-batches of %d, all held between their forward and backward passes "
                 "(%d x %s)", p->micro_batches, net->g->input.n, p->held_batches,
                 vdnn_format_bytes(p->held_stride, held, sizeof held));
    else if (p->micro_batches > 1)
        snprintf(what, sizeof what, " in %d micro-batches of %d, one at a time", p->micro_batches, net->g->input.n);
    return vdnn_fail(err, VDNN_ERR_BUDGET,
                     "memory budget too small: policy '%s' needs at least %s (%zu bytes) of device memory at batch "
                     "%d%s, the budget is %s; the smallest budget that works is %s (%zu bytes) with memory.policy %s%s",
                     vdnn_policy_name(p->policy), vdnn_format_bytes(device_need, need, sizeof need), device_need,
                     net->opt.batch, what, vdnn_format_bytes(p->req.memory.budget, have, sizeof have),
                     vdnn_format_bytes(best_peak, best, sizeof best), best_peak, vdnn_policy_name(best_pol), opt);
}

/* Policy um: managed memory beyond what the device has free makes the driver evict and re-fault pages, and on
 * a GPU shared with other jobs that can hang it; so it is refused unless asked for, before any allocation. */
static vdnn_status um_check(vdnn_net_t *net, vdnn_error *err)
{
    size_t free_b = net->be->ops->dev_free_bytes(net->be);
    size_t need = net->dev_bytes + net->managed_bytes;
    if (need >= net->dev_bytes && need <= free_b) return VDNN_OK;
    if (net->opt.memory.allow_oversubscribe) {
        net->oversubscribed = true;
        return VDNN_OK;
    }
    char m[32], a[32], n[32], f[32];
    return vdnn_fail(err, VDNN_ERR_BUDGET,
                     "policy 'um': the managed pool (%s) and the device arena (%s) need %s, more than the %s the device "
                     "has free; Unified Memory beyond free device memory can hang a shared GPU, so it is only done "
                     "when asked for (memory.allow_oversubscribe)",
                     vdnn_format_bytes(net->managed_bytes, m, sizeof m), vdnn_format_bytes(net->dev_bytes, a, sizeof a),
                     vdnn_format_bytes(need, n, sizeof n), vdnn_format_bytes(free_b, f, sizeof f));
}

/* The options a net can run with, checked before anything is allocated. */
static vdnn_status check_options(const vdnn_backend_t *be, const vdnn_net_options *o, vdnn_error *err)
{
    if (o->batch < 1 || o->batch > VDNN_MAX_BATCH)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch: %d is out of range (1 to %d)", o->batch, VDNN_MAX_BATCH);
    if (o->classes < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "classes: %d is out of range (0, the model's, or 2 and more)",
                         o->classes);
    if (!(o->momentum >= 0 && o->momentum < 1))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "momentum: %g is out of range [0, 1)", (double)o->momentum);
    if (!(o->weight_decay >= 0 && o->weight_decay < 1))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "weight_decay: %g is out of range [0, 1)", (double)o->weight_decay);
    if (o->optimizer != VDNN_OPTIMIZER_SGD && o->optimizer != VDNN_OPTIMIZER_ADAMW)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "optimizer: %d is out of range (SGD or AdamW)", (int)o->optimizer);
    if (o->optimizer == VDNN_OPTIMIZER_ADAMW) {
        if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "beta1, beta2: %g and %g are out of range [0, 1)",
                             (double)o->beta1, (double)o->beta2);
        if (!(o->eps > 0 && o->eps < 1))
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "eps: %g is out of range (0, 1)", (double)o->eps);
        if (!be->ops->adamw_update)
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "optimizer AdamW: the %s backend has no AdamW update yet",
                             be->ops->name);
    }
    if (!(o->loss_scale <= 0 || (isfinite(o->loss_scale) && frexpf(o->loss_scale, &(int){0}) == 0.5f)))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "loss_scale: %g is not a power of two (0: the default, below 0: "
                         "off)", (double)o->loss_scale);
    if ((o->loss_scale > 0 || (o->loss_scale == 0 && o->memory.precision == VDNN_PRECISION_FP16)) &&
        !be->ops->all_finite)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "loss scaling: the %s backend has no gradient check",
                         be->ops->name);
    if (!(o->clip_grad_norm >= 0) || isinf(o->clip_grad_norm))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "clip_grad_norm: %g is out of range (0: off, or a positive number)",
                         (double)o->clip_grad_norm);
    if (o->clip_grad_norm > 0 && !be->ops->sum_squares)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "clip_grad_norm: the %s backend cannot clip gradients yet",
                         be->ops->name);
    vdnn_status rc = vdnn_memory_options_check(&o->memory, err);
    if (rc != VDNN_OK) return rc;
    if (o->memory.policy == VDNN_POLICY_UM && (!be->ops->managed_alloc || !be->ops->managed_free || !be->ops->mem_prefetch))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "policy 'um' needs the CUDA backend (Unified Memory); the %s backend has no managed memory",
                         be->ops->name);
    if (o->batch % o->memory.micro_batches)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "memory.micro_batches: a batch of %d images does not split into %d micro-batches", o->batch,
                         o->memory.micro_batches);
    return VDNN_OK;
}

vdnn_status vdnn_net_create(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_net_options *o, vdnn_net_t **out,
                            vdnn_error *err)
{
    return vdnn_net_create_ex(m, be, o, NULL, out, err);
}

vdnn_status vdnn_net_create_ex(const vdnn_graph_t *model, vdnn_backend_t *be, const vdnn_net_options *o,
                               const vdnn_net_extras *x, vdnn_net_t **out, vdnn_error *err)
{
    *out = NULL;
    if (!model || !be || !o || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "net: a model, backend and options are needed");
    vdnn_status rc = check_options(be, o, err);
    if (rc != VDNN_OK) return rc;
    const int m = o->memory.micro_batches;
    /* Graph and plans are made for one micro-batch. */
    vdnn_graph_t *g = NULL;
    rc = vdnn_graph_resolved_copy(model, (vdnn_shape){o->batch / m, o->in_c, o->in_h, o->in_w}, o->classes, &g, err);
    if (rc != VDNN_OK) return rc;
    g->dtype = (vdnn_dtype)o->memory.precision;
    if ((rc = vdnn_backend_check_dtype(be, g->dtype, g, err)) != VDNN_OK) {
        vdnn_graph_free(g);
        return rc;
    }
    vdnn_net_t *net = calloc(1, sizeof *net);
    if (net) net->ckpt_precision = o->memory.precision;
    if (!net) {
        vdnn_graph_free(g);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    }
    net->g = g;
    net->be = be;
    be->nets++;
    net->opt = *o;
    net->opt.profile = NULL; /* read while planning, below, only: the caller may free it once the net exists */
    /* The optimizer's state is memory the plan places: one moment per parameter for SGD, two for AdamW. */
    net->opt.memory.optimizer_moments = o->optimizer == VDNN_OPTIMIZER_ADAMW ? 2 : 1;
    net->opt.memory.clip_grads = o->clip_grad_norm > 0;
    if (x) net->x = *x;
    if (!net->x.dropout_seed) net->x.dropout_seed = vdnn_net_dropout_seed;
    if (net->x.hooks) net->x.keep_weight_grads = true;
    /* Loss scaling checks every gradient before any update: no update inside backward. */
    net->loss_scaling = o->loss_scale > 0 || (o->loss_scale == 0 && o->memory.precision == VDNN_PRECISION_FP16);
    if (net->loss_scaling) {
        net->x.keep_weight_grads = true;
        vdnn_loss_scaler_init(&net->scaler, o->loss_scale > 0 ? o->loss_scale : VDNN_LOSS_SCALE_INIT);
    }
    net->opt.memory.pipelined = m > 1 && o->memory.pipelined;
    net->fetch_storage = -1;
    net->info_train = calloc((size_t)g->n_layers, sizeof *net->info_train);
    net->info_eval = calloc((size_t)g->n_layers, sizeof *net->info_eval);
    net->algos_train = calloc((size_t)g->n_layers, sizeof *net->algos_train);
    net->algos_eval = calloc((size_t)g->n_layers, sizeof *net->algos_eval);
    if (!net->info_train || !net->info_eval || !net->algos_train || !net->algos_eval) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(g, be, true, net->algos_train, net->info_train, err);
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(g, be, false, net->algos_eval, net->info_eval, err);
    if (rc == VDNN_OK)
        rc = vdnn_plan_training(g, net->info_train, net->algos_train, &net->opt.memory, o->profile,
                                net->x.keep_weight_grads, &net->plan_train, err);
    if (rc == VDNN_OK) {
        /* Policy auto may have homed the parameters: evaluation reads them there too. Where training streams
         * convolution inputs, evaluation runs those convolutions in place as well. */
        rc = build_eval_plan(net, o->memory.budget, net->plan_train->persistent_bytes, net->plan_train->offload_params,
                             vdnn_plan_streamed_layers(net->plan_train) > 0, &net->plan_eval, err);
    }
    /* Both plans home the weights and biases alike (the same storages first, in the same order). */
    for (int i = 0; rc == VDNN_OK && net->plan_eval && i < net->plan_eval->n_storages; i++) {
        const vdnn_storage *e = &net->plan_eval->st[i];
        if (e->homed && (i >= net->plan_train->n_storages || !net->plan_train->st[i].homed ||
                         strcmp(net->plan_train->st[i].name, e->name) || net->plan_train->st[i].host_offset != e->host_offset))
            rc = vdnn_fail(err, VDNN_ERR_BACKEND, "internal: the evaluation plan homes '%s' elsewhere than training",
                           e->name);
    }
    if (rc == VDNN_OK) {
        size_t need = max_sz(net->plan_train->peak_device_bytes, net->plan_eval->peak_device_bytes);
        if (need > o->memory.budget || net->plan_train->host_bytes + net->plan_train->managed_bytes > o->memory.host_budget)
            rc = budget_error(net, err);
        net->dev_bytes = need;
        net->host_bytes = net->plan_train->host_bytes;
        net->managed_bytes = net->plan_train->managed_bytes;
    }
    if (rc == VDNN_OK && net->managed_bytes) rc = um_check(net, err);
    if (rc == VDNN_OK) rc = vdnn_net_create_ops(net, true, &net->ops_train, err);
    if (rc == VDNN_OK) rc = be->ops->dev_alloc(be, net->dev_bytes, &net->dev, err);
    if (rc == VDNN_OK && net->host_bytes) rc = be->ops->host_alloc(be, net->host_bytes, &net->host, err);
    if (rc == VDNN_OK && net->managed_bytes) rc = be->ops->managed_alloc(be, net->managed_bytes, &net->managed, err);
    if (rc == VDNN_OK) {
        /* Evaluation's events (homed weights) are among training's; the last one is the compute marker. */
        net->n_events = (net->plan_train->n_events > net->plan_eval->n_events ? net->plan_train->n_events
                                                                               : net->plan_eval->n_events) + 1;
        net->events = calloc((size_t)net->n_events, sizeof *net->events);
        int n_st = net->plan_train->n_storages > net->plan_eval->n_storages ? net->plan_train->n_storages
                                                                             : net->plan_eval->n_storages;
        net->ptr = calloc((size_t)n_st, sizeof *net->ptr);
        net->host_scratch = malloc(vdnn_shape_bytes(g->layers[g->n_layers - 1].out));
        if (net->opt.memory.pipelined)
            net->micro_labels = malloc(sizeof(int32_t) * (size_t)o->batch * vdnn_graph_labels_per_sample(g));
        /* Pinned where the backend pins (CUDA): the rounded batch then crosses the link without a staging copy. */
        if (g->dtype != VDNN_DTYPE_F32)
            rc = be->ops->host_alloc(be, vdnn_map_bytes(g, g->input), &net->host_images, err);
        if (o->clip_grad_norm > 0) net->clip_parts = calloc(4 * (size_t)g->n_layers, sizeof(double));
        if (rc == VDNN_OK && (!net->events || !net->ptr || !net->host_scratch ||
                              (net->opt.memory.pipelined && !net->micro_labels) ||
                              (o->clip_grad_norm > 0 && !net->clip_parts)))
            rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    }
    for (int i = 0; rc == VDNN_OK && i < net->n_events; i++) rc = be->ops->event_create(be, &net->events[i], err);
    if (rc == VDNN_OK) {
        vdnn_arena_init(&net->arena, net->dev, net->dev_bytes);
        vdnn_net_bind_plan(net, net->plan_train);
        /* The persistent region stays taken for the net's whole life. */
        rc = vdnn_arena_take(&net->arena, 0, net->plan_train->persistent_bytes, -1, err);
    }
    if (rc == VDNN_OK && o->memory.poison) rc = be->ops->poison(be, net->dev, net->dev_bytes, err);
    if (rc == VDNN_OK) rc = vdnn_net_init_params(net, err);
    if (rc != VDNN_OK) {
        vdnn_net_free(net);
        return rc;
    }
    *out = net;
    return VDNN_OK;
}

void vdnn_net_free(vdnn_net_t *net)
{
    if (!net) return;
    vdnn_backend_t *be = net->be;
    if (net->events) {
        be->ops->sync_all(be, NULL);
        for (int i = 0; i < net->n_events; i++)
            if (net->events[i]) be->ops->event_destroy(be, net->events[i]);
        free(net->events);
    }
    vdnn_net_destroy_ops(net, net->ops_train);
    vdnn_net_destroy_ops(net, net->ops_eval);
    vdnn_recorder_release(&net->rec, be);
    if (net->dev) be->ops->dev_free(be, net->dev);
    if (net->host) be->ops->host_free(be, net->host);
    if (net->managed) be->ops->managed_free(be, net->managed);
    vdnn_arena_release(&net->arena);
    vdnn_plan_free(net->plan_train);
    vdnn_plan_free(net->plan_eval);
    free(net->info_train);
    free(net->algos_train);
    free(net->algos_eval);
    free(net->info_eval);
    free(net->ptr);
    free(net->host_scratch);
    if (net->host_images) be->ops->host_free(be, net->host_images);
    free(net->clip_parts);
    free(net->micro_labels);
    vdnn_graph_free(net->g);
    free(net);
    if (--be->nets == 0 && be->freed) vdnn_backend_destroy(be);
}

