/* The plan validator: every plan every planner makes for every zoo net passes it (in-core, at half and a quarter
 * of the in-core peak, and at the smallest budget known; with parameters homed, inputs streamed, micro-batches
 * and a pipelined stage), and plans corrupted by hand fail it with a message naming the problem. A validator
 * that cannot fail proves nothing. VDNN_TEST_QUICK=1 (the sanitizer build) plans fewer nets and options. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/plan.h"
#include "plan/plan_validate.h"
#include "plan/planner.h"
#include "testutil.h"

/* The zoo at the small inputs test_planners trains them at (the smallest each net allows). Planning time grows
 * with depth, auto's most: the deep ResNets are planned with the plain options only, and the deepest ask auto
 * for one budget, so the test stays within a minute (VDNN_TEST_FULL=1 plans everything, and checks every
 * classification the planners place on the way too). */
typedef enum net_scope { ALL_OPTIONS, PLAIN_ONLY, AUTO_ONCE } net_scope;

typedef struct zoo_net {
    const char *name;
    vdnn_shape in;
    net_scope scope;
    bool quick; /* also planned under VDNN_TEST_QUICK */
} zoo_net;

static const zoo_net nets[] = {
    {"lenet", {4, 1, 28, 28}, ALL_OPTIONS, true},      {"alexnet", {2, 3, 63, 63}, ALL_OPTIONS, false},
    {"overfeat", {2, 3, 71, 71}, ALL_OPTIONS, false},  {"googlenet", {2, 3, 32, 32}, ALL_OPTIONS, false},
    {"vgg16", {2, 3, 32, 32}, ALL_OPTIONS, true},      {"vgg19", {2, 3, 32, 32}, ALL_OPTIONS, false},
    {"resnet18", {2, 3, 32, 32}, ALL_OPTIONS, true},   {"resnet50", {2, 3, 32, 32}, PLAIN_ONLY, false},
    {"resnet101", {2, 3, 32, 32}, AUTO_ONCE, false},   {"resnet152", {2, 3, 32, 32}, AUTO_ONCE, false},
    /* A sequence model: 64 tokens as 1x64x1, the attention probabilities a 2x4x64x64 tensor. */
    {"gpt-mini", {2, 1, 64, 1}, ALL_OPTIONS, true},
    /* LSTM chunk nodes reading one parameter tensor, whose gradient sums over the chunks. */
    {"lstm-lm", {2, 1, 128, 1}, ALL_OPTIONS, true},
    {"lstm-long", {2, 1, 2048, 1}, AUTO_ONCE, false},  {"biglstm", {1, 1, 20, 1}, AUTO_ONCE, false},
    /* Its output projection tied to the embedding: a parameter two layers read, a gradient summed across steps. */
    {"gpt2-small", {2, 1, 32, 1}, AUTO_ONCE, false},
};
#define N_NETS (int)(sizeof nets / sizeof nets[0])

/* The memory options that change what a plan holds: homes, streamed chunks, micro-batches' gradients and a
 * pipelined stage's held copies. */
typedef struct option_case {
    const char *name;
    bool offload, stream;
    int micro;
    bool pipelined, quick;
} option_case;

static const option_case options[] = {
    {"plain", false, false, 1, false, true},         {"offload_params", true, false, 1, false, true},
    {"stream_inputs", false, true, 1, false, true},  {"offload_params+stream_inputs", true, true, 1, false, false},
    {"micro_batches 2", false, false, 2, false, false}, {"pipelined 2", false, false, 2, true, true},
};
#define N_OPTIONS (int)(sizeof options / sizeof options[0])

static bool env_on(const char *name)
{
    const char *q = getenv(name);
    return q && *q && strcmp(q, "0");
}

