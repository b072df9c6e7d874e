/* Shared machinery of the profile-guided planners: classifications saved and restored, judged by
 * simulation, swap-ins scheduled as early as memory allows, a lower bound, the smallest budget. */
#include "plan/planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/policy.h"
#include "mem/offsets.h"
#include "plan/simulate.h"

/* Placement adds fragmentation on top of the live bytes; quick judgements keep this share of the budget
 * free (at most a tenth of what the persistent blocks leave). */
#define FRAGMENTATION_MARGIN 0.03
/* Placing blocks costs O(blocks^2): a search places at most about this many blocks in all, to check new
 * bests and to answer doubtful vdnn_search_fits questions. */
#define SEARCH_PLACED_BLOCKS 200000L

vdnn_status vdnn_classes_save(const vdnn_plan_t *p, vdnn_classes *c, vdnn_error *err)
{
    int n = p->n_storages_analyzed;
    if (c->n != n) {
        vdnn_classes_release(c);
        c->cls = malloc(sizeof *c->cls * (size_t)n);
        c->prefetch_step = malloc(sizeof(int) * (size_t)n);
        c->recompute_step = malloc(sizeof(int) * (size_t)n);
        if (!c->cls || !c->prefetch_step || !c->recompute_step) {
            vdnn_classes_release(c);
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory in the planner");
        }
        c->n = n;
    }
    if (!c->algo) {
        c->algo = malloc(sizeof(int) * (size_t)p->n_layers);
        if (!c->algo) {
            vdnn_classes_release(c);
            return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory in the planner");
        }
    }
    memcpy(c->algo, p->algo, sizeof(int) * (size_t)p->n_layers);
    for (int i = 0; i < n; i++) {
        c->cls[i] = p->st[i].cls;
        c->prefetch_step[i] = p->st[i].prefetch_step;
        c->recompute_step[i] = p->st[i].recompute_step;
    }
    return VDNN_OK;
}

void vdnn_classes_load(vdnn_plan_t *p, const vdnn_classes *c)
{
    if (c->algo)
        for (int l = 1; l < p->n_layers; l++) vdnn_plan_set_algo(p, l, c->algo[l]);
    for (int i = 0; i < c->n; i++) {
        p->st[i].cls = c->cls[i];
        p->st[i].prefetch_step = c->prefetch_step[i];
        p->st[i].recompute_step = c->recompute_step[i];
    }
}

void vdnn_classes_release(vdnn_classes *c)
{
    free(c->cls);
    free(c->prefetch_step);
    free(c->recompute_step);
    free(c->algo);
    memset(c, 0, sizeof *c);
}

vdnn_status vdnn_search_begin(vdnn_search *s, vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->g = g;
    s->prof = p->req.profile;
    if (!s->prof) {
        /* No measurements: a generic GPU on a PCIe gen3 link, the papers' setting. */
        vdnn_status rc = vdnn_profile_estimate_default(g, &s->own_profile, err);
        if (rc != VDNN_OK) return rc;
        s->prof = &s->own_profile;
    }
    s->best_time = s->placed_time = 1e300;
    s->least_peak = SIZE_MAX;
    size_t persistent = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].persistent) persistent += vdnn_align_up(p->st[i].bytes);
    if (p->req.memory.budget != SIZE_MAX && p->req.memory.budget > persistent) {
        /* Persistent blocks are packed back to back and fragment nothing: where they take most of the
         * budget, a share of the whole budget would leave nothing to plan with. */
        double whole = (double)p->req.memory.budget * FRAGMENTATION_MARGIN, variable = (double)(p->req.memory.budget - persistent) * 0.1;
        s->margin = (size_t)(whole < variable ? whole : variable);
        s->max_margin = (p->req.memory.budget - persistent) / 2;
    }
    return VDNN_OK;
}

void vdnn_search_release(vdnn_search *s)
{
    vdnn_classes_release(&s->best);
    for (int k = 0; k < VDNN_SEARCH_EARLIER; k++) vdnn_classes_release(&s->earlier[k]);
    vdnn_classes_release(&s->placed);
    vdnn_classes_release(&s->least);
    if (s->prof == &s->own_profile) vdnn_profile_release(&s->own_profile);
}

/* Places the current classification's blocks: whether it really fits. Where placement fragments more
 * than the margin allowed for, the margin grows to what it took, so that swap-ins scheduled early (and
 * judgements by the margin) leave that much room from then on. */
