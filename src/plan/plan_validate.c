/* The plan validator (plan_validate.h): one pass over the steps' actions in the executor's order, tracking each
 * storage's device block and value, each copy's event, and the host ranges in use as the actions change them.
 * It models what exec.c does with a plan, not how plan.c made it, so a planner's mistake cannot hide in both. */
#include "plan/plan_validate.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mem/offsets.h"

/* What a storage's device block holds: nothing (no block), no value yet, its value, or a copy still on its way. */
typedef enum dev_state { DEV_NONE, DEV_EMPTY, DEV_VALID, DEV_INCOMING } dev_state;
/* Its host copy: none, complete, being written by a copy out, or older than the device's value. */
typedef enum host_state { HOST_NONE, HOST_VALID, HOST_OUTGOING, HOST_STALE } host_state;

typedef struct st_state {
    int block;      /* the live block, -1: none */
    dev_state dev;
    host_state host;
    int dev_event;  /* DEV_INCOMING: the prefetch's event */
    int host_event; /* HOST_OUTGOING: the copy out's event */
    bool host_live; /* its host range is in use (listed in hlive) */
} st_state;

typedef struct ev_state {
    int storage;
    bool in;        /* a copy to the device */
    bool recorded;  /* some copy has recorded it */
    bool flight;    /* recorded and not waited for since */
} ev_state;

typedef struct validator {
    const vdnn_plan_t *p;
    vdnn_error *err;
    st_state *s;
    ev_state *ev;
    int *owner;     /* per event: the one storage whose copies use it (-1: none yet) */
    int *live;      /* non-persistent blocks live now */
    int n_live;
    int *pers;      /* persistent blocks, by offset */
    int n_pers;
    int *hlive;     /* storages whose host range is in use now */
    int n_hlive;
    int step, action; /* where the walk is, for messages (step -1: before the walk) */
    bool um;
} validator;

static const char *step_kind(vdnn_step_kind k)
{
    return k == VDNN_STEP_LOAD ? "load" : k == VDNN_STEP_FWD ? "fwd" : k == VDNN_STEP_BWD ? "bwd" : "update";
}

