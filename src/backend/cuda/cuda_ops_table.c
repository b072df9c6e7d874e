/* The CUDA backend's op entries: the table from layer kind to implementation, the checks common to all ops, and
 * the same ops' candidates described without a device (for profiles written where there is no GPU). */
#include "backend/cuda/cuda_internal.h"
#include "backend/op_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cuda_op_impl *const op_table[VDNN_LAYER_KIND_COUNT] = {
    [VDNN_LAYER_INPUT] = NULL, /* the data has no op: the executor uploads it */
    [VDNN_LAYER_CONV] = &vdnn_cuda_op_conv,
    [VDNN_LAYER_MAXPOOL] = &vdnn_cuda_op_pooling,
    [VDNN_LAYER_AVGPOOL] = &vdnn_cuda_op_pooling,
    [VDNN_LAYER_RELU] = &vdnn_cuda_op_relu,
    [VDNN_LAYER_LRN] = &vdnn_cuda_op_lrn,
    [VDNN_LAYER_BATCHNORM] = &vdnn_cuda_op_batchnorm,
    [VDNN_LAYER_DROPOUT] = &vdnn_cuda_op_dropout,
    [VDNN_LAYER_FC] = &vdnn_cuda_op_fc,
    [VDNN_LAYER_CONCAT] = &vdnn_cuda_op_concat,
    [VDNN_LAYER_FEAT_CAT] = &vdnn_cuda_op_concat,
    [VDNN_LAYER_ADD] = &vdnn_cuda_op_add,
    [VDNN_LAYER_GAP] = &vdnn_cuda_op_gap,
    [VDNN_LAYER_FLATTEN] = &vdnn_cuda_op_flatten,
    [VDNN_LAYER_SOFTMAX_XENT] = &vdnn_cuda_op_softmax_xent,
    [VDNN_LAYER_SIGMOID] = &vdnn_cuda_op_act,
    [VDNN_LAYER_HARDSIGMOID] = &vdnn_cuda_op_act,
    [VDNN_LAYER_HARDSWISH] = &vdnn_cuda_op_act,
    [VDNN_LAYER_SILU] = &vdnn_cuda_op_act,
    [VDNN_LAYER_CLIP] = &vdnn_cuda_op_act,
    [VDNN_LAYER_CHANNEL_MUL] = &vdnn_cuda_op_channel_mul,
    [VDNN_LAYER_EMBED] = &vdnn_cuda_op_embed,
    [VDNN_LAYER_POS_EMBED] = &vdnn_cuda_op_pos_embed,
    [VDNN_LAYER_LAYERNORM] = &vdnn_cuda_op_layernorm,
    [VDNN_LAYER_LINEAR] = &vdnn_cuda_op_linear,
    [VDNN_LAYER_ATTN_PROBS] = &vdnn_cuda_op_attn_probs,
    [VDNN_LAYER_ATTN_MIX] = &vdnn_cuda_op_attn_mix,
    [VDNN_LAYER_ATTN] = &vdnn_cuda_op_attn_fused,
    [VDNN_LAYER_GELU] = &vdnn_cuda_op_act,
    [VDNN_LAYER_LSTM] = &vdnn_cuda_op_lstm,
    [VDNN_LAYER_SEQ_CAT] = &vdnn_cuda_op_seq_cat,
};

_Static_assert((int)VDNN_CUDA_F32 == (int)VDNN_DTYPE_F32 && (int)VDNN_CUDA_BF16 == (int)VDNN_DTYPE_BF16 &&
                   (int)VDNN_CUDA_F16 == (int)VDNN_DTYPE_F16,
               "the kernels' value types are numbered as vdnn_dtype");

static bool shape_ok(vdnn_shape s) { return s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0; }

/* bf16 and fp16 maps, with fp32 accumulation, run where cuDNN has kernels for them: bf16 from Ampere (8.0) on. */
static vdnn_status check_dtype(const cuda_backend *b, const vdnn_op_desc *d, vdnn_error *err)
{
    const char *kind = vdnn_layer_kind_name(d->kind);
    char what[48];
    snprintf(what, sizeof what, "cuda %s", kind);
    vdnn_status st = vdnn_op_check_dtypes(d->dtype, d->dtype, what, err);
    if (st) return st;
    if (d->dtype == VDNN_DTYPE_BF16 && b->cc_major < 8)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda %s: bf16 needs compute capability 8.0 or newer; %s is %d.%d",
                         kind, b->device_name, b->cc_major, b->cc_minor);
    return VDNN_OK;
}

