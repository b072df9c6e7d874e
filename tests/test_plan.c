/* Tests of the memory plan: liveness, in-place sharing and gradient accumulation on hand-made DAGs, and
 * for every plan (hand-made, zoo and sequence models, policies none/all/conv, training and evaluation) a replay of its
 * actions that checks placement, residency, offload/prefetch ordering and the memory figures; and the
 * Unified Memory plan (policy um) against all's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "mem/arena.h"
#include "mem/offsets.h"
#include "plan/plan.h"
#include "plan/profile.h"
#include "plan/simulate.h"
#include "testutil.h"

static const vdnn_policy static_policies[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL, VDNN_POLICY_CONV};
#define N_STATIC 3

/* ---- models ---- */

static const char chain_cfg[] = "[net]\nname=chain\n"
                                "[conv1]\ntype=conv\nfilters=4\nsize=3\npad=1\n"
                                "[relu1]\ntype=relu\n"
                                "[relu2]\ntype=relu\n"
                                "[pool1]\ntype=maxpool\nsize=2\n"
                                "[conv2]\ntype=conv\nfilters=6\nsize=3\npad=1\n"
                                "[relu3]\ntype=relu\n"
                                "[flat]\ntype=flatten\n"
                                "[fc]\ntype=fc\noutputs=classes\n"
                                "[loss]\ntype=softmax\n";

/* conv0 feeds two branches joined by add. */
static const char diamond_cfg[] = "[net]\nname=diamond\n"
                                  "[conv0]\ntype=conv\nfilters=4\nsize=3\npad=1\n"
                                  "[convA]\ntype=conv\ninput=conv0\nfilters=4\nsize=3\npad=1\n"
                                  "[convB]\ntype=conv\ninput=conv0\nfilters=4\nsize=1\n"
                                  "[sum]\ntype=add\ninput=convA,convB\n"
                                  "[gap]\ntype=gap\n"
                                  "[fc]\ntype=fc\noutputs=classes\n"
                                  "[loss]\ntype=softmax\n";

/* A ResNet basic block: relu1's output feeds conv2 and the shortcut. */
static const char residual_cfg[] = "[net]\nname=residual\n"
                                   "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n"
                                   "[bn1]\ntype=batchnorm\n"
                                   "[relu1]\ntype=relu\n"
                                   "[conv2]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n"
                                   "[bn2]\ntype=batchnorm\n"
                                   "[add]\ntype=add\ninput=bn2,relu1\n"
                                   "[relu]\ntype=relu\n"
                                   "[gap]\ntype=gap\n"
                                   "[fc]\ntype=fc\noutputs=classes\n"
                                   "[loss]\ntype=softmax\n";

/* An Inception module: relu0 feeds four branches joined by a channel concat. */
static const char inception_cfg[] = "[net]\nname=inception\n"
                                    "[conv0]\ntype=conv\nfilters=8\nsize=3\npad=1\n"
                                    "[relu0]\ntype=relu\n"
                                    "[b1]\ntype=conv\ninput=relu0\nfilters=4\nsize=1\n"
                                    "[b1.relu]\ntype=relu\n"
                                    "[b2.reduce]\ntype=conv\ninput=relu0\nfilters=4\nsize=1\n"
                                    "[b2.relu_reduce]\ntype=relu\n"
                                    "[b2]\ntype=conv\nfilters=6\nsize=3\npad=1\n"
                                    "[b2.relu]\ntype=relu\n"
                                    "[b3.reduce]\ntype=conv\ninput=relu0\nfilters=2\nsize=1\n"
                                    "[b3.relu_reduce]\ntype=relu\n"
                                    "[b3]\ntype=conv\nfilters=3\nsize=5\npad=2\n"
                                    "[b3.relu]\ntype=relu\n"
                                    "[b4.pool]\ntype=maxpool\ninput=relu0\nsize=3\nstride=1\npad=1\n"
                                    "[b4]\ntype=conv\nfilters=3\nsize=1\n"
                                    "[b4.relu]\ntype=relu\n"
                                    "[cat]\ntype=concat\ninput=b1.relu,b2.relu,b3.relu,b4.relu\n"
                                    "[gap]\ntype=gap\n"
                                    "[fc]\ntype=fc\noutputs=classes\n"
                                    "[loss]\ntype=softmax\n";

/* ---- fixtures ---- */

typedef struct fixture {
    vdnn_backend_t *be;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    if (!f || vdnn_backend_cpu_create(&co, &f->be, &err) != VDNN_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vdnn_backend_destroy(f->be);
    free(f);
    return 0;
}

static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

typedef struct planned {
    vdnn_graph_t *g;
    vdnn_op_info *info;
    vdnn_plan_t *p;
} planned;

static vdnn_graph_t *parse(const char *text, const char *name)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(text, name, &g, &err), err);
    return g;
}

static vdnn_plan_t *plan_of(vdnn_graph_t *g, vdnn_backend_t *be, vdnn_policy pol, bool training, size_t variable_base,
                            vdnn_op_info **info_out)
{
    vdnn_error err;
    vdnn_op_info *info = calloc((size_t)g->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(g, be, training, info, &err), err);
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = pol;
    rq.training = training;
    rq.variable_base = variable_base;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_build(g, info, &rq, &p, &err), err);
    assert_non_null(p);
    if (info_out) *info_out = info;
    else free(info);
    return p;
}

static planned make(const char *text, const char *name, vdnn_backend_t *be, vdnn_policy pol, bool training, int n,
                    int c, int h, int w)
{
    planned r = {0};
    vdnn_error err;
    r.g = parse(text, name);
    vt_assert_ok(vdnn_graph_resolve(r.g, (vdnn_shape){n, c, h, w}, 10, &err), err);
    r.p = plan_of(r.g, be, pol, training, 0, &r.info);
    return r;
}

static void release(planned *r)
{
    vdnn_plan_free(r->p);
    free(r->info);
    vdnn_graph_free(r->g);
}

static int layer(const vdnn_graph_t *g, const char *name)
{
    int l = vdnn_graph_find(g, name);
    if (l < 0) fail_msg("no layer '%s'", name);
    return l;
}

static int step_of(const vdnn_plan_t *p, vdnn_step_kind kind, int l)
{
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == kind && (kind == VDNN_STEP_LOAD || kind == VDNN_STEP_UPDATE || p->steps[s].layer == l))
            return s;
    fail_msg("no %s step for layer %d", kind == VDNN_STEP_FWD ? "forward" : "backward", l);
    return -1;
}

static int fwd(const planned *r, const char *name) { return step_of(r->p, VDNN_STEP_FWD, layer(r->g, name)); }
static int bwd(const planned *r, const char *name) { return step_of(r->p, VDNN_STEP_BWD, layer(r->g, name)); }
static int out_of(const planned *r, const char *name) { return r->p->ls[layer(r->g, name)].out; }
static int grad_of(const planned *r, const char *name) { return r->p->ls[layer(r->g, name)].grad; }

static int storage(const vdnn_plan_t *p, const char *name)
{
    for (int i = 0; i < p->n_storages; i++)
        if (!strcmp(p->st[i].name, name)) return i;
    fail_msg("no storage '%s'", name);
    return -1;
}

static void assert_live(const vdnn_plan_t *p, int st, int def, int last_fwd, int first_bwd, int last)
{
    const vdnn_storage *s = &p->st[st];
    if (s->def_step != def || s->last_fwd_use != last_fwd || s->first_bwd_use != first_bwd || s->last_use != last)
        fail_msg("'%s': def %d, last forward use %d, first backward use %d, last use %d; want %d, %d, %d, %d", s->name,
                 s->def_step, s->last_fwd_use, s->first_bwd_use, s->last_use, def, last_fwd, first_bwd, last);
}

/* Index of the first action of `kind` with these operands in step s, or -1. */
static int find_action(const vdnn_plan_t *p, int s, vdnn_action_kind kind, int a, int b)
{
    const vdnn_step *st = &p->steps[s];
    for (int k = 0; k < st->n_actions; k++) {
        const vdnn_action *x = &p->actions[st->first_action + k];
        if (x->kind == kind && x->a == a && (b == -2 || x->b == b)) return k;
    }
    return -1;
}

/* ---- the replay: what every plan must satisfy ---- */

