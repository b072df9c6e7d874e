/* Plans, profiles and simulation: which feature maps are kept, swapped or recomputed in one training
 * iteration and what that costs, made before training (no device, no data needed). */
#ifndef VDNN_PLAN_PUBLIC_H
#define VDNN_PLAN_PUBLIC_H

#include "vdnn/backend.h"
#include "vdnn/base.h"
#include "vdnn/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- profiles: the costs planners and the simulator see a device through ---- */

/* A roofline estimate: every op takes max(flops / flops_per_s, bytes / mem_bytes_per_s), copies run at the
 * link bandwidth per direction with 10 us latency. Plans made without a profile use the default estimate
 * (a generic GPU on a PCIe gen3 link, the papers' setting); these are its numbers. */
#define VDNN_ESTIMATE_FLOPS_PER_S 1e13
#define VDNN_ESTIMATE_MEM_BYTES_PER_S 5e11
#define VDNN_ESTIMATE_LINK_BYTES_PER_S 16e9

/* Estimates for the model at batch input.n, that input and class count (0: the model's default). */
VDNN_API vdnn_status vdnn_profile_estimate_model(const vdnn_model_t *m, vdnn_shape input, int classes,
                                                 double flops_per_s, double mem_bytes_per_s, double link_d2h_bytes_per_s,
                                                 double link_h2d_bytes_per_s, vdnn_profile_t **out, vdnn_error *err);
/* Reads a profile written by vdnn_profile_save (or `vdnn profile`), checked against the model at that batch,
 * input and class count: VDNN_ERR_MISMATCH names what differs. Files of format version 1 (no op info) read; a
 * newer version, or a malformed or truncated file, is VDNN_ERR_FORMAT naming file, line and column (the format:
 * docs/profiles.md). */
VDNN_API vdnn_status vdnn_profile_load(const char *path, const vdnn_model_t *m, vdnn_shape input, int classes,
                                       vdnn_profile_t **out, vdnn_error *err);
/* Measures the model on a backend: `iterations` recorded training steps of random data with learning rate 0
 * under net options' memory options (batch input.n), every convolution algorithm, and the copy link alone and
 * while layers compute. *link_busy_measured (may be NULL) says whether the last part could be measured. The profile
 * also records what plans need of the device besides times: the device's description and settings
 * (vdnn_backend_describe) and every layer's training op candidates (state, workspaces, what backward reads), so
 * that plans made from it with no backend (vdnn_plan_create) are the plans a run on that device makes. */
VDNN_API vdnn_status vdnn_profile_measure_model(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input,
                                                int classes, const vdnn_memory_options *mem, int iterations,
                                                vdnn_profile_t **out, bool *link_busy_measured, vdnn_error *err);
/* A GPU that is not here, for vdnn_profile_describe_gpu_model. */
typedef struct vdnn_gpu_description {
    const char *name;         /* what the profile says it is for ("H100 SXM"); NULL or "": its compute capability */
    int cc_major, cc_minor;   /* compute capability (bf16 needs 8.0; 9.0 is Hopper) */
    int tf32;                 /* as vdnn_backend_options.tf32: -1 the environment's (default on), 0 off, 1 on */
    double flops_per_s, mem_bytes_per_s, link_d2h_bytes_per_s, link_h2d_bytes_per_s; /* the roofline; 0: defaults */
} vdnn_gpu_description;

/* A GPU's profile without the GPU, for plans that say on any machine what fits it: every layer's op info from the
 * CUDA backend's own op rules for that compute capability and map precision (what each op keeps, what backward
 * reads, its own scratch; a convolution's workspace is that of cuDNN's zero-workspace algorithms, so convolution
 * scratch is a lower bound), the device described offline, times a roofline estimate (measured: false), a note
 * saying all this. Its op info source is "described" (docs/profiles.md). VDNN_ERR_UNSUPPORTED in builds without
 * the CUDA backend (which compiles without a GPU), or where the GPU cannot run the model's ops in that precision
 * (bf16 below compute capability 8.0), naming the layer. */
VDNN_API vdnn_status vdnn_profile_describe_gpu_model(const vdnn_model_t *m, vdnn_shape input, int classes,
                                                     vdnn_precision precision, const vdnn_gpu_description *gpu,
                                                     vdnn_profile_t **out, vdnn_error *err);
