/* A trainable network: sizes, plans and budget checks, ops, arena and host pool, parameters and their checkpoints. */
#include "exec/net.h"

#include "plan/planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void vdnn_net_config_default(vdnn_net_config *c)
{
    memset(c, 0, sizeof *c);
    c->batch = 64;
    c->policy = VDNN_POLICY_NONE;
    c->budget = SIZE_MAX;
    c->host_budget = SIZE_MAX;
    c->seed = 1;
    c->momentum = 0.9f;
    c->weight_decay = 5e-4f;
    c->micro_batches = 1;
}

uint64_t vdnn_net_dropout_seed(uint64_t run_seed, int64_t step, int layer)
{
    return vdnn_mix64(run_seed ^ vdnn_mix64(((uint64_t)step << 16) ^ (uint64_t)layer));
}

uint64_t vdnn_net_model_hash(const vdnn_net_t *net)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v)                                          \
    do {                                                \
        h ^= (uint64_t)(v);                             \
        h *= 1099511628211ULL;                          \
    } while (0)
    for (int l = 0; l < net->g->n_layers; l++) {
        const vdnn_layer *ly = &net->g->layers[l];
        for (const char *c = ly->name; *c; c++) MIX((unsigned char)*c);
        MIX(ly->kind);
        MIX(ly->out.c);
        MIX(ly->out.h);
        MIX(ly->out.w);
        MIX(ly->n_weight);
        MIX(ly->n_bias);
        MIX(ly->n_stats);
        for (int i = 0; i < ly->n_inputs; i++) MIX(ly->inputs[i]);
    }
#undef MIX
    return h;
}

/* Points each persistent storage of `plan` at its fixed offset, and under policy um each swapped one at its
 * range of the managed pool; forgets every other pointer. */
static void bind_plan(vdnn_net_t *net, const vdnn_plan_t *plan)
{
    for (int i = 0; i < plan->n_storages; i++) net->ptr[i] = NULL;
    for (int b = 0; b < plan->n_blocks; b++)
        if (plan->st[plan->blocks[b].storage].persistent)
            net->ptr[plan->blocks[b].storage] = (char *)net->dev + plan->blocks[b].offset;
    if (plan->policy != VDNN_POLICY_UM || !net->managed) return;
    for (int i = 0; i < plan->n_storages; i++)
        if (plan->st[i].cls == VDNN_CLASS_SWAP) net->ptr[i] = (char *)net->managed + plan->st[i].host_offset;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* A parameter-like storage of the training plan: on the device for the whole run, or homed in the host pool. */
static bool param_like(const vdnn_storage *s) { return s->persistent || s->homed; }

/* Host address of a homed storage (its authoritative copy), or NULL for one on the device. */
static char *home_ptr(const vdnn_net_t *net, int st)
{
    const vdnn_storage *s = &net->plan_train->st[st];
    return s->homed ? (char *)net->host + s->host_offset : NULL;
}

/* Reads (to_host) or writes a parameter-like storage wherever its authoritative copy is. */
static vdnn_status param_io(vdnn_net_t *net, int st, void *host, bool to_host, vdnn_error *err);

static vdnn_status create_ops(vdnn_net_t *net, bool training, vdnn_op ***out, vdnn_error *err)
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

static void destroy_ops(vdnn_net_t *net, vdnn_op **ops)
{
    if (!ops) return;
    for (int l = 1; l < net->g->n_layers; l++)
        if (ops[l]) net->be->ops->op_destroy(net->be, ops[l]);
    free(ops);
}

/* PyTorch's default initialisation for conv and linear layers: weights and biases uniform in
 * +-1/sqrt(fan_in); batch norm gamma 1, beta 0, running mean 0, running variance 1. Storages the model file
 * gives values for (a pretrained ONNX model) start from those instead, so training fine-tunes them. */
static vdnn_status init_params(vdnn_net_t *net, vdnn_error *err)
{
    const vdnn_plan_t *p = net->plan_train;
    size_t max_n = 0;
    for (int l = 1; l < net->g->n_layers; l++) {
        const vdnn_layer *ly = &net->g->layers[l];
        max_n = max_sz(max_n, max_sz(ly->n_weight, max_sz(ly->n_bias, ly->n_stats)));
    }
    float *buf = malloc(max_sz(max_n, 1) * sizeof(float));
    if (!buf) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory initialising parameters");
    vdnn_status rc = VDNN_OK;
    for (int i = 0; rc == VDNN_OK && i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!param_like(s)) continue;
        const vdnn_layer *ly = &net->g->layers[s->layer];
        size_t n = s->bytes / sizeof(float);
        bool bn = ly->kind == VDNN_LAYER_BATCHNORM;
        const vdnn_param_init *given = vdnn_graph_param_init(net->g, s->name);
        if (given && given->count != n) {
            rc = vdnn_fail(err, VDNN_ERR_SHAPE,
                           "%s: the model's initial '%s' has %zu values but layer '%s' needs %zu at input %dx%dx%d "
                           "(was the model made for another input size?)",
                           net->g->source, s->name, given->count, ly->name, n, net->g->input.c, net->g->input.h,
                           net->g->input.w);
        } else if (given) {
            memcpy(buf, given->values, n * sizeof(float));
        } else if (s->kind == VDNN_ST_WEIGHT || s->kind == VDNN_ST_BIAS) {
            if (bn) {
                for (size_t k = 0; k < n; k++) buf[k] = s->kind == VDNN_ST_WEIGHT ? 1.0f : 0.0f;
            } else {
                const vdnn_shape in = net->g->layers[ly->inputs[0]].out;
                double fan_in = ly->kind == VDNN_LAYER_CONV
                                    ? (double)in.c / ly->p.groups * ly->p.kernel_h * ly->p.kernel_w
                                    : (double)in.c * in.h * in.w;
                double bound = 1.0 / sqrt(fan_in);
                uint64_t st = vdnn_mix64(net->cfg.seed ^ vdnn_mix64((uint64_t)s->layer * 2 + (s->kind == VDNN_ST_BIAS)));
                for (size_t k = 0; k < n; k++) {
                    uint64_t r = vdnn_mix64(st + k);
                    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
                    buf[k] = (float)((2.0 * u - 1.0) * bound);
                }
            }
        } else if (s->kind == VDNN_ST_STATS) {
            for (size_t k = 0; k < n; k++) buf[k] = k < n / 2 ? 0.0f : 1.0f;
        } else {
            for (size_t k = 0; k < n; k++) buf[k] = 0.0f;
        }
        if (rc == VDNN_OK) rc = param_io(net, i, buf, false, err);
    }
    free(buf);
    return rc;
}