/* Storages step s touches, as the executor's compute and accumulate read and write them. */
static int step_uses(const vdnn_plan_t *p, const vdnn_graph_t *g, int s, int *u)
{
    int n = 0;
    const vdnn_step *st = &p->steps[s];
#define U(x)                       \
    do {                           \
        if ((x) >= 0) u[n++] = (x); \
    } while (0)
    if (st->kind == VDNN_STEP_LOAD) {
        U(p->ls[0].out);
        U(p->labels);
    } else if (st->kind == VDNN_STEP_FWD) {
        const vdnn_layer *ly = &g->layers[st->layer];
        const vdnn_layer_storage *ls = &p->ls[st->layer];
        for (int i = 0; i < ly->n_inputs; i++) U(p->ls[ly->inputs[i]].out);
        U(ls->out);
        U(ls->aux);
        U(st->ws);
        U(ls->w);
        U(ls->b);
        U(ls->stats);
        if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) {
            U(p->labels);
            U(p->loss);
        }
    } else if (st->kind == VDNN_STEP_BWD) {
        const vdnn_layer *ly = &g->layers[st->layer];
        const vdnn_layer_storage *ls = &p->ls[st->layer];
        const vdnn_op_info *in = &p->info[st->layer];
        for (int i = 0; i < ly->n_inputs; i++) {
            if (in->bwd_needs_x) U(p->ls[ly->inputs[i]].out);
            U(st->dx[i]);
            /* A gradient to accumulate: its target is read and written after the compute. */
            if (st->dx[i] >= 0 && p->st[st->dx[i]].kind == VDNN_ST_TEMP) U(p->ls[ly->inputs[i]].grad);
        }
        if (in->bwd_needs_y) U(ls->out);
        U(ls->aux);
        U(st->ws);
        U(ls->grad);
        U(ls->w);
        U(ls->b);
        U(ls->stats);
        U(ls->dw);
        U(ls->db);
        if (ly->kind == VDNN_LAYER_SOFTMAX_XENT) U(p->labels);
        if (p->fused_update) {
            /* The layer's parameters are updated right after its backward. */
            U(ls->vw);
            U(ls->vb);
        }
    } else if (!p->fused_update) {
        for (int l = 1; l < g->n_layers; l++) {
            U(p->ls[l].w);
            U(p->ls[l].b);
            U(p->ls[l].dw);
            U(p->ls[l].db);
            U(p->ls[l].vw);
            U(p->ls[l].vb);
        }
    }
#undef U
    return n;
}

typedef struct plan_stats {
    int n_swap, n_offload, n_prefetch, n_accum;
    double frag;   /* peak / max live */
} plan_stats;

static const char *pname(const vdnn_plan_t *p) { return vdnn_policy_name(p->policy); }

/* Checks everything a plan promises, independently of how it was built. */
static plan_stats check_plan(const vdnn_plan_t *p, const vdnn_graph_t *g, size_t variable_base)
{
    plan_stats ps = {0};
    const int S = p->n_steps, N = p->n_storages;
    const char *what = g->name;

    /* 1. Liveness: def / last forward use / first backward use / last use from the steps' uses. */
    int *def = malloc(sizeof(int) * (size_t)N * 4), *lfu = def + N, *fbu = def + 2 * N, *last = def + 3 * N;
    int *u = malloc(sizeof(int) * 4096);
    assert_true(def && u);
    for (int i = 0; i < N; i++) def[i] = lfu[i] = fbu[i] = last[i] = -1;
    for (int s = 0; s < S; s++) {
        int n = step_uses(p, g, s, u);
        for (int k = 0; k < n; k++) {
            int i = u[k];
            if (def[i] < 0) def[i] = s;
            last[i] = s;
            if (p->steps[s].kind == VDNN_STEP_BWD) {
                if (fbu[i] < 0) fbu[i] = s;
            } else {
                lfu[i] = s;
            }
        }
    }
    if (!p->training) last[p->ls[g->n_layers - 1].out] = S - 1; /* the caller fetches the probabilities */
    for (int i = 0; i < N; i++) {
        const vdnn_storage *x = &p->st[i];
        if (x->persistent || x->def_step < 0) continue;
        if (x->def_step != def[i] || x->last_fwd_use != lfu[i] || x->first_bwd_use != fbu[i] || x->last_use != last[i])
            fail_msg("%s/%s '%s': plan says def %d lfu %d fbu %d last %d, the steps say %d %d %d %d", what, pname(p),
                     x->name, x->def_step, x->last_fwd_use, x->first_bwd_use, x->last_use, def[i], lfu[i], fbu[i], last[i]);
    }

    /* 2. Placement: aligned, inside [0, peak), variable blocks above the base, and no two blocks that
     * share a step share a byte (every pair). */
    size_t top = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        const vdnn_block *B = &p->blocks[b];
        assert_true(B->offset % VDNN_ALIGN == 0);
        assert_true(B->bytes == vdnn_align_up(p->st[B->storage].bytes));
        assert_true(B->begin >= 0 && B->begin <= B->end && B->end < S);
        if (!p->st[B->storage].persistent) {
            if (B->offset < p->persistent_bytes || B->offset < variable_base)
                fail_msg("%s/%s: block of '%s' at %zu is below the variable base", what, pname(p), p->st[B->storage].name,
                         B->offset);
        } else {
            assert_true(B->offset + B->bytes <= p->persistent_bytes);
        }
        if (B->offset + B->bytes > top) top = B->offset + B->bytes;
        for (int c = 0; c < b; c++) {
            const vdnn_block *C = &p->blocks[c];
            if (B->begin <= C->end && C->begin <= B->end && B->offset < C->offset + C->bytes &&
                C->offset < B->offset + B->bytes && B->bytes && C->bytes)
                fail_msg("%s/%s: '%s' [%zu,+%zu) steps %d..%d overlaps '%s' [%zu,+%zu) steps %d..%d", what, pname(p),
                         p->st[B->storage].name, B->offset, B->bytes, B->begin, B->end, p->st[C->storage].name,
                         C->offset, C->bytes, C->begin, C->end);
        }
    }
    if (p->peak_device_bytes != top && !(top < variable_base && p->peak_device_bytes == vdnn_align_up(variable_base)))
        fail_msg("%s/%s: peak %zu but the highest block ends at %zu", what, pname(p), p->peak_device_bytes, top);

    /* 3. Figures: the peak is the largest live total plus fragmentation; the average is the mean. */
    size_t *live = calloc((size_t)S, sizeof *live);
    assert_non_null(live);
    vdnn_plan_live_bytes(p, live);
    size_t max_live = 0;
    double sum = 0;
    for (int s = 0; s < S; s++) {
        if (live[s] > max_live) max_live = live[s];
        sum += (double)live[s];
    }
    assert_true(p->peak_device_bytes >= max_live);
    assert_true(p->avg_device_bytes == (size_t)(sum / S));
    ps.frag = (double)p->peak_device_bytes / (double)max_live;
    free(live);

    /* 4. Replay: residency, events and copies, in action order. */
    int *res = malloc(sizeof(int) * (size_t)N);         /* block a storage lives in, or -1 */
    int *state = calloc((size_t)p->n_events + 1, sizeof(int)); /* 0 unused, 1 issued, 2 waited */
    int *offloaded = calloc((size_t)N, sizeof(int));    /* 1: copy out issued, 2: and complete */
    int *prefetched = calloc((size_t)N, sizeof(int));
    int *ev_of = malloc(sizeof(int) * (size_t)N);
    assert_true(res && state && offloaded && prefetched && ev_of);
    for (int i = 0; i < N; i++) res[i] = ev_of[i] = -1;
    for (int b = 0; b < p->n_blocks; b++)
        if (p->st[p->blocks[b].storage].persistent) res[p->blocks[b].storage] = b;
    for (int s = 0; s < S; s++) {
        const vdnn_step *st = &p->steps[s];
        bool computed = false;
        for (int k = 0; k < st->n_actions; k++) {
            const vdnn_action *a = &p->actions[st->first_action + k];
            switch (a->kind) {
            case VDNN_ACT_ALLOC: {
                const vdnn_block *B = &p->blocks[a->a];
                assert_int_equal(B->begin, s);
                assert_false(computed);
                if (res[B->storage] >= 0) fail_msg("%s/%s: '%s' allocated twice", what, pname(p), p->st[B->storage].name);
                res[B->storage] = a->a;
                break;
            }
            case VDNN_ACT_FREE: {
                const vdnn_block *B = &p->blocks[a->a];
                assert_int_equal(B->end, s);
                if (res[B->storage] != a->a) fail_msg("%s/%s: '%s' freed but not live", what, pname(p), p->st[B->storage].name);
                /* A block being copied out may not be freed before the copy is complete. */
                if (offloaded[B->storage] == 1)
                    fail_msg("%s/%s: '%s' freed at step %d while its offload may still read it", what, pname(p),
                             p->st[B->storage].name, s);
                res[B->storage] = -1;
                break;
            }
            case VDNN_ACT_OFFLOAD:
            case VDNN_ACT_PREFETCH: {
                const vdnn_storage *x = &p->st[a->a];
                bool out = a->kind == VDNN_ACT_OFFLOAD;
                assert_int_equal(x->cls, VDNN_CLASS_SWAP);
                if (res[a->a] < 0) fail_msg("%s/%s: copy of '%s' without a block", what, pname(p), x->name);
                assert_true(a->event >= 0 && a->event < p->n_events);
                assert_int_equal(state[a->event], 0);
                state[a->event] = 1;
                if (out) {
                    /* Out after the last forward consumer has it (during that step's compute at the earliest). */
                    assert_int_equal(s, x->last_fwd_use);
                    assert_int_equal(offloaded[a->a], 0);
                    offloaded[a->a] = 1;
                    ev_of[a->a] = a->event;
                    ps.n_offload++;
                } else {
                    if (offloaded[a->a] != 2)
                        fail_msg("%s/%s: '%s' prefetched before its offload completed", what, pname(p), x->name);
                    assert_true(s > x->last_fwd_use && s < x->first_bwd_use);
                    assert_int_equal(x->prefetch_step, s);
                    assert_int_equal(prefetched[a->a], 0);
                    prefetched[a->a] = 1;
                    ev_of[a->a] = a->event;
                    ps.n_prefetch++;
                }
                break;
            }
            case VDNN_ACT_WAIT:
                assert_true(a->event >= 0 && a->event < p->n_events);
                if (state[a->event] != 1) fail_msg("%s/%s: wait for event %d that is not pending", what, pname(p), a->event);
                state[a->event] = 2;
                for (int i = 0; i < N; i++) {
                    if (ev_of[i] != a->event) continue;
                    if (offloaded[i] == 1 && !prefetched[i]) offloaded[i] = 2;
                    if (prefetched[i] == 1) prefetched[i] = 2;
                }
                break;
            case VDNN_ACT_COMPUTE: {
                assert_false(computed);
                computed = true;
                int n = step_uses(p, g, s, u);
                for (int k2 = 0; k2 < n; k2++) {
                    int i = u[k2];
                    if (res[i] < 0)
                        fail_msg("%s/%s: step %d computes without '%s' on the device", what, pname(p), s, p->st[i].name);
                    /* Data that came back must have finished arriving. */
                    if (prefetched[i] == 1)
                        fail_msg("%s/%s: step %d reads '%s' before its prefetch completed", what, pname(p), s,
                                 p->st[i].name);
                }
                break;
            }
            case VDNN_ACT_ACCUM:
                assert_true(computed);
                assert_int_equal(p->st[a->b].kind, VDNN_ST_TEMP);
                assert_int_equal(p->st[a->a].kind, VDNN_ST_GRAD);
                /* Into the gradient of the temporary's layer (a storage an in-place backward may share). */
                assert_int_equal(p->ls[p->st[a->b].layer].grad, a->a);
                assert_true(res[a->a] >= 0 && res[a->b] >= 0);
                ps.n_accum++;
                break;
            default: fail_msg("%s/%s: unexpected action %d", what, pname(p), (int)a->kind);
            }
        }
        assert_true(computed);
    }
    for (int i = 0; i < N; i++) {
        const vdnn_storage *x = &p->st[i];
        if (!x->persistent && res[i] >= 0) fail_msg("%s/%s: '%s' still on the device after the iteration", what, pname(p), x->name);
        if (x->cls == VDNN_CLASS_SWAP) {
            ps.n_swap++;
            /* Swapped: out after its last forward use, back and complete before its first backward use. */
            assert_true(offloaded[i] == 2 && prefetched[i] == 2);
            int w = find_action(p, x->first_bwd_use, VDNN_ACT_WAIT, i, -2);
            int c = find_action(p, x->first_bwd_use, VDNN_ACT_COMPUTE, -1, -1);
            if (w < 0 || w > c) fail_msg("%s/%s: '%s' has no wait before its first backward use", what, pname(p), x->name);
        }
    }
    for (int e = 0; e < p->n_events; e++) assert_int_equal(state[e], 2);

    /* 5. Host pool: swapped storages away at the same time do not share host bytes. */
    size_t moved = 0;
    for (int i = 0; i < N; i++) {
        const vdnn_storage *x = &p->st[i];
        if (x->cls != VDNN_CLASS_SWAP) continue;
        moved += 2 * x->bytes;
        assert_true(x->host_offset + x->bytes <= p->host_bytes);
        assert_true(x->host_offset % VDNN_ALIGN == 0);
        for (int j = 0; j < i; j++) {
            const vdnn_storage *y = &p->st[j];
            if (y->cls != VDNN_CLASS_SWAP) continue;
            bool together = x->last_fwd_use <= y->first_bwd_use && y->last_fwd_use <= x->first_bwd_use;
            if (together && x->host_offset < y->host_offset + y->bytes && y->host_offset < x->host_offset + x->bytes)
                fail_msg("%s/%s: '%s' and '%s' share host memory", what, pname(p), x->name, y->name);
        }
    }
    assert_true(moved == p->bytes_moved);
    if (!ps.n_swap) assert_true(p->host_bytes == 0 && p->bytes_moved == 0);
    free(def);
    free(u);
    free(res);
    free(state);
    free(offloaded);
    free(prefetched);
    free(ev_of);
    return ps;
}

