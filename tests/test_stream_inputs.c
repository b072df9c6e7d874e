/* Streamed convolution inputs (stream_inputs): training, evaluation and checkpoints give the bits of in-core
 * training under every policy with poisoned memory, the planned peak is the measured one, auto streams where
 * nothing else fits, and what cannot stream is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "testutil.h"
#include "train/data.h"

#define STEPS 2

typedef struct net_case {
    const char *model;
    int c, h, w, batch;
} net_case;

/* Batches that the small chunk cap below cuts into chunks of 2 images and a last one of 1. */
static const net_case cases[] = {
    {"vgg16", 3, 32, 32, 5}, {"resnet18", 3, 32, 32, 5}, {"alexnet", 3, 63, 63, 3}};

typedef struct fixture {
    vdnn_graph_t *g;
    vdnn_backend_t *be;
    vdnn_dataset_t *ds;
    net_case nc;
    int algo; /* the nets' convolution algorithms (vdnn_net_options.algo) */
} fixture;

typedef struct run_result {
    vdnn_checkpoint ck;
    float loss[STEPS];
    int eval_ok;
    double eval_loss;
    size_t peak;
    int streamed;
} run_result;

static void fixture_open(fixture *f, const net_case *nc)
{
    vdnn_error err;
    memset(f, 0, sizeof *f);
    f->nc = *nc;
    f->g = vt_load_zoo(nc->model);
    /* One thread, for bitwise results; a chunk cap that cuts the first layers' batches into several chunks. */
    const size_t img = sizeof(float) * 64 * (size_t)nc->h * (size_t)nc->w;
    vdnn_cpu_options co = {.threads = 1, .conv_chunk_bytes = 2 * img + img / 2};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &f->be, &err), err);
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, (vdnn_shape){0, nc->c, nc->h, nc->w}, 10, 5, &f->ds, &err),
                 err);
    assert_true(f->ds->count >= nc->batch * (STEPS + 1));
}

static void fixture_close(fixture *f)
{
    vdnn_dataset_free(f->ds);
    vdnn_backend_destroy(f->be);
    vdnn_graph_free(f->g);
}

static void config(const fixture *f, vdnn_policy pol, bool stream, size_t budget, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = f->nc.batch;
    cfg->in_c = f->nc.c;
    cfg->in_h = f->nc.h;
    cfg->in_w = f->nc.w;
    cfg->classes = 10;
    cfg->memory.policy = pol;
    cfg->memory.budget = budget;
    cfg->memory.poison = stream;
    cfg->seed = 7;
    cfg->memory.stream_inputs = stream;
    cfg->memory.conv_algo = f->algo;
}

static void run(const fixture *f, vdnn_policy pol, bool stream, size_t budget, run_result *r)
{
    vdnn_net_options cfg;
    config(f, pol, stream, budget, &cfg);
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(f->g, f->be, &cfg, &net, &err), err);
    vt_train_batches(net, f->ds, f->nc.batch, 0, STEPS, 0.05f, r->loss, f->nc.model);
    r->peak = net->plan_train->peak_device_bytes;
    r->streamed = vdnn_plan_streamed_layers(net->plan_train);
    if (net->arena.high_water != r->peak)
        fail_msg("%s/%s%s: arena high-water %zu != planned peak %zu", f->nc.model, vdnn_policy_name(pol),
                 stream ? "+stream" : "", net->arena.high_water, r->peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vt_assert_ok(vdnn_net_eval_batch(net, f->ds->images, f->ds->labels, f->nc.batch, &r->eval_ok, &r->eval_loss, &err), err);
    assert_true(net->arena.high_water == net->dev_bytes);
    vdnn_net_free(net);
}

static void assert_same_run(const char *what, const run_result *want, const run_result *got)
{
    vt_assert_same_checkpoint(what, &want->ck, &got->ck);
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&want->loss[s], &got->loss[s], sizeof(float)))
            fail_msg("%s: step %d loss %.9g, expected %.9g", what, s, (double)got->loss[s], (double)want->loss[s]);
    if (want->eval_ok != got->eval_ok || memcmp(&want->eval_loss, &got->eval_loss, sizeof(double)))
        fail_msg("%s: evaluation %d / %.17g, expected %d / %.17g", what, got->eval_ok, got->eval_loss, want->eval_ok,
                 want->eval_loss);
}