/* The evaluation plan: every map kept only as long as forward needs it, the parameters read where the training
 * plan keeps them (above variable_base). Where the planners may choose algorithms, the defaults, or the leanest
 * if the defaults need more than `budget`. */
static vdnn_status build_eval_plan(vdnn_net_t *net, size_t budget, size_t variable_base, bool offload_params, bool stream,
                                   vdnn_plan_t **out, vdnn_error *err)
{
    const bool choose = net->cfg.algo == VDNN_ALGO_CHOOSE;
    vdnn_plan_request re = {.policy = VDNN_POLICY_NONE, .training = false, .budget = budget, .host_budget = SIZE_MAX,
                            .variable_base = variable_base, .algos = net->algos_eval,
                            .force_algo = choose ? 0 : net->cfg.algo, .offload_params = offload_params,
                            .stream_inputs = stream};
    vdnn_status rc = vdnn_plan_build(net->g, net->info_eval, &re, out, err);
    if (rc == VDNN_OK && choose && (*out)->peak_device_bytes > budget) {
        vdnn_plan_free(*out);
        *out = NULL;
        re.force_algo = VDNN_ALGO_LEANEST;
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
    vdnn_plan_request rq = {.policy = VDNN_POLICY_NONE, .training = true, .budget = SIZE_MAX, .host_budget = SIZE_MAX,
                            .algos = net->algos_train, .force_algo = net->cfg.algo, .offload_params = true};
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
    if (p->host_bytes + p->managed_bytes > p->host_budget) {
        return vdnn_fail(err, VDNN_ERR_BUDGET,
                         "host budget too small: policy '%s' needs %s of host memory, the host budget is %s",
                         vdnn_policy_name(p->policy),
                         vdnn_format_bytes(p->host_bytes + p->managed_bytes, need, sizeof need),
                         vdnn_format_bytes(p->host_budget, have, sizeof have));
    }
    /* Name the smallest budget any plan reaches, so the user knows what to ask for: over the planners'
     * classifications with this net's options, and (policy auto does that by itself) with the parameters
     * homed in host memory; the evaluation plan shares the arena, so its need is a floor. */
    size_t best_peak = device_need;
    vdnn_policy best_pol = p->policy;
    const char *opt = p->offload_params ? " --offload-params" : "";
    vdnn_plan_request rq = {.policy = VDNN_POLICY_NONE, .training = true, .budget = SIZE_MAX, .host_budget = SIZE_MAX,
                            .keep_weight_grads = net->cfg.keep_weight_grads, .micro_batches = p->micro_batches,
                            .held_batches = p->held_batches, .algos = net->algos_train, .force_algo = net->cfg.algo,
                            .offload_params = p->offload_params};
    vdnn_error e2;
    size_t mb = SIZE_MAX;
    if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK) {
        mb = max_sz(mb, net->plan_eval->peak_device_bytes);
        if (mb < best_peak) best_peak = mb, best_pol = VDNN_POLICY_AUTO;
    }
    const char *no_home;
    size_t eval_homed = SIZE_MAX;
    if (!p->offload_params && vdnn_plan_offload_supported(&rq, &no_home) && homed_eval_need(net, false, &eval_homed) == VDNN_OK) {
        rq.offload_params = true;
        if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK && max_sz(mb, eval_homed) < best_peak) {
            best_peak = max_sz(mb, eval_homed);
            best_pol = VDNN_POLICY_AUTO;
            opt = " (which homes the parameters in host memory, as --offload-params does)";
        }
    }
    /* And with convolution inputs streamed as well, which auto also does by itself where nothing else fits. */
    if (!vdnn_plan_streamed_layers(p) && vdnn_plan_stream_supported(&rq, &no_home) &&
        vdnn_plan_offload_supported(&rq, &no_home) && homed_eval_need(net, true, &eval_homed) == VDNN_OK) {
        rq.offload_params = rq.stream_inputs = true;
        if (vdnn_plan_min_budget(net->g, net->info_train, &rq, &mb, &e2) == VDNN_OK && max_sz(mb, eval_homed) < best_peak) {
            best_peak = max_sz(mb, eval_homed);
            best_pol = VDNN_POLICY_AUTO;
            opt = " (which homes the parameters in host memory and streams convolution inputs, as --offload-params "
                  "--stream-inputs do)";
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
                     "%d%s, the budget is %s; the smallest budget that works is %s (%zu bytes) with --policy %s%s",
                     vdnn_policy_name(p->policy), vdnn_format_bytes(device_need, need, sizeof need), device_need,
                     net->cfg.batch, what, vdnn_format_bytes(p->budget, have, sizeof have),
                     vdnn_format_bytes(best_peak, best, sizeof best), best_peak, vdnn_policy_name(best_pol), opt);
}

