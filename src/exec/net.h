/* A trainable network: a resolved graph on a backend, its ops, its plans, the device arena and host pool. */
#ifndef VDNN_EXEC_NET_H
#define VDNN_EXEC_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "graph/graph.h"
#include "exec/record.h"
#include "mem/arena.h"
#include "plan/plan.h"
#include "train/checkpoint.h"

/* Seed of a dropout layer's mask at an optimizer step. */
typedef uint64_t (*vdnn_dropout_seed_fn)(uint64_t run_seed, int64_t step, int layer);

/* Calls a distributed runtime makes into the executor's iteration: gradients of a layer are final once its
 * backward step is done (with micro-batches: in the last micro-batch, net->micro says which one runs);
 * parameters are updated only after before_update. forward_done (may be NULL) follows each layer's forward,
 * so a runtime can progress messages in flight while layers compute. */
typedef struct vdnn_grad_hooks {
    vdnn_status (*grads_ready)(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err);
    vdnn_status (*before_update)(void *ctx, vdnn_net_t *net, vdnn_error *err);
    vdnn_status (*forward_done)(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err);
} vdnn_grad_hooks;

typedef struct vdnn_net_config {
    int batch;
    int in_c, in_h, in_w;
    int classes;
    vdnn_policy policy;
    size_t budget;          /* device bytes, SIZE_MAX: the device's free memory / unlimited */
    size_t host_budget;     /* host pool bytes, SIZE_MAX: unlimited */
    bool poison;            /* fill freed and offloaded memory with NaN */
    uint64_t seed;
    float momentum;
    float weight_decay;
    vdnn_dropout_seed_fn dropout_seed; /* NULL: vdnn_net_dropout_seed; tests replay other masks */
    const struct vdnn_profile *profile; /* costs for the profile-guided policies (NULL: estimated) */
    bool keep_weight_grads;             /* keep gradients until a separate update step, readable with
                                           vdnn_net_get (tests); default: update in each layer's backward */
    int algo;                           /* convolution algorithms: 0 the backend's defaults (every policy then
                                           gives bitwise the same results), k > 0 each layer's k-th candidate
                                           (or its last), VDNN_ALGO_LEANEST the smallest workspaces,
                                           VDNN_ALGO_CHOOSE: the dyn and auto planners choose */
    const vdnn_grad_hooks *hooks;       /* set: keep_weight_grads is implied, and the hooks are called */
    const vdnn_reduce *bn_reduce;       /* set: training batch norm takes its statistics over every rank that
                                           calls it (synchronized batch norm); NULL: over this net's batch */
    void *hooks_ctx;
    bool allow_oversubscribe;           /* policy um: allocate the managed pool even when it and the arena need
                                           more than the device has free (refused otherwise: on a shared GPU that
                                           can hang the device) */
    int micro_batches;                  /* M > 1: a step's `batch` images are M micro-batches of batch/M, planned
                                           and run at that size; their gradients are summed (keep_weight_grads
                                           implied) and the update runs once per step */
    bool pipelined;                     /* with M > 1: the device holds every micro-batch between its forward
                                           and backward passes (GPipe: all forwards, then all backwards), planned
                                           as M copies of the blocks live across; otherwise one at a time */
    bool offload_params;                /* weights, biases and momentum homed in the host pool between their uses
                                           (vdnn_plan_request.offload_params); the homes are the authoritative
                                           copy that checkpoints, vdnn_net_get/set and evaluation read */
    bool stream_inputs;                 /* convolutions stream their inputs through host memory where they can
                                           (vdnn_plan_request.stream_inputs) */
} vdnn_net_config;

/* Defaults: momentum 0.9, weight decay 5e-4, policy none, unlimited budgets, seed 1, no micro-batches. */
void vdnn_net_config_default(vdnn_net_config *c);

struct vdnn_net {
    vdnn_graph_t *g;                  /* borrowed; resolved to the config's sizes */
    vdnn_backend_t *be;               /* borrowed */
    vdnn_net_config cfg;
    vdnn_op_info *info_train, *info_eval;
    vdnn_layer_algos *algos_train, *algos_eval; /* each layer's candidate algorithms */
    vdnn_op **ops_train, **ops_eval;  /* ops_eval created on first evaluation */
    vdnn_plan_t *plan_train, *plan_eval;
    void *dev;                        /* the arena's backend block */
    size_t dev_bytes;
    void *host;                       /* the host pool */
    size_t host_bytes;
    void *managed;                    /* policy um: the Unified Memory pool of the swapped storages */
    size_t managed_bytes;
    bool oversubscribed;              /* the managed pool and the arena exceed the device's free memory (allowed
                                         by cfg.allow_oversubscribe); callers may warn */
    vdnn_arena arena;
    vdnn_event **events;              /* plan_train's copy events, then one compute marker */
    int n_events;
    char **ptr;                       /* current device address of each storage of the running plan */
    int64_t step;                     /* optimizer steps done */
    int64_t epoch;
    float *host_scratch;              /* probabilities of one batch */
    vdnn_recorder rec;                /* rec.tl set: iterations record their real timeline there */
    int fetch_storage;                /* storage copied to fetch_dst before its block is freed, or -1 */
    void *fetch_dst;
    /* Micro-batches (micro.c) */
    int micro;                        /* the micro-batch the executor runs (0 without micro-batches) */
    int slot;                         /* its copy of the held blocks and host pool (0 unless several are held) */
    int fwd_done, bwd_done;           /* micro-batches of the current step through forward / backward */
    int32_t *micro_labels;            /* held micro-batches' labels, uploaded again before their backward */
    double micro_loss;                /* sum of the current step's micro-batch losses */
};

