/* The CPU backend's op entries: the table from layer kind to implementation, checks common to all ops, oneDNN status mapping. */
#include "backend/cpu/cpu_internal.h"

#include <stdlib.h>

#include <oneapi/dnnl/dnnl_debug.h>

static const cpu_op_impl *const op_table[VDNN_LAYER_KIND_COUNT] = {
    [VDNN_LAYER_INPUT] = NULL, /* the data has no op: the executor uploads it */
    [VDNN_LAYER_CONV] = &vdnn_cpu_op_conv,
    [VDNN_LAYER_MAXPOOL] = &vdnn_cpu_op_pooling,
    [VDNN_LAYER_AVGPOOL] = &vdnn_cpu_op_pooling,
    [VDNN_LAYER_RELU] = &vdnn_cpu_op_relu,
    [VDNN_LAYER_LRN] = &vdnn_cpu_op_lrn,
    [VDNN_LAYER_BATCHNORM] = &vdnn_cpu_op_batchnorm,
    [VDNN_LAYER_DROPOUT] = &vdnn_cpu_op_dropout,
    [VDNN_LAYER_FC] = &vdnn_cpu_op_fc,
    [VDNN_LAYER_CONCAT] = &vdnn_cpu_op_concat,
    [VDNN_LAYER_FEAT_CAT] = &vdnn_cpu_op_concat,
    [VDNN_LAYER_ADD] = &vdnn_cpu_op_add,
    [VDNN_LAYER_GAP] = &vdnn_cpu_op_gap,
    [VDNN_LAYER_FLATTEN] = &vdnn_cpu_op_flatten,
    [VDNN_LAYER_SOFTMAX_XENT] = &vdnn_cpu_op_softmax_xent,
    [VDNN_LAYER_SIGMOID] = &vdnn_cpu_op_act,
    [VDNN_LAYER_HARDSIGMOID] = &vdnn_cpu_op_act,
    [VDNN_LAYER_HARDSWISH] = &vdnn_cpu_op_act,
    [VDNN_LAYER_SILU] = &vdnn_cpu_op_act,
    [VDNN_LAYER_CLIP] = &vdnn_cpu_op_act,
    [VDNN_LAYER_CHANNEL_MUL] = &vdnn_cpu_op_channel_mul,
    [VDNN_LAYER_EMBED] = &vdnn_cpu_op_embed,
    [VDNN_LAYER_POS_EMBED] = &vdnn_cpu_op_pos_embed,
    [VDNN_LAYER_LAYERNORM] = &vdnn_cpu_op_layernorm,
    [VDNN_LAYER_LINEAR] = &vdnn_cpu_op_linear,
    [VDNN_LAYER_ATTN_PROBS] = &vdnn_cpu_op_attn_probs,
    [VDNN_LAYER_ATTN_MIX] = &vdnn_cpu_op_attn_mix,
    [VDNN_LAYER_GELU] = &vdnn_cpu_op_act,
    [VDNN_LAYER_LSTM] = &vdnn_cpu_op_lstm,
    [VDNN_LAYER_SEQ_CAT] = &vdnn_cpu_op_seq_cat,
    [VDNN_LAYER_ATTN] = &vdnn_cpu_op_attn_fused,
};

/* Kinds with an implementation of their own for bf16 maps (instead of op_table's, widened). */
static const cpu_op_impl *const bf16_table[VDNN_LAYER_KIND_COUNT] = {
    [VDNN_LAYER_ATTN_PROBS] = &vdnn_cpu_op_attn_probs_bf16,
    [VDNN_LAYER_ATTN_MIX] = &vdnn_cpu_op_attn_mix_bf16,
};

vdnn_status vdnn_cpu_dnnl_check(dnnl_status_t s, const char *what, vdnn_error *err)
{
    if (s == dnnl_success) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_BACKEND, "oneDNN: %s failed: %s", what, dnnl_status2str(s));
}

/* Ops that run bf16 maps without AVX-512 BF16, as fast as fp32: the widened ones (cpu_ops_widen.c), those of
 * bf16_table (attention, cpu_ops_attn_bf16.c) and the own loops that read and write bf16 one value at a time or copy it (the rest of a sequence model: add, dropout, the
 * loss, the head groups' and the LSTM chunks' concatenations). Others
 * run bf16 on oneDNN's primitives, which would emulate it slowly without AVX-512 BF16, so they are refused there. */
static bool bf16_anywhere(const vdnn_op_desc *d)
{
    if (vdnn_cpu_widened(d) || bf16_table[d->kind]) return true;
    switch (d->kind) {
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_SEQ_CAT:
    case VDNN_LAYER_DROPOUT:
    case VDNN_LAYER_SOFTMAX_XENT:
    case VDNN_LAYER_FLATTEN: return true;
    default: return false;
    }
}

/* Where AVX-512 BF16 is there, linear runs its bf16 maps on oneDNN's bf16 inner product, layer normalization and
 * GELU on oneDNN's bf16 primitives (fp32 arithmetic inside, as widened); elsewhere they are widened. */
static bool native_bf16(const cpu_backend *be, const vdnn_op_desc *d)
{
    if (!be->bf16 || d->dtype != VDNN_DTYPE_BF16) return false;
    return d->kind == VDNN_LAYER_LINEAR || d->kind == VDNN_LAYER_LAYERNORM || d->kind == VDNN_LAYER_GELU;
}

