/* Parameters homed in host memory (offload_params): training, evaluation and checkpoints give the same bits as
 * with every parameter on the device, the planned peak is the measured one with poisoned memory, the options it
 * does not combine with are refused, auto homes them where only that fits, clipped training (updates after
 * backward) gives the bits of clipped training on the device, and VGG-16 trains at 40% of its in-core peak. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "mem/offsets.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "plan/simulate.h"
#include "testutil.h"
#include "train/data.h"

#define STEPS_MAX 3

typedef struct net_case {
    const char *model;
    int c, h, w, batch, steps;
} net_case;

static const net_case cases[] = {
    {"lenet", 1, 28, 28, 4, 3},   {"alexnet", 3, 63, 63, 2, 2}, {"googlenet", 3, 32, 32, 2, 2},
    {"resnet18", 3, 32, 32, 4, 2}, {"vgg16", 3, 32, 32, 2, 2},
};
static const char *quick_models[] = {"lenet", "resnet18"};
static const char *clip_names[] = {"clip_lenet", "clip_resnet18"}; /* test_clip_same_bits on each quick model */

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[STEPS_MAX];
    int eval_ok;
    double eval_loss;
    size_t train_peak, eval_peak, persistent, home, host, moved;
    int early_home;   /* homed storages a recompute brings back before their layer's backward step */
} run_result;

static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

typedef struct fixture {
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    vdnn_dataset_t *ds;
    net_case nc;
} fixture;

static void fixture_open(fixture *f, const net_case *nc)
{
    vdnn_error err;
    memset(f, 0, sizeof *f);
    f->nc = *nc;
    f->g = vt_load_zoo(nc->model);
    vt_assert_ok(vdnn_graph_resolve(f->g, (vdnn_shape){nc->batch, nc->c, nc->h, nc->w}, 10, &err), err);
    /* One compute thread: results must agree bit for bit, and the machine is shared. */
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &f->be, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, nc->c, nc->h, nc->w}, 10, 5, &f->ds, &err),
                 err);
    assert_true(f->ds->count >= nc->batch * (nc->steps + 1));
}

static void fixture_close(fixture *f)
{
    vdnn_dataset_free(f->ds);
    vdnn_backend_destroy(f->be);
    vdnn_graph_free(f->g);
}

static float clip_on;  /* the nets' clip_grad_norm (0: none) */
static bool adamw_on; /* their optimizer: AdamW, else SGD */

static void config(const fixture *f, vdnn_policy pol, bool offload, size_t budget, bool poison, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = f->nc.batch;
    cfg->in_c = f->nc.c;
    cfg->in_h = f->nc.h;
    cfg->in_w = f->nc.w;
    cfg->classes = 10;
    cfg->memory.policy = pol;
    cfg->memory.budget = budget;
    cfg->memory.poison = poison;
    cfg->seed = 11;
    cfg->memory.offload_params = offload;
    cfg->clip_grad_norm = clip_on;
    if (adamw_on) {
        cfg->optimizer = VDNN_OPTIMIZER_ADAMW;
        cfg->weight_decay = 0.01f;
    }
}

static void train_steps(const fixture *f, vdnn_net_t *net, int first, int n, float *loss)
{
    vt_train_batches(net, f->ds, f->nc.batch, first, n, 0.05f, loss, f->nc.model);
}

/* Trains nc.steps steps, exports, evaluates one batch; the measured high-water must be the planned peak. */
static void run(const fixture *f, vdnn_policy pol, bool offload, size_t budget, bool poison, run_result *r)
{
    vdnn_net_options cfg;
    config(f, pol, offload, budget, poison, &cfg);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(f->g, f->be, &cfg, &net, &err), err);
    const vdnn_plan_t *p = net->plan_train;
    assert_true(p->feasible);
    assert_int_equal(p->offload_params, offload);
    assert_int_equal(net->plan_eval->offload_params, offload);
    train_steps(f, net, 0, f->nc.steps, r->loss);
    r->train_peak = p->peak_device_bytes;
    r->eval_peak = net->plan_eval->peak_device_bytes;
    r->persistent = p->persistent_bytes;
    r->home = p->home_bytes;
    r->host = p->host_bytes;
    r->moved = p->bytes_moved;
    r->early_home = 0;
    for (int i = 0; i < p->n_storages; i++)
        r->early_home += p->st[i].homed && p->st[i].need_step >= 0 && p->st[i].need_step < p->st[i].end_step;
    if (net->arena.high_water != r->train_peak)
        fail_msg("%s/%s%s: arena high-water %zu != planned training peak %zu", f->nc.model, vdnn_policy_name(pol),
                 offload ? "+offload" : "", net->arena.high_water, r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vt_assert_ok(vdnn_net_eval_batch(net, f->ds->images, f->ds->labels, f->nc.batch, &r->eval_ok, &r->eval_loss, &err), err);
    assert_true(net->arena.high_water == net->dev_bytes);
    vdnn_net_free(net);
}

