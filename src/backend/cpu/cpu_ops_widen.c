/* bf16 maps for the CPU ops whose arithmetic is fp32 code (a sequence model's ops but attention, which goes by
 * blocks of rows in cpu_ops_attn_bf16.c: oneDNN and OpenBLAS GEMMs and own loops, oneDNN's fp32 layer norm and GELU): the op
 * reads its bf16 maps widened into fp32 in its workspace, runs its fp32 code with the fp32 master weights, and rounds
 * what it writes once, to nearest even. No AVX-512 BF16 is needed (widening is exact and rounding is a few integer
 * operations a value, against the GEMMs' many flops a value), so these ops run bf16 on any CPU. Every op goes a
 * group of samples at a time, so its workspace holds a few samples' fp32 copies rather than the batch's: else a bf16
 * op would hold more bytes while it runs than its fp32 twin (bf16 maps and fp32 copies), and the smallest budget a
 * plan reaches, set by the largest op, would rise (an LSTM chunk's default candidate takes larger groups, its
 * per-step products being bound by the weights they read once per group: vdnn_cpu_lstm16_variant). Parameter
 * gradients are summed over the groups in order. An
 * LSTM keeps its gates (aux, the largest tensor a chunk saves for backward) in bf16 too: forward rounds the group's
 * fp32 gates once, backward reads them widened, and recompute rounds them the same way. */
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"
#include "backend/lstm_layout.h"
#include "backend/op_check.h"
#include "backend/widen_group.h"
#include "core/half.h"

bool vdnn_cpu_widened(const vdnn_op_desc *d)
{
    if (!d || d->dtype != VDNN_DTYPE_BF16) return false;
    switch (d->kind) {
    case VDNN_LAYER_EMBED:
    case VDNN_LAYER_POS_EMBED:
    case VDNN_LAYER_LAYERNORM:
    case VDNN_LAYER_LINEAR:
    case VDNN_LAYER_GELU:
    case VDNN_LAYER_ATTN:
    case VDNN_LAYER_LSTM: return true;
    default: return false;
    }
}


/* An LSTM chunk's weights (input, recurrent, projection) and biases (two sets), in floats (lstm_layout.h). */
static void lstm_counts(const vdnn_op_desc *d, size_t *w, size_t *b)
{
    vdnn_lstm_dims m;
    *w = *b = 0;
    if (vdnn_lstm_dims_of(d, &m, &(vdnn_error){0})) return;
    const size_t h4 = 4 * (size_t)m.h;
    *w = h4 * (size_t)m.in + h4 * (size_t)m.pw + (m.proj ? (size_t)m.pw * (size_t)m.h : 0);
    *b = 2 * h4;
}

/* The op's weight and bias gradients, in floats: a group after the first writes them aside to be added. */
static void param_counts(const vdnn_op_desc *d, size_t *w, size_t *b)
{
    const size_t f = (size_t)d->in[0].w;
    *w = *b = 0;
    switch (d->kind) {
    case VDNN_LAYER_LINEAR: *w = (size_t)d->p.filters * f, *b = d->p.bias ? (size_t)d->p.filters : 0; break;
    case VDNN_LAYER_LSTM: lstm_counts(d, w, b); break;
    case VDNN_LAYER_EMBED: *w = (size_t)d->p.vocab * (size_t)d->out.w; break;
    case VDNN_LAYER_POS_EMBED: *w = (size_t)d->p.context * f; break;
    case VDNN_LAYER_LAYERNORM: *w = *b = f; break;
    default: break;
    }
}

/* The inputs as the fp32 op reads them: an LSTM chunk reads only its own steps of x[0] (the whole sequence's map),
 * and of each row the first lstm_in features (an LSTM's rows are [h | c]), and the last row of x[1] (the previous
 * chunk), so its copies hold those alone, with step0 0; else the copies of a chunk of 32 steps of a 128-step
 * sequence were up to eight times what it reads, and smaller groups of samples (more, thinner GEMMs; lstm-lm's
 * were 8 samples of 32) followed from the bound on them. */
