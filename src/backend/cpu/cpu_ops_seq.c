/* Sequence ops on the CPU (fp32): token and position embeddings, linear over the last dimension and causal
 * multi-head attention split in two ops (probabilities, then their mix of values), on oneDNN GEMMs (cpu_gemm.h);
 * the attention's heads shared among the threads, each head's GEMMs on one (the same numbers at any thread count). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/seq_shapes.h"

/* Tensors B x T x F are shapes {B, 1, T, F}: rows of F contiguous values (docs/sequence.md). */
static vdnn_status seq_fp32(const vdnn_op_desc *d, vdnn_error *err)
{
    /* This code is fp32: bf16 maps reach it widened (cpu_ops_widen.c), other types never. */
    if (d->dtype != VDNN_DTYPE_F32)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: only fp32 or bf16 maps on the CPU (no %s path)",
                         vdnn_layer_kind_name(d->kind), vdnn_dtype_name(d->dtype));
    return VDNN_OK;
}

static bool same_shape(vdnn_shape a, vdnn_shape b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

/* ---- token embedding: y[r] = W[id(r)] ---- */

static vdnn_status embed_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = seq_fp32(d, err);
    if (st) return st;
    const vdnn_shape x = d->in[0], y = d->out;
    if (d->n_inputs != 1 || x.c != 1 || x.w != 1 || y.n != x.n || y.c != 1 || y.h != x.h || y.w != d->p.filters ||
        d->p.vocab < 1)
        return vdnn_seq_shape_fail(d, "expected token ids Bx1xTx1 to Bx1xTxF with F outputs= and a vocabulary", err);
    *info = (vdnn_op_info){.bwd_needs_x = true};
    return VDNN_OK;
}

/* A token id from its float: ids are exact integers in floats below 2^24. */
static vdnn_status token_at(const vdnn_op_desc *d, const float *x, size_t r, int *id, vdnn_error *err)
{
    const float v = x[r];
    if (!(v >= 0.0f && v < (float)d->p.vocab) || v != floorf(v))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "embed: token %zu is %g, not an id in 0..%d", r, (double)v,
                         d->p.vocab - 1);
    *id = (int)v;
    return VDNN_OK;
}

static vdnn_status embed_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->w, d, "w", err);
    if (st) return st;
    const size_t rows = vdnn_seq_rows(d->in[0]), f = (size_t)d->p.filters;
    for (size_t r = 0; r < rows; r++) {
        int id = 0;
        if ((st = token_at(d, a->x[0], r, &id, err))) return st;
        memcpy(a->y + r * f, a->w + (size_t)id * f, f * sizeof(float));
    }
    return VDNN_OK;
}

static vdnn_status embed_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const size_t rows = vdnn_seq_rows(d->in[0]), f = (size_t)d->p.filters;
    /* Token ids are not differentiable: their gradient is zero. */
    if (a->dx[0]) memset(a->dx[0], 0, rows * sizeof(float));
    if (!a->dw) return VDNN_OK;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (st) return st;
    for (size_t r = 0; r < rows; r++) {
        int id = 0;
        if ((st = token_at(d, a->x[0], r, &id, err))) return st;
    }
    memset(a->dw, 0, (size_t)d->p.vocab * f * sizeof(float));
    /* Threads own columns and add rows in token order, so the sums do not depend on the thread count. */
    const long nf = (long)f;
#pragma omp parallel for if ((long)rows * nf > CPU_PAR_MIN)
    for (long j = 0; j < nf; j++)
        for (size_t r = 0; r < rows; r++) a->dw[(size_t)a->x[0][r] * f + (size_t)j] += a->dy[r * f + (size_t)j];
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_embed = {embed_query, no_create, no_destroy, embed_forward, embed_backward, NULL};

/* ---- learned position embedding: y[b, t] = x[b, t] + P[t] ---- */

static vdnn_status pos_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = seq_fp32(d, err);
    if (st) return st;
    if (d->n_inputs != 1 || !same_shape(d->in[0], d->out) || d->in[0].c != 1 || d->in[0].h > d->p.context)
        return vdnn_seq_shape_fail(d, "expected Bx1xTxF to the same, T at most context=", err);
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status pos_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->w, d, "w", err);
    if (st) return st;
    const size_t tf = (size_t)d->in[0].h * (size_t)d->in[0].w;
    const long n = (long)d->in[0].n * (long)tf;
#pragma omp parallel for if (n > CPU_PAR_MIN)
    for (long i = 0; i < n; i++) a->y[i] = a->x[0][i] + a->w[(size_t)i % tf];
    return VDNN_OK;
}