static void assert_same_ck(const char *what, const vdnn_checkpoint *want, const vdnn_checkpoint *got)
{
    assert_true(want->step == got->step);
    vt_assert_same_checkpoint(what, want, got);
}

static void assert_same_run(const fixture *f, const char *what, const run_result *want, const run_result *got)
{
    assert_same_ck(what, &want->ck, &got->ck);
    for (int s = 0; s < f->nc.steps; s++)
        if (memcmp(&want->loss[s], &got->loss[s], sizeof(float)))
            fail_msg("%s: step %d loss %.9g, expected %.9g", what, s, (double)got->loss[s], (double)want->loss[s]);
    if (want->eval_ok != got->eval_ok || memcmp(&want->eval_loss, &got->eval_loss, sizeof(double)))
        fail_msg("%s: evaluation %d / %.17g, expected %d / %.17g", what, got->eval_ok, got->eval_loss, want->eval_ok,
                 want->eval_loss);
}

/* The bytes of the storages offload_params homes, as the plan aligns them. */
static size_t param_bytes(const vdnn_graph_t *g, bool momentum)
{
    size_t n = 0;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        if (ly->n_weight) n += vdnn_align_up(ly->n_weight * 4) * (momentum ? 2 : 1);
        if (ly->n_bias) n += vdnn_align_up(ly->n_bias * 4) * (momentum ? 2 : 1);
    }
    return n;
}

static const vdnn_policy policies[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL, VDNN_POLICY_RECOMPUTE};
#define N_POLICIES 3

/* Every policy with homed parameters, at exactly its need and with poisoned memory, gives none's bits. */
static void test_same_bits(void **state)
{
    net_case nc = *(const net_case *)*state;
    if (quick()) nc.batch = 2, nc.steps = 2;
    fixture f;
    fixture_open(&f, &nc);
    run_result ref, dev[N_POLICIES], home[N_POLICIES];
    memset(&ref, 0, sizeof ref);
    memset(dev, 0, sizeof dev);
    memset(home, 0, sizeof home);
    run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &ref);
    int early = 0;
    size_t none_need = 0;
    for (int k = 0; k < N_POLICIES; k++) {
        char what[96];
        /* The same policy with the parameters on the device: its peak is the one to beat. */
        run(&f, policies[k], false, SIZE_MAX, false, &dev[k]);
        size_t need = SIZE_MAX;
        if (policies[k] == VDNN_POLICY_RECOMPUTE) {
            /* Unbudgeted, it recomputes nothing: one byte below none's need with homes, it must. */
            need = none_need - 1;
        } else {
            run(&f, policies[k], true, SIZE_MAX, false, &home[k]);
            need = home[k].train_peak > home[k].eval_peak ? home[k].train_peak : home[k].eval_peak;
            vdnn_checkpoint_release(&home[k].ck);
        }
        if (policies[k] == VDNN_POLICY_NONE) none_need = need;
        run(&f, policies[k], true, need, true, &home[k]);
        snprintf(what, sizeof what, "%s/%s+offload", nc.model, vdnn_policy_name(policies[k]));
        assert_same_run(&f, what, &ref, &home[k]);
        /* What the plan says moved: every weight and bias in twice and out once, momentum in and out. */
        assert_true(home[k].home == param_bytes(f.g, true));
        assert_true(home[k].host >= home[k].home + dev[k].host);
        assert_true(home[k].moved > dev[k].moved);
        assert_true(home[k].persistent < dev[k].persistent);
        if (home[k].train_peak >= dev[k].train_peak)
            fail_msg("%s: peak %zu, not below %zu with the parameters on the device", what, home[k].train_peak,
                     dev[k].train_peak);
        early += home[k].early_home;
        print_message("%-10s %-9s peak %10zu -> %10zu (%.1f%%), host %10zu, moved %10zu\n", nc.model,
                      vdnn_policy_name(policies[k]), dev[k].train_peak, home[k].train_peak,
                      100.0 * (double)home[k].train_peak / (double)dev[k].train_peak, home[k].host, home[k].moved);
        vdnn_checkpoint_release(&dev[k].ck);
        vdnn_checkpoint_release(&home[k].ck);
    }
    /* Chen's recompute re-runs convolutions in the backward pass: their weights must come back early. */
    if (!strcmp(nc.model, "vgg16") || !strcmp(nc.model, "lenet")) assert_true(early > 0);
    vdnn_checkpoint_release(&ref.ck);
    fixture_close(&f);
}