static vdnn_status place_check(vdnn_search *s, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc = vdnn_plan_finalize_ex(p, true, err);
    s->placements++;
    s->placed_blocks += p->n_blocks;
    s->last_fit = rc == VDNN_OK && p->feasible;
    s->last_placed = true;
    if (rc == VDNN_OK && p->peak_device_bytes > s->last_live + s->margin && s->last_live + s->margin <= p->req.memory.budget) {
        size_t grown = p->peak_device_bytes - s->last_live;
        s->margin = grown < s->max_margin ? grown : s->max_margin;
    }
    return rc;
}

/* Whether the last evaluation fits by the margin alone: 1 yes, 0 no (live bytes over the budget:
 * placement never packs below them), -1 doubtful. */
static int margin_fit(const vdnn_search *s)
{
    const vdnn_plan_t *p = s->p;
    if (s->last_live > p->req.memory.budget) return 0;
    size_t host = 0; /* before packing: the sum of swapped bytes, at least the packed pool */
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) host += vdnn_align_up(p->st[i].bytes);
    host *= (size_t)p->held_batches; /* every held micro-batch has its own host copies */
    host += p->home_bytes;
    return s->last_live + s->margin <= p->req.memory.budget && host <= p->req.memory.host_budget ? 1 : -1;
}

vdnn_status vdnn_search_fits(vdnn_search *s, bool *fits, vdnn_error *err)
{
    vdnn_status rc = VDNN_OK;
    if (s->last_fit < 0) s->last_fit = margin_fit(s);
    if (s->last_fit < 0) {
        if (s->placed_blocks < SEARCH_PLACED_BLOCKS) rc = place_check(s, err);
        else s->last_fit = 0; /* out of placements: a doubtful one does not fit */
    }
    *fits = s->last_fit == 1;
    return rc;
}

/* A new best: the one it replaces becomes the first earlier best (the oldest is dropped). */
static vdnn_status new_best(vdnn_search *s, double t, vdnn_error *err)
{
    if (s->have_best) {
        vdnn_classes last = s->earlier[VDNN_SEARCH_EARLIER - 1];
        for (int k = VDNN_SEARCH_EARLIER - 1; k > 0; k--) {
            s->earlier[k] = s->earlier[k - 1];
            s->earlier_time[k] = s->earlier_time[k - 1];
        }
        s->earlier[0] = s->best;
        s->earlier_time[0] = s->best_time;
        s->best = last;
        if (s->n_earlier < VDNN_SEARCH_EARLIER) s->n_earlier++;
    }
    s->best_time = t;
    s->best_peak = s->last_live;
    s->have_best = true;
    return vdnn_classes_save(s->p, &s->best, err);
}

vdnn_status vdnn_search_placed(vdnn_search *s, double t, vdnn_error *err)
{
    if (t >= s->placed_time) return VDNN_OK;
    s->placed_time = t;
    s->have_placed = true;
    return vdnn_classes_save(s->p, &s->placed, err);
}

vdnn_status vdnn_search_eval(vdnn_search *s, double *time, bool *fits, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    if (rc != VDNN_OK) return rc;
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    rc = vdnn_simulate(p, s->g, s->prof, &tl, err);
    double t = tl.iteration_s;
    vdnn_timeline_release(&tl);
    if (rc != VDNN_OK) return rc;
    s->evaluations++;
    s->last_live = p->peak_device_bytes;
    s->last_fit = -1;
    s->last_placed = false;
    if (t < s->best_time) {
        /* A candidate for the best is placed while placements last; after that one within the margin
         * is taken as it is (and placed by vdnn_search_finish, which falls back on earlier bests). */
        s->last_fit = margin_fit(s);
        if (s->last_fit != 0 && s->placed_blocks < SEARCH_PLACED_BLOCKS) rc = place_check(s, err);
        if (rc == VDNN_OK && s->last_fit == 1) rc = new_best(s, t, err);
        if (rc == VDNN_OK && s->last_fit == 1 && s->last_placed) rc = vdnn_search_placed(s, t, err);
    }
    if (rc == VDNN_OK && s->last_live < s->least_peak) {
        rc = vdnn_classes_save(p, &s->least, err);
        s->least_peak = s->last_live;
    }
    if (time) *time = t;
    if (rc == VDNN_OK && fits) rc = vdnn_search_fits(s, fits, err);
    return rc;
}

