/* The 16-bit types underneath every bf16 and fp16 op: the scalar conversions of core/half.h (rounding, ties, NaN,
 * infinities, subnormals, every bit pattern round-tripped), the CPU backend's AVX-512 BF16 runs against them, and
 * the backends' convert and accumulate_typed helpers (the CPU's on both of its paths, CUDA's where a GPU is). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_bf16.h"
#include "core/half.h"
#include "testutil.h"

static float bits_f(uint32_t u) { return vdnn_bits_float(u); }

static void test_bf16_scalar(void **state)
{
    assert_int_equal(vdnn_bf16_from_float(1.0f), 0x3f80);
    assert_int_equal(vdnn_bf16_from_float(-2.0f), 0xc000);
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even neighbour, 1; 1 + 3*2^-8 up to 1 + 2^-6. */
    assert_int_equal(vdnn_bf16_from_float(1.0f + 1.0f / 256), 0x3f80);
    assert_int_equal(vdnn_bf16_from_float(1.0f + 3.0f / 256), 0x3f82);
    assert_int_equal(vdnn_bf16_from_float(bits_f(0x3f808001u)), 0x3f81); /* just above the tie */
    assert_int_equal(vdnn_bf16_from_float(INFINITY), 0x7f80);
    assert_int_equal(vdnn_bf16_from_float(-INFINITY), 0xff80);
    assert_int_equal(vdnn_bf16_from_float(bits_f(0x7f7fffffu)), 0x7f80); /* the largest float rounds to infinity */
    /* NaN stays NaN, quiet, of its sign, even when its payload sits in the bits that are dropped. */
    assert_int_equal(vdnn_bf16_from_float(bits_f(0x7f800001u)) & 0xffc0, 0x7fc0);
    assert_int_equal(vdnn_bf16_from_float(bits_f(0xff800001u)) & 0xffc0, 0xffc0);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = vdnn_bf16_to_float((uint16_t)h);
        const uint16_t back = vdnn_bf16_from_float(f);
        if (isnan(f)) assert_true(isnan(vdnn_bf16_to_float(back)));
        else if (back != h) fail_msg("bf16 %04x -> %g -> %04x", h, (double)f, back);
    }
}

/* The nearest fp16 to f, ties to even, by search: the reference vdnn_f16_from_float is held to. */
static uint16_t f16_nearest(float f)
{
    uint16_t best = 0;
    double best_d = INFINITY;
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    for (uint32_t m = 0; m <= 0x7c00u; m++) {
        const double v = fabs((double)vdnn_f16_to_float((uint16_t)m)), d = fabs(v - fabs((double)f));
        if (d < best_d || (d == best_d && !(m & 1))) best = (uint16_t)m, best_d = d;
    }
    /* Beyond 65520 (65504 plus half a step) the nearest is infinity. */
    if (fabs((double)f) >= 65520.0) best = 0x7c00;
    return (uint16_t)(sign | best);
}

