/* The device arena at run time: one backend block carved at the offsets a plan fixed, with every
 * allocation checked against the capacity and the live blocks, and the high-water mark measured. */
#ifndef VDNN_MEM_ARENA_H
#define VDNN_MEM_ARENA_H

#include <stddef.h>

#include "core/error.h"

typedef struct vdnn_arena {
    char *base;          /* device pointer of the block */
    size_t capacity;
    size_t high_water;   /* largest end offset ever allocated */
    size_t live_bytes;
    int n_live, cap_live;
    struct vdnn_arena_range { size_t lo, hi; int id; } *live;
} vdnn_arena;

void vdnn_arena_init(vdnn_arena *a, void *base, size_t capacity);
void vdnn_arena_release(vdnn_arena *a);
/* Marks [offset, offset+bytes) live under `id`; fails if it leaves the arena or overlaps a live range. */
vdnn_status vdnn_arena_take(vdnn_arena *a, size_t offset, size_t bytes, int id, vdnn_error *err);
/* Ends the live range `id`. */
vdnn_status vdnn_arena_give(vdnn_arena *a, int id, vdnn_error *err);
/* Ends every live range but `keep_id`'s (after an iteration that failed midway). */
void vdnn_arena_give_all_but(vdnn_arena *a, int keep_id);

#endif