/* The layers whose inputs conv swaps: convolutions, and a sequence model's GEMMs. An image network's fc is not
 * one of them (vDNN's paper keeps its input). */
static bool heavy(vdnn_layer_kind k)
{
    return k == VDNN_LAYER_CONV || k == VDNN_LAYER_LINEAR || k == VDNN_LAYER_ATTN_PROBS || k == VDNN_LAYER_ATTN_MIX ||
           k == VDNN_LAYER_LSTM;
}

/* Which storages a static policy must swap: "all" every candidate (a feature map or layer state with a
 * step between its last forward and first backward use), "conv" candidate feature maps that feed a heavy layer. */
static void check_classes(const vdnn_plan_t *p, const vdnn_graph_t *g)
{
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *x = &p->st[i];
        bool candidate = p->training && (x->kind == VDNN_ST_FMAP || x->kind == VDNN_ST_AUX) && x->last_fwd_use >= 0 &&
                         x->first_bwd_use > x->last_fwd_use + 1;
        bool feeds_heavy = false;
        for (int l = 1; l < g->n_layers; l++)
            for (int k = 0; k < g->layers[l].n_inputs; k++)
                feeds_heavy |= heavy(g->layers[l].kind) && p->ls[g->layers[l].inputs[k]].out == i;
        bool want = p->policy == VDNN_POLICY_ALL ? candidate
                    : p->policy == VDNN_POLICY_CONV ? candidate && x->kind == VDNN_ST_FMAP && feeds_heavy
                                                    : false;
        if ((x->cls == VDNN_CLASS_SWAP) != want)
            fail_msg("%s/%s: '%s' is %s", g->name, pname(p), x->name, x->cls == VDNN_CLASS_SWAP ? "swapped" : "kept");
        if (want) assert_int_equal(x->prefetch_step, x->first_bwd_use - 1); /* one layer ahead, as vDNN */
    }
}

/* Every static policy, training and evaluation: all the checks; returns none's fragmentation. */
static double check_all_policies(vdnn_graph_t *g, vdnn_backend_t *be)
{
    double frag = 0;
    size_t persistent = 0, peaks[N_STATIC];
    for (int k = 0; k < N_STATIC; k++) {
        vdnn_plan_t *p = plan_of(g, be, static_policies[k], true, 0, NULL);
        plan_stats ps = check_plan(p, g, 0);
        check_classes(p, g);
        peaks[k] = p->peak_device_bytes;
        if (static_policies[k] == VDNN_POLICY_NONE) {
            assert_int_equal(ps.n_swap, 0);
            frag = ps.frag;
            persistent = p->persistent_bytes;
        } else {
            assert_true(ps.n_swap > 0);
            assert_int_equal(ps.n_offload, ps.n_swap);
            assert_int_equal(ps.n_prefetch, ps.n_swap);
            assert_true(p->persistent_bytes == persistent);
        }
        vdnn_plan_free(p);
    }
    /* Swapping never needs more than keeping. */
    assert_true(peaks[1] <= peaks[0] && peaks[2] <= peaks[0]);
    /* The evaluation plan: above the training state, parameters where training has them. */
    vdnn_plan_t *pt = plan_of(g, be, VDNN_POLICY_NONE, true, 0, NULL);
    vdnn_plan_t *pe = plan_of(g, be, VDNN_POLICY_ALL, false, pt->persistent_bytes, NULL);
    assert_int_equal(pe->policy, VDNN_POLICY_NONE); /* evaluation keeps everything */
    check_plan(pe, g, pt->persistent_bytes);
    for (int b = 0; b < pe->n_blocks; b++) {
        const vdnn_storage *x = &pe->st[pe->blocks[b].storage];
        if (!x->persistent) continue;
        bool same = false;
        for (int c = 0; c < pt->n_blocks; c++)
            if (pt->st[pt->blocks[c].storage].persistent && !strcmp(pt->st[pt->blocks[c].storage].name, x->name))
                same = pt->blocks[c].offset == pe->blocks[b].offset;
        if (!same) fail_msg("%s: '%s' is not where the training plan keeps it", g->name, x->name);
    }
    /* The arena is sized for the larger of the two plans and a training run reports its high-water
     * mark after evaluating: that equals the training plan's peak (what `vdnn plan` reports) only
     * because evaluation never needs more than training under any policy. */
    for (int k = 0; k < N_STATIC; k++)
        if (pe->peak_device_bytes > peaks[k])
            fail_msg("%s: evaluation needs %zu bytes, more than training under %s (%zu)", g->name, pe->peak_device_bytes,
                     vdnn_policy_name(static_policies[k]), peaks[k]);
    vdnn_plan_free(pe);
    vdnn_plan_free(pt);
    return frag;
}

/* ---- hand-made DAGs ---- */

