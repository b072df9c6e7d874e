/* The training loop: batches from a loader, the learning-rate schedule, progress lines, evaluation and checkpoints. */
#ifndef VDNN_TRAIN_TRAIN_H
#define VDNN_TRAIN_TRAIN_H

#include <stdbool.h>
#include <stdio.h>

#include "exec/net.h"
#include "train/data.h"
#include "train/schedule.h"

typedef struct vdnn_train_options {
    int epochs;                  /* train until this epoch count, unless steps > 0 */
    long steps;                  /* train until this global step count */
    vdnn_lr_schedule lr;         /* base_lr set; total_steps filled in by the loop */
    int log_every;               /* steps between progress lines (0: 100) */
    const char *save_path;       /* checkpoint after every epoch and at the end (NULL: none) */
    bool evaluate;               /* evaluate on the test split at the end */
    FILE *log;                   /* progress lines; NULL: quiet */
    vdnn_timeline *record_last;  /* if set, the last training step's real timeline is recorded here */
} vdnn_train_options;

typedef struct vdnn_train_result {
    long steps;                  /* global steps done at the end */
    long steps_run;              /* steps run by this call */
    double final_loss;           /* mean training loss over the last logging window */
    double test_accuracy;        /* -1 when not evaluated */
    double test_loss;
    double images_per_sec;       /* training throughput, evaluation excluded */
    double step_seconds;         /* median time of one training step, the first (warm-up) excluded */
    double train_seconds;
    double elapsed_seconds;
    size_t peak_device_bytes;    /* the arena's measured high-water mark */
} vdnn_train_result;

vdnn_status vdnn_train_run(vdnn_net_t *net, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                           const vdnn_train_options *o, vdnn_train_result *r, vdnn_error *err);

/* Accuracy and mean loss over a whole split. */
vdnn_status vdnn_evaluate(vdnn_net_t *net, const vdnn_dataset_t *ds, double *accuracy, double *loss, vdnn_error *err);

/* Saves the net's parameters and optimizer state to path (atomically). */
vdnn_status vdnn_train_save(vdnn_net_t *net, const char *path, vdnn_error *err);
/* Loads a checkpoint written by vdnn_train_save into a net of the same model. */
vdnn_status vdnn_train_resume(vdnn_net_t *net, const char *path, vdnn_error *err);

#endif