static void read_part(vdnn_op_desc *d)
{
    if (d->kind != VDNN_LAYER_LSTM) return;
    d->in[0].h = d->out.h;
    d->in[0].w = d->p.lstm_in;
    d->p.step0 = 0;
    if (d->n_inputs > 1) d->in[1].h = 1;
}

/* Samples an op takes at a time (vdnn_widen_group_samples) with copies of at most cap bytes (unless the backend's
 * own bound): its fp32 copies are inputs and output, and their gradients in backward. */
static int group_samples(const cpu_backend *be, const vdnn_op_desc *d, size_t cap)
{
    const int n = d->out.n;
    vdnn_op_desc r = *d;
    read_part(&r);
    size_t one = vdnn_shape_count(d->out) / (size_t)n;
    for (int i = 0; i < d->n_inputs; i++) one += vdnn_shape_count(r.in[i]) / (size_t)n;
    size_t nw, nb;
    param_counts(d, &nw, &nb);
    if (be->opt.widen_group_bytes) cap = be->opt.widen_group_bytes;
    return vdnn_widen_group_samples(n, one * 2 * sizeof(float), cap, (nw + nb) * sizeof(float),
                                    be->opt.widen_group_bytes != 0);
}

bool vdnn_cpu_lstm16_variant(const cpu_backend *be, const vdnn_op_desc *d, int *group, bool *bf16_products)
{
    struct {
        int group;
        bool products;
    } v[3];
    int n = 0;
    const int whole = group_samples(be, d, VDNN_WIDEN_LSTM_GROUP_BYTES), lean = group_samples(be, d,
                                                                                             VDNN_WIDEN_GROUP_BYTES);
    v[n].group = whole, v[n++].products = be->bf16;
    if (lean < whole) v[n].group = lean, v[n++].products = be->bf16;
    if (be->bf16) v[n].group = lean, v[n++].products = false;
    if (d->kind != VDNN_LAYER_LSTM || d->algo < 0 || d->algo >= n) return false;
    *group = v[d->algo].group;
    *bf16_products = v[d->algo].products;
    return true;
}

/* The fp32 op that runs: d's shapes for a group of samples (group_samples), fp32 maps. */
static void widen_desc(const cpu_backend *be, const vdnn_op_desc *d, vdnn_op_desc *inner)
{
    *inner = *d;
    inner->dtype = VDNN_DTYPE_F32;
    read_part(inner);
    int k;
    bool products = false;
    /* An LSTM chunk whose products stay fp32 where the bf16 ones exist: its op's candidate 1 (cpu_ops_lstm.c). */
    if (vdnn_cpu_lstm16_variant(be, d, &k, &products)) inner->algo = be->bf16 && !products ? 1 : 0;
    else k = group_samples(be, d, VDNN_WIDEN_GROUP_BYTES), inner->algo = 0;
    for (int i = 0; i < d->n_inputs; i++) inner->in[i].n = k;
    inner->out.n = k;
}

/* Whether the op's aux is kept in bf16 (a group's fp32 copy in the workspace while it runs). */
static bool aux_bf16(const vdnn_op_desc *d) { return d->kind == VDNN_LAYER_LSTM; }

/* Where the fp32 copies lie in the workspace (offsets after aligning it), for forward or backward. */
typedef struct widen_layout {
    size_t inner, x[VDNN_MAX_INPUTS], y, dy, dx[VDNN_MAX_INPUTS], dw, db, aux, bytes;
} widen_layout;

