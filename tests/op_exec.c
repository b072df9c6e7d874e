/* Runs one op on any backend from host tensors, poisoning outputs and checking they were all written. */
#include "op_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "op_desc.h"
#include "testutil.h"

static float *nan_floats(size_t n)
{
    if (!n) return NULL;
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

void vt_op_data_alloc(vt_op_data *io, const char *name, const vdnn_op_desc *d)
{
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", name);
    io->d = *d;
    vt_op_param_counts(d, &io->nw, &io->nb, &io->nstats);
    for (int i = 0; i < d->n_inputs; i++) {
        io->nx[i] = vdnn_shape_count(d->in[i]);
        io->x[i] = nan_floats(io->nx[i]);
    }
    io->ny = vdnn_shape_count(d->out);
    io->dy = nan_floats(io->ny);
    io->w = nan_floats(io->nw);
    io->b = nan_floats(io->nb);
    io->stats = nan_floats(io->nstats);
    if (d->kind == VDNN_LAYER_SOFTMAX_XENT) {
        io->labels = calloc(vdnn_xent_rows(d->in[0]), sizeof *io->labels);
        assert_non_null(io->labels);
    }
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Residues (7h + 13w) mod 37 differ within every 3x3 window; a random permutation of them per plane, spaced
 * 0.03 apart with a little jitter, keeps max pooling's winner 0.026 clear of the runner-up: more than twice
 * the finite-difference step. */
static void fill_distinct(float *x, vdnn_shape s, uint64_t seed)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ULL + 3;
    int perm[37];
    for (int p = 0; p < s.n * s.c; p++) {
        for (int i = 0; i < 37; i++) perm[i] = i;
        for (int i = 36; i > 0; i--) {
            int j = (int)(xorshift(&r) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        float *plane = x + (size_t)p * (size_t)s.h * (size_t)s.w;
        for (int h = 0; h < s.h; h++)
            for (int w = 0; w < s.w; w++) {
                float jitter = (float)((double)(xorshift(&r) >> 11) / 9007199254740992.0 - 0.5) * 0.004f;
                plane[(size_t)h * s.w + w] = (float)(perm[(7 * h + 13 * w) % 37] - 18) * 0.03f + jitter;
            }
    }
}

/* Per channel, a shuffled ladder over [-1, 1] with jitter of half a rung, scaled and shifted at random: with
 * two values a channel (batch 2 of 1x1 maps) still has them half its range apart. */
static void fill_spread(float *x, vdnn_shape s, uint64_t seed)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ULL + 5;
    const size_t plane = (size_t)s.h * s.w, m = (size_t)s.n * plane;
    size_t *perm = malloc(m * sizeof *perm);
    assert_non_null(perm);
    for (int c = 0; c < s.c; c++) {
        const double shift = (double)(xorshift(&r) >> 11) / 9007199254740992.0 - 0.5;
        const double scale = 0.5 + (double)(xorshift(&r) >> 11) / 9007199254740992.0;
        for (size_t i = 0; i < m; i++) perm[i] = i;
        for (size_t i = m - 1; i > 0; i--) {
            size_t j = (size_t)(xorshift(&r) % (i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (size_t k = 0; k < m; k++) {
            double u = (double)(xorshift(&r) >> 11) / 9007199254740992.0 - 0.5;
            size_t at = (perm[k] / plane * (size_t)s.c + (size_t)c) * plane + perm[k] % plane;
            x[at] = (float)(shift + scale * (-1.0 + (2.0 * (double)k + 1.0 + 0.5 * u) / (double)m));
        }
    }
    free(perm);
}

/* Where a piecewise activation's slope jumps. */
static int kinks(const vdnn_op_desc *d, double k[2])
{
    const vdnn_layer_params *p = &d->p;
    if (d->kind == VDNN_LAYER_HARDSIGMOID && p->alpha != 0.0f) {
        k[0] = -(double)p->beta / p->alpha, k[1] = (1.0 - p->beta) / p->alpha;
        return 2;
    }
    if (d->kind == VDNN_LAYER_HARDSWISH) {
        k[0] = -3.0, k[1] = 3.0;
        return 2;
    }
    if (d->kind == VDNN_LAYER_CLIP) {
        k[0] = p->clip_lo, k[1] = p->clip_hi;
        return 2;
    }
    return 0;
}

static void fill_kinked(float *x, size_t n, const vdnn_op_desc *d, uint64_t seed)
{
    double k[2], r = 1.0;
    const int nk = kinks(d, k);
    for (int j = 0; j < nk; j++) r = fmax(r, fabs(k[j]) + 2.0);
    vt_fill_uniform(x, n, seed, (float)-r, (float)r);
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < nk; j++)
            if (fabs(x[i] - k[j]) < 0.05) x[i] = (float)(k[j] + (x[i] < k[j] ? -0.05 : 0.05));
}

void vt_op_data_random(vt_op_data *io, const char *name, const vdnn_op_desc *d, vt_fill fill, uint64_t seed)
{
    vt_op_data_alloc(io, name, d);
    io->seed = seed * 31 + 5;
    for (int i = 0; i < d->n_inputs; i++) {
        uint64_t s = seed * 131 + 17 * (uint64_t)i;
        if (fill == VT_FILL_DISTINCT || fill == VT_FILL_SPREAD) {
            (fill == VT_FILL_DISTINCT ? fill_distinct : fill_spread)(io->x[i], d->in[i], s);
            continue;
        }
        if (fill == VT_FILL_KINKED) {
            fill_kinked(io->x[i], io->nx[i], d, s);
            continue;
        }
        vt_fill_uniform(io->x[i], io->nx[i], s, -1.f, 1.f);
        if (fill == VT_FILL_AWAY_FROM_ZERO)
            for (size_t k = 0; k < io->nx[i]; k++)
                io->x[i][k] = (io->x[i][k] < 0 ? -1.f : 1.f) * (0.05f + 0.95f * fabsf(io->x[i][k]));
    }
    vt_fill_uniform(io->dy, io->ny, seed + 1, -1.f, 1.f);
    if (d->kind == VDNN_LAYER_BATCHNORM) {
        const size_t c = (size_t)d->in[0].c;
        vt_fill_uniform(io->w, io->nw, seed + 2, 0.5f, 1.5f);
        vt_fill_uniform(io->b, io->nb, seed + 3, -0.5f, 0.5f);
        vt_fill_uniform(io->stats, c, seed + 4, -0.5f, 0.5f);
        vt_fill_uniform(io->stats + c, c, seed + 5, 0.5f, 1.5f);
    } else {
        vt_fill_uniform(io->w, io->nw, seed + 2, -0.5f, 0.5f);
        vt_fill_uniform(io->b, io->nb, seed + 3, -0.5f, 0.5f);
    }
    if (d->kind == VDNN_LAYER_LSTM) {
        /* Parameters at nn.LSTM's initial spread, +-1/sqrt(hidden): uniform in +-1 over hundreds of inputs would
         * saturate every gate, where finite differences measure only their curvature. */
        const float r = 1.0f / sqrtf((float)d->p.filters);
        vt_fill_uniform(io->w, io->nw, seed + 2, -r, r);
        vt_fill_uniform(io->b, io->nb, seed + 3, -r, r);
    }
    if (d->kind == VDNN_LAYER_EMBED)
        /* Token ids: integers below the vocabulary, drawn so that some repeat (their gradients add up). */
        for (size_t k = 0; k < io->nx[0]; k++) io->x[0][k] = (float)((k * 5 + 1 + (size_t)(seed % 7)) % (size_t)d->p.vocab);
    if (io->labels) {
        const int n = (int)vdnn_xent_rows(d->in[0]), k = (int)(io->nx[0] / (size_t)n);
        for (int i = 0; i < n; i++) io->labels[i] = (int32_t)((i * 7 + 3) % k);
        /* Logits spread like a trained classifier's, so the softmax is far from uniform. */
        for (size_t i = 0; i < io->nx[0]; i++) io->x[0][i] *= 4.0f;
    }
}

void vt_op_data_free(vt_op_data *io)
{
    for (int i = 0; i < VDNN_MAX_INPUTS; i++) free(io->x[i]);
    free(io->w), free(io->b), free(io->stats), free(io->dy), free(io->labels);
    memset(io, 0, sizeof *io);
}

vt_fill vt_fill_for(const vdnn_op_desc *d)
{
    if (d->kind == VDNN_LAYER_RELU) return VT_FILL_AWAY_FROM_ZERO;
    if (d->kind == VDNN_LAYER_MAXPOOL) return VT_FILL_DISTINCT;
    if (d->kind == VDNN_LAYER_BATCHNORM) return VT_FILL_SPREAD;
    if (d->kind == VDNN_LAYER_HARDSIGMOID || d->kind == VDNN_LAYER_HARDSWISH || d->kind == VDNN_LAYER_CLIP)
        return VT_FILL_KINKED;
    return VT_FILL_UNIFORM;
}

void vt_to_dtype(void *dst, const float *src, size_t n, vdnn_dtype t)
{
    if (t == VDNN_DTYPE_F32) {
        memcpy(dst, src, n * sizeof *src);
        return;
    }
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = t == VDNN_DTYPE_BF16 ? vdnn_bf16_from_float(src[i]) : vdnn_f16_from_float(src[i]);
}

void vt_from_dtype(float *dst, const void *src, size_t n, vdnn_dtype t)
{
    if (t == VDNN_DTYPE_F32) {
        memcpy(dst, src, n * sizeof *dst);
        return;
    }
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) dst[i] = t == VDNN_DTYPE_BF16 ? vdnn_bf16_to_float(h[i]) : vdnn_f16_to_float(h[i]);
}

static void round_to(float *v, size_t n, vdnn_dtype t)
{
    if (!v || t == VDNN_DTYPE_F32) return;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = t == VDNN_DTYPE_BF16 ? vdnn_bf16_from_float(v[i]) : vdnn_f16_from_float(v[i]);
        v[i] = t == VDNN_DTYPE_BF16 ? vdnn_bf16_to_float(h) : vdnn_f16_to_float(h);
    }
}

void vt_op_data_round(vt_op_data *io, vdnn_dtype t)
{
    for (int i = 0; i < io->d.n_inputs; i++) round_to(io->x[i], io->nx[i], t);
    round_to(io->dy, io->ny, t);
}

/* ---- device buffers ---- */

static void *dev_alloc(vdnn_backend_t *be, size_t bytes)
{
    if (!bytes) return NULL;
    void *p = NULL;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->dev_alloc(be, bytes, &p, &err), err);
    assert_non_null(p);
    return p;
}

static void upload(vdnn_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->upload(be, dst, src, bytes, &err), err);
}

