/* Whole-map bf16 loops of the CPU backend, compiled for AVX-512 BF16 (see cpu_bf16.h). */
#include "backend/cpu/cpu_bf16.h"

#include "backend/cpu/cpu_internal.h"

CPU_BF16_TARGET void vdnn_cpu_bf16_sum(uint16_t *y, const uint16_t *const *x, int k, size_t n)
{
    const ptrdiff_t blocks = (ptrdiff_t)((n + CPU_BF16_BLOCK - 1) / CPU_BF16_BLOCK);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (ptrdiff_t b = 0; b < blocks; b++) {
        float acc[CPU_BF16_BLOCK], t[CPU_BF16_BLOCK];
        const size_t off = (size_t)b * CPU_BF16_BLOCK, len = n - off < CPU_BF16_BLOCK ? n - off : CPU_BF16_BLOCK;
        vdnn_cpu_bf16_load(acc, x[0] + off, len);
        for (int j = 1; j < k; j++) {
            vdnn_cpu_bf16_load(t, x[j] + off, len);
#pragma omp simd
            for (size_t i = 0; i < len; i++) acc[i] += t[i];
        }
        vdnn_cpu_bf16_store(y + off, acc, len);
    }
}

CPU_BF16_TARGET void vdnn_cpu_bf16_round(float *y, const float *x, size_t n)
{
    const ptrdiff_t blocks = (ptrdiff_t)((n + CPU_BF16_BLOCK - 1) / CPU_BF16_BLOCK);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (ptrdiff_t b = 0; b < blocks; b++) {
        uint16_t h[CPU_BF16_BLOCK];
        const size_t off = (size_t)b * CPU_BF16_BLOCK, len = n - off < CPU_BF16_BLOCK ? n - off : CPU_BF16_BLOCK;
        vdnn_cpu_bf16_store(h, x + off, len);
        vdnn_cpu_bf16_load(y + off, h, len);
    }
}
