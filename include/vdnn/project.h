/* Projection of the time to train on N devices: data parallelism alone against hybrids of data parallelism
 * and pipelines of model-parallel stages, from a profile, link bandwidths and a table of epochs to converge. */
#ifndef VDNN_PROJECT_PUBLIC_H
#define VDNN_PROJECT_PUBLIC_H

#include "vdnn/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VDNN_MAX_STAGES 64
#define VDNN_EPOCHS_MAX 64

/* Epochs to reach the target accuracy at each global batch, batches increasing. */
typedef struct vdnn_epochs_table {
    int n;
    double batch[VDNN_EPOCHS_MAX];
    double epochs[VDNN_EPOCHS_MAX];
} vdnn_epochs_table;

/* Lines "BATCH EPOCHS" (or "BATCH,EPOCHS"); '#' starts a comment. Errors name the source and line. */
VDNN_API vdnn_status vdnn_epochs_table_parse(const char *text, const char *source, vdnn_epochs_table *t,
                                             vdnn_error *err);
VDNN_API vdnn_status vdnn_epochs_table_read(const char *path, vdnn_epochs_table *t, vdnn_error *err);
/* Piecewise linear in log2(batch); below the first row, the first row's epochs; beyond the last, the last
 * segment's slope continued (*extrapolated set). */
VDNN_API double vdnn_epochs_at(const vdnn_epochs_table *t, double batch, bool *extrapolated);

/* Stage k runs layers first[k]..last[k] of the model (layer 0, the data, belongs to none). */
typedef struct vdnn_stage_split {
    int stages;
    int first[VDNN_MAX_STAGES], last[VDNN_MAX_STAGES];
} vdnn_stage_split;

/* "conv1..layer2.1.relu | layer3.0.conv1..loss" into buf. */
VDNN_API const char *vdnn_stage_split_format(const vdnn_model_t *m, const vdnn_stage_split *s, char *buf, size_t len);

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

/* The estimate for `stages` stages per worker (devices / stages workers), from a profile of the model (its
 * batch, input and classes are the profile's); times scale linearly with the batch, the update does not.
 * VDNN_ERR_INVALID_ARG when the model has fewer places to cut than stages. */
VDNN_API vdnn_status vdnn_project_layout(const vdnn_model_t *m, const vdnn_profile_t *p,
                                         const vdnn_project_config *c, int stages, vdnn_layout_estimate *e,
                                         vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