static void test_chain(void **state)
{
    fixture *f = *state;
    planned r = make(chain_cfg, "chain.cfg", f->be, VDNN_POLICY_NONE, true, 2, 3, 8, 8);
    const vdnn_plan_t *p = r.p;
    /* Preconditions on the CPU ops that the expectations below rely on. */
    /* relu keeps a bit mask of where its output is positive: its backward reads neither x nor y. */
    assert_true(!r.info[layer(r.g, "relu1")].bwd_needs_y && !r.info[layer(r.g, "relu1")].bwd_needs_x &&
                r.info[layer(r.g, "relu1")].inplace_ok && r.info[layer(r.g, "relu1")].aux_bytes > 0);
    assert_true(r.info[layer(r.g, "conv1")].bwd_needs_x && !r.info[layer(r.g, "conv1")].bwd_needs_y);
    assert_false(r.info[layer(r.g, "pool1")].bwd_needs_x);

    /* relu1 overwrites conv1's output (conv1's backward needs its input, not its output), and relu2
     * relu1's (relu1's backward reads its mask, not its output). */
    int c1 = out_of(&r, "conv1");
    assert_int_equal(out_of(&r, "relu1"), c1);
    assert_int_equal(out_of(&r, "relu2"), c1);
    assert_string_equal(p->st[c1].name, "conv1+relu1+relu2");
    /* relu3 runs in place on conv2 again. */
    assert_int_equal(out_of(&r, "relu3"), out_of(&r, "conv2"));
    /* A relu's backward writes its input's gradient over its own (dy is not needed after it), so
     * pool1's backward starts one gradient storage that relu2, relu1 and conv1 then share. */
    assert_true(r.info[layer(r.g, "relu1")].bwd_inplace_ok);
    assert_false(r.info[layer(r.g, "pool1")].bwd_inplace_ok);
    int gc = grad_of(&r, "relu2");
    assert_int_equal(grad_of(&r, "relu1"), gc);
    assert_int_equal(grad_of(&r, "conv1"), gc);
    assert_string_equal(p->st[gc].name, "relu2.grad+relu1+conv1");
    assert_int_equal(p->steps[bwd(&r, "pool1")].dx[0], gc);
    assert_int_equal(p->steps[bwd(&r, "relu1")].dx[0], gc);

    /* data: loaded at step 0, read by conv1 forward and conv1 backward (weight gradient). */
    assert_live(p, out_of(&r, "data"), 0, fwd(&r, "conv1"), bwd(&r, "conv1"), bwd(&r, "conv1"));
    /* conv1+relu1+relu2: written by conv1, last read forward by pool1, and read by no backward step
     * (conv1's reads its input, the relus their masks, pool1 its indices). */
    assert_live(p, c1, fwd(&r, "conv1"), fwd(&r, "pool1"), -1, fwd(&r, "pool1"));
    /* Each relu's mask: written by its forward, read by its backward. */
    int m2 = p->ls[layer(r.g, "relu2")].aux;
    assert_true(m2 >= 0);
    assert_live(p, m2, fwd(&r, "relu2"), fwd(&r, "relu2"), bwd(&r, "relu2"), bwd(&r, "relu2"));
    /* pool1 output: its backward uses the aux indices, but conv2 backward needs it as x. */
    assert_live(p, out_of(&r, "pool1"), fwd(&r, "pool1"), fwd(&r, "conv2"), bwd(&r, "conv2"), bwd(&r, "conv2"));
    int aux = p->ls[layer(r.g, "pool1")].aux;
    assert_true(aux >= 0);
    assert_live(p, aux, fwd(&r, "pool1"), fwd(&r, "pool1"), bwd(&r, "pool1"), bwd(&r, "pool1"));
    /* That gradient is written by pool1's backward and last read by conv1's. */
    assert_live(p, gc, bwd(&r, "pool1"), -1, bwd(&r, "pool1"), bwd(&r, "conv1"));
    /* Weight gradients live only in their layer's backward step, which also updates the weights. */
    assert_true(p->fused_update);
    int dw = p->ls[layer(r.g, "conv2")].dw;
    assert_false(p->st[dw].persistent);
    assert_live(p, dw, bwd(&r, "conv2"), -1, bwd(&r, "conv2"), bwd(&r, "conv2"));
    /* Backward runs in reverse layer order, after every forward step. */
    assert_true(bwd(&r, "fc") < bwd(&r, "conv2") && bwd(&r, "conv2") < bwd(&r, "conv1"));
    assert_true(fwd(&r, "loss") < bwd(&r, "loss"));
    assert_int_equal(p->steps[p->n_steps - 1].kind, VDNN_STEP_UPDATE);
    plan_stats ps = check_plan(p, r.g, 0);
    assert_int_equal(ps.n_accum, 0);
    release(&r);

    /* Evaluation: no backward, so relu2 may overwrite relu1's output too. */
    r = make(chain_cfg, "chain.cfg", f->be, VDNN_POLICY_NONE, false, 2, 3, 8, 8);
    assert_int_equal(out_of(&r, "relu2"), out_of(&r, "conv1"));
    assert_string_equal(r.p->st[out_of(&r, "conv1")].name, "conv1+relu1+relu2");
    assert_int_equal(r.p->n_steps, r.g->n_layers);
    for (int l = 0; l < r.g->n_layers; l++) assert_int_equal(r.p->ls[l].grad, -1);
    check_plan(r.p, r.g, 0);
    release(&r);

    vdnn_graph_t *g = parse(chain_cfg, "chain.cfg");
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 3, 8, 8}, 10, &err), err);
    double frag = check_all_policies(g, f->be);
    print_message("chain: none peak / max live = %.4f\n", frag);
    vdnn_graph_free(g);
}

static void test_diamond(void **state)
{
    fixture *f = *state;
    planned r = make(diamond_cfg, "diamond.cfg", f->be, VDNN_POLICY_NONE, true, 2, 3, 8, 8);
    const vdnn_plan_t *p = r.p;
    int c0 = layer(r.g, "conv0"), a = layer(r.g, "convA"), b = layer(r.g, "convB");
    assert_true(a < b);
    /* conv0's output has two readers: live until the later forward and from the earlier backward. */
    assert_live(p, out_of(&r, "conv0"), fwd(&r, "conv0"), fwd(&r, "convB"), bwd(&r, "convB"), bwd(&r, "convA"));
    /* Its gradient: convB's backward (first in backward order) writes it over convB's own output
     * gradient (one shape in and out: in place), so it lives from the add's backward; convA's writes
     * a temporary that is accumulated into it at once; conv0's backward reads it. */
    int gr = grad_of(&r, "conv0");
    assert_int_equal(p->st[gr].kind, VDNN_ST_GRAD);
    assert_int_equal(gr, grad_of(&r, "convB"));
    int sb = bwd(&r, "convB"), sa = bwd(&r, "convA");
    assert_int_equal(p->steps[sb].dx[0], gr);
    int tmp = p->steps[sa].dx[0];
    assert_true(tmp >= 0 && tmp != gr);
    assert_int_equal(p->st[tmp].kind, VDNN_ST_TEMP);
    assert_int_equal(p->st[tmp].layer, c0);
    char name[64];
    snprintf(name, sizeof name, "conv0.grad.from.%d", a);
    assert_int_equal(storage(p, name), tmp);
    assert_live(p, tmp, sa, -1, sa, sa);
    assert_live(p, gr, bwd(&r, "sum"), -1, bwd(&r, "sum"), bwd(&r, "conv0"));
    int acc = find_action(p, sa, VDNN_ACT_ACCUM, gr, tmp);
    assert_true(acc > find_action(p, sa, VDNN_ACT_COMPUTE, -1, -1));
    assert_int_equal(find_action(p, sb, VDNN_ACT_ACCUM, gr, -2), -1);
    /* The add's inputs each have one reader: plain gradients, no accumulation. */
    int sum = bwd(&r, "sum");
    assert_int_equal(p->steps[sum].dx[0], grad_of(&r, "convA"));
    assert_int_equal(p->steps[sum].dx[1], grad_of(&r, "convB"));
    assert_int_equal(p->st[grad_of(&r, "convA")].kind, VDNN_ST_GRAD);
    plan_stats ps = check_plan(p, r.g, 0);
    assert_int_equal(ps.n_accum, 1);
    release(&r);

    vdnn_graph_t *g = parse(diamond_cfg, "diamond.cfg");
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 3, 8, 8}, 10, &err), err);
    print_message("diamond: none peak / max live = %.4f\n", check_all_policies(g, f->be));
    vdnn_graph_free(g);
}