/* Policy um: managed memory beyond what the device has free makes the driver evict and re-fault pages, and on
 * a GPU shared with other jobs that can hang it; so it is refused unless asked for, before any allocation. */
static vdnn_status um_check(vdnn_net_t *net, vdnn_error *err)
{
    size_t free_b = net->be->ops->dev_free_bytes(net->be);
    size_t need = net->dev_bytes + net->managed_bytes;
    if (need >= net->dev_bytes && need <= free_b) return VDNN_OK;
    if (net->cfg.allow_oversubscribe) {
        net->oversubscribed = true;
        return VDNN_OK;
    }
    char m[32], a[32], n[32], f[32];
    return vdnn_fail(err, VDNN_ERR_BUDGET,
                     "policy 'um': the managed pool (%s) and the device arena (%s) need %s, more than the %s the device "
                     "has free; Unified Memory beyond free device memory can hang a shared GPU, so it is only done "
                     "when asked for (--allow-oversubscribe)",
                     vdnn_format_bytes(net->managed_bytes, m, sizeof m), vdnn_format_bytes(net->dev_bytes, a, sizeof a),
                     vdnn_format_bytes(need, n, sizeof n), vdnn_format_bytes(free_b, f, sizeof f));
}

vdnn_status vdnn_net_create(vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_config *cfg, vdnn_net_t **out,
                            vdnn_error *err)
{
    *out = NULL;
    if (cfg->batch <= 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch must be positive (got %d)", cfg->batch);
    if (cfg->policy == VDNN_POLICY_UM && (!be->ops->managed_alloc || !be->ops->managed_free || !be->ops->mem_prefetch))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "policy 'um' needs the CUDA backend (Unified Memory); the %s backend has no managed memory",
                         be->ops->name);
    const int m = cfg->micro_batches > 1 ? cfg->micro_batches : 1;
    if (cfg->batch % m)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "a batch of %d images does not split into %d micro-batches",
                         cfg->batch, m);
    /* Graph and plans are made for one micro-batch. */
    vdnn_shape in = {cfg->batch / m, cfg->in_c, cfg->in_h, cfg->in_w};
    vdnn_status rc = vdnn_graph_resolve(g, in, cfg->classes, err);
    if (rc != VDNN_OK) return rc;
    vdnn_net_t *net = calloc(1, sizeof *net);
    if (!net) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    net->g = g;
    net->be = be;
    net->cfg = *cfg;
    if (!net->cfg.dropout_seed) net->cfg.dropout_seed = vdnn_net_dropout_seed;
    if (net->cfg.hooks) net->cfg.keep_weight_grads = true;
    net->cfg.micro_batches = m;
    net->cfg.pipelined = m > 1 && cfg->pipelined;
    net->fetch_storage = -1;
    net->info_train = calloc((size_t)g->n_layers, sizeof *net->info_train);
    net->info_eval = calloc((size_t)g->n_layers, sizeof *net->info_eval);
    net->algos_train = calloc((size_t)g->n_layers, sizeof *net->algos_train);
    net->algos_eval = calloc((size_t)g->n_layers, sizeof *net->algos_eval);
    if (!net->info_train || !net->info_eval || !net->algos_train || !net->algos_eval) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(g, be, true, net->algos_train, net->info_train, err);
    if (rc == VDNN_OK) rc = vdnn_plan_query_algos(g, be, false, net->algos_eval, net->info_eval, err);
    vdnn_plan_request rq = {.policy = cfg->policy, .training = true, .budget = cfg->budget, .host_budget = cfg->host_budget,
                            .profile = cfg->profile, .keep_weight_grads = net->cfg.keep_weight_grads,
                            .micro_batches = m, .held_batches = net->cfg.pipelined ? m : 1,
                            .algos = net->algos_train, .force_algo = cfg->algo, .offload_params = cfg->offload_params,
                            .stream_inputs = cfg->stream_inputs};
    if (rc == VDNN_OK) rc = vdnn_plan_build(g, net->info_train, &rq, &net->plan_train, err);
    if (rc == VDNN_OK) {
        /* Policy auto may have homed the parameters: evaluation reads them there too. Where training streams
         * convolution inputs, evaluation runs those convolutions in place as well. */
        rc = build_eval_plan(net, cfg->budget, net->plan_train->persistent_bytes, net->plan_train->offload_params,
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
        if (need > cfg->budget || net->plan_train->host_bytes + net->plan_train->managed_bytes > cfg->host_budget)
            rc = budget_error(net, err);
        net->dev_bytes = need;
        net->host_bytes = net->plan_train->host_bytes;
        net->managed_bytes = net->plan_train->managed_bytes;
    }
    if (rc == VDNN_OK && net->managed_bytes) rc = um_check(net, err);
    if (rc == VDNN_OK) rc = create_ops(net, true, &net->ops_train, err);
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
        if (net->cfg.pipelined) net->micro_labels = malloc(sizeof(int32_t) * (size_t)cfg->batch);
        if (!net->events || !net->ptr || !net->host_scratch || (net->cfg.pipelined && !net->micro_labels))
            rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory creating the net");
    }
    for (int i = 0; rc == VDNN_OK && i < net->n_events; i++) rc = be->ops->event_create(be, &net->events[i], err);
    if (rc == VDNN_OK) {
        vdnn_arena_init(&net->arena, net->dev, net->dev_bytes);
        bind_plan(net, net->plan_train);
        /* The persistent region stays taken for the net's whole life. */
        rc = vdnn_arena_take(&net->arena, 0, net->plan_train->persistent_bytes, -1, err);
    }
    if (rc == VDNN_OK && cfg->poison) rc = be->ops->poison(be, net->dev, net->dev_bytes, err);
    if (rc == VDNN_OK) rc = init_params(net, err);
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
    destroy_ops(net, net->ops_train);
    destroy_ops(net, net->ops_eval);
    vdnn_recorder_release(&net->rec);
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
    free(net->micro_labels);
    free(net);
}