static vdnn_status lookup(const cuda_backend *b, const vdnn_op_desc *d, const cuda_op_impl **impl, vdnn_error *err)
{
    if (!d) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda op: NULL op description");
    if ((int)d->kind < 0 || d->kind >= VDNN_LAYER_KIND_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda op: unknown layer kind %d", (int)d->kind);
    *impl = op_table[d->kind];
    /* A sequence layer added to the CPU before its CUDA port is refused as such, naming it (every one has a port
     * now; the LSTM ops were the last). */
    if (!*impl && d->kind >= VDNN_LAYER_EMBED)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda op: %s has no CUDA implementation yet (run it on the CPU)",
                         vdnn_layer_kind_name(d->kind));
    if (!*impl || !(*impl)->query)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda op: layer kind %d (%s) has no op", (int)d->kind,
                         d->kind == VDNN_LAYER_INPUT ? "input" : "not implemented");
    if (d->n_inputs < 1 || d->n_inputs > VDNN_MAX_INPUTS)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "cuda op: %d inputs (must be 1..%d)", d->n_inputs, VDNN_MAX_INPUTS);
    for (int i = 0; i < d->n_inputs; i++)
        if (!shape_ok(d->in[i]))
            return vdnn_fail(err, VDNN_ERR_SHAPE, "cuda op: input %d has shape %dx%dx%dx%d", i, d->in[i].n, d->in[i].c,
                             d->in[i].h, d->in[i].w);
    if (!shape_ok(d->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "cuda op: output has shape %dx%dx%dx%d", d->out.n, d->out.c, d->out.h,
                         d->out.w);
    vdnn_status st = check_dtype(b, d, err);
    if (st) return st;
    /* cuDNN's legacy tensors and cuBLAS take int sizes and strides. Convolution, pooling and LRN run larger batches
     * in chunks (each checks that one image fits); ReLU, dropout, add, concat, global average pooling, flatten, the
     * activations, channel scaling and pooling's own windows are own kernels with 64-bit indices. The rest take
     * the whole tensor in one call. */
    switch (d->kind) {
    case VDNN_LAYER_CONV:
    case VDNN_LAYER_MAXPOOL:
    case VDNN_LAYER_AVGPOOL:
    case VDNN_LAYER_LRN:
    case VDNN_LAYER_RELU:
    case VDNN_LAYER_DROPOUT:
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_GAP:
    case VDNN_LAYER_FLATTEN:
    case VDNN_LAYER_SIGMOID:
    case VDNN_LAYER_HARDSIGMOID:
    case VDNN_LAYER_HARDSWISH:
    case VDNN_LAYER_SILU:
    case VDNN_LAYER_CLIP:
    case VDNN_LAYER_CHANNEL_MUL: return VDNN_OK;
    default: break;
    }
    const char *kind = vdnn_layer_kind_name(d->kind);
    if (vdnn_shape_count(d->out) > VDNN_CUDA_MAX_TENSOR_VALUES)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda %s: output of %zu values (cuDNN and cuBLAS take at most %zu per "
                         "tensor; a smaller batch or --micro-batches)",
                         kind, vdnn_shape_count(d->out), VDNN_CUDA_MAX_TENSOR_VALUES);
    for (int i = 0; i < d->n_inputs; i++)
        if (vdnn_shape_count(d->in[i]) > VDNN_CUDA_MAX_TENSOR_VALUES)
            return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda %s: input %d of %zu values (cuDNN and cuBLAS take at most "
                             "%zu per tensor; a smaller batch or --micro-batches)",
                             kind, i, vdnn_shape_count(d->in[i]), VDNN_CUDA_MAX_TENSOR_VALUES);
    return VDNN_OK;
}

