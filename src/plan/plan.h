/* The memory plan of one iteration: storages, their class (keep/swap), device blocks with fixed offsets, and the action list the executor replays. */
#ifndef VDNN_PLAN_H
#define VDNN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"
#include "graph/graph.h"

typedef enum vdnn_policy {
    VDNN_POLICY_NONE = 0, /* in-core, with liveness reuse */
    VDNN_POLICY_ALL,      /* vDNN_all: offload every feature map needed by backward */
    VDNN_POLICY_CONV,     /* vDNN_conv: offload only the inputs of convolutions */
    VDNN_POLICY_COUNT
} vdnn_policy;

const char *vdnn_policy_name(vdnn_policy p);
bool vdnn_policy_parse(const char *s, vdnn_policy *out);

typedef enum vdnn_storage_kind {
    VDNN_ST_WEIGHT,   /* conv/fc weights, BN gamma */
    VDNN_ST_BIAS,     /* conv/fc bias, BN beta */
    VDNN_ST_STATS,    /* BN running mean + var */
    VDNN_ST_WGRAD,    /* weight gradient */
    VDNN_ST_BGRAD,    /* bias gradient */
    VDNN_ST_WMOM,     /* momentum of weights */
    VDNN_ST_BMOM,     /* momentum of bias */
    VDNN_ST_LABELS,
    VDNN_ST_LOSS,
    VDNN_ST_FMAP,     /* a feature map (several in-place layers may share one) */
    VDNN_ST_AUX,      /* state a layer's forward leaves for its backward */
    VDNN_ST_GRAD,     /* gradient map of a layer's output */
    VDNN_ST_TEMP,     /* a gradient to be accumulated into a GRAD */
    VDNN_ST_WS,       /* scratch of one op call */
    VDNN_ST_KIND_COUNT
} vdnn_storage_kind;

const char *vdnn_storage_kind_name(vdnn_storage_kind k);

typedef enum vdnn_tensor_class { VDNN_CLASS_KEEP = 0, VDNN_CLASS_SWAP } vdnn_tensor_class;

typedef struct vdnn_storage {
    char name[96];
    vdnn_storage_kind kind;
    int layer;                 /* owning layer */
    size_t bytes;
    bool persistent;           /* lives across iterations at a fixed offset */
    vdnn_tensor_class cls;
    int def_step;              /* step that first writes it */
    int last_fwd_use;          /* last forward step touching it (-1: none) */
    int first_bwd_use;         /* first backward step reading it (-1: none) */
    int last_use;
    int prefetch_step;         /* swap: step whose start issues the copy back */
    size_t host_offset;        /* swap: place in the host pool */
} vdnn_storage;

/* A storage resident on the device from the start of step `begin` to the end of step `end`. */
typedef struct vdnn_block {
    int storage;
    size_t bytes;
    size_t offset;
    int begin, end;
} vdnn_block;

typedef enum vdnn_step_kind { VDNN_STEP_LOAD, VDNN_STEP_FWD, VDNN_STEP_BWD, VDNN_STEP_UPDATE } vdnn_step_kind;

typedef struct vdnn_step {
    vdnn_step_kind kind;
    int layer;                         /* FWD/BWD */
    int ws;                            /* scratch storage or -1 */
    int dx[VDNN_MAX_INPUTS];           /* BWD: storage receiving each input's gradient, -1: not wanted */
    int first_action, n_actions;
} vdnn_step;

typedef enum vdnn_action_kind {
    VDNN_ACT_ALLOC,     /* a = block */
    VDNN_ACT_FREE,      /* a = block */
    VDNN_ACT_OFFLOAD,   /* a = storage, event = copy-done event */
    VDNN_ACT_PREFETCH,  /* a = storage, event = copy-done event */
    VDNN_ACT_WAIT,      /* event: compute waits for a copy */
    VDNN_ACT_COMPUTE,   /* the step's own work (load / forward / backward / update) */
    VDNN_ACT_ACCUM,     /* a += b (storages) */
    VDNN_ACT_RECOMPUTE  /* a = layer: run its forward again (statistics not updated) into its blocks */
} vdnn_action_kind;

typedef struct vdnn_action {
    vdnn_action_kind kind;
    int a, b;
    int event;
} vdnn_action;

/* Per layer: which storage holds what. -1 where the layer has none. */
typedef struct vdnn_layer_storage {
    int out, aux, grad;
    int w, b, stats, dw, db, vw, vb;
} vdnn_layer_storage;

struct vdnn_plan {
    vdnn_policy policy;
    bool training;
    int n_layers;
    vdnn_op_info *info;                /* per layer (index 0 unused) */
    vdnn_layer_storage *ls;
    int labels, loss;                  /* storages */
    int n_storages, cap_storages;
    vdnn_storage *st;
    int n_blocks, cap_blocks;
    vdnn_block *blocks;
    int n_steps;
    vdnn_step *steps;
    int n_actions, cap_actions;
    vdnn_action *actions;
    int n_events;
    /* Figures */
    size_t persistent_bytes;
    size_t peak_device_bytes;
    size_t avg_device_bytes;           /* averaged over steps */
    size_t host_bytes;
    size_t bytes_moved;                /* per iteration, both directions */
    size_t budget, host_budget;        /* SIZE_MAX: unlimited */
    bool feasible;
};

typedef struct vdnn_plan_request {
    vdnn_policy policy;
    bool training;                     /* false: forward only (evaluation) */
    size_t budget;                     /* device bytes; SIZE_MAX unlimited */
    size_t host_budget;
    size_t variable_base;              /* non-persistent blocks start at or above this offset, so an
                                          evaluation plan never touches a training plan's state */
} vdnn_plan_request;

/* Builds a plan for a resolved graph. `info` holds each layer's op info (from the backend's
 * op_query; index 0 ignored). Never fails for a too small budget: `feasible` says. */
vdnn_status vdnn_plan_build(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                            vdnn_plan_t **out, vdnn_error *err);
void vdnn_plan_free(vdnn_plan_t *p);

/* Queries the backend for every layer's op info (info[0] zeroed). */
vdnn_status vdnn_plan_query_ops(const vdnn_graph_t *g, vdnn_backend_t *be, bool training, vdnn_op_info *info,
                                vdnn_error *err);

/* Device bytes live during each step (array of n_steps), for tables and plots. */
void vdnn_plan_live_bytes(const vdnn_plan_t *p, size_t *live);

/* Writes the per-storage table or one JSON object. */
void vdnn_plan_print_table(const vdnn_plan_t *p, const vdnn_graph_t *g, FILE *f);
void vdnn_plan_print_json(const vdnn_plan_t *p, const vdnn_graph_t *g, size_t min_budget, FILE *f);

#endif
