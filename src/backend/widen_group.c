/* The samples a widened 16-bit op takes at a time (widen_group.h). */
#include "backend/widen_group.h"

int vdnn_widen_group_samples(int n, size_t each_sample, size_t cap, size_t param_bytes, bool fixed_cap)
{
    int k = 1;
    for (int g = 2; g <= n; g++)
        if (n % g == 0 && (size_t)g * each_sample <= cap) k = g;
    return !fixed_cap && param_bytes >= (size_t)(n - k) * each_sample ? n : k;
}