static void test_residual(void **state)
{
    fixture *f = *state;
    planned r = make(residual_cfg, "residual.cfg", f->be, VDNN_POLICY_NONE, true, 2, 8, 6, 6);
    const vdnn_plan_t *p = r.p;
    assert_true(r.info[layer(r.g, "bn1")].bwd_needs_x && !r.info[layer(r.g, "bn1")].bwd_needs_y);
    assert_false(r.info[layer(r.g, "add")].bwd_needs_x || r.info[layer(r.g, "add")].bwd_needs_y);
    /* relu1 runs in place on bn1 (bn1 needs its input, conv1's output, not its own output); relu1's
     * output has two readers, so nothing runs in place on it. The final relu overwrites the sum. */
    int r1 = out_of(&r, "relu1");
    assert_int_equal(out_of(&r, "bn1"), r1);
    assert_string_equal(p->st[r1].name, "bn1+relu1");
    assert_int_not_equal(out_of(&r, "conv2"), r1);
    assert_int_equal(out_of(&r, "relu"), out_of(&r, "add"));
    assert_string_equal(p->st[out_of(&r, "add")].name, "add+relu");
    /* The shortcut keeps relu1's output from its forward to the add; backward needs it only at conv2
     * (its x; relu1's backward reads its mask). */
    assert_live(p, r1, fwd(&r, "bn1"), fwd(&r, "add"), bwd(&r, "conv2"), bwd(&r, "conv2"));
    /* conv1's output: bn1 reads it forward and backward. */
    assert_live(p, out_of(&r, "conv1"), fwd(&r, "conv1"), fwd(&r, "bn1"), bwd(&r, "bn1"), bwd(&r, "bn1"));
    /* relu1's gradient comes from add (first) plus conv2 (accumulated). */
    int gr = grad_of(&r, "relu1");
    assert_int_equal(p->steps[bwd(&r, "add")].dx[1], gr);
    int tmp = p->steps[bwd(&r, "conv2")].dx[0];
    assert_int_equal(p->st[tmp].kind, VDNN_ST_TEMP);
    assert_true(find_action(p, bwd(&r, "conv2"), VDNN_ACT_ACCUM, gr, tmp) >= 0);
    /* relu1's backward then hands it on in place as bn1's gradient, last read by bn1's backward. */
    assert_int_equal(grad_of(&r, "bn1"), gr);
    assert_string_equal(p->st[gr].name, "relu1.grad+bn1");
    assert_live(p, gr, bwd(&r, "add"), -1, bwd(&r, "add"), bwd(&r, "bn1"));
    /* Batch-norm keeps its batch statistics for backward. */
    int aux = p->ls[layer(r.g, "bn2")].aux;
    assert_true(aux >= 0);
    assert_live(p, aux, fwd(&r, "bn2"), fwd(&r, "bn2"), bwd(&r, "bn2"), bwd(&r, "bn2"));
    plan_stats ps = check_plan(p, r.g, 0);
    assert_int_equal(ps.n_accum, 1);
    release(&r);

    /* Under all, the shortcut's feature map leaves after the add and is back before conv2's backward. */
    r = make(residual_cfg, "residual.cfg", f->be, VDNN_POLICY_ALL, true, 2, 8, 6, 6);
    p = r.p;
    r1 = out_of(&r, "relu1");
    assert_int_equal(p->st[r1].cls, VDNN_CLASS_SWAP);
    int off = find_action(p, fwd(&r, "add"), VDNN_ACT_OFFLOAD, r1, -1);
    assert_true(off >= 0);
    assert_true(find_action(p, p->st[r1].prefetch_step, VDNN_ACT_PREFETCH, r1, -1) >= 0);
    assert_true(p->st[r1].prefetch_step < bwd(&r, "conv2"));
    int w = find_action(p, bwd(&r, "conv2"), VDNN_ACT_WAIT, r1, -2);
    assert_true(w >= 0 && w < find_action(p, bwd(&r, "conv2"), VDNN_ACT_COMPUTE, -1, -1));
    check_plan(p, r.g, 0);
    release(&r);

    vdnn_graph_t *g = parse(residual_cfg, "residual.cfg");
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 8, 6, 6}, 10, &err), err);
    print_message("residual: none peak / max live = %.4f\n", check_all_policies(g, f->be));
    vdnn_graph_free(g);
}

static void test_inception(void **state)
{
    fixture *f = *state;
    planned r = make(inception_cfg, "inception.cfg", f->be, VDNN_POLICY_NONE, true, 2, 3, 8, 8);
    const vdnn_plan_t *p = r.p;
    const char *heads[4] = {"b1", "b2.reduce", "b3.reduce", "b4.pool"};
    int r0 = out_of(&r, "relu0");
    assert_int_equal(out_of(&r, "conv0"), r0); /* relu0 in place on conv0 */
    /* relu0's output: four readers; last forward read by the last branch head, backward reads by the
     * three convolution heads (their x; the pool reads its indices, relu0 its mask), b3.reduce's first
     * and b1's last. */
    assert_live(p, r0, fwd(&r, "conv0"), fwd(&r, "b4.pool"), bwd(&r, "b3.reduce"), bwd(&r, "b1"));
    /* Its gradient: the pool branch (first in backward order) writes it, the three convs'
     * temporaries are accumulated into it. */
    int gr = grad_of(&r, "relu0");
    assert_int_equal(p->steps[bwd(&r, "b4.pool")].dx[0], gr);
    for (int k = 0; k < 3; k++) {
        int s = bwd(&r, heads[k]);
        int tmp = p->steps[s].dx[0];
        assert_int_equal(p->st[tmp].kind, VDNN_ST_TEMP);
        assert_true(find_action(p, s, VDNN_ACT_ACCUM, gr, tmp) > find_action(p, s, VDNN_ACT_COMPUTE, -1, -1));
        assert_live(p, tmp, s, -1, s, s);
    }
    assert_int_equal(grad_of(&r, "conv0"), gr); /* relu0's backward runs in place */
    assert_live(p, gr, bwd(&r, "b4.pool"), -1, bwd(&r, "b4.pool"), bwd(&r, "conv0"));
    /* The concat hands each branch its own gradient slice: four plain gradients. */
    int cat = bwd(&r, "cat");
    const char *tails[4] = {"b1.relu", "b2.relu", "b3.relu", "b4.relu"};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(p->steps[cat].dx[k], grad_of(&r, tails[k]));
        assert_int_equal(p->st[grad_of(&r, tails[k])].kind, VDNN_ST_GRAD);
        /* Each branch's output lives until the concat: no backward step reads it. */
        int o = out_of(&r, tails[k]);
        assert_int_equal(p->st[o].last_fwd_use, fwd(&r, "cat"));
        assert_int_equal(p->st[o].last_use, fwd(&r, "cat"));
    }
    plan_stats ps = check_plan(p, r.g, 0);
    assert_int_equal(ps.n_accum, 3);
    release(&r);

    vdnn_graph_t *g = parse(inception_cfg, "inception.cfg");
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){2, 3, 8, 8}, 10, &err), err);
    print_message("inception: none peak / max live = %.4f\n", check_all_policies(g, f->be));
    vdnn_graph_free(g);
}

/* ---- the zoo ---- */

typedef struct zoo_size {
    const char *name;
    int n, c, h, w;
} zoo_size;

static void test_zoo(void **state)
{
    fixture *f = *state;
    static const zoo_size zoo[] = {
        {"lenet", 8, 1, 28, 28},     {"alexnet", 2, 3, 67, 67},   {"overfeat", 2, 3, 79, 79},
        {"googlenet", 2, 3, 32, 32}, {"vgg16", 2, 3, 32, 32},     {"vgg19", 2, 3, 32, 32},
        {"resnet18", 2, 3, 32, 32},  {"resnet50", 2, 3, 32, 32},  {"resnet101", 2, 3, 32, 32},
        {"resnet152", 2, 3, 32, 32},
        /* The paper's sizes, where fragmentation has room to show. */
        {"vgg16", 256, 3, 224, 224}, {"alexnet", 128, 3, 227, 227}, {"googlenet", 128, 3, 224, 224},
        {"resnet50", 64, 3, 224, 224},
    };
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        if (quick() && strcmp(zoo[i].name, "lenet") && strcmp(zoo[i].name, "resnet18") && strcmp(zoo[i].name, "googlenet"))
            continue;
        vdnn_graph_t *g = vt_load_zoo(zoo[i].name);
        vdnn_error err;
        vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){zoo[i].n, zoo[i].c, zoo[i].h, zoo[i].w}, 10, &err), err);
        double frag = check_all_policies(g, f->be);
        print_message("%-10s %3dx%dx%dx%d: none peak / max live = %.6f\n", zoo[i].name, zoo[i].n, zoo[i].c, zoo[i].h,
                      zoo[i].w, frag);
        vdnn_graph_free(g);
    }
}

/* ---- conv on sequence models ---- */

/* The storage that layer `name` writes, or -1. */
static int storage_named(const vdnn_plan_t *p, const char *name)
{
    for (int i = 0; i < p->n_storages; i++)
        if (!strcmp(p->st[i].name, name)) return i;
    return -1;
}

/* Sequence models have no convolutions: conv swaps the inputs of their GEMM layers, which must move something,
 * lower the peak below none's and swap fewer maps than all (the residual stream, read by layer norms and adds,
 * stays). With `replay`, every plan passes the replay checks; without, the classes alone are checked here. */
static void check_seq_conv(vdnn_graph_t *g, vdnn_backend_t *be, bool replay, const char *swapped, const char *kept)
{
    if (replay) check_all_policies(g, be);
    for (int k = 0; !replay && k < N_STATIC; k++) {
        vdnn_plan_t *p = plan_of(g, be, static_policies[k], true, 0, NULL);
        check_classes(p, g);
        vdnn_plan_free(p);
    }
    vdnn_plan_t *pn = plan_of(g, be, VDNN_POLICY_NONE, true, 0, NULL);
    vdnn_plan_t *pa = plan_of(g, be, VDNN_POLICY_ALL, true, 0, NULL);
    vdnn_plan_t *pc = plan_of(g, be, VDNN_POLICY_CONV, true, 0, NULL);
    int n_all = 0, n_conv = 0;
    for (int i = 0; i < pc->n_storages; i++) {
        n_all += pa->st[i].cls == VDNN_CLASS_SWAP;
        n_conv += pc->st[i].cls == VDNN_CLASS_SWAP;
        if (pc->st[i].cls == VDNN_CLASS_SWAP && pa->st[i].cls != VDNN_CLASS_SWAP)
            fail_msg("%s: conv swaps '%s', which all keeps", g->name, pc->st[i].name);
    }
    print_message("%s: conv swaps %d maps (all %d), %zu bytes moved, peak %zu (none %zu, all %zu)\n", g->name, n_conv,
                  n_all, pc->bytes_moved, pc->peak_device_bytes, pn->peak_device_bytes, pa->peak_device_bytes);
    assert_true(n_conv > 0 && n_conv < n_all);
    assert_true(pc->bytes_moved > 0 && pc->bytes_moved < pa->bytes_moved);
    assert_true(pc->peak_device_bytes < pn->peak_device_bytes);
    const int s = storage_named(pc, swapped), k = storage_named(pc, kept);
    if (s < 0 || k < 0) fail_msg("%s: no storage '%s' or '%s'", g->name, swapped, kept);
    assert_int_equal(pc->st[s].cls, VDNN_CLASS_SWAP);
    assert_int_equal(pc->st[k].cls, VDNN_CLASS_KEEP);
    assert_int_equal(pa->st[k].cls, VDNN_CLASS_SWAP);
    vdnn_plan_free(pc);
    vdnn_plan_free(pa);
    vdnn_plan_free(pn);
}

