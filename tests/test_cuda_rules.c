/* The CUDA backend's rules that need no GPU: which convolution candidates may run and which one each variant picks,
 * the on-disk cache of measured candidates, how per-channel sums split their work, sub-buffer alignment and the
 * mapping of cuDNN 9 statuses. Built against the CUDA backend; without it the test reports itself skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#ifdef VDNN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_conv_select.h"
#include "backend/cuda/cuda_layout.h"
#include "backend/op_check.h"
#include "op_desc.h"
#include "plan/profile.h"
#include "vdnn/model.h"
#include "vdnn/plan.h"

static const vdnn_conv_rules tf32_fast = {.tf32 = true, .deterministic = false, .ws_limit = SIZE_MAX};

/* A measured list as cudnnFind*Ex returns it: fastest first, failures last. */
static void sample(vdnn_conv_cand *c, int *n)
{
    const vdnn_conv_cand s[] = {
        {6, VDNN_MATH_TENSOR_OP, 0.5f, 64u << 20, false, true},  /* fastest, big workspace, not reproducible */
        {1, VDNN_MATH_DEFAULT, 0.8f, 4u << 20, true, true},
        {7, VDNN_MATH_CONVERSION, 0.3f, 0, true, true},          /* may round to FP16: never */
        {0, VDNN_MATH_FMA, 1.5f, 0, true, true},
        {2, VDNN_MATH_DEFAULT, 2.0f, 1u << 20, true, true},
        {5, VDNN_MATH_DEFAULT, -1.0f, 0, true, false},           /* did not run */
    };
    memcpy(c, s, sizeof s);
    *n = (int)(sizeof s / sizeof s[0]);
}

static void test_usable(void **state)
{
    vdnn_conv_cand c[8];
    int n;
    sample(c, &n);
    vdnn_conv_math m;
    assert_true(vdnn_conv_usable(&c[0], &tf32_fast, &m));
    assert_int_equal(m, VDNN_MATH_TENSOR_OP);
    assert_false(vdnn_conv_usable(&c[2], &tf32_fast, &m)); /* conversion */
    assert_false(vdnn_conv_usable(&c[5], &tf32_fast, &m)); /* did not run */
    vdnn_conv_rules strict = {.tf32 = false, .deterministic = false, .ws_limit = SIZE_MAX};
    assert_false(vdnn_conv_usable(&c[0], &strict, &m)); /* tensor cores without TF32 */
    assert_true(vdnn_conv_usable(&c[1], &strict, &m));
    assert_int_equal(m, VDNN_MATH_FMA); /* DEFAULT would allow TF32 */
    vdnn_conv_rules det = {.tf32 = true, .deterministic = true, .ws_limit = SIZE_MAX};
    assert_false(vdnn_conv_usable(&c[0], &det, &m));
    vdnn_conv_rules small = {.tf32 = true, .deterministic = false, .ws_limit = 2u << 20};
    assert_false(vdnn_conv_usable(&c[1], &small, &m));
    assert_true(vdnn_conv_usable(&c[4], &small, &m));
}

