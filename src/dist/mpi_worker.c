/* A rank's part of a distributed run: its group and stage, its communicators, its stage graph and net,
 * and the hooks that tie the net's iteration to the pipeline and the gradient sums. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "plan/planner.h"

/* Dropout masks. A stage net numbers layers from its own graph, but must draw the masks of the full graph's
 * layers; and every data-parallel group draws its own masks (identical masks on every group's share of a
 * batch would correlate them), group 0 those of a one-device run. The executor hands the mask function
 * only the net's seed, so that seed carries the run's seed, the group and the stage's first layer. */
#define SEED_FIRST_BITS 12
#define SEED_GROUP_BITS 16
#define SEED_SHIFT (SEED_FIRST_BITS + SEED_GROUP_BITS)

static uint64_t pack_seed(uint64_t seed, int group, int first)
{
    return seed << SEED_SHIFT | (uint64_t)group << SEED_FIRST_BITS | (uint64_t)first;
}

static uint64_t stage_dropout_seed(uint64_t packed, int64_t step, int layer)
{
    int first = (int)(packed & ((1u << SEED_FIRST_BITS) - 1));
    uint64_t group = (packed >> SEED_FIRST_BITS) & ((1u << SEED_GROUP_BITS) - 1);
    uint64_t seed = packed >> SEED_SHIFT;
    if (group) seed ^= vdnn_mix64(group << 32 | 0x5eedu);
    return vdnn_net_dropout_seed(seed, step, layer + first - VDNN_STAGE_PREFIX);
}

static vdnn_status hook_grads_ready(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err)
{
    vdnn_dist_t *w = ctx;
    vdnn_status rc = w->pipe ? vdnn_pipe_grads_ready(w->pipe, layer, err) : VDNN_OK;
    /* A layer's gradients are final in the last micro-batch's backward pass. */
    if (rc == VDNN_OK && w->dp && vdnn_net_current_micro(net) == w->opt.memory.micro_batches - 1)
        rc = vdnn_dp_grads_ready(w->dp, layer, err);
    return rc;
}

static vdnn_status hook_forward_done(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err)
{
    vdnn_dist_t *w = ctx;
    if (w->pipe) vdnn_pipe_progress(w->pipe);
    vdnn_tie_progress(w->tie);
    return VDNN_OK;
}

static vdnn_status hook_backward_done(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err)
{
    vdnn_dist_t *w = ctx;
    (void)net;
    return w->tie ? vdnn_tie_backward_done(w->tie, layer, err) : VDNN_OK;
}

static vdnn_status hook_before_update(void *ctx, vdnn_net_t *net, vdnn_error *err)
{
    vdnn_dist_t *w = ctx;
    return w->dp ? vdnn_dp_before_update(w->dp, err) : VDNN_OK;
}

/* Gradient clipping across a pipeline: every stage's squared sums in stage order, which is the whole model's layer
 * order, then one running sum as a one-device net makes it. The gather is a sum of zeros and one stage's values at
 * each place (x + 0 is exact), so it needs only the deadline-checked allreduce. Data-parallel groups hold the same
 * averaged gradients (before_update ran first) and find the same norm. */
static vdnn_status norm_sum(void *ctx, vdnn_net_t *net, const double *parts, int n, double *sum, vdnn_error *err)
{
    (void)net;
    vdnn_dist_t *w = ctx;
    *sum = 0.0;
    if (w->stages <= 1) {
        for (int i = 0; i < n; i++) *sum += parts[i];
        return VDNN_OK;
    }
    int *counts = calloc((size_t)w->stages, sizeof *counts);
    if (!counts) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    counts[w->stage] = n;
    vdnn_status rc = vdnn_comm_allreduce(&w->comm, w->pipe_comm, counts, w->stages, MPI_INT, MPI_SUM,
                                         "the stages' gradient tensor counts (clipping)", err);
    int total = 0, off = 0;
    for (int k = 0; k < w->stages; k++) {
        if (k == w->stage) off = total;
        total += counts[k];
    }
    free(counts);
    double *all = rc == VDNN_OK ? calloc((size_t)total + 1, sizeof *all) : NULL;
    if (rc == VDNN_OK && !all) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    if (rc == VDNN_OK) {
        memcpy(all + off, parts, sizeof(double) * (size_t)n);
        rc = vdnn_comm_allreduce(&w->comm, w->pipe_comm, all, total, MPI_DOUBLE, MPI_SUM,
                                 "the stages' squared gradient sums (clipping)", err);
    }
    for (int i = 0; rc == VDNN_OK && i < total; i++) *sum += all[i];
    free(all);
    return rc;
}