static void *download_new(vdnn_backend_t *be, const void *src, size_t bytes)
{
    if (!bytes || !src) return NULL;
    void *h = malloc(bytes);
    assert_non_null(h);
    vdnn_error err = {0};
    vt_assert_ok(be->ops->download(be, h, src, bytes, &err), err);
    return h;
}

/* Bytes of one value of the op's maps. */
static size_t esize(const vt_exec *e) { return vdnn_dtype_size(e->d.dtype); }

/* n host floats to a map of the op's type on the device. */
static void upload_map(const vt_exec *e, void *dst, const float *src, size_t n)
{
    if (!n) return;
    void *t = malloc(n * esize(e));
    assert_non_null(t);
    vt_to_dtype(t, src, n, e->d.dtype);
    upload(e->be, dst, t, n * esize(e));
    free(t);
}

/* n values of a map of the op's type on the device as new host floats. */
static float *download_map(const vt_exec *e, const void *src, size_t n)
{
    void *t = download_new(e->be, src, n * esize(e));
    if (!t) return NULL;
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    vt_from_dtype(f, t, n, e->d.dtype);
    free(t);
    return f;
}

/* NaN over the buffer: a value an op fails to write stays NaN, and scratch read before written spreads NaN. */
static void poison(vdnn_backend_t *be, void *p, size_t bytes)
{
    if (!p || !bytes) return;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->poison(be, p, bytes, &err), err);
}

