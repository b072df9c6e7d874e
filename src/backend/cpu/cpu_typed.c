/* The CPU backend's helpers over maps of any type: convert between types and accumulate, in blocks of floats. */
#include <string.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/op_check.h"
#include "core/half.h"

/* bf16 runs without AVX-512 BF16, as core/half.h's scalar conversions (bit for bit) in loops without branches, so
 * that they vectorize on any x86-64: the bf16 ops that run on every CPU (cpu_ops_widen.c) widen and round whole
 * maps through them. Integer operations only, so the 16- and 8-wide clones the CPU picks at load time give the
 * same bits as the baseline's 4-wide loop. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define BF16_PORTABLE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BF16_PORTABLE_CLONES
#endif

BF16_PORTABLE_CLONES static void bf16_load_portable(float *dst, const uint16_t *h, size_t len)
{
#pragma omp simd
    for (size_t i = 0; i < len; i++) {
        const uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

BF16_PORTABLE_CLONES static void bf16_store_portable(uint16_t *h, const float *src, size_t len)
{
#pragma omp simd
    for (size_t i = 0; i < len; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        const uint32_t nan = (u >> 16) | 0x0040u, rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        h[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}

void vdnn_cpu_bf16_widen_run(float *dst, const uint16_t *src, size_t n) { bf16_load_portable(dst, src, n); }
void vdnn_cpu_bf16_round_run(uint16_t *dst, const float *src, size_t n) { bf16_store_portable(dst, src, n); }

/* src[off, off+len) of type t as floats; fast: AVX-512 BF16 is there. */
static void load_block(float *dst, const void *src, vdnn_dtype t, size_t off, size_t len, bool fast)
{
    const uint16_t *h = (const uint16_t *)src + off;
    if (t == VDNN_DTYPE_F32) memcpy(dst, (const float *)src + off, len * sizeof *dst);
    else if (t == VDNN_DTYPE_BF16 && fast) vdnn_cpu_bf16_load(dst, h, len);
    else if (t == VDNN_DTYPE_BF16) bf16_load_portable(dst, h, len);
    else
        for (size_t i = 0; i < len; i++) dst[i] = vdnn_f16_to_float(h[i]);
}

static void store_block(void *dst, vdnn_dtype t, size_t off, const float *src, size_t len, bool fast)
{
    uint16_t *h = (uint16_t *)dst + off;
    if (t == VDNN_DTYPE_F32) memcpy((float *)dst + off, src, len * sizeof *src);
    else if (t == VDNN_DTYPE_BF16 && fast) vdnn_cpu_bf16_store(h, src, len);
    else if (t == VDNN_DTYPE_BF16) bf16_store_portable(h, src, len);
    else
        for (size_t i = 0; i < len; i++) h[i] = vdnn_f16_from_float(src[i]);
}

vdnn_status vdnn_cpu_convert(vdnn_backend_t *be, void *dst, vdnn_dtype dst_type, const void *src, vdnn_dtype src_type,
                             size_t n, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_dtypes(dst_type, src_type, "convert", err);
    if (st) return st;
    if (n && (!dst || !src)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "convert: NULL pointer for %zu values", n);
    if (dst_type == src_type) {
        if (dst != src) memmove(dst, src, n * vdnn_dtype_size(dst_type));
        return VDNN_OK;
    }
    const bool fast = ((const cpu_backend *)be)->bf16;
    const ptrdiff_t blocks = (ptrdiff_t)((n + CPU_BF16_BLOCK - 1) / CPU_BF16_BLOCK);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (ptrdiff_t b = 0; b < blocks; b++) {
        float t[CPU_BF16_BLOCK];
        const size_t off = (size_t)b * CPU_BF16_BLOCK, len = n - off < CPU_BF16_BLOCK ? n - off : CPU_BF16_BLOCK;
        /* Straight into or out of fp32 maps; between two 16-bit types through floats. */
        if (dst_type == VDNN_DTYPE_F32) load_block((float *)dst + off, src, src_type, off, len, fast);
        else if (src_type == VDNN_DTYPE_F32) store_block(dst, dst_type, off, (const float *)src + off, len, fast);
        else {
            load_block(t, src, src_type, off, len, fast);
            store_block(dst, dst_type, off, t, len, fast);
        }
    }
    return VDNN_OK;
}

vdnn_status vdnn_cpu_accumulate_typed(vdnn_backend_t *be, vdnn_dtype type, void *dst, const void *src, size_t n,
                                      vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_dtypes(type, type, "accumulate_typed", err);
    if (st) return st;
    if (n && (!dst || !src)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "accumulate_typed: NULL pointer for %zu values", n);
    const bool fast = ((const cpu_backend *)be)->bf16;
    if (fast && type == VDNN_DTYPE_BF16) {
        const uint16_t *x[2] = {dst, src};
        vdnn_cpu_bf16_sum(dst, x, 2, n);
        return VDNN_OK;
    }
    const ptrdiff_t blocks = (ptrdiff_t)((n + CPU_BF16_BLOCK - 1) / CPU_BF16_BLOCK);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (ptrdiff_t b = 0; b < blocks; b++) {
        float a[CPU_BF16_BLOCK], c[CPU_BF16_BLOCK];
        const size_t off = (size_t)b * CPU_BF16_BLOCK, len = n - off < CPU_BF16_BLOCK ? n - off : CPU_BF16_BLOCK;
        load_block(a, dst, type, off, len, fast);
        load_block(c, src, type, off, len, fast);
        for (size_t i = 0; i < len; i++) a[i] += c[i];
        store_block(dst, type, off, a, len, fast);
    }
    return VDNN_OK;
}
