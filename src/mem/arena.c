/* The device arena at run time: checks each placement a plan makes and measures the high-water mark. */
#include "mem/arena.h"

#include <stdlib.h>

void vdnn_arena_init(vdnn_arena *a, void *base, size_t capacity)
{
    *a = (vdnn_arena){.base = base, .capacity = capacity};
}

void vdnn_arena_release(vdnn_arena *a)
{
    free(a->live);
    a->live = NULL;
    a->n_live = a->cap_live = 0;
}

vdnn_status vdnn_arena_take(vdnn_arena *a, size_t offset, size_t bytes, int id, vdnn_error *err)
{
    if (offset > a->capacity || bytes > a->capacity - offset)
        return vdnn_fail(err, VDNN_ERR_BUDGET, "arena: block %d [%zu, %zu) is outside the %zu-byte arena", id, offset,
                         offset + bytes, a->capacity);
    for (int i = 0; i < a->n_live; i++) {
        if (offset < a->live[i].hi && a->live[i].lo < offset + bytes)
            return vdnn_fail(err, VDNN_ERR_BACKEND, "arena: block %d [%zu, %zu) overlaps live block %d [%zu, %zu)", id,
                             offset, offset + bytes, a->live[i].id, a->live[i].lo, a->live[i].hi);
    }
    if (a->n_live == a->cap_live) {
        int nc = a->cap_live ? 2 * a->cap_live : 64;
        void *p = realloc(a->live, sizeof *a->live * (size_t)nc);
        if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "arena: out of host memory");
        a->live = p;
        a->cap_live = nc;
    }
    a->live[a->n_live++] = (struct vdnn_arena_range){offset, offset + bytes, id};
    a->live_bytes += bytes;
    if (offset + bytes > a->high_water) a->high_water = offset + bytes;
    return VDNN_OK;
}

vdnn_status vdnn_arena_give(vdnn_arena *a, int id, vdnn_error *err)
{
    for (int i = 0; i < a->n_live; i++) {
        if (a->live[i].id == id) {
            a->live_bytes -= a->live[i].hi - a->live[i].lo;
            a->live[i] = a->live[--a->n_live];
            return VDNN_OK;
        }
    }
    return vdnn_fail(err, VDNN_ERR_BACKEND, "arena: block %d is not live", id);
}

void vdnn_arena_give_all_but(vdnn_arena *a, int keep_id)
{
    for (int i = 0; i < a->n_live;) {
        if (a->live[i].id == keep_id) {
            i++;
            continue;
        }
        a->live_bytes -= a->live[i].hi - a->live[i].lo;
        a->live[i] = a->live[--a->n_live];
    }
}
