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
    vdnn_dist_worker *w = ctx;
    vdnn_status rc = w->pipe ? vdnn_pipe_grads_ready(w->pipe, layer, err) : VDNN_OK;
    /* A layer's gradients are final in the last micro-batch's backward pass. */
    if (rc == VDNN_OK && w->dp && net->micro == net->cfg.micro_batches - 1) rc = vdnn_dp_grads_ready(w->dp, layer, err);
    return rc;
}

static vdnn_status hook_forward_done(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err)
{
    vdnn_dist_worker *w = ctx;
    if (w->pipe) vdnn_pipe_progress(w->pipe);
    return VDNN_OK;
}

static vdnn_status hook_before_update(void *ctx, vdnn_net_t *net, vdnn_error *err)
{
    vdnn_dist_worker *w = ctx;
    return w->dp ? vdnn_dp_before_update(w->dp, err) : VDNN_OK;
}

/* Synchronized batch norm: a layer's sums over the ranks holding the same stage. Two check values ride
 * along, key and key^2: their sums are N*key and N*key^2 only if every rank sent the same key, so ranks
 * whose plans diverged (a recompute on one, not another) fail loudly instead of mixing layers' statistics. */
static vdnn_status bn_sum(void *ctx, int key, double *buf, size_t n, vdnn_error *err)
{
    vdnn_dist_worker *w = ctx;
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
    const char *name = w->net && layer < w->net->g->n_layers ? w->net->g->layers[layer].name : "?";
    char what[160];
    snprintf(what, sizeof what, "the batch-norm sums of layer '%.64s' (step %lld)", name,
             w->net ? (long long)w->net->step : 0LL);
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
    const vdnn_net_config *cfg;
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
        vdnn_plan_request rq = {.policy = f->cfg->policy, .training = true, .budget = f->cfg->budget,
                                .host_budget = f->cfg->host_budget, .keep_weight_grads = true};
        /* Planned as the stage net will be: at the micro-batch size, every micro-batch held. */
        const int m = f->cfg->micro_batches > 1 ? f->cfg->micro_batches : 1;
        in.n /= m;
        rq.micro_batches = rq.held_batches = m;
        if (info && vdnn_graph_resolve(sg, in, vdnn_stage_classes(f->g, &s, 0), &e) == VDNN_OK &&
            vdnn_plan_query_ops(sg, f->be, true, info, &e) == VDNN_OK && vdnn_plan_build(sg, info, &rq, &plan, &e) == VDNN_OK)
            ok = plan->feasible && plan->peak_device_bytes <= f->cfg->budget;
    }
    vdnn_plan_free(plan);
    free(info);
    vdnn_graph_free(sg);
    return ok;
}

static vdnn_status choose_split(vdnn_dist_worker *w, vdnn_backend_t *be, const vdnn_dist_config *dc, vdnn_error *err)
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
    fit_ctx f = {g, be, &w->cfg, w->stages};
    if (rc == VDNN_OK)
        rc = vdnn_stage_split_balance(g, cost, w->stages, w->cfg.budget == SIZE_MAX ? NULL : stage_fits, &f, &w->split, err);
    if (rc == VDNN_ERR_BUDGET && err && w->cfg.micro_batches > 1) {
        /* Say what each stage had to hold: the memory check planned every micro-batch at once. */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        rc = vdnn_fail(err, rc, "%.400s (--policy %s, each stage holding %d micro-batches of %d)", msg,
                       vdnn_policy_name(w->cfg.policy), w->cfg.micro_batches, w->cfg.batch / w->cfg.micro_batches);
    }
    free(cost);
    if (p == &est) vdnn_profile_release(&est);
    return rc;
}