void vt_exec_open(vt_exec *e, vdnn_backend_t *be, vt_op_data *in, int algo)
{
    memset(e, 0, sizeof *e);
    e->be = be;
    e->in = in;
    e->d = in->d;
    e->d.algo = algo;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->op_query(be, &e->d, &e->info, &err), err);
    vt_assert_ok(be->ops->op_create(be, &e->d, &e->op, &err), err);
    for (int i = 0; i < in->d.n_inputs; i++) {
        e->x[i] = dev_alloc(be, in->nx[i] * esize(e));
        e->dx[i] = dev_alloc(be, in->nx[i] * esize(e));
    }
    e->y = dev_alloc(be, in->ny * esize(e));
    e->dy = dev_alloc(be, in->ny * esize(e));
    e->w = dev_alloc(be, in->nw * sizeof(float));
    e->dw = dev_alloc(be, in->nw * sizeof(float));
    e->b = dev_alloc(be, in->nb * sizeof(float));
    e->db = dev_alloc(be, in->nb * sizeof(float));
    e->stats = dev_alloc(be, in->nstats * sizeof(float));
    e->aux = dev_alloc(be, e->info.aux_bytes);
    size_t ws = e->info.fwd_ws_bytes > e->info.bwd_ws_bytes ? e->info.fwd_ws_bytes : e->info.bwd_ws_bytes;
    e->ws = dev_alloc(be, ws);
    if (in->labels) {
        e->labels = dev_alloc(be, vdnn_xent_rows(in->d.in[0]) * sizeof(int32_t));
        e->loss = dev_alloc(be, sizeof(float));
    }
}

