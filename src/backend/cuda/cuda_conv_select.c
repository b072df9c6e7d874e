/* Which of cuDNN's convolution candidates a layer may run, and the three variants planners are offered. */
#include "backend/cuda/cuda_conv_select.h"

bool vdnn_conv_usable(const vdnn_conv_cand *c, const vdnn_conv_rules *r, vdnn_conv_math *math)
{
    if (!c->ok) return false;
    if (r->deterministic && !c->deterministic) return false;
    if (c->ws > r->ws_limit) return false;
    vdnn_conv_math m = c->math;
    if (m == VDNN_MATH_CONVERSION) return false;
    if (!r->tf32) {
        if (m == VDNN_MATH_TENSOR_OP) return false;
        m = VDNN_MATH_FMA;
    }
    if (math) *math = m;
    return true;
}

static int pick_among(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, vdnn_conv_variant v, size_t lean_cap)
{
    int least = -1;
    for (int i = 0; i < n; i++) {
        if (!vdnn_conv_usable(&c[i], r, NULL)) continue;
        if (v == VDNN_CONV_FASTEST || (v == VDNN_CONV_LEAN && c[i].ws <= lean_cap)) return i;
        if (least < 0 || c[i].ws < c[least].ws) least = i;
    }
    /* Lean with nothing under its cap falls back to the least workspace. */
    return least;
}

static int first_within(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, size_t ws_max)
{
    for (int i = 0; i < n; i++)
        if (vdnn_conv_usable(&c[i], r, NULL) && c[i].ws <= ws_max) return i;
    return -1;
}

/* The rules with reproducibility demanded, where they prefer it. */
static bool strict_rules(const vdnn_conv_rules *r, vdnn_conv_rules *strict)
{
    if (!r->prefer_reproducible || r->deterministic) return false;
    *strict = *r;
    strict->deterministic = true;
    return true;
}

int vdnn_conv_pick(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, vdnn_conv_variant v, size_t lean_cap)
{
    vdnn_conv_rules strict;
    if (strict_rules(r, &strict)) {
        const int i = pick_among(c, n, &strict, v, lean_cap);
        if (i >= 0) return i;
    }
    return pick_among(c, n, r, v, lean_cap);
}

int vdnn_conv_pick_within(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, size_t ws_max)
{
    vdnn_conv_rules strict;
    if (strict_rules(r, &strict)) {
        const int i = first_within(c, n, &strict, ws_max);
        if (i >= 0) return i;
    }
    return first_within(c, n, r, ws_max);
}
