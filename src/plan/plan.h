/* The memory plan of one iteration: storages, their class (keep/swap), device blocks with fixed offsets, and the action list the executor replays. */
#ifndef VDNN_PLAN_H
#define VDNN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"
#include "graph/graph.h"
#include "vdnn/memory.h"
#include "vdnn/plan.h"


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

const char *vdnn_class_name(vdnn_tensor_class c);

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
    /* Chosen by the policy: */
    int prefetch_step;         /* swap: step whose start issues the copy back */
    int recompute_step;        /* recompute: step whose start recomputes it (-1: its first backward use) */
    /* Derived by vdnn_plan_finalize (recomputing a tensor reads its producer's inputs): */
    int need_step;             /* first backward-time step that needs it back on the device */
    int end_step;              /* last step it must stay on the device */
    size_t host_offset;        /* swap: place in the host pool (policy um: in the managed pool); homed: its home */
    bool candidate;            /* a feature map that may be swapped or recomputed */
    /* Parameters homed in host memory (plan option offload_params): weights, biases and their momentum live
     * at host_offset between their uses, the authoritative copy. They come to the device for the forward step
     * home_fwd (from home_fwd - 1, not copied back) and for the backward steps need_step..end_step (from
     * prefetch_step, copied back after end_step's update; prefetch_step -1: one block from home_fwd - 1 on).
     * In a plan with update steps (clipping) backward only reads them: end_step is the layer's update step, and
     * where that is not the step after the backward block's end, upd_prefetch (its step before) brings them in
     * again, into a block of their own. Momentum is read by the update alone: its one block is need_step's. The
     * weight and bias gradients are homed as well there: written by the backward step need_step, copied home after
     * it, fetched again by upd_prefetch and spent by the update (end_step), never copied home from it. */
    bool homed;
    int home_fwd;              /* the forward step reading it (-1: none, momentum) */
    int upd_prefetch;          /* update steps: the step issuing the copy in for the update (-1: none) */
    /* A streamed convolution input (plan option stream_inputs): the input's value, saved to host_offset chunk
     * by chunk while the convolution writes its output over it (def_step), read back chunk by chunk into the
     * layer's buffers by its backward step (last_use). Never a device block; events first_event.. one per chunk. */
    bool streamed;
    int first_event;
} vdnn_storage;

/* A storage resident on the device from the start of step `begin` to the end of step `end`. */
typedef struct vdnn_block {
    int storage;
    size_t bytes;
    size_t offset;
    int begin, end;
    bool held;       /* live from forward into backward in a plan holding several micro-batches: micro-batch j's
                        copy is at offset + j * held_stride */
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
    VDNN_ACT_RECOMPUTE  /* a = layer, b = scratch storage or -1: run its forward again, statistics
                           not updated, into its storages' current blocks */
} vdnn_action_kind;

typedef struct vdnn_action {
    vdnn_action_kind kind;
    int a, b;
    int event;
} vdnn_action;

/* The algorithms a layer's op offers (from the backend's op_algos). */
typedef struct vdnn_layer_algos {
    int n;
    vdnn_op_algo a[VDNN_MAX_ALGOS];
} vdnn_layer_algos;

/* Per layer: which storage holds what. -1 where the layer has none. */
typedef struct vdnn_layer_storage {
    int out, aux, grad;
    int w, b, stats, dw, db, vw, vb;
    int vw2, vb2;    /* AdamW (memory.optimizer_moments 2): the second moments; vw, vb hold the first */
    int dwm, dbm;    /* with micro-batches: where a later micro-batch's gradients go before they are added to dw, db */
    int dwt, dbt;    /* shared parameters (graph.h's tie), on their owner: the sum of the readers' parts of the weight's
                        (bias's) gradient, a temporary that the last reader's backward writes (its dw, db) and every
                        other reader's adds its part to (from its own dw, db), added to the owner's own gradient
                        after its backward; -1 if none */
    int xs, xb;      /* a streamed input: its host copy (vdnn_storage.streamed), and the two chunk buffers its
                        backward step reads it through (training plans) */
    bool in_place;   /* stream_inputs: the layer's op writes its output over its input a chunk at a time */
    int upd;         /* the step updating this layer's parameters where that is an update step of its own (update
                        steps, or shared_steps' owners); -1: none (fused into its backward step, or the one update) */
} vdnn_layer_storage;