/* Clipping by global norm with homed parameters: their updates wait for the norm in update steps after backward,
 * each layer's parameters and moments fetched for its own. SGD and AdamW, every policy at its own need with poisoned
 * memory, give the bits of clipped training with the parameters on the device; the clip acts (other bits than
 * unclipped training), and the planned peak is the measured one (run). */
static void test_clip_same_bits(void **state)
{
    net_case nc = *(const net_case *)*state;
    if (quick()) nc.batch = 2, nc.steps = 2;
    fixture f;
    fixture_open(&f, &nc);
    for (int opt = 0; opt < 2; opt++) {
        adamw_on = opt == 1;
        run_result plain, ref, home, tmp;
        memset(&plain, 0, sizeof plain);
        memset(&ref, 0, sizeof ref);
        clip_on = 0;
        run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &plain);
        clip_on = 0.02f; /* below the first gradients' norm of every case */
        run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &ref);
        if (!memcmp(&plain.loss[nc.steps - 1], &ref.loss[nc.steps - 1], sizeof(float)))
            fail_msg("%s: clipping changed nothing", nc.model);
        for (int k = 0; k < N_POLICIES; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s/%s+offload clipped %s", nc.model, vdnn_policy_name(policies[k]),
                     adamw_on ? "AdamW" : "SGD");
            memset(&tmp, 0, sizeof tmp);
            memset(&home, 0, sizeof home);
            run(&f, policies[k], true, SIZE_MAX, false, &tmp);
            const size_t need = tmp.train_peak > tmp.eval_peak ? tmp.train_peak : tmp.eval_peak;
            vdnn_checkpoint_release(&tmp.ck);
            run(&f, policies[k], true, need, true, &home);
            assert_same_run(&f, what, &ref, &home);
            /* Homes: parameters, moments and (waiting for the update) gradients. */
            assert_true(home.home == param_bytes(f.g, true) + param_bytes(f.g, false) * (adamw_on ? 2 : 1));
            print_message("%-10s clipped %-5s %-9s +offload peak %10zu (device params, policy none: %zu), moved %zu\n",
                          nc.model, adamw_on ? "AdamW" : "SGD", vdnn_policy_name(policies[k]), home.train_peak,
                          ref.train_peak, home.moved);
            vdnn_checkpoint_release(&home.ck);
        }
        vdnn_checkpoint_release(&plain.ck);
        vdnn_checkpoint_release(&ref.ck);
    }
    clip_on = 0;
    adamw_on = false;
    fixture_close(&f);
}

/* The fixture's ops (the caller frees them) and a request for policy all with the parameters homed; clip: clipped
 * updates (in update steps after backward). */
static vdnn_op_info *homed_all_request(const fixture *f, bool clip, vdnn_plan_request *rq)
{
    vdnn_op_info *info = calloc((size_t)f->g->n_layers, sizeof *info);
    assert_non_null(info);
    vdnn_error err;
    vt_assert_ok(vdnn_plan_query_ops(f->g, f->be, true, info, &err), err);
    *rq = vdnn_plan_request_default();
    rq->memory.policy = VDNN_POLICY_ALL;
    rq->memory.offload_params = true;
    rq->memory.clip_grads = clip;
    return info;
}
/* The plan of clipped training with homes: update steps in layer order after backward; gradients homed too, from
 * their backward step to their update step; a layer's homed parameters and gradients are fetched again for the
 * update unless its backward block runs on into it; momentum only for the update. */