vdnn_status vdnn_search_eval_early(vdnn_search *s, double *time, bool *fits, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    for (int i = 0; i < p->n_storages_analyzed; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) p->st[i].prefetch_step = -1;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    if (rc == VDNN_OK) rc = vdnn_schedule_prefetch_early(p, s->margin, err);
    if (rc == VDNN_OK) rc = vdnn_search_eval(s, time, fits, err);
    return rc;
}

vdnn_status vdnn_search_stalls(vdnn_search *s, double *offload_stall, double *prefetch_stall, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    for (int i = 0; i < p->n_storages_analyzed; i++) offload_stall[i] = prefetch_stall[i] = 0;
    vdnn_status rc = vdnn_plan_finalize_ex(p, false, err);
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    if (rc == VDNN_OK) rc = vdnn_simulate(p, s->g, s->prof, &tl, err);
    for (int k = 0; rc == VDNN_OK && k < tl.n_spans; k++) {
        const vdnn_span *sp = &tl.spans[k];
        if (sp->kind != VDNN_SPAN_STALL || sp->action < 0) continue;
        const vdnn_action *a = &p->actions[sp->action];
        if (a->kind != VDNN_ACT_WAIT || a->a < 0 || a->a >= p->n_storages_analyzed) continue;
        double d = sp->end - sp->start;
        /* Events come in pairs per swapped storage: even = copy out, odd = copy back. */
        if (a->event % 2 == 0) offload_stall[a->a] += d;
        else prefetch_stall[a->a] += d;
    }
    vdnn_timeline_release(&tl);
    return rc;
}

vdnn_status vdnn_search_finish(vdnn_search *s, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    /* The best and the earlier bests (faster than the fastest classification known to place) in turn,
     * until one fits once placed; then that one; then the least memory. */
    for (int k = -1; s->have_best && k < s->n_earlier; k++) {
        const double t = k < 0 ? s->best_time : s->earlier_time[k];
        if (s->have_placed && t >= s->placed_time) break;
        vdnn_classes_load(p, k < 0 ? &s->best : &s->earlier[k]);
        vdnn_status rc = vdnn_plan_finalize(p, err);
        if (rc != VDNN_OK || p->feasible) return rc;
    }
    vdnn_classes_load(p, s->have_placed ? &s->placed : &s->least);
    vdnn_status rc = vdnn_plan_finalize(p, err);
    /* The plan kept gets the tight placement (vdnn_plan_build): where the quick one does not fit, the tight one may,
     * and a caller comparing planners (auto) must see the plan as it will be. */
    if (rc == VDNN_OK && !p->feasible) rc = vdnn_plan_place_tight(p, err);
    return rc;
}

/* Live bytes per step with range additions and "the last step in a range above a threshold", both in
 * O(log steps): scheduling hundreds of swap-ins stays cheap on deep nets. mx[node] is the node's maximum
 * including its own pending addition, not its ancestors'. */
typedef struct max_tree {
    size_t *mx, *add;
} max_tree;

static void mt_build(max_tree *t, int node, int l, int r, const size_t *v)
{
    t->add[node] = 0;
    if (l == r) {
        t->mx[node] = v[l];
        return;
    }
    int m = l + (r - l) / 2;
    mt_build(t, 2 * node, l, m, v);
    mt_build(t, 2 * node + 1, m + 1, r, v);
    t->mx[node] = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
}

static void mt_add(max_tree *t, int node, int l, int r, int ql, int qr, size_t x)
{
    if (qr < l || r < ql) return;
    if (ql <= l && r <= qr) {
        t->mx[node] += x;
        t->add[node] += x;
        return;
    }
    int m = l + (r - l) / 2;
    mt_add(t, 2 * node, l, m, ql, qr, x);
    mt_add(t, 2 * node + 1, m + 1, r, ql, qr, x);
    size_t c = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
    t->mx[node] = c + t->add[node];
}

/* The last index in [ql, qr] whose value exceeds thr, or -1; acc: the ancestors' pending additions. */
static int mt_last_above(const max_tree *t, int node, int l, int r, int ql, int qr, size_t acc, size_t thr)
{
    if (qr < l || r < ql || t->mx[node] + acc <= thr) return -1;
    if (l == r) return l;
    int m = l + (r - l) / 2;
    acc += t->add[node];
    int k = mt_last_above(t, 2 * node + 1, m + 1, r, ql, qr, acc, thr);
    return k >= 0 ? k : mt_last_above(t, 2 * node, l, m, ql, qr, acc, thr);
}