/* Stage nets start from the parameters a one-device net of the same seed would have. */
static vdnn_status init_from_full(vdnn_dist_worker *w, vdnn_backend_t *be, const vdnn_net_config *cfg, vdnn_error *err)
{
    vdnn_net_config fc = *cfg;
    /* Small, but batch norm in training mode needs two values per channel even after global pooling. */
    fc.batch = w->cfg.batch < 2 ? w->cfg.batch : 2;
    fc.budget = SIZE_MAX;
    fc.host_budget = SIZE_MAX;
    fc.policy = VDNN_POLICY_NONE;
    fc.hooks = NULL;
    fc.bn_reduce = NULL;
    fc.keep_weight_grads = false;
    fc.profile = NULL;
    fc.micro_batches = 1;
    fc.pipelined = false;
    vdnn_net_t *full = NULL;
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    vdnn_status rc = vdnn_net_create(w->full, be, &fc, &full, err);
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
static vdnn_status open_nccl(vdnn_dist_worker *w, vdnn_backend_t *be, const vdnn_dist_config *dc, MPI_Comm comm,
                             vdnn_nccl **out, vdnn_error *err)
{
    int can = !dc->no_nccl && vdnn_nccl_built() && !strcmp(be->ops->name, "cuda");
    vdnn_status rc = vdnn_comm_allreduce(&w->comm, comm, &can, 1, MPI_INT, MPI_MIN, "the NCCL choice", err);
    if (rc == VDNN_OK && can) rc = vdnn_nccl_create(&w->comm, comm, be, out, err);
    return rc;
}

static vdnn_status split_comms(vdnn_dist_worker *w, vdnn_error *err)
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

vdnn_status vdnn_dist_create(MPI_Comm world, vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_config *cfg,
                             const vdnn_dist_config *dc, vdnn_dist_worker **out, vdnn_error *err)
{
    *out = NULL;
    vdnn_dist_worker *w = calloc(1, sizeof *w);
    if (!w) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    w->dp_comm = w->pipe_comm = w->bn_comm = MPI_COMM_NULL;
    w->full = g;
    w->seed = cfg->seed;
    w->global_batch = cfg->batch;
    vdnn_status rc = vdnn_comm_init(&w->comm, world, dc->timeout_s, err);
    const int n = w->comm.size;
    w->stages = dc->stages > 0 ? dc->stages : 1;
    if (rc == VDNN_OK && (w->stages > VDNN_MAX_STAGES || n % w->stages))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                       "--stages %d: the %d ranks (mpirun -np) must be a multiple of the stage count (at most %d)",
                       w->stages, n, VDNN_MAX_STAGES);
    if (rc == VDNN_OK) {
        w->groups = n / w->stages;
        w->group = w->comm.rank / w->stages;
        w->stage = w->comm.rank % w->stages;
        if (cfg->batch % w->groups)
            rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                           "--batch %d is not a multiple of the %d data-parallel groups (%d ranks / %d stages)",
                           cfg->batch, w->groups, n, w->stages);
    }
    if (rc == VDNN_OK && (w->groups >> SEED_GROUP_BITS || (g->n_layers + VDNN_STAGE_PREFIX) >> SEED_FIRST_BITS))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "distributed runs take fewer than %d groups and %d layers (%d, %d)",
                       1 << SEED_GROUP_BITS, (1 << SEED_FIRST_BITS) - VDNN_STAGE_PREFIX, w->groups, g->n_layers);
    if (rc == VDNN_OK && cfg->seed >> (64 - SEED_SHIFT))
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "--seed %llu: distributed runs take seeds below 2^%d",
                       (unsigned long long)cfg->seed, 64 - SEED_SHIFT);
    /* One group has the whole batch already: nothing to synchronize. */
    w->sync_bn = dc->sync_bn && w->groups > 1 && has_batchnorm(g);
    if (rc == VDNN_OK && w->sync_bn && strcmp(be->ops->name, "cpu"))
        rc = vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                       "--sync-bn: synchronized batch norm runs on the CPU backend only, not on %s (use --no-sync-bn: "
                       "each data-parallel group then normalizes over its own share of the batch)",
                       be->ops->name);
    if (rc == VDNN_OK) rc = split_comms(w, err);
    w->cfg = *cfg;
    w->cfg.batch = cfg->batch / (w->groups ? w->groups : 1);
    const int m = cfg->micro_batches > 1 ? cfg->micro_batches : 1;
    if (rc == VDNN_OK && w->cfg.batch % m)
        rc = vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                       "--micro-batches %d: each data-parallel group's %d images (--batch %d / %d groups) do not split "
                       "into %d micro-batches",
                       m, w->cfg.batch, cfg->batch, w->groups, m);
    w->cfg.micro_batches = m;
    /* Stages run GPipe: all of a step's micro-batches through forward before any goes through backward. Data
     * parallelism alone sums gradients over micro-batches one after another. */
    w->cfg.pipelined = w->stages > 1;
    w->full_cfg = w->cfg;
    w->full_cfg.micro_batches = 1;
    w->full_cfg.pipelined = false;
    w->hooks = (vdnn_grad_hooks){hook_grads_ready, hook_before_update, hook_forward_done};
    if (w->sync_bn) {
        w->bn_reduce = (vdnn_reduce){bn_sum, w};
        w->cfg.bn_reduce = &w->bn_reduce;
    }
    if (w->groups > 1 || w->stages > 1) {
        w->cfg.hooks = &w->hooks;
        w->cfg.hooks_ctx = w;
    }
    vdnn_shape in = {w->cfg.batch, cfg->in_c, cfg->in_h, cfg->in_w};
    if (rc == VDNN_OK) rc = vdnn_graph_resolve(g, in, cfg->classes, err);
    if (rc == VDNN_OK) {
        vdnn_net_t tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.g = g;
        w->model_hash = vdnn_net_model_hash(&tmp);
    }
    if (rc == VDNN_OK && w->stages > 1) {
        rc = choose_split(w, be, dc, err);
        if (rc == VDNN_OK) rc = vdnn_stage_graph(g, &w->split, w->stage, &w->sub, err);
        if (rc == VDNN_OK) {
            vdnn_shape sin = vdnn_stage_input_shape(g, &w->split, w->stage);
            w->cfg.in_c = sin.c;
            w->cfg.in_h = sin.h;
            w->cfg.in_w = sin.w;
            w->cfg.classes = vdnn_stage_classes(g, &w->split, w->stage);
            w->cfg.profile = NULL; /* a profile describes the full graph, not a stage */
        }
    }
    /* Parameters come from the run's seed, the same on every rank (a stage net's from the full graph's);
     * only then does the net's seed take the group and stage in. */
    if (rc == VDNN_OK) rc = vdnn_net_create(w->sub ? w->sub : g, be, &w->cfg, &w->net, err);
    if (rc == VDNN_OK && w->sub) {
        rc = init_from_full(w, be, cfg, err);
        /* init_from_full resolved the full graph at its own batch. */
        if (rc == VDNN_OK) rc = vdnn_graph_resolve(g, in, cfg->classes, err);
    }
    if (rc == VDNN_OK) rc = vdnn_dist_set_seed(w, cfg->seed, err);
    if (rc == VDNN_OK && w->groups > 1) rc = open_nccl(w, be, dc, w->dp_comm, &w->dp_nccl, err);
    if (rc == VDNN_OK && w->groups > 1)
        rc = vdnn_dp_create(&w->comm, w->dp_comm, w->dp_nccl, w->net, dc->bucket_bytes, &w->dp, err);
    if (rc == VDNN_OK && w->stages > 1) rc = open_nccl(w, be, dc, w->pipe_comm, &w->pipe_nccl, err);
    if (rc == VDNN_OK && w->stages > 1)
        rc = vdnn_pipe_create(&w->comm, w->pipe_comm, w->pipe_nccl, w->net, w->stage, w->stages, &w->pipe, err);
    if (rc != VDNN_OK) {
        vdnn_dist_free(w);
        return rc;
    }
    *out = w;
    return VDNN_OK;
}