static bool quick(void) { return env_on("VDNN_TEST_QUICK"); }
static bool full(void) { return env_on("VDNN_TEST_FULL"); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A net resolved at its small input, with the CPU backend's algorithm candidates for the planners to choose. */
typedef struct planned_net {
    vdnn_graph_t *g;
    vdnn_op_info *info, *info_eval;
    vdnn_layer_algos *algos;
} planned_net;

static void net_open(planned_net *n, vdnn_backend_t *be, const zoo_net *z)
{
    vdnn_error err;
    n->g = vt_load_zoo(z->name);
    vt_assert_ok(vdnn_graph_resolve(n->g, z->in, 10, &err), err);
    n->info = calloc((size_t)n->g->n_layers, sizeof *n->info);
    n->info_eval = calloc((size_t)n->g->n_layers, sizeof *n->info_eval);
    n->algos = calloc((size_t)n->g->n_layers, sizeof *n->algos);
    assert_non_null(n->info);
    assert_non_null(n->info_eval);
    assert_non_null(n->algos);
    vt_assert_ok(vdnn_plan_query_algos(n->g, be, true, n->algos, n->info, &err), err);
    vt_assert_ok(vdnn_plan_query_ops(n->g, be, false, n->info_eval, &err), err);
}

static void net_close(planned_net *n)
{
    free(n->info);
    free(n->info_eval);
    free(n->algos);
    vdnn_graph_free(n->g);
}

static vdnn_backend_t *cpu(void)
{
    vdnn_backend_t *be;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    return be;
}

/* Builds (and so validates) one plan; on failure names the case. Returns the plan's peak. */
static size_t build_checked(const planned_net *n, const vdnn_plan_request *rq, const char *what)
{
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vdnn_status rc = vdnn_plan_build(n->g, rq->training ? n->info : n->info_eval, rq, &p, &err);
    if (rc != VDNN_OK)
        fail_msg("%s %s, policy %s, budget %zu: %s: %s", n->g->name, what, vdnn_policy_name(rq->memory.policy),
                 rq->memory.budget, vdnn_status_name(rc), err.msg);
    const size_t peak = p->peak_device_bytes;
    vdnn_plan_free(p);
    return peak;
}

static void every_planner_every_net(void **state)
{
    (void)state;
    vdnn_backend_t *be = cpu();
    vdnn_plan_checks checks = {.candidates = full()};
    const double t0 = now();
    for (int ni = 0; ni < N_NETS; ni++) {
        const net_scope scope = full() ? ALL_OPTIONS : nets[ni].scope;
        if (quick() && !nets[ni].quick) continue;
        planned_net n;
        net_open(&n, be, &nets[ni]);
        for (int oi = 0; oi < N_OPTIONS; oi++) {
            const option_case *o = &options[oi];
            if ((quick() && !o->quick) || (scope != ALL_OPTIONS && oi > 0)) continue;
            vdnn_plan_request rq = vdnn_plan_request_default();
            rq.algos = n.algos;
            rq.memory.conv_algo = VDNN_ALGO_CHOOSE;
            rq.memory.offload_params = o->offload;
            rq.memory.stream_inputs = o->stream;
            rq.memory.micro_batches = o->micro;
            rq.memory.pipelined = o->pipelined;
            rq.checks = &checks;
            rq.memory.policy = VDNN_POLICY_NONE;
            const size_t in_core = build_checked(&n, &rq, o->name);
            for (int pol = 0; pol < VDNN_POLICY_COUNT; pol++) {
                rq.memory.policy = (vdnn_policy)pol;
                rq.memory.budget = SIZE_MAX;
                const char *why;
                if ((o->offload && !vdnn_plan_offload_supported(&rq, &why)) ||
                    (o->stream && !vdnn_plan_stream_supported(&rq, &why)))
                    continue;
                /* The static policies' plans do not depend on the budget: one is enough. */
                const bool static_policy = pol == VDNN_POLICY_NONE || pol == VDNN_POLICY_ALL ||
                                           pol == VDNN_POLICY_CONV || pol == VDNN_POLICY_UM;
                size_t min = SIZE_MAX;
                vdnn_error err;
                if (!static_policy && !(scope == AUTO_ONCE && pol == VDNN_POLICY_AUTO))
                    vt_assert_ok(vdnn_plan_min_budget(n.g, n.info, &rq, &min, &err), err);
                const size_t budgets[4] = {SIZE_MAX, in_core / 2, in_core / 4, min};
                for (int b = 0; b < (static_policy ? 1 : 4); b++) {
                    if (scope == AUTO_ONCE && pol == VDNN_POLICY_AUTO && b != 1) continue;
                    rq.memory.budget = budgets[b];
                    build_checked(&n, &rq, o->name);
                }
            }
        }
        /* Evaluation plans: forward only, above a training plan's state; with homes, their own copies in. */
        for (int home = 0; home < 2; home++) {
            vdnn_plan_request re = vdnn_plan_request_default();
            re.training = false;
            re.memory.offload_params = home;
            re.variable_base = 1 << 20;
            re.checks = &checks;
            build_checked(&n, &re, home ? "evaluation, homed" : "evaluation");
        }
        net_close(&n);
        if (env_on("VDNN_TEST_VERBOSE"))
            printf("  %s: %ld plans after %.1f s\n", nets[ni].name, checks.plans, now() - t0);
    }
    vdnn_backend_destroy(be);
    printf("plan validator: %ld plans from every planner validated", checks.plans);
    if (checks.candidates) printf(", and %ld classifications the planners placed on the way", checks.placements);
    printf(" (%.1f s)\n", now() - t0);
    assert_true(checks.plans > 0);
}

/* Every zoo net is planned above: a net added to models/ without a case here fails. */
static void zoo_is_covered(void **state)
{
    (void)state;
    DIR *d = opendir(VDNN_SOURCE_DIR "/models");
    assert_non_null(d);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg")) continue;
        bool listed = false;
        for (int i = 0; i < N_NETS; i++)
            listed |= strlen(nets[i].name) == len - 4 && !strncmp(nets[i].name, e->d_name, len - 4);
        if (!listed) fail_msg("models/%s is not planned by this test", e->d_name);
        found++;
    }
    closedir(d);
    assert_int_equal(found, N_NETS);
}