/* A profile for m, a variant of the model that from[0..n) profile (its attentions fused or not): each layer's times
 * and op info from the first of them with a layer of its name and kind, the link, upload and update from from[0]
 * (vdnn_model_fit_attention_measured plans with these). VDNN_ERR_MISMATCH where they are not of one model, device,
 * batch and precision, or a layer of m is in none. *out: the caller frees it. */
VDNN_API vdnn_status vdnn_profile_compose(const vdnn_profile_t *const *from, int n, const vdnn_model_t *m,
                                          vdnn_profile_t **out, vdnn_error *err);
/* Writes it as JSON (to PATH.tmp, then renamed). */
VDNN_API vdnn_status vdnn_profile_save(const vdnn_profile_t *p, const char *path, vdnn_error *err);
VDNN_API void vdnn_profile_free(vdnn_profile_t *p);

typedef struct vdnn_profile_summary {
    char device[64];             /* "cpu", "cuda:NVIDIA H100 ..." */
    bool measured;               /* false: an estimate */
    double forward_s, backward_s;/* sums over the layers */
    double d2h_bytes_per_s, h2d_bytes_per_s, d2h_latency_s, h2d_latency_s; /* the link alone */
    double d2h_busy_bytes_per_s, h2d_busy_bytes_per_s; /* while layers compute (the link alone where not measured) */
    double copy_slowdown;        /* layers run 1 + this times longer beside a copy */
    bool op_info;                /* records every layer's op info: vdnn_plan_create plans from it with no backend */
    vdnn_device_info device_info;/* the device measured and its settings (backend "": not recorded) */
    char op_info_source[16];     /* "backend": asked of the backend on the device; "described": from the backend's
                                    rules without the device (sizes only a device gives are derived: see the
                                    file's "note"); "": no op info */
    int version;                 /* file format version (1: files before op info; 2: this vdnn's) */
} vdnn_profile_summary;

VDNN_API void vdnn_profile_summarize(const vdnn_profile_t *p, vdnn_profile_summary *s);

/* Whether the backend's op info for the model (at the profile's batch, input and classes) is the one the profile
 * recorded: VDNN_OK if so or if it recorded none; VDNN_ERR_MISMATCH naming the first layer and field that differ
 * otherwise (another device, or other settings such as TF32 or determinism). A plan made from the profile with no
 * backend is then not the plan a net on this backend makes, which plans with the backend's own. */
VDNN_API vdnn_status vdnn_profile_check_backend(const vdnn_profile_t *p, const vdnn_model_t *m, vdnn_backend_t *be,
                                                vdnn_error *err);

/* ---- plans ---- */

typedef enum vdnn_tensor_class { VDNN_CLASS_KEEP = 0, VDNN_CLASS_SWAP, VDNN_CLASS_RECOMPUTE } vdnn_tensor_class;

/* The training plan of the model at batch input.n (a step's images; with memory.micro_batches each micro-batch
 * is planned), input CxHxW and class count (0: the model's default) under the memory options. The op info (how
 * much state and scratch each op needs, what its backward reads) comes from the backend; with be NULL, from the
 * profile where it records op info (vdnn_profile_measure_model's do: the plan is then the one a net on the
 * profiled device makes, on any machine; a profile at another batch or input than the plan's, micro-batches
 * included, is VDNN_ERR_MISMATCH), else from the CPU backend, which needs no device. The profile (NULL: the
 * default estimate) says what ops and copies cost. This is the call `vdnn plan` and a net's creation both make.
 * A budget too small is not an error: the summary says feasible false and the smallest budget known. */
VDNN_API vdnn_status vdnn_plan_create(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_profile_t *prof,
                                      vdnn_shape input, int classes, const vdnn_memory_options *mem,
                                      vdnn_plan_t **out, vdnn_error *err);
