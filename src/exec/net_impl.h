/* The net's fields: for the executor, the net itself and the public API's accessors. Everything else (training
 * loops, checkpoints, distributed runtimes) goes through exec/net.h's functions. */
#ifndef VDNN_EXEC_NET_IMPL_H
#define VDNN_EXEC_NET_IMPL_H

#include "exec/loss_scale.h"
#include "exec/net.h"

struct vdnn_net {
    vdnn_graph_t *g;                  /* the net's own copy of the model, resolved to one micro-batch's sizes */
    vdnn_backend_t *be;               /* borrowed */
    vdnn_net_options opt;             /* as given; memory.micro_batches and .pipelined normalised */
    vdnn_net_extras x;
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
                                         by memory.allow_oversubscribe); callers may warn */
    vdnn_arena arena;
    vdnn_event **events;              /* plan_train's copy events, then one compute marker */
    int n_events;
    char **ptr;                       /* current device address of each storage of the running plan */
    int64_t step;                     /* optimizer steps done */
    int64_t epoch;
    float *host_scratch;              /* probabilities of one batch */
    void *host_images;                /* 16-bit nets: the batch's images rounded to the maps' type on the host, so
                                         the upload moves half the bytes and needs no fp32 copy on the device */
    vdnn_recorder rec;                /* rec.tl set: iterations record their real timeline there */
    int fetch_storage;                /* storage copied to fetch_dst before its block is freed, or -1 */
    void *fetch_dst;
    /* Micro-batches (micro.c) */
    int micro;                        /* the micro-batch the executor runs (0 without micro-batches) */
    int slot;                         /* its copy of the held blocks and host pool (0 unless several are held) */
    int fwd_done, bwd_done;           /* micro-batches of the current step through forward / backward */
    int32_t *micro_labels;            /* held micro-batches' labels, uploaded again before their backward */
    double micro_loss;                /* sum of the current step's micro-batch losses */
    double last_step_s;               /* wall time of the last training step */
    vdnn_precision ckpt_precision;    /* of the last checkpoint loaded; the net's own until one is */
    bool loss_scaling;                /* dynamic loss scaling (opt.loss_scale): gradients checked before updates */
    vdnn_loss_scaler scaler;
    double *clip_parts;               /* clip_grad_norm: squared gradient sums, per layer, then in order (exec.c) */
    double clip_k;                    /* the step's clip factor (applied where below 1) */
};

/* Where a backward op writes a parameter gradient in the running micro-batch: the sum's storage `sum` in the first,
 * the transient `aside` (dwm, dbm) in later ones where the plan has it; sum_micro then adds it. */
static inline int vdnn_net_micro_grad_storage(const vdnn_net_t *net, const vdnn_plan_t *p, int sum, int aside)
{
    return p->micro_batches > 1 && net->micro > 0 && aside >= 0 ? aside : sum;
}

/* Shared by the net's files: plans' pointers, ops, parameters' first values. */
void vdnn_net_bind_plan(vdnn_net_t *net, const vdnn_plan_t *plan);
vdnn_status vdnn_net_create_ops(vdnn_net_t *net, bool training, vdnn_op ***out, vdnn_error *err);
void vdnn_net_destroy_ops(vdnn_net_t *net, vdnn_op **ops);
vdnn_status vdnn_net_init_params(vdnn_net_t *net, vdnn_error *err);
/* Loss scaling before an update (net_loss_scale.c): checks every parameter gradient of `plan`; when all are finite,
 * multiplies them by 1/scale and sets *apply; otherwise leaves them, counts the step as skipped. The scale then
 * changes as the scaler's rule says. */
vdnn_status vdnn_net_loss_scale_check(vdnn_net_t *net, const vdnn_plan_t *plan, bool *apply, vdnn_error *err);

#endif
