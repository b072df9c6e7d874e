/* Runs of bf16 values to and from float with AVX-512 BF16, for the CPU's own bf16 ops: they load a block of a map
 * into floats, compute in fp32 and store it rounded. Only called where the backend found AVX-512 BF16; elsewhere
 * the ops that run bf16 anyway take portable loops (cpu_typed.c, scalar conversions). Inline, so that the loops of bf16 functions compiled with
 * CPU_BF16_TARGET take them in; the tail goes through masked loads and stores, so every value rounds the same way. */
#ifndef VDNN_BACKEND_CPU_BF16_H
#define VDNN_BACKEND_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

#include <immintrin.h>

/* For functions that only bf16 ops call: compiled for the AVX-512 that every CPU running them has (plain C vectorises
 * to SSE2 only, the build targeting any x86-64). Functions they call inline into them with these options too. */
#define CPU_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* Values a block of an own bf16 op holds on the stack: 4 KiB of floats, well inside L1. */
#define CPU_BF16_BLOCK 1024

/* dst[i] = src[i] widened: exact. */
CPU_BF16_TARGET static inline void vdnn_cpu_bf16_load(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
        _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
}

/* dst[i] = src[i] rounded to nearest even (vcvtneps2bf16, as oneDNN's own kernels round). */
CPU_BF16_TARGET static inline void vdnn_cpu_bf16_store(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)h);
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)h);
    }
}

/* y = x[0] + ... + x[k-1] over n values, added in fp32 in input order and rounded once; y may be one of the x. In
 * parallel over blocks (cpu_bf16.c). */
void vdnn_cpu_bf16_sum(uint16_t *y, const uint16_t *const *x, int k, size_t n);

/* y = x rounded to bf16 values, kept as floats (for fp32 kernels that must see the weights a bf16 op uses). In
 * parallel over blocks; y may be x. */
void vdnn_cpu_bf16_round(float *y, const float *x, size_t n);

#endif
