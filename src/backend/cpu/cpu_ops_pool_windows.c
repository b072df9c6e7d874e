/* MAXPOOL and AVGPOOL on the CPU, whichever windows they have: oneDNN's pooling (cpu_ops_dnnl_pool.c) where its
 * symmetric windows are the layer's, own loops with PyTorch's rules where ceil_mode adds a last window clipped at
 * the border or average pooling leaves padding out of its divisor. Max pooling's loops keep each window's argmax
 * in aux, so backward needs neither x nor y. With bf16 maps the loops read and write bf16 (scalar conversions:
 * these windows are rare), and backward sums each input's gradient in an fp32 copy of dx in its workspace,
 * rounded once at the end as the contract asks. */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/op_check.h"
#include "core/half.h"

/* Value i of a map of the op's type. */
static inline float map_get(const float *x, bool bf16, size_t i)
{
    return bf16 ? vdnn_bf16_to_float(((const uint16_t *)(const void *)x)[i]) : x[i];
}

static inline void map_set(float *y, bool bf16, size_t i, float v)
{
    if (bf16) ((uint16_t *)(void *)y)[i] = vdnn_bf16_from_float(v);
    else y[i] = v;
}

static const cpu_op_impl *pick(const vdnn_op_desc *d);

static vdnn_status win_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const cpu_op_impl *impl = pick(d);
    if (impl != NULL) return impl->query(be, d, info, err);
    vdnn_status st = vdnn_op_check_pool(d, err);
    if (st) return st;
    const bool max = d->kind == VDNN_LAYER_MAXPOOL;
    *info = (vdnn_op_info){.aux_bytes = max ? vdnn_shape_count(d->out) * sizeof(int32_t) : 0,
                           .bwd_ws_bytes = vdnn_cpu_is_bf16(d) ? vdnn_shape_count(d->in[0]) * sizeof(float) : 0};
    return VDNN_OK;
}

/* The op keeps the implementation picked for its description: forward and backward then go straight to it. */
static vdnn_status win_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    const cpu_op_impl *impl = pick(&op->d);
    if (impl == NULL) return VDNN_OK;
    op->impl = impl;
    return impl->create ? impl->create(be, op, err) : VDNN_OK;
}

/* Output o's divisor: the window's size within the padded input, or the input values it covers. */
static int divisor(const vdnn_layer_params *p, int hlo, int hhi, int hsize, int wlo, int whi, int wsize)
{
    return p->exclude_pad ? (hhi - hlo) * (whi - wlo) : hsize * wsize;
}

static vdnn_status win_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const char *name = vdnn_layer_kind_name(d->kind);
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: NULL %s", name, a->x[0] ? "output" : "input");
    const vdnn_layer_params *p = &d->p;
    const vdnn_shape in = d->in[0], out = d->out;
    const bool max = d->kind == VDNN_LAYER_MAXPOOL;
    const size_t ip = (size_t)in.h * in.w, op_ = (size_t)out.h * out.w;
    const long planes = (long)in.n * in.c;
    int32_t *argmax = (int32_t *)a->aux; /* NULL in evaluation */
    const bool bf16 = vdnn_cpu_is_bf16(d);
#pragma omp parallel for if ((size_t)planes * op_ * (size_t)(p->kernel_h * p->kernel_w) > CPU_PAR_MIN)
    for (long pl = 0; pl < planes; pl++) {
        const size_t x0 = (size_t)pl * ip;
        for (int oh = 0; oh < out.h; oh++) {
            int hlo, hhi, hsize, wlo, whi, wsize;
            vdnn_window_span(oh, in.h, p->kernel_h, p->stride_h, p->pad_h, &hlo, &hhi, &hsize);
            for (int ow = 0; ow < out.w; ow++) {
                vdnn_window_span(ow, in.w, p->kernel_w, p->stride_w, p->pad_w, &wlo, &whi, &wsize);
                const size_t o = (size_t)pl * op_ + (size_t)oh * out.w + ow;
                float acc = max ? -INFINITY : 0.0f;
                int best = hlo * in.w + wlo;
                for (int ih = hlo; ih < hhi; ih++)
                    for (int iw = wlo; iw < whi; iw++) {
                        const float v = map_get(a->x[0], bf16, x0 + (size_t)ih * in.w + iw);
                        /* PyTorch's rule: the first maximum wins, a NaN wins over any number. */
                        if (!max) acc += v;
                        else if (v > acc || isnan(v)) acc = v, best = ih * in.w + iw;
                    }
                if (max) {
                    map_set(a->y, bf16, o, acc);
                    if (argmax) argmax[o] = best;
                } else {
                    map_set(a->y, bf16, o, acc / (float)divisor(p, hlo, hhi, hsize, wlo, whi, wsize));
                }
            }
        }
    }
    return VDNN_OK;
}

/* Each window adds its gradient to the inputs it read, windows in output order (the order the CUDA backend's
 * gather adds them in), one plane per thread. */
static vdnn_status win_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const char *name = vdnn_layer_kind_name(d->kind);
    const bool max = d->kind == VDNN_LAYER_MAXPOOL;
    if (!a->dx[0]) return VDNN_OK;
    if (!a->dy || (max && !a->aux))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: NULL %s", name, a->dy ? "argmax (aux)" : "dy");
    const vdnn_layer_params *p = &d->p;
    const vdnn_shape in = d->in[0], out = d->out;
    const size_t ip = (size_t)in.h * in.w, op_ = (size_t)out.h * out.w;
    const long planes = (long)in.n * in.c;
    const int32_t *argmax = (const int32_t *)a->aux;
    const bool bf16 = vdnn_cpu_is_bf16(d);
    if (bf16 && !a->ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: NULL workspace", name);
#pragma omp parallel for if ((size_t)planes * ip > CPU_PAR_MIN)
    for (long pl = 0; pl < planes; pl++) {
        float *dx = (bf16 ? a->ws : a->dx[0]) + (size_t)pl * ip;
        const size_t dy0 = (size_t)pl * op_;
        for (size_t i = 0; i < ip; i++) dx[i] = 0.0f;
        for (int oh = 0; oh < out.h; oh++) {
            int hlo, hhi, hsize, wlo, whi, wsize;
            vdnn_window_span(oh, in.h, p->kernel_h, p->stride_h, p->pad_h, &hlo, &hhi, &hsize);
            for (int ow = 0; ow < out.w; ow++) {
                const size_t o = (size_t)oh * out.w + ow;
                if (max) {
                    dx[argmax[(size_t)pl * op_ + o]] += map_get(a->dy, bf16, dy0 + o);
                    continue;
                }
                vdnn_window_span(ow, in.w, p->kernel_w, p->stride_w, p->pad_w, &wlo, &whi, &wsize);
                const float g = map_get(a->dy, bf16, dy0 + o) / (float)divisor(p, hlo, hhi, hsize, wlo, whi, wsize);
                for (int ih = hlo; ih < hhi; ih++)
                    for (int iw = wlo; iw < whi; iw++) dx[(size_t)ih * in.w + iw] += g;
            }
        }
        if (bf16)
            for (size_t i = 0; i < ip; i++) map_set(a->dx[0], true, (size_t)pl * ip + i, dx[i]);
    }
    return VDNN_OK;
}

/* NULL: the own loops (this file's functions); else oneDNN's pooling. */
static const cpu_op_impl *pick(const vdnn_op_desc *d) { return vdnn_pool_own_windows(d) ? NULL : &vdnn_cpu_op_pool; }

const cpu_op_impl vdnn_cpu_op_pooling = {
    .query = win_query,
    .create = win_create,
    .forward = win_forward,
    .backward = win_backward,
};