static void test_variants(void **state)
{
    vdnn_conv_cand c[8];
    int n;
    sample(c, &n);
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_FASTEST, 0), 0);
    /* Lean: the first within the cap; with nothing under it, the least workspace. */
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_LEAN, 8u << 20), 1);
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_LEAN, 0), 3);
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_LEAST, 0), 3);
    vdnn_conv_rules det = {.tf32 = true, .deterministic = true, .ws_limit = SIZE_MAX};
    assert_int_equal(vdnn_conv_pick(c, n, &det, VDNN_CONV_FASTEST, 0), 1);
    vdnn_conv_rules strict = {.tf32 = false, .deterministic = false, .ws_limit = 0};
    assert_int_equal(vdnn_conv_pick(c, n, &strict, VDNN_CONV_FASTEST, 0), 3);
    assert_int_equal(vdnn_conv_pick_within(c, n, &tf32_fast, 2u << 20), 3);
    assert_int_equal(vdnn_conv_pick_within(c, n, &tf32_fast, SIZE_MAX), 0);
    /* Preferring reproducible candidates (the backend's rules): the first reproducible one, not the faster atomic
     * one; an atomic one only where nothing reproducible is usable. */
    vdnn_conv_rules prefer = {.tf32 = true, .deterministic = false, .prefer_reproducible = true, .ws_limit = SIZE_MAX};
    assert_int_equal(vdnn_conv_pick(c, n, &prefer, VDNN_CONV_FASTEST, 0), 1);
    assert_int_equal(vdnn_conv_pick(c, n, &prefer, VDNN_CONV_LEAST, 0), 3);
    assert_int_equal(vdnn_conv_pick_within(c, n, &prefer, SIZE_MAX), 1);
    vdnn_conv_cand only_atomic[2] = {c[0], c[5]};
    assert_int_equal(vdnn_conv_pick(only_atomic, 2, &prefer, VDNN_CONV_FASTEST, 0), 0);
    assert_int_equal(vdnn_conv_pick(only_atomic, 2, &prefer, VDNN_CONV_LEAST, 0), 0);
    assert_int_equal(vdnn_conv_pick_within(only_atomic, 2, &prefer, SIZE_MAX), 0);
    /* Nothing ran: no pick, so the backend reports the layer unsupported instead of guessing. */
    for (int i = 0; i < n; i++) c[i].ok = false;
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_FASTEST, 0), -1);
    assert_int_equal(vdnn_conv_pick(c, n, &tf32_fast, VDNN_CONV_LEAST, 0), -1);
}

static void test_cache_line(void **state)
{
    vdnn_conv_cand c[8], back[VDNN_CONV_CANDS];
    int n, nb = -1;
    sample(c, &n);
    char line[2048], scope[64], key[128];
    assert_true(vdnn_conv_cache_format("H100|sm90|cudnn91400|tf32 1", "forward x64x3x224x224", c, n, line, sizeof line));
    assert_true(vdnn_conv_cache_parse(line, scope, sizeof scope, key, sizeof key, back, &nb));
    assert_string_equal(scope, "H100|sm90|cudnn91400|tf32 1");
    assert_string_equal(key, "forward x64x3x224x224");
    assert_int_equal(nb, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(back[i].algo, c[i].algo);
        assert_int_equal(back[i].math, c[i].math);
        assert_int_equal(back[i].ws, c[i].ws);
        assert_int_equal(back[i].deterministic, c[i].deterministic);
        assert_int_equal(back[i].ok, c[i].ok);
        assert_true(back[i].time_ms == c[i].time_ms);
    }
    /* Too small a buffer is refused, not truncated. */
    assert_false(vdnn_conv_cache_format("s", "k", c, n, line, 20));
    /* Torn, foreign or hostile lines are skipped. */
    const char *bad[] = {"", "s\tk\n", "s\tk\t2\t1,0,0.5,0,1,1\n", "s\tk\t1\t1,9,0.5,0,1,1\n", "s\tk\t1\t1,0,0.5,0,1,1;",
                         "s\tk\t99\t1,0,0.5,0,1,1\n", "s\tk\t1\t-1,0,0.5,0,1,1\n", "s\tk\t1\t1,0,0.5,0,2,1\n",
                         "s\tk\t1\t1,0,x,0,1,1\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb = -7;
        if (vdnn_conv_cache_parse(bad[i], scope, sizeof scope, key, sizeof key, back, &nb))
            fail_msg("parsed malformed line %zu: '%s'", i, bad[i]);
        assert_int_equal(nb, -7);
    }
}

