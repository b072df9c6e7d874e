/* Static placement of memory blocks with known lifetimes: greedy by size, best-fit gap. */
#ifndef VDNN_MEM_OFFSETS_H
#define VDNN_MEM_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#define VDNN_ALIGN 256

static inline size_t vdnn_align_up(size_t n) { return (n + VDNN_ALIGN - 1) / VDNN_ALIGN * VDNN_ALIGN; }

typedef struct vdnn_interval {
    size_t bytes;      /* already aligned */
    int begin, end;    /* inclusive step range */
    size_t offset;     /* output */
} vdnn_interval;

/* Places every interval at or above `base` so that no two that overlap in time overlap in
 * memory. Returns the end of the highest placed interval (>= base) in *top. */
vdnn_status vdnn_place_intervals(vdnn_interval *iv, int n, size_t base, size_t *top, vdnn_error *err);
/* thorough: tries several orders and fits and keeps the lowest top (never above the plain call's), at tens of times
 * its cost: for a plan's final placement. */
vdnn_status vdnn_place_intervals_ex(vdnn_interval *iv, int n, size_t base, bool thorough, size_t *top, vdnn_error *err);

#endif
