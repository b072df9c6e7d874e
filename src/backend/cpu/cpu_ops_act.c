/* The element-wise activations on the CPU: sigmoid, hard-swish, SiLU, GELU and clip on oneDNN's eltwise primitives,
 * hard-sigmoid (which oneDNN 2.6 lacks) on an own loop. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"
#include "backend/op_check.h"
#include "core/half.h"

typedef struct act_state {
    cpu_dnnl_step fwd, bwd; /* unused for hardsigmoid */
} act_state;

/* Sigmoid and clip take their derivative from y, so forward may overwrite x; hard-swish and SiLU are not
 * invertible from y and need x. */
static bool from_y(vdnn_layer_kind k)
{
    return k != VDNN_LAYER_HARDSWISH && k != VDNN_LAYER_SILU && k != VDNN_LAYER_GELU;
}

static bool own_loop(vdnn_layer_kind k) { return k == VDNN_LAYER_HARDSIGMOID; }

static dnnl_alg_kind_t act_alg(const vdnn_op_desc *d, float *alpha, float *beta)
{
    *alpha = *beta = 0.0f;
    switch (d->kind) {
    case VDNN_LAYER_SIGMOID: return dnnl_eltwise_logistic_use_dst_for_bwd;
    case VDNN_LAYER_HARDSWISH: return dnnl_eltwise_hardswish;
    case VDNN_LAYER_SILU: *alpha = 1.0f; return dnnl_eltwise_swish; /* x * sigmoid(alpha x) */
    case VDNN_LAYER_GELU: return dnnl_eltwise_gelu_tanh;           /* GPT-2's approximation */
    default:
        /* clip_v2 keeps NaN and passes the gradient strictly inside the bounds, as PyTorch's hardtanh. */
        *alpha = d->p.clip_lo;
        *beta = d->p.clip_hi;
        return dnnl_eltwise_clip_v2_use_dst_for_bwd;
    }
}

static vdnn_status act_build(cpu_backend *be, const vdnn_op_desc *d, bool make, act_state *s, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_act(d, err);
    if (st || own_loop(d->kind)) return st;
    const char *name = vdnn_layer_kind_name(d->kind);
    vdnn_shape in = d->in[0];
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    st = vdnn_cpu_dnnl_md_of(&md, 4, dims, d->dtype, dnnl_nchw, name, err);
    if (st) return st;
    float alpha, beta;
    dnnl_alg_kind_t alg = act_alg(d, &alpha, &beta);
    dnnl_eltwise_desc_t ed;
    st = vdnn_cpu_dnnl_check(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_training, alg, &md, alpha, beta),
                             name, err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ed, NULL, make, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, 2, &s->fwd, name,
                                     err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_eltwise_backward_desc_init(&ed, alg, &md, &md, alpha, beta), name, err);
    const int data = from_y(d->kind) ? DNNL_ARG_DST : DNNL_ARG_SRC;
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &ed, &s->fwd, make, (const int[]){data, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC},
                                     3, &s->bwd, name, err);
    return st;
}

static void act_free(act_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status act_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    act_state s = {0};
    vdnn_status st = act_build(be, d, false, &s, err);
    if (!st) {
        const bool y = from_y(d->kind);
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = s.bwd.scratch_bytes,
            .bwd_needs_x = !y,
            .bwd_needs_y = y,
            .inplace_ok = y,
            .bwd_inplace_ok = true, /* element-wise */
        };
    }
    act_free(&s);
    return st;
}

static vdnn_status act_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    act_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "%s: out of memory", vdnn_layer_kind_name(op->d.kind));
    vdnn_status st = act_build(be, &op->d, true, s, err);
    if (st) {
        act_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void act_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    act_free(op->state);
    free(op->state);
    op->state = NULL;
}

/* Value i of a map of the op's type (bf16 maps through scalar conversions: hard-sigmoid is rare). */
static inline float map_get(const float *x, bool bf16, long i)
{
    return bf16 ? vdnn_bf16_to_float(((const uint16_t *)(const void *)x)[i]) : x[i];
}

static inline void map_set(float *y, bool bf16, long i, float v)
{
    if (bf16) ((uint16_t *)(void *)y)[i] = vdnn_bf16_from_float(v);
    else y[i] = v;
}

/* clamp(alpha x + beta, 0, 1), NaN kept (so that --poison shows reads of dead memory). */
static void hardsigmoid_fwd(const vdnn_op_desc *d, float *y, const float *x)
{
    const float alpha = d->p.alpha, beta = d->p.beta;
    const long n = (long)vdnn_shape_count(d->out);
    const bool bf16 = vdnn_cpu_is_bf16(d);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        float v = alpha * map_get(x, bf16, i) + beta;
        map_set(y, bf16, i, v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v);
    }
}

/* The slope is alpha strictly between the bounds, where 0 < y < 1. */
static void hardsigmoid_bwd(const vdnn_op_desc *d, float *dx, const float *y, const float *dy)
{
    const float alpha = d->p.alpha;
    const long n = (long)vdnn_shape_count(d->out);
    const bool bf16 = vdnn_cpu_is_bf16(d);
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) {
        const float v = map_get(y, bf16, i);
        map_set(dx, bf16, i, v > 0.0f && v < 1.0f ? alpha * map_get(dy, bf16, i) : 0.0f);
    }
}

static vdnn_status act_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: NULL %s", name, a->x[0] ? "output" : "input");
    if (own_loop(op->d.kind)) {
        hardsigmoid_fwd(&op->d, a->y, a->x[0]);
        return VDNN_OK;
    }
    act_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, name, err);
}

static vdnn_status act_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const char *name = vdnn_layer_kind_name(op->d.kind);
    if (!a->dx[0]) return VDNN_OK;
    const float *data = from_y(op->d.kind) ? a->y : a->x[0];
    if (!data || !a->dy)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: NULL %s", name,
                         a->dy ? (from_y(op->d.kind) ? "y" : "x") : "dy");
    if (own_loop(op->d.kind)) {
        hardsigmoid_bwd(&op->d, a->dx[0], data, a->dy);
        return VDNN_OK;
    }
    act_state *s = op->state;
    void *ptrs[] = {(void *)data, (void *)a->dy, a->dx[0]};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, a->ws, name, err);
}

const cpu_op_impl vdnn_cpu_op_act = {
    .query = act_query,
    .create = act_create,
    .destroy = act_destroy,
    .forward = act_forward,
    .backward = act_backward,
};
