/* Layout rules of the CUDA backend: reduction splits, batch chunks and sub-buffer alignment (see cuda_layout.h). */
#include "backend/cuda/cuda_layout.h"

int vdnn_cuda_sum_splits(int n, int c, size_t hw, int sums, size_t scratch_bytes)
{
    if (n < 1 || c < 1 || sums < 1) return 1;
    const size_t cap = scratch_bytes / (sizeof(double) * (size_t)sums * (size_t)c);
    if (cap < 1) return 0;
    /* Small planes split by rows (64 per block); large ones by runs of 16384 values per block. */
    size_t want = hw < 32 ? ((size_t)n + 63) / 64 : ((size_t)n * hw + 16383) / 16384;
    if (want < 1) want = 1;
    if (want > 1024) want = 1024;
    if (want > cap) want = cap;
    return (int)want;
}

size_t vdnn_cuda_align(size_t bytes) { return (bytes + VDNN_CUDA_ALIGN - 1) / VDNN_CUDA_ALIGN * VDNN_CUDA_ALIGN; }

bool vdnn_cuda_chunk_plan(size_t image_values, int n, size_t limit, int *per, int *count, int *last)
{
    if (n < 1 || image_values < 1 || image_values > limit) return false;
    size_t fit = limit / image_values;
    *per = fit >= (size_t)n ? n : (int)fit;
    *count = (n + *per - 1) / *per;
    *last = n - (*count - 1) * *per;
    return true;
}