vdnn_status vdnn_net_train_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err)
{
    for (int i = 0; i < net->cfg.batch; i++)
        if (labels[i] < 0 || labels[i] >= net->g->classes)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", labels[i], i,
                             net->g->classes - 1);
    if (net->cfg.micro_batches > 1) return vdnn_net_micro_step(net, images, labels, lr, loss, err);
    bind_plan(net, net->plan_train);
    vdnn_status rc = vdnn_exec_iteration(net, net->plan_train, net->ops_train, images, labels, lr, err);
    if (rc != VDNN_OK) return rc;
    if (loss) rc = net->be->ops->download(net->be, loss, net->ptr[net->plan_train->loss], sizeof(float), err);
    net->step++;
    return rc;
}

vdnn_status vdnn_net_eval_batch(vdnn_net_t *net, const float *images, const int32_t *labels, int n, int *correct,
                                double *loss_sum, vdnn_error *err)
{
    const int N = net->g->input.n, K = net->g->classes;
    if (n <= 0 || n > N) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "evaluation batch of %d images (at most %d)", n, N);
    /* Checked here, not by the loss op: the counting below indexes the probabilities by label. */
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= K)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", labels[i], i, K - 1);
    vdnn_status rc = VDNN_OK;
    if (!net->ops_eval) rc = create_ops(net, false, &net->ops_eval, err);
    if (rc != VDNN_OK) return rc;
    /* A short last batch is padded with zero images; inference-mode layers treat samples independently. */
    size_t img = vdnn_shape_bytes(net->g->input) / (size_t)N;
    const float *x = images;
    int32_t *lab = calloc((size_t)N, sizeof *lab);
    float *padded = NULL;
    if (!lab) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    memcpy(lab, labels, sizeof *lab * (size_t)n);
    if (n < N) {
        padded = calloc((size_t)N, img);
        if (!padded) {
            free(lab);
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
        }
        memcpy(padded, images, img * (size_t)n);
        x = padded;
    }
    const vdnn_plan_t *p = net->plan_eval;
    bind_plan(net, p);
    net->fetch_storage = p->ls[net->g->n_layers - 1].out;
    net->fetch_dst = net->host_scratch;
    rc = vdnn_exec_iteration(net, p, net->ops_eval, x, lab, 0.0f, err);
    net->fetch_storage = -1;
    const float *probs = net->host_scratch;
    int ok = 0;
    double ls = 0;
    for (int i = 0; rc == VDNN_OK && i < n; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (probs[(size_t)i * K + k] > probs[(size_t)i * K + best]) best = k;
        ok += best == labels[i];
        double pl = probs[(size_t)i * K + labels[i]];
        ls += -log(pl > 1e-30 ? pl : 1e-30);
    }
    if (correct) *correct = ok;
    if (loss_sum) *loss_sum = ls;
    free(lab);
    free(padded);
    bind_plan(net, net->plan_train);
    return rc;
}