/* ---- Hand-corrupted plans. ---- */

static vdnn_plan_t *plan_of(const planned_net *n, vdnn_policy pol, bool offload, bool stream)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = pol;
    rq.memory.offload_params = offload;
    rq.memory.stream_inputs = stream;
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(n->g, n->info, &rq, &p, &err), err);
    vt_assert_ok(vdnn_plan_validate(p, &err), err); /* sound before it is corrupted */
    return p;
}

static void expect_rejected(const vdnn_plan_t *p, const char *needle, const char *what)
{
    vdnn_error err;
    vdnn_status rc = vdnn_plan_validate(p, &err);
    if (rc == VDNN_OK) fail_msg("%s: the validator accepted it", what);
    if (!strstr(err.msg, needle))
        fail_msg("%s: expected a message containing \"%s\", got \"%s\"", what, needle, err.msg);
    printf("  %s: %s\n", what, err.msg);
}

static void delete_action(vdnn_plan_t *p, int k)
{
    memmove(&p->actions[k], &p->actions[k + 1], sizeof *p->actions * (size_t)(p->n_actions - k - 1));
    p->n_actions--;
    for (int s = 0; s < p->n_steps; s++) {
        vdnn_step *st = &p->steps[s];
        if (st->first_action > k) st->first_action--;
        else if (k < st->first_action + st->n_actions) st->n_actions--;
    }
}

/* Inserts a at the start of step s. */
static void insert_action(vdnn_plan_t *p, int s, vdnn_action a)
{
    if (p->n_actions + 1 > p->cap_actions) {
        p->cap_actions = 2 * (p->n_actions + 1);
        p->actions = realloc(p->actions, sizeof *p->actions * (size_t)p->cap_actions);
        assert_non_null(p->actions);
    }
    const int k = p->steps[s].first_action;
    memmove(&p->actions[k + 1], &p->actions[k], sizeof *p->actions * (size_t)(p->n_actions - k));
    p->n_actions++;
    for (int t = 0; t < p->n_steps; t++)
        if (t != s && p->steps[t].first_action >= k) p->steps[t].first_action++;
    p->steps[s].n_actions++;
}

/* The index of the first action of `kind` on storage x (any storage: -1), optionally with event e (-1: any), at
 * step `step` (-1: any); -1 if none. */
