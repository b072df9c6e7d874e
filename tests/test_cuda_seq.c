/* The CUDA backend's sequence-model and mixed-precision training pieces on a GPU (docs/cuda.md): AdamW and the finite
 * check against the CPU backend's, gpt-mini trained with AdamW on CUDA against the CPU and bitwise equal under two
 * memory policies, gpt-mini with fused attention in fp32 and bf16 under three, lstm-lm likewise under three, both
 * in bf16 and fp16 under three, and fp16 training with dynamic
 * loss scaling (an overflowing scale skips steps and counts them). The ops themselves are compared with
 * the CPU by the op harness (test_ops_cuda). Without a usable GPU every case skips and the program exits 77 with
 * the reason. Built as test_cuda_seq_emulated (with cuda_emulated.c) it runs the same on the CPU, the CUDA runtime,
 * cuBLAS and the kernels emulated: the backend's host code end to end, not the kernels or a device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"
#include "op_check.h"

#ifdef VDNN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "exec/net_impl.h"

static char skip_reason[1600];

#define GPU_OR_SKIP()                                                                                                 \
    do {                                                                                                              \
        if (skip_reason[0]) skip();                                                                                   \
    } while (0)

static vdnn_backend_t *gpu(void)
{
    /* Strict fp32 and reproducible algorithms, so results compare with the CPU and with each other. */
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 0;
    o.deterministic = 1;
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cuda_create_ex(&o, &be, &err), err);
    return be;
}

static vdnn_backend_t *cpu(void)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    return be;
}

static void *dev_copy(vdnn_backend_t *be, const float *h, size_t n)
{
    void *p = NULL;
    vdnn_error err;
    vt_assert_ok(be->ops->dev_alloc(be, n * sizeof(float), &p, &err), err);
    vt_assert_ok(be->ops->upload(be, p, h, n * sizeof(float), &err), err);
    return p;
}

/* Three AdamW steps on each backend from the same state: the CUDA kernel rounds each operation as the CPU's loop
 * does (no fused multiply-adds), so the floats should agree; held to 1e-6 of the tensors' scale. */
static void test_adamw_vs_cpu(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *bes[2] = {gpu(), cpu()};
    const size_t n = 100003;
    float *h[4], *out[2][3];
    for (int i = 0; i < 4; i++) {
        h[i] = malloc(n * sizeof(float));
        assert_non_null(h[i]);
    }
    vt_fill_uniform(h[0], n, 1, -1, 1);      /* w */
    vt_fill_uniform(h[1], n, 2, -1e-3f, 1e-3f); /* dw */
    vt_fill_uniform(h[2], n, 3, -1e-4f, 1e-4f); /* m */
    vt_fill_uniform(h[3], n, 4, 0, 1e-6f);      /* v */
    vdnn_error err;
    for (int k = 0; k < 2; k++) {
        vdnn_backend_t *be = bes[k];
        float *d[4];
        for (int i = 0; i < 4; i++) d[i] = dev_copy(be, h[i], n);
        for (long t = 1; t <= 3; t++)
            vt_assert_ok(be->ops->adamw_update(be, d[0], d[1], d[2], d[3], n, 3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t,
                                               &err),
                         err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        for (int i = 0; i < 3; i++) {
            out[k][i] = malloc(n * sizeof(float));
            assert_non_null(out[k][i]);
            vt_assert_ok(be->ops->download(be, out[k][i], d[i == 0 ? 0 : i + 1], n * sizeof(float), &err), err);
        }
        for (int i = 0; i < 4; i++) be->ops->dev_free(be, d[i]);
    }
    const char *names[3] = {"w", "m", "v"};
    char msg[256];
    for (int i = 0; i < 3; i++) {
        size_t diff = 0;
        for (size_t j = 0; j < n; j++) diff += memcmp(&out[0][i][j], &out[1][i][j], sizeof(float)) != 0;
        printf("adamw %s: %zu of %zu values differ from the CPU's bit for bit\n", names[i], diff, n);
        if (!vt_close(out[0][i], out[1][i], n, 1e-6, msg, sizeof msg)) fail_msg("adamw %s: %s", names[i], msg);
    }
    vt_assert_error(bes[0]->ops->adamw_update(bes[0], h[0], h[1], h[2], h[3], 1, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0, &err),
                    err, VDNN_ERR_INVALID_ARG, "step 0");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++) free(out[k][i]);
        vdnn_backend_destroy(bes[k]);
    }
    for (int i = 0; i < 4; i++) free(h[i]);
}