/* Fails with the walk's place: "step 37 (bwd conv2), action 3: ...". */
static vdnn_status VDNN_PRINTF(2, 3) bad(const validator *v, const char *fmt, ...)
{
    char what[640], where[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const vdnn_plan_t *p = v->p;
    if (v->step < 0) {
        snprintf(where, sizeof where, "the plan's layout");
    } else if (v->step >= p->n_steps) {
        snprintf(where, sizeof where, "the iteration's end");
    } else {
        const vdnn_step *st = &p->steps[v->step];
        const bool named = (st->kind == VDNN_STEP_FWD || st->kind == VDNN_STEP_BWD) && st->layer > 0 &&
                           st->layer < p->n_layers;
        snprintf(where, sizeof where, "step %d (%s%s%s), action %d", v->step, step_kind(st->kind), named ? " " : "",
                 named ? p->g->layers[st->layer].name : "", v->action);
    }
    return vdnn_fail(v->err, VDNN_ERR_INVALID_ARG, "plan validation: %s: %s", where, what);
}

static const char *sname(const validator *v, int x) { return v->p->st[x].name; }

/* Policy um keeps a swapped storage at its own managed range: no block, always addressable. */
static bool managed(const validator *v, int x) { return v->um && v->p->st[x].cls == VDNN_CLASS_SWAP; }

static size_t host_end(const vdnn_storage *x) { return x->host_offset + vdnn_align_up(x->bytes); }

/* ---- Indices: everything the walk follows must name something the plan has. ---- */

static bool storage_ok(const vdnn_plan_t *p, int x, bool none_ok)
{
    return (none_ok && x == -1) || (x >= 0 && x < p->n_storages);
}

static vdnn_status check_indices(validator *v)
{
    const vdnn_plan_t *p = v->p;
    if (p->n_steps < 0 || p->n_actions < 0 || p->n_blocks < 0 || p->n_events < 0 || !p->g ||
        p->n_layers != p->g->n_layers)
        return bad(v, "the plan's counts are inconsistent");
    for (int b = 0; b < p->n_blocks; b++)
        if (!storage_ok(p, p->blocks[b].storage, false))
            return bad(v, "block %d names storage %d", b, p->blocks[b].storage);
    for (int s = 0; s < p->n_steps; s++) {
        const vdnn_step *st = &p->steps[s];
        v->step = s;
        v->action = 0;
        if (st->first_action < 0 || st->n_actions < 0 || st->first_action + st->n_actions > p->n_actions)
            return bad(v, "its actions [%d, +%d) lie outside the plan's %d", st->first_action, st->n_actions,
                       p->n_actions);
        if ((st->kind == VDNN_STEP_FWD || st->kind == VDNN_STEP_BWD) && (st->layer < 1 || st->layer >= p->n_layers))
            return bad(v, "the step names layer %d", st->layer);
        if (!storage_ok(p, st->ws, true)) return bad(v, "the step's scratch is storage %d", st->ws);
        for (int i = 0; i < VDNN_MAX_INPUTS; i++)
            if (!storage_ok(p, st->dx[i], true)) return bad(v, "input %d's gradient is storage %d", i, st->dx[i]);
        for (int k = 0; k < st->n_actions; k++) {
            const vdnn_action *a = &p->actions[st->first_action + k];
            v->action = k;
            bool ok = true;
            switch (a->kind) {
            case VDNN_ACT_ALLOC:
            case VDNN_ACT_FREE: ok = a->a >= 0 && a->a < p->n_blocks; break;
            case VDNN_ACT_OFFLOAD:
            case VDNN_ACT_PREFETCH: ok = storage_ok(p, a->a, false) && a->event >= 0 && a->event < p->n_events; break;
            case VDNN_ACT_WAIT: ok = storage_ok(p, a->a, false) && a->event >= 0 && a->event < p->n_events; break;
            case VDNN_ACT_COMPUTE: break;
            case VDNN_ACT_ACCUM: ok = storage_ok(p, a->a, false) && storage_ok(p, a->b, false); break;
            case VDNN_ACT_RECOMPUTE: ok = a->a >= 1 && a->a < p->n_layers && storage_ok(p, a->b, true); break;
            default: ok = false;
            }
            if (!ok)
                return bad(v, "action kind %d names %d, %d, event %d: out of range", (int)a->kind, a->a, a->b,
                           a->event);
        }
    }
    v->step = -1;
    return VDNN_OK;
}

/* ---- What stays put: block sizes and bounds, held copies, events' owners, host ranges' bounds. ---- */

/* Insertion sort of block indices by offset: place() lays the persistent blocks out in block order, so this is
 * linear on the plans it sees, and it needs no context pointer (qsort has none, and a global would be state). */
static void sort_blocks(const vdnn_plan_t *p, int *idx, int n)
{
    for (int i = 1; i < n; i++) {
        int x = idx[i], j = i;
        while (j > 0 && p->blocks[idx[j - 1]].offset > p->blocks[x].offset) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = x;
    }
}

static bool overlap(size_t a0, size_t a1, size_t b0, size_t b1) { return a0 < b1 && b0 < a1; }

static vdnn_status check_layout(validator *v)
{
    const vdnn_plan_t *p = v->p;
    const int H = p->held_batches > 1 ? p->held_batches : 1;
    size_t held_lo = SIZE_MAX, held_hi = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        const vdnn_block *k = &p->blocks[b];
        const vdnn_storage *x = &p->st[k->storage];
        if (x->streamed) return bad(v, "the streamed input '%s' has a device block", x->name);
        if (managed(v, k->storage)) return bad(v, "'%s' lives in the managed pool but has a device block", x->name);
        if (k->bytes < x->bytes)
            return bad(v, "the block of '%s' holds %zu bytes, the storage needs %zu", x->name, k->bytes, x->bytes);
        if (!p->placed) continue;
        const size_t top = k->offset + k->bytes + (k->held ? (size_t)(H - 1) * p->held_stride : 0);
        if (top > p->peak_device_bytes)
            return bad(v, "the block of '%s' [%zu, %zu) ends beyond the arena's peak %zu", x->name, k->offset,
                       k->offset + k->bytes, p->peak_device_bytes);
        if (!x->persistent && k->offset < p->req.variable_base)
            return bad(v, "the block of '%s' at %zu lies below the variable base %zu (another plan's state)", x->name,
                       k->offset, p->req.variable_base);
        if (k->held) {
            if (k->offset < held_lo) held_lo = k->offset;
            if (k->offset + k->bytes > held_hi) held_hi = k->offset + k->bytes;
        }
    }
    if (p->placed && H > 1 && held_hi > 0) {
        /* Micro-batch j's held copies sit j strides up and are live while the others run: they must not reach
         * the next micro-batch's, and nothing else may sit where any of them does. */
        if (held_hi - held_lo > p->held_stride)
            return bad(v, "the held blocks span %zu bytes, more than the stride %zu between micro-batches' copies",
                       held_hi - held_lo, p->held_stride);
        const size_t region_hi = held_hi + (size_t)(H - 1) * p->held_stride;
        for (int b = 0; b < p->n_blocks; b++) {
            const vdnn_block *k = &p->blocks[b];
            if (!k->held && overlap(k->offset, k->offset + k->bytes, held_lo, region_hi))
                return bad(v, "the block of '%s' [%zu, %zu) lies among the held micro-batches' copies [%zu, %zu)",
                           sname(v, k->storage), k->offset, k->offset + k->bytes, held_lo, region_hi);
        }
    }
    /* Persistent blocks are live all the time: disjoint among themselves (checked once here, sorted for the
     * walk's lookups). */
    for (int b = 0; b < p->n_blocks; b++)
        if (p->st[p->blocks[b].storage].persistent) v->pers[v->n_pers++] = b;
    sort_blocks(p, v->pers, v->n_pers);
    for (int i = 1; p->placed && i < v->n_pers; i++) {
        const vdnn_block *a = &p->blocks[v->pers[i - 1]], *b = &p->blocks[v->pers[i]];
        if (a->offset + a->bytes > b->offset)
            return bad(v, "the persistent blocks of '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", sname(v, a->storage),
                       a->offset, a->offset + a->bytes, sname(v, b->storage), b->offset, b->offset + b->bytes);
    }

    /* Each event belongs to one storage's copies; a streamed input's chunks have events of their own. */
    for (int e = 0; e < p->n_events; e++) v->owner[e] = -1;
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *x = &p->st[i];
        if (!x->streamed) continue;
        if (x->layer < 1 || x->layer >= p->n_layers || p->ls[x->layer].xs != i)
            return bad(v, "the streamed input '%s' belongs to no layer that streams", x->name);
        int chunks;
        vdnn_plan_stream_chunk(p, x->layer, &chunks);
        if (x->first_event < 0 || x->first_event + chunks > p->n_events)
            return bad(v, "the streamed input '%s' has chunk events [%d, %d), the plan %d", x->name, x->first_event,
                       x->first_event + chunks, p->n_events);
        for (int c = 0; c < chunks; c++) {
            const int e = x->first_event + c;
            if (v->owner[e] >= 0)
                return bad(v, "event %d is chunk %d of '%s' and also used by '%s'", e, c, x->name,
                           sname(v, v->owner[e]));
            v->owner[e] = i;
        }
    }
    for (int k = 0; k < p->n_actions; k++) {
        const vdnn_action *a = &p->actions[k];
        if (a->kind != VDNN_ACT_OFFLOAD && a->kind != VDNN_ACT_PREFETCH && a->kind != VDNN_ACT_WAIT) continue;
        if (v->owner[a->event] < 0) v->owner[a->event] = a->a;
        else if (v->owner[a->event] != a->a)
            return bad(v, "event %d is used by the copies of both '%s' and '%s'", a->event,
                       sname(v, v->owner[a->event]), sname(v, a->a));
    }

    if (!p->placed) return VDNN_OK;
    /* Host ranges inside their pool: a micro-batch's share of the pinned pool, or the managed pool. */
    const size_t pool = H > 1 ? p->host_stride : p->host_bytes;
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *x = &p->st[i];
        if (managed(v, i)) {
            if (x->host_offset + x->bytes > p->managed_bytes)
                return bad(v, "'%s' [%zu, +%zu) lies beyond the managed pool of %zu bytes", x->name, x->host_offset,
                           x->bytes, p->managed_bytes);
            for (int j = 0; j < i; j++)
                if (managed(v, j) && overlap(x->host_offset, x->host_offset + x->bytes, p->st[j].host_offset,
                                             p->st[j].host_offset + p->st[j].bytes))
                    return bad(v, "'%s' and '%s' overlap in the managed pool", x->name, p->st[j].name);
        } else if (x->homed || x->streamed || x->cls == VDNN_CLASS_SWAP) {
            if (host_end(x) > pool)
                return bad(v, "the host range of '%s' [%zu, %zu) lies beyond the pool's %zu bytes", x->name,
                           x->host_offset, host_end(x), pool);
        }
    }
    return VDNN_OK;
}

