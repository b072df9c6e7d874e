/* Learning-rate schedules (constant, step, cosine) with optional linear warmup, matching PyTorch's formulas. */
#ifndef VDNN_TRAIN_SCHEDULE_H
#define VDNN_TRAIN_SCHEDULE_H

#include "core/error.h"

typedef enum { VDNN_LR_CONSTANT, VDNN_LR_STEP, VDNN_LR_COSINE } vdnn_lr_kind;

typedef struct {
    vdnn_lr_kind kind;
    double base_lr;
    double gamma;       /* step: factor applied every step_size steps */
    long step_size;     /* step */
    long total_steps;   /* cosine: the decay ends at min_lr at this step (warmup included) */
    long warmup_steps;  /* 0: none */
    double min_lr;      /* cosine */
} vdnn_lr_schedule;

/* The learning rate for optimizer step `step` (0-based). Any unit works (steps or epochs)
 * as long as step_size, total_steps and warmup_steps count in the same one.
 * Warmup (W = warmup_steps > 0): step t < W uses base_lr * (t+1) / W; afterwards the schedule
 * runs on t - W, as PyTorch's SequentialLR([LinearLR(start_factor=1/W, total_iters=W-1),
 * S], milestones=[W]).
 *   constant: base_lr
 *   step:     base_lr * gamma^floor(t / step_size)                     (StepLR)
 *   cosine:   min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2,
 *             T = total_steps - W                                  (CosineAnnealingLR, T_max = T)
 *             and min_lr from t >= T on (PyTorch's would rise again). */
double vdnn_lr_at(const vdnn_lr_schedule *s, long step);

/* Parses "constant", "step:STEP_SIZE:GAMMA", "cosine" or "cosine:MIN_LR", each optionally
 * followed by ",warmup=N". Sets kind, gamma, step_size, min_lr and warmup_steps (defaults
 * gamma 1, step_size 0, min_lr 0, warmup 0); base_lr and total_steps are left for the
 * caller. A bad spec gives VDNN_ERR_INVALID_ARG naming it. */
vdnn_status vdnn_lr_parse(const char *spec, vdnn_lr_schedule *s, vdnn_error *err);

#endif
