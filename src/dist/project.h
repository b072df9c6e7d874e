/* Time-to-train projection for data parallelism alone and for hybrid data + model parallelism (GPipe-style
 * pipelines of stages inside each data-parallel worker), from per-layer times, link bandwidths and a
 * table of epochs to converge against the global batch. No MPI here. */
#ifndef VDNN_DIST_PROJECT_H
#define VDNN_DIST_PROJECT_H

#include <stdbool.h>

#include "dist/stages.h"
#include "plan/profile.h"

#define VDNN_EPOCHS_MAX 64

/* Epochs to reach the target accuracy at each global batch, batches increasing. */
typedef struct vdnn_epochs_table {
    int n;
    double batch[VDNN_EPOCHS_MAX];
    double epochs[VDNN_EPOCHS_MAX];
} vdnn_epochs_table;

/* Lines "BATCH EPOCHS" (or "BATCH,EPOCHS"); '#' starts a comment. Errors name the source and line. */
vdnn_status vdnn_epochs_table_parse(const char *text, const char *source, vdnn_epochs_table *t, vdnn_error *err);
vdnn_status vdnn_epochs_table_read(const char *path, vdnn_epochs_table *t, vdnn_error *err);
/* Piecewise linear in log2(batch); below the first row, the first row's epochs; beyond the last, the last
 * segment's slope continued (*extrapolated set). */
double vdnn_epochs_at(const vdnn_epochs_table *t, double batch, bool *extrapolated);

typedef struct vdnn_project_config {
    int devices;
    int batch;                    /* per data-parallel worker: a device alone, or a group of stages */
    int micro_batches;            /* GPipe micro-batches per worker step in hybrid layouts (>= 1) */
    double allreduce_bytes_per_s; /* per device, for the ring all-reduce of gradients */
    double allreduce_latency_s;   /* per ring step */
    double p2p_bytes_per_s;       /* between the stages of a worker */
    double p2p_latency_s;
    size_t bucket_bytes;          /* gradient buckets, summed in backward order as they fill */
    double dataset_images;        /* images per epoch */
    const vdnn_epochs_table *epochs;
} vdnn_project_config;

typedef struct vdnn_layout_estimate {
    int stages, workers, global_batch, micro_batches;
    double epochs;
    bool extrapolated;            /* the global batch is beyond the table's last row */
    double steps_per_epoch;
    double compute_s;             /* a step's compute on the busiest device, bubbles included */
    double bubble_s;              /* pipeline fill and drain inside compute_s */
    double comm_s;                /* the gradient sums' total time (much of it hidden behind backward) */
    double exposed_s;             /* what communication adds to the step */
    double step_s, images_per_s, train_s;
    vdnn_stage_split split;
} vdnn_layout_estimate;

/* The estimate for `stages` stages per worker (devices / stages workers). p holds per-layer times of g
 * (resolved at p's batch); times scale linearly with the batch, the update does not. */
vdnn_status vdnn_project_layout(const vdnn_graph_t *g, const vdnn_profile *p, const vdnn_project_config *c, int stages,
                                vdnn_layout_estimate *e, vdnn_error *err);

/* The ring all-reduce of `bytes` over n devices: 2(n-1) steps of bytes/n each. */
double vdnn_ring_allreduce_s(double bytes, int n, double bytes_per_s, double latency_s);

#endif
