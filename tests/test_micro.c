/* Micro-batches in one process: a step as GPipe runs it (every forward pass, then every backward pass, with
 * all micro-batches' activations held) equals gradient accumulation one micro-batch at a time bit for bit,
 * under swapping and recomputing policies too; without batch norm it equals the whole batch up to float
 * summation order; the held copies are planned memory (budget errors name them) and calls out of order fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "testutil.h"
#include "train/checkpoint.h"

/* Batch norm, dropout, a residual add and a max pool: every kind of state a micro-batch leaves behind. */
static const char bn_cfg[] = "[net]\nname=mbn\n"
                             "[conv1]\ntype=conv\nfilters=6\nsize=3\npad=1\nbias=0\n[bn1]\ntype=batchnorm\n"
                             "[relu1]\ntype=relu\n[conv2]\ntype=conv\nfilters=6\nsize=3\npad=1\n"
                             "[add]\ntype=add\ninput=relu1,conv2\n[pool1]\ntype=maxpool\nsize=2\n"
                             "[flat]\ntype=flatten\n[drop]\ntype=dropout\np=0.3\n"
                             "[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* No batch norm, no dropout: micro-batches change only the order of float sums. */
static const char plain_cfg[] = "[net]\nname=mplain\n"
                                "[conv1]\ntype=conv\nfilters=6\nsize=3\npad=1\n[relu1]\ntype=relu\n"
                                "[pool1]\ntype=maxpool\nsize=2\n[flat]\ntype=flatten\n"
                                "[fc1]\ntype=fc\noutputs=16\n[relu2]\ntype=relu\n"
                                "[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

enum { BATCH = 16, SIDE = 8, CLASSES = 10, STEPS = 4 };

typedef struct fixture {
    vdnn_backend_t *be;
    float *x;      /* STEPS batches */
    int32_t *y;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 2};
    if (!f || vdnn_backend_cpu_create(&co, &f->be, &err) != VDNN_OK) return -1;
    const size_t n = (size_t)STEPS * BATCH * SIDE * SIDE;
    f->x = malloc(n * sizeof *f->x);
    f->y = malloc((size_t)STEPS * BATCH * sizeof *f->y);
    if (!f->x || !f->y) return -1;
    vt_fill_uniform(f->x, n, 5, -1, 1);
    for (int i = 0; i < STEPS * BATCH; i++) f->y[i] = (i * 7 + 3) % CLASSES;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vdnn_backend_destroy(f->be);
    free(f->x);
    free(f->y);
    free(f);
    return 0;
}

typedef struct net_opts {
    int micro;
    bool pipelined;
    vdnn_policy policy;
    bool poison;
    size_t budget;
} net_opts;

static vdnn_status make_net(const fixture *f, const char *cfg_text, net_opts o, vdnn_graph_t **g, vdnn_net_t **net,
                            vdnn_error *err)
{
    vt_assert_ok(vdnn_graph_parse(cfg_text, "micro.cfg", g, err), *err);
    vdnn_net_options c;
    c = vdnn_net_options_default();
    c.batch = BATCH;
    c.in_c = 1;
    c.in_h = c.in_w = SIDE;
    c.classes = CLASSES;
    c.seed = 3;
    c.memory.micro_batches = o.micro > 1 ? o.micro : 1;
    c.memory.pipelined = o.pipelined;
    c.memory.policy = o.policy;
    c.memory.poison = o.poison;
    if (o.budget) c.memory.budget = o.budget;
    return vdnn_net_create(*g, f->be, &c, net, err);
}

static void train(const fixture *f, vdnn_net_t *net)
{
    vdnn_error err;
    for (int s = 0; s < STEPS; s++) {
        float loss = 0;
        vt_assert_ok(vdnn_net_train_step(net, f->x + (size_t)s * BATCH * SIDE * SIDE, f->y + (size_t)s * BATCH, 0.05f,
                                         &loss, &err),
                     err);
        assert_true(isfinite(loss));
    }
}