/* ---- Ranges in use during the walk. ---- */

static vdnn_status take_host(validator *v, int x)
{
    st_state *s = &v->s[x];
    if (s->host_live || !v->p->placed) {
        s->host_live = true;
        return VDNN_OK;
    }
    const vdnn_storage *a = &v->p->st[x];
    for (int i = 0; i < v->n_hlive; i++) {
        const vdnn_storage *b = &v->p->st[v->hlive[i]];
        if (overlap(a->host_offset, host_end(a), b->host_offset, host_end(b)))
            return bad(v, "the host range of '%s' [%zu, %zu) overlaps that of '%s' [%zu, %zu), in use at the same time",
                       a->name, a->host_offset, host_end(a), b->name, b->host_offset, host_end(b));
    }
    v->hlive[v->n_hlive++] = x;
    s->host_live = true;
    return VDNN_OK;
}

static void give_host(validator *v, int x)
{
    v->s[x].host_live = false;
    for (int i = 0; i < v->n_hlive; i++)
        if (v->hlive[i] == x) {
            v->hlive[i] = v->hlive[--v->n_hlive];
            return;
        }
}

static vdnn_status alloc_block(validator *v, int b)
{
    const vdnn_plan_t *p = v->p;
    const vdnn_block *k = &p->blocks[b];
    st_state *s = &v->s[k->storage];
    if (k->begin != v->step)
        return bad(v, "allocates the block of '%s', planned to be live from step %d", sname(v, k->storage), k->begin);
    if (s->block >= 0)
        return bad(v, "allocates a second block for '%s' while its block %d is live", sname(v, k->storage), s->block);
    if (p->placed) {
        const size_t lo = k->offset, hi = k->offset + k->bytes;
        for (int i = 0; i < v->n_live; i++) {
            const vdnn_block *o = &p->blocks[v->live[i]];
            if (overlap(lo, hi, o->offset, o->offset + o->bytes))
                return bad(v,
                           "the block of '%s' [%zu, %zu) overlaps the block of '%s' [%zu, %zu), live at the same time",
                           sname(v, k->storage), lo, hi, sname(v, o->storage), o->offset, o->offset + o->bytes);
        }
        /* The last persistent block starting below hi is the only one that can reach into [lo, hi). */
        int l = 0, r = v->n_pers;
        while (l < r) {
            int m = (l + r) / 2;
            if (p->blocks[v->pers[m]].offset < hi) l = m + 1;
            else r = m;
        }
        if (l > 0) {
            const vdnn_block *o = &p->blocks[v->pers[l - 1]];
            if (overlap(lo, hi, o->offset, o->offset + o->bytes))
                return bad(v, "the block of '%s' [%zu, %zu) overlaps the persistent block of '%s' [%zu, %zu)",
                           sname(v, k->storage), lo, hi, sname(v, o->storage), o->offset, o->offset + o->bytes);
        }
    }
    v->live[v->n_live++] = b;
    s->block = b;
    s->dev = DEV_EMPTY;
    return VDNN_OK;
}

