/* Would a bf16 Winograd convolution beat oneDNN's fp32 Winograd on this CPU? oneDNN 2.6 has Winograd in fp32 only
 * (F(4x4, 3x3)); the CPU backend runs its bf16 3x3 stride-1 layers on it (bench/results/precision.md). This probe
 * times, for one 3x3 stride-1 pad-1 layer of N images of C channels at HxH (C filters):
 *   - oneDNN's fp32 Winograd, its bf16 direct kernels and its fp32 direct kernels: forward, backward-data and
 *     backward-weights on the layouts they choose (no layout copies);
 *   - the parts of a bf16 F(2x2, 3x3) Winograd built from oneDNN's bf16 batched matmul: the input transform (NHWC
 *     bf16 in, 16 transformed planes out, AVX-512), the 16 products of forward and backward-data ([tiles x C] times
 *     [C x C]) and of backward-weights ([C x tiles] times [tiles x C]), and the output transform,
 * and prints the estimated bf16 Winograd time of the three passes against fp32 Winograd's. F(2x2, 3x3) needs
 * 2.25x fewer multiplications than direct kernels and F(4x4, 3x3) 4x fewer, so bf16's twice-as-fast products only
 * bring the smaller tile back to the larger tile's fp32 time; a bf16 F(4x4, 3x3) rounds transformed values of up
 * to about 10x the inputs' magnitude to 8 significant bits, too coarse to keep bf16's rounding bound.
 *
 *     gcc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L bench/bf16_winograd_probe.c -ldnnl -o probe
 *     OMP_NUM_THREADS=1 ./probe N C H          (e.g. 32 128 32: VGG-16's conv2_2 at 3x64x64) */
#include <dnnl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                                     \
    do {                                                                                                             \
        dnnl_status_t s_ = (x);                                                                                      \
        if (s_ != dnnl_success) {                                                                                    \
            fprintf(stderr, "probe: oneDNN status %d at line %d\n", (int)s_, __LINE__);                              \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

#define AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define REPS 4

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static dnnl_memory_t zeroed(const dnnl_memory_desc_t *md)
{
    dnnl_memory_t m;
    void *p;
    CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_get_data_handle(m, &p));
    memset(p, 0, dnnl_memory_desc_get_size(md));
    return m;
}

/* Best of REPS runs of prim with a zeroed memory per argument, in the layouts pd chose. */
static double best_run(dnnl_primitive_desc_t pd, const int *args, int n)
{
    dnnl_primitive_t prim;
    dnnl_exec_arg_t a[4];
    CHECK(dnnl_primitive_create(&prim, pd));
    for (int i = 0; i < n; i++)
        a[i] = (dnnl_exec_arg_t){args[i], zeroed(dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, args[i]))};
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t = now_ms();
        CHECK(dnnl_primitive_execute(prim, stream, n, a));
        CHECK(dnnl_stream_wait(stream));
        t = now_ms() - t;
        best = t < best ? t : best;
    }
    for (int i = 0; i < n; i++) dnnl_memory_destroy(a[i].memory);
    dnnl_primitive_destroy(prim);
    return best;
}

/* Forward + backward-data + backward-weights of oneDNN's convolution in type dt with algorithm alg. */
static double conv_passes(int n, int c, int h, dnnl_data_type_t dt, dnnl_alg_kind_t alg, const char *label)
{
    const dnnl_dims_t sd = {n, c, h, h}, wd = {c, c, 3, 3}, one = {1, 1};
    dnnl_memory_desc_t src, wei, dwei, dst;
    CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, sd, dt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dt, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dwei, 4, wd, dnnl_f32, dnnl_format_tag_any));
    dnnl_convolution_desc_t fd, bd, wgd;
    dnnl_primitive_desc_t fpd, bpd, wpd;
    CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, alg, &src, &wei, NULL, &dst, one, one, one));
    CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL));
    CHECK(dnnl_convolution_backward_data_desc_init(&bd, alg, &src, &wei, &dst, one, one, one));
    CHECK(dnnl_primitive_desc_create(&bpd, &bd, NULL, engine, fpd));
    CHECK(dnnl_convolution_backward_weights_desc_init(&wgd, alg, &src, &dwei, NULL, &dst, one, one, one));
    CHECK(dnnl_primitive_desc_create(&wpd, &wgd, NULL, engine, fpd));
    const double f = best_run(fpd, (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, 3);
    const double b = best_run(bpd, (const int[]){DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST}, 3);
    const double w = best_run(wpd, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST}, 3);
    const char *impl;
    CHECK(dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl));
    printf("%-18s %-28s forward %7.2f  backward-data %7.2f  backward-weights %7.2f  ms\n", label, impl, f, b, w);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    dnnl_primitive_desc_destroy(wpd);
    return f + b + w;
}

