/* bf16 and fp16 maps for the LSTM chunk on CUDA: the op widens a group of samples' 16-bit maps into fp32 copies in its
 * workspace, runs the fp32 chunk (cuda_ops_lstm.c) on them with the fp32 weights, and rounds what it writes once. So
 * the state stays fp32 across the steps of a chunk (a chunk that read c back from 16-bit maps every step would drift
 * over thousands of steps), as the CPU backend's widened chunk does. The gates (aux, what a chunk keeps for backward)
 * are kept in the maps' type: the group's fp32 gates are rounded into aux after forward and widened for backward,
 * each group's block of aux laid out as the fp32 chunk of that many samples lays out its own. Groups keep the fp32
 * copies to a bounded size, unless the room for a second copy of the parameters' gradient (which groups after the
 * first write aside, to be added) would cost more than the grouping saves. */
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/lstm_layout.h"
#include "backend/widen_group.h"

static size_t per_sample(vdnn_shape s) { return vdnn_shape_count(s) / (size_t)s.n; }

/* fp32 bytes of one sample's copies: inputs, output and their gradients, and its gates. */
static size_t sample_bytes(const vdnn_op_desc *d, const vdnn_op_info *one)
{
    size_t v = per_sample(d->out);
    for (int i = 0; i < d->n_inputs; i++) v += per_sample(d->in[i]);
    return 2 * v * sizeof(float) + one->aux_bytes;
}

/* The fp32 chunk of k samples. */
static vdnn_op_desc inner_desc(const vdnn_op_desc *d, int k)
{
    vdnn_op_desc s = *d;
    s.dtype = VDNN_DTYPE_F32;
    for (int i = 0; i < d->n_inputs; i++) s.in[i].n = k;
    s.out.n = k;
    return s;
}

/* Samples a call takes at a time, and the fp32 chunk of that many (its info in *in). */
static vdnn_status group(const vdnn_op_desc *d, int *k, vdnn_op_desc *s, vdnn_op_info *in, vdnn_error *err)
{
    const int n = d->out.n;
    vdnn_op_desc one = inner_desc(d, 1);
    vdnn_lstm_dims m;
    vdnn_status st = vdnn_lstm_dims_of(&one, &m, err);
    if (st) return st;
    const vdnn_op_info oi = vdnn_lstm_info(&m);
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    /* The CPU backend's groups (its default bound): the copies are what the op holds beyond its 16-bit maps while
     * it runs, so they set how small a budget a plan reaches; smaller groups cost more, smaller GEMMs. */
    *k = vdnn_widen_group_samples(n, sample_bytes(d, &oi), VDNN_WIDEN_GROUP_BYTES, (nw + nb) * sizeof(float), false);
    *s = inner_desc(d, *k);
    if ((st = vdnn_lstm_dims_of(s, &m, err))) return st;
    *in = vdnn_lstm_info(&m);
    return VDNN_OK;
}

/* Where a group's fp32 copies lie in the workspace (offsets from it), for forward or backward. */
typedef struct half_layout {
    size_t inner, x[2], y, aux, dy, dx[2], dw, db, bytes;
} half_layout;

static size_t take(size_t *used, size_t bytes)
{
    const size_t at = *used;
    *used += vdnn_cuda_align(bytes);
    return at;
}

static half_layout layout(const vdnn_op_desc *s, const vdnn_op_info *in, bool backward)
{
    half_layout l = {0};
    size_t used = 0;
    l.inner = take(&used, backward ? in->bwd_ws_bytes : in->fwd_ws_bytes);
    for (int i = 0; i < s->n_inputs; i++) l.x[i] = take(&used, vdnn_shape_count(s->in[i]) * sizeof(float));
    l.y = take(&used, vdnn_shape_count(s->out) * sizeof(float));
    l.aux = take(&used, in->aux_bytes);
    if (backward) {
        size_t nw, nb;
        vdnn_lstm_param_counts(&s->p, &nw, &nb);
        l.dy = take(&used, vdnn_shape_count(s->out) * sizeof(float));
        for (int i = 0; i < s->n_inputs; i++) l.dx[i] = take(&used, vdnn_shape_count(s->in[i]) * sizeof(float));
        l.dw = take(&used, nw * sizeof(float));
        l.db = take(&used, nb * sizeof(float));
    }
    l.bytes = used;
    return l;
}

vdnn_status vdnn_cuda_lstm_half_query(const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    int k;
    vdnn_op_desc s;
    vdnn_op_info in;
    vdnn_status st = group(d, &k, &s, &in, err);
    if (st) return st;
    *info = in;
    info->aux_bytes = in.aux_bytes / sizeof(float) * (size_t)(d->out.n / k) * vdnn_cuda_esize(d);
    info->fwd_ws_bytes = layout(&s, &in, false).bytes;
    info->bwd_ws_bytes = layout(&s, &in, true).bytes;
    return VDNN_OK;
}

/* One conversion of n values on the compute queue. */
static vdnn_status convert(cuda_backend *b, void *dst, vdnn_dtype dt, const void *src, vdnn_dtype st, size_t n,
                           const char *what, vdnn_error *err)
{
    return vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], dst, (vdnn_cuda_type)dt, src,
                                               (vdnn_cuda_type)st, n, 0),
                           err, "cuda lstm (%s maps): %s", vdnn_dtype_name(dt == VDNN_DTYPE_F32 ? st : dt), what);
}

/* A call's group, layout and fp32 arguments before any group's copies; its buffers checked. */
typedef struct half_call {
    int k, groups;
    vdnn_op inner;
    half_layout l;
    char *ws;
    vdnn_op_args a32;
} half_call;