vdnn_status vdnn_dist_set_seed(vdnn_dist_worker *w, uint64_t seed, vdnn_error *err)
{
    if (seed >> (64 - SEED_SHIFT))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "seed %llu: distributed runs take seeds below 2^%d",
                         (unsigned long long)seed, 64 - SEED_SHIFT);
    w->seed = seed;
    w->full_cfg.seed = seed;
    const bool packed = w->sub || w->groups > 1;
    w->cfg.seed = packed ? pack_seed(seed, w->group, w->sub ? w->split.first[w->stage] : VDNN_STAGE_PREFIX) : seed;
    if (packed) w->cfg.dropout_seed = stage_dropout_seed;
    if (w->net) {
        w->net->cfg.seed = w->cfg.seed;
        w->net->cfg.dropout_seed = w->cfg.dropout_seed ? w->cfg.dropout_seed : vdnn_net_dropout_seed;
    }
    return VDNN_OK;
}

void vdnn_dist_free(vdnn_dist_worker *w)
{
    if (!w) return;
    vdnn_pipe_free(w->pipe);
    vdnn_dp_free(w->dp);
    vdnn_nccl_free(w->dp_nccl);
    vdnn_nccl_free(w->pipe_nccl);
    vdnn_net_free(w->net);
    vdnn_graph_free(w->sub);
    if (w->dp_comm != MPI_COMM_NULL) MPI_Comm_free(&w->dp_comm);
    if (w->pipe_comm != MPI_COMM_NULL) MPI_Comm_free(&w->pipe_comm);
    if (w->bn_comm != MPI_COMM_NULL) MPI_Comm_free(&w->bn_comm);
    free(w->bn_buf);
    free(w);
}