static void test_clip_plan(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[0]);
    vdnn_plan_request rq;
    vdnn_op_info *info = homed_all_request(&f, true, &rq);
    vdnn_error err;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_build(f.g, info, &rq, &p, &err), err);
    assert_true(p->update_steps && !p->fused_update && p->offload_params);
    const int L = f.g->n_layers;
    int prev = -1, refetched = 0;
    for (int l = 1; l < L; l++) {
        const vdnn_layer *ly = &f.g->layers[l];
        const vdnn_layer_storage *s = &p->ls[l];
        if (!ly->n_weight && !ly->n_bias) {
            assert_int_equal(s->upd, -1);
            continue;
        }
        assert_true(s->upd > prev && s->upd >= p->update_begin);
        prev = s->upd;
        assert_true(p->steps[s->upd].kind == VDNN_STEP_UPDATE && p->steps[s->upd].layer == l);
        const vdnn_storage *dw = &p->st[s->dw], *w = &p->st[s->w], *vw = &p->st[s->vw];
        assert_false(dw->persistent);
        assert_true(dw->homed);
        assert_int_equal(dw->last_use, s->upd);
        assert_int_equal(dw->end_step, s->upd);
        assert_int_equal(dw->need_step, dw->def_step);
        assert_true(w->homed && vw->homed);
        assert_int_equal(w->end_step, s->upd);
        assert_int_equal(vw->end_step, s->upd);
        assert_int_equal(vw->prefetch_step, s->upd - 1);
        refetched += w->upd_prefetch >= 0;
    }
    assert_int_equal(prev, p->n_steps - 1);
    assert_true(refetched > 0);
    /* The simulator runs each update step for its layer's share of the update (by parameter count): together the
     * profile's whole update, each one after backward's last step. */
    vdnn_profile prof;
    vt_assert_ok(vdnn_profile_estimate(f.g, 1e11, 1e10, 1e9, &prof, &err), err);
    vdnn_timeline tl;
    memset(&tl, 0, sizeof tl);
    vt_assert_ok(vdnn_simulate(p, f.g, &prof, &tl, &err), err);
    double upd = 0, bwd_end = 0, first_upd = 1e300;
    int n_upd = 0;
    for (int i = 0; i < tl.n_spans; i++) {
        const vdnn_span *sp = &tl.spans[i];
        if (sp->kind == VDNN_SPAN_BWD && sp->end > bwd_end) bwd_end = sp->end;
        if (sp->kind != VDNN_SPAN_UPDATE) continue;
        upd += sp->end - sp->start;
        n_upd++;
        if (sp->start < first_upd) first_upd = sp->start;
    }
    assert_true(n_upd > 1);
    assert_true(fabs(upd - prof.update_s) <= 1e-9 * prof.update_s + 1e-15);
    assert_true(first_upd >= bwd_end);
    vdnn_timeline_release(&tl);
    vdnn_profile_release(&prof);
    vdnn_plan_free(p);
    /* A step in separate calls (forward, backward, update: micro.c, M = 1) runs every update step too. */
    vdnn_net_options cfg;
    vdnn_net_t *net = NULL, *split = NULL;
    clip_on = 0.02f;
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, true, &cfg);
    clip_on = 0;
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &split, &err), err);
    train_steps(&f, net, 0, 2, NULL);
    for (int s = 0; s < 2; s++) {
        const size_t img = (size_t)f.nc.c * f.nc.h * f.nc.w;
        vt_assert_ok(vdnn_net_micro_forward(split, 0, f.ds->images + img * (size_t)(s * f.nc.batch),
                                            f.ds->labels + s * f.nc.batch, NULL, &err), err);
        vt_assert_ok(vdnn_net_backward(split, 0, &err), err);
        vt_assert_ok(vdnn_net_update(split, 0.05f, &err), err);
    }
    vdnn_checkpoint a, b;
    vt_assert_ok(vdnn_net_export(net, &a, &err), err);
    vt_assert_ok(vdnn_net_export(split, &b, &err), err);
    assert_same_ck("lenet clipped+offload, a step in separate calls", &a, &b);
    vdnn_checkpoint_release(&a);
    vdnn_checkpoint_release(&b);
    vdnn_net_free(net);
    vdnn_net_free(split);
    net = NULL;
    /* Loss scaling (kept gradients) with homes and clipping is refused as before: it checks every gradient
     * before any update in a single update step. */
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, false, &cfg);
    cfg.clip_grad_norm = 1;
    cfg.loss_scale = 1024;
    vt_assert_error(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err, VDNN_ERR_UNSUPPORTED, "keep_weight_grads");
    assert_null(net);
    free(info);
    fixture_close(&f);
}