typedef struct need_order {
    int need_step, storage;
} need_order;

static int by_need(const void *a, const void *b)
{
    const need_order *x = a, *y = b;
    if (x->need_step != y->need_step) return x->need_step < y->need_step ? -1 : 1;
    return x->storage < y->storage ? -1 : x->storage > y->storage;
}

vdnn_status vdnn_schedule_prefetch_early(vdnn_plan_t *p, size_t margin, vdnn_error *err)
{
    if (p->req.memory.budget == SIZE_MAX || p->n_steps < 1) return VDNN_OK;
    const int n_steps = p->n_steps;
    size_t *live = calloc((size_t)n_steps, sizeof(size_t));
    need_order *order = malloc(sizeof *order * (size_t)p->n_storages + 1);
    max_tree t = {calloc(4 * (size_t)n_steps, sizeof(size_t)), calloc(4 * (size_t)n_steps, sizeof(size_t))};
    if (!live || !order || !t.mx || !t.add) {
        free(live);
        free(order);
        free(t.mx);
        free(t.add);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory scheduling prefetches");
    }
    vdnn_plan_live_bytes(p, live);
    mt_build(&t, 1, 0, n_steps - 1, live);
    size_t limit = p->req.memory.budget > margin ? p->req.memory.budget - margin : 0;
    /* The earliest-needed first (ties in storage order): they gain most from an early start. */
    int n = 0;
    for (int i = 0; i < p->n_storages; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP) order[n++] = (need_order){p->st[i].need_step, i};
    qsort(order, (size_t)n, sizeof *order, by_need);
    const int first_bwd = p->n_layers; /* the first backward step */
    for (int k = 0; k < n; k++) {
        vdnn_storage *x = &p->st[order[k].storage];
        size_t bytes = vdnn_align_up(x->bytes);
        int lo = x->last_fwd_use + 1 > first_bwd ? x->last_fwd_use + 1 : first_bwd;
        int q = x->prefetch_step;
        /* Start the copy at the step after the last one before it that has no room for it. */
        if (bytes <= limit && lo <= q - 1) {
            int last_full = mt_last_above(&t, 1, 0, n_steps - 1, lo, q - 1, 0, limit - bytes);
            q = last_full >= 0 ? last_full + 1 : lo;
        }
        if (q < x->prefetch_step) mt_add(&t, 1, 0, n_steps - 1, q, x->prefetch_step - 1, bytes);
        x->prefetch_step = q;
    }
    free(live);
    free(order);
    free(t.mx);
    free(t.add);
    return VDNN_OK;
}

/* A feature map recomputed frees its own block and its layers' aux state for one forward of its producer
 * (at least: in-place layers sharing it and evicted inputs add more). */
typedef struct lb_item {
    double bytes;  /* aligned bytes freed */
    double rate;   /* seconds per freed byte */
    int first, last; /* steps at which it may be off the device */
} lb_item;

static int lb_by_rate(const void *a, const void *b)
{
    double x = ((const lb_item *)a)->rate, y = ((const lb_item *)b)->rate;
    return x < y ? -1 : x > y;
}

/* Layer l's fastest forward (bwd false) or backward time over the algorithms the plan may choose. */
static double fastest(const vdnn_plan_t *p, const vdnn_profile *prof, int l, bool bwd)
{
    int n = p->choose_algos ? p->cands[l].n : 1;
    double best = HUGE_VAL;
    for (int k = 0; k < n; k++) {
        int a = p->choose_algos ? k : p->algo[l];
        double t = bwd ? vdnn_profile_bwd(prof, l, a) : vdnn_profile_fwd(prof, l, a);
        if (t < best) best = t;
    }
    return best;
}

/* The fewest bytes a storage takes under any algorithm the plan may choose (workspaces vary). */
static size_t least_bytes(const vdnn_plan_t *p, const vdnn_storage *x)
{
    if (x->kind != VDNN_ST_WS || !p->choose_algos) return x->bytes;
    size_t least, most;
    vdnn_plan_ws_range(p, x->layer, x->def_step < p->n_layers, &least, &most);
    return least;
}

