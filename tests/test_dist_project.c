/* The time-to-train projection: epochs tables, the ring all-reduce, step times of data-parallel and
 * hybrid layouts on a profile with known per-layer times, and which layout wins when. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/project.h"
#include "testutil.h"

static void epochs_tables(void **state)
{
    vdnn_epochs_table t;
    vdnn_error err;
    vt_assert_ok(vdnn_epochs_table_parse("# batch epochs\n256 90\n1024, 100  # comment\n\n4096:120\n", "t.txt", &t, &err),
                 err);
    assert_int_equal(t.n, 3);
    bool ex;
    assert_true(fabs(vdnn_epochs_at(&t, 512, &ex) - 95) < 1e-9);
    assert_false(ex);
    assert_true(fabs(vdnn_epochs_at(&t, 2048, &ex) - 110) < 1e-9);
    assert_true(fabs(vdnn_epochs_at(&t, 64, &ex) - 90) < 1e-9);
    assert_false(ex);
    /* Beyond the table: the last segment continued, and said so. */
    assert_true(fabs(vdnn_epochs_at(&t, 16384, &ex) - 140) < 1e-9);
    assert_true(ex);
    vt_assert_error(vdnn_epochs_table_parse("256 90\n128 80\n", "t.txt", &t, &err), err, VDNN_ERR_PARSE,
                    "t.txt:2: batch 128 does not increase");
    vt_assert_error(vdnn_epochs_table_parse("256 90\nlots\n", "t.txt", &t, &err), err, VDNN_ERR_PARSE, "t.txt:2: expected");
    vt_assert_error(vdnn_epochs_table_parse("256 -1\n", "t.txt", &t, &err), err, VDNN_ERR_PARSE, "out of range");
    vt_assert_error(vdnn_epochs_table_parse("# nothing\n", "t.txt", &t, &err), err, VDNN_ERR_PARSE, "no 'GLOBAL_BATCH");
    vt_assert_error(vdnn_epochs_table_read("/nonexistent/epochs.txt", &t, &err), err, VDNN_ERR_IO, "/nonexistent/epochs.txt");
}

static void ring_allreduce(void **state)
{
    assert_true(vdnn_ring_allreduce_s(1e9, 1, 1e9, 1e-5) == 0);
    assert_true(fabs(vdnn_ring_allreduce_s(1e9, 2, 1e9, 0) - 1.0) < 1e-12);
    assert_true(fabs(vdnn_ring_allreduce_s(1e9, 8, 1e9, 1e-3) - (14e-3 + 1.75)) < 1e-12);
}

/* Eight conv/relu pairs then a large fc: layer times set by hand, 10 ms forward and 20 ms backward per
 * conv, the fc's 4 MiB of weights last in the forward pass (so first in backward). */
static const char net[] = "[net]\ninput=1x32x32\nclasses=16\n"
                          "[c1]\ntype=conv\nfilters=1\nsize=3\npad=1\n[r1]\ntype=relu\n"
                          "[c2]\ntype=conv\nfilters=1\nsize=3\npad=1\n[r2]\ntype=relu\n"
                          "[c3]\ntype=conv\nfilters=1\nsize=3\npad=1\n[r3]\ntype=relu\n"
                          "[c4]\ntype=conv\nfilters=1\nsize=3\npad=1\n[r4]\ntype=relu\n"
                          "[f]\ntype=flatten\n[fc]\ntype=fc\noutputs=1024\n[fc2]\ntype=fc\noutputs=classes\n"
                          "[loss]\ntype=softmax\n";