/* Synchronized batch norm: a layer's sums over the ranks holding the same stage. Two check values ride
 * along, key and key^2: their sums are N*key and N*key^2 only if every rank sent the same key, so ranks
 * whose plans diverged (a recompute on one, not another) fail loudly instead of mixing layers' statistics. */
static vdnn_status bn_sum(void *ctx, int key, double *buf, size_t n, vdnn_error *err)
{
    vdnn_dist_t *w = ctx;
    if (n + 2 > w->bn_cap) {
        double *nb = realloc(w->bn_buf, (n + 2) * sizeof *nb);
        if (!nb) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
        w->bn_buf = nb;
        w->bn_cap = n + 2;
    }
    double *t = w->bn_buf;
    memcpy(t, buf, n * sizeof *t);
    t[n] = (double)key;
    t[n + 1] = (double)key * (double)key;
    const int layer = key / 4;
    const vdnn_graph_t *ng = w->net ? vdnn_net_graph(w->net) : NULL;
    const char *name = ng && layer < ng->n_layers ? ng->layers[layer].name : "?";
    char what[160];
    snprintf(what, sizeof what, "the batch-norm sums of layer '%.64s' (step %lld)", name,
             w->net ? (long long)vdnn_net_step(w->net) : 0LL);
    if (n + 2 > INT_MAX) return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: %zu values, too many for one message", what, n);
    vdnn_status rc = vdnn_comm_allreduce(&w->comm, w->bn_comm, t, (int)(n + 2), MPI_DOUBLE, MPI_SUM, what, err);
    if (rc) return rc;
    const double g = (double)w->groups;
    if (t[n] != g * (double)key || t[n + 1] != g * (double)key * (double)key)
        return vdnn_fail(err, VDNN_ERR_MISMATCH,
                         "rank %d: %s: the ranks were at different layers (synchronized batch norm needs the same "
                         "plan on every data-parallel rank)",
                         w->comm.rank, what);
    memcpy(buf, t, n * sizeof *t);
    return VDNN_OK;
}

static bool has_batchnorm(const vdnn_graph_t *g)
{
    for (int l = 1; l < g->n_layers; l++)
        if (g->layers[l].kind == VDNN_LAYER_BATCHNORM) return true;
    return false;
}

/* Memory check for the balancer: does a stage of these layers plan within the budget? */
typedef struct fit_ctx {
    const vdnn_graph_t *g;
    vdnn_backend_t *be;
    const vdnn_net_options *opt;
    int stages;
} fit_ctx;