static vdnn_status free_block(validator *v, int b)
{
    const vdnn_block *k = &v->p->blocks[b];
    const int x = k->storage;
    st_state *s = &v->s[x];
    if (s->block != b) return bad(v, "frees the block of '%s', which is not live", sname(v, x));
    if (k->end != v->step)
        return bad(v, "frees the block of '%s', planned to be live until step %d", sname(v, x), k->end);
    if (s->dev == DEV_INCOMING)
        return bad(v, "frees the block of '%s' while its prefetch (event %d) is in flight: the memory may be reused "
                      "before the copy ends", sname(v, x), s->dev_event);
    if (s->host == HOST_OUTGOING)
        return bad(v, "frees the block of '%s' before its copy out (event %d) is waited for: the memory may be "
                      "reused while the copy reads it", sname(v, x), s->host_event);
    /* A homed gradient is spent by its update: nothing to take home. */
    const vdnn_storage_kind kind = v->p->st[x].kind;
    if (v->p->st[x].homed && s->host == HOST_STALE && kind != VDNN_ST_WGRAD && kind != VDNN_ST_BGRAD)
        return bad(v, "frees the block of the homed '%s' after writing it, without copying it home: the update is "
                      "lost", sname(v, x));
    for (int i = 0; i < v->n_live; i++)
        if (v->live[i] == b) {
            v->live[i] = v->live[--v->n_live];
            break;
        }
    s->block = -1;
    s->dev = DEV_NONE;
    return VDNN_OK;
}