/* Largest |a - b| / max(1, |a|) over parameters, momentum and statistics; *bitwise if all equal. */
static double param_diff(vdnn_net_t *a, vdnn_net_t *b, bool *bitwise)
{
    vdnn_checkpoint ca, cb;
    vdnn_error err;
    vt_assert_ok(vdnn_net_export(a, &ca, &err), err);
    vt_assert_ok(vdnn_net_export(b, &cb, &err), err);
    assert_int_equal(ca.n_tensors, cb.n_tensors);
    double worst = 0;
    *bitwise = true;
    for (int i = 0; i < ca.n_tensors; i++) {
        const vdnn_ckpt_tensor *t = &ca.tensors[i], *u = &cb.tensors[i];
        assert_string_equal(t->name, u->name);
        assert_int_equal(t->count, u->count);
        if (memcmp(t->data, u->data, t->count * sizeof(float))) *bitwise = false;
        for (size_t k = 0; k < t->count; k++) {
            double d = fabs((double)t->data[k] - u->data[k]) / fmax(1.0, fabs((double)t->data[k]));
            if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        }
    }
    vdnn_checkpoint_release(&ca);
    vdnn_checkpoint_release(&cb);
    return worst;
}

static vdnn_net_t *trained(const fixture *f, const char *cfg_text, net_opts o, vdnn_graph_t **g)
{
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(make_net(f, cfg_text, o, g, &net, &err), err);
    train(f, net);
    return net;
}

static void release(vdnn_net_t *net, vdnn_graph_t *g)
{
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void pipelined_equals_accumulation(void **state)
{
    const fixture *f = *state;
    vdnn_graph_t *gs, *gp, *gw;
    vdnn_net_t *seq = trained(f, bn_cfg, (net_opts){.micro = 4}, &gs);
    vdnn_net_t *pipe = trained(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true}, &gp);
    vdnn_net_t *whole = trained(f, bn_cfg, (net_opts){.micro = 1}, &gw);
    bool bitwise;
    double d = param_diff(seq, pipe, &bitwise);
    print_message("GPipe order vs one micro-batch at a time (batch norm, dropout): %.3g%s\n", d, bitwise ? " (bitwise)" : "");
    assert_true(bitwise);
    /* Batch norm over micro-batches and per-micro-batch masks: not the whole batch's training. */
    d = param_diff(seq, whole, &bitwise);
    print_message("4 micro-batches vs the whole batch (batch norm, dropout): %.3g\n", d);
    assert_true(d > 1e-3);
    assert_int_equal(pipe->step, STEPS);
    release(seq, gs);
    release(pipe, gp);
    release(whole, gw);
}

static void policies_hold_micro_batches(void **state)
{
    const fixture *f = *state;
    vdnn_graph_t *g0;
    vdnn_net_t *ref = trained(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true}, &g0);
    /* Swapped tensors come back from each micro-batch's own host copy; poison shows any read of another's. */
    const vdnn_policy pols[] = {VDNN_POLICY_ALL, VDNN_POLICY_RECOMPUTE};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        vdnn_graph_t *g;
        vdnn_net_t *net = trained(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true, .policy = pols[i], .poison = true}, &g);
        bool bitwise;
        double d = param_diff(ref, net, &bitwise);
        print_message("pipelined, policy %s with poison vs none: %.3g%s\n", vdnn_policy_name(pols[i]), d,
                      bitwise ? " (bitwise)" : "");
        assert_true(bitwise);
        if (pols[i] == VDNN_POLICY_ALL) assert_true(net->plan_train->host_bytes > 0);
        release(net, g);
    }
    release(ref, g0);
}

static void accumulation_equals_whole_batch(void **state)
{
    const fixture *f = *state;
    vdnn_graph_t *g1, *g4;
    vdnn_net_t *whole = trained(f, plain_cfg, (net_opts){.micro = 1}, &g1);
    vdnn_net_t *micro = trained(f, plain_cfg, (net_opts){.micro = 4, .pipelined = true}, &g4);
    bool bitwise;
    double d = param_diff(whole, micro, &bitwise);
    print_message("no batch norm: 4 micro-batches of 4 vs one batch of 16: %.3g\n", d);
    assert_true(d < 1e-5);
    release(whole, g1);
    release(micro, g4);
}