/* Resolves g to the configured sizes, plans under the budget (VDNN_ERR_BUDGET, naming the smallest
 * budget that works, if it does not fit), creates ops, allocates the arena and host pool and
 * initialises parameters from the seed. Policy um needs a backend with managed memory (VDNN_ERR_UNSUPPORTED
 * otherwise) and is refused (VDNN_ERR_BUDGET) before anything is allocated when the managed pool and the arena
 * need more than the device has free, unless cfg.allow_oversubscribe. */
vdnn_status vdnn_net_create(vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_config *cfg, vdnn_net_t **out,
                            vdnn_error *err);
void vdnn_net_free(vdnn_net_t *net);

/* One SGD iteration on a batch of cfg.batch images (host memory); with micro-batches, their forward and
 * backward passes one after another (or all forwards first when pipelined), then one update. */
vdnn_status vdnn_net_train_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err);

/* A step in separate calls (micro.c), for pipelines of stages: forward passes of micro-batches 0..M-1 in
 * order (batch/M images each; loss, if not NULL, gets the micro-batch's mean loss), backward passes in
 * the same order, each after its forward (when the net is not pipelined, before the next forward), then
 * one update. Calls out of this order fail with VDNN_ERR_INVALID_ARG; a failed call abandons the step.
 * Without micro-batches (M = 1) the same calls split an iteration. */
vdnn_status vdnn_net_forward(vdnn_net_t *net, int micro, const float *images, const int32_t *labels, float *loss,
                             vdnn_error *err);
vdnn_status vdnn_net_backward(vdnn_net_t *net, int micro, vdnn_error *err);
vdnn_status vdnn_net_update(vdnn_net_t *net, float lr, vdnn_error *err);
/* vdnn_net_train_step's loop over micro-batches: these calls for each, then the update. */
vdnn_status vdnn_net_micro_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err);
/* Images per micro-batch (the batch the graph and plans are made for). */
int vdnn_net_micro_batch(const vdnn_net_t *net);
/* Forward in inference mode on n <= batch images; counts correct predictions and sums the loss. */
vdnn_status vdnn_net_eval_batch(vdnn_net_t *net, const float *images, const int32_t *labels, int n, int *correct,
                                double *loss_sum, vdnn_error *err);

/* Device pointer of a persistent storage by name (parameters, their gradients with keep_weight_grads), or
 * NULL (also for a parameter homed in host memory); *count gets its float count. For distributed runtimes
 * that reduce gradients in place. */
float *vdnn_net_param_ptr(vdnn_net_t *net, const char *name, size_t *count);

/* Parameters and optimizer state as checkpoint tensors (copies to host; caller releases with
 * vdnn_checkpoint_release). */
vdnn_status vdnn_net_export(vdnn_net_t *net, vdnn_checkpoint *ck, vdnn_error *err);
/* Loads parameters, momentum and statistics; fails with VDNN_ERR_MISMATCH on another model. */
vdnn_status vdnn_net_import(vdnn_net_t *net, const vdnn_checkpoint *ck, const char *path, vdnn_error *err);
/* Reads or writes one named parameter-like storage ("conv1.weight", "bn1.stats", ...). */
vdnn_status vdnn_net_get(vdnn_net_t *net, const char *name, float *host, size_t count, vdnn_error *err);
vdnn_status vdnn_net_set(vdnn_net_t *net, const char *name, const float *host, size_t count, vdnn_error *err);
/* Hash of the model's structure (layer names, kinds, parameters, shapes without batch). */
uint64_t vdnn_net_model_hash(const vdnn_net_t *net);

/* The default dropout seed: a hash of the run's seed, the step and the layer. */
uint64_t vdnn_net_dropout_seed(uint64_t run_seed, int64_t step, int layer);

/* Runs a plan's actions (exec.c): all of them, or steps [first, last) in the held copy net->slot. A failure
 * ends every non-persistent block. */
vdnn_status vdnn_exec_iteration(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const float *images,
                                const int32_t *labels, float lr, vdnn_error *err);
vdnn_status vdnn_exec_steps(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, int first, int last,
                            const float *images, const int32_t *labels, float lr, vdnn_error *err);
/* The arena id of a block in the current slot. */
int vdnn_exec_block_id(const vdnn_net_t *net, const vdnn_plan_t *plan, int block);

#endif