/* ---- Copies and waits. ---- */

static vdnn_status record(validator *v, const vdnn_action *a, bool in)
{
    ev_state *e = &v->ev[a->event];
    if (e->flight)
        return bad(v, "the copy of '%s' records event %d while the copy of '%s' that recorded it is not waited for",
                   sname(v, a->a), a->event, sname(v, e->storage));
    *e = (ev_state){a->a, in, true, true};
    return VDNN_OK;
}

static vdnn_status offload(validator *v, const vdnn_action *a)
{
    const int x = a->a;
    st_state *s = &v->s[x];
    if (managed(v, x)) return record(v, a, false); /* its pages migrate; the range stays the storage's */
    if (s->block < 0) return bad(v, "copies '%s' out while it has no device block", sname(v, x));
    if (s->dev == DEV_INCOMING)
        return bad(v, "copies '%s' out before its prefetch (event %d) is waited for", sname(v, x), s->dev_event);
    if (s->dev != DEV_VALID) return bad(v, "copies '%s' out, but its block holds no value yet", sname(v, x));
    if (s->host == HOST_OUTGOING) return bad(v, "copies '%s' out while its earlier copy out is in flight", sname(v, x));
    vdnn_status rc = record(v, a, false);
    if (rc == VDNN_OK && !v->p->st[x].homed) rc = take_host(v, x);
    s->host = HOST_OUTGOING;
    s->host_event = a->event;
    return rc;
}

static vdnn_status prefetch(validator *v, const vdnn_action *a)
{
    const int x = a->a;
    st_state *s = &v->s[x];
    if (managed(v, x)) return record(v, a, true);
    if (s->block < 0) return bad(v, "prefetches '%s' while it has no device block", sname(v, x));
    if (s->dev == DEV_INCOMING) return bad(v, "prefetches '%s' while its earlier prefetch is in flight", sname(v, x));
    if (s->host == HOST_OUTGOING)
        return bad(v, "prefetches '%s' while its copy out (event %d) is still writing the host copy", sname(v, x),
                   s->host_event);
    if (s->host != HOST_VALID)
        return bad(v, "prefetches '%s' from a host copy that %s", sname(v, x),
                   s->host == HOST_STALE ? "is older than its value" : "was never written");
    vdnn_status rc = record(v, a, true);
    s->dev = DEV_INCOMING;
    s->dev_event = a->event;
    return rc;
}

static vdnn_status wait_for(validator *v, const vdnn_action *a)
{
    ev_state *e = &v->ev[a->event];
    if (!e->recorded)
        return bad(v, "waits for event %d ('%s'), which no earlier copy records", a->event, sname(v, a->a));
    if (!e->flight) return VDNN_OK; /* waited for already: harmless */
    e->flight = false;
    const int x = e->storage;
    st_state *s = &v->s[x];
    if (managed(v, x)) return VDNN_OK;
    if (e->in && s->dev == DEV_INCOMING && s->dev_event == a->event) {
        s->dev = DEV_VALID;
        /* A swapped map's host copy has served its purpose: its range may go to another map. */
        if (!v->p->st[x].homed) {
            give_host(v, x);
            s->host = HOST_NONE;
        }
    } else if (!e->in && s->host == HOST_OUTGOING && s->host_event == a->event) {
        s->host = HOST_VALID;
    }
    return VDNN_OK;
}

/* ---- Reads and writes of the ops. ---- */

static const char *absent_hint(const validator *v, int x)
{
    const vdnn_storage *s = &v->p->st[x];
    if (s->homed) return " (homed in host memory and not fetched)";
    if (s->cls == VDNN_CLASS_SWAP) return " (swapped out and not fetched)";
    if (s->cls == VDNN_CLASS_RECOMPUTE) return " (dropped and not recomputed)";
    return "";
}