VDNN_API void vdnn_plan_free(vdnn_plan_t *p);
/* The fewest attention head groups whose plan fits (long contexts; vdnn_model_with_head_groups): plans m, a
 * transformer whose attention is not grouped, in 1, 2, 3, ... groups, every count that divides every attention's
 * heads, by vdnn_plan_create with be, input, classes and mem, its costs a roofline estimate at the given rates (0:
 * the default estimate's; all 0: the default estimate, what a net plans with without a profile; a measured profile
 * is of one grouping, so none is taken), and stops at the first whose plan fits both budgets: *out is m in that
 * many groups (*groups; the caller frees it), *fits true. None fitting: the grouping that needs the least device
 * budget, *fits false. The numbers a net computes are the same in any grouping. VDNN_ERR_INVALID_ARG (naming the
 * model) for a model without attention; where no grouping can be planned, the first grouping's error. */
VDNN_API vdnn_status vdnn_model_fit_head_groups(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input,
                                                int classes, const vdnn_memory_options *mem, double flops_per_s,
                                                double mem_bytes_per_s, double link_d2h_bytes_per_s,
                                                double link_h2d_bytes_per_s, vdnn_model_t **out, int *groups,
                                                bool *fits, vdnn_error *err);

/* Which attentions to fuse (vdnn_model_with_fused_attentions) for the fastest plan that fits: plans m, a
 * transformer none of whose attention is fused or grouped, as it is and with 1, 2, ..., all of its attentions fused,
 * by vdnn_plan_create with be, input, classes and mem, its costs a roofline estimate at the given rates (as
 * vdnn_model_fit_head_groups). The attentions are fused in the order of what the unfused plan does with their
 * probabilities: recomputed ones first, then swapped, then kept, later attentions first within each. Of those n + 1
 * models, *out is the one whose plan fits both budgets in the least simulated time (ties: the fewer fused), *fits
 * true; none fitting, the one needing the least device budget, *fits false. *n_fused says how many are fused and
 * fused (NULL, or vdnn_model_attention_count(m) entries) which, in layer order. A fused attention's numbers match
 * the unfused one's up to the order of float sums. VDNN_ERR_INVALID_ARG (naming the model) for a model without
 * attention, VDNN_ERR_UNSUPPORTED (naming the layer) for attention in head groups. */
VDNN_API vdnn_status vdnn_model_fit_attention(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input,
                                              int classes, const vdnn_memory_options *mem, double flops_per_s,
                                              double mem_bytes_per_s, double link_d2h_bytes_per_s,
                                              double link_h2d_bytes_per_s, vdnn_model_t **out, bool *fused,
                                              int *n_fused, bool *fits, vdnn_error *err);
/* The same search with measured costs: unfused, a profile of m as it is (`vdnn profile`), and all_fused, one of m
 * with every attention fused (`vdnn profile --attention fused`), both of the batch, input and classes asked, on be's
 * device. Each variant's plan is made from a profile of it composed of those two: every layer's times and op info
 * from the unfused profile, a fused attention's from the other (and the link, upload and update from the
 * unfused). VDNN_ERR_MISMATCH where the two are not of one model, device, batch and precision or a layer is in
 * neither. */
VDNN_API vdnn_status vdnn_model_fit_attention_measured(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input,
                                                       int classes, const vdnn_memory_options *mem,
                                                       const vdnn_profile_t *unfused,
                                                       const vdnn_profile_t *all_fused, vdnn_model_t **out,
                                                       bool *fused, int *n_fused, bool *fits, vdnn_error *err);

typedef struct vdnn_plan_summary {
    char model[64];
    vdnn_policy policy;
    bool training;
    bool feasible;                 /* fits the device and host budgets */
    vdnn_shape input;              /* n: the images one pass runs (one micro-batch) */
    int classes;
    int micro_batches;
    size_t budget, host_budget;    /* SIZE_MAX: unlimited */
    size_t peak_device_bytes;      /* the arena's high-water mark: live bytes plus fragmentation */
    size_t max_live_bytes;         /* the largest total of blocks live at one step */
    size_t avg_device_bytes;       /* averaged over steps */
    size_t persistent_bytes;       /* parameters, their gradients and momentum, statistics (when on the device) */
    size_t host_bytes;             /* the pinned host pool */
    size_t home_bytes;             /* of which the homes of offloaded parameters */
    size_t managed_bytes;          /* policy um: the Unified Memory pool */
    size_t bytes_moved;            /* per iteration, both directions */
    size_t min_budget_bytes;       /* the smallest device budget for which a plan with these options is known */
    double lower_bound_s;          /* no plan at this budget runs an iteration faster (by the plan's costs) */
    double simulated_s;            /* this plan's iteration, simulated with the plan's costs */
    bool offload_params;           /* parameters homed in host memory (asked for, or chosen by policy auto) */
    int streamed_layers;           /* convolutions streaming their input */
    int steps;
    int tensors;                   /* entries of vdnn_plan_tensor */
    bool algorithms_change_numerics; /* some convolution uses an algorithm that rounds differently */
} vdnn_plan_summary;

