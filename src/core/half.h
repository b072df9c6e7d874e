/* Scalar conversions between float and the 16-bit types (bf16, IEEE fp16), bit-exact and portable: for code off the
 * hot paths (softmax rows, dropout, tests); the CPU backend converts long runs with AVX-512 BF16 instead. */
#ifndef VDNN_CORE_HALF_H
#define VDNN_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t vdnn_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float vdnn_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float vdnn_bf16_to_float(uint16_t h) { return vdnn_bits_float((uint32_t)h << 16); }

/* Round to nearest, ties to even, as __float2bfloat16_rn and PyTorch do; NaN stays a quiet NaN of the same sign
 * rather than rounding into infinity. Subnormal floats round like the rest (vcvtneps2bf16, which the CPU backend and
 * oneDNN use, flushes them to zero instead: below 1.2e-38, where training values never are). */
static inline uint16_t vdnn_bf16_from_float(float f)
{
    uint32_t u = vdnn_float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float vdnn_f16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return vdnn_bits_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (!man) return vdnn_bits_float(sign);
        /* Subnormal: scale the integer significand by 2^-24, which is exact in float. */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return vdnn_bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round to nearest, ties to even; values beyond the largest half round to infinity, NaN stays NaN. */
static inline uint16_t vdnn_f16_from_float(float f)
{
    const uint32_t u = vdnn_float_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x47800000u) { /* 65536 and up, or infinity: beyond the rounding range of the largest half */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a < 0x38800000u) { /* below the smallest normal half (2^-14): a subnormal or zero */
        if (a < 0x33000000u) return sign; /* under half the smallest subnormal (2^-25): zero */
        const uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e; /* 14..24: bits of man dropped to leave units of 2^-24 */
        uint32_t q = man >> shift;
        const uint32_t rest = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* Normal: rebias the exponent, round the 13 dropped significand bits (a carry may reach the exponent, and
     * from 65520 up into infinity, which is right). */
    uint32_t v = ((a - 0x38000000u) >> 13);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (v & 1u))) v++;
    return (uint16_t)(sign | v);
}

#endif