static vdnn_status read_st(validator *v, const char *who, int x)
{
    if (x < 0) return VDNN_OK;
    const st_state *s = &v->s[x];
    if (managed(v, x)) {
        if (s->dev != DEV_VALID) return bad(v, "%s reads '%s', which holds no value yet", who, sname(v, x));
        return VDNN_OK;
    }
    if (s->block < 0) return bad(v, "%s reads '%s', which is not on the device%s", who, sname(v, x), absent_hint(v, x));
    if (s->dev == DEV_INCOMING)
        return bad(v, "%s reads '%s' before waiting for its prefetch (event %d)", who, sname(v, x), s->dev_event);
    if (s->dev != DEV_VALID)
        return bad(v, "%s reads '%s', whose block holds no value yet%s", who, sname(v, x), absent_hint(v, x));
    return VDNN_OK;
}

static vdnn_status write_st(validator *v, const char *who, int x)
{
    if (x < 0) return VDNN_OK;
    st_state *s = &v->s[x];
    if (!managed(v, x)) {
        if (s->block < 0) return bad(v, "%s writes '%s', which has no device block", who, sname(v, x));
        if (s->dev == DEV_INCOMING)
            return bad(v, "%s writes '%s' while its prefetch (event %d) is in flight", who, sname(v, x), s->dev_event);
        if (s->host == HOST_OUTGOING)
            return bad(v, "%s writes '%s' while its copy out (event %d) still reads it", who, sname(v, x),
                       s->host_event);
        if (s->host == HOST_VALID) s->host = HOST_STALE;
    }
    s->dev = DEV_VALID;
    return VDNN_OK;
}

/* One op's accesses, reads in pass 0 and writes in pass 1, so that an op updating a storage in place reads the
 * value it had. */
typedef struct op_pass {
    validator *v;
    const char *who;
    int pass;
    vdnn_status rc;
} op_pass;

static void acc(op_pass *o, int x, bool r, bool w)
{
    if (o->rc != VDNN_OK || x < 0) return;
    if (o->pass == 0 && r) o->rc = read_st(o->v, o->who, x);
    if (o->pass == 1 && w) o->rc = write_st(o->v, o->who, x);
}

/* As exec.c's compute_forward: a recompute leaves the statistics alone and uses its own scratch. */
static void forward_access(op_pass *o, int l, bool recompute, int ws)
{
    const vdnn_plan_t *p = o->v->p;
    const vdnn_layer *ly = &p->g->layers[l];
    const vdnn_layer_storage *s = &p->ls[l];
    for (int i = 0; i < ly->n_inputs; i++) acc(o, p->ls[ly->inputs[i]].out, true, false);
    acc(o, s->w, true, false);
    acc(o, s->b, true, false);
    acc(o, s->stats, true, p->training && !recompute);
    acc(o, s->out, false, true);
    acc(o, s->aux, false, true);
    acc(o, ws, false, true);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) {
        acc(o, p->labels, true, false);
        acc(o, p->loss, false, true);
    }
}

/* SGD of layer l: parameters and momentum in place, from the gradients. */
static void update_access(op_pass *o, int l)
{
    const vdnn_layer_storage *s = &o->v->p->ls[l];
    const vdnn_layer *ly = &o->v->p->g->layers[l];
    /* A tied layer's shared parameters are its owner's, updated (from the summed gradient) with that layer; a
     * table's copy is updated by its owner's stage and comes back from it. */
    const bool tied = ly->p.tie != 0 || ly->weight_of[0], tied_b = ly->p.tie != 0 && !ly->n_bias;
    acc(o, tied ? -1 : s->dw, true, false);
    acc(o, tied_b ? -1 : s->db, true, false);
    acc(o, tied ? -1 : s->w, true, true);
    acc(o, tied_b ? -1 : s->b, true, true);
    acc(o, s->vw, true, true);
    acc(o, s->vb, true, true);
    acc(o, s->vw2, true, true);
    acc(o, s->vb2, true, true);
}

/* An update step scales its layer's gradients (clipping) before the update reads them. */
static void clip_access(op_pass *o, int l)
{
    const vdnn_plan_t *p = o->v->p;
    if (p->g->layers[l].n_weight) acc(o, p->ls[l].dw, true, true);
    acc(o, p->ls[l].db, true, true);
}