static void test_f16_scalar(void **state)
{
    assert_int_equal(vdnn_f16_from_float(1.0f), 0x3c00);
    assert_int_equal(vdnn_f16_from_float(65504.0f), 0x7bff);
    assert_int_equal(vdnn_f16_from_float(65519.0f), 0x7bff);
    assert_int_equal(vdnn_f16_from_float(65520.0f), 0x7c00);
    assert_int_equal(vdnn_f16_from_float(1e10f), 0x7c00);
    assert_int_equal(vdnn_f16_from_float(ldexpf(1.0f, -24)), 0x0001); /* the smallest subnormal */
    assert_int_equal(vdnn_f16_from_float(ldexpf(1.0f, -25)), 0x0000); /* half of it: the tie goes to even, 0 */
    assert_int_equal(vdnn_f16_from_float(ldexpf(3.0f, -26)), 0x0001);
    assert_int_equal(vdnn_f16_from_float(ldexpf(1.0f, -14)), 0x0400); /* the smallest normal */
    assert_int_equal(vdnn_f16_from_float(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(vdnn_f16_from_float(1.0f + ldexpf(3.0f, -11)), 0x3c02);
    assert_int_equal(vdnn_f16_from_float(-0.0f), 0x8000);
    assert_true(isnan(vdnn_f16_to_float(vdnn_f16_from_float(NAN))));
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = vdnn_f16_to_float((uint16_t)h);
        const uint16_t back = vdnn_f16_from_float(f);
        if (isnan(f)) assert_true(isnan(vdnn_f16_to_float(back)));
        else if (back != h) fail_msg("fp16 %04x -> %g -> %04x", h, (double)f, back);
    }
    /* Random floats over fp16's whole range, subnormals and overflow included, against the search. */
    float x[400];
    vt_fill_uniform(x, 400, 3, -1.f, 1.f);
    for (int i = 0; i < 400; i++) {
        const float f = ldexpf(x[i], (i % 46) - 28);
        if (vdnn_f16_from_float(f) != f16_nearest(f))
            fail_msg("fp16 of %.9g: %04x, nearest %04x", (double)f, vdnn_f16_from_float(f), f16_nearest(f));
    }
}

static vdnn_backend_t *cpu_backend(bool no_bf16)
{
    vdnn_cpu_options o = {.threads = 2, .no_bf16 = no_bf16};
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    vt_assert_ok(vdnn_backend_cpu_create(&o, &be, &err), err);
    return be;
}

/* Whether this CPU runs bf16 ops (and so the AVX-512 BF16 runs); prints why not. */
static bool have_bf16(void)
{
    vdnn_backend_t *be = cpu_backend(false);
    vdnn_op_desc d = {.kind = VDNN_LAYER_RELU, .n_inputs = 1, .in = {{1, 1, 1, 1}}, .out = {1, 1, 1, 1}};
    d.dtype = VDNN_DTYPE_BF16;
    vdnn_op_info info;
    vdnn_error err = {0};
    const bool ok = be->ops->op_query(be, &d, &info, &err) == VDNN_OK;
    if (!ok) print_message("Skipped: %s\n", err.msg);
    vdnn_backend_destroy(be);
    return ok;
}

/* Values of every magnitude fp32 holds, ties at bf16's rounding point, signed zeros, infinities, NaN. */
static void awkward_floats(float *x, size_t n)
{
    vt_fill_uniform(x, n, 11, -1.f, 1.f);
    for (size_t i = 0; i < n; i++) {
        x[i] = ldexpf(x[i], (int)(i % 200) - 100);
        if (i % 7 == 3) x[i] = vdnn_bits_float((vdnn_float_bits(x[i]) & 0xffff0000u) | 0x8000u); /* a tie */
    }
    x[0] = -0.0f, x[1] = INFINITY, x[2] = -INFINITY, x[3] = NAN;
}

/* The vector runs round as the scalar function (subnormals aside: the instruction flushes them) and touch nothing
 * past n, for every tail length. */
static void test_bf16_runs(void **state)
{
    if (!have_bf16()) skip();
    enum { N = 1000 };
    float x[N], back[N + 8];
    uint16_t h[N + 8];
    awkward_floats(x, N);
    for (size_t i = 0; i < N; i++)
        if (fabsf(x[i]) < 1.2e-38f) x[i] = 0.0f;
    const size_t lens[] = {0, 1, 7, 15, 16, 17, 31, 33, N};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        const size_t n = lens[k];
        memset(h, 0xab, sizeof h);
        for (size_t i = 0; i < N + 8; i++) back[i] = 42.0f;
        vdnn_cpu_bf16_store(h, x, n);
        vdnn_cpu_bf16_load(back, h, n);
        for (size_t i = 0; i < n; i++) {
            if (h[i] != vdnn_bf16_from_float(x[i]) && !(isnan(x[i]) && (h[i] & 0x7fc0) == 0x7fc0))
                fail_msg("length %zu, [%zu] %.9g: %04x, expected %04x", n, i, (double)x[i], h[i],
                         vdnn_bf16_from_float(x[i]));
            if (memcmp(&back[i], &(float){vdnn_bf16_to_float(h[i])}, sizeof(float)))
                fail_msg("length %zu, [%zu]: %04x widened to %.9g", n, i, h[i], (double)back[i]);
        }
        for (size_t i = n; i < n + 8 && i < N + 8; i++) {
            if (h[i] != 0xabab) fail_msg("length %zu: store wrote [%zu]", n, i);
            if (back[i] != 42.0f) fail_msg("length %zu: load wrote [%zu]", n, i);
        }
    }
}