void vt_exec_close(vt_exec *e)
{
    vdnn_backend_t *be = e->be;
    for (int i = 0; i < VDNN_MAX_INPUTS; i++) {
        be->ops->dev_free(be, e->x[i]);
        be->ops->dev_free(be, e->dx[i]);
    }
    void *all[] = {e->y, e->dy, e->w, e->dw, e->b, e->db, e->stats, e->aux, e->ws, e->labels, e->loss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) be->ops->dev_free(be, all[i]);
    be->ops->op_destroy(be, e->op);
    memset(e, 0, sizeof *e);
}

void vt_exec_upload(vt_exec *e)
{
    const vt_op_data *in = e->in;
    for (int i = 0; i < in->d.n_inputs; i++) upload_map(e, e->x[i], in->x[i], in->nx[i]);
    upload_map(e, e->dy, in->dy, in->ny);
    upload(e->be, e->w, in->w, in->nw * sizeof(float));
    upload(e->be, e->b, in->b, in->nb * sizeof(float));
    upload(e->be, e->stats, in->stats, in->nstats * sizeof(float));
    if (in->labels) upload(e->be, e->labels, in->labels, vdnn_xent_rows(in->d.in[0]) * sizeof(int32_t));
}

static vdnn_op_args forward_args(const vt_exec *e, bool update_stats)
{
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < e->d.n_inputs; i++) a.x[i] = e->x[i];
    a.y = e->y, a.w = e->w, a.b = e->b, a.stats = e->stats, a.update_stats = update_stats;
    a.aux = e->aux, a.ws = e->ws, a.labels = e->labels, a.loss = e->loss, a.seed = e->in->seed;
    return a;
}

static void run_forward(vt_exec *e, const vdnn_op_args *a)
{
    vdnn_error err = {0};
    vt_assert_ok(e->be->ops->op_forward(e->be, e->op, a, &err), err);
    vt_assert_ok(e->be->ops->sync_all(e->be, &err), err);
}