/* b batched bf16 products [m x k] times [k x n] into fp32; trans_a: the left operand stored [k x m]. */
static double matmul_bf16(int b, int m, int k, int n, int trans_a)
{
    const dnnl_dims_t ad = {b, m, k}, bd = {b, k, n}, cd = {b, m, n}, at = {(dnnl_dim_t)m * k, 1, m};
    dnnl_memory_desc_t a, w, c;
    if (trans_a) CHECK(dnnl_memory_desc_init_by_strides(&a, 3, ad, dnnl_bf16, at));
    else CHECK(dnnl_memory_desc_init_by_tag(&a, 3, ad, dnnl_bf16, dnnl_abc));
    CHECK(dnnl_memory_desc_init_by_tag(&w, 3, bd, dnnl_bf16, dnnl_abc));
    CHECK(dnnl_memory_desc_init_by_tag(&c, 3, cd, dnnl_f32, dnnl_abc));
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_matmul_desc_init(&md, &a, &w, NULL, &c));
    CHECK(dnnl_primitive_desc_create(&pd, &md, NULL, engine, NULL));
    const double t = best_run(pd, (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, 3);
    printf("bf16 matmul %dx[%dx%d][%dx%d]%s: %7.2f ms, %.1f GFLOP/s\n", b, m, k, k, n, trans_a ? " (left transposed)" : "",
           t, 2.0 * b * m * k * n / t / 1e6);
    dnnl_primitive_desc_destroy(pd);
    return t;
}