typedef struct fixture {
    vdnn_graph_t *g;
    vdnn_profile p;
    vdnn_epochs_table flat, steep;
    vdnn_project_config c;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    vdnn_error err;
    if (!f || vdnn_graph_parse(net, "net.cfg", &f->g, &err) ||
        vdnn_graph_resolve(f->g, (vdnn_shape){32, 0, 0, 0}, 0, &err) || vdnn_profile_init_graph(&f->p, f->g, &err))
        return -1;
    for (int l = 1; l < f->g->n_layers; l++) {
        bool conv = f->g->layers[l].kind == VDNN_LAYER_CONV;
        f->p.fwd_s[l] = conv ? 0.010 : 0.0005;
        f->p.bwd_s[l] = conv ? 0.020 : 0.001;
    }
    f->p.load_s = 0.001;
    f->p.update_s = 0.0005;
    vdnn_epochs_table_parse("32 10\n65536 10\n", "flat", &f->flat, &err);
    vdnn_epochs_table_parse("32 10\n256 10\n512 40\n", "steep", &f->steep, &err);
    f->c = (vdnn_project_config){.devices = 1, .batch = 32, .micro_batches = 4, .allreduce_bytes_per_s = 1e15,
                                 .allreduce_latency_s = 0, .p2p_bytes_per_s = 1e15, .p2p_latency_s = 0,
                                 .bucket_bytes = 1 << 20, .dataset_images = 65536, .epochs = &f->flat};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vdnn_profile_release(&f->p);
    vdnn_graph_free(f->g);
    free(f);
    return 0;
}

static vdnn_layout_estimate layout(fixture *f, int devices, int stages)
{
    vdnn_layout_estimate e;
    vdnn_error err;
    f->c.devices = devices;
    vt_assert_ok(vdnn_project_estimate(f->g, &f->p, &f->c, stages, &e, &err), err);
    return e;
}

static void one_device_is_its_compute(void **state)
{
    fixture *f = *state;
    vdnn_layout_estimate e = layout(f, 1, 1);
    /* The profile's backward includes each layer's share of the update: a step is load, forward, backward. */
    double sum = f->p.load_s;
    for (int l = 1; l < f->g->n_layers; l++) sum += f->p.fwd_s[l] + f->p.bwd_s[l];
    assert_true(fabs(e.step_s - sum) < 1e-9);
    assert_true(e.comm_s == 0 && e.exposed_s == 0 && e.bubble_s == 0);
    assert_int_equal(e.global_batch, 32);
    assert_true(fabs(e.steps_per_epoch - 2048) < 1e-9);
    assert_true(fabs(e.train_s - 10 * 2048 * e.step_s) < 1e-6);
}

static void gradient_sums_overlap_backward(void **state)
{
    fixture *f = *state;
    double compute = layout(f, 1, 1).step_s;
    /* Free links: eight devices step as fast as one. */
    vdnn_layout_estimate fast = layout(f, 8, 1);
    assert_true(fabs(fast.step_s - compute) < 1e-9);
    assert_int_equal(fast.global_batch, 256);
    /* A slow link: the sums cost time, but the fc's bucket, ready first, hides behind the convs. */
    f->c.allreduce_bytes_per_s = 1e9;
    vdnn_layout_estimate slow = layout(f, 8, 1);
    assert_true(slow.comm_s > 0.005);
    assert_true(slow.step_s > compute);
    assert_true(slow.exposed_s < slow.comm_s);
    /* One bucket for everything starts only when backward ends: all of it shows. */
    f->c.bucket_bytes = SIZE_MAX;
    vdnn_layout_estimate late = layout(f, 8, 1);
    assert_true(fabs(late.exposed_s - late.comm_s) < 1e-9);
    assert_true(late.step_s > slow.step_s);
}

static void pipelines_and_their_bubbles(void **state)
{
    fixture *f = *state;
    f->c.micro_batches = 1;
    vdnn_layout_estimate one = layout(f, 2, 2);
    assert_int_equal(one.workers, 1);
    assert_true(one.bubble_s > 0);
    f->c.micro_batches = 8;
    vdnn_layout_estimate eight = layout(f, 2, 2);
    assert_true(eight.step_s < one.step_s);
    /* Four convs of 30 ms over two stages: 60 ms each, 8 micro-batches fill 9 slots of 60/8 ms. */
    assert_true(fabs(eight.compute_s - one.compute_s * 9.0 / 16.0) < 0.01 * one.compute_s);
    vdnn_error err;
    f->c.devices = 6;
    vdnn_layout_estimate e;
    vt_assert_error(vdnn_project_estimate(f->g, &f->p, &f->c, 4, &e, &err), err, VDNN_ERR_INVALID_ARG, "6 devices");
}