static void held_copies_are_planned(void **state)
{
    const fixture *f = *state;
    vdnn_graph_t *gs, *gp;
    vdnn_net_t *seq = NULL, *pipe = NULL;
    vdnn_error err;
    vt_assert_ok(make_net(f, bn_cfg, (net_opts){.micro = 4}, &gs, &seq, &err), err);
    vt_assert_ok(make_net(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true}, &gp, &pipe, &err), err);
    const vdnn_plan_t *p = pipe->plan_train;
    assert_int_equal(p->held_batches, 4);
    assert_int_equal(vdnn_net_micro_batch(pipe), BATCH / 4);
    assert_true(p->held_stride > 0);
    /* Holding four micro-batches costs more than holding one. */
    assert_true(pipe->dev_bytes > seq->dev_bytes);
    train(f, pipe);
    /* The arena's measured high-water mark is the planned peak. */
    print_message("pipelined: planned %zu bytes (%zu per held micro-batch), measured %zu\n", pipe->dev_bytes, p->held_stride,
                  pipe->arena.high_water);
    assert_int_equal(pipe->arena.high_water, p->peak_device_bytes);
    /* A byte short of the plan is refused before any step, naming the held micro-batches. */
    const size_t need = pipe->dev_bytes;
    vdnn_graph_t *gb;
    vdnn_net_t *small = NULL;
    vt_assert_error(make_net(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true, .budget = need - 1}, &gb, &small, &err),
                    err, VDNN_ERR_BUDGET, "4 micro-batches of 4, all held between their forward and backward passes");
    print_message("%s\n", err.msg);
    char msg[sizeof err.msg];
    memcpy(msg, err.msg, sizeof msg);
    assert_null(small);
    vdnn_graph_free(gb);
    vt_assert_ok(make_net(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true, .budget = need}, &gb, &small, &err), err);
    release(small, gb);
    /* The smallest budget the message names works, with the policy it names, and trains the same. */
    const char *at = strstr(msg, "the smallest budget that works is");
    assert_non_null(at);
    size_t least = 0;
    assert_non_null(at = strchr(at, '('));
    assert_int_equal(sscanf(at, "(%zu bytes) with memory.policy auto", &least), 1);
    vdnn_graph_t *ga;
    vdnn_net_t *fit = trained(f, bn_cfg, (net_opts){.micro = 4, .pipelined = true, .policy = VDNN_POLICY_AUTO, .budget = least}, &ga);
    assert_true(fit->arena.high_water <= least);
    bool bitwise;
    param_diff(pipe, fit, &bitwise);
    assert_true(bitwise);
    release(fit, ga);
    release(seq, gs);
    release(pipe, gp);
}

static void calls_in_order(void **state)
{
    const fixture *f = *state;
    vdnn_graph_t *g;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(make_net(f, plain_cfg, (net_opts){.micro = 2, .pipelined = true}, &g, &net, &err), err);
    const size_t img = SIDE * SIDE;
    const int b = BATCH / 2;
    vt_assert_error(vdnn_net_backward(net, 0, &err), err, VDNN_ERR_INVALID_ARG, "backward of micro-batch 0 out of order");
    vt_assert_error(vdnn_net_micro_forward(net, 1, f->x, f->y, NULL, &err), err, VDNN_ERR_INVALID_ARG, "out of order");
    vt_assert_ok(vdnn_net_micro_forward(net, 0, f->x, f->y, NULL, &err), err);
    vt_assert_error(vdnn_net_update(net, 0.05f, &err), err, VDNN_ERR_INVALID_ARG, "out of order");
    /* That abandoned the step: it starts over, and a whole step in order works. */
    assert_int_equal(net->arena.n_live, 1);
    vt_assert_ok(vdnn_net_micro_forward(net, 0, f->x, f->y, NULL, &err), err);
    vt_assert_ok(vdnn_net_micro_forward(net, 1, f->x + (size_t)b * img, f->y + b, NULL, &err), err);
    vt_assert_ok(vdnn_net_backward(net, 0, &err), err);
    vt_assert_ok(vdnn_net_backward(net, 1, &err), err);
    vt_assert_ok(vdnn_net_update(net, 0.05f, &err), err);
    assert_int_equal(net->step, 1);
    assert_int_equal(net->arena.n_live, 1);
    /* The batch must split evenly. */
    vdnn_graph_t *g3;
    vdnn_net_t *bad = NULL;
    vt_assert_error(make_net(f, plain_cfg, (net_opts){.micro = 3}, &g3, &bad, &err), err, VDNN_ERR_INVALID_ARG,
                    "does not split into 3 micro-batches");
    vdnn_graph_free(g3);
    release(net, g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipelined_equals_accumulation),
        cmocka_unit_test(policies_hold_micro_batches),
        cmocka_unit_test(accumulation_equals_whole_batch),
        cmocka_unit_test(held_copies_are_planned),
        cmocka_unit_test(calls_in_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
