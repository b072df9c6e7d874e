/* Measured (or estimated) costs of one network on one device: per-layer compute times and the copy
 * link's latency and bandwidth per direction, and, recorded on the device, every layer's op info and the
 * device's description. Planners and the simulator see devices only through it. */
#ifndef VDNN_PLAN_PROFILE_H
#define VDNN_PLAN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "vdnn/plan.h"

/* A copy of B bytes takes latency_s + B / bytes_per_s. */
typedef struct vdnn_copy_model {
    double latency_s;
    double bytes_per_s;
} vdnn_copy_model;

typedef struct vdnn_profile {
    char device[64];          /* "cpu", "cuda:NVIDIA H100 ..." */
    char model[64];           /* graph name */
    vdnn_shape input;         /* n = batch */
    int classes;
    int n_layers;
    char (*names)[VDNN_NAME_LEN]; /* per layer (index 0: the input); written to and checked in files */
    vdnn_layer_kind *kinds;   /* per layer, with each output's shape: written to files and checked where present, */
    vdnn_shape *outs;         /* so that op info recorded for one definition of a model is not read for another */
    double *fwd_s;            /* per layer: forward op time (index 0: unused) */
    double *bwd_s;            /* per layer: backward op time (with the layer's fused SGD update), gradient
                                 accumulation excluded: it is charged at accum_bytes_per_s */
    int *n_algos;             /* per layer: algorithms measured (0 or 1: only the default, in fwd_s/bwd_s) */
    double (*algo_fwd_s)[VDNN_MAX_ALGOS]; /* per layer and algorithm (algorithm 0 equals fwd_s) */
    double (*algo_bwd_s)[VDNN_MAX_ALGOS];
    double load_s;            /* uploading one batch */
    double update_s;          /* the SGD update of all parameters */
    double accum_bytes_per_s; /* gradient accumulation throughput (bytes of the added tensor) */
    vdnn_copy_model d2h, h2d; /* the link alone */
    vdnn_copy_model d2h_busy, h2d_busy; /* the link while layers compute, fitted to the copies of a run that
                                 swaps every map (the CPU backend's copy threads share the cores with the
                                 layers; a GPU's copy engines barely notice); bytes_per_s 0: not measured */
    double copy_slowdown;     /* compute runs 1 + this times longer while a copy is in flight, fitted to the
                                 same run */
    int n_samples;            /* raw copy measurements behind the models */
    size_t *sample_bytes;
    double *sample_d2h_s, *sample_h2d_s;
    bool measured;            /* false: a roofline estimate */
    /* What plans need of the device besides times, recorded where the profile was measured (profile_ops.c), so
     * that a plan made from the profile anywhere is the device's plan: */
    vdnn_device_info dev;     /* the device and its settings (dev.backend "": not recorded) */
    vdnn_dtype dtype;         /* of the op descriptions the op info is for */
    vdnn_layer_algos *ops;    /* per layer (index 0 unused): the training op's candidates, default first, as the
                                 backend's op_algos gave them; NULL: not recorded (estimates, older files) */
    /* How the op info was obtained, so a reader knows which numbers are the device's: "backend" (the backend
     * answered on the device), "described" (written from the backend's rules without the device: what each op
     * keeps is the backend's, sizes only the device can give are derived, as `note` says); "" with no op info. */
    char op_info_source[16];
    char note[2048];          /* free text a file carries about its provenance ("" none) */
    int version;              /* the file format version it was read from (VDNN_PROFILE_VERSION when made here) */
} vdnn_profile;

/* The profile file format: 1, before files carried a version (times and the link only); 2 adds "format" and
 * "version", the device's description, the op info and each layer's kind and shape. Readers take every version
 * up to this one and refuse newer ones by name. */
#define VDNN_PROFILE_VERSION 2

static inline double vdnn_copy_seconds(const vdnn_copy_model *m, size_t bytes)
{
    return bytes ? m->latency_s + (double)bytes / m->bytes_per_s : 0.0;
}

/* The copy model plans use for copies overlapping compute (nearly all of a plan's): the busy link where it
 * was measured, the idle one otherwise. */
static inline const vdnn_copy_model *vdnn_profile_link(const vdnn_profile *p, bool d2h)
{
    const vdnn_copy_model *busy = d2h ? &p->d2h_busy : &p->h2d_busy;
    return busy->bytes_per_s > 0 ? busy : d2h ? &p->d2h : &p->h2d;
}