static bool widened(const cpu_backend *be, const vdnn_op_desc *d) { return vdnn_cpu_widened(d) && !native_bf16(be, d); }

static bool shape_ok(vdnn_shape s) { return s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0; }

static vdnn_status lookup(const cpu_backend *be, const vdnn_op_desc *d, const cpu_op_impl **impl, vdnn_error *err)
{
    if (!d) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu op: NULL op description");
    if ((int)d->kind < 0 || d->kind >= VDNN_LAYER_KIND_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu op: unknown layer kind %d", (int)d->kind);
    *impl = native_bf16(be, d) && d->kind == VDNN_LAYER_LINEAR ? &vdnn_cpu_op_linear_bf16
            : be->bf16 && d->dtype == VDNN_DTYPE_BF16 && d->kind == VDNN_LAYER_LSTM ? &vdnn_cpu_op_lstm_mm16
            : d->dtype == VDNN_DTYPE_BF16 && bf16_table[d->kind] ? bf16_table[d->kind]
                                                                 : op_table[d->kind];
    if (!*impl || !(*impl)->query)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu op: layer kind %d (%s) has no op", (int)d->kind,
                         d->kind == VDNN_LAYER_INPUT ? "input" : "not implemented");
    if (d->n_inputs < 1 || d->n_inputs > VDNN_MAX_INPUTS)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "cpu op: %d inputs (must be 1..%d)", d->n_inputs, VDNN_MAX_INPUTS);
    for (int i = 0; i < d->n_inputs; i++)
        if (!shape_ok(d->in[i]))
            return vdnn_fail(err, VDNN_ERR_SHAPE, "cpu op: input %d has shape %dx%dx%dx%d", i, d->in[i].n, d->in[i].c,
                             d->in[i].h, d->in[i].w);
    if (!shape_ok(d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "cpu op: output has shape %dx%dx%dx%d", d->out.n, d->out.c, d->out.h,
                         d->out.w);
    /* The ONNX-brought ops have bf16 loops here. */
    if (d->dtype == VDNN_DTYPE_BF16 && bf16_anywhere(d)) return VDNN_OK;
    return vdnn_cpu_check_dtype(be, d->dtype, vdnn_layer_kind_name(d->kind), err);
}

vdnn_status vdnn_cpu_op_query(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const cpu_op_impl *impl = NULL;
    vdnn_status st = lookup((const cpu_backend *)be, d, &impl, err);
    if (st) return st;
    if (!info) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_query: NULL info");
    *info = (vdnn_op_info){0};
    if (d->algo != 0 && !impl->algos)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cpu op: algorithm %d asked of an op with one algorithm", d->algo);
    if (widened((const cpu_backend *)be, d))
        return vdnn_cpu_widen_query((cpu_backend *)be, impl, d, info, NULL, NULL, err);
    return impl->query((cpu_backend *)be, d, info, err);
}

vdnn_status vdnn_cpu_op_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err)
{
    const cpu_op_impl *impl = NULL;
    vdnn_status st = lookup((const cpu_backend *)be, d, &impl, err);
    if (st) return st;
    if (!algos || !n) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_algos: NULL output");
    if (!impl->algos) return vdnn_op_algos_single(be, d, algos, n, err);
    return impl->algos((cpu_backend *)be, d, algos, n, err);
}

vdnn_status vdnn_cpu_op_create(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_create: NULL output pointer");
    *out = NULL;
    const cpu_op_impl *impl = NULL;
    vdnn_status st = lookup((const cpu_backend *)be, d, &impl, err);
    if (st) return st;
    vdnn_op *op = calloc(1, sizeof *op);
    if (!op) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "op_create: out of memory");
    op->d = *d;
    op->impl = impl;
    op->widened = widened((const cpu_backend *)be, d);
    if (op->widened) {
        /* impl makes and runs the fp32 op (op->d, op->info), after the checks of the op as asked. */
        op->maps = *d;
        vdnn_op_info outer;
        st = vdnn_cpu_widen_query((cpu_backend *)be, impl, d, &outer, &op->d, &op->info, err);
    } else {
        st = vdnn_cpu_op_query(be, &op->d, &op->info, err);
    }
    if (!st && impl->create) st = impl->create((cpu_backend *)be, op, err);
    if (st) {
        free(op);
        return st;
    }
    *out = op;
    return VDNN_OK;
}

void vdnn_cpu_op_destroy(vdnn_backend_t *be, vdnn_op *op)
{
    if (!op) return;
    if (op->impl->destroy) op->impl->destroy((cpu_backend *)be, op);
    free(op);
}

vdnn_status vdnn_cpu_op_forward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!op || !a) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_forward: NULL %s", op ? "arguments" : "op");
    if (op->widened) return vdnn_cpu_widen_forward((cpu_backend *)be, op, a, err);
    return op->impl->forward((cpu_backend *)be, op, a, err);
}

vdnn_status vdnn_cpu_op_backward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!op || !a) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_backward: NULL %s", op ? "arguments" : "op");
    if (op->widened) return vdnn_cpu_widen_backward((cpu_backend *)be, op, a, err);
    return op->impl->backward((cpu_backend *)be, op, a, err);
}