static int find_action(const vdnn_plan_t *p, vdnn_action_kind kind, int x, int e, int step)
{
    for (int s = 0; s < p->n_steps; s++) {
        if (step >= 0 && s != step) continue;
        for (int k = p->steps[s].first_action; k < p->steps[s].first_action + p->steps[s].n_actions; k++) {
            const vdnn_action *a = &p->actions[k];
            if (a->kind == kind && (x < 0 || a->a == x) && (e < 0 || a->event == e)) return k;
        }
    }
    return -1;
}

static int step_of(const vdnn_plan_t *p, int k)
{
    for (int s = 0; s < p->n_steps; s++)
        if (k >= p->steps[s].first_action && k < p->steps[s].first_action + p->steps[s].n_actions) return s;
    return -1;
}

/* A swapped feature map (not in-place shared) with a prefetch, as policy all makes: its prefetch action. */
static int some_prefetch(const vdnn_plan_t *p)
{
    for (int k = 0; k < p->n_actions; k++) {
        const vdnn_action *a = &p->actions[k];
        if (a->kind == VDNN_ACT_PREFETCH && p->st[a->a].cls == VDNN_CLASS_SWAP && !p->st[a->a].homed) return k;
    }
    fail_msg("no swapped storage in the plan");
    return -1;
}

static void corrupt_overlap(const planned_net *n)
{
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_ALL, false, false);
    for (int a = 0; a < p->n_blocks; a++) {
        for (int b = a + 1; b < p->n_blocks; b++) {
            vdnn_block *x = &p->blocks[a], *y = &p->blocks[b];
            if (p->st[x->storage].persistent || p->st[y->storage].persistent || x->begin > y->end ||
                y->begin > x->end || x->offset == y->offset)
                continue;
            y->offset = x->offset;
            expect_rejected(p, "overlaps", "two blocks live at once moved to one offset");
            vdnn_plan_free(p);
            return;
        }
    }
    fail_msg("no two blocks live at once");
}

static void corrupt_drop_fetch_wait(const planned_net *n)
{
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_ALL, false, false);
    const vdnn_action pf = p->actions[some_prefetch(p)];
    const int w = find_action(p, VDNN_ACT_WAIT, pf.a, pf.event, -1);
    assert_true(w >= 0);
    delete_action(p, w);
    expect_rejected(p, "before waiting for its prefetch", "a prefetch's wait dropped");
    vdnn_plan_free(p);
}

static void corrupt_prefetch_after_use(const planned_net *n)
{
    /* The prefetch alone moved past the first use: the wait there finds no copy. */
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_ALL, false, false);
    int k = some_prefetch(p);
    vdnn_action pf = p->actions[k];
    const int need = p->st[pf.a].need_step;
    delete_action(p, k);
    insert_action(p, need + 1, pf);
    expect_rejected(p, "which no earlier copy records", "a prefetch moved after its use");
    vdnn_plan_free(p);

    /* The prefetch and its wait moved past the use: the use finds the block empty. */
    p = plan_of(n, VDNN_POLICY_ALL, false, false);
    k = some_prefetch(p);
    pf = p->actions[k];
    delete_action(p, k);
    const int w = find_action(p, VDNN_ACT_WAIT, pf.a, pf.event, -1);
    const vdnn_action wt = p->actions[w];
    delete_action(p, w);
    insert_action(p, need + 1, wt);
    insert_action(p, need + 1, pf);
    expect_rejected(p, "whose block holds no value yet (swapped out and not fetched)",
                    "a prefetch and its wait moved after the use");
    vdnn_plan_free(p);
}

static void corrupt_free_before_copy_out(const planned_net *n)
{
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_ALL, false, false);
    const int x = p->actions[some_prefetch(p)].a;
    const int off = find_action(p, VDNN_ACT_OFFLOAD, x, -1, -1);
    assert_true(off >= 0);
    const int w = find_action(p, VDNN_ACT_WAIT, x, p->actions[off].event, step_of(p, off));
    assert_true(w >= 0);
    delete_action(p, w);
    expect_rejected(p, "before its copy out", "a copy out's wait before the free dropped");
    vdnn_plan_free(p);
}