static vdnn_status pos_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (st) return st;
    const size_t tf = (size_t)d->in[0].h * (size_t)d->in[0].w, n = (size_t)d->in[0].n * tf;
    /* dw first: dx may be written over dy. Rows past the sequence get no gradient. */
    if (a->dw) {
        memset(a->dw, 0, (size_t)d->p.context * (size_t)d->in[0].w * sizeof(float));
        const long m = (long)tf;
#pragma omp parallel for if ((long)n > CPU_PAR_MIN)
        for (long i = 0; i < m; i++)
            for (int b = 0; b < d->in[0].n; b++) a->dw[i] += a->dy[(size_t)b * tf + (size_t)i];
    }
    if (a->dx[0] && a->dx[0] != a->dy) memcpy(a->dx[0], a->dy, n * sizeof(float));
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_pos_embed = {pos_query, no_create, no_destroy, pos_forward, pos_backward, NULL};

/* ---- linear over the last dimension: Y = X W^T + b, W Fout x Fin as PyTorch's nn.Linear ---- */

vdnn_status vdnn_cpu_linear_shape(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    if (d->n_inputs != 1 || y.n != x.n || y.c != x.c || y.h != x.h || y.w != d->p.filters)
        return vdnn_seq_shape_fail(d, "expected BxCxTxFin to BxCxTxFout with Fout outputs=", err);
    return VDNN_OK;
}

static vdnn_status linear_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = seq_fp32(d, err);
    if (!st) st = vdnn_cpu_linear_shape(d, err);
    if (st) return st;
    const vdnn_shape x = d->in[0];
    /* Backward sums the bias gradient as ones^T dY, a GEMV over a row of ones it keeps in its workspace. */
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_ws_bytes = d->p.bias ? vdnn_seq_rows(x) * sizeof(float) : 0};
    return VDNN_OK;
}

static vdnn_status linear_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->w, d, "w", err);
    if (!st && d->p.bias) st = vdnn_cpu_need(a->b, d, "b", err);
    if (st) return st;
    const int rows = (int)vdnn_seq_rows(d->in[0]), fin = d->in[0].w, fout = d->p.filters;
    float beta = 0.0f;
    if (d->p.bias) {
        for (int r = 0; r < rows; r++) memcpy(a->y + (size_t)r * (size_t)fout, a->b, (size_t)fout * sizeof(float));
        beta = 1.0f;
    }
    vdnn_cpu_sgemm(false, true, rows, fout, fin, 1.0f, a->x[0], fin, a->w, fin, beta, a->y,
                fout);
    return VDNN_OK;
}

