/* CHANNEL_MUL on the CPU: y[n,c,:] = x[n,c,:] * s[n,c] (squeeze-and-excitation's scaling), an own loop per plane;
 * bf16 maps (x, s, y and their gradients) through scalar conversions, products and sums in fp32. */
#include "backend/cpu/cpu_internal.h"
#include "backend/op_check.h"
#include "core/half.h"

static inline float map_get(const float *x, bool bf16, size_t i)
{
    return bf16 ? vdnn_bf16_to_float(((const uint16_t *)(const void *)x)[i]) : x[i];
}

static inline void map_set(float *y, bool bf16, size_t i, float v)
{
    if (bf16) ((uint16_t *)(void *)y)[i] = vdnn_bf16_from_float(v);
    else y[i] = v;
}

static vdnn_status chmul_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_channel_mul(d, err);
    /* Backward reads both inputs (dx = dy * s, ds = sum dy * x), so y may not overwrite x. Its dx is written
     * after ds has read dy, so dx may overwrite dy. */
    if (!st) *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_inplace_ok = true};
    return st;
}

static vdnn_status chmul_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->x[0] || !a->x[1] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "channel_mul forward: NULL %s", !a->y ? "output" : "input");
    const vdnn_shape s = op->d.in[0];
    const size_t hw = (size_t)s.h * (size_t)s.w;
    const long planes = (long)s.n * s.c;
    const float *x = a->x[0], *scale = a->x[1];
    float *y = a->y;
    const bool bf16 = vdnn_cpu_is_bf16(&op->d);
#pragma omp parallel for if ((size_t)planes * hw > CPU_PAR_MIN)
    for (long p = 0; p < planes; p++) {
        const float k = map_get(scale, bf16, (size_t)p);
        for (size_t i = 0; i < hw; i++) map_set(y, bf16, (size_t)p * hw + i, map_get(x, bf16, (size_t)p * hw + i) * k);
    }
    return VDNN_OK;
}

static vdnn_status chmul_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0] && !a->dx[1]) return VDNN_OK;
    if (!a->dy || !a->x[0] || !a->x[1])
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "channel_mul backward: NULL %s", !a->dy ? "dy" : "x");
    const vdnn_shape s = op->d.in[0];
    const size_t hw = (size_t)s.h * (size_t)s.w;
    const long planes = (long)s.n * s.c;
    const float *x = a->x[0], *scale = a->x[1], *dy = a->dy;
    float *dx = a->dx[0], *ds = a->dx[1];
    const bool bf16 = vdnn_cpu_is_bf16(&op->d);
#pragma omp parallel for if ((size_t)planes * hw > CPU_PAR_MIN)
    for (long p = 0; p < planes; p++) {
        const size_t p0 = (size_t)p * hw;
        if (ds) {
            double sum = 0.0;
            for (size_t i = 0; i < hw; i++) sum += (double)map_get(dy, bf16, p0 + i) * (double)map_get(x, bf16, p0 + i);
            map_set(ds, bf16, (size_t)p, (float)sum);
        }
        if (dx) {
            const float k = map_get(scale, bf16, (size_t)p);
            for (size_t i = 0; i < hw; i++) map_set(dx, bf16, p0 + i, map_get(dy, bf16, p0 + i) * k);
        }
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_channel_mul = {
    .query = chmul_query,
    .forward = chmul_forward,
    .backward = chmul_backward,
};