/* As exec.c's compute_backward (a later micro-batch writes dwm / dbm, which are then summed into dw / db). */
static void backward_access(op_pass *o, const vdnn_step *st)
{
    const vdnn_plan_t *p = o->v->p;
    const int l = st->layer;
    const vdnn_layer *ly = &p->g->layers[l];
    const vdnn_layer_storage *s = &p->ls[l];
    const vdnn_op_info *info = &p->info[l];
    bool wanted = s->dw >= 0 || s->db >= 0;
    for (int i = 0; i < ly->n_inputs; i++) wanted |= st->dx[i] >= 0;
    if (!wanted) return;
    for (int i = 0; i < ly->n_inputs; i++)
        if (info->bwd_needs_x && s->xs < 0) acc(o, p->ls[ly->inputs[i]].out, true, false);
    if (info->bwd_needs_y) acc(o, s->out, true, false);
    acc(o, s->w, true, false);
    acc(o, s->b, true, false);
    acc(o, s->stats, true, false);
    acc(o, s->aux, true, false);
    acc(o, s->grad, true, false);
    if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) acc(o, p->labels, true, false);
    for (int i = 0; i < ly->n_inputs; i++) acc(o, st->dx[i], false, true);
    acc(o, st->ws, false, true);
    acc(o, s->xb, false, true);
    /* A tied layer writes its part of the shared gradient afresh in every micro-batch (it has no dwm, dbm). */
    acc(o, s->dw, p->micro_batches > 1 && s->dwm >= 0, true);
    acc(o, s->db, p->micro_batches > 1 && s->dbm >= 0, true);
    acc(o, s->dwm, false, true);
    acc(o, s->dbm, false, true);
    /* Then adds it (written by the op just before) to the readers' sum; the last reader wrote the sum itself... */
    if (ly->p.tie) {
        const vdnn_layer_storage *t = &p->ls[ly->p.tie];
        if (s->dw != t->dwt) acc(o, t->dwt, true, true);
        if (t->dbt >= 0 && s->db != t->dbt) acc(o, t->dbt, true, true);
    }
    /* ...which the owner adds to its own after its op. */
    acc(o, s->dwt, true, false);
    acc(o, s->dbt, true, false);
}

static vdnn_status run_op(validator *v, const char *who, const vdnn_step *st, const vdnn_action *a)
{
    const vdnn_plan_t *p = v->p;
    op_pass o = {v, who, 0, VDNN_OK};
    for (o.pass = 0; o.pass < 2 && o.rc == VDNN_OK; o.pass++) {
        if (a->kind == VDNN_ACT_RECOMPUTE) {
            forward_access(&o, a->a, true, a->b);
        } else if (a->kind == VDNN_ACT_ACCUM) {
            acc(&o, a->a, true, true);
            acc(&o, a->b, true, false);
        } else if (st->kind == VDNN_STEP_LOAD) {
            acc(&o, p->ls[0].out, false, true);
            acc(&o, p->labels, false, true);
        } else if (st->kind == VDNN_STEP_FWD) {
            forward_access(&o, st->layer, false, st->ws);
        } else if (st->kind == VDNN_STEP_BWD) {
            backward_access(&o, st);
        } else if (st->layer > 0) {
            if (p->update_steps) clip_access(&o, st->layer);
            update_access(&o, st->layer);
        } else if (!p->fused_update) {
            for (int l = 1; l < p->n_layers; l++) update_access(&o, l);
        }
    }
    /* The fused update follows the backward op in the same step: it reads the gradients that op wrote. */
    if (a->kind == VDNN_ACT_COMPUTE && st->kind == VDNN_STEP_BWD && p->fused_update && p->ls[st->layer].upd < 0)
        for (o.pass = 0; o.pass < 2 && o.rc == VDNN_OK; o.pass++) update_access(&o, st->layer);
    return o.rc;
}

/* A layer that streams its input: forward copies it out chunk by chunk into its host range (the chunk events
 * are the step's own), backward reads it back through its chunk buffers. */
