/* Tests of a net's life cycle: checkpoint save and resume reproduce an uninterrupted run bit for bit,
 * refuse other models and damaged files; evaluation counts only real samples; bad labels are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "testutil.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/train.h"

/* A small net with every kind of state: conv weights and bias, batch-norm statistics, dropout. */
static const char small_cfg[] = "[net]\nname=small\n"
                                "[conv1]\ntype=conv\nfilters=6\nsize=3\npad=1\nbias=0\n"
                                "[bn1]\ntype=batchnorm\n"
                                "[relu1]\ntype=relu\n"
                                "[pool1]\ntype=maxpool\nsize=2\n"
                                "[flat]\ntype=flatten\n"
                                "[drop]\ntype=dropout\np=0.3\n"
                                "[fc]\ntype=fc\noutputs=classes\n"
                                "[loss]\ntype=softmax\n";

typedef struct fixture {
    vdnn_backend_t *be;
    vdnn_dataset_t *train, *train8; /* synthetic 1x28x28 and 1x8x8, 10 classes */
    char dir[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 2};
    if (!f || vdnn_backend_cpu_create(&co, &f->be, &err) != VDNN_OK) return -1;
    vdnn_shape s = {0, 1, 28, 28};
    if (vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, s, 10, 9, &f->train, &err) != VDNN_OK) return -1;
    vdnn_shape s8 = {0, 1, 8, 8};
    if (vdnn_dataset_open("synthetic", VDNN_SPLIT_TRAIN, s8, 10, 9, &f->train8, &err) != VDNN_OK) return -1;
    vt_tmpdir(f->dir, sizeof f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vt_rmdir(f->dir);
    vdnn_dataset_free(f->train);
    vdnn_dataset_free(f->train8);
    vdnn_backend_destroy(f->be);
    free(f);
    return 0;
}

static vdnn_graph_t *lenet(void)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(VDNN_SOURCE_DIR "/models/lenet.cfg", &g, &err), err);
    return g;
}

static vdnn_graph_t *small(void)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small_cfg, "small.cfg", &g, &err), err);
    return g;
}

static vdnn_net_t *make_net(vdnn_graph_t *g, vdnn_backend_t *be, int batch, int h, uint64_t seed, vdnn_policy pol)
{
    vdnn_net_options cfg;
    cfg = vdnn_net_options_default();
    cfg.batch = batch;
    cfg.in_c = 1;
    cfg.in_h = cfg.in_w = h;
    cfg.classes = 10;
    cfg.seed = seed;
    cfg.memory.policy = pol;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    return net;
}

/* Trains until global step `until` at a constant learning rate (a cosine schedule spans the run it
 * is given, so a run cut in two would see other rates). */
static void train_until(vdnn_net_t *net, const vdnn_dataset_t *ds, long until)
{
    vdnn_train_options o = vdnn_train_options_default();
    vdnn_error err;
    o.lr_schedule = "constant";
    o.lr = 0.05;
    o.evaluate = false;
    o.steps = until;
    vdnn_train_result r;
    vt_assert_ok(vdnn_train_run(net, ds, NULL, &o, &r, &err), err);
    assert_int_equal(r.steps, until);
    assert_true(isfinite(r.final_loss));
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) fail_msg("cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    if (fread(buf, 1, (size_t)n, fp) != (size_t)n) fail_msg("short read of %s", path);
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    if (na != nb || memcmp(x, y, na)) fail_msg("%s and %s differ (%zu and %zu bytes)", a, b, na, nb);
    free(x);
    free(y);
}

static void assert_same_params(vdnn_net_t *a, vdnn_net_t *b)
{
    vdnn_checkpoint ca, cb;
    vdnn_error err;
    vt_assert_ok(vdnn_net_export(a, &ca, &err), err);
    vt_assert_ok(vdnn_net_export(b, &cb, &err), err);
    assert_int_equal(ca.n_tensors, cb.n_tensors);
    assert_true(ca.step == cb.step && ca.epoch == cb.epoch);
    for (int i = 0; i < ca.n_tensors; i++) {
        assert_string_equal(ca.tensors[i].name, cb.tensors[i].name);
        assert_int_equal(ca.tensors[i].count, cb.tensors[i].count);
        if (memcmp(ca.tensors[i].data, cb.tensors[i].data, ca.tensors[i].count * sizeof(float)))
            fail_msg("tensor '%s' differs", ca.tensors[i].name);
    }
    vdnn_checkpoint_release(&ca);
    vdnn_checkpoint_release(&cb);
}