static void corrupt_drop_recompute(const planned_net *n)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_analyze(n->g, n->info, &rq, &p, &err), err);
    vdnn_chen_classes(p, n->g, 2, false);
    vt_assert_ok(vdnn_plan_finalize(p, &err), err);
    vt_assert_ok(vdnn_plan_validate(p, &err), err);
    const int k = find_action(p, VDNN_ACT_RECOMPUTE, -1, -1, -1);
    assert_true(k >= 0);
    delete_action(p, k);
    expect_rejected(p, "not recomputed", "a recompute dropped");
    vdnn_plan_free(p);
}

static void corrupt_homes(const planned_net *n)
{
    /* The write-back after the fused update dropped (the copy home and its wait). */
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_NONE, true, false);
    int x = -1;
    for (int i = 0; i < p->n_storages && x < 0; i++)
        if (p->st[i].homed && p->st[i].kind == VDNN_ST_WEIGHT) x = i;
    assert_true(x >= 0);
    const int off = find_action(p, VDNN_ACT_OFFLOAD, x, -1, p->st[x].end_step);
    assert_true(off >= 0);
    const int e = p->actions[off].event;
    delete_action(p, off);
    delete_action(p, find_action(p, VDNN_ACT_WAIT, x, e, -1));
    expect_rejected(p, "without copying it home", "a homed weight's copy home dropped");
    vdnn_plan_free(p);

    /* Its forward fetch dropped: the forward reads a block nothing filled. */
    p = plan_of(n, VDNN_POLICY_NONE, true, false);
    const int pf = find_action(p, VDNN_ACT_PREFETCH, x, -1, p->st[x].home_fwd - 1);
    assert_true(pf >= 0);
    const int pe = p->actions[pf].event;
    delete_action(p, pf);
    expect_rejected(p, "which no earlier copy records", "a homed weight's forward fetch dropped");
    delete_action(p, find_action(p, VDNN_ACT_WAIT, x, pe, -1));
    expect_rejected(p, "homed in host memory and not fetched", "a homed weight's forward fetch and wait dropped");
    vdnn_plan_free(p);
}

static void corrupt_streamed(const planned_net *n)
{
    vdnn_plan_t *p = plan_of(n, VDNN_POLICY_ALL, false, true);
    int xs = -1;
    for (int i = 0; i < p->n_storages && xs < 0; i++)
        if (p->st[i].streamed) xs = i;
    if (xs < 0) fail_msg("%s streams no input", n->g->name);
    /* Its chunks' events given to a swapped map's copies. */
    const int saved = p->st[xs].first_event;
    p->st[xs].first_event = p->actions[some_prefetch(p)].event;
    expect_rejected(p, "used by", "a streamed input's chunk events shared");
    p->st[xs].first_event = saved;
    /* A swapped map that is in host memory while the streamed input is, moved into the input's host range. */
    const vdnn_storage *x = &p->st[xs];
    int y = -1;
    for (int i = 0; i < p->n_storages && y < 0; i++) {
        const vdnn_storage *s = &p->st[i];
        if (s->cls == VDNN_CLASS_SWAP && s->bytes <= x->bytes && s->last_fwd_use <= x->last_use &&
            s->need_step >= x->def_step)
            y = i;
    }
    if (y < 0) fail_msg("no swapped map is in host memory while '%s' is", x->name);
    p->st[y].host_offset = x->host_offset;
    expect_rejected(p, "overlaps that of", "a swapped map's host range moved onto a streamed input's");
    vdnn_plan_free(p);
}

static void corrupted_plans_fail(void **state)
{
    (void)state;
    vdnn_backend_t *be = cpu();
    planned_net n;
    net_open(&n, be, &(zoo_net){"vgg16", {4, 3, 32, 32}, ALL_OPTIONS, true});
    corrupt_overlap(&n);
    corrupt_drop_fetch_wait(&n);
    corrupt_prefetch_after_use(&n);
    corrupt_free_before_copy_out(&n);
    corrupt_drop_recompute(&n);
    corrupt_homes(&n);
    corrupt_streamed(&n);
    net_close(&n);
    vdnn_backend_destroy(be);
}