static vdnn_storage_kind exported_kinds[] = {VDNN_ST_WEIGHT, VDNN_ST_BIAS, VDNN_ST_STATS, VDNN_ST_WMOM, VDNN_ST_BMOM};

static bool exported(vdnn_storage_kind k)
{
    for (size_t i = 0; i < sizeof exported_kinds / sizeof exported_kinds[0]; i++)
        if (exported_kinds[i] == k) return true;
    return false;
}

static int find_persistent(const vdnn_net_t *net, const char *name)
{
    const vdnn_plan_t *p = net->plan_train;
    for (int i = 0; i < p->n_storages; i++)
        if (param_like(&p->st[i]) && !strcmp(p->st[i].name, name)) return i;
    return -1;
}

static char *persistent_ptr(const vdnn_net_t *net, int st)
{
    const vdnn_plan_t *p = net->plan_train;
    if (!p->st[st].persistent) return NULL;
    for (int b = 0; b < p->n_blocks; b++)
        if (p->blocks[b].storage == st) return (char *)net->dev + p->blocks[b].offset;
    return NULL;
}

static vdnn_status param_io(vdnn_net_t *net, int st, void *host, bool to_host, vdnn_error *err)
{
    const size_t bytes = net->plan_train->st[st].bytes;
    char *home = home_ptr(net, st);
    if (home) {
        /* Every iteration ends with its copies done: the home holds the latest values. */
        if (to_host) memcpy(host, home, bytes);
        else memcpy(home, host, bytes);
        return VDNN_OK;
    }
    char *dev = persistent_ptr(net, st);
    if (!dev) return vdnn_fail(err, VDNN_ERR_BACKEND, "internal: '%s' has no fixed place", net->plan_train->st[st].name);
    return to_host ? net->be->ops->download(net->be, host, dev, bytes, err)
                   : net->be->ops->upload(net->be, dev, host, bytes, err);
}