vdnn_status vdnn_cuda_op_query(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    const cuda_op_impl *impl;
    vdnn_status st = lookup((const cuda_backend *)be, d, &impl, err);
    if (st) return st;
    if (!info) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_query: NULL info");
    *info = (vdnn_op_info){0};
    if (d->algo != 0 && !impl->algos)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda op: algorithm %d asked of an op with one algorithm", d->algo);
    cuda_backend *b = (cuda_backend *)be;
    st = vdnn_cuda_use(b, err);
    return st ? st : impl->query(b, d, info, err);
}

vdnn_status vdnn_cuda_op_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err)
{
    const cuda_op_impl *impl;
    vdnn_status st = lookup((const cuda_backend *)be, d, &impl, err);
    if (st) return st;
    if (!algos || !n) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_algos: NULL output");
    *n = 0;
    if (!impl->algos) return vdnn_op_algos_single(be, d, algos, n, err);
    cuda_backend *b = (cuda_backend *)be;
    st = vdnn_cuda_use(b, err);
    return st ? st : impl->algos(b, d, algos, n, err);
}

vdnn_status vdnn_cuda_describe_op(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const vdnn_op_desc *d,
                                  vdnn_op_algo *algos, int *n, bool *derived, vdnn_error *err)
{
    if (!opt || !algos || !n || !derived) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "describe_op: NULL argument");
    *n = 0;
    *derived = false;
    /* A backend with no device: no stream, handle or context, so any call that reached the GPU would fail rather
     * than answer; the queries used here make none (cuda_op_impl.query "does no device work"). */
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "describe_op: out of memory");
    vdnn_status st = vdnn_cuda_resolve_options(opt, &b->opt, err);
    b->device = -1;
    b->cc_major = cc_major;
    b->cc_minor = cc_minor;
    snprintf(b->device_name, sizeof b->device_name, "a GPU of compute capability %d.%d (described)", cc_major, cc_minor);
    const cuda_op_impl *impl = NULL;
    if (!st) st = lookup(b, d, &impl, err);
    if (!st && d->kind == VDNN_LAYER_CONV) {
        st = vdnn_cuda_conv_describe(b, d, &algos[0], err);
        *derived = true;
    } else if (!st && impl->algos) {
        st = vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "describe_op: %s lists candidates only a device can give",
                       vdnn_layer_kind_name(d->kind));
    } else if (!st) {
        vdnn_op_desc d0 = *d;
        d0.algo = 0;
        memset(&algos[0], 0, sizeof algos[0]);
        snprintf(algos[0].name, sizeof algos[0].name, "default");
        st = impl->query(b, &d0, &algos[0].info, err);
    }
    if (!st) *n = 1;
    free(b);
    return st;
}

vdnn_status vdnn_cuda_op_create(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_op **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_create: NULL output pointer");
    *out = NULL;
    const cuda_op_impl *impl;
    vdnn_status st = lookup((const cuda_backend *)be, d, &impl, err);
    if (st) return st;
    cuda_backend *b = (cuda_backend *)be;
    st = vdnn_cuda_use(b, err);
    if (st) return st;
    vdnn_op *op = calloc(1, sizeof *op);
    if (!op) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "op_create: out of memory");
    op->d = *d;
    op->impl = impl;
    if (d->algo != 0 && !impl->algos)
        st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda op: algorithm %d asked of an op with one algorithm", d->algo);
    if (!st) st = impl->query(b, d, &op->info, err);
    if (!st && impl->create) st = impl->create(b, op, err);
    if (st) {
        free(op);
        return st;
    }
    *out = op;
    return VDNN_OK;
}

void vdnn_cuda_op_destroy(vdnn_backend_t *be, vdnn_op *op)
{
    if (!op) return;
    if (op->impl->destroy) op->impl->destroy((cuda_backend *)be, op);
    free(op);
}

vdnn_status vdnn_cuda_op_forward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!op || !a) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_forward: NULL %s", op ? "arguments" : "op");
    cuda_backend *b = (cuda_backend *)be;
    vdnn_status st = vdnn_cuda_use(b, err);
    return st ? st : op->impl->forward(b, op, a, err);
}

vdnn_status vdnn_cuda_op_backward(vdnn_backend_t *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!op || !a) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "op_backward: NULL %s", op ? "arguments" : "op");
    cuda_backend *b = (cuda_backend *)be;
    vdnn_status st = vdnn_cuda_use(b, err);
    return st ? st : op->impl->backward(b, op, a, err);
}