static void the_epochs_table_decides(void **state)
{
    fixture *f = *state;
    f->c.allreduce_bytes_per_s = 10e9;
    f->c.p2p_bytes_per_s = 10e9;
    /* Same epochs at any batch: more workers win. */
    vdnn_layout_estimate dp = layout(f, 16, 1), hy = layout(f, 16, 2);
    assert_true(dp.train_s < hy.train_s);
    /* Epochs that grow fourfold past a global batch of 256: 16 devices of data parallelism (512) lose to
     * 8 workers of 2 stages (256). */
    f->c.epochs = &f->steep;
    dp = layout(f, 16, 1);
    hy = layout(f, 16, 2);
    assert_int_equal(dp.global_batch, 512);
    assert_int_equal(hy.global_batch, 256);
    assert_true(fabs(dp.epochs - 40) < 1e-9 && fabs(hy.epochs - 10) < 1e-9);
    assert_true(hy.train_s < dp.train_s);
}

/* A sequence model with a tied output projection: the estimate uploads a label per token, and a pipeline that puts
 * the embedding and the projection in different stages exchanges the table's gradient between them each step. */
static void sequence_model_with_tied_table(void **state)
{
    (void)state;
    static const char gpt[] = "[net]\ninput=1x8x1\nclasses=16\n[wte]\ntype=embed\noutputs=8\n"
                              "[wpe]\ntype=pos_embed\ncontext=8\n[a]\ntype=linear\noutputs=8\n"
                              "[b]\ntype=linear\noutputs=8\n[lnf]\ntype=layernorm\n"
                              "[head]\ntype=linear\noutputs=classes\ntie=wte\nbias=0\n[loss]\ntype=softmax\n";
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(gpt, "gpt.cfg", &g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){4, 0, 0, 0}, 0, &err), err);
    vdnn_profile p;
    memset(&p, 0, sizeof p);
    vt_assert_ok(vdnn_profile_estimate(g, 1e12, 1e11, 1e9, &p, &err), err);
    /* 4 sequences of 8 token ids in, and 32 labels. */
    assert_true(fabs(p.load_s - (4 * 8 * 4 + 32 * 4) / 1e9) < 1e-15);
    vdnn_epochs_table flat;
    vt_assert_ok(vdnn_epochs_table_parse("4 1\n", "flat", &flat, &err), err);
    vdnn_project_config c = {.devices = 2, .batch = 4, .micro_batches = 2, .allreduce_bytes_per_s = 1e9,
                             .allreduce_latency_s = 0, .p2p_bytes_per_s = 1e6, .p2p_latency_s = 1e-3,
                             .bucket_bytes = 1 << 20, .dataset_images = 1000, .epochs = &flat};
    vdnn_layout_estimate dp, two;
    vt_assert_ok(vdnn_project_estimate(g, &p, &c, 1, &dp, &err), err);
    vt_assert_ok(vdnn_project_estimate(g, &p, &c, 2, &two, &err), err);
    const int wte = vdnn_graph_find(g, "wte"), head = vdnn_graph_find(g, "head");
    assert_true(two.split.last[0] >= wte && two.split.first[1] <= head && two.split.last[0] < head);
    /* One worker per stage: no all-reduce; the table's 16 x 8 gradients cross the stage link once. */
    const double exchange = 1e-3 + 16.0 * 8 * 4 / 1e6;
    assert_true(fabs(two.comm_s - exchange) < 1e-9);
    assert_true(two.step_s > exchange);
    /* Data parallelism: the table is summed once with the other gradients, counted once (16 x 8). */
    double params = 0;
    for (int l = 1; l < g->n_layers; l++) params += (double)(g->layers[l].n_weight + g->layers[l].n_bias);
    assert_true(fabs(dp.comm_s - vdnn_ring_allreduce_s(params * 4, 2, 1e9, 0)) < 1e-12);
    vdnn_profile_release(&p);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(epochs_tables),
        cmocka_unit_test(ring_allreduce),
        cmocka_unit_test_setup_teardown(one_device_is_its_compute, setup, teardown),
        cmocka_unit_test_setup_teardown(gradient_sums_overlap_backward, setup, teardown),
        cmocka_unit_test_setup_teardown(pipelines_and_their_bubbles, setup, teardown),
        cmocka_unit_test_setup_teardown(the_epochs_table_decides, setup, teardown),
        cmocka_unit_test(sequence_model_with_tied_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