/* A layer's times under one of its algorithms. One that was not measured is taken to be 10% slower than
 * the default (which backends list first as the fastest they know), so that a plan trades the default
 * for it to save memory, not on a guess that it is as fast. */
#define VDNN_UNMEASURED_ALGO_FACTOR 1.1
static inline double vdnn_profile_fwd(const vdnn_profile *p, int l, int algo)
{
    if (algo <= 0) return p->fwd_s[l];
    return algo < p->n_algos[l] ? p->algo_fwd_s[l][algo] : VDNN_UNMEASURED_ALGO_FACTOR * p->fwd_s[l];
}
static inline double vdnn_profile_bwd(const vdnn_profile *p, int l, int algo)
{
    if (algo <= 0) return p->bwd_s[l];
    return algo < p->n_algos[l] ? p->algo_bwd_s[l][algo] : VDNN_UNMEASURED_ALGO_FACTOR * p->bwd_s[l];
}

/* Allocates the per-layer arrays for n_layers (zeroed). */
vdnn_status vdnn_profile_init(vdnn_profile *p, int n_layers, vdnn_error *err);
/* Same for a resolved graph, and fills model, input, classes and layer names, kinds and shapes from it. */
vdnn_status vdnn_profile_init_graph(vdnn_profile *p, const vdnn_graph_t *g, vdnn_error *err);
void vdnn_profile_release(vdnn_profile *p);

/* A profile without measurements: every op takes max(flops / flops_per_s, bytes / mem_bytes_per_s)
 * (bytes = its inputs and outputs), copies run at link_bytes_per_s with 10 us latency. */
vdnn_status vdnn_profile_estimate(const vdnn_graph_t *g, double flops_per_s, double mem_bytes_per_s,
                                  double link_bytes_per_s, vdnn_profile *p, vdnn_error *err);

/* The estimate plans use when they are given no profile (VDNN_ESTIMATE_* in vdnn/plan.h): one default, so that
 * every caller that plans without measurements plans alike. */
vdnn_status vdnn_profile_estimate_default(const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err);

/* copy_slowdown from layers that ran beside copies: extra_s, the seconds they took beyond their times alone, over
 * overlap_s, the seconds copies ran beside them. The simulator runs compute at 1 / (1 + slowdown) of full speed for
 * the time it overlaps copies, so that time costs slowdown / (1 + slowdown) of itself extra; this inverts that,
 * within [0, 4]. */
double vdnn_copy_slowdown_fit(double extra_s, double overlap_s);

/* Least-squares fit of latency and bandwidth to the samples of one direction. */
vdnn_copy_model vdnn_copy_model_fit(const size_t *bytes, const double *seconds, int n);

/* Records the device's description and every layer's training op candidates from be into p, made for g (whose
 * layers it must describe). */
vdnn_status vdnn_profile_record_ops(vdnn_profile *p, const vdnn_graph_t *g, vdnn_backend_t *be, vdnn_error *err);
/* Whether the candidates algos (per layer of p, as vdnn_plan_query_algos gives them) differ from those p
 * recorded; if so, why (may be NULL) names the first layer, candidate and field that differ. False when p
 * recorded none. */
bool vdnn_profile_ops_differ(const vdnn_profile *p, const vdnn_layer_algos *algos, char *why, size_t n);

/* A profile for the model variant g from profiles of other variants of the model (profile_compose.c): each layer's
 * times and op info from the first of from[0..n) with a layer of its name and kind, the rest from from[0]. They
 * must be of one device, model name, batch, input, classes and precision; VDNN_ERR_MISMATCH names a layer none
 * has. */
vdnn_status vdnn_profile_compose_into(const vdnn_profile *const *from, int n, const vdnn_graph_t *g,
                                      vdnn_profile *out, vdnn_error *err);

/* JSON file round trip (written to PATH.tmp, then renamed). Reading checks that the profile matches g
 * (name, layer count and names, batch, input, classes): VDNN_ERR_MISMATCH names what differs; a
 * malformed file is VDNN_ERR_FORMAT with file, line and column. */
vdnn_status vdnn_profile_write(const char *path, const vdnn_profile *p, vdnn_error *err);
vdnn_status vdnn_profile_read(const char *path, const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err);

#endif