/* d: the op as asked; inner: the fp32 op that runs (widen_desc), in: its info. */
static widen_layout layout(const vdnn_op_desc *d, const vdnn_op_desc *inner, const vdnn_op_info *in, bool backward)
{
    const vdnn_op_desc s = *inner;
    widen_layout l = {0};
    size_t used = 0;
    l.inner = vdnn_cpu_ws_take(&used, backward ? in->bwd_ws_bytes : in->fwd_ws_bytes);
    const bool xs = !backward || in->bwd_needs_x, ys = !backward || in->bwd_needs_y;
    for (int i = 0; i < d->n_inputs; i++) l.x[i] = vdnn_cpu_ws_take(&used, xs ? vdnn_shape_bytes(s.in[i]) : 0);
    l.y = vdnn_cpu_ws_take(&used, ys ? vdnn_shape_bytes(s.out) : 0);
    l.aux = vdnn_cpu_ws_take(&used, aux_bf16(d) ? in->aux_bytes : 0);
    if (backward) {
        l.dy = vdnn_cpu_ws_take(&used, vdnn_shape_bytes(s.out));
        for (int i = 0; i < d->n_inputs; i++) l.dx[i] = vdnn_cpu_ws_take(&used, vdnn_shape_bytes(s.in[i]));
    }
    if (backward && s.out.n < d->out.n) {
        size_t nw, nb;
        param_counts(d, &nw, &nb);
        l.dw = vdnn_cpu_ws_take(&used, nw * sizeof(float));
        l.db = vdnn_cpu_ws_take(&used, nb * sizeof(float));
    }
    l.bytes = used + CPU_WS_SLACK;
    return l;
}

vdnn_status vdnn_cpu_widen_query(cpu_backend *be, const cpu_op_impl *impl, const vdnn_op_desc *d, vdnn_op_info *info,
                                 vdnn_op_desc *inner, vdnn_op_info *inner_info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_token_ids(d, err);
    if (st) return st;
    int group;
    bool products;
    if (d->algo != 0 && !vdnn_cpu_lstm16_variant(be, d, &group, &products))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s with bf16 maps: no algorithm %d",
                         vdnn_layer_kind_name(d->kind), d->algo);
    vdnn_op_desc s;
    widen_desc(be, d, &s);
    vdnn_op_info in = {0};
    st = impl->query(be, &s, &in, err);
    if (st) return st;
    *info = in;
    info->fwd_ws_bytes = layout(d, &s, &in, false).bytes;
    info->bwd_ws_bytes = layout(d, &s, &in, true).bytes;
    info->stream_ok = false;
    info->chunk_images = 0;
    info->aux_bytes *= (size_t)(d->out.n / s.out.n);
    if (aux_bf16(d)) info->aux_bytes = info->aux_bytes / sizeof(float) * sizeof(uint16_t);
    if (inner) *inner = s;
    if (inner_info) *inner_info = in;
    return VDNN_OK;
}

/* Group g of a bf16 map of shape t cut in groups of `per` samples. */
static const void *at_group(const void *p, vdnn_shape t, int g, int per)
{
    return (const char *)p + (size_t)g * (size_t)per * (vdnn_shape_count(t) / (size_t)t.n) * sizeof(uint16_t);
}

static vdnn_status widen(cpu_backend *be, float *dst, const void *src, vdnn_shape s, vdnn_error *err)
{
    return vdnn_cpu_convert(&be->base, dst, VDNN_DTYPE_F32, src, VDNN_DTYPE_BF16, vdnn_shape_count(s), err);
}

static vdnn_status narrow(cpu_backend *be, void *dst, const float *src, vdnn_shape s, vdnn_error *err)
{
    return vdnn_cpu_convert(&be->base, dst, VDNN_DTYPE_BF16, src, VDNN_DTYPE_F32, vdnn_shape_count(s), err);
}

/* Of each sample of input i of the map (d), the part the fp32 op reads (s, read_part): `rows` rows of `cols` values,
 * the first `skip` values on, one every `ld`; one row, the whole sample, but for an LSTM chunk. */
typedef struct sample_part {
    size_t full, skip, rows, cols, ld;
} sample_part;