/* convert and accumulate_typed give the same values on the vector path (AVX-512 BF16) and the scalar one (no_bf16),
 * equal to the scalar functions; same-type convert copies; bad arguments are refused. */
static void test_backend_helpers(void **state)
{
    enum { N = 70000 }; /* more than one parallel block */
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *f = malloc(N * sizeof *f);
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *c = malloc(N * 2);
    assert_true(x && y && f && a && b && c);
    vt_fill_uniform(x, N, 5, -3.f, 3.f);
    vt_fill_uniform(y, N, 6, -3.f, 3.f);
    vdnn_error err = {0};
    const bool fast = have_bf16();
    for (int path = fast ? 0 : 1; path < 2; path++) {
        vdnn_backend_t *be = cpu_backend(path == 1);
        const vdnn_backend_ops *o = be->ops;
        vt_assert_ok(o->convert(be, a, VDNN_DTYPE_BF16, x, VDNN_DTYPE_F32, N, &err), err);
        vt_assert_ok(o->convert(be, f, VDNN_DTYPE_F32, a, VDNN_DTYPE_BF16, N, &err), err);
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(a[i], vdnn_bf16_from_float(x[i]));
            assert_true(f[i] == vdnn_bf16_to_float(a[i]));
        }
        /* Every bf16 value, and floats at, just above and just below its rounding tie (NaN and infinities too). */
        for (uint32_t h = 0; h < 65536; h++) {
            const uint32_t bits[3] = {h << 16 | 0x8000u, h << 16 | 0x8001u, h << 16 | 0x7fffu};
            float v[3];
            uint16_t r[3];
            memcpy(v, bits, sizeof v);
            vt_assert_ok(o->convert(be, r, VDNN_DTYPE_BF16, v, VDNN_DTYPE_F32, 3, &err), err);
            for (int k = 0; k < 3; k++)
                if (r[k] != vdnn_bf16_from_float(v[k]) && !(path == 0 && fpclassify(v[k]) == FP_SUBNORMAL))
                    fail_msg("convert %08x: %04x, scalar %04x", bits[k], r[k], vdnn_bf16_from_float(v[k]));
        }
        vt_assert_ok(o->convert(be, b, VDNN_DTYPE_F16, a, VDNN_DTYPE_BF16, N, &err), err);
        for (size_t i = 0; i < N; i++) assert_int_equal(b[i], vdnn_f16_from_float(vdnn_bf16_to_float(a[i])));
        vt_assert_ok(o->convert(be, c, VDNN_DTYPE_F16, b, VDNN_DTYPE_F16, N, &err), err);
        assert_memory_equal(c, b, N * 2);
        /* a += bf16(y), added in fp32, rounded once. */
        vt_assert_ok(o->convert(be, c, VDNN_DTYPE_BF16, y, VDNN_DTYPE_F32, N, &err), err);
        vt_assert_ok(o->accumulate_typed(be, VDNN_DTYPE_BF16, a, c, N, &err), err);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(a[i], vdnn_bf16_from_float(vdnn_bf16_to_float(vdnn_bf16_from_float(x[i])) +
                                                        vdnn_bf16_to_float(c[i])));
        memcpy(f, x, N * sizeof *f);
        vt_assert_ok(o->accumulate_typed(be, VDNN_DTYPE_F32, f, y, N, &err), err);
        for (size_t i = 0; i < N; i++) assert_true(f[i] == x[i] + y[i]);
        vt_assert_error(o->convert(be, NULL, VDNN_DTYPE_BF16, x, VDNN_DTYPE_F32, 3, &err), err, VDNN_ERR_INVALID_ARG,
                        "NULL");
        vt_assert_error(o->convert(be, a, (vdnn_dtype)7, x, VDNN_DTYPE_F32, 3, &err), err, VDNN_ERR_INVALID_ARG,
                        "data type 7");
        vt_assert_error(o->accumulate_typed(be, VDNN_DTYPE_BF16, a, NULL, 3, &err), err, VDNN_ERR_INVALID_ARG, "NULL");
        vdnn_backend_destroy(be);
    }
    free(x), free(y), free(f), free(a), free(b), free(c);
}