/* Computes the smallest budget and simulates the first time it is called (then cached). */
VDNN_API vdnn_status vdnn_plan_summarize(const vdnn_plan_t *p, vdnn_plan_summary *s, vdnn_error *err);

/* One feature map, state or offloaded parameter of the plan (the rows of `vdnn plan`). */
typedef struct vdnn_tensor_info {
    char name[96];
    char kind[16];              /* "fmap", "aux", "weight", ... */
    char cls[16];               /* "keep", "swap", "recompute", "stream", "offloaded", "managed" */
    vdnn_tensor_class class_id; /* keep / swap / recompute as the planner chose */
    int layer;
    size_t bytes;
    char out_after[96];         /* the step after which it leaves the device ("fwd conv3"), or "-" */
    char back_from[96];         /* the step whose start brings it back, or "-" */
    char first_use[96];         /* its first backward use (homed: the first step needing it back), or "-" */
} vdnn_tensor_info;

VDNN_API vdnn_status vdnn_plan_tensor(const vdnn_plan_t *p, int i, vdnn_tensor_info *out, vdnn_error *err);

/* The plan as one JSON object (what `vdnn plan --json` prints) or as the table `vdnn plan` prints, into a
 * caller's buffer: like snprintf, *needed (may be NULL) gets the length without the terminating zero, and buf may
 * be NULL with len 0 to ask for it. */
VDNN_API vdnn_status vdnn_plan_json(const vdnn_plan_t *p, char *buf, size_t len, size_t *needed, vdnn_error *err);
VDNN_API vdnn_status vdnn_plan_table(const vdnn_plan_t *p, char *buf, size_t len, size_t *needed, vdnn_error *err);

/* ---- simulation ---- */

/* Replays the plan on a model of the device: one compute queue and a copy queue per direction. prof NULL: the
 * plan's own costs (its profile, or the default estimate). */
VDNN_API vdnn_status vdnn_plan_simulate(const vdnn_plan_t *p, const vdnn_profile_t *prof, vdnn_timeline_t **out,
                                        vdnn_error *err);
VDNN_API void vdnn_timeline_free(vdnn_timeline_t *t);

typedef struct vdnn_timeline_summary {
    double iteration_s;         /* until every lane is idle */
    double compute_s;           /* busy time of the compute lane */
    double stall_s;             /* the compute lane waiting for copies */
    double d2h_s, h2d_s;        /* busy time of each copy lane */
    size_t peak_live_bytes;     /* the largest total of live blocks */
} vdnn_timeline_summary;

VDNN_API void vdnn_timeline_summarize(const vdnn_timeline_t *t, vdnn_timeline_summary *s);

/* Chrome trace-event JSON of n timelines (one process each, named), for ui.perfetto.dev. */
VDNN_API vdnn_status vdnn_trace_write(const char *path, const vdnn_timeline_t *const *tl, const char *const *names, int n,
                                      vdnn_error *err);
/* SVG: live device memory over the iteration for n timelines on shared axes (budget dashed; SIZE_MAX: none), and
 * a Gantt chart of each one's lanes. */
VDNN_API vdnn_status vdnn_svg_memory(const char *path, const char *title, const char *subtitle,
                                     const vdnn_timeline_t *const *tl, const char *const *names, int n, size_t budget,
                                     vdnn_error *err);
VDNN_API vdnn_status vdnn_svg_gantt(const char *path, const char *title, const char *subtitle,
                                    const vdnn_timeline_t *const *tl, const char *const *names, int n, vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