/* Asks vdnn_plan_build to check its plan with vdnn_plan_validate (plan_validate.h), and counts what was checked
 * (tests, debugging). Without it a request's plan is validated only under memory.poison. */
typedef struct vdnn_plan_checks {
    bool candidates;                   /* also every classification a planner (or vdnn_plan_min_budget) places
                                          on the way, not only the plan it keeps */
    long plans;                        /* plans built and validated */
    long placements;                   /* such placed classifications validated */
} vdnn_plan_checks;

typedef struct vdnn_plan_request {
    vdnn_memory_options memory;        /* policy, budgets, conv_algo, offload_params, stream_inputs, micro_batches
                                          and pipelined plan; the others ride along. micro_batches > 1: a step sums
                                          the weight gradients of that many micro-batches (the graph's batch),
                                          which implies keep_weight_grads; pipelined: the device holds every one
                                          between its forward and backward passes (a GPipe stage). offload_params
                                          and stream_inputs: see vdnn_storage; policy auto turns each on by itself
                                          where nothing fits without it (offload_params also where it is faster) */
    bool training;                     /* false: forward only (evaluation) */
    size_t variable_base;              /* non-persistent blocks start at or above this offset, so an
                                          evaluation plan never touches a training plan's state */
    const struct vdnn_profile *profile;/* costs for the profile-guided policies (NULL: the default estimate) */
    bool keep_weight_grads;            /* weight gradients persist until a separate update step (for
                                          tests that read them); otherwise each layer's parameters are
                                          updated right after its backward and its gradients are transient */
    bool fuse_shared;                  /* shared parameters updated in their owner's backward step even under
                                          offload_params (no shared_steps): the schedule vdnn_plan_build compares */
    const vdnn_layer_algos *algos;     /* per layer, from vdnn_plan_query_algos (NULL: the default only) */
    vdnn_plan_checks *checks;          /* borrowed while vdnn_plan_build runs (NULL: validated only under
                                          memory.poison); the plan it returns holds NULL */
} vdnn_plan_request;

/* A training request with the default memory options; every request starts from it. */
vdnn_plan_request vdnn_plan_request_default(void);

/* Held micro-batches of a request: all of them when pipelined, else one. */
static inline int vdnn_plan_request_held(const vdnn_plan_request *r)
{
    return r->training && r->memory.pipelined && r->memory.micro_batches > 1 ? r->memory.micro_batches : 1;
}

