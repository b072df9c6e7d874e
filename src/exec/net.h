/* A trainable network as the code around the executor sees it (training loops, checkpoints, distributed
 * runtimes): declared functions only. Its fields are in exec/net_impl.h, for the executor and the net itself. */
#ifndef VDNN_EXEC_NET_H
#define VDNN_EXEC_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "graph/graph.h"
#include "exec/record.h"
#include "mem/arena.h"
#include "plan/plan.h"
#include "vdnn/net.h"

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
    /* Gradient clipping (may be NULL: *sum is the parts' sum in order): parts[0..n-1] are this net's squared
     * gradient sums per parameter tensor (each layer's weight, then bias, in layer order); *sum gets the squared
     * global norm, e.g. the parts of every pipeline stage summed in the whole model's layer order. */
    vdnn_status (*norm_sum)(void *ctx, vdnn_net_t *net, const double *parts, int n, double *sum, vdnn_error *err);
    /* backward_done (may be NULL) follows each layer's backward op, before its gradients join the micro-batches'
     * sum: the current micro-batch's own gradients are then where vdnn_net_micro_weight_grad says. */
    vdnn_status (*backward_done)(void *ctx, vdnn_net_t *net, int layer, vdnn_error *err);
} vdnn_grad_hooks;

/* What a distributed runtime or a test sets beyond the public vdnn_net_options. */
typedef struct vdnn_net_extras {
    vdnn_dropout_seed_fn dropout_seed;  /* NULL: vdnn_net_dropout_seed; tests replay other masks */
    bool keep_weight_grads;             /* keep gradients until a separate update step, readable with
                                           vdnn_net_get (tests); default: update in each layer's backward */
    const vdnn_grad_hooks *hooks;       /* set: keep_weight_grads is implied, and the hooks are called */
    void *hooks_ctx;
    const vdnn_reduce *bn_reduce;       /* set: training batch norm takes its statistics over every rank that
                                           calls it (synchronized batch norm); NULL: over this net's batch */
} vdnn_net_extras;

/* vdnn_net_create with the extras (x may be NULL). The net resolves its own copy of g to the options' sizes,
 * plans under the budget (VDNN_ERR_BUDGET, naming the smallest budget that works, if it does not fit), creates
 * ops, allocates the arena and host pool and initialises parameters from the seed. Policy um needs a backend
 * with managed memory (VDNN_ERR_UNSUPPORTED otherwise) and is refused (VDNN_ERR_BUDGET) before anything is
 * allocated when the managed pool and the arena need more than the device has free, unless
 * memory.allow_oversubscribe. A step with micro-batches runs their forward and backward passes one after another
 * (or all forwards first when pipelined), then one update. */
vdnn_status vdnn_net_create_ex(const vdnn_graph_t *g, vdnn_backend_t *be, const vdnn_net_options *o,
                               const vdnn_net_extras *x, vdnn_net_t **out, vdnn_error *err);

/* A step in separate calls (micro.c), for pipelines of stages: forward passes of micro-batches 0..M-1 in
 * order (batch/M images each; loss, if not NULL, gets the micro-batch's mean loss), backward passes in
 * the same order, each after its forward (when the net is not pipelined, before the next forward), then
 * one update. Calls out of this order fail with VDNN_ERR_INVALID_ARG; a failed call abandons the step.
 * Without micro-batches (M = 1) the same calls split an iteration. */
vdnn_status vdnn_net_micro_forward(vdnn_net_t *net, int micro, const float *images, const int32_t *labels,
                                   float *loss, vdnn_error *err);
vdnn_status vdnn_net_backward(vdnn_net_t *net, int micro, vdnn_error *err);
vdnn_status vdnn_net_update(vdnn_net_t *net, float lr, vdnn_error *err);
/* vdnn_net_train_step's loop over micro-batches: these calls for each, then the update. */
vdnn_status vdnn_net_micro_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err);
/* Images per micro-batch (the batch the graph and plans are made for). */
int vdnn_net_micro_batch(const vdnn_net_t *net);
/* Device pointer of a persistent storage by name (parameters, their gradients with keep_weight_grads), or
 * NULL (also for a parameter homed in host memory); *count gets its float count. For distributed runtimes
 * that reduce gradients in place. */
float *vdnn_net_param_ptr(vdnn_net_t *net, const char *name, size_t *count);

/* Hash of the model's structure (layer names, kinds, parameters, shapes without batch). */
uint64_t vdnn_net_model_hash(const vdnn_net_t *net);

/* The default dropout seed: a hash of the run's seed, the step and the layer. */
uint64_t vdnn_net_dropout_seed(uint64_t run_seed, int64_t step, int layer);

/* What the code around the executor reads and sets instead of the net's fields. */
const vdnn_graph_t *vdnn_net_graph(const vdnn_net_t *net);
vdnn_backend_t *vdnn_net_backend(const vdnn_net_t *net);
const vdnn_net_options *vdnn_net_options_of(const vdnn_net_t *net);
const vdnn_net_extras *vdnn_net_extras_of(const vdnn_net_t *net);
int64_t vdnn_net_step(const vdnn_net_t *net);
/* Where a checkpoint or a training loop puts the run: optimizer steps done and epochs completed. */
void vdnn_net_set_position(vdnn_net_t *net, int64_t step, int64_t epoch);
/* The precision of the checkpoint just loaded, for vdnn_net_stats. */
void vdnn_net_set_checkpoint_precision(vdnn_net_t *net, vdnn_precision p);
/* Replaces the run's seed and the dropout seed function (NULL: vdnn_net_dropout_seed). */
void vdnn_net_set_seed(vdnn_net_t *net, uint64_t seed, vdnn_dropout_seed_fn dropout_seed);
/* Records the coming iterations' real timeline into tl (NULL: stop). */
void vdnn_net_record(vdnn_net_t *net, struct vdnn_timeline *tl);
/* The micro-batch the executor runs (0 without micro-batches). */
int vdnn_net_current_micro(const vdnn_net_t *net);
/* Device address of layer l's weight gradient of the running micro-batch, as its backward op wrote it (the
 * micro-batch's own part, before it joins the sum), and its count; NULL where the layer has none or it is not on
 * the device now. */
float *vdnn_net_micro_weight_grad(const vdnn_net_t *net, int l, size_t *count);
/* Current device address of a storage of the running plan (NULL: not on the device now). */
float *vdnn_exec_storage_ptr(const vdnn_net_t *net, int storage);
/* Has the executor copy `storage` to host dst just before it frees the storage's block in the iterations to
 * come (storage -1: no more). */
void vdnn_exec_fetch(vdnn_net_t *net, int storage, float *dst);

/* Runs a plan's actions (exec.c): all of them, or steps [first, last) in the held copy net->slot. A failure
 * ends every non-persistent block. */
vdnn_status vdnn_exec_iteration(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, const float *images,
                                const int32_t *labels, float lr, vdnn_error *err);
vdnn_status vdnn_exec_steps(vdnn_net_t *net, const vdnn_plan_t *plan, vdnn_op **ops, int first, int last,
                            const float *images, const int32_t *labels, float lr, vdnn_error *err);
/* The arena id of a block in the current slot. */
int vdnn_exec_block_id(const vdnn_net_t *net, const vdnn_plan_t *plan, int block);

#endif
