/* Datasets (IDX, CIFAR-10 binary, synthetic) and a batch loader that prepares the next batch on a background thread. */
#ifndef VDNN_TRAIN_DATA_H
#define VDNN_TRAIN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "vdnn/train.h"

/* A whole split held in host memory as float32 NCHW, already normalised (text: token ids 1xTx1, see data_text.c)
 * (pixel/255 - mean) / std with per-channel mean/std of the training split
 * (stored in the dataset so the test split uses the same numbers). */
struct vdnn_dataset {
    int count;             /* number of images */
    int c, h, w;
    int classes;
    float *images;         /* count * c*h*w */
    int32_t *labels;       /* count * labels_per */
    int labels_per;        /* labels per image: 1, or a text's tokens per sequence (one target per token) */
    char source[512];      /* for messages */
};

/* vdnn_dataset_open (public): "synthetic" makes synthetic_shape.n training images when that is more than 1024,
 * so a batch larger than that fits. */

/* Low-level readers, used by vdnn_dataset_open and the tests. Images come back as
 * uint8 (count*rows*cols), labels as uint8. Either file may be gzip-compressed. */
vdnn_status vdnn_idx_read_images(const char *path, int *count, int *rows, int *cols, uint8_t **pixels, vdnn_error *err);
vdnn_status vdnn_idx_read_labels(const char *path, int *count, uint8_t **labels, vdnn_error *err);
/* One CIFAR-10 binary batch file: records of 1 label byte + 3072 pixel bytes. */
vdnn_status vdnn_cifar_read_batch(const char *path, int *count, uint8_t **pixels, uint8_t **labels, vdnn_error *err);

/* Batches in a seeded shuffled order; the next batch is assembled on a background
 * thread while the caller trains on the current one. Epoch e's order depends only
 * on (seed, e), so a resumed run sees the same batches. */
typedef struct vdnn_loader vdnn_loader;

vdnn_status vdnn_loader_create(const vdnn_dataset_t *ds, int batch, bool shuffle, uint64_t seed,
                               vdnn_loader **out, vdnn_error *err);
/* Positions the loader at global step `step` (batches of `batch`; epochs wrap, the last
 * partial batch of an epoch is dropped when shuffling). */
vdnn_status vdnn_loader_seek(vdnn_loader *l, long step, vdnn_error *err);
/* Blocks until the next batch is ready; pointers stay valid until the next call.
 * Non-shuffled loaders (evaluation) return a short last batch: *n_out tells its size. */
vdnn_status vdnn_loader_next(vdnn_loader *l, const float **images, const int32_t **labels, int *n_out,
                             vdnn_error *err);
int vdnn_loader_batches_per_epoch(const vdnn_loader *l);
void vdnn_loader_free(vdnn_loader *l);

#endif