/* Checkpoints move between nets with and without homes: exported from the homes, imported into them. */
static void test_checkpoint_moves(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[0]);
    vdnn_error err;
    vdnn_net_options cfg;
    vdnn_net_t *dev = NULL, *home = NULL, *back = NULL;
    vdnn_checkpoint ck2, ck3, home3, back3;
    config(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &dev, &err), err);
    train_steps(&f, dev, 0, 2, NULL);
    vt_assert_ok(vdnn_net_export(dev, &ck2, &err), err);
    train_steps(&f, dev, 2, 1, NULL);
    vt_assert_ok(vdnn_net_export(dev, &ck3, &err), err);

    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, true, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &home, &err), err);
    vt_assert_ok(vdnn_net_import(home, &ck2, "ck2", &err), err);
    /* The homes are what vdnn_net_get reads, and there is no device pointer to hand out. */
    const vdnn_ckpt_tensor *w = vdnn_checkpoint_find(&ck2, "conv1.weight");
    assert_non_null(w);
    float *got = malloc(w->count * sizeof *got);
    assert_non_null(got);
    vt_assert_ok(vdnn_net_get(home, "conv1.weight", got, w->count, &err), err);
    assert_memory_equal(got, w->data, w->count * sizeof *got);
    size_t count = 0;
    assert_null(vdnn_net_param_ptr(home, "conv1.weight", &count));
    train_steps(&f, home, 2, 1, NULL);
    vt_assert_ok(vdnn_net_export(home, &home3, &err), err);
    assert_same_ck("lenet: a step from an imported checkpoint in the homes", &ck3, &home3);

    /* And back onto the device. */
    config(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &back, &err), err);
    vt_assert_ok(vdnn_net_import(back, &home3, "home3", &err), err);
    vt_assert_ok(vdnn_net_export(back, &back3, &err), err);
    assert_same_ck("lenet: the homes' checkpoint on the device", &home3, &back3);

    /* vdnn_net_set writes the home. */
    for (size_t i = 0; i < w->count; i++) got[i] = (float)i;
    vt_assert_ok(vdnn_net_set(home, "conv1.weight", got, w->count, &err), err);
    memset(got, 0, w->count * sizeof *got);
    vt_assert_ok(vdnn_net_get(home, "conv1.weight", got, w->count, &err), err);
    for (size_t i = 0; i < w->count; i++) assert_true(got[i] == (float)i);
    free(got);
    vdnn_checkpoint_release(&ck2);
    vdnn_checkpoint_release(&ck3);
    vdnn_checkpoint_release(&home3);
    vdnn_checkpoint_release(&back3);
    vdnn_net_free(dev);
    vdnn_net_free(home);
    vdnn_net_free(back);
    fixture_close(&f);
}

/* Micro-batches, kept gradients (the distributed runtimes) and policy um are refused with a message naming the
 * flag; a plan that only evaluates may home its weights. */
static void test_refusals(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[0]);
    vdnn_error err;
    vdnn_net_options cfg;
    vdnn_net_t *net = NULL;
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, false, &cfg);
    cfg.memory.micro_batches = 2;
    vt_assert_error(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err, VDNN_ERR_UNSUPPORTED, "memory.offload_params");
    assert_non_null(strstr(err.msg, "memory.micro_batches"));
    assert_null(net);
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, false, &cfg);
    const vdnn_net_extras keep = {.keep_weight_grads = true};
    vt_assert_error(vdnn_net_create_ex(f.g, f.be, &cfg, &keep, &net, &err), err, VDNN_ERR_UNSUPPORTED, "keep_weight_grads");
    assert_null(net);

    vdnn_op_info *info = calloc((size_t)f.g->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(f.g, f.be, true, info, &err), err);
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = VDNN_POLICY_UM;
    rq.memory.offload_params = true;
    vdnn_plan_t *p = NULL;
    vt_assert_error(vdnn_plan_build(f.g, info, &rq, &p, &err), err, VDNN_ERR_UNSUPPORTED, "policy um");
    assert_null(p);
    /* Inference: each weight comes in one layer ahead and leaves after its forward step. */
    rq.memory.policy = VDNN_POLICY_NONE;
    rq.training = false;
    vt_assert_ok(vdnn_plan_build(f.g, info, &rq, &p, &err), err);
    assert_true(p->home_bytes == param_bytes(f.g, false));
    assert_true(p->bytes_moved > 0 && p->bytes_moved <= p->home_bytes);
    vdnn_plan_free(p);
    /* A host budget below the homes does not fit. */
    rq.training = true;
    rq.memory.host_budget = param_bytes(f.g, true) - 1;
    vt_assert_ok(vdnn_plan_build(f.g, info, &rq, &p, &err), err);
    assert_false(p->feasible);
    vdnn_plan_free(p);
    free(info);
    fixture_close(&f);
}