static sample_part part_of(const vdnn_op_desc *d, const vdnn_op_desc *s, int i)
{
    const size_t full = vdnn_shape_count(d->in[i]) / (size_t)d->in[i].n;
    if (d->kind != VDNN_LAYER_LSTM) return (sample_part){full, 0, 1, full, full};
    const size_t ld = (size_t)d->in[i].w, rows = (size_t)s->in[i].h, cols = (size_t)s->in[i].w;
    const size_t row0 = i == 0 ? (size_t)d->p.step0 : (size_t)d->in[i].h - 1;
    /* Whole rows lie one after another: one run of them. */
    return cols == ld ? (sample_part){full, row0 * ld, 1, rows * cols, rows * cols}
                      : (sample_part){full, row0 * ld, rows, cols, ld};
}

/* Group g's part of input i, widened into dst. */
static vdnn_status widen_input(cpu_backend *be, float *dst, const void *src, const vdnn_op_desc *d,
                               const vdnn_op_desc *s, int i, int g, vdnn_error *err)
{
    const int per = s->out.n;
    const sample_part q = part_of(d, s, i);
    if (q.cols == q.full) return widen(be, dst, at_group(src, d->in[i], g, per), s->in[i], err);
    vdnn_status st = VDNN_OK;
    for (size_t j = 0; j < (size_t)per; j++) {
        const uint16_t *from = (const uint16_t *)src + ((size_t)g * (size_t)per + j) * q.full + q.skip;
        for (size_t r = 0; !st && r < q.rows; r++)
            st = vdnn_cpu_convert(&be->base, dst + (j * q.rows + r) * q.cols, VDNN_DTYPE_F32, from + r * q.ld,
                                  VDNN_DTYPE_BF16, q.cols, err);
    }
    return st;
}

/* Group g's gradient of input i from the fp32 op's (src): what it did not read gets zeros, as the fp32 op writes
 * them. */
static vdnn_status narrow_grad(cpu_backend *be, void *dst, const float *src, const vdnn_op_desc *d,
                               const vdnn_op_desc *s, int i, int g, vdnn_error *err)
{
    const int per = s->out.n;
    const sample_part q = part_of(d, s, i);
    uint16_t *at = (uint16_t *)dst + (size_t)g * (size_t)per * q.full;
    if (q.cols == q.full) return narrow(be, at, src, s->in[i], err);
    memset(at, 0, (size_t)per * q.full * sizeof(uint16_t));
    vdnn_status st = VDNN_OK;
    for (size_t j = 0; j < (size_t)per; j++)
        for (size_t r = 0; !st && r < q.rows; r++)
            st = vdnn_cpu_convert(&be->base, at + j * q.full + q.skip + r * q.ld, VDNN_DTYPE_BF16,
                                  src + (j * q.rows + r) * q.cols, VDNN_DTYPE_F32, q.cols, err);
    return st;
}

/* A call's workspace (aligned) and layout, and the fp32 op's arguments before any group's copies. */
static vdnn_status begin(const vdnn_op *op, const vdnn_op_args *a, bool backward, char **ws, widen_layout *l,
                         vdnn_op_args *a32, vdnn_error *err)
{
    *ws = vdnn_cpu_ws_align(a->ws);
    if (!*ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s %s: bf16 maps need the workspace",
                         vdnn_layer_kind_name(op->maps.kind), backward ? "backward" : "forward");
    *l = layout(&op->maps, &op->d, &op->info, backward);
    *a32 = *a;
    a32->ws = (float *)(*ws + l->inner);
    a32->stream = NULL;
    return VDNN_OK;
}

/* Group g's share of a bf16 aux: its inner op's aux in floats, held as bf16 values. */
static uint16_t *aux_group(const vdnn_op *op, const vdnn_op_args *a, int g)
{
    return (uint16_t *)a->aux + (size_t)g * (op->info.aux_bytes / sizeof(float));
}

/* Group g's inputs (where given and, in backward, read) widened into the workspace, and its share of aux (a bf16
 * aux widened into the workspace for backward; forward rounds it there after the op, widen_aux_done). */
