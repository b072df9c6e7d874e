/* Static placement of memory blocks with known lifetimes: greedy by size, best-fit gap.
 * Largest blocks are placed first because they shape the layout most; each takes the
 * smallest gap among the blocks it shares time with, which keeps fragmentation low. */
#include "mem/offsets.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    size_t lo, hi;
} span;

static int cmp_size_desc(const void *a, const void *b, void *ctx)
{
    const vdnn_interval *iv = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    if (iv[ia].bytes != iv[ib].bytes) return iv[ia].bytes > iv[ib].bytes ? -1 : 1;
    if (iv[ia].begin != iv[ib].begin) return iv[ia].begin < iv[ib].begin ? -1 : 1;
    return ia < ib ? -1 : (ia > ib);
}

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : (x->hi > y->hi);
}

/* qsort has no context argument in C11: a small insertion-merge sort with one. */
static void sort_with_ctx(int *idx, int n, int (*cmp)(const void *, const void *, void *), void *ctx, int *tmp)
{
    if (n < 2) return;
    int h = n / 2;
    sort_with_ctx(idx, h, cmp, ctx, tmp);
    sort_with_ctx(idx + h, n - h, cmp, ctx, tmp);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp(&idx[j], &idx[i], ctx) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    for (i = 0; i < n; i++) idx[i] = tmp[i];
}

vdnn_status vdnn_place_intervals(vdnn_interval *iv, int n, size_t base, size_t *top, vdnn_error *err)
{
    *top = base;
    if (n == 0) return VDNN_OK;
    int *order = malloc(sizeof(int) * (size_t)n * 3);
    span *busy = malloc(sizeof(span) * (size_t)n);
    if (!order || !busy) {
        free(order);
        free(busy);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory placing %d blocks", n);
    }
    int *placed = order + n, *tmp = order + 2 * n;
    for (int i = 0; i < n; i++) order[i] = i;
    sort_with_ctx(order, n, cmp_size_desc, iv, tmp);

    int n_placed = 0;
    for (int k = 0; k < n; k++) {
        vdnn_interval *cur = &iv[order[k]];
        int nb = 0;
        for (int j = 0; j < n_placed; j++) {
            const vdnn_interval *o = &iv[placed[j]];
            if (o->begin <= cur->end && cur->begin <= o->end) busy[nb++] = (span){o->offset, o->offset + o->bytes};
        }
        qsort(busy, (size_t)nb, sizeof(span), cmp_span);
        /* The gap above the highest busy block is unbounded: it wins only when no bounded gap fits,
         * so `found`, not a SIZE_MAX sentinel, says whether a gap was chosen (base 0 with nothing
         * busy has a gap of exactly SIZE_MAX). */
        size_t best = base, best_gap = SIZE_MAX, cursor = base;
        bool found = false;
        for (int j = 0; j <= nb; j++) {
            size_t gap_end = j < nb ? busy[j].lo : SIZE_MAX;
            if (gap_end > cursor && gap_end - cursor >= cur->bytes) {
                size_t gap = gap_end - cursor;
                if (!found || gap < best_gap) {
                    found = true;
                    best_gap = gap;
                    best = cursor;
                }
            }
            if (j < nb && busy[j].hi > cursor) cursor = busy[j].hi;
        }
        cur->offset = best;
        if (best + cur->bytes > *top) *top = best + cur->bytes;
        placed[n_placed++] = order[k];
    }
    free(order);
    free(busy);
    return VDNN_OK;
}