/* One byte below its need, policy all with homes is refused before training, naming a budget that works
 * with the option; that budget does work. Without the option, the budget named may be auto's with homes. */
static void test_budget_named(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[1]);
    vdnn_error err;
    vdnn_net_options cfg;
    vdnn_net_t *net = NULL;
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    const size_t need = net->dev_bytes;
    vdnn_net_free(net);
    net = NULL;
    config(&f, VDNN_POLICY_ALL, true, need - 1, false, &cfg);
    vt_assert_error(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "smallest budget that works is");
    assert_null(net);
    const char *paren = strchr(strstr(err.msg, "smallest budget that works is"), '(');
    unsigned long long n = 0;
    char pname[32] = "", opt[32] = "";
    if (!paren || sscanf(paren, "(%llu bytes) with memory.policy %31s %31s", &n, pname, opt) != 3)
        fail_msg("cannot read the smallest budget from: %s", err.msg);
    assert_string_equal(opt, "memory.offload_params");
    vdnn_policy pol;
    assert_true(vdnn_policy_parse(pname, &pol));
    assert_true(n <= need);
    config(&f, pol, true, (size_t)n, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    assert_true(net->dev_bytes <= (size_t)n);
    vdnn_net_free(net);
    net = NULL;

    /* Without the option, one byte below what all needs with the parameters on the device: the budget named
     * is auto's, which homes them by itself, and it works. */
    config(&f, VDNN_POLICY_ALL, false, SIZE_MAX, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    const size_t need_dev = net->dev_bytes;
    vdnn_net_free(net);
    net = NULL;
    assert_true(need_dev > need);
    config(&f, VDNN_POLICY_ALL, false, need_dev - 1, false, &cfg);
    vt_assert_error(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "smallest budget that works is");
    paren = strchr(strstr(err.msg, "smallest budget that works is"), '(');
    if (!paren || sscanf(paren, "(%llu bytes) with memory.policy %31s", &n, pname) != 2)
        fail_msg("cannot read the smallest budget from: %s", err.msg);
    assert_string_equal(pname, "auto");
    assert_non_null(strstr(err.msg, "memory.offload_params"));
    assert_true(n <= need_dev - 1);
    config(&f, VDNN_POLICY_AUTO, false, (size_t)n, false, &cfg);
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    assert_true(net->plan_train->offload_params);
    assert_true(net->dev_bytes <= (size_t)n);
    vdnn_net_free(net);
    fixture_close(&f);
}

/* Below every plan with the parameters on the device, auto homes them by itself, and trains none's bits. */
static void test_auto_homes(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[1]);
    vdnn_error err;
    vdnn_op_info *info = calloc((size_t)f.g->n_layers, sizeof *info);
    assert_non_null(info);
    vt_assert_ok(vdnn_plan_query_ops(f.g, f.be, true, info, &err), err);
    vdnn_plan_request rq = vdnn_plan_request_default();
    size_t on_device = 0, homed = 0, either = 0;
    vt_assert_ok(vdnn_plan_min_budget(f.g, info, &rq, &on_device, &err), err);
    rq.memory.offload_params = true;
    vt_assert_ok(vdnn_plan_min_budget(f.g, info, &rq, &homed, &err), err);
    rq.memory.offload_params = false;
    rq.memory.policy = VDNN_POLICY_AUTO;
    vt_assert_ok(vdnn_plan_min_budget(f.g, info, &rq, &either, &err), err);
    free(info);
    print_message("alexnet smallest budgets: parameters on the device %zu, homed %zu, auto %zu\n", on_device, homed,
                  either);
    assert_true(homed < on_device);
    assert_true(either == homed);

    run_result ref, got;
    memset(&ref, 0, sizeof ref);
    memset(&got, 0, sizeof got);
    run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &ref);
    vdnn_net_options cfg;
    config(&f, VDNN_POLICY_AUTO, false, on_device - 1, true, &cfg);
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    assert_true(net->plan_train->offload_params);
    assert_true(net->plan_eval->offload_params);
    assert_true(net->dev_bytes <= on_device - 1);
    train_steps(&f, net, 0, f.nc.steps, got.loss);
    assert_true(net->arena.high_water == net->plan_train->peak_device_bytes);
    vt_assert_ok(vdnn_net_export(net, &got.ck, &err), err);
    vt_assert_ok(vdnn_net_eval_batch(net, f.ds->images, f.ds->labels, f.nc.batch, &got.eval_ok, &got.eval_loss, &err), err);
    assert_same_run(&f, "alexnet/auto below every on-device plan", &ref, &got);
    vdnn_net_free(net);
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&got.ck);
    fixture_close(&f);
}