static bool stage_fits(void *ctx, int first, int last)
{
    fit_ctx *f = ctx;
    vdnn_stage_split s = {.stages = 1};
    /* A two-stage split around [first, last] is enough to build the graph of that range. */
    s.stages = last == f->g->n_layers - 1 ? 1 : 2;
    s.first[0] = first;
    s.last[0] = last;
    s.first[1] = last + 1;
    s.last[1] = f->g->n_layers - 1;
    vdnn_graph_t *sg = NULL;
    vdnn_op_info *info = NULL;
    vdnn_plan_t *plan = NULL;
    vdnn_error e;
    bool ok = false;
    if (vdnn_stage_graph(f->g, &s, 0, &sg, &e) == VDNN_OK) {
        vdnn_shape in = vdnn_stage_input_shape(f->g, &s, 0);
        info = calloc((size_t)sg->n_layers, sizeof *info);
        /* Planned as the stage net will be: at the micro-batch size, every micro-batch held. */
        vdnn_memory_options mem = vdnn_memory_options_default();
        mem.policy = f->opt->memory.policy;
        mem.budget = f->opt->memory.budget;
        mem.host_budget = f->opt->memory.host_budget;
        mem.micro_batches = f->opt->memory.micro_batches;
        mem.precision = f->opt->memory.precision;
        mem.pipelined = true;
        in.n /= mem.micro_batches;
        sg->dtype = (vdnn_dtype)mem.precision;
        if (info && vdnn_graph_resolve(sg, in, vdnn_stage_classes(f->g, &s, 0), &e) == VDNN_OK &&
            vdnn_plan_query_ops(sg, f->be, true, info, &e) == VDNN_OK &&
            vdnn_plan_training(sg, info, NULL, &mem, NULL, true, &plan, &e) == VDNN_OK)
            ok = plan->feasible && plan->peak_device_bytes <= mem.budget;
    }
    vdnn_plan_free(plan);
    free(info);
    vdnn_graph_free(sg);
    return ok;
}

static vdnn_status choose_split(vdnn_dist_t *w, vdnn_backend_t *be, const vdnn_dist_options *dc, vdnn_error *err)
{
    const vdnn_graph_t *g = w->full;
    if (vdnn_graph_has_stages(g) && !dc->balance) return vdnn_stage_split_from_model(g, w->stages, &w->split, err);
    vdnn_profile est;
    memset(&est, 0, sizeof est);
    const vdnn_profile *p = dc->profile;
    vdnn_status rc = VDNN_OK;
    if (p && p->n_layers != g->n_layers)
        return vdnn_fail(err, VDNN_ERR_MISMATCH, "the profile has %d layers, the model %d", p->n_layers, g->n_layers);
    if (!p) {
        /* Relative costs are all balancing needs: a roofline with a generic compute/memory ratio. */
        rc = vdnn_profile_estimate(g, 100e9, 20e9, 10e9, &est, err);
        p = &est;
    }
    double *cost = rc == VDNN_OK ? malloc((size_t)g->n_layers * sizeof *cost) : NULL;
    if (rc == VDNN_OK && !cost) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    for (int l = 0; rc == VDNN_OK && l < g->n_layers; l++) cost[l] = l ? p->fwd_s[l] + p->bwd_s[l] : 0;
    fit_ctx f = {g, be, &w->opt, w->stages};
    if (rc == VDNN_OK)
        rc = vdnn_stage_split_balance(g, cost, w->stages, w->opt.memory.budget == SIZE_MAX ? NULL : stage_fits, &f,
                                      &w->split, err);
    const int m = w->opt.memory.micro_batches;
    if (rc == VDNN_ERR_BUDGET && err && m > 1) {
        /* Say what each stage had to hold: the memory check planned every micro-batch at once. */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = vdnn_fail(err, rc, "%.400s (memory.policy %s, each stage holding %d micro-batches of %d)", msg,
                       vdnn_policy_name(w->opt.memory.policy), m, w->opt.batch / m);
    }
    free(cost);
    if (p == &est) vdnn_profile_release(&est);
    return rc;
}

/* Stage nets start from the parameters a one-device net of the same seed would have. */
static vdnn_status init_from_full(vdnn_dist_t *w, vdnn_backend_t *be, vdnn_error *err)
{
    vdnn_net_options fo = w->full_opt;
    /* Small, but batch norm in training mode needs two values per channel even after global pooling. */
    fo.batch = w->opt.batch < 2 ? w->opt.batch : 2;
    fo.memory = vdnn_memory_options_default();
    fo.profile = NULL;
    vdnn_net_t *full = NULL;
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    vdnn_status rc = vdnn_net_create(w->full, be, &fo, &full, err);
    if (rc == VDNN_OK) rc = vdnn_net_export(full, &ck, err);
    vdnn_net_free(full);
    if (rc == VDNN_OK) {
        ck.model_hash = vdnn_net_model_hash(w->net);
        rc = vdnn_net_import(w->net, &ck, "initial parameters", err);
    }
    vdnn_checkpoint_release(&ck);
    return rc;
}