static void test_cache_file(void **state)
{
    char dir[] = "/tmp/vdnn-conv-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof sub, "%s/nested/dir", dir);
    vdnn_conv_cand c[8], back[VDNN_CONV_CANDS];
    int n, nb;
    sample(c, &n);
    vdnn_conv_cache *a = vdnn_conv_cache_open(sub, "dev A");
    assert_non_null(a);
    assert_true(strstr(vdnn_conv_cache_path(a), "nested/dir/") != NULL);
    assert_false(vdnn_conv_cache_get(a, "k1", back, &nb));
    vdnn_conv_cache_put(a, "k1", c, n);
    vdnn_conv_cache_put(a, "k1", c, 1); /* the first record wins */
    assert_true(vdnn_conv_cache_get(a, "k1", back, &nb));
    assert_int_equal(nb, n);
    /* Another process (another open) of the same scope reads it; another device does not. */
    vdnn_conv_cache *b = vdnn_conv_cache_open(sub, "dev A");
    assert_true(vdnn_conv_cache_get(b, "k1", back, &nb));
    assert_int_equal(nb, n);
    assert_int_equal(back[1].ws, c[1].ws);
    vdnn_conv_cache *other = vdnn_conv_cache_open(sub, "dev B");
    assert_false(vdnn_conv_cache_get(other, "k1", back, &nb));
    /* A torn line in the file is skipped, the rest still read. */
    char path[512];
    snprintf(path, sizeof path, "%s", vdnn_conv_cache_path(a));
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("dev A\tk2\t3\t1,0,0.5", f);
    fclose(f);
    vdnn_conv_cache *d = vdnn_conv_cache_open(sub, "dev A");
    assert_true(vdnn_conv_cache_get(d, "k1", back, &nb));
    assert_false(vdnn_conv_cache_get(d, "k2", back, &nb));
    vdnn_conv_cache_close(a);
    vdnn_conv_cache_close(b);
    vdnn_conv_cache_close(other);
    vdnn_conv_cache_close(d);
    /* Memory-only when no directory is given: still a working cache. */
    vdnn_conv_cache *m = vdnn_conv_cache_open(NULL, "dev A");
    assert_string_equal(vdnn_conv_cache_path(m), "");
    vdnn_conv_cache_put(m, "k", c, n);
    assert_true(vdnn_conv_cache_get(m, "k", back, &nb));
    vdnn_conv_cache_close(m);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_cache_dir_from_environment(void **state)
{
    char buf[256];
    setenv("VDNN_CACHE_DIR", "/some/where", 1);
    vdnn_conv_cache_dir(buf, sizeof buf);
    assert_string_equal(buf, "/some/where");
    setenv("VDNN_CACHE_DIR", "off", 1);
    vdnn_conv_cache_dir(buf, sizeof buf);
    assert_string_equal(buf, "");
    unsetenv("VDNN_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    vdnn_conv_cache_dir(buf, sizeof buf);
    assert_string_equal(buf, "/xdg/vdnn");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    vdnn_conv_cache_dir(buf, sizeof buf);
    assert_string_equal(buf, "/home/u/.cache/vdnn");
}

static void test_sum_splits(void **state)
{
    const size_t scratch = VDNN_CUDA_SUM_SCRATCH_BYTES;
    /* VGG-16's first layers at batch 64: one block per channel would leave most of a GPU idle. */
    int s = vdnn_cuda_sum_splits(64, 64, 224 * 224, 1, scratch);
    assert_true(s * 64 >= 4 * 132);
    assert_true(s <= 1024);
    /* A shape's splits do not depend on anything else: the order of additions is fixed. */
    assert_int_equal(vdnn_cuda_sum_splits(64, 64, 224 * 224, 1, scratch), s);
    /* Bounded by the scratch: sums * c * splits doubles fit. */
    for (int c = 1; c <= 65536; c *= 4) {
        for (int sums = 1; sums <= 2; sums++) {
            int k = vdnn_cuda_sum_splits(4096, c, 4096, sums, scratch);
            assert_true(k >= 1);
            assert_true((size_t)k * (size_t)c * (size_t)sums * sizeof(double) <= scratch);
        }
    }
    assert_int_equal(vdnn_cuda_sum_splits(8, 1 << 20, 49, 1, scratch), 0); /* too many channels for the scratch */
    /* Small planes split by rows, one block per 64 rows. */
    assert_int_equal(vdnn_cuda_sum_splits(64, 4096, 1, 1, scratch), 1);
    assert_int_equal(vdnn_cuda_sum_splits(3000, 10, 1, 1, scratch), 47);
    assert_int_equal(vdnn_cuda_sum_splits(1, 3, 5, 1, scratch), 1);
}

static void test_chunk_plan(void **state)
{
    int per = -1, count = -1, last = -1;
    /* VGG-16's first activations, 64x224x224 per image, under cuDNN's 2^31-1: 668 images a call. */
    assert_true(vdnn_cuda_chunk_plan(64 * 224 * 224, 3080, VDNN_CUDA_MAX_TENSOR_VALUES, &per, &count, &last));
    assert_int_equal(per, 668);
    assert_int_equal(count, 5);
    assert_int_equal(last, 3080 - 4 * 668);
    /* Whole when it fits, exactly at the limit too. */
    assert_true(vdnn_cuda_chunk_plan(1000, 10, 10000, &per, &count, &last));
    assert_true(per == 10 && count == 1 && last == 10);
    assert_true(vdnn_cuda_chunk_plan(1000, 11, 10000, &per, &count, &last));
    assert_true(per == 10 && count == 2 && last == 1);
    assert_true(vdnn_cuda_chunk_plan(5, 7, 5, &per, &count, &last));
    assert_true(per == 1 && count == 7 && last == 1);
    /* One image over the limit cannot be cut: refused, outputs untouched. */
    per = count = last = -9;
    assert_false(vdnn_cuda_chunk_plan(6, 7, 5, &per, &count, &last));
    assert_false(vdnn_cuda_chunk_plan(0, 7, 5, &per, &count, &last));
    assert_false(vdnn_cuda_chunk_plan(1, 0, 5, &per, &count, &last));
    assert_true(per == -9 && count == -9 && last == -9);
}

static void test_align_and_status(void **state)
{
    assert_int_equal(vdnn_cuda_align(0), 0);
    assert_int_equal(vdnn_cuda_align(1), 256);
    assert_int_equal(vdnn_cuda_align(3 * 4), 256);
    assert_int_equal(vdnn_cuda_align(256), 256);
    assert_int_equal(vdnn_cuda_align(257), 512);
    /* cuDNN 9 codes by category and detail (cudnn_graph.h). */
    assert_int_equal(vdnn_cuda_cudnn_status(0), VDNN_OK);
    assert_int_equal(vdnn_cuda_cudnn_status(4004), VDNN_ERR_NO_MEMORY); /* device allocation failed */
    assert_int_equal(vdnn_cuda_cudnn_status(4003), VDNN_ERR_NO_MEMORY); /* host allocation (the old ALLOC_FAILED) */
    assert_int_equal(vdnn_cuda_cudnn_status(4000), VDNN_ERR_BACKEND);
    assert_int_equal(vdnn_cuda_cudnn_status(4001), VDNN_ERR_BACKEND);
    assert_int_equal(vdnn_cuda_cudnn_status(3000), VDNN_ERR_UNSUPPORTED);
    assert_int_equal(vdnn_cuda_cudnn_status(3002), VDNN_ERR_UNSUPPORTED); /* NOT_SUPPORTED_SHAPE */
    assert_int_equal(vdnn_cuda_cudnn_status(3010), VDNN_ERR_UNSUPPORTED);
    assert_int_equal(vdnn_cuda_cudnn_status(3005), VDNN_ERR_NO_DEVICE);   /* incompatible driver */
    assert_int_equal(vdnn_cuda_cudnn_status(3007), VDNN_ERR_NO_DEVICE);   /* architecture mismatch */
    assert_int_equal(vdnn_cuda_cudnn_status(2000), VDNN_ERR_INVALID_ARG);
    assert_int_equal(vdnn_cuda_cudnn_status(2003), VDNN_ERR_INVALID_ARG); /* misaligned pointer */
    assert_int_equal(vdnn_cuda_cudnn_status(5000), VDNN_ERR_BACKEND);
    assert_int_equal(vdnn_cuda_cudnn_status(1001), VDNN_ERR_BACKEND);
    /* What a driver/toolkit mismatch names. */
    assert_string_equal(vdnn_cuda_min_driver(13), "580.65.06");
    assert_string_equal(vdnn_cuda_min_driver(12), "525.60.13");
    assert_non_null(strstr(vdnn_cuda_min_driver(99), "released"));
}

/* The sequence ops as CUDA describes them (its own query code, no device) keep and read what the CPU's do, so a
 * plan made with either backend's op info holds on the other; bf16 and fp16 keep the same (the LSTM chunk its gates in
 * the maps' type), and shapes that do not fit are shape errors naming it. */
static void test_sequence_info_as_cpu(void **state)
{
    vdnn_backend_t *cpu = NULL;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &cpu, &err), err);
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    const vdnn_shape t = {2, 1, 5, 8};
    vdnn_op_desc ln_eval = vt_layernorm(t);
    ln_eval.training = false;
    const vdnn_op_desc cases[] = {
        vt_embed(2, 5, 11, 8), vt_pos_embed(t, 7), vt_layernorm(t), ln_eval, vt_linear(t, 6, 1), vt_linear(t, 6, 0),
        vt_attn_probs(2, 5, 8, 2), vt_attn_mix(2, 5, 8, 2), vt_act(VDNN_LAYER_GELU, t), vt_xent_seq(2, 5, 7),
        /* LSTM: from zero state, steps 2..4 with state, over chunk rows with a projection, lstm-lm's chunk */
        vt_lstm(2, 4, 3, 0, 5, 4, 5, 0, 0), vt_lstm(2, 3, 4, 0, 3, 6, 3, 2, 2), vt_lstm(1, 2, 4, 3, 3, 2, 7, 0, 2),
        vt_lstm(2, 32, 256, 0, 256, 32, 512, 0, 32), vt_lstm(1, 2, 5, 2, 3, 2, 3, 0, 0),
        vt_seq_cat(2, 3, (const int[]){2, 1, 2}, 7, 4),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const vdnn_op_desc *d = &cases[i];
        const char *name = vdnn_layer_kind_name(d->kind);
        vdnn_op_info c;
        vt_assert_ok(cpu->ops->op_query(cpu, d, &c, &err), err);
        vdnn_op_algo a[VDNN_MAX_ALGOS];
        int n = 0;
        bool derived = true;
        vt_assert_ok(vdnn_cuda_describe_op(&o, 9, 0, d, a, &n, &derived, &err), err);
        assert_int_equal(n, 1);
        assert_false(derived);
        const vdnn_op_info f32 = a[0].info, *g = &f32; /* a[] is reused below */
        if (g->bwd_needs_x != c.bwd_needs_x || g->bwd_needs_y != c.bwd_needs_y || g->inplace_ok != c.inplace_ok ||
            g->bwd_inplace_ok != c.bwd_inplace_ok || g->aux_bytes != c.aux_bytes)
            fail_msg("%s (case %zu): cuda needs_x %d needs_y %d inplace %d/%d aux %zu; cpu %d %d %d/%d %zu", name, i,
                     g->bwd_needs_x, g->bwd_needs_y, g->inplace_ok, g->bwd_inplace_ok, g->aux_bytes, c.bwd_needs_x,
                     c.bwd_needs_y, c.inplace_ok, c.bwd_inplace_ok, c.aux_bytes);
        /* The LSTM ops' workspaces are the CPU's too (the same buffers: one step's gates, the gates' gradient). */
        if (d->kind >= VDNN_LAYER_LSTM && (g->fwd_ws_bytes != c.fwd_ws_bytes || g->bwd_ws_bytes != c.bwd_ws_bytes))
            fail_msg("%s (case %zu): cuda workspaces %zu/%zu, cpu %zu/%zu", name, i, g->fwd_ws_bytes, g->bwd_ws_bytes,
                     c.fwd_ws_bytes, c.bwd_ws_bytes);
        if (d->kind == VDNN_LAYER_ATTN_PROBS) /* one sequence's heads of dS */
            assert_int_equal(g->bwd_ws_bytes, 2 * 5 * 5 * sizeof(float));
        vdnn_op_desc h = *d;
        for (int k = 0; k < 2; k++) {
            h.dtype = k ? VDNN_DTYPE_F16 : VDNN_DTYPE_BF16;
            vdnn_status st = vdnn_cuda_describe_op(&o, 9, 0, &h, a, &n, &derived, &err);
            /* Every sequence op takes 16-bit maps, keeping what fp32 keeps (layer norm's statistics stay fp32; the LSTM
             * chunk keeps its gates in the maps' type, as the CPU's bf16 chunk). */
            vt_assert_ok(st, err);
            const vdnn_op_info *hi = &a[0].info;
            const size_t aux = d->kind == VDNN_LAYER_LSTM ? g->aux_bytes / 2 : g->aux_bytes;
            /* The loss recomputes its softmax from the logits rather than read a rounded one. */
            const bool xent = d->kind == VDNN_LAYER_SOFTMAX_XENT;
            if (hi->bwd_needs_x != (g->bwd_needs_x || xent) || hi->bwd_needs_y != (g->bwd_needs_y && !xent) ||
                hi->inplace_ok != g->inplace_ok || hi->aux_bytes != aux)
                fail_msg("%s (case %zu) in %s: needs_x %d needs_y %d inplace %d aux %zu; fp32 %d %d %d aux %zu", name, i,
                         vdnn_dtype_name(h.dtype), hi->bwd_needs_x, hi->bwd_needs_y, hi->inplace_ok, hi->aux_bytes,
                         g->bwd_needs_x, g->bwd_needs_y, g->inplace_ok, aux);
            /* The widened chunk holds fp32 copies of a group's maps beside the fp32 chunk's own workspace. */
            if (d->kind == VDNN_LAYER_LSTM && (hi->fwd_ws_bytes <= g->fwd_ws_bytes || hi->bwd_ws_bytes <= g->bwd_ws_bytes))
                fail_msg("%s (case %zu) in %s: workspaces %zu/%zu, fp32's %zu/%zu", name, i, vdnn_dtype_name(h.dtype),
                         hi->fwd_ws_bytes, hi->bwd_ws_bytes, g->fwd_ws_bytes, g->bwd_ws_bytes);
            /* attn_probs: one sequence's fp32 scores in forward, its dS in the maps' type in backward; linear: the
             * weights rounded to the maps' type. */
            if (d->kind == VDNN_LAYER_ATTN_PROBS) {
                assert_int_equal(hi->fwd_ws_bytes, 2 * 5 * 5 * sizeof(float));
                assert_int_equal(hi->bwd_ws_bytes, 2 * 5 * 5 * 2);
            }
            if (d->kind == VDNN_LAYER_LINEAR) {
                assert_int_equal(hi->fwd_ws_bytes, vdnn_cuda_align(6 * 8 * 2));
                assert_int_equal(hi->bwd_ws_bytes, hi->fwd_ws_bytes);
            }
        }
    }
    /* Token ids in 16-bit maps: a vocabulary bf16 cannot hold exactly is refused naming the op; fp16 holds it. */
    vdnn_op_desc wide = vt_embed(2, 5, 300, 8);
    wide.dtype = VDNN_DTYPE_BF16;
    {
        vdnn_op_algo a[VDNN_MAX_ALGOS];
        int n = 0;
        bool derived;
        vt_assert_error(vdnn_cuda_describe_op(&o, 9, 0, &wide, a, &n, &derived, &err), err, VDNN_ERR_UNSUPPORTED,
                        "embed: a vocabulary of 300 tokens in bf16");
        wide.dtype = VDNN_DTYPE_F16;
        vt_assert_ok(vdnn_cuda_describe_op(&o, 9, 0, &wide, a, &n, &derived, &err), err);
    }
    const vdnn_op_desc lstm = vt_lstm(2, 3, 4, 2, 5, 3, 5, 0, 2);
    vdnn_op_desc bad[] = {vt_linear(t, 6, 1), vt_attn_probs(2, 5, 8, 3), vt_embed(2, 5, 11, 8), vt_pos_embed(t, 4),
                          vt_attn_mix(2, 5, 8, 2), lstm, lstm, lstm, lstm, vt_seq_cat(2, 2, (const int[]){3, 1}, 6, 2)};
    bad[0].out.w = 7;    /* not outputs= */
    bad[2].in[0].w = 2;  /* two values per token */
    bad[4].out.w = 9;    /* not the width */
    bad[5].out.w = 5;    /* not P + H */
    bad[6].n_inputs = 3; /* an input besides x and the previous chunk */
    bad[6].in[2] = lstm.in[1];
    bad[7].p.step0 = 1;  /* steps 1..3 of an input of 3 */
    bad[8].in[1].w = 7;  /* a previous chunk of other rows */
    bad[9].out.h = 5;    /* 3 + 1 steps, not 5 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vdnn_op_algo a[VDNN_MAX_ALGOS];
        int n = 0;
        bool derived;
        vdnn_status st = vdnn_cuda_describe_op(&o, 9, 0, &bad[i], a, &n, &derived, &err);
        if (st != VDNN_ERR_SHAPE || !strstr(err.msg, vdnn_layer_kind_name(bad[i].kind)))
            fail_msg("bad %s: %s \"%s\", expected a shape error naming it", vdnn_layer_kind_name(bad[i].kind),
                     vdnn_status_name(st), err.msg);
    }
    vdnn_backend_destroy(cpu);
}

/* A sequence model planned for a GPU from the CUDA backend's device-less description of its layers (as `vdnn plan
 * --profile` with a described profile does): in-core; auto at auto_pct % of that, feasible and within it; all (every
 * map swapped) below in-core. With same_as_cpu, the same profile with the CPU backend's op info instead must make
 * the same plans (equal peaks): the two backends' op info agree for every layer of the model (not so for gpt-mini,
 * whose CUDA linear needs no bias workspace). */
static size_t plans_from_cuda_info(const char *name, vdnn_shape in, int auto_pct, bool same_as_cpu, vdnn_dtype dt)
{
    vdnn_error err;
    vdnn_model_t *m = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.cfg", VDNN_SOURCE_DIR, name);
    vt_assert_ok(vdnn_model_load(path, &m, &err), err);
    vdnn_graph_t *g = vt_load_zoo(name);
    vt_assert_ok(vdnn_graph_resolve(g, in, 256, &err), err);
    vdnn_backend_t *cpu = NULL;
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &cpu, &err), err);
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 0;
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    vdnn_layer_algos *cpu_algos = calloc((size_t)g->n_layers, sizeof *cpu_algos);
    assert_true(algos && cpu_algos);
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, true, &d);
        d.dtype = dt;
        bool derived = true;
        vt_assert_ok(vdnn_cuda_describe_op(&o, 9, 0, &d, algos[l].a, &algos[l].n, &derived, &err), err);
        vt_assert_ok(cpu->ops->op_algos(cpu, &d, cpu_algos[l].a, &cpu_algos[l].n, &err), err);
    }
    vdnn_profile q;
    vt_assert_ok(vdnn_profile_estimate(g, 4.95e14, 3.35e12, 5.5e10, &q, &err), err);
    snprintf(q.device, sizeof q.device, "cuda");
    vt_assert_ok(vdnn_cuda_describe_offline(&o, 9, 0, "a described GPU", &q.dev, &err), err);
    q.dtype = dt;
    snprintf(q.op_info_source, sizeof q.op_info_source, "described");
    const vdnn_policy pols[3] = {VDNN_POLICY_NONE, VDNN_POLICY_AUTO, VDNN_POLICY_ALL};
    size_t incore = 0;
    for (int k = 0; k < 3; k++) {
        vdnn_memory_options mem = vdnn_memory_options_default();
        mem.policy = pols[k];
        mem.precision = (vdnn_precision)dt;
        mem.budget = k == 1 ? incore / 100 * (size_t)auto_pct : SIZE_MAX;
        size_t peak[2] = {0, 0};
        for (int side = 0; side < (same_as_cpu ? 2 : 1); side++) {
            q.ops = side ? cpu_algos : algos;
            vdnn_plan_t *plan = NULL;
            vt_assert_ok(vdnn_plan_create(m, NULL, &q, in, 256, &mem, &plan, &err), err);
            vdnn_plan_summary sum;
            vt_assert_ok(vdnn_plan_summarize(plan, &sum, &err), err);
            printf("%s b%d t%d %s on %s op info, %s: peak %zu bytes%s\n", name, in.n, in.h, vdnn_dtype_name(dt),
                   side ? "the CPU's" : "described CUDA", vdnn_policy_name(pols[k]), sum.peak_device_bytes,
                   sum.feasible ? "" : " (infeasible)");
            assert_true(sum.feasible);
            peak[side] = sum.peak_device_bytes;
            vdnn_plan_free(plan);
        }
        if (same_as_cpu) assert_int_equal(peak[0], peak[1]);
        if (k == 0) incore = peak[0];
        else if (k == 1) assert_true(peak[0] <= incore / 100 * (size_t)auto_pct);
        else assert_true(peak[0] < incore);
    }
    q.ops = NULL;
    vdnn_profile_release(&q);
    free(algos);
    free(cpu_algos);
    vdnn_backend_destroy(cpu);
    vdnn_graph_free(g);
    vdnn_model_free(m);
    return incore;
}