static void test_seq_conv(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    /* gpt-mini: an attention's probabilities (attn_mix reads them) are swapped, a block's residual sum kept. */
    vdnn_graph_t *g = vt_load_zoo("gpt-mini");
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){4, 1, 32, 1}, 256, &err), err);
    check_seq_conv(g, f->be, true, "h1.probs", "h1.res1");
    /* In head groups the mix reaches proj through a feat_cat: its output is proj's input. */
    vdnn_graph_t *grouped = NULL;
    vt_assert_ok(vdnn_model_with_head_groups(g, 2, &grouped, &err), err);
    vt_assert_ok(vdnn_graph_resolve(grouped, (vdnn_shape){4, 1, 32, 1}, 256, &err), err);
    check_seq_conv(grouped, f->be, true, "h1.mix", "h1.res1");
    vdnn_graph_free(grouped);
    vdnn_graph_free(g);
    /* lstm-lm: a chunk's output (the next chunk reads it) is swapped; its gates, read by its own backward, kept. Its
     * chunks share their parameters by reference, whose summed gradients the replay does not model: test_plan_validate
     * checks its plans. */
    g = vt_load_zoo("lstm-lm");
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){4, 1, 128, 1}, 256, &err), err);
    check_seq_conv(g, f->be, false, "lstm1.t1", "lstm1.t1.aux");
    vdnn_graph_free(g);
}

/* vdnn_model_fit_head_groups: gpt-mini (4 heads) at context 1024, batch 2, under auto needs 79.4 MiB with its whole
 * attention, 55.5 MiB in 2 groups, 38.8 MiB in 4: 50 MiB takes 4, 100 MiB 1, 30 MiB none (the least-needing, 4). */
static void test_fit_head_groups(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *zoo = vt_load_zoo("gpt-mini"), *m = NULL, *out = NULL;
    vt_assert_ok(vdnn_model_with_context(zoo, 1024, &m, &err), err);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_AUTO;
    const vdnn_shape in = {2, 1, 1024, 1};
    const struct {
        size_t budget;
        int groups;
        bool fits;
    } cases[] = {{(size_t)50 << 20, 4, true}, {(size_t)100 << 20, 1, true}, {(size_t)30 << 20, 4, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mem.budget = cases[i].budget;
        int groups = 0;
        bool fits = !cases[i].fits;
        vt_assert_ok(vdnn_model_fit_head_groups(m, f->be, in, 256, &mem, 0, 0, 0, 0, &out, &groups, &fits, &err), err);
        assert_int_equal(groups, cases[i].groups);
        assert_int_equal(fits, cases[i].fits);
        /* The model in those groups: G pairs of probabilities and mix per attention, joined. */
        int probs = 0;
        for (int l = 1; l < out->n_layers; l++) probs += out->layers[l].kind == VDNN_LAYER_ATTN_PROBS;
        assert_int_equal(probs, 4 * cases[i].groups);
        vdnn_graph_free(out);
        out = NULL;
    }
    int groups;
    bool fits;
    vt_assert_error(vdnn_model_fit_head_groups(m, f->be, in, 256, &mem, 0, 0, 0, 0, NULL, &groups, &fits, &err), err,
                    VDNN_ERR_INVALID_ARG, "no model or no place");
    vdnn_graph_t *lenet = vt_load_zoo("lenet");
    vt_assert_error(vdnn_model_fit_head_groups(lenet, f->be, (vdnn_shape){2, 1, 28, 28}, 10, &mem, 0, 0, 0, 0, &out,
                                               &groups, &fits, &err),
                    err, VDNN_ERR_INVALID_ARG, "has no attention");
    assert_null(out);
    vdnn_graph_free(lenet);
    vdnn_graph_free(m);
    vdnn_graph_free(zoo);
}

/* The auto plan of m under mem's options at budget: its summary. */
static vdnn_plan_summary fit_summary(const vdnn_graph_t *m, vdnn_backend_t *be, vdnn_shape in, vdnn_memory_options mem,
                                     size_t budget)
{
    vdnn_error err;
    vdnn_plan_t *p = NULL;
    vdnn_plan_summary s;
    mem.budget = budget;
    vt_assert_ok(vdnn_plan_create(m, be, NULL, in, 256, &mem, &p, &err), err);
    vt_assert_ok(vdnn_plan_summarize(p, &s, &err), err);
    vdnn_plan_free(p);
    return s;
}

/* vdnn_model_fit_attention: gpt-mini at context 1024, batch 2, whose probabilities (32 MiB an attention) dominate.
 * Unlimited, the choice is at least as fast as fusing none or every attention; between the least budgets of every
 * attention fused and of none, it fits with some fused; below every least budget it says so. The model it returns
 * holds the attentions its answer names fused and the rest materialized. */
/* The search from profiles of the model unfused and all fused (vdnn_model_fit_attention_measured): with estimates
 * for both (each layer's estimate its own), every variant's composed profile is its own estimate, so every choice
 * is the estimate search's; and composing refuses profiles of other settings and a layer neither has. */
static void test_fit_attention_measured(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *zoo = vt_load_zoo("gpt-mini"), *all = NULL, *out = NULL, *want = NULL;
    vt_assert_ok(vdnn_model_with_fused_attention(zoo, &all, &err), err);
    const vdnn_shape in = {8, 1, 64, 1}, other = {4, 1, 64, 1};
    vdnn_profile_t *pu = NULL, *pf = NULL, *pf4 = NULL, *c = NULL;
    vt_assert_ok(vdnn_profile_estimate_model(zoo, in, 256, 1e12, 1e11, 1.6e10, 1.6e10, &pu, &err), err);
    vt_assert_ok(vdnn_profile_estimate_model(all, in, 256, 1e12, 1e11, 1.6e10, 1.6e10, &pf, &err), err);
    vt_assert_ok(vdnn_profile_estimate_model(all, other, 256, 1e12, 1e11, 1.6e10, 1.6e10, &pf4, &err), err);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_AUTO;
    const size_t budgets[] = {SIZE_MAX, 10u << 20, 6u << 20, 5u << 20, 4u << 20};
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        mem.budget = budgets[i];
        bool got[4], exp[4], fits, exp_fits;
        int k, exp_k;
        vt_assert_ok(vdnn_model_fit_attention_measured(zoo, f->be, in, 256, &mem, pu, pf, &out, got, &k, &fits, &err),
                     err);
        vt_assert_ok(vdnn_model_fit_attention(zoo, f->be, in, 256, &mem, 1e12, 1e11, 1.6e10, 1.6e10, &want, exp,
                                              &exp_k, &exp_fits, &err), err);
        if (k != exp_k || fits != exp_fits || memcmp(got, exp, sizeof got))
            fail_msg("budget %zu: from the two profiles %d fused (fits %d), from the estimate %d (fits %d)",
                     budgets[i], k, fits, exp_k, exp_fits);
        vdnn_graph_free(out);
        vdnn_graph_free(want);
        out = want = NULL;
    }
    /* The profile a variant gets: its fused attentions' times from the fused profile, the rest the unfused one's. */
    const vdnn_profile_t *both[2] = {pu, pf};
    const bool some[4] = {false, false, true, true};
    vt_assert_ok(vdnn_model_with_fused_attentions(zoo, some, 4, &out, &err), err);
    vdnn_profile_t *fast = NULL;
    vt_assert_ok(vdnn_profile_estimate_model(all, in, 256, 4e12, 4e11, 1.6e10, 1.6e10, &fast, &err), err);
    const vdnn_profile_t *apart[2] = {pu, fast};
    vt_assert_ok(vdnn_profile_compose(apart, 2, out, &c, &err), err);
    assert_int_equal(c->n_layers, out->n_layers);
    int from_fused = 0;
    for (int l = 1; l < out->n_layers; l++) {
        const vdnn_profile *src = out->layers[l].kind == VDNN_LAYER_ATTN ? fast : pu;
        int at = -1;
        for (int j = 1; j < src->n_layers && at < 0; j++)
            if (!strcmp(src->names[j], out->layers[l].name) && src->kinds[j] == out->layers[l].kind) at = j;
        assert_true(at > 0);
        if (c->fwd_s[l] != src->fwd_s[at] || c->bwd_s[l] != src->bwd_s[at])
            fail_msg("layer %s: composed %g/%g s, its profile's %g/%g", out->layers[l].name, c->fwd_s[l],
                     c->bwd_s[l], src->fwd_s[at], src->bwd_s[at]);
        from_fused += src == fast;
    }
    assert_int_equal(from_fused, 2);
    assert_true(c->d2h.bytes_per_s == pu->d2h.bytes_per_s && c->load_s == pu->load_s);
    vdnn_profile_free(c);
    vdnn_profile_free(fast);
    /* A layer neither has: the fused model from the unfused profile alone. */
    assert_int_equal(vdnn_profile_compose(both, 1, all, &c, &err), VDNN_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "h0.mix"));
    assert_null(c);
    /* Another batch. */
    const vdnn_profile_t *mixed[2] = {pu, pf4};
    assert_int_equal(vdnn_profile_compose(mixed, 2, out, &c, &err), VDNN_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "batch 4"));
    assert_int_equal(vdnn_model_fit_attention_measured(zoo, f->be, in, 256, &mem, pu, NULL, &want, NULL, &(int){0},
                                                       &(bool){false}, &err),
                     VDNN_ERR_INVALID_ARG);
    vdnn_graph_free(out);
    vdnn_profile_free(pu);
    vdnn_profile_free(pf);
    vdnn_profile_free(pf4);
    vdnn_graph_free(all);
    vdnn_graph_free(zoo);
}