AVX512_BF16 static __m512 load_bf16(const uint16_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* B^T d B of every 4x4 input tile (stride 2, pad 1), 16 channels at a time: x NHWC bf16, v[16][tiles][c] bf16. */
AVX512_BF16 static double input_transform(int n, int c, int h, const uint16_t *x, uint16_t *v)
{
    const int th = h / 2;
    const size_t tiles = (size_t)n * th * th;
    const double t0 = now_ms();
    for (int img = 0; img < n; img++)
        for (int i = 0; i < th; i++)
            for (int j = 0; j < th; j++) {
                const size_t t = ((size_t)img * th + i) * th + j;
                for (int ch = 0; ch < c; ch += 16) {
                    __m512 d[4][4], e[4][4];
                    for (int r = 0; r < 4; r++)
                        for (int s = 0; s < 4; s++) {
                            const int y = 2 * i - 1 + r, xx = 2 * j - 1 + s;
                            d[r][s] = y < 0 || y >= h || xx < 0 || xx >= h
                                          ? _mm512_setzero_ps()
                                          : load_bf16(x + (((size_t)img * h + y) * h + xx) * c + ch);
                        }
                    for (int s = 0; s < 4; s++) {
                        e[0][s] = _mm512_sub_ps(d[0][s], d[2][s]);
                        e[1][s] = _mm512_add_ps(d[1][s], d[2][s]);
                        e[2][s] = _mm512_sub_ps(d[2][s], d[1][s]);
                        e[3][s] = _mm512_sub_ps(d[1][s], d[3][s]);
                    }
                    for (int r = 0; r < 4; r++) {
                        const __m512 f[4] = {_mm512_sub_ps(e[r][0], e[r][2]), _mm512_add_ps(e[r][1], e[r][2]),
                                             _mm512_sub_ps(e[r][2], e[r][1]), _mm512_sub_ps(e[r][1], e[r][3])};
                        for (int s = 0; s < 4; s++)
                            _mm256_storeu_si256((__m256i *)(v + ((size_t)(r * 4 + s) * tiles + t) * c + ch),
                                                (__m256i)_mm512_cvtneps_pbh(f[s]));
                    }
                }
            }
    return now_ms() - t0;
}

/* A^T m A of every tile: m[16][tiles][c] fp32, y NHWC fp32 (2x2 outputs a tile). */
AVX512_BF16 static double output_transform(int n, int c, int h, const float *m, float *y)
{
    const int th = h / 2;
    const size_t tiles = (size_t)n * th * th;
    const double t0 = now_ms();
    for (int img = 0; img < n; img++)
        for (int i = 0; i < th; i++)
            for (int j = 0; j < th; j++) {
                const size_t t = ((size_t)img * th + i) * th + j;
                for (int ch = 0; ch < c; ch += 16) {
                    __m512 v[4][4], e[2][4];
                    for (int r = 0; r < 4; r++)
                        for (int s = 0; s < 4; s++) v[r][s] = _mm512_loadu_ps(m + ((size_t)(r * 4 + s) * tiles + t) * c + ch);
                    for (int s = 0; s < 4; s++) {
                        e[0][s] = _mm512_add_ps(_mm512_add_ps(v[0][s], v[1][s]), v[2][s]);
                        e[1][s] = _mm512_sub_ps(_mm512_sub_ps(v[1][s], v[2][s]), v[3][s]);
                    }
                    for (int r = 0; r < 2; r++) {
                        float *row = y + (((size_t)img * h + 2 * i + r) * h + 2 * j) * c + ch;
                        _mm512_storeu_ps(row, _mm512_add_ps(_mm512_add_ps(e[r][0], e[r][1]), e[r][2]));
                        _mm512_storeu_ps(row + c, _mm512_sub_ps(_mm512_sub_ps(e[r][1], e[r][2]), e[r][3]));
                    }
                }
            }
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s N C H (C a multiple of 16, H even)\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), c = atoi(argv[2]), h = atoi(argv[3]);
    if (n < 1 || c < 16 || c % 16 || h < 2 || h % 2) {
        fprintf(stderr, "probe: N >= 1, C a multiple of 16, H even and >= 2 (got %d %d %d)\n", n, c, h);
        return 2;
    }
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    printf("3x3 stride-1 convolution, %d images, %d -> %d channels, %dx%d; best of %d\n", n, c, c, h, h, REPS);
    const double wino32 = conv_passes(n, c, h, dnnl_f32, dnnl_convolution_winograd, "fp32 Winograd");
    const double direct16 = conv_passes(n, c, h, dnnl_bf16, dnnl_convolution_direct, "bf16 direct");
    conv_passes(n, c, h, dnnl_f32, dnnl_convolution_direct, "fp32 direct");
    const size_t tiles = (size_t)n * (h / 2) * (h / 2), px = (size_t)n * h * h * c;
    uint16_t *x = calloc(px, sizeof *x), *v = calloc(16 * tiles * c, sizeof *v);
    float *m = calloc(16 * tiles * c, sizeof *m), *y = calloc(px, sizeof *y);
    if (!x || !v || !m || !y) {
        fprintf(stderr, "probe: out of memory\n");
        return 1;
    }
    double tin = 1e30, tout = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double a = input_transform(n, c, h, x, v), b = output_transform(n, c, h, m, y);
        tin = a < tin ? a : tin;
        tout = b < tout ? b : tout;
    }
    printf("F(2x2,3x3) transforms: input %.2f ms, output %.2f ms\n", tin, tout);
    const double prod = matmul_bf16(16, (int)tiles, c, c, 0), prod_w = matmul_bf16(16, c, (int)tiles, c, 1);
    /* forward and backward-data: both transforms and a product each; backward-weights: two input-side transforms
     * (x and dy) and its product; the weights' transforms are small and left out. */
    const double wino16 = 2 * (tin + prod + tout) + 2 * tin + prod_w;
    printf("three passes: fp32 Winograd %.1f ms, bf16 direct %.1f ms, bf16 F(2x2,3x3) at least %.1f ms\n", wino32,
           direct16, wino16);
    printf("fp32_winograd_over_bf16_winograd: %.2f\n", wino32 / wino16);
    free(x);
    free(v);
    free(m);
    free(y);
    return 0;
}
