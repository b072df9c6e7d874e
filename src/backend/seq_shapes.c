/* The sequence ops' shape checks, shared by the CPU and CUDA backends so that both accept and refuse alike. */
#include "backend/seq_shapes.h"

vdnn_status vdnn_seq_shape_fail(const vdnn_op_desc *d, const char *want, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: input %dx%dx%dx%d, output %dx%dx%dx%d: %s",
                     vdnn_layer_kind_name(d->kind), x.n, x.c, x.h, x.w, y.n, y.c, y.h, y.w, want);
}

vdnn_status vdnn_attn_dims_of(const vdnn_op_desc *d, vdnn_shape qkv, vdnn_shape probs, vdnn_attn_dims *a,
                              vdnn_error *err)
{
    const int heads = d->p.heads ? d->p.heads : probs.c, h0 = d->p.head0;
    if (qkv.c != 1 || qkv.w % 3 || probs.n != qkv.n || probs.h != qkv.h || probs.w != qkv.h || probs.c < 1 ||
        heads < 1 || (qkv.w / 3) % heads || h0 < 0 || h0 > heads - probs.c)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: qkv %dx%dx%dx%d and probabilities %dx%dx%dx%d do not fit (expected "
                         "Bx1xTx3F and BxHxTxT, heads %d on of %d dividing F)", vdnn_layer_kind_name(d->kind), qkv.n,
                         qkv.c, qkv.h, qkv.w, probs.n, probs.c, probs.h, probs.w, h0, heads);
    const int dh = qkv.w / 3 / heads;
    *a = (vdnn_attn_dims){qkv.n, probs.c, qkv.h, qkv.w / 3, dh, h0, probs.c * dh};
    return VDNN_OK;
}

vdnn_status vdnn_fused_dims_of(const vdnn_op_desc *d, size_t block_values, bool all_heads, vdnn_fused_dims *m,
                               vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_seq_shape_fail(d, "takes one input (qkv)", err);
    const vdnn_shape x = d->in[0], y = d->out;
    const int heads = d->p.heads;
    if (heads < 1 || x.c != 1 || x.w % 3 || (x.w / 3) % heads || y.n != x.n || y.c != 1 || y.h != x.h ||
        y.w != x.w / 3)
        return vdnn_seq_shape_fail(d, "expected qkv Bx1xTx3F and output Bx1xTxF, F a multiple of heads", err);
    const size_t per = block_values / ((all_heads ? (size_t)heads : 1) * (size_t)x.h);
    *m = (vdnn_fused_dims){x.n, heads, x.h, x.w / 3, x.w / 3 / heads, per < 1 ? 1 : per > (size_t)x.h ? x.h : (int)per};
    return VDNN_OK;
}