double vt_exec_objective(vt_exec *e, double *abs_sum)
{
    vt_exec_upload(e);
    vdnn_op_args a = forward_args(e, false);
    run_forward(e, &a);
    const vt_op_data *in = e->in;
    if (in->labels) {
        float loss;
        vdnn_error err = {0};
        vt_assert_ok(e->be->ops->download(e->be, &loss, e->loss, sizeof loss, &err), err);
        if (abs_sum) *abs_sum = fabs((double)loss);
        return loss;
    }
    float *y = download_map(e, e->y, in->ny);
    double l = 0.0, scale = 0.0;
    for (size_t i = 0; i < in->ny; i++) {
        l += (double)y[i] * (double)in->dy[i];
        scale += fabs((double)y[i] * (double)in->dy[i]);
    }
    free(y);
    if (abs_sum) *abs_sum = scale;
    return l;
}

bool vt_op_info_same(const vdnn_op_info *a, const vdnn_op_info *b, char *msg, size_t len)
{
    snprintf(msg, len,
             "aux %zu/%zu, fwd ws %zu/%zu, bwd ws %zu/%zu, needs x %d/%d, needs y %d/%d, in place %d/%d, "
             "bwd in place %d/%d, stream %d/%d, chunk %d/%d",
             a->aux_bytes, b->aux_bytes, a->fwd_ws_bytes, b->fwd_ws_bytes, a->bwd_ws_bytes, b->bwd_ws_bytes,
             a->bwd_needs_x, b->bwd_needs_x, a->bwd_needs_y, b->bwd_needs_y, a->inplace_ok, b->inplace_ok,
             a->bwd_inplace_ok, b->bwd_inplace_ok, a->stream_ok, b->stream_ok, a->chunk_images, b->chunk_images);
    return a->aux_bytes == b->aux_bytes && a->fwd_ws_bytes == b->fwd_ws_bytes && a->bwd_ws_bytes == b->bwd_ws_bytes &&
           a->bwd_needs_x == b->bwd_needs_x && a->bwd_needs_y == b->bwd_needs_y && a->inplace_ok == b->inplace_ok &&
           a->bwd_inplace_ok == b->bwd_inplace_ok && a->stream_ok == b->stream_ok && a->chunk_images == b->chunk_images;
}

/* ---- one checked call ---- */

static void expect_written(const vt_exec *e, const char *what, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            fail_msg("%s on %s (algorithm %d): %s[%zu] = %g: not written (NaN is the poison) or not finite",
                     e->in->name, e->be->ops->name, e->d.algo, what, i, (double)v[i]);
}

static float *fetch(const vt_exec *e, const char *what, const float *dev, size_t n)
{
    float *h = download_new(e->be, dev, n * sizeof(float));
    expect_written(e, what, h, n);
    return h;
}

/* fetch for a map of the op's type. */
static float *fetch_map(const vt_exec *e, const char *what, const float *dev, size_t n)
{
    float *h = download_map(e, dev, n);
    expect_written(e, what, h, n);
    return h;
}

/* The maps' values are of the op's type (vt_op_data_round), so they survive the round trip exactly. */
static void expect_intact(const vt_exec *e, const char *what, const float *dev, const float *want, size_t n, bool map)
{
    if (!n) return;
    float *got = map ? download_map(e, dev, n) : download_new(e->be, dev, n * sizeof(float));
    if (memcmp(got, want, n * sizeof(float)))
        fail_msg("%s on %s (algorithm %d): the op changed its input %s", e->in->name, e->be->ops->name, e->d.algo, what);
    free(got);
}