static vdnn_status stream_step(validator *v, const vdnn_step *st, bool after)
{
    const vdnn_plan_t *p = v->p;
    if (p->training == false || (st->kind != VDNN_STEP_FWD && st->kind != VDNN_STEP_BWD)) return VDNN_OK;
    const int xs = p->ls[st->layer].xs;
    if (xs < 0) return VDNN_OK;
    st_state *s = &v->s[xs];
    if (st->kind == VDNN_STEP_FWD) {
        if (!after) return VDNN_OK;
        s->host = HOST_VALID;
        return take_host(v, xs);
    }
    if (!after) {
        if (s->host != HOST_VALID || !s->host_live)
            return bad(v, "reads the streamed input '%s' back, but its forward never saved it", sname(v, xs));
        return VDNN_OK;
    }
    give_host(v, xs);
    s->host = HOST_NONE;
    return VDNN_OK;
}

static vdnn_status walk(validator *v)
{
    const vdnn_plan_t *p = v->p;
    char who[160];
    for (int i = 0; i < p->n_storages; i++) {
        v->s[i] = (st_state){.block = -1, .dev = DEV_NONE, .host = HOST_NONE, .dev_event = -1, .host_event = -1};
        /* Parameters homed in host memory start there; they are taken when the net is made, like persistent blocks. */
        if (p->st[i].homed) {
            v->s[i].host = HOST_VALID;
            vdnn_status rc = take_host(v, i);
            if (rc != VDNN_OK) return rc;
        }
    }
    for (int b = 0; b < p->n_blocks; b++) {
        const int x = p->blocks[b].storage;
        if (!p->st[x].persistent) continue;
        /* Persistent storages (parameters, statistics, labels, loss, kept gradients) hold their value across
         * iterations. */
        v->s[x].block = b;
        v->s[x].dev = DEV_VALID;
    }
    for (int s = 0; s < p->n_steps; s++) {
        const vdnn_step *st = &p->steps[s];
        v->step = s;
        for (int k = 0; k < st->n_actions; k++) {
            const vdnn_action *a = &p->actions[st->first_action + k];
            v->action = k;
            vdnn_status rc = VDNN_OK;
            switch (a->kind) {
            case VDNN_ACT_ALLOC: rc = alloc_block(v, a->a); break;
            case VDNN_ACT_FREE: rc = free_block(v, a->a); break;
            case VDNN_ACT_OFFLOAD: rc = offload(v, a); break;
            case VDNN_ACT_PREFETCH: rc = prefetch(v, a); break;
            case VDNN_ACT_WAIT: rc = wait_for(v, a); break;
            case VDNN_ACT_COMPUTE:
                rc = stream_step(v, st, false);
                if (rc == VDNN_OK) rc = run_op(v, "the op", st, a);
                if (rc == VDNN_OK) rc = stream_step(v, st, true);
                break;
            case VDNN_ACT_ACCUM: rc = run_op(v, "the accumulation", st, a); break;
            case VDNN_ACT_RECOMPUTE:
                snprintf(who, sizeof who, "the recompute of %s", p->g->layers[a->a].name);
                rc = run_op(v, who, st, a);
                break;
            }
            if (rc != VDNN_OK) return rc;
        }
    }
    v->step = p->n_steps;
    for (int e = 0; e < p->n_events; e++)
        if (v->ev[e].flight)
            return bad(v, "the copy of '%s' (event %d) is never waited for", sname(v, v->ev[e].storage), e);
    return VDNN_OK;
}

vdnn_status vdnn_plan_validate(const vdnn_plan_t *p, vdnn_error *err)
{
    validator v = {.p = p, .err = err, .step = -1, .um = p->policy == VDNN_POLICY_UM};
    const size_t ns = (size_t)p->n_storages + 1, nb = (size_t)p->n_blocks + 1, ne = (size_t)p->n_events + 1;
    v.s = calloc(ns, sizeof *v.s);
    v.ev = calloc(ne, sizeof *v.ev);
    v.owner = calloc(ne, sizeof *v.owner);
    v.live = calloc(nb, sizeof *v.live);
    v.pers = calloc(nb, sizeof *v.pers);
    v.hlive = calloc(ns, sizeof *v.hlive);
    vdnn_status rc = VDNN_OK;
    if (!v.s || !v.ev || !v.owner || !v.live || !v.pers || !v.hlive)
        rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory validating the plan");
    if (rc == VDNN_OK) rc = check_indices(&v);
    if (rc == VDNN_OK) rc = check_layout(&v);
    if (rc == VDNN_OK) rc = walk(&v);
    free(v.s);
    free(v.ev);
    free(v.owner);
    free(v.live);
    free(v.pers);
    free(v.hlive);
    return rc;
}