struct vdnn_plan {
    vdnn_policy policy;
    bool training;
    bool fused_update;                 /* parameters updated in their layer's backward step */
    bool update_steps;                 /* memory.clip_grads: after backward, one update step per layer with parameters,
                                          in layer order (vdnn_layer_storage.upd); each layer's gradients live
                                          from its backward step (which sums their squares) to its update step;
                                          the first update step (update_begin) finds the global norm */
    bool shared_steps;                 /* a fused plan under offload_params (unless req.fuse_shared): the owners of
                                          shared parameters (graph.h's tie) update them in update steps of their own
                                          after backward (in layer order, then the empty one), not in their backward
                                          step, where their moments would come in beside that step's working set;
                                          vdnn_plan_build keeps such a plan where its peak is the lower */
    int update_begin;                  /* training: the first update step */
    bool offload_params;               /* parameters and momentum homed in the host pool (see vdnn_storage) */
    bool stream_inputs;                /* convolutions that can run in place over a streamed input do */
    const vdnn_graph_t *g;             /* borrowed: the graph must outlive the plan */
    struct vdnn_plan_request req;      /* as asked for; req.algos is borrowed: valid while vdnn_plan_build runs
                                          (auto analyzes again), later p->cands holds them */
    vdnn_op_info *req_info;            /* the caller's op info, copied */
    int n_layers;
    vdnn_op_info *info;                /* per layer (index 0 unused), under its chosen algorithm */
    int *algo;                         /* per layer: the chosen candidate of cands */
    vdnn_layer_algos *cands;           /* per layer: the candidates (n = 1: the caller's info only) */
    bool choose_algos;                 /* planners may change algo */
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
    int n_storages_analyzed;           /* storages before finalize added recompute workspaces */
    int micro_batches;                 /* gradients are summed over this many micro-batches per step (1: none) */
    int held_batches;                  /* micro-batches whose saved activations are held at once (1: one) */
    int bwd_begin;                     /* the first backward step (training): a forward pass is the steps before */
    size_t held_stride;                /* bytes between micro-batches' copies of the held blocks */
    size_t host_stride;                /* the same in the host pool (every swapped tensor is held) */
    /* Figures (with held_batches > 1, peak_device_bytes and host_bytes count every micro-batch's copy; the
     * others describe one micro-batch's iteration) */
    size_t persistent_bytes;
    size_t peak_device_bytes;          /* the arena's high-water mark: live bytes plus fragmentation */
    size_t max_live_bytes;             /* the largest total of blocks live in one step */
    size_t avg_device_bytes;           /* averaged over steps */
    size_t host_bytes;                 /* the pinned host pool (the parameters' homes, then the swapped maps) */
    size_t home_bytes;                 /* offload_params: the homes, from offset 0 of the host pool in storage
                                          order, so a training plan and its evaluation plan share them */
    size_t managed_bytes;              /* policy um: the Unified Memory pool, each swapped storage at its own range */
    size_t bytes_moved;                /* per iteration, both directions */
    bool feasible;                     /* within req.memory.budget and req.memory.host_budget */
    bool placed;                       /* blocks have offsets (finalized with place_blocks): the executor may run it */
    vdnn_graph_t *own_g;               /* made by the public vdnn_plan_create: the resolved copy of the model that g
                                          points at (NULL otherwise) */
    struct vdnn_plan_figures *figures; /* vdnn_plan_summarize's cache, filled when first asked (not thread-safe) */
};

/* Builds a plan for a resolved graph. `info` holds each layer's op info (from the backend's
 * op_query; index 0 ignored). Never fails for a too small budget: `feasible` says. */
vdnn_status vdnn_plan_build(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                            vdnn_plan_t **out, vdnn_error *err);
void vdnn_plan_free(vdnn_plan_t *p);

/* The training plan of a resolved graph (one micro-batch's sizes) under memory options, with the costs of prof
 * (NULL: the default estimate): the one request that vdnn_plan_create (`vdnn plan`) and a net's creation
 * (`vdnn train`) both make, so that they make the same plan. */
vdnn_status vdnn_plan_training(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_layer_algos *algos,
                               const vdnn_memory_options *memory, const struct vdnn_profile *prof,
                               bool keep_weight_grads, vdnn_plan_t **out, vdnn_error *err);

/* The two halves of vdnn_plan_build, for planners that try many classifications:
 * analyze finds storages and liveness with every storage kept; finalize turns the current
 * classes (cls, prefetch_step, recompute_step of each storage) into blocks, offsets, actions
 * and figures. finalize may be called again after changing classes. */
vdnn_status vdnn_plan_analyze(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                              vdnn_plan_t **out, vdnn_error *err);
vdnn_status vdnn_plan_finalize(vdnn_plan_t *p, vdnn_error *err);
/* With place_blocks false, offsets are not assigned (no executor may run it): peak_device_bytes is
 * then the largest live total, a lower bound, and host_bytes the sum of swapped bytes. */