/* NCCL over comm when every rank of it can use it (a rank whose GPU was missing may run the CPU backend):
 * decided together, so all or none join. */
static vdnn_status open_nccl(vdnn_dist_t *w, vdnn_backend_t *be, const vdnn_dist_options *dc, MPI_Comm comm,
                             vdnn_nccl **out, vdnn_error *err)
{
    int can = !dc->no_nccl && vdnn_nccl_built() && !strcmp(be->ops->name, "cuda");
    vdnn_status rc = vdnn_comm_allreduce(&w->comm, comm, &can, 1, MPI_INT, MPI_MIN, "the NCCL choice", err);
    if (rc == VDNN_OK && can) rc = vdnn_nccl_create(&w->comm, comm, be, out, err);
    return rc;
}

static vdnn_status split_comms(vdnn_dist_t *w, vdnn_error *err)
{
    vdnn_status rc = vdnn_comm_check(&w->comm, MPI_Comm_split(w->comm.world, w->stage, w->group, &w->dp_comm),
                                     "MPI_Comm_split", err);
    if (rc == VDNN_OK)
        rc = vdnn_comm_check(&w->comm, MPI_Comm_split(w->comm.world, w->group, w->stage, &w->pipe_comm),
                             "MPI_Comm_split", err);
    /* Its own communicator: batch-norm sums then never queue behind gradient buckets still in flight. */
    if (rc == VDNN_OK && w->sync_bn)
        rc = vdnn_comm_check(&w->comm, MPI_Comm_dup(w->dp_comm, &w->bn_comm), "MPI_Comm_dup", err);
    return rc;
}

vdnn_dist_options vdnn_dist_options_default(void)
{
    return (vdnn_dist_options){.stages = 1, .bucket_bytes = 4u << 20, .timeout_s = 300};
}