double vdnn_plan_lower_bound(const vdnn_plan_t *p, const vdnn_graph_t *g, const vdnn_profile *prof)
{
    /* Compute every plan runs. */
    double compute = prof->load_s + prof->update_s;
    for (int l = 1; l < g->n_layers; l++) compute += fastest(p, prof, l, false) + fastest(p, prof, l, true);
    if (p->req.memory.budget == SIZE_MAX) return compute;
    const int n = p->n_storages_analyzed;
    size_t *live = calloc((size_t)p->n_steps + 1, sizeof(size_t));
    lb_item *items = calloc((size_t)n + 1, sizeof *items);
    if (!live || !items) {
        free(live);
        free(items);
        return compute;
    }
    /* Device bytes of each step with everything kept: every plan keeps at least these, less what it
     * has evicted at that step. */
    double copy_ratio = 1.0; /* a copy moves the unaligned bytes: at least this share of the block */
    for (int i = 0; i < n; i++) {
        const vdnn_storage *x = &p->st[i];
        int end = x->persistent ? p->n_steps - 1 : x->last_use;
        int begin = x->persistent ? 0 : x->def_step;
        if (begin < 0) continue;
        for (int t = begin; t <= end; t++) live[t] += vdnn_align_up(least_bytes(p, x));
        if (x->candidate && x->bytes && (double)x->bytes / (double)vdnn_align_up(x->bytes) < copy_ratio)
            copy_ratio = (double)x->bytes / (double)vdnn_align_up(x->bytes);
    }
    int n_items = 0;
    for (int i = 0; i < n; i++) {
        const vdnn_storage *x = &p->st[i];
        if (!x->candidate || x->layer == 0 || x->kind != VDNN_ST_FMAP) continue;
        double freed = (double)vdnn_align_up(x->bytes);
        for (int l = 1; l < p->n_layers; l++)
            if (p->ls[l].out == i && p->ls[l].aux >= 0) freed += (double)vdnn_align_up(p->st[p->ls[l].aux].bytes);
        items[n_items++] = (lb_item){freed, fastest(p, prof, x->layer, false) / freed, x->last_fwd_use + 1, x->first_bwd_use - 1};
    }
    qsort(items, (size_t)n_items, sizeof *items, lb_by_rate);
    /* At a step s with `over` bytes above the budget, a plan has copied some x of them out before s and
     * recomputes the rest. The copy engine has had at most the compute time before s to itself, so the
     * compute lane stalls at least x / bandwidth - t_before; the rest costs at least its cheapest
     * recomputes (greedily by seconds per byte, which is optimal for this relaxation). Both terms are
     * convex in x: recompute what is cheaper per byte than copying, copy the rest. */
    const double copy_rate = copy_ratio / prof->d2h.bytes_per_s; /* seconds per aligned byte, at least */
    double extra = 0, t_before = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const vdnn_step *st = &p->steps[s];
        if (live[s] > p->req.memory.budget) {
            double over = (double)(live[s] - p->req.memory.budget);
            double free_copy = t_before / copy_rate; /* bytes the link could move in the time before s */
            double need = over > free_copy ? over - free_copy : 0, cost = 0;
            for (int k = 0; k < n_items && need > 0; k++) {
                if (s < items[k].first || s > items[k].last) continue;
                if (items[k].rate >= copy_rate) break;
                double take = items[k].bytes < need ? items[k].bytes : need;
                cost += take * items[k].rate;
                need -= take;
            }
            cost += need * copy_rate;
            if (cost > extra) extra = cost;
        }
        if (st->kind == VDNN_STEP_FWD) t_before += fastest(p, prof, st->layer, false);
        else if (st->kind == VDNN_STEP_BWD) t_before += fastest(p, prof, st->layer, true);
        else if (st->kind == VDNN_STEP_LOAD) t_before += prof->load_s;
    }
    free(live);
    free(items);
    return compute + extra;
}

void vdnn_plan_use_algos(vdnn_plan_t *p, bool leanest)
{
    /* Algorithms the request fixed (--conv-algo lean or default) stay as they are. */
    if (!p->choose_algos) return;
    for (int l = 1; l < p->n_layers; l++)
        vdnn_plan_set_algo(p, l, leanest && p->choose_algos ? vdnn_plan_leanest_algo(p, l) : 0);
}