float *vdnn_net_param_ptr(vdnn_net_t *net, const char *name, size_t *count)
{
    int i = find_persistent(net, name);
    if (i < 0) return NULL;
    if (count) *count = net->plan_train->st[i].bytes / sizeof(float);
    return (float *)persistent_ptr(net, i);
}

vdnn_status vdnn_net_get(vdnn_net_t *net, const char *name, float *host, size_t count, vdnn_error *err)
{
    int i = find_persistent(net, name);
    if (i < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no parameter named '%s'", name);
    if (count * sizeof(float) != net->plan_train->st[i].bytes)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "'%s' has %zu values, not %zu", name,
                         net->plan_train->st[i].bytes / sizeof(float), count);
    return param_io(net, i, host, true, err);
}

vdnn_status vdnn_net_set(vdnn_net_t *net, const char *name, const float *host, size_t count, vdnn_error *err)
{
    int i = find_persistent(net, name);
    if (i < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no parameter named '%s'", name);
    if (count * sizeof(float) != net->plan_train->st[i].bytes)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "'%s' has %zu values, not %zu", name,
                         net->plan_train->st[i].bytes / sizeof(float), count);
    return param_io(net, i, (void *)host, false, err);
}

vdnn_status vdnn_net_export(vdnn_net_t *net, vdnn_checkpoint *ck, vdnn_error *err)
{
    memset(ck, 0, sizeof *ck);
    const vdnn_plan_t *p = net->plan_train;
    snprintf(ck->model, sizeof ck->model, "%s", net->g->name);
    ck->model_hash = vdnn_net_model_hash(net);
    ck->step = net->step;
    ck->epoch = net->epoch;
    ck->seed = net->cfg.seed;
    int n = 0;
    for (int i = 0; i < p->n_storages; i++) n += param_like(&p->st[i]) && exported(p->st[i].kind);
    ck->tensors = calloc((size_t)n + 1, sizeof *ck->tensors);
    if (!ck->tensors) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory exporting parameters");
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!param_like(s) || !exported(s->kind)) continue;
        vdnn_ckpt_tensor *t = &ck->tensors[ck->n_tensors];
        snprintf(t->name, sizeof t->name, "%s", s->name);
        t->count = s->bytes / sizeof(float);
        t->data = malloc(s->bytes);
        if (!t->data) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory exporting parameters");
        ck->n_tensors++;
        vdnn_status rc = param_io(net, i, t->data, true, err);
        if (rc != VDNN_OK) return rc;
    }
    return VDNN_OK;
}

vdnn_status vdnn_net_import(vdnn_net_t *net, const vdnn_checkpoint *ck, const char *path, vdnn_error *err)
{
    if (ck->model_hash != vdnn_net_model_hash(net))
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "%s: checkpoint of model '%s' does not match model '%s' at this input size",
                         path, ck->model, net->g->name);
    const vdnn_plan_t *p = net->plan_train;
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!param_like(s) || !exported(s->kind)) continue;
        const vdnn_ckpt_tensor *t = vdnn_checkpoint_find(ck, s->name);
        if (!t || t->count * sizeof(float) != s->bytes)
            return vdnn_fail(err, VDNN_ERR_MISMATCH, "%s: tensor '%s' is %s", path, s->name,
                             t ? "of another size" : "missing");
        vdnn_status rc = param_io(net, i, (void *)t->data, false, err);
        if (rc != VDNN_OK) return rc;
    }
    /* The run goes on as it began: the same shuffling and dropout masks. */
    net->cfg.seed = ck->seed;
    net->step = ck->step;
    net->epoch = ck->epoch;
    return VDNN_OK;
}
