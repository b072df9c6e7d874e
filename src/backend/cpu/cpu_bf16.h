/* Runs of bf16 values to and from float with AVX-512 BF16, for the CPU's own bf16 ops: they load a block of a map
 * into floats, compute in fp32 and store it rounded. Only called where the backend found AVX-512 BF16 (it refuses
 * bf16 ops elsewhere), so no other path is needed. */
#ifndef VDNN_BACKEND_CPU_BF16_H
#define VDNN_BACKEND_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Values a block of an own bf16 op holds on the stack: 4 KiB of floats, well inside L1. */
#define CPU_BF16_BLOCK 1024

/* dst[i] = src[i] widened: exact. */
void vdnn_cpu_bf16_load(float *dst, const uint16_t *src, size_t n);
/* dst[i] = src[i] rounded to nearest even (vcvtneps2bf16, as oneDNN's own kernels round). */
void vdnn_cpu_bf16_store(uint16_t *dst, const float *src, size_t n);

#endif