static void test_fit_attention(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *zoo = vt_load_zoo("gpt-mini"), *m = NULL, *all = NULL, *out = NULL;
    vt_assert_ok(vdnn_model_with_context(zoo, 1024, &m, &err), err);
    vt_assert_ok(vdnn_model_with_fused_attention(m, &all, &err), err);
    assert_int_equal(vdnn_model_attention_count(m), 4);
    assert_int_equal(vdnn_model_attention_count(all), 0);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_AUTO;
    const vdnn_shape in = {2, 1, 1024, 1};
    const vdnn_plan_summary none_s = fit_summary(m, f->be, in, mem, SIZE_MAX),
                            all_s = fit_summary(all, f->be, in, mem, SIZE_MAX);
    if (!(all_s.min_budget_bytes < none_s.min_budget_bytes))
        fail_msg("fused attention's least budget %zu, materialized %zu", all_s.min_budget_bytes, none_s.min_budget_bytes);
    const size_t between = all_s.min_budget_bytes / 2 + none_s.min_budget_bytes / 2;
    const size_t budgets[] = {SIZE_MAX, between, all_s.min_budget_bytes, all_s.min_budget_bytes / 2};
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        mem.budget = budgets[i];
        bool fused[4] = {true, true, true, true}, fits = false;
        int k = -1;
        vt_assert_ok(vdnn_model_fit_attention(m, f->be, in, 256, &mem, 0, 0, 0, 0, &out, fused, &k, &fits, &err), err);
        int named = 0, attn = 0, probs = 0;
        for (int a = 0; a < 4; a++) named += fused[a];
        for (int l = 1; l < out->n_layers; l++) {
            attn += out->layers[l].kind == VDNN_LAYER_ATTN;
            probs += out->layers[l].kind == VDNN_LAYER_ATTN_PROBS;
        }
        assert_int_equal(named, k);
        assert_int_equal(attn, k);
        assert_int_equal(probs, 4 - k);
        /* The i-th attention fused or not as fused[i] says: its probabilities layer is there or not. */
        for (int a = 0, l = 1; l < m->n_layers; l++)
            if (m->layers[l].kind == VDNN_LAYER_ATTN_PROBS) {
                bool present = false;
                for (int o = 1; o < out->n_layers; o++)
                    present |= out->layers[o].kind == VDNN_LAYER_ATTN_PROBS && !strcmp(out->layers[o].name, m->layers[l].name);
                assert_true(present == !fused[a++]);
            }
        const vdnn_plan_summary got = fit_summary(out, f->be, in, mem, budgets[i]);
        assert_int_equal(fits, got.feasible);
        if (i == 0) {
            assert_true(fits);
            if (!(got.simulated_s <= none_s.simulated_s && got.simulated_s <= all_s.simulated_s))
                fail_msg("unlimited: %d fused simulates %g s, none %g s, all %g s", k, got.simulated_s,
                         none_s.simulated_s, all_s.simulated_s);
        } else if (i < 3) {
            if (!fits || k < 1) fail_msg("budget %zu: fits %d with %d fused", budgets[i], fits, k);
        } else {
            assert_false(fits);
        }
        vdnn_graph_free(out);
        out = NULL;
    }
    /* Some fused by hand; a wrong count of choices is refused. */
    const bool some[4] = {false, true, false, true};
    vt_assert_ok(vdnn_model_with_fused_attentions(m, some, 4, &out, &err), err);
    assert_int_equal(vdnn_model_attention_count(out), 2);
    vdnn_graph_free(out);
    out = NULL;
    vt_assert_error(vdnn_model_with_fused_attentions(m, some, 3, &out, &err), err, VDNN_ERR_INVALID_ARG,
                    "3 choices given");
    int k;
    bool fits;
    vt_assert_error(vdnn_model_fit_attention(m, f->be, in, 256, &mem, 0, 0, 0, 0, NULL, NULL, &k, &fits, &err), err,
                    VDNN_ERR_INVALID_ARG, "no model or no place");
    vdnn_graph_t *grouped = NULL;
    vt_assert_ok(vdnn_model_with_head_groups(m, 2, &grouped, &err), err);
    vt_assert_error(vdnn_model_fit_attention(grouped, f->be, in, 256, &mem, 0, 0, 0, 0, &out, NULL, &k, &fits, &err),
                    err, VDNN_ERR_UNSUPPORTED, "head groups");
    assert_null(out);
    vdnn_graph_t *lenet = vt_load_zoo("lenet");
    vt_assert_error(vdnn_model_fit_attention(lenet, f->be, (vdnn_shape){2, 1, 28, 28}, 10, &mem, 0, 0, 0, 0, &out,
                                             NULL, &k, &fits, &err),
                    err, VDNN_ERR_INVALID_ARG, "has no attention");
    vdnn_graph_free(lenet);
    vdnn_graph_free(grouped);
    vdnn_graph_free(all);
    vdnn_graph_free(m);
    vdnn_graph_free(zoo);
}

/* ---- policy um ---- */

/* um classifies as all does; its swapped storages have no arena blocks but ranges of their own in the managed
 * pool; each migrates out after its last forward compute, back after that migration is done, and is waited
 * for before its first backward use. The simulator replays it. */
static void check_um(vdnn_graph_t *g, vdnn_backend_t *be)
{
    vdnn_plan_t *pa = plan_of(g, be, VDNN_POLICY_ALL, true, 0, NULL);
    vdnn_plan_t *pu = plan_of(g, be, VDNN_POLICY_UM, true, 0, NULL);
    const char *what = g->name;
    assert_int_equal(pu->policy, VDNN_POLICY_UM);
    assert_int_equal(pu->n_storages, pa->n_storages);
    const int N = pu->n_storages;
    int n_swap = 0;
    size_t managed = 0;
    for (int i = 0; i < N; i++) {
        const vdnn_storage *x = &pu->st[i], *y = &pa->st[i];
        assert_string_equal(x->name, y->name);
        if (x->cls != y->cls || x->prefetch_step != y->prefetch_step)
            fail_msg("%s: '%s' is %s (prefetch %d) under um, %s (prefetch %d) under all", what, x->name,
                     vdnn_class_name(x->cls), x->prefetch_step, vdnn_class_name(y->cls), y->prefetch_step);
        if (x->cls != VDNN_CLASS_SWAP) continue;
        n_swap++;
        /* Its own range, on a 64 KiB boundary, never shared. */
        assert_true(x->host_offset % (64 << 10) == 0);
        assert_true(x->host_offset + x->bytes <= pu->managed_bytes);
        managed += (x->bytes + (64 << 10) - 1) / (64 << 10) * (64 << 10);
        for (int j = 0; j < i; j++)
            if (pu->st[j].cls == VDNN_CLASS_SWAP && x->host_offset < pu->st[j].host_offset + pu->st[j].bytes &&
                pu->st[j].host_offset < x->host_offset + x->bytes)
                fail_msg("%s: '%s' and '%s' share managed memory", what, x->name, pu->st[j].name);
        for (int b = 0; b < pu->n_blocks; b++)
            if (pu->blocks[b].storage == i) fail_msg("%s: managed '%s' has an arena block", what, x->name);
    }
    assert_true(n_swap > 0);
    assert_int_equal(pu->managed_bytes, managed);
    assert_int_equal(pu->host_bytes, 0);
    assert_int_equal(pa->managed_bytes, 0);
    assert_int_equal(pu->bytes_moved, pa->bytes_moved);
    assert_int_equal(pu->n_blocks, pa->n_blocks - 2 * n_swap);
    assert_int_equal(pu->n_events, pa->n_events);
    assert_true(pu->peak_device_bytes <= pa->peak_device_bytes);
    assert_true(pu->feasible);

    /* Replay: 0 on the device, 1 going out, 2 out (migration waited for), 3 coming back, then 0 again. */
    int *where = calloc((size_t)N, sizeof(int)), *u = malloc(sizeof(int) * 4096);
    int *ev_state = calloc((size_t)pu->n_events + 1, sizeof(int)); /* 0 unused, 1 recorded, 2 waited */
    assert_true(where && u && ev_state);
    for (int st = 0; st < pu->n_steps; st++) {
        const vdnn_step *S = &pu->steps[st];
        bool computed = false;
        for (int k = 0; k < S->n_actions; k++) {
            const vdnn_action *a = &pu->actions[S->first_action + k];
            switch (a->kind) {
            case VDNN_ACT_OFFLOAD:
                if (!computed || st != pu->st[a->a].last_fwd_use || where[a->a] != 0)
                    fail_msg("%s: '%s' migrates out at step %d (computed %d, state %d)", what, pu->st[a->a].name, st,
                             computed, where[a->a]);
                assert_int_equal(ev_state[a->event], 0);
                ev_state[a->event] = 1;
                where[a->a] = 1;
                break;
            case VDNN_ACT_PREFETCH:
                if (where[a->a] != 2 || st != pu->st[a->a].prefetch_step)
                    fail_msg("%s: '%s' migrates back at step %d before its migration out was waited for", what,
                             pu->st[a->a].name, st);
                assert_int_equal(ev_state[a->event], 0);
                ev_state[a->event] = 1;
                where[a->a] = 3;
                break;
            case VDNN_ACT_WAIT:
                assert_int_equal(ev_state[a->event], 1);
                ev_state[a->event] = 2;
                if (where[a->a] == 1) where[a->a] = 2;
                else if (where[a->a] == 3) where[a->a] = 0;
                else fail_msg("%s: wait for '%s' in state %d", what, pu->st[a->a].name, where[a->a]);
                /* Waiting for the way out is for the way back alone: it sits where the prefetch is issued. */
                if (where[a->a] == 2) assert_int_equal(st, pu->st[a->a].prefetch_step);
                break;
            case VDNN_ACT_COMPUTE: {
                computed = true;
                int n = step_uses(pu, g, st, u);
                for (int k2 = 0; k2 < n; k2++)
                    if (where[u[k2]] != 0)
                        fail_msg("%s: step %d uses '%s' while it is not back (state %d)", what, st, pu->st[u[k2]].name,
                                 where[u[k2]]);
                break;
            }
            default: break;
            }
        }
    }
    for (int i = 0; i < N; i++)
        if (where[i] != 0) fail_msg("%s: '%s' ends the iteration in state %d", what, pu->st[i].name, where[i]);
    for (int e = 0; e < pu->n_events; e++) assert_int_equal(ev_state[e], 2);

    vdnn_profile prof;
    vdnn_timeline t;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate(g, 1e12, 1e11, 16e9, &prof, &err), err);
    vt_assert_ok(vdnn_simulate(pu, g, &prof, &t, &err), err);
    assert_true(t.iteration_s > 0 && t.d2h_s > 0 && t.h2d_s > 0);
    vdnn_timeline_release(&t);
    vdnn_profile_release(&prof);
    free(where);
    free(u);
    free(ev_state);
    vdnn_plan_free(pa);
    vdnn_plan_free(pu);
}

