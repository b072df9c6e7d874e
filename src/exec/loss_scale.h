/* Dynamic loss scaling for fp16 training, PyTorch's GradScaler rule: the loss gradient is multiplied by a scale S
 * so that small gradients survive fp16; after backward, a step whose parameter gradients hold an inf or NaN is
 * skipped and S halved; otherwise the gradients are multiplied by 1/S (exact: S is a power of two) and, after
 * `interval` such steps in a row, S doubles. This file is the state machine alone (no backend, no net). */
#ifndef VDNN_EXEC_LOSS_SCALE_H
#define VDNN_EXEC_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

#define VDNN_LOSS_SCALE_INIT 65536.0f /* GradScaler's defaults */
#define VDNN_LOSS_SCALE_GROWTH 2.0f
#define VDNN_LOSS_SCALE_BACKOFF 0.5f
#define VDNN_LOSS_SCALE_INTERVAL 2000

typedef struct vdnn_loss_scaler {
    float scale;     /* S, what the loss gradient is multiplied by */
    float growth, backoff;
    int interval;    /* good steps in a row before S grows */
    int good;        /* good steps since S last changed */
    int64_t skipped; /* steps skipped for an inf or NaN gradient */
    int64_t applied; /* steps whose update was applied */
} vdnn_loss_scaler;

/* GradScaler's defaults with the initial scale `init` (> 0). */
void vdnn_loss_scaler_init(vdnn_loss_scaler *s, float init);

/* Records one step whose gradients were (finite) or were not all finite; true when its update is to be applied.
 * A growth that would make S infinite leaves it as it is (as GradScaler). */
bool vdnn_loss_scaler_step(vdnn_loss_scaler *s, bool finite);

#endif