/* Every policy with streamed inputs and poisoned memory gives in-core training's bits, at a lower peak. */
static void test_same_bits(void **state)
{
    const net_case *nc = *state;
    fixture f;
    fixture_open(&f, nc);
    run_result ref, got;
    memset(&ref, 0, sizeof ref);
    run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, &ref);
    const vdnn_policy pols[] = {VDNN_POLICY_NONE, VDNN_POLICY_ALL, VDNN_POLICY_RECOMPUTE, VDNN_POLICY_POOCH};
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s --stream-inputs", nc->model, vdnn_policy_name(pols[k]));
        memset(&got, 0, sizeof got);
        run(&f, pols[k], true, SIZE_MAX, &got);
        if (got.streamed < 1) fail_msg("%s: no layer streams its input", what);
        assert_same_run(what, &ref, &got);
        if (pols[k] == VDNN_POLICY_NONE && got.peak >= ref.peak)
            fail_msg("%s: peak %zu, not below in-core %zu", what, got.peak, ref.peak);
        vdnn_checkpoint_release(&got.ck);
    }
    vdnn_checkpoint_release(&ref.ck);
    fixture_close(&f);
}

/* Wide maps and few parameters: at small sizes the zoo's floors are their largest layers' parameters, here
 * they are the maps, as in the zoo's nets at the batches they train at. */
static const char wide_net[] = "[net]\nname=wide\ninput=3x32x32\nclasses=10\n"
                               "[conv1]\ntype=conv\nfilters=16\nsize=3\npad=1\n[relu1]\ntype=relu\n"
                               "[conv2]\ntype=conv\nfilters=16\nsize=3\npad=1\n[relu2]\ntype=relu\n"
                               "[conv3]\ntype=conv\nfilters=16\nsize=3\npad=1\n[relu3]\ntype=relu\n"
                               "[pool]\ntype=maxpool\nsize=4\n[flatten]\ntype=flatten\n"
                               "[fc]\ntype=fc\noutputs=classes\n[loss]\ntype=softmax\n";

/* Below the smallest budget any plan without streaming reaches, auto streams, trains in budget and gives the
 * same bits; the smallest budget it names with streaming is lower. */
static void test_auto_streams_where_nothing_else_fits(void **state)
{
    (void)state;
    fixture f;
    const net_case nc0 = {"wide", 3, 32, 32, 5}, *nc = &nc0;
    fixture_open(&f, &cases[0]);
    vdnn_graph_free(f.g);
    f.nc = nc0;
    f.algo = VDNN_ALGO_LEANEST; /* the same algorithms in every run, so the bits are the same */
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(wide_net, "wide_net", &f.g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(f.g, (vdnn_shape){nc->batch, nc->c, nc->h, nc->w}, 10, &err), err);
    vdnn_op_info *info = calloc((size_t)f.g->n_layers, sizeof *info);
    vdnn_layer_algos *algos = calloc((size_t)f.g->n_layers, sizeof *algos);
    assert_non_null(info);
    assert_non_null(algos);
    vt_assert_ok(vdnn_plan_query_algos(f.g, f.be, true, algos, info, &err), err);
    /* Without streaming: every mix, leanest algorithms, parameters homed (recompute adds no choice of its own). */
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = VDNN_POLICY_RECOMPUTE;
    rq.algos = algos;
    rq.memory.conv_algo = VDNN_ALGO_LEANEST;
    rq.memory.offload_params = true;
    size_t without = 0, with = 0;
    vt_assert_ok(vdnn_plan_min_budget(f.g, info, &rq, &without, &err), err);
    rq.memory.policy = VDNN_POLICY_AUTO;
    vt_assert_ok(vdnn_plan_min_budget(f.g, info, &rq, &with, &err), err);
    if (with >= without) fail_msg("wide: smallest budget %zu with streaming, %zu without", with, without);
    /* The evaluation plan shares the arena: the budget must hold it too, so it is taken from a real net. */
    run_result ref, got;
    memset(&ref, 0, sizeof ref);
    memset(&got, 0, sizeof got);
    run(&f, VDNN_POLICY_NONE, false, SIZE_MAX, &ref);
    vdnn_net_options cfg;
    config(&f, VDNN_POLICY_AUTO, false, without - 1, &cfg);
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(f.g, f.be, &cfg, &net, &err), err);
    assert_true(net->plan_train->feasible);
    assert_true(vdnn_plan_streamed_layers(net->plan_train) > 0);
    assert_true(net->dev_bytes <= without - 1);
    vdnn_net_free(net);
    cfg.memory.poison = true;
    run(&f, VDNN_POLICY_AUTO, false, without - 1, &got);
    assert_true(got.streamed > 0);
    assert_same_run("wide net auto below the smallest budget without streaming", &ref, &got);
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&got.ck);
    free(info);
    free(algos);
    fixture_close(&f);
}