vdnn_status vdnn_dist_create(MPI_Comm world, const vdnn_model_t *model, vdnn_backend_t *be, const vdnn_net_options *o,
                             const vdnn_dist_options *dc, vdnn_dist_t **out, vdnn_error *err)
{
    *out = NULL;
    vdnn_status rc = vdnn_memory_options_check(&o->memory, err);
    if (rc != VDNN_OK) return rc;
    if (o->batch < 1 || o->batch > VDNN_MAX_BATCH)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batch: %d is out of range (1 to %d)", o->batch, VDNN_MAX_BATCH);
    vdnn_dist_t *w = calloc(1, sizeof *w);
    if (!w) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    w->dp_comm = w->pipe_comm = w->bn_comm = MPI_COMM_NULL;
    w->seed = o->seed;
    w->global_batch = o->batch;
    rc = vdnn_comm_init(&w->comm, world, dc->timeout_s, err);
    const int n = w->comm.size;
    w->stages = dc->stages > 0 ? dc->stages : 1;
    if (rc == VDNN_OK && (w->stages > VDNN_MAX_STAGES || n % w->stages))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                       "dist.stages %d: the %d ranks (mpirun -np) must be a multiple of the stage count (at most %d)",
                       w->stages, n, VDNN_MAX_STAGES);
    if (rc == VDNN_OK) {
        w->groups = n / w->stages;
        w->group = w->comm.rank / w->stages;
        w->stage = w->comm.rank % w->stages;
        if (o->batch % w->groups)
            rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                           "batch %d is not a multiple of the %d data-parallel groups (%d ranks / %d stages)",
                           o->batch, w->groups, n, w->stages);
    }
    if (rc == VDNN_OK && (w->groups >> SEED_GROUP_BITS || (model->n_layers + VDNN_STAGE_PREFIX) >> SEED_FIRST_BITS))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "distributed runs take fewer than %d groups and %d layers (%d, %d)",
                       1 << SEED_GROUP_BITS, (1 << SEED_FIRST_BITS) - VDNN_STAGE_PREFIX, w->groups, model->n_layers);
    if (rc == VDNN_OK && o->seed >> (64 - SEED_SHIFT))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "seed: %llu is out of range (distributed runs take 0 to 2^%d - 1)",
                       (unsigned long long)o->seed, 64 - SEED_SHIFT);
    /* One group has the whole batch already: nothing to synchronize. */
    w->sync_bn = dc->sync_bn && w->groups > 1 && has_batchnorm(model);
    if (rc == VDNN_OK && w->sync_bn && strcmp(be->ops->name, "cpu"))
        rc = vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                       "dist.sync_bn: synchronized batch norm runs on the CPU backend only, not on %s (without it each "
                       "data-parallel group normalizes over its own share of the batch)",
                       be->ops->name);
    if (rc == VDNN_OK) rc = split_comms(w, err);
    w->opt = *o;
    w->opt.batch = o->batch / (w->groups ? w->groups : 1);
    const int m = o->memory.micro_batches;
    if (rc == VDNN_OK && w->opt.batch % m)
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                       "memory.micro_batches %d: each data-parallel group's %d images (batch %d / %d groups) do not "
                       "split into %d micro-batches",
                       m, w->opt.batch, o->batch, w->groups, m);
    /* Stages run GPipe: all of a step's micro-batches through forward before any goes through backward. Data
     * parallelism alone sums gradients over micro-batches one after another. */
    w->opt.memory.pipelined = w->stages > 1;
    w->full_opt = w->opt;
    w->full_opt.memory.micro_batches = 1;
    w->full_opt.memory.pipelined = false;
    w->hooks = (vdnn_grad_hooks){hook_grads_ready, hook_before_update, hook_forward_done, norm_sum, hook_backward_done};
    if (w->sync_bn) {
        w->bn_reduce = (vdnn_reduce){bn_sum, w};
        w->x.bn_reduce = &w->bn_reduce;
    }
    if (w->groups > 1 || w->stages > 1) {
        w->x.hooks = &w->hooks;
        w->x.hooks_ctx = w;
    }
    vdnn_shape in = {w->opt.batch, o->in_c, o->in_h, o->in_w};
    if (rc == VDNN_OK) rc = vdnn_graph_resolved_copy(model, in, o->classes, &w->full, err);
    if (rc == VDNN_OK) w->model_hash = vdnn_graph_hash(w->full);
    if (rc == VDNN_OK && w->stages > 1) {
        rc = choose_split(w, be, dc, err);
        if (rc == VDNN_OK) rc = vdnn_stage_graph(w->full, &w->split, w->stage, &w->sub, err);
        if (rc == VDNN_OK) {
            vdnn_shape sin = vdnn_stage_input_shape(w->full, &w->split, w->stage);
            w->opt.in_c = sin.c;
            w->opt.in_h = sin.h;
            w->opt.in_w = sin.w;
            w->opt.classes = vdnn_stage_classes(w->full, &w->split, w->stage);
            w->opt.profile = NULL; /* a profile describes the full graph, not a stage */
        }
    }
    /* Parameters come from the run's seed, the same on every rank (a stage net's from the full graph's);
     * only then does the net's seed take the group and stage in. */
    if (rc == VDNN_OK) rc = vdnn_net_create_ex(w->sub ? w->sub : w->full, be, &w->opt, &w->x, &w->net, err);
    if (rc == VDNN_OK && w->sub) rc = init_from_full(w, be, err);
    if (rc == VDNN_OK) rc = vdnn_dist_set_seed(w, o->seed, err);
    if (rc == VDNN_OK && w->groups > 1) rc = open_nccl(w, be, dc, w->dp_comm, &w->dp_nccl, err);
    if (rc == VDNN_OK && w->groups > 1)
        rc = vdnn_dp_create(&w->comm, w->dp_comm, w->dp_nccl, w->net, dc->bucket_bytes, &w->dp, err);
    /* Stage maps of 16 bits cross through MPI on the host (the NCCL path sends fp32). */
    if (rc == VDNN_OK && w->stages > 1 && o->memory.precision == VDNN_PRECISION_FP32)
        rc = open_nccl(w, be, dc, w->pipe_comm, &w->pipe_nccl, err);
    if (rc == VDNN_OK && w->stages > 1)
        rc = vdnn_pipe_create(&w->comm, w->pipe_comm, w->pipe_nccl, w->net, w->stage, w->stages, &w->pipe, err);
    if (rc == VDNN_OK && w->stages > 1)
        rc = vdnn_tie_create(&w->comm, w->pipe_comm, w->full, &w->split, w->stage, w->net, &w->tie, err);
    if (rc != VDNN_OK) {
        vdnn_dist_free(w);
        return rc;
    }
    *out = w;
    return VDNN_OK;
}