static void test_all_finite(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_error err;
    const size_t n = 1000003;
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    vt_fill_uniform(h, n, 9, -1e30f, 1e30f);
    float *a = dev_copy(be, h, n), *b = dev_copy(be, h, 5);
    const float *x[2] = {a, b};
    const size_t ns[2] = {n, 5};
    bool fin = false;
    vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
    assert_true(fin);
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    const size_t where[3] = {0, n / 3, n - 1};
    for (int k = 0; k < 3; k++)
        for (int w = 0; w < 3; w++) {
            vt_assert_ok(be->ops->upload(be, a + where[w], &bad[k], sizeof(float), &err), err);
            fin = true;
            vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
            if (fin) fail_msg("%g at %zu not found", (double)bad[k], where[w]);
            vt_assert_ok(be->ops->upload(be, a + where[w], &h[where[w]], sizeof(float), &err), err);
        }
    /* The flag starts clear each call. */
    vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
    assert_true(fin);
    vt_assert_ok(be->ops->upload(be, b + 4, &bad[2], sizeof(float), &err), err);
    vt_assert_ok(be->ops->all_finite(be, x, ns, 2, &fin, &err), err);
    assert_false(fin);
    be->ops->dev_free(be, a);
    be->ops->dev_free(be, b);
    free(h);
    vdnn_backend_destroy(be);
}

#define GPT_BATCH 2
#define GPT_SEQ 16
#define GPT_STEPS 3
#define LSTM_SEQ 128 /* lstm-lm's file length: its graph's four chunks of 32 steps */

typedef struct gpt_run {
    float loss[GPT_STEPS];
    float *params;
    size_t n;
} gpt_run;

/* GPT_STEPS AdamW steps of a byte-level model over batches of `seq` tokens, with maps of precision prec. */
static void seq_train_as(vdnn_backend_t *be, const vdnn_graph_t *g, int seq, vdnn_policy pol, vdnn_precision prec,
                         gpt_run *r)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = GPT_BATCH;
    cfg.in_c = 1, cfg.in_h = seq, cfg.in_w = 1;
    cfg.classes = 256;
    cfg.seed = 5;
    cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
    cfg.weight_decay = 0.01f;
    cfg.memory.policy = pol;
    cfg.memory.precision = prec;
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    float tokens[GPT_BATCH * LSTM_SEQ];
    int32_t labels[GPT_BATCH * LSTM_SEQ];
    assert_true(seq <= LSTM_SEQ);
    for (int s = 0; s < GPT_STEPS; s++) {
        for (int i = 0; i < GPT_BATCH * seq; i++) {
            tokens[i] = (float)((i * 37 + s * 11) % 256);
            labels[i] = (i * 53 + s * 7 + 1) % 256;
        }
        vt_assert_ok(vdnn_net_train_step(net, tokens, labels, 3e-3f, &r->loss[s], &err), err);
    }
    size_t total = 0;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        total += pi.count;
    }
    r->params = malloc(total * sizeof(float));
    assert_non_null(r->params);
    r->n = total;
    size_t at = 0;
    for (int i = 0; i < vdnn_net_param_count(net); i++) {
        vdnn_param_info pi;
        vt_assert_ok(vdnn_net_param_info(net, i, &pi, &err), err);
        vt_assert_ok(vdnn_net_get(net, pi.name, r->params + at, pi.count, &err), err);
        at += pi.count;
    }
    vdnn_net_free(net);
}

static void seq_train(vdnn_backend_t *be, const vdnn_graph_t *g, int seq, vdnn_policy pol, gpt_run *r)
{
    seq_train_as(be, g, seq, pol, VDNN_PRECISION_FP32, r);
}

/* gpt-mini, three AdamW steps: the losses as the CPU's (1e-5 relative at the first step, 1e-3 after), and bitwise
 * the same parameters under policy all as under none (no atomics in the sequence ops' backward). */