void vdnn_memory_mix(vdnn_plan_t *p, const vdnn_graph_t *g, int mix)
{
    if (mix < 3) {
        vdnn_policy_static(p, g, (vdnn_policy)mix);
    } else if (mix == 3) {
        for (int i = 0; i < p->n_storages_analyzed; i++) {
            vdnn_storage *s = &p->st[i];
            s->cls = VDNN_CLASS_KEEP;
            s->prefetch_step = s->recompute_step = -1;
            if (!s->candidate) continue;
            /* Cheap to recompute: what neither a GEMM layer nor a convolution makes. */
            const vdnn_layer_kind k = g->layers[s->layer].kind;
            bool cheap = s->kind == VDNN_ST_FMAP && s->layer > 0 && !vdnn_layer_compute_heavy(k) && k != VDNN_LAYER_FC;
            s->cls = cheap ? VDNN_CLASS_RECOMPUTE : VDNN_CLASS_SWAP;
        }
    } else {
        static const double spacing[4] = {1.0, 0.5, 2.0, 4.0};
        int n = vdnn_chen_candidates(p);
        int k = (int)(spacing[(mix - 4) % 4] * sqrt((double)(n > 0 ? n : 1)) + 0.5);
        vdnn_chen_classes(p, g, k < 1 ? 1 : k, true);
    }
}

static vdnn_status min_budget_of(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err);

vdnn_status vdnn_plan_min_budget(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err)
{
    size_t best = SIZE_MAX;
    /* Policy auto streams convolution inputs by itself where nothing else fits. */
    const char *why;
    const bool stream_too = req->memory.policy == VDNN_POLICY_AUTO && vdnn_plan_stream_supported(req, &why);
    const bool asked = req->memory.stream_inputs;
    vdnn_status rc = VDNN_OK;
    for (int stream = asked; rc == VDNN_OK && stream <= (asked || stream_too); stream++) {
        size_t b = SIZE_MAX;
        vdnn_plan_request r = *req;
        r.memory.stream_inputs = stream;
        rc = min_budget_of(g, info, &r, &b, err);
        if (b < best) best = b;
    }
    *out = best;
    return rc;
}

/* vdnn_plan_min_budget under the request's stream_inputs as it is. */
static vdnn_status min_budget_of(const vdnn_graph_t *g, const vdnn_op_info *info, const vdnn_plan_request *req,
                                 size_t *out, vdnn_error *err)
{
    vdnn_plan_request r = *req;
    r.memory.budget = SIZE_MAX;
    r.memory.host_budget = SIZE_MAX;
    r.memory.policy = VDNN_POLICY_NONE;
    r.fuse_shared = true; /* homed with shared parameters' update steps: a plan of its own, last */
    vdnn_plan_t *p = NULL;
    vdnn_status rc = vdnn_plan_analyze(g, info, &r, &p, err);
    if (rc != VDNN_OK) return rc;
    size_t best = SIZE_MAX;
    if (r.memory.stream_inputs && !vdnn_plan_streamed_layers(p)) {
        vdnn_plan_free(p);
        *out = best;
        return VDNN_OK;
    }
    /* Policy auto homes the parameters in host memory by itself where that is what fits. */
    const char *why;
    const bool home_too = req->memory.policy == VDNN_POLICY_AUTO && vdnn_plan_offload_supported(req, &why);
    const bool homed = req->memory.offload_params;
    /* home 0: parameters on the device; 1: homed; 2: homed, shared parameters updated in steps of their own. */
    for (int home = homed; rc == VDNN_OK && home <= (homed || home_too ? 2 : 0); home++) {
        if (home == 2) {
            if (!vdnn_plan_offload_changes_steps(p)) break;
            vdnn_plan_free(p);
            p = NULL;
            r.memory.offload_params = true;
            r.fuse_shared = false;
            rc = vdnn_plan_analyze(g, info, &r, &p, err);
            if (rc != VDNN_OK) break;
        }
        vdnn_plan_set_offload_params(p, home > 0);
        /* With a choice of algorithms, the leanest ones too. */
        for (int lean = 0; lean < (p->choose_algos ? 2 : 1); lean++) {
            vdnn_plan_use_algos(p, lean);
            for (int mix = 0; rc == VDNN_OK && mix < VDNN_MEMORY_MIXES; mix++) {
                vdnn_memory_mix(p, g, mix);
                rc = vdnn_plan_finalize(p, err);
                if (rc == VDNN_OK && p->peak_device_bytes < best) best = p->peak_device_bytes;
            }
        }
    }
    vdnn_plan_free(p);
    *out = best;
    return rc;
}