/* Cut at step k, saved, resumed in a fresh net: the same parameters, momentum, statistics, step and
 * epoch as never stopping. Batch 64 gives 16 steps an epoch, so the resumed part crosses an epoch. */
static bool quick(void)
{
    const char *q = getenv("VDNN_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

static void round_trip(fixture *f, vdnn_policy pol, long k, long total)
{
    /* Under the sanitizers the small net on 8x8 images stands in for LeNet. */
    const bool q = quick();
    const int h = q ? 8 : 28;
    const vdnn_dataset_t *ds = q ? f->train8 : f->train;
    char full[600], part[600], resumed[600];
    snprintf(full, sizeof full, "%s/full-%s.ckpt", f->dir, vdnn_policy_name(pol));
    snprintf(part, sizeof part, "%s/part-%s.ckpt", f->dir, vdnn_policy_name(pol));
    snprintf(resumed, sizeof resumed, "%s/resumed-%s.ckpt", f->dir, vdnn_policy_name(pol));
    vdnn_error err;
    vdnn_graph_t *g = q ? small() : lenet();

    vdnn_net_t *a = make_net(g, f->be, 64, h, 21, pol);
    train_until(a, ds, total);
    vt_assert_ok(vdnn_net_save(a, full, &err), err);

    vdnn_net_t *b = make_net(g, f->be, 64, h, 21, pol);
    train_until(b, ds, k);
    vt_assert_ok(vdnn_net_save(b, part, &err), err);
    vdnn_net_free(b);

    vdnn_net_t *c = make_net(g, f->be, 64, h, 21, pol);
    vt_assert_ok(vdnn_net_load(c, part, &err), err);
    assert_int_equal(c->step, k);
    train_until(c, ds, total);
    assert_int_equal(c->step, total);
    assert_int_equal(c->epoch, total / 16);
    assert_same_params(a, c);
    vt_assert_ok(vdnn_net_save(c, resumed, &err), err);
    assert_same_file(full, resumed);
    vdnn_net_free(a);
    vdnn_net_free(c);
    vdnn_graph_free(g);
}

static void test_resume_bitwise(void **state)
{
    fixture *f = *state;
    round_trip(f, VDNN_POLICY_NONE, 13, 19);
}

static void test_resume_bitwise_swapping(void **state)
{
    fixture *f = *state;
    round_trip(f, VDNN_POLICY_ALL, 3, 5);
}

static void test_resume_refuses_other_models(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    char path[600];
    snprintf(path, sizeof path, "%s/lenet.ckpt", f->dir);
    vdnn_graph_t *g = lenet();
    vdnn_net_t *net = make_net(g, f->be, 8, 28, 1, VDNN_POLICY_NONE);
    vt_assert_ok(vdnn_net_save(net, path, &err), err);
    vdnn_net_free(net);

    /* Another model. */
    vdnn_graph_t *gs = small();
    vdnn_net_t *other = make_net(gs, f->be, 8, 28, 1, VDNN_POLICY_NONE);
    vt_assert_error(vdnn_net_load(other, path, &err), err, VDNN_ERR_MISMATCH, path);
    assert_int_equal(other->step, 0);
    vdnn_net_free(other);
    vdnn_graph_free(gs);

    /* The same model at another input size has other fc1 weights: also refused. */
    vdnn_net_t *bigger = make_net(g, f->be, 8, 32, 1, VDNN_POLICY_NONE);
    vt_assert_error(vdnn_net_load(bigger, path, &err), err, VDNN_ERR_MISMATCH, "lenet");
    vdnn_net_free(bigger);

    /* Another batch size is the same model: accepted. */
    vdnn_net_t *wider = make_net(g, f->be, 4, 28, 1, VDNN_POLICY_NONE);
    vt_assert_ok(vdnn_net_load(wider, path, &err), err);
    vdnn_net_free(wider);
    vdnn_graph_free(g);
}

static void test_resume_refuses_damaged_files(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    char path[600], bad[600];
    snprintf(path, sizeof path, "%s/whole.ckpt", f->dir);
    vdnn_graph_t *g = small();
    vdnn_net_t *net = make_net(g, f->be, 4, 8, 2, VDNN_POLICY_NONE);
    train_until(net, f->train8, 2);
    vt_assert_ok(vdnn_net_save(net, path, &err), err);
    size_t n;
    unsigned char *bytes = slurp(path, &n);
    vdnn_net_t *fresh = make_net(g, f->be, 4, 8, 2, VDNN_POLICY_NONE);
    vdnn_checkpoint before;
    vt_assert_ok(vdnn_net_export(fresh, &before, &err), err);
    /* Every truncation point, from empty to one byte short. */
    size_t cuts[] = {0, 1, 7, 16, n / 3, n / 2, n - 5, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        vt_write_file(f->dir, "cut.ckpt", bytes, cuts[i], bad, sizeof bad);
        vdnn_status st = vdnn_net_load(fresh, bad, &err);
        if (st != VDNN_ERR_FORMAT) fail_msg("cut at %zu of %zu: %s: %s", cuts[i], n, vdnn_status_name(st), err.msg);
        assert_non_null(strstr(err.msg, "cut.ckpt"));
    }
    /* A flipped bit in the payload. */
    bytes[n / 2] ^= 0x10;
    vt_write_file(f->dir, "flip.ckpt", bytes, n, bad, sizeof bad);
    vt_assert_error(vdnn_net_load(fresh, bad, &err), err, VDNN_ERR_FORMAT, "flip.ckpt");
    /* A missing file is an I/O error, not a format one. */
    snprintf(bad, sizeof bad, "%s/missing.ckpt", f->dir);
    vt_assert_error(vdnn_net_load(fresh, bad, &err), err, VDNN_ERR_IO, "missing.ckpt");
    /* None of that changed the net. */
    assert_int_equal(fresh->step, 0);
    vdnn_checkpoint after;
    vt_assert_ok(vdnn_net_export(fresh, &after, &err), err);
    for (int i = 0; i < before.n_tensors; i++)
        assert_memory_equal(before.tensors[i].data, after.tensors[i].data, before.tensors[i].count * sizeof(float));
    vdnn_checkpoint_release(&before);
    vdnn_checkpoint_release(&after);
    free(bytes);
    vdnn_net_free(fresh);
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void test_seed_determines_checkpoint(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *g = lenet();
    char p[3][600];
    const uint64_t seeds[3] = {5, 5, 6};
    for (int i = 0; i < 3; i++) {
        snprintf(p[i], sizeof p[i], "%s/seed-%d.ckpt", f->dir, i);
        vdnn_net_t *net = make_net(g, f->be, 16, 28, seeds[i], VDNN_POLICY_NONE);
        train_until(net, f->train, 3);
        vt_assert_ok(vdnn_net_save(net, p[i], &err), err);
        vdnn_net_free(net);
    }
    assert_same_file(p[0], p[1]);
    /* Another seed: other initial weights, batches and dropout masks, so other parameters. */
    vdnn_checkpoint a, b;
    vt_assert_ok(vdnn_checkpoint_read(p[0], &a, &err), err);
    vt_assert_ok(vdnn_checkpoint_read(p[2], &b, &err), err);
    assert_int_equal(a.n_tensors, b.n_tensors);
    assert_true(a.seed == 5 && b.seed == 6);
    int differ = 0;
    for (int i = 0; i < a.n_tensors; i++)
        differ += memcmp(a.tensors[i].data, b.tensors[i].data, a.tensors[i].count * sizeof(float)) != 0;
    const vdnn_ckpt_tensor *w0 = vdnn_checkpoint_find(&a, "conv1.weight"), *w1 = vdnn_checkpoint_find(&b, "conv1.weight");
    assert_true(w0 && w1);
    assert_true(memcmp(w0->data, w1->data, w0->count * sizeof(float)) != 0);
    assert_true(differ >= a.n_tensors / 2);
    vdnn_checkpoint_release(&a);
    vdnn_checkpoint_release(&b);
    vdnn_graph_free(g);
}

/* A net that predicts class 0 for every input: the classifier's bias for class 0 dwarfs the rest. */
static vdnn_net_t *always_zero(vdnn_graph_t *g, vdnn_backend_t *be, int batch)
{
    vdnn_net_t *net = make_net(g, be, batch, 8, 3, VDNN_POLICY_NONE);
    float bias[10] = {1000.0f};
    vdnn_error err;
    vt_assert_ok(vdnn_net_set(net, "fc.bias", bias, 10, &err), err);
    return net;
}

static void test_eval_short_batch_counts_real_samples(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *g = small();
    vdnn_net_t *net = always_zero(g, f->be, 4);
    float img[4 * 64];
    vt_fill_uniform(img, 4 * 64, 1, -1.0f, 1.0f);
    /* Real samples of class 1: all wrong. The padding (zero images, label 0) would be "right". */
    int32_t ones[4] = {1, 1, 1, 1};
    for (int n = 1; n <= 4; n++) {
        int correct = -1;
        double loss = -1;
        vt_assert_ok(vdnn_net_eval_batch(net, img, ones, n, &correct, &loss, &err), err);
        assert_int_equal(correct, 0);
        /* Each real sample costs -log(p(1)) = about 1000 (clamped at -log(1e-30) = 69.08). */
        assert_true(loss > 0.99 * 69.0 * n && loss < 1.01 * 69.1 * n);
    }
    int32_t zeros[4] = {0, 0, 0, 0};
    for (int n = 1; n <= 4; n++) {
        int correct = -1;
        double loss = -1;
        vt_assert_ok(vdnn_net_eval_batch(net, img, zeros, n, &correct, &loss, &err), err);
        assert_int_equal(correct, n);
        assert_true(loss >= 0 && loss < 1e-3);
    }
    vt_assert_error(vdnn_net_eval_batch(net, img, zeros, 0, NULL, NULL, &err), err, VDNN_ERR_INVALID_ARG, "0 images");
    vt_assert_error(vdnn_net_eval_batch(net, img, zeros, 5, NULL, NULL, &err), err, VDNN_ERR_INVALID_ARG, "5 images");
    vdnn_net_free(net);

    /* A whole split whose size is not a multiple of the batch: 256 images at batch 3 leave one
     * image in the last batch. The accuracy is exactly the share of class 0. */
    vdnn_dataset_t *test = NULL;
    vt_assert_ok(vdnn_dataset_open("synthetic", VDNN_SPLIT_TEST, (vdnn_shape){0, 1, 8, 8}, 10, 4, &test, &err), err);
    assert_int_equal(test->count % 3, 1);
    int zero = 0;
    for (int i = 0; i < test->count; i++) zero += test->labels[i] == 0;
    net = always_zero(g, f->be, 3);
    double acc = -1, loss = -1;
    vt_assert_ok(vdnn_net_evaluate(net, test, &acc, &loss, &err), err);
    if (acc != (double)zero / test->count) fail_msg("accuracy %.6f, want %d/%d", acc, zero, test->count);
    vdnn_net_free(net);
    vdnn_dataset_free(test);
    vdnn_graph_free(g);
}

static void test_labels_out_of_range(void **state)
{
    fixture *f = *state;
    vdnn_error err;
    vdnn_graph_t *g = small();
    vdnn_net_t *net = make_net(g, f->be, 4, 8, 3, VDNN_POLICY_ALL);
    float img[4 * 64];
    vt_fill_uniform(img, 4 * 64, 2, -1.0f, 1.0f);
    int32_t bad_hi[4] = {0, 1, 10, 2}, bad_lo[4] = {0, -1, 1, 2}, good[4] = {0, 1, 9, 2};
    float loss = 0;
    vt_assert_error(vdnn_net_train_step(net, img, bad_hi, 0.1f, &loss, &err), err, VDNN_ERR_INVALID_ARG, "label 10");
    vt_assert_error(vdnn_net_train_step(net, img, bad_lo, 0.1f, &loss, &err), err, VDNN_ERR_INVALID_ARG, "label -1");
    assert_int_equal(net->step, 0);
    int correct;
    double ls;
    vt_assert_error(vdnn_net_eval_batch(net, img, bad_hi, 4, &correct, &ls, &err), err, VDNN_ERR_INVALID_ARG, "label 10");
    vt_assert_error(vdnn_net_eval_batch(net, img, bad_lo, 2, &correct, &ls, &err), err, VDNN_ERR_INVALID_ARG, "label -1");
    /* A refused batch leaves the net usable. */
    vt_assert_ok(vdnn_net_train_step(net, img, good, 0.1f, &loss, &err), err);
    assert_true(isfinite(loss));
    assert_int_equal(net->step, 1);
    vt_assert_ok(vdnn_net_eval_batch(net, img, good, 4, &correct, &ls, &err), err);
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_bitwise),
        cmocka_unit_test(test_resume_bitwise_swapping),
        cmocka_unit_test(test_resume_refuses_other_models),
        cmocka_unit_test(test_resume_refuses_damaged_files),
        cmocka_unit_test(test_seed_determines_checkpoint),
        cmocka_unit_test(test_eval_short_batch_counts_real_samples),
        cmocka_unit_test(test_labels_out_of_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