static vdnn_status linear_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (st) return st;
    const int rows = (int)vdnn_seq_rows(d->in[0]), fin = d->in[0].w, fout = d->p.filters;
    if (a->dx[0]) {
        if ((st = vdnn_cpu_need(a->w, d, "w", err))) return st;
        vdnn_cpu_sgemm(false, false, rows, fin, fout, 1.0f, a->dy, fout, a->w, fin, 0.0f,
                    a->dx[0], fin);
    }
    if (a->dw) {
        if ((st = vdnn_cpu_need(a->x[0], d, "x", err))) return st;
        vdnn_cpu_sgemm(true, false, fout, fin, rows, 1.0f, a->dy, fout, a->x[0], fin, 0.0f,
                    a->dw, fin);
    }
    if (a->db && d->p.bias) {
        if ((st = vdnn_cpu_need(a->ws, d, "the workspace", err))) return st;
        for (int r = 0; r < rows; r++) a->ws[r] = 1.0f;
        vdnn_cpu_sgemv_t(rows, fout, a->dy, fout, a->ws, a->db);
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_linear = {linear_query, no_create, no_destroy, linear_forward, linear_backward, NULL};

/* ---- causal attention ----
 * qkv {B,1,T,3F} holds each token's query, key and value side by side; head h reads columns h*D .. h*D+D-1 of
 * each (D = F/H). The probabilities are their own tensor {B,H,T,T} so that a plan can keep, swap or recompute
 * them like any feature map: at long context they are the largest tensors of the net. */

vdnn_status vdnn_cpu_attn_probs_dims(const vdnn_op_desc *d, vdnn_attn_dims *ad, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_seq_shape_fail(d, "takes one input (qkv)", err);
    vdnn_status st = vdnn_attn_dims_of(d, d->in[0], d->out, ad, err);
    if (!st && ad->h != vdnn_attn_op_heads(d))
        return vdnn_seq_shape_fail(d, "the output's channels are not its heads", err);
    return st;
}

vdnn_status vdnn_cpu_attn_mix_dims(const vdnn_op_desc *d, vdnn_attn_dims *ad, vdnn_error *err)
{
    if (d->n_inputs != 2) return vdnn_seq_shape_fail(d, "takes two inputs (probabilities, then qkv)", err);
    vdnn_status st = vdnn_attn_dims_of(d, d->in[1], d->in[0], ad, err);
    const vdnn_shape y = d->out;
    if (!st && (y.n != ad->b || y.c != 1 || y.h != ad->t || y.w != ad->w))
        return vdnn_seq_shape_fail(d, "expected output Bx1xTxF (its heads' share of F)", err);
    return st;
}

void vdnn_cpu_attn_zero_unowned(void *dqkv, const vdnn_attn_dims *ad, size_t first, size_t count, size_t es)
{
    const size_t ld = 3 * (size_t)ad->f, rows = (size_t)ad->b * (size_t)ad->t;
    if (ad->w != ad->f) {
        memset(dqkv, 0, rows * ld * es);
        return;
    }
    for (size_t r = 0; r < rows; r++) memset((char *)dqkv + (r * ld + first) * es, 0, count * es);
}

/* A head's dS (T x T floats) in the probabilities' backward workspace is taken once per thread where it is at most
 * this large (contexts up to 512); past it the heads go one at a time, every thread in each head's GEMMs, which are
 * then large enough to share, and the workspace stays one head's at long context. */
#define HEAD_WS_PER_THREAD ((size_t)1 << 20)

/* Threads the heads are shared among: the backend's, at most one a head (and one where each needs a larger dS). */
static int head_threads(const cpu_backend *be, const vdnn_attn_dims *ad, size_t ws_per_head)
{
    const int heads = ad->b * ad->h, threads = be->base.threads > 0 ? be->base.threads : 1;
    if (ws_per_head > HEAD_WS_PER_THREAD) return 1;
    return threads < heads ? threads : heads;
}

static size_t head_ds_bytes(const vdnn_attn_dims *ad) { return (size_t)ad->t * (size_t)ad->t * sizeof(float); }

static vdnn_status probs_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = seq_fp32(d, err);
    if (st) return st;
    vdnn_attn_dims ad;
    if ((st = vdnn_cpu_attn_probs_dims(d, &ad, err))) return st;
    /* Backward forms dS = P (dP - rowsum(P dP)) of a head in its thread's part of the workspace. */
    const size_t part = head_ds_bytes(&ad);
    *info = (vdnn_op_info){.bwd_needs_x = true, .bwd_needs_y = true,
                           .bwd_ws_bytes = (size_t)head_threads(be, &ad, part) * part};
    return VDNN_OK;
}

void vdnn_cpu_causal_softmax_row(float *p, int live, int t)
{
    float m = p[0];
    for (int j = 1; j < live; j++) m = p[j] > m ? p[j] : m;
    double s = 0.0;
    for (int j = 0; j < live; j++) s += (double)(p[j] = expf(p[j] - m));
    const float inv = (float)(1.0 / s);
    for (int j = 0; j < live; j++) p[j] *= inv;
    for (int j = live; j < t; j++) p[j] = 0.0f;
}

void vdnn_cpu_causal_softmax_grad_row(const float *p, const float *dp, float *ds, int live, int t)
{
    double dot = 0.0;
    for (int j = 0; j < live; j++) dot += (double)p[j] * dp[j];
    for (int j = 0; j < live; j++) ds[j] = p[j] * (dp[j] - (float)dot);
    for (int j = live; j < t; j++) ds[j] = 0.0f;
}

static vdnn_status probs_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    const float scale = 1.0f / sqrtf((float)ad.dh);
    /* The causal softmax of each row over its first i+1 scores: oneDNN's softmax would need the masked half
     * filled with -inf first, a pass as long as this one. */
#pragma omp parallel for schedule(static) num_threads(head_threads(be, &ad, 0))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        const float *q = a->x[0] + (size_t)b * (size_t)t * (size_t)ld + (size_t)(ad.h0 + h) * (size_t)ad.dh;
        float *p = a->y + (size_t)bh * (size_t)t * (size_t)t;
        vdnn_cpu_sgemm(false, true, t, t, ad.dh, scale, q, ld, q + ad.f, ld, 0.0f, p, t);
#pragma omp parallel for if ((long)t * t > CPU_PAR_MIN)
        for (int i = 0; i < t; i++) vdnn_cpu_causal_softmax_row(p + (size_t)i * (size_t)t, i + 1, t);
    }
    return VDNN_OK;
}