static void test_gpt_training(void **state)
{
    GPU_OR_SKIP();
    vdnn_graph_t *g = vt_load_zoo("gpt-mini");
    vdnn_backend_t *be = gpu(), *c = cpu();
    gpt_run none, all, ref;
    seq_train(be, g, GPT_SEQ, VDNN_POLICY_NONE, &none);
    seq_train(be, g, GPT_SEQ, VDNN_POLICY_ALL, &all);
    seq_train(c, g, GPT_SEQ, VDNN_POLICY_NONE, &ref);
    assert_int_equal(none.n, all.n);
    if (memcmp(none.params, all.params, none.n * sizeof(float))) fail_msg("policy all differs from none on CUDA");
    assert_memory_equal(none.loss, all.loss, sizeof none.loss);
    for (int s = 0; s < GPT_STEPS; s++) {
        printf("step %d: loss %.7f on cuda, %.7f on the cpu\n", s, (double)none.loss[s], (double)ref.loss[s]);
        const double tol = s == 0 ? 1e-5 : 1e-3;
        if (!(fabs((double)none.loss[s] - (double)ref.loss[s]) <= tol * fmax(1.0, fabs((double)ref.loss[s]))))
            fail_msg("step %d: cuda loss %.7f vs cpu %.7f", s, (double)none.loss[s], (double)ref.loss[s]);
    }
    /* Parameters are not compared with the CPU's: AdamW turns the rounding noise of gradients that are zero in exact
     * arithmetic (the keys' bias, which the softmax cancels) into whole steps of lr on either side. */
    free(none.params), free(all.params), free(ref.params);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

/* gpt-mini and lstm-lm with bf16 and with fp16 maps (the sequence ops' 16-bit kernels and tensor-core GEMMs, the
 * LSTM chunk widened into its fp32 code), three AdamW steps: bitwise the same losses and parameters under policies
 * all and recompute as under none, and the first loss (before any update) within the type's rounding of the fp32
 * CPU's. */
static void seq_training_16bit(const char *model, int seq)
{
    vdnn_graph_t *g = vt_load_zoo(model);
    vdnn_backend_t *be = gpu(), *c = cpu();
    gpt_run ref;
    seq_train(c, g, seq, VDNN_POLICY_NONE, &ref);
    const vdnn_precision precs[2] = {VDNN_PRECISION_BF16, VDNN_PRECISION_FP16};
    for (int k = 0; k < 2; k++) {
        gpt_run none, all, rec;
        seq_train_as(be, g, seq, VDNN_POLICY_NONE, precs[k], &none);
        seq_train_as(be, g, seq, VDNN_POLICY_ALL, precs[k], &all);
        seq_train_as(be, g, seq, VDNN_POLICY_RECOMPUTE, precs[k], &rec);
        const char *name = vdnn_precision_name(precs[k]);
        assert_int_equal(none.n, all.n);
        assert_int_equal(none.n, rec.n);
        if (memcmp(none.params, all.params, none.n * sizeof(float)))
            fail_msg("%s %s: policy all differs from none", model, name);
        if (memcmp(none.params, rec.params, none.n * sizeof(float)))
            fail_msg("%s %s: policy recompute differs from none", model, name);
        assert_memory_equal(none.loss, all.loss, sizeof none.loss);
        assert_memory_equal(none.loss, rec.loss, sizeof none.loss);
        for (int s = 0; s < GPT_STEPS; s++)
            printf("%s %s step %d: loss %.7f on cuda, fp32 %.7f on the cpu\n", model, name, s, (double)none.loss[s],
                   (double)ref.loss[s]);
        const double tol = precs[k] == VDNN_PRECISION_BF16 ? 2e-2 : 4e-3;
        if (!(fabs((double)none.loss[0] - (double)ref.loss[0]) <= tol * fabs((double)ref.loss[0])))
            fail_msg("%s %s: first loss %.7f vs fp32 %.7f", model, name, (double)none.loss[0], (double)ref.loss[0]);
        free(none.params), free(all.params), free(rec.params);
    }
    free(ref.params);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

static void test_seq_training_16bit(void **state)
{
    GPU_OR_SKIP();
    seq_training_16bit("gpt-mini", GPT_SEQ);
    seq_training_16bit("lstm-lm", LSTM_SEQ);
}

/* gpt-mini with every attention fused (the CUDA fused attention: probabilities never a tensor, recomputed in
 * backward), three AdamW steps: in fp32 the CPU's fused losses (the tolerances above) and bitwise the same parameters
 * under policies all and recompute as under none; in bf16 the same bitwise agreement and the first loss within
 * bf16's rounding of the fp32 CPU's. */
static void test_fused_attention_training(void **state)
{
    GPU_OR_SKIP();
    vdnn_graph_t *plain = vt_load_zoo("gpt-mini"), *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_with_fused_attention(plain, &g, &err), err);
    int fused = 0;
    for (int l = 1; l < g->n_layers; l++) fused += g->layers[l].kind == VDNN_LAYER_ATTN;
    assert_int_equal(fused, 4);
    vdnn_backend_t *be = gpu(), *c = cpu();
    gpt_run ref;
    seq_train(c, g, GPT_SEQ, VDNN_POLICY_NONE, &ref);
    const vdnn_precision precs[2] = {VDNN_PRECISION_FP32, VDNN_PRECISION_BF16};
    for (int k = 0; k < 2; k++) {
        const char *name = vdnn_precision_name(precs[k]);
        gpt_run none, all, rec;
        seq_train_as(be, g, GPT_SEQ, VDNN_POLICY_NONE, precs[k], &none);
        seq_train_as(be, g, GPT_SEQ, VDNN_POLICY_ALL, precs[k], &all);
        seq_train_as(be, g, GPT_SEQ, VDNN_POLICY_RECOMPUTE, precs[k], &rec);
        assert_int_equal(none.n, all.n);
        assert_int_equal(none.n, rec.n);
        if (memcmp(none.params, all.params, none.n * sizeof(float)))
            fail_msg("fused gpt-mini %s: policy all differs from none", name);
        if (memcmp(none.params, rec.params, none.n * sizeof(float)))
            fail_msg("fused gpt-mini %s: policy recompute differs from none", name);
        for (int s = 0; s < GPT_STEPS; s++) {
            printf("fused gpt-mini %s step %d: loss %.7f on cuda, fp32 %.7f on the cpu\n", name, s,
                   (double)none.loss[s], (double)ref.loss[s]);
            const double tol = precs[k] == VDNN_PRECISION_BF16 ? 2e-2 : s == 0 ? 1e-5 : 1e-3;
            if ((s == 0 || precs[k] == VDNN_PRECISION_FP32) &&
                !(fabs((double)none.loss[s] - (double)ref.loss[s]) <= tol * fmax(1.0, fabs((double)ref.loss[s]))))
                fail_msg("fused gpt-mini %s step %d: cuda loss %.7f vs cpu %.7f", name, s, (double)none.loss[s],
                         (double)ref.loss[s]);
        }
        free(none.params), free(all.params), free(rec.params);
    }
    free(ref.params);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
    vdnn_graph_free(plain);
}

/* lstm-lm (the CUDA LSTM ops: chunks, parameter tensors, gathers), three AdamW steps: the losses as the CPU's (same
 * tolerances as gpt-mini), and bitwise the same parameters under policies all (every chunk's state swapped) and
 * recompute (chunks rerun from the previous chunk's last row) as under none: the LSTM ops have no atomics and rerun
 * the same GEMMs on the same shapes. */
static void test_lstm_training(void **state)
{
    GPU_OR_SKIP();
    vdnn_graph_t *g = vt_load_zoo("lstm-lm");
    vdnn_backend_t *be = gpu(), *c = cpu();
    gpt_run none, all, rec, ref;
    seq_train(be, g, LSTM_SEQ, VDNN_POLICY_NONE, &none);
    seq_train(be, g, LSTM_SEQ, VDNN_POLICY_ALL, &all);
    seq_train(be, g, LSTM_SEQ, VDNN_POLICY_RECOMPUTE, &rec);
    seq_train(c, g, LSTM_SEQ, VDNN_POLICY_NONE, &ref);
    assert_int_equal(none.n, all.n);
    assert_int_equal(none.n, rec.n);
    if (memcmp(none.params, all.params, none.n * sizeof(float))) fail_msg("lstm-lm: policy all differs from none");
    if (memcmp(none.params, rec.params, none.n * sizeof(float)))
        fail_msg("lstm-lm: policy recompute differs from none");
    assert_memory_equal(none.loss, all.loss, sizeof none.loss);
    assert_memory_equal(none.loss, rec.loss, sizeof none.loss);
    for (int s = 0; s < GPT_STEPS; s++) {
        printf("lstm-lm step %d: loss %.7f on cuda, %.7f on the cpu\n", s, (double)none.loss[s], (double)ref.loss[s]);
        const double tol = s == 0 ? 1e-5 : 1e-3;
        if (!(fabs((double)none.loss[s] - (double)ref.loss[s]) <= tol * fmax(1.0, fabs((double)ref.loss[s]))))
            fail_msg("lstm-lm step %d: cuda loss %.7f vs cpu %.7f", s, (double)none.loss[s], (double)ref.loss[s]);
    }
    free(none.params), free(all.params), free(rec.params), free(ref.params);
    vdnn_backend_destroy(c);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

#ifndef VDNN_TEST_CUDA_EMULATED
static const char small_cfg[] = "[net]\nname=small\n"
                                "[conv1]\ntype=conv\nfilters=8\nsize=3\npad=1\nbias=0\n"
                                "[bn1]\ntype=batchnorm\n"
                                "[relu1]\ntype=relu\n"
                                "[pool1]\ntype=maxpool\nsize=2\n"
                                "[flat]\ntype=flatten\n"
                                "[fc]\ntype=fc\noutputs=classes\n"
                                "[loss]\ntype=softmax\n";
#else
/* The emulation (cuda_emulated.c) has no cuDNN: the same loss scaling on layers whose kernels it emulates. */
static const char small_cfg[] = "[net]\nname=small\n"
                                "[flat]\ntype=flatten\n"
                                "[fc1]\ntype=fc\noutputs=32\n"
                                "[act]\ntype=sigmoid\n"
                                "[fc]\ntype=fc\noutputs=classes\n"
                                "[loss]\ntype=softmax\n";
#endif

/* fp16 maps turn loss scaling on at 65536 (four steps; a skip there would halve it, as the check allows); a first
 * scale of 2^127 overflows the fp16 maps and the gradients, so steps are skipped (counted, the scale halved each
 * time) until one goes through. */
static void test_fp16_loss_scaling(void **state)
{
    GPU_OR_SKIP();
    vdnn_backend_t *be = gpu();
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(small_cfg, "small.cfg", &g, &err), err);
    const float firsts[2] = {0.0f, ldexpf(1.0f, 127)};
    for (int k = 0; k < 2; k++) {
        vdnn_net_options cfg = vdnn_net_options_default();
        cfg.batch = 8;
        cfg.in_c = 1, cfg.in_h = cfg.in_w = 16;
        cfg.classes = 10;
        cfg.memory.precision = VDNN_PRECISION_FP16;
        cfg.loss_scale = firsts[k];
        vdnn_net_t *net = NULL;
        vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
        float images[8 * 16 * 16];
        int32_t labels[8];
        int steps = 0;
        vdnn_net_stats st;
        do {
            vt_fill_uniform(images, sizeof images / sizeof images[0], 40 + (uint64_t)steps, -1, 1);
            for (int i = 0; i < 8; i++) labels[i] = (i + steps) % 10;
            float loss = NAN;
            vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, &loss, &err), err);
            steps++;
            vdnn_net_get_stats(net, &st);
        } while (steps < 140 && (k == 0 ? steps < 4 : st.skipped_steps == steps));
        assert_true(st.loss_scaling);
        printf("fp16, first scale %g: %d steps, %lld skipped, scale now %g\n", (double)(k ? firsts[k] : 65536.0f),
               steps, (long long)st.skipped_steps, (double)st.loss_scale);
        /* Whatever was skipped halved the scale once each; some update went through. */
        const int first = k ? 127 : 16;
        assert_true(st.skipped_steps < steps);
        assert_true(st.loss_scale == ldexpf(1.0f, first - (int)st.skipped_steps));
        if (k) assert_true(st.skipped_steps >= 1);
        vdnn_net_free(net);
    }
    vdnn_graph_free(g);
    vdnn_backend_destroy(be);
}

int main(void)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_status st = vdnn_backend_cuda_create(0, 0, &be, &err);
    if (st == VDNN_ERR_NO_DEVICE) {
        snprintf(skip_reason, sizeof skip_reason, "%s", err.msg);
        printf("SKIP: %s\n", skip_reason);
    } else if (st == VDNN_OK) {
        vdnn_backend_destroy(be);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_vs_cpu),
        cmocka_unit_test(test_all_finite),
        cmocka_unit_test(test_gpt_training),
        cmocka_unit_test(test_seq_training_16bit),
        cmocka_unit_test(test_fused_attention_training),
        cmocka_unit_test(test_lstm_training),
        cmocka_unit_test(test_fp16_loss_scaling),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed) return 1;
    return skip_reason[0] ? VT_EXIT_SKIPPED : 0;
}

#else

int main(void)
{
    printf("SKIP: built without the CUDA backend (no CUDA toolkit with cuDNN found)\n");
    return 77;
}

#endif