static vdnn_status begin(const vdnn_op *op, const vdnn_op_args *a, bool backward, half_call *c, vdnn_error *err)
{
    memset(c, 0, sizeof *c);
    vdnn_status st = group(&op->d, &c->k, &c->inner.d, &c->inner.info, err);
    if (st) return st;
    const char *pass = backward ? "backward" : "forward";
    if (!a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda lstm %s: %s maps need the workspace", pass,
                         vdnn_dtype_name(op->d.dtype));
    if (!a->y || (backward && !a->dy))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda lstm %s: %s is NULL", pass, a->y ? "dy" : "y");
    c->inner.impl = op->impl;
    c->groups = op->d.out.n / c->k;
    c->l = layout(&c->inner.d, &c->inner.info, backward);
    c->ws = (char *)a->ws;
    c->a32 = *a;
    c->a32.ws = (float *)(c->ws + c->l.inner);
    c->a32.y = (float *)(c->ws + c->l.y);
    return VDNN_OK;
}

/* Group g of a 16-bit map of shape t, groups of k samples. */
static void *at_group(const vdnn_op_desc *d, const void *p, vdnn_shape t, int g, int k)
{
    return vdnn_cuda_at(d, p, (size_t)g * (size_t)k * per_sample(t));
}

/* Group g's share of the 16-bit aux: the fp32 chunk's aux values, in the maps' type. */
static void *aux_at(const vdnn_op_desc *d, const half_call *c, const vdnn_op_args *a, int g)
{
    return vdnn_cuda_at(d, a->aux, (size_t)g * (c->inner.info.aux_bytes / sizeof(float)));
}

/* Group g's inputs widened (those given), and in backward its aux. */
static vdnn_status widen_inputs(cuda_backend *b, const vdnn_op *op, const vdnn_op_args *a, half_call *c, int g,
                                bool backward, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = VDNN_OK;
    for (int i = 0; !st && i < d->n_inputs; i++) {
        c->a32.x[i] = a->x[i] ? (const float *)(c->ws + c->l.x[i]) : NULL;
        if (a->x[i])
            st = convert(b, c->ws + c->l.x[i], VDNN_DTYPE_F32, at_group(d, a->x[i], d->in[i], g, c->k), d->dtype,
                         vdnn_shape_count(c->inner.d.in[i]), "widen an input", err);
    }
    c->a32.aux = a->aux ? (float *)(c->ws + c->l.aux) : NULL;
    if (!st && a->aux && backward)
        st = convert(b, c->a32.aux, VDNN_DTYPE_F32, aux_at(d, c, a, g), d->dtype,
                     c->inner.info.aux_bytes / sizeof(float), "widen the gates", err);
    return st;
}

vdnn_status vdnn_cuda_lstm_half_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a,
                                        const cuda_op_impl *fp32, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    half_call c;
    vdnn_status st = begin(op, a, false, &c, err);
    if (st) return st;
    for (int g = 0; !st && g < c.groups; g++) {
        st = widen_inputs(b, op, a, &c, g, false, err);
        if (!st) st = fp32->forward(b, &c.inner, &c.a32, err);
        if (!st && a->aux)
            st = convert(b, aux_at(d, &c, a, g), d->dtype, c.a32.aux, VDNN_DTYPE_F32,
                         c.inner.info.aux_bytes / sizeof(float), "round the gates", err);
        if (!st)
            st = convert(b, at_group(d, a->y, d->out, g, c.k), d->dtype, c.a32.y, VDNN_DTYPE_F32,
                         vdnn_shape_count(c.inner.d.out), "round y", err);
    }
    return st;
}

vdnn_status vdnn_cuda_lstm_half_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a,
                                         const cuda_op_impl *fp32, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    half_call c;
    vdnn_status st = begin(op, a, true, &c, err);
    if (st) return st;
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    cudaStream_t q = b->stream[VDNN_QUEUE_COMPUTE];
    for (int i = 0; i < d->n_inputs; i++) c.a32.dx[i] = a->dx[i] ? (float *)(c.ws + c.l.dx[i]) : NULL;
    c.a32.dy = (const float *)(c.ws + c.l.dy);
    for (int g = 0; !st && g < c.groups; g++) {
        st = widen_inputs(b, op, a, &c, g, true, err);
        if (!st)
            st = convert(b, c.a32.y, VDNN_DTYPE_F32, at_group(d, a->y, d->out, g, c.k), d->dtype,
                         vdnn_shape_count(c.inner.d.out), "widen y", err);
        if (!st)
            st = convert(b, (void *)c.a32.dy, VDNN_DTYPE_F32, at_group(d, a->dy, d->out, g, c.k), d->dtype,
                         vdnn_shape_count(c.inner.d.out), "widen dy", err);
        /* The first group writes the parameters' gradient, the others beside it, added after in group order. */
        c.a32.dw = a->dw && g ? (float *)(c.ws + c.l.dw) : a->dw;
        c.a32.db = a->db && g ? (float *)(c.ws + c.l.db) : a->db;
        if (!st) st = fp32->backward(b, &c.inner, &c.a32, err);
        if (!st && g && a->dw)
            st = vdnn_cuda_check(vdnn_cuda_k_accumulate(q, a->dw, c.a32.dw, nw), err, "cuda lstm: add a group's dw");
        if (!st && g && a->db)
            st = vdnn_cuda_check(vdnn_cuda_k_accumulate(q, a->db, c.a32.db, nb), err, "cuda lstm: add a group's db");
        for (int i = 0; !st && i < d->n_inputs; i++)
            if (a->dx[i])
                st = convert(b, at_group(d, a->dx[i], d->in[i], g, c.k), d->dtype, c.a32.dx[i], VDNN_DTYPE_F32,
                             vdnn_shape_count(c.inner.d.in[i]), "round dx", err);
    }
    return st;
}