vdnn_status vdnn_plan_finalize_ex(vdnn_plan_t *p, bool place_blocks, vdnn_error *err);
/* Places a finalized, placed plan's blocks again with the thorough search (mem/offsets.h): its peak only goes down.
 * vdnn_plan_build does it to the plan it returns. */
vdnn_status vdnn_plan_place_tight(vdnn_plan_t *p, vdnn_error *err);

/* Queries the backend for every layer's op info (info[0] zeroed). */
vdnn_status vdnn_plan_query_ops(const vdnn_graph_t *g, vdnn_backend_t *be, bool training, vdnn_op_info *info,
                                vdnn_error *err);

/* Queries every layer's candidate algorithms (algos[0] zeroed), and, unless info is NULL, fills info as
 * vdnn_plan_query_ops does (each default candidate's). */
vdnn_status vdnn_plan_query_algos(const vdnn_graph_t *g, vdnn_backend_t *be, bool training, vdnn_layer_algos *algos,
                                  vdnn_op_info *info, vdnn_error *err);

/* Whether a request may home its parameters in host memory; if not, *why names the conflicting option. */
bool vdnn_plan_offload_supported(const vdnn_plan_request *req, const char **why);
/* Whether a request may stream convolution inputs; if not, *why names the conflicting option. */
bool vdnn_plan_stream_supported(const vdnn_plan_request *req, const char **why);
/* The layers of an analyzed plan that stream their input. */
int vdnn_plan_streamed_layers(const vdnn_plan_t *p);
/* How layer l's streamed input is cut: images per chunk (the last chunk may hold fewer) and the number of
 * chunks, under the layer's chosen algorithm. */
int vdnn_plan_stream_chunk(const vdnn_plan_t *p, int l, int *n_chunks);
/* Images in chunk c of a batch of n images cut into chunks of k. */
static inline int vdnn_chunk_images(int n, int k, int c) { return n - c * k < k ? n - c * k : k; }
/* Turns offload_params on or off in an analyzed plan (planners comparing both); finalize again afterwards. */
void vdnn_plan_set_offload_params(vdnn_plan_t *p, bool on);
/* Whether homing the parameters would give an analyzed plan other steps (shared_steps: a fused plan of a graph with
 * shared parameters), so that a planner comparing both must analyze the homed plan afresh. */
bool vdnn_plan_offload_changes_steps(const vdnn_plan_t *p);

/* Switches layer l of an analyzed plan to its candidate k (its workspaces change size); finalize again
 * afterwards. */
void vdnn_plan_set_algo(vdnn_plan_t *p, int l, int k);
/* The candidate of layer l whose workspace (the larger of forward and backward) is smallest. */
int vdnn_plan_leanest_algo(const vdnn_plan_t *p, int l);
/* The fewest and most workspace bytes among layer l's candidates, forward (fwd) or backward. */
void vdnn_plan_ws_range(const vdnn_plan_t *p, int l, bool fwd, size_t *least, size_t *most);
/* Whether any layer uses a candidate whose results differ from its default's. */
bool vdnn_plan_algos_change_numerics(const vdnn_plan_t *p);

/* Device bytes live during each step (array of n_steps), for tables and plots. */
void vdnn_plan_live_bytes(const vdnn_plan_t *p, size_t *live);

/* The summary's cache of a plan (api/plan_summary.c). */
struct vdnn_plan_figures *vdnn_plan_figures_new(void);
void vdnn_plan_figures_free(struct vdnn_plan_figures *f);

/* The storages the table, the JSON and vdnn_plan_tensor list: feature maps, state and homed parameters. */
int vdnn_plan_listed_count(const vdnn_plan_t *p);

/* Writes the per-storage table or one JSON object. */
void vdnn_plan_print_table(const vdnn_plan_t *p, const vdnn_graph_t *g, FILE *f);
void vdnn_plan_print_json(const vdnn_plan_t *p, const vdnn_graph_t *g, size_t min_budget, FILE *f);

#endif