vdnn_status vdnn_dist_set_seed(vdnn_dist_t *w, uint64_t seed, vdnn_error *err)
{
    if (seed >> (64 - SEED_SHIFT))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "seed: %llu is out of range (distributed runs take 0 to 2^%d - 1)",
                         (unsigned long long)seed, 64 - SEED_SHIFT);
    w->seed = seed;
    w->full_opt.seed = seed;
    const bool packed = w->sub || w->groups > 1;
    w->opt.seed = packed ? pack_seed(seed, w->group, w->sub ? w->split.first[w->stage] : VDNN_STAGE_PREFIX) : seed;
    if (packed) w->x.dropout_seed = stage_dropout_seed;
    if (w->net) vdnn_net_set_seed(w->net, w->opt.seed, w->x.dropout_seed);
    return VDNN_OK;
}

void vdnn_dist_get_info(const vdnn_dist_t *w, vdnn_dist_info *i)
{
    memset(i, 0, sizeof *i);
    snprintf(i->model, sizeof i->model, "%s", w->full->name);
    i->ranks = w->comm.size;
    i->rank = w->comm.rank;
    i->stages = w->stages;
    i->groups = w->groups;
    i->stage = w->stage;
    i->group = w->group;
    i->global_batch = w->global_batch;
    i->group_batch = w->opt.batch;
    i->micro_batches = w->opt.memory.micro_batches;
    i->input = w->full->input;
    i->classes = w->full->classes;
    i->sync_bn = w->sync_bn;
    i->dp_nccl = w->dp_nccl != NULL;
    i->pipe_nccl = w->pipe_nccl != NULL;
    if (w->stages > 1) vdnn_stage_split_format(w->full, &w->split, i->split, sizeof i->split);
    if (w->dp) {
        i->gradient_buckets = vdnn_dp_buckets(w->dp);
        i->gradient_bytes = vdnn_dp_bytes(w->dp);
        vdnn_dp_times(w->dp, &i->gradient_hook_s, &i->gradient_wait_s);
    }
}

void vdnn_dist_free(vdnn_dist_t *w)
{
    if (!w) return;
    vdnn_tie_free(w->tie);
    vdnn_pipe_free(w->pipe);
    vdnn_dp_free(w->dp);
    vdnn_nccl_free(w->dp_nccl);
    vdnn_nccl_free(w->pipe_nccl);
    vdnn_net_free(w->net);
    vdnn_graph_free(w->sub);
    vdnn_graph_free(w->full);
    if (w->dp_comm != MPI_COMM_NULL) MPI_Comm_free(&w->dp_comm);
    if (w->pipe_comm != MPI_COMM_NULL) MPI_Comm_free(&w->pipe_comm);
    if (w->bn_comm != MPI_COMM_NULL) MPI_Comm_free(&w->bn_comm);
    free(w->bn_buf);
    free(w);
}
