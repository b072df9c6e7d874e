/* Checkpoint files: a versioned header, named tensors, a checksum; written to a temporary file and renamed. */
#ifndef VDNN_TRAIN_CHECKPOINT_H
#define VDNN_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* 2: the precision after the model name (version 1 files are fp32 nets'). */
#define VDNN_CKPT_VERSION 2

/* One named float array (a layer's weights, its momentum, running statistics...). */
typedef struct vdnn_ckpt_tensor {
    char name[96];
    size_t count;
    float *data;          /* host memory; owned by the checkpoint when read */
} vdnn_ckpt_tensor;

typedef struct vdnn_checkpoint {
    char model[64];       /* graph name */
    uint64_t model_hash;  /* hash of layer kinds, names, shapes: resume refuses another model */
    int64_t step;         /* optimizer steps done */
    int64_t epoch;
    uint64_t seed;
    uint32_t precision;   /* the maps' type of the net that wrote it (vdnn_precision); the tensors are fp32
                             whatever it is (master weights, momentum, statistics) */
    int n_tensors;
    vdnn_ckpt_tensor *tensors;
} vdnn_checkpoint;

/* Writes `path` atomically: PATH.tmp.<pid>, fsync, rename. A failure leaves no partial file
 * at `path` and no temporary behind. */
vdnn_status vdnn_checkpoint_write(const char *path, const vdnn_checkpoint *ck, vdnn_error *err);
/* Reads and verifies magic, version, sizes and checksum: a truncated or corrupted
 * file gives VDNN_ERR_FORMAT naming the file. */
vdnn_status vdnn_checkpoint_read(const char *path, vdnn_checkpoint *ck, vdnn_error *err);
/* Frees what vdnn_checkpoint_read allocated. */
void vdnn_checkpoint_release(vdnn_checkpoint *ck);
/* The tensor with this name, or NULL. */
const vdnn_ckpt_tensor *vdnn_checkpoint_find(const vdnn_checkpoint *ck, const char *name);

#endif