static vdnn_status widen_group(cpu_backend *be, const vdnn_op *op, const vdnn_op_args *a, char *ws,
                               const widen_layout *l, int g, bool backward, vdnn_op_args *a32, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->maps, *s = &op->d;
    vdnn_status st = VDNN_OK;
    for (int i = 0; !st && i < d->n_inputs; i++) {
        const bool x = a->x[i] && (!backward || op->info.bwd_needs_x);
        a32->x[i] = x ? (const float *)(ws + l->x[i]) : NULL;
        if (x) st = widen_input(be, (float *)(ws + l->x[i]), a->x[i], d, s, i, g, err);
    }
    if (a->aux && aux_bf16(d)) {
        a32->aux = (float *)(ws + l->aux);
        if (backward)
            st = vdnn_cpu_convert(&be->base, a32->aux, VDNN_DTYPE_F32, aux_group(op, a, g), VDNN_DTYPE_BF16,
                                  op->info.aux_bytes / sizeof(float), err);
    } else if (a->aux) {
        a32->aux = a->aux + (size_t)g * op->info.aux_bytes / sizeof(float);
    }
    return st;
}

vdnn_status vdnn_cpu_widen_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->maps, *s = &op->d;
    char *ws;
    widen_layout l;
    vdnn_op_args a32;
    vdnn_status st = begin(op, a, false, &ws, &l, &a32, err);
    if (st) return st;
    a32.y = (float *)(ws + l.y);
    const int per = s->out.n, steps = d->out.n / per;
    for (int g = 0; !st && g < steps; g++) {
        st = widen_group(be, op, a, ws, &l, g, false, &a32, err);
        if (!st) st = op->impl->forward(be, op, &a32, err);
        if (!st && a->aux && aux_bf16(d))
            st = vdnn_cpu_convert(&be->base, aux_group(op, a, g), VDNN_DTYPE_BF16, a32.aux, VDNN_DTYPE_F32,
                                  op->info.aux_bytes / sizeof(float), err);
        if (!st && a->y) st = narrow(be, (void *)at_group(a->y, d->out, g, per), a32.y, s->out, err);
    }
    return st;
}

static void add_into(const vdnn_op_desc *d, const vdnn_op_args *a, const vdnn_op_args *a32)
{
    size_t nw, nb;
    param_counts(d, &nw, &nb);
    if (a->dw)
        for (size_t i = 0; i < nw; i++) a->dw[i] += a32->dw[i];
    if (a->db)
        for (size_t i = 0; i < nb; i++) a->db[i] += a32->db[i];
}

vdnn_status vdnn_cpu_widen_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->maps, *s = &op->d;
    char *ws;
    widen_layout l;
    vdnn_op_args a32;
    vdnn_status st = begin(op, a, true, &ws, &l, &a32, err);
    if (st) return st;
    const int per = s->out.n, steps = d->out.n / per;
    for (int i = 0; i < d->n_inputs; i++) a32.dx[i] = a->dx[i] ? (float *)(ws + l.dx[i]) : NULL;
    for (int g = 0; !st && g < steps; g++) {
        st = widen_group(be, op, a, ws, &l, g, true, &a32, err);
        a32.y = op->info.bwd_needs_y && a->y ? (float *)(ws + l.y) : NULL;
        if (!st && a32.y) st = widen(be, a32.y, at_group(a->y, d->out, g, per), s->out, err);
        a32.dy = a->dy ? (const float *)(ws + l.dy) : NULL;
        if (!st && a->dy) st = widen(be, (float *)a32.dy, at_group(a->dy, d->out, g, per), s->out, err);
        /* The first group writes the parameter gradients, the others beside them, added after. */
        a32.dw = a->dw && g ? (float *)(ws + l.dw) : a->dw;
        a32.db = a->db && g ? (float *)(ws + l.db) : a->db;
        if (!st) st = op->impl->backward(be, op, &a32, err);
        if (!st && g) add_into(d, a, &a32);
        for (int i = 0; !st && i < d->n_inputs; i++)
            if (a->dx[i]) st = narrow_grad(be, a->dx[i], a32.dx[i], d, s, i, g, err);
    }
    return st;
}