/* Options it does not combine with, and ops asked to stream what they cannot. */
static void test_refusals(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &cases[0]);
    vdnn_error err;
    vdnn_net_options cfg;
    config(&f, VDNN_POLICY_ALL, true, SIZE_MAX, &cfg);
    cfg.batch = 4;
    cfg.memory.micro_batches = 2;
    vdnn_net_t *net = NULL;
    assert_int_equal(vdnn_net_create(f.g, f.be, &cfg, &net, &err), VDNN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "memory.stream_inputs"));
    assert_non_null(strstr(err.msg, "micro-batches"));
    assert_null(net);

    /* A convolution whose output has another shape than its input cannot write one over the other. 16 channels:
     * oneDNN reads them in a blocked layout, copied into the workspace, on every ISA (with 3 its AVX2 kernels read
     * the plain input in place, which then cannot be overwritten, and the convolution cannot stream either way). */
    vdnn_op_desc d = {.kind = VDNN_LAYER_CONV, .n_inputs = 1, .in = {{2, 16, 8, 8}}, .out = {2, 17, 8, 8}, .training = true};
    d.p.kernel_h = d.p.kernel_w = 3;
    d.p.stride_h = d.p.stride_w = 1;
    d.p.pad_h = d.p.pad_w = 1;
    d.p.filters = 17;
    d.p.groups = 1;
    vdnn_op_info info;
    vt_assert_ok(f.be->ops->op_query(f.be, &d, &info, &err), err);
    assert_false(info.stream_ok);
    d.out.c = d.p.filters = 16;
    vt_assert_ok(f.be->ops->op_query(f.be, &d, &info, &err), err);
    assert_true(info.stream_ok);
    assert_true(info.chunk_images >= 1);
    d.out.c = d.p.filters = 17;
    vdnn_op *op = NULL;
    vt_assert_ok(f.be->ops->op_create(f.be, &d, &op, &err), err);
    vt_assert_ok(f.be->ops->op_query(f.be, &d, &info, &err), err);
    float x[2 * 17 * 64], w[17 * 16 * 9];
    memset(x, 0, sizeof x);
    memset(w, 0, sizeof w);
    float *ws = calloc(1, info.fwd_ws_bytes + 64);
    assert_non_null(ws);
    vdnn_stream sm = {0};
    vdnn_op_args a = {.x = {x}, .y = x, .w = w, .ws = ws, .stream = &sm};
    assert_int_equal(f.be->ops->op_forward(f.be, op, &a, &err), VDNN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "cannot stream"));
    a.stream = NULL;
    assert_int_equal(f.be->ops->op_forward(f.be, op, &a, &err), VDNN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "y over x"));
    f.be->ops->op_destroy(f.be, op);
    free(ws);
    fixture_close(&f);
}

int main(void)
{
    struct CMUnitTest tests[sizeof cases / sizeof cases[0] + 2];
    int n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tests[n++] = (struct CMUnitTest){cases[i].model, test_same_bits, NULL, NULL, (void *)&cases[i]};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_auto_streams_where_nothing_else_fits);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_refusals);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
