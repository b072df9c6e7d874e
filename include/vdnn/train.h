/* Data and the training loop: datasets by spec string, a loop with a progress callback, evaluation. */
#ifndef VDNN_TRAIN_PUBLIC_H
#define VDNN_TRAIN_PUBLIC_H

#include "vdnn/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vdnn_split { VDNN_SPLIT_TRAIN = 0, VDNN_SPLIT_TEST = 1 } vdnn_split;

/* Opens one split of a data spec, normalised per channel with the training split's mean and deviation:
 *   "fashion-mnist"   Debian's dataset-fashion-mnist files (IDX, gzip)
 *   "idx:DIR"         DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
 *   "cifar10:DIR"     DIR/data_batch_{1..5}.bin, DIR/test_batch.bin
 *   "text:FILE"       the file's bytes as tokens (vocabulary 256) in sequences of synthetic_shape.h tokens, each
 *                     token's label the byte after it; the last tenth of the file is the test split (docs/sequence.md);
 *                     text:DIR, a directory's text files as one text
 *   "tokens:FILE"     llm.c's pre-tokenized uint16 .bin file, in sequences as text:FILE's
 *   "synthetic"       seeded random images of synthetic_shape's CxHxW and synthetic_classes classes, 1024 train
 *                     (or synthetic_shape.n if more) and 256 test images
 * Truncated or corrupt files give VDNN_ERR_FORMAT naming the file. */
VDNN_API vdnn_status vdnn_dataset_open(const char *spec, vdnn_split split, vdnn_shape synthetic_shape,
                                       int synthetic_classes, uint64_t seed, vdnn_dataset_t **out, vdnn_error *err);
VDNN_API void vdnn_dataset_free(vdnn_dataset_t *ds);
/* n: the image count. */
VDNN_API vdnn_shape vdnn_dataset_shape(const vdnn_dataset_t *ds);
VDNN_API int vdnn_dataset_classes(const vdnn_dataset_t *ds);
VDNN_API const char *vdnn_dataset_source(const vdnn_dataset_t *ds);
/* The images (n x c x h x w floats) and labels (n x labels_per_image: one per image; text and tokens: one per
 * token of the sequence), owned by the dataset. */
VDNN_API const float *vdnn_dataset_images(const vdnn_dataset_t *ds);
VDNN_API const int32_t *vdnn_dataset_labels(const vdnn_dataset_t *ds);
VDNN_API int vdnn_dataset_labels_per_image(const vdnn_dataset_t *ds);
/* The order vdnn_train_run visits the images in, in epoch `epoch` of a net seeded `seed`: order[0 .. n) gets every
 * image index once (n: the image count). With batches of b images an epoch has n / b steps (the rest is dropped),
 * and global step s trains on order[(s % (n / b)) * b ...] of epoch s / (n / b). A caller feeding
 * vdnn_net_train_step these batches trains as the loop does. */
VDNN_API vdnn_status vdnn_dataset_order(const vdnn_dataset_t *ds, uint64_t seed, long epoch, int32_t *order,
                                        vdnn_error *err);

/* What the loop reports every log_every steps, at each epoch's end and at the last step. */
typedef struct vdnn_progress {
    long step, total;          /* steps done, steps the run ends at */
    double epoch;              /* step / steps per epoch */
    double loss;               /* mean training loss since the last report */
    double lr;                 /* the learning rate of the last step */
    double images_per_sec;     /* over this run's training steps */
    double elapsed_s;
} vdnn_progress;

typedef void (*vdnn_progress_fn)(void *ctx, const vdnn_progress *p);

typedef struct vdnn_train_options {
    int epochs;                /* train until this epoch count (default 2), unless steps > 0 */
    long steps;                /* train until this global step count */
    double lr;                 /* base learning rate (default 0.05) */
    const char *lr_schedule;   /* "constant", "step:N:GAMMA", "cosine[:MIN_LR]", each with ",warmup=N" (default
                                  "cosine"), as PyTorch's schedulers */
    int log_every;             /* steps between progress reports (default 100) */
    const char *save_path;     /* checkpoint after every epoch and at the end (NULL: none) */
    bool evaluate;             /* evaluate on the test split at the end (default true) */
    vdnn_progress_fn progress; /* NULL: quiet */
    void *progress_ctx;
    vdnn_timeline_t **record_last; /* set: *record_last gets the last step's measured timeline (caller frees) */
} vdnn_train_options;

VDNN_API vdnn_train_options vdnn_train_options_default(void);

typedef struct vdnn_train_result {
    long steps;                /* global steps done at the end */
    long steps_run;            /* steps run by this call */
    double final_loss;         /* mean training loss over the last reporting window */
    double test_accuracy;      /* -1 when not evaluated */
    double test_loss;
    double images_per_sec;     /* training throughput, evaluation excluded */
    double step_seconds;       /* median time of one training step, the first (warm-up) excluded */
    double train_seconds;
    double elapsed_seconds;
    size_t peak_device_bytes;  /* the arena's measured high-water mark */
} vdnn_train_result;

/* Trains the net on shuffled batches of `train` (its order depends only on the seed and the epoch, so a
 * resumed net continues where it stopped), then evaluates on `test` (may be NULL). */
VDNN_API vdnn_status vdnn_train_run(vdnn_net_t *net, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                                    const vdnn_train_options *o, vdnn_train_result *r, vdnn_error *err);

/* Accuracy and mean loss over a whole split (loss may be NULL). */
VDNN_API vdnn_status vdnn_net_evaluate(vdnn_net_t *net, const vdnn_dataset_t *ds, double *accuracy, double *loss,
                                       vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