static vdnn_status probs_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0]) return VDNN_OK;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    if (!st) st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (!st) st = vdnn_cpu_need(a->ws, d, "the workspace", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[0], d->out, &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    const float scale = 1.0f / sqrtf((float)ad.dh);
    const size_t part = head_ds_bytes(&ad) / sizeof(float);
    /* Values get no gradient from the probabilities (attn_mix gives theirs), nor do other groups' heads. */
    vdnn_cpu_attn_zero_unowned(a->dx[0], &ad, 2 * (size_t)ad.f, (size_t)ad.f, sizeof(float));
#pragma omp parallel for schedule(static) num_threads(head_threads(be, &ad, head_ds_bytes(&ad)))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        float *ds = a->ws + (size_t)omp_get_thread_num() * part;
        const size_t at = (size_t)bh * (size_t)t * (size_t)t;
        const float *p = a->y + at, *dp = a->dy + at;
        for (int i = 0; i < t; i++)
            vdnn_cpu_causal_softmax_grad_row(p + (size_t)i * (size_t)t, dp + (size_t)i * (size_t)t,
                                             ds + (size_t)i * (size_t)t, i + 1, t);
        const size_t off = (size_t)b * (size_t)t * (size_t)ld + (size_t)(ad.h0 + h) * (size_t)ad.dh;
        const float *q = a->x[0] + off, *k = q + ad.f;
        float *dq = a->dx[0] + off, *dk = dq + ad.f;
        vdnn_cpu_sgemm(false, false, t, ad.dh, t, scale, ds, t, k, ld, 0.0f, dq, ld);
        vdnn_cpu_sgemm(true, false, t, ad.dh, t, scale, ds, t, q, ld, 0.0f, dk, ld);
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_attn_probs = {probs_query, no_create, no_destroy, probs_forward, probs_backward, NULL};

static vdnn_status mix_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = seq_fp32(d, err);
    if (st) return st;
    vdnn_attn_dims ad;
    if ((st = vdnn_cpu_attn_mix_dims(d, &ad, err))) return st;
    *info = (vdnn_op_info){.bwd_needs_x = true};
    return VDNN_OK;
}

static vdnn_status mix_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->x[0], d, "x[0]", err);
    if (!st) st = vdnn_cpu_need(a->x[1], d, "x[1]", err);
    if (!st) st = vdnn_cpu_need(a->y, d, "y", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[1], d->in[0], &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
#pragma omp parallel for schedule(static) num_threads(head_threads(be, &ad, 0))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        const float *p = a->x[0] + (size_t)bh * (size_t)t * (size_t)t;
        const float *v = a->x[1] + (size_t)b * (size_t)t * (size_t)ld + 2 * (size_t)ad.f + (size_t)(ad.h0 + h) * ad.dh;
        float *o = a->y + (size_t)b * (size_t)t * (size_t)ad.w + (size_t)h * (size_t)ad.dh;
        vdnn_cpu_sgemm(false, false, t, ad.dh, t, 1.0f, p, t, v, ld, 0.0f, o, ad.w);
    }
    return VDNN_OK;
}

static vdnn_status mix_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (!a->dx[0] && !a->dx[1]) return VDNN_OK;
    vdnn_status st = vdnn_cpu_need(a->dy, d, "dy", err);
    if (!st && a->dx[0]) st = vdnn_cpu_need(a->x[1], d, "x[1]", err);
    if (!st && a->dx[1]) st = vdnn_cpu_need(a->x[0], d, "x[0]", err);
    vdnn_attn_dims ad;
    if (!st) st = vdnn_attn_dims_of(d, d->in[1], d->in[0], &ad, err);
    if (st) return st;
    const int t = ad.t, ld = 3 * ad.f;
    /* Queries and keys get no gradient from the mix (attn_probs gives theirs), nor do other groups' values. */
    if (a->dx[1]) vdnn_cpu_attn_zero_unowned(a->dx[1], &ad, 0, 2 * (size_t)ad.f, sizeof(float));
#pragma omp parallel for schedule(static) num_threads(head_threads(be, &ad, 0))
    for (int bh = 0; bh < ad.b * ad.h; bh++) {
        const int b = bh / ad.h, h = bh % ad.h;
        const size_t pat = (size_t)bh * (size_t)t * (size_t)t;
        const size_t vat = (size_t)b * (size_t)t * (size_t)ld + 2 * (size_t)ad.f + (size_t)(ad.h0 + h) * ad.dh;
        const float *dout = a->dy + (size_t)b * (size_t)t * (size_t)ad.w + (size_t)h * (size_t)ad.dh;
        if (a->dx[0])
            vdnn_cpu_sgemm(false, true, t, t, ad.dh, 1.0f, dout, ad.w, a->x[1] + vat, ld,
                        0.0f, a->dx[0] + pat, t);
        if (a->dx[1])
            vdnn_cpu_sgemm(true, false, t, ad.dh, t, 1.0f, a->x[0] + pat, t, dout, ad.w,
                        0.0f, a->dx[1] + vat, ld);
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_attn_mix = {mix_query, no_create, no_destroy, mix_forward, mix_backward, NULL};