/* An lstm layer's parameters are shared by its chunks by reference (docs/sequence.md, "LSTM"): in lstm-lm's plans
 * (in-core, with parameters homed, with two micro-batches) each layer's weights and biases are one storage each,
 * read by every chunk, and no other storage is parameter-sized (no copy of them as a tensor, nor its gradient map):
 * only the gradients, the readers' parts of it and the moments are. */
static void lstm_params_once(void **state)
{
    (void)state;
    vdnn_backend_t *be = cpu();
    planned_net n;
    net_open(&n, be, &(zoo_net){"lstm-lm", {2, 1, 128, 1}, ALL_OPTIONS, true});
    const vdnn_graph_t *g = n.g;
    for (int c = 0; c < 3; c++) {
        vdnn_plan_request rq = vdnn_plan_request_default();
        rq.memory.offload_params = c == 1;
        rq.memory.micro_batches = c == 2 ? 2 : 1;
        rq.memory.optimizer_moments = 2;
        vdnn_plan_t *p = NULL;
        vdnn_error err;
        vt_assert_ok(vdnn_plan_build(g, n.info, &rq, &p, &err), err);
        vt_assert_ok(vdnn_plan_validate(p, &err), err);
        for (int k = 1; k <= 2; k++) {
            char name[32], pre[32];
            snprintf(name, sizeof name, "lstm%d.t0", k);
            snprintf(pre, sizeof pre, "lstm%d.params.", k);
            const int o = vdnn_graph_find(g, name);
            const vdnn_layer *O = &g->layers[o];
            size_t nw, nb;
            vdnn_lstm_param_counts(&O->p, &nw, &nb);
            assert_int_equal(O->n_weight, nw);
            assert_int_equal(O->n_bias, nb);
            int weights = 0, biases = 0;
            for (int i = 0; i < p->n_storages; i++) {
                const vdnn_storage *s = &p->st[i];
                weights += s->kind == VDNN_ST_WEIGHT && !strncmp(s->name, pre, strlen(pre));
                biases += s->kind == VDNN_ST_BIAS && !strncmp(s->name, pre, strlen(pre));
                /* Nothing is as large as the weights and biases together: there is no copy of them. */
                if (s->bytes == (nw + nb) * sizeof(float))
                    fail_msg("case %d: '%s' (%s) is the size of %s's parameters", c, s->name,
                             vdnn_storage_kind_name(s->kind), name);
                /* Feature maps, aux and gradient maps are per chunk: none is weight-sized. */
                if ((s->kind == VDNN_ST_FMAP || s->kind == VDNN_ST_GRAD) && s->bytes == nw * sizeof(float))
                    fail_msg("case %d: feature or gradient map '%s' is the size of %s's weights", c, s->name, name);
            }
            assert_int_equal(weights, 1);
            assert_int_equal(biases, 1);
            /* The later chunks read those very storages; the shared weights stay on the device when homing. */
            const int w = p->ls[o].w, b = p->ls[o].b;
            assert_false(p->st[w].homed || p->st[b].homed);
            for (int l = o + 1; l < g->n_layers; l++) {
                if (g->layers[l].p.tie != o) continue;
                assert_int_equal(g->layers[l].n_weight + g->layers[l].n_bias, 0);
                assert_int_equal(p->ls[l].w, w);
                assert_int_equal(p->ls[l].b, b);
                assert_true(p->ls[l].vw < 0 && p->ls[l].vb < 0);
            }
            /* The readers' sum of the gradient waits for the owner's backward. */
            assert_true(p->ls[o].dwt >= 0 && p->ls[o].dbt >= 0);
            assert_int_equal(p->st[p->ls[o].dwt].bytes, nw * sizeof(float));
        }
        vdnn_plan_free(p);
    }
    net_close(&n);
    vdnn_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zoo_is_covered),
        cmocka_unit_test(lstm_params_once),
        cmocka_unit_test(corrupted_plans_fail),
        cmocka_unit_test(every_planner_every_net),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