static void test_um(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *text, *name;
        vdnn_shape in;
    } made[] = {{chain_cfg, "chain.cfg", {2, 3, 8, 8}},
                {residual_cfg, "residual.cfg", {2, 8, 6, 6}},
                {inception_cfg, "inception.cfg", {2, 3, 8, 8}}};
    vdnn_error err;
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        vdnn_graph_t *g = parse(made[i].text, made[i].name);
        vt_assert_ok(vdnn_graph_resolve(g, made[i].in, 10, &err), err);
        check_um(g, f->be);
        vdnn_graph_free(g);
    }
    static const zoo_size zoo[] = {{"lenet", 8, 1, 28, 28}, {"resnet18", 2, 3, 32, 32}, {"googlenet", 2, 3, 32, 32}};
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        vdnn_graph_t *g = vt_load_zoo(zoo[i].name);
        vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){zoo[i].n, zoo[i].c, zoo[i].h, zoo[i].w}, 10, &err), err);
        check_um(g, f->be);
        vdnn_graph_free(g);
    }
    /* Evaluation keeps everything, whatever the policy; and the name round-trips, at the end of the list. */
    vdnn_graph_t *g = vt_load_zoo("lenet");
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){8, 1, 28, 28}, 10, &err), err);
    vdnn_plan_t *pe = plan_of(g, f->be, VDNN_POLICY_UM, false, 0, NULL);
    assert_int_equal(pe->policy, VDNN_POLICY_NONE);
    assert_int_equal(pe->managed_bytes, 0);
    vdnn_plan_free(pe);
    vdnn_graph_free(g);
    vdnn_policy pol;
    assert_true(vdnn_policy_parse("um", &pol) && pol == VDNN_POLICY_UM);
    assert_string_equal(vdnn_policy_name(VDNN_POLICY_UM), "um");
    assert_int_equal(VDNN_POLICY_UM, VDNN_POLICY_COUNT - 1);
}

/* ---- placement and the arena ---- */

static void test_place_intervals(void **state)
{
    (void)state;
    vdnn_error err;
    /* From offset 0 with nothing placed yet: the first block goes at 0, not at "nowhere". */
    vdnn_interval one[1] = {{128, 0, 3, 99}};
    size_t top = 1;
    vt_assert_ok(vdnn_place_intervals(one, 1, 0, &top, &err), err);
    assert_int_equal(one[0].offset, 0);
    assert_int_equal(top, 128);
    /* Two at the same time stack, a third after both reuses the lowest gap that fits. */
    vdnn_interval iv[4] = {{256, 0, 2, 0}, {128, 1, 3, 0}, {64, 4, 5, 0}, {192, 3, 4, 0}};
    vt_assert_ok(vdnn_place_intervals(iv, 4, 0, &top, &err), err);
    for (int a = 0; a < 4; a++) {
        assert_true(iv[a].offset + iv[a].bytes <= top);
        for (int b = 0; b < a; b++)
            if (iv[a].begin <= iv[b].end && iv[b].begin <= iv[a].end)
                assert_true(iv[a].offset + iv[a].bytes <= iv[b].offset || iv[b].offset + iv[b].bytes <= iv[a].offset);
    }
    /* Largest first: 256 and 192 never meet, so both sit at 0; 128 meets both and goes above the
     * 256; 64 meets only the 192 and takes the gap right above it. */
    assert_int_equal(iv[0].offset, 0);
    assert_int_equal(iv[3].offset, 0);
    assert_int_equal(iv[1].offset, 256);
    assert_int_equal(iv[2].offset, 192);
    assert_int_equal(top, 384);
    /* Best fit: X 512 and Y 128 die at step 4, L1 256 and L2 64 live on; at step 5 the free gaps
     * are [0,512) and [768,896): a 64-byte block takes the smaller, not the first. */
    vdnn_interval bf[5] = {{512, 0, 4, 0}, {256, 0, 9, 0}, {128, 0, 4, 0}, {64, 0, 9, 0}, {64, 5, 6, 0}};
    vt_assert_ok(vdnn_place_intervals(bf, 5, 0, &top, &err), err);
    assert_int_equal(bf[0].offset, 0);
    assert_int_equal(bf[1].offset, 512);
    assert_int_equal(bf[2].offset, 768);
    assert_int_equal(bf[3].offset, 896);
    assert_int_equal(bf[4].offset, 768);
    assert_int_equal(top, 960);
    /* A base: nothing below it. */
    vdnn_interval based[2] = {{64, 0, 0, 0}, {64, 0, 0, 0}};
    vt_assert_ok(vdnn_place_intervals(based, 2, 1024, &top, &err), err);
    assert_true(based[0].offset >= 1024 && based[1].offset >= 1024 && based[0].offset != based[1].offset);
    assert_int_equal(top, 1024 + 128);
    vt_assert_ok(vdnn_place_intervals(based, 0, 512, &top, &err), err);
    assert_int_equal(top, 512);
}

static void test_arena(void **state)
{
    (void)state;
    vdnn_arena a;
    vdnn_error err;
    vdnn_arena_init(&a, NULL, 1000);
    vt_assert_ok(vdnn_arena_take(&a, 0, 100, 1, &err), err);
    vt_assert_ok(vdnn_arena_take(&a, 100, 200, 2, &err), err);
    vt_assert_error(vdnn_arena_take(&a, 250, 10, 3, &err), err, VDNN_ERR_BACKEND, "overlaps live block 2");
    vt_assert_error(vdnn_arena_take(&a, 900, 101, 4, &err), err, VDNN_ERR_BUDGET, "outside the 1000-byte arena");
    vt_assert_error(vdnn_arena_take(&a, SIZE_MAX - 5, 10, 5, &err), err, VDNN_ERR_BUDGET, "outside");
    assert_int_equal(a.high_water, 300);
    assert_int_equal(a.live_bytes, 300);
    vt_assert_ok(vdnn_arena_give(&a, 2, &err), err);
    vt_assert_error(vdnn_arena_give(&a, 2, &err), err, VDNN_ERR_BACKEND, "block 2 is not live");
    vt_assert_ok(vdnn_arena_take(&a, 250, 750, 6, &err), err);
    assert_int_equal(a.high_water, 1000);
    assert_int_equal(a.live_bytes, 850);
    /* After a failed iteration only the persistent range (id -1) stays. */
    vt_assert_ok(vdnn_arena_take(&a, 100, 100, -1, &err), err);
    vdnn_arena_give_all_but(&a, -1);
    assert_int_equal(a.n_live, 1);
    assert_int_equal(a.live_bytes, 100);
    vt_assert_ok(vdnn_arena_take(&a, 0, 100, 7, &err), err);
    vt_assert_error(vdnn_arena_take(&a, 150, 10, 8, &err), err, VDNN_ERR_BACKEND, "overlaps live block -1");
    vdnn_arena_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_intervals), cmocka_unit_test(test_arena),
        cmocka_unit_test(test_chain),           cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_residual),        cmocka_unit_test(test_inception),
        cmocka_unit_test(test_zoo),             cmocka_unit_test(test_seq_conv),
        cmocka_unit_test(test_um),              cmocka_unit_test(test_fit_head_groups),
        cmocka_unit_test(test_fit_attention),
        cmocka_unit_test(test_fit_attention_measured),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