static void run_backward(vt_exec *e, const vt_call *c, float *y_dev, vt_op_result *out)
{
    const vt_op_data *in = e->in;
    const int n_in = in->d.n_inputs;
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < n_in; i++) {
        if (e->info.bwd_needs_x) a.x[i] = e->x[i];
        if (!(c->skip_dx >> i & 1)) a.dx[i] = e->dx[i];
        poison(e->be, a.dx[i], in->nx[i] * esize(e));
    }
    if (e->info.bwd_needs_y) a.y = y_dev;
    poison(e->be, e->dw, in->nw * sizeof(float));
    poison(e->be, e->db, in->nb * sizeof(float));
    poison(e->be, e->ws, e->info.bwd_ws_bytes);
    a.w = e->w, a.b = c->bwd_no_bias ? NULL : e->b, a.stats = e->stats, a.aux = e->aux, a.ws = e->ws;
    a.dw = e->dw, a.db = e->db, a.labels = e->labels, a.seed = in->seed;
    if (in->labels) {
        a.dy = NULL; /* softmax_xent's gradient comes from the labels */
    } else if (c->bwd_inplace) {
        upload_map(e, e->dx[0], in->dy, in->ny);
        a.dy = a.dx[0] = e->dx[0];
    } else {
        a.dy = e->dy;
    }
    vdnn_error err = {0};
    vt_assert_ok(e->be->ops->op_backward(e->be, e->op, &a, &err), err);
    vt_assert_ok(e->be->ops->sync_all(e->be, &err), err);
    char what[16];
    for (int i = 0; i < n_in; i++) {
        snprintf(what, sizeof what, "dx[%d]", i);
        if (a.dx[i]) out->dx[i] = fetch_map(e, what, a.dx[i], in->nx[i]);
    }
    out->dw = fetch(e, "dw", e->dw, in->nw);
    out->db = fetch(e, "db", e->db, in->nb);
    if (!c->bwd_inplace && !in->labels) expect_intact(e, "dy", e->dy, in->dy, in->ny, true);
}

void vt_op_run(vdnn_backend_t *be, vt_op_data *in, const vt_call *c, vt_op_result *out)
{
    memset(out, 0, sizeof *out);
    vt_exec e;
    vt_exec_open(&e, be, in, c->algo);
    out->info = e.info;
    vt_exec_upload(&e);
    float *y_dev = c->fwd_inplace ? e.x[0] : e.y;
    if (!c->fwd_inplace) poison(be, e.y, in->ny * esize(&e));
    poison(be, e.aux, e.info.aux_bytes);
    poison(be, e.ws, e.info.fwd_ws_bytes);
    poison(be, e.loss, e.loss ? sizeof(float) : 0);
    vdnn_op_args a = forward_args(&e, c->update_stats);
    a.y = y_dev;
    if (c->fwd_no_aux) a.aux = NULL;
    run_forward(&e, &a);

    out->y = fetch_map(&e, "y", y_dev, in->ny);
    if (e.loss) {
        float *loss = fetch(&e, "loss", e.loss, 1);
        out->loss = *loss;
        free(loss);
    }
    out->aux = download_new(be, e.aux, e.info.aux_bytes);
    out->stats = fetch(&e, "running statistics", e.stats, in->nstats);
    if (!(c->update_stats && in->d.training) && in->nstats && memcmp(out->stats, in->stats, in->nstats * sizeof(float)))
        fail_msg("%s on %s: running statistics changed by a forward that must leave them (update_stats %d, training %d)",
                 in->name, be->ops->name, c->update_stats, in->d.training);
    for (int i = c->fwd_inplace ? 1 : 0; i < in->d.n_inputs; i++)
        expect_intact(&e, "x", e.x[i], in->x[i], in->nx[i], true);
    expect_intact(&e, "w", e.w, in->w, in->nw, false);
    expect_intact(&e, "b", e.b, in->b, in->nb, false);

    if (c->backward) run_backward(&e, c, y_dev, out);
    vt_exec_close(&e);
}

void vt_op_result_free(vt_op_result *r)
{
    for (int i = 0; i < VDNN_MAX_INPUTS; i++) free(r->dx[i]);
    free(r->y), free(r->dw), free(r->db), free(r->stats), free(r->aux);
    memset(r, 0, sizeof *r);
}