static void *dev_upload(vdnn_backend_t *be, const void *src, size_t bytes)
{
    void *p = NULL;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->dev_alloc(be, bytes, &p, &err), err);
    if (src) vt_assert_ok(be->ops->upload(be, p, src, bytes, &err), err);
    return p;
}

/* The CUDA backend's convert and accumulate_typed (when a GPU is there) round as the scalar functions do. */
static void test_cuda_helpers(void **state)
{
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    if (vdnn_backend_cuda_create(0, 0, &be, &err) != VDNN_OK) {
        print_message("Skipped: %s\n", err.msg);
        skip();
    }
    enum { N = 70000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *h = malloc(N * 2);
    assert_true(x && y && h);
    awkward_floats(x, N);
    vt_fill_uniform(y, N, 8, -3.f, 3.f);
    const vdnn_dtype types[2] = {VDNN_DTYPE_BF16, VDNN_DTYPE_F16};
    void *dx = dev_upload(be, x, N * sizeof *x), *dy = dev_upload(be, y, N * sizeof *y);
    void *d16 = dev_upload(be, NULL, N * 2), *e16 = dev_upload(be, NULL, N * 2);
    for (int k = 0; k < 2; k++) {
        const vdnn_dtype t = types[k];
        const bool bf = t == VDNN_DTYPE_BF16;
        vt_assert_ok(be->ops->convert(be, d16, t, dx, VDNN_DTYPE_F32, N, &err), err);
        vt_assert_ok(be->ops->convert(be, e16, t, dy, VDNN_DTYPE_F32, N, &err), err);
        vt_assert_ok(be->ops->accumulate_typed(be, t, d16, e16, N, &err), err);
        vt_assert_ok(be->ops->sync_all(be, &err), err);
        vt_assert_ok(be->ops->download(be, h, d16, N * 2, &err), err);
        for (size_t i = 0; i < N; i++) {
            const float a = bf ? vdnn_bf16_to_float(vdnn_bf16_from_float(x[i])) : vdnn_f16_to_float(vdnn_f16_from_float(x[i]));
            const float c = bf ? vdnn_bf16_to_float(vdnn_bf16_from_float(y[i])) : vdnn_f16_to_float(vdnn_f16_from_float(y[i]));
            const uint16_t want = bf ? vdnn_bf16_from_float(a + c) : vdnn_f16_from_float(a + c);
            const float got = bf ? vdnn_bf16_to_float(h[i]) : vdnn_f16_to_float(h[i]);
            if (h[i] != want && !(isnan(a + c) && isnan(got)))
                fail_msg("%s: [%zu] %.9g + %.9g gave %04x, expected %04x", vdnn_dtype_name(t), i, (double)x[i],
                         (double)y[i], h[i], want);
        }
    }
    void *all[4] = {dx, dy, d16, e16};
    for (int i = 0; i < 4; i++) be->ops->dev_free(be, all[i]);
    vdnn_backend_destroy(be);
    free(x), free(y), free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_scalar),
        cmocka_unit_test(test_f16_scalar),
        cmocka_unit_test(test_bf16_runs),
        cmocka_unit_test(test_backend_helpers),
        cmocka_unit_test(test_cuda_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