/* VGG-16 at 3x64x64 under policy all with homes, budgeted at that plan's own peak (which the parameters on the device
 * cannot reach), trains none's bits. The budget comes from the plan: its share of the in-core peak moves with the
 * convolutions' workspaces, which depend on the ISA oneDNN uses (under 40% with AVX-512, 41.3% with AVX2). */
static void test_vgg16_40(void **state)
{
    (void)state;
    const net_case nc = {"vgg16", 3, 64, 64, 32, quick() ? 1 : 2};
    fixture f;
    fixture_open(&f, &nc);
    run_result ref, got;
    memset(&ref, 0, sizeof ref);
    memset(&got, 0, sizeof got);
    run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, false, &ref);
    vdnn_plan_request rq;
    vdnn_op_info *info = homed_all_request(&f, false, &rq);
    vdnn_error err;
    vdnn_plan_t *p = NULL;
    vt_assert_ok(vdnn_plan_build(f.g, info, &rq, &p, &err), err);
    const size_t budget = p->peak_device_bytes;
    vdnn_plan_free(p);
    assert_true(budget < ref.train_peak / 2);
    rq.memory.offload_params = false;
    rq.memory.budget = budget;
    vt_assert_ok(vdnn_plan_build(f.g, info, &rq, &p, &err), err);
    assert_false(p->feasible);
    vdnn_plan_free(p);
    free(info);
    run(&f, VDNN_POLICY_ALL, true, budget, true, &got);
    print_message("vgg16 3x64x64 b%d: in-core peak %zu, budget %zu (%.1f%%), all+offload peak %zu\n", nc.batch,
                  ref.train_peak, budget, 100.0 * (double)budget / (double)ref.train_peak, got.train_peak);
    assert_true(got.train_peak <= budget);
    assert_same_run(&f, "vgg16/all+offload at its smallest budget", &ref, &got);
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&got.ck);
    fixture_close(&f);
}

int main(void)
{
    struct CMUnitTest tests[sizeof cases / sizeof cases[0] + 9];
    int n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool take = !quick();
        for (size_t k = 0; k < sizeof quick_models / sizeof quick_models[0]; k++) take |= !strcmp(cases[i].model, quick_models[k]);
        if (take) tests[n++] = (struct CMUnitTest){cases[i].model, test_same_bits, NULL, NULL, (void *)&cases[i]};
    }
    for (size_t k = 0; k < sizeof quick_models / sizeof quick_models[0]; k++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (!strcmp(cases[i].model, quick_models[k]))
                tests[n++] = (struct CMUnitTest){clip_names[k], test_clip_same_bits, NULL, NULL, (void *)&cases[i]};
    tests[n++] = (struct CMUnitTest){"clip_plan", test_clip_plan, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"checkpoint_moves", test_checkpoint_moves, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"refusals", test_refusals, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"budget_named", test_budget_named, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"auto_homes", test_auto_homes, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"vgg16_40", test_vgg16_40, NULL, NULL, NULL};
    if (getenv("VDNN_TEST_FILTER")) cmocka_set_test_filter(getenv("VDNN_TEST_FILTER"));
    return _cmocka_run_group_tests("offload_params", tests, (size_t)n, NULL, NULL);
}