/* And in bf16 (the 16-bit CUDA ops' info): the maps halve, so in-core needs well under fp32's (parameters, their
 * gradients and AdamW's moments stay fp32). */
static void test_sequence_plans_from_cuda_info(void **state)
{
    const vdnn_shape in = {8, 1, 32, 1};
    const size_t f32 = plans_from_cuda_info("gpt-mini", in, 50, false, VDNN_DTYPE_F32);
    const size_t bf16 = plans_from_cuda_info("gpt-mini", in, 50, false, VDNN_DTYPE_BF16);
    printf("gpt-mini in-core on described CUDA op info: bf16 over fp32 %.3f\n", (double)bf16 / (double)f32);
    assert_true(bf16 < f32 / 4 * 3);
}

/* lstm-lm's chunks, parameter tensors and gathers, from the CUDA LSTM ops' info (batch 32, the file's 128 steps: its chunks
 * are cut for it). Its parameters and their tensor copies weigh more than gpt-mini's against its maps, so auto is
 * asked for three quarters of in-core rather than half. Every layer's info is the CPU's, so the plans are too; and in
 * bf16 in-core needs less. */
static void test_lstm_plans_from_cuda_info(void **state)
{
    const vdnn_shape in = {32, 1, 128, 1};
    const size_t f32 = plans_from_cuda_info("lstm-lm", in, 75, true, VDNN_DTYPE_F32);
    /* bf16: the gates, the largest thing a chunk keeps, are half (the widened chunks group samples as the CPU's, so the
     * peaks come within 0.1% of the CPU op info's: the workspaces align differently). */
    const size_t bf16 = plans_from_cuda_info("lstm-lm", in, 75, false, VDNN_DTYPE_BF16);
    printf("lstm-lm in-core on described CUDA op info: bf16 over fp32 %.3f\n", (double)bf16 / (double)f32);
    assert_true(bf16 < f32 / 10 * 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_info_as_cpu),
        cmocka_unit_test(test_sequence_plans_from_cuda_info),
        cmocka_unit_test(test_lstm_plans_from_cuda_info),
        cmocka_unit_test(test_usable),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_cache_line),
        cmocka_unit_test(test_cache_file),
        cmocka_unit_test(test_cache_dir_from_environment),
        cmocka_unit_test(test_sum_splits),
        cmocka_unit_test(test_chunk_plan),
        cmocka_unit_test(test_align_and_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
    printf("SKIP: built without the CUDA backend (no CUDA toolkit with cuDNN found)\n");
    return 77;
}

#endif
