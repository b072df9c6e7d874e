/* Every CPU op through the public backend dispatch: forward against naive double references, backward against finite differences. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"

/* Tolerances.
 * Forward: |y - ref| <= FWD_TOL * (1 + |ref|), the reference computed in double.
 * Backward: central differences of L = sum(y * r) (r uniform in [-1, 1]; for
 * softmax_xent L is the loss itself), L summed in double over float32 outputs,
 * step FD_EPS on O(1) values. For every checked element
 * |fd - g| <= GRAD_TOL * max(max|g| over the tensor, 0.1).
 * Float32 rounding of L contributes ~1e-5 to fd; truncation error is O(eps^2).
 * Max pooling and ReLU inputs are kept FD_EPS-far from ties and kinks. */
#define FWD_TOL 1e-4
#define FD_EPS 1e-2
#define GRAD_TOL 2e-3
/* Larger tensors are checked on an evenly strided subset of elements. */
#define MAX_FD_CHECKS 300

enum { X_UNIFORM, X_DISTINCT, X_AWAY_FROM_ZERO };

#define IDX(s, n_, c_, h_, w_) ((((size_t)(n_) * (size_t)(s).c + (size_t)(c_)) * (size_t)(s).h + (size_t)(h_)) * (size_t)(s).w + (size_t)(w_))

/* ---------- op descriptions ---------- */

static vdnn_shape shp(int n, int c, int h, int w) { return (vdnn_shape){n, c, h, w}; }

static vdnn_op_desc one_input(vdnn_layer_kind k, vdnn_shape in, vdnn_shape out)
{
    vdnn_op_desc d;
    memset(&d, 0, sizeof d);
    d.kind = k;
    d.n_inputs = 1;
    d.in[0] = in;
    d.out = out;
    d.training = true;
    return d;
}

static vdnn_op_desc conv_desc(vdnn_shape in, int filters, int kh, int kw, int sh, int sw, int ph, int pw, int groups,
                              int bias)
{
    vdnn_shape out = shp(in.n, filters, (in.h + 2 * ph - kh) / sh + 1, (in.w + 2 * pw - kw) / sw + 1);
    vdnn_op_desc d = one_input(VDNN_LAYER_CONV, in, out);
    d.p.kernel_h = kh, d.p.kernel_w = kw, d.p.stride_h = sh, d.p.stride_w = sw, d.p.pad_h = ph, d.p.pad_w = pw;
    d.p.groups = groups, d.p.filters = filters, d.p.bias = bias;
    return d;
}

static vdnn_op_desc pool_desc(vdnn_layer_kind k, vdnn_shape in, int kh, int kw, int sh, int sw, int ph, int pw)
{
    vdnn_shape out = shp(in.n, in.c, (in.h + 2 * ph - kh) / sh + 1, (in.w + 2 * pw - kw) / sw + 1);
    vdnn_op_desc d = one_input(k, in, out);
    d.p.kernel_h = kh, d.p.kernel_w = kw, d.p.stride_h = sh, d.p.stride_w = sw, d.p.pad_h = ph, d.p.pad_w = pw;
    return d;
}

static vdnn_op_desc lrn_desc(vdnn_shape in, int size, float alpha, float beta, float k)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_LRN, in, in);
    d.p.lrn_size = size, d.p.lrn_alpha = alpha, d.p.lrn_beta = beta, d.p.lrn_k = k;
    return d;
}

static vdnn_op_desc bn_desc(vdnn_shape in, bool training)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_BATCHNORM, in, in);
    d.p.bn_eps = 1e-5f, d.p.bn_momentum = 0.1f;
    d.training = training;
    return d;
}

static vdnn_op_desc fc_desc(vdnn_shape in, int outputs, int bias)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_FC, in, shp(in.n, outputs, 1, 1));
    d.p.filters = outputs, d.p.bias = bias;
    return d;
}

static vdnn_op_desc dropout_desc(vdnn_shape in, float p, bool training)
{
    vdnn_op_desc d = one_input(VDNN_LAYER_DROPOUT, in, in);
    d.p.dropout_p = p;
    d.training = training;
    return d;
}

static vdnn_op_desc multi_desc(vdnn_layer_kind k, int n_inputs, const vdnn_shape *in)
{
    vdnn_op_desc d = one_input(k, in[0], in[0]);
    d.n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) d.in[i] = in[i];
    if (k == VDNN_LAYER_CONCAT)
        for (int i = 1; i < n_inputs; i++) d.out.c += in[i].c;
    return d;
}

static void param_counts(const vdnn_op_desc *d, size_t *nw, size_t *nb, size_t *nst)
{
    *nw = *nb = *nst = 0;
    vdnn_shape in = d->in[0];
    if (d->kind == VDNN_LAYER_CONV) {
        *nw = (size_t)d->p.filters * (size_t)(in.c / d->p.groups) * (size_t)d->p.kernel_h * (size_t)d->p.kernel_w;
        *nb = d->p.bias ? (size_t)d->p.filters : 0;
    } else if (d->kind == VDNN_LAYER_FC) {
        *nw = (size_t)d->p.filters * (size_t)in.c * (size_t)in.h * (size_t)in.w;
        *nb = d->p.bias ? (size_t)d->p.filters : 0;
    } else if (d->kind == VDNN_LAYER_BATCHNORM) {
        *nw = *nb = (size_t)in.c;
        *nst = 2 * (size_t)in.c;
    }
}

/* ---------- one op with its buffers, every one exactly the size query() reports ---------- */

typedef struct gc {
    vdnn_backend_t *be;
    const char *name;
    vdnn_op_desc d;
    vdnn_op_info info;
    vdnn_op *op;
    size_t nx[VDNN_MAX_INPUTS], ny, nw, nb, nst;
    float *x[VDNN_MAX_INPUTS], *dx[VDNN_MAX_INPUTS];
    float *y, *r, *w, *b, *dw, *db, *stats, *aux, *fws, *bws;
    int32_t *labels;
    float loss;
    uint64_t seed;
} gc;

static void *alloc_bytes(size_t bytes)
{
    if (!bytes) return NULL;
    void *p = malloc(bytes);
    assert_non_null(p);
    memset(p, 0xff, bytes); /* NaN pattern: an op that reads scratch before writing it shows up */
    return p;
}

static float *alloc_f(size_t n) { return alloc_bytes(n * sizeof(float)); }

static bool is_xent(const gc *t) { return t->d.kind == VDNN_LAYER_SOFTMAX_XENT; }

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_input(float *x, size_t n, int style, uint64_t seed)
{
    vt_fill_uniform(x, n, seed, -1.f, 1.f);
    if (style == X_AWAY_FROM_ZERO) {
        for (size_t i = 0; i < n; i++) x[i] = (x[i] < 0 ? -1.f : 1.f) * (0.05f + 0.95f * fabsf(x[i]));
    } else if (style == X_DISTINCT) {
        /* A shuffled ladder with steps of 3*FD_EPS: no ties that a perturbation could reorder. */
        size_t *perm = malloc(n * sizeof *perm);
        assert_non_null(perm);
        for (size_t i = 0; i < n; i++) perm[i] = i;
        uint64_t s = seed * 2654435761u + 7;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(rng_next(&s) % i);
            size_t tmp = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = tmp;
        }
        for (size_t i = 0; i < n; i++) x[i] = ((float)perm[i] - (float)n / 2) * (float)(3 * FD_EPS);
        free(perm);
    }
}

static void gc_init(gc *t, vdnn_backend_t *be, const char *name, const vdnn_op_desc *d, int style, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->be = be, t->name = name, t->d = *d, t->seed = seed;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->op_query(be, d, &t->info, &err), err);
    vt_assert_ok(be->ops->op_create(be, d, &t->op, &err), err);
    param_counts(d, &t->nw, &t->nb, &t->nst);
    for (int i = 0; i < d->n_inputs; i++) {
        t->nx[i] = vdnn_shape_count(d->in[i]);
        t->x[i] = alloc_f(t->nx[i]);
        t->dx[i] = alloc_f(t->nx[i]);
        fill_input(t->x[i], t->nx[i], style, seed * 31 + (uint64_t)i);
    }
    t->ny = vdnn_shape_count(d->out);
    t->y = alloc_f(t->ny);
    t->r = alloc_f(t->ny);
    vt_fill_uniform(t->r, t->ny, seed + 1000, -1.f, 1.f);
    t->w = alloc_f(t->nw), t->dw = alloc_f(t->nw);
    t->b = alloc_f(t->nb), t->db = alloc_f(t->nb);
    t->stats = alloc_f(t->nst);
    if (d->kind == VDNN_LAYER_BATCHNORM) {
        int c = d->in[0].c;
        vt_fill_uniform(t->w, t->nw, seed + 1, 0.5f, 1.5f);
        vt_fill_uniform(t->b, t->nb, seed + 2, -0.5f, 0.5f);
        vt_fill_uniform(t->stats, (size_t)c, seed + 3, -0.2f, 0.2f);
        vt_fill_uniform(t->stats + c, (size_t)c, seed + 4, 0.5f, 1.5f);
    } else {
        vt_fill_uniform(t->w, t->nw, seed + 1, -0.5f, 0.5f);
        vt_fill_uniform(t->b, t->nb, seed + 2, -0.5f, 0.5f);
    }
    t->aux = alloc_bytes(t->info.aux_bytes);
    t->fws = alloc_bytes(t->info.fwd_ws_bytes);
    t->bws = alloc_bytes(t->info.bwd_ws_bytes);
    if (is_xent(t)) {
        t->labels = malloc((size_t)d->in[0].n * sizeof *t->labels);
        assert_non_null(t->labels);
        for (int i = 0; i < d->in[0].n; i++) t->labels[i] = (int32_t)((i * 7 + 3) % d->in[0].c);
    }
}

static void gc_free(gc *t)
{
    t->be->ops->op_destroy(t->be, t->op);
    for (int i = 0; i < t->d.n_inputs; i++) {
        free(t->x[i]);
        free(t->dx[i]);
    }
    free(t->y), free(t->r), free(t->w), free(t->dw), free(t->b), free(t->db), free(t->stats);
    free(t->aux), free(t->fws), free(t->bws), free(t->labels);
}

static vdnn_op_args fwd_args(gc *t, bool update_stats)
{
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < t->d.n_inputs; i++) a.x[i] = t->x[i];
    a.y = t->y, a.w = t->w, a.b = t->b, a.stats = t->stats, a.update_stats = update_stats;
    a.aux = t->aux, a.ws = t->fws, a.labels = t->labels, a.seed = t->seed;
    a.loss = is_xent(t) ? &t->loss : NULL;
    return a;
}

static void gc_forward(gc *t, bool update_stats)
{
    vdnn_error err = {0};
    vdnn_op_args a = fwd_args(t, update_stats);
    vt_assert_ok(t->be->ops->op_forward(t->be, t->op, &a, &err), err);
}

/* Backward gets x and y only if query() says it needs them: a false flag fails here. */
static vdnn_op_args bwd_args(gc *t)
{
    vdnn_op_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < t->d.n_inputs; i++) {
        a.x[i] = t->info.bwd_needs_x ? t->x[i] : NULL;
        a.dx[i] = t->dx[i];
    }
    a.y = t->info.bwd_needs_y ? t->y : NULL;
    a.w = t->w, a.b = t->b, a.stats = t->stats, a.aux = t->aux, a.ws = t->bws;
    a.dy = is_xent(t) ? NULL : t->r;
    a.dw = t->dw, a.db = t->db, a.labels = t->labels, a.seed = t->seed;
    return a;
}

static void poison_grads(gc *t)
{
    for (int i = 0; i < t->d.n_inputs; i++) memset(t->dx[i], 0xff, t->nx[i] * sizeof(float));
    if (t->nw) memset(t->dw, 0xff, t->nw * sizeof(float));
    if (t->nb) memset(t->db, 0xff, t->nb * sizeof(float));
}

static void gc_backward(gc *t)
{
    vdnn_error err = {0};
    poison_grads(t); /* gradients are overwritten, never accumulated */
    vdnn_op_args a = bwd_args(t);
    vt_assert_ok(t->be->ops->op_backward(t->be, t->op, &a, &err), err);
}

static double gc_objective(gc *t)
{
    gc_forward(t, false);
    if (is_xent(t)) return t->loss;
    double l = 0.0;
    for (size_t i = 0; i < t->ny; i++) l += (double)t->y[i] * t->r[i];
    return l;
}

/* ---------- naive references (double accumulation) ---------- */

static void ref_conv(const gc *t, double *y)
{
    const vdnn_layer_params *p = &t->d.p;
    vdnn_shape in = t->d.in[0], out = t->d.out;
    int cg = in.c / p->groups, fg = p->filters / p->groups;
    for (int n = 0; n < out.n; n++)
        for (int o = 0; o < out.c; o++)
            for (int oh = 0; oh < out.h; oh++)
                for (int ow = 0; ow < out.w; ow++) {
                    double s = p->bias ? t->b[o] : 0.0;
                    int g = o / fg;
                    for (int ic = 0; ic < cg; ic++)
                        for (int i = 0; i < p->kernel_h; i++)
                            for (int j = 0; j < p->kernel_w; j++) {
                                int ih = oh * p->stride_h - p->pad_h + i, iw = ow * p->stride_w - p->pad_w + j;
                                if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                                double wv = t->w[(((size_t)o * cg + ic) * p->kernel_h + i) * p->kernel_w + j];
                                s += wv * t->x[0][IDX(in, n, g * cg + ic, ih, iw)];
                            }
                    y[IDX(out, n, o, oh, ow)] = s;
                }
}

static void ref_pool(const gc *t, double *y)
{
    const vdnn_layer_params *p = &t->d.p;
    vdnn_shape in = t->d.in[0], out = t->d.out;
    bool max = t->d.kind == VDNN_LAYER_MAXPOOL;
    for (int n = 0; n < out.n; n++)
        for (int c = 0; c < out.c; c++)
            for (int oh = 0; oh < out.h; oh++)
                for (int ow = 0; ow < out.w; ow++) {
                    double s = max ? -INFINITY : 0.0;
                    for (int i = 0; i < p->kernel_h; i++)
                        for (int j = 0; j < p->kernel_w; j++) {
                            int ih = oh * p->stride_h - p->pad_h + i, iw = ow * p->stride_w - p->pad_w + j;
                            if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                            double v = t->x[0][IDX(in, n, c, ih, iw)];
                            s = max ? fmax(s, v) : s + v;
                        }
                    /* count_include_pad: the divisor is the whole window */
                    y[IDX(out, n, c, oh, ow)] = max ? s : s / (p->kernel_h * p->kernel_w);
                }
}

static void ref_lrn(const gc *t, double *y)
{
    const vdnn_layer_params *p = &t->d.p;
    vdnn_shape s = t->d.in[0];
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int h = 0; h < s.h; h++)
                for (int w = 0; w < s.w; w++) {
                    double sum = 0.0;
                    for (int cc = c - p->lrn_size / 2; cc <= c + (p->lrn_size - 1) / 2; cc++) {
                        if (cc < 0 || cc >= s.c) continue;
                        double v = t->x[0][IDX(s, n, cc, h, w)];
                        sum += v * v;
                    }
                    double den = pow(p->lrn_k + p->lrn_alpha / p->lrn_size * sum, p->lrn_beta);
                    y[IDX(s, n, c, h, w)] = t->x[0][IDX(s, n, c, h, w)] / den;
                }
}

/* Batch mean and biased variance per channel. */
static void batch_stats(const float *x, vdnn_shape s, double *mean, double *var)
{
    double m = (double)s.n * s.h * s.w;
    for (int c = 0; c < s.c; c++) {
        double sum = 0.0, sq = 0.0;
        for (int n = 0; n < s.n; n++)
            for (int i = 0; i < s.h * s.w; i++) sum += x[IDX(s, n, c, 0, 0) + (size_t)i];
        mean[c] = sum / m;
        for (int n = 0; n < s.n; n++)
            for (int i = 0; i < s.h * s.w; i++) {
                double dv = x[IDX(s, n, c, 0, 0) + (size_t)i] - mean[c];
                sq += dv * dv;
            }
        var[c] = sq / m;
    }
}

static void ref_bn(const gc *t, double *y)
{
    vdnn_shape s = t->d.in[0];
    double *mean = calloc((size_t)s.c, sizeof *mean), *var = calloc((size_t)s.c, sizeof *var);
    assert_non_null(mean), assert_non_null(var);
    if (t->d.training) {
        batch_stats(t->x[0], s, mean, var);
    } else {
        for (int c = 0; c < s.c; c++) mean[c] = t->stats[c], var[c] = t->stats[s.c + c];
    }
    for (int n = 0; n < s.n; n++)
        for (int c = 0; c < s.c; c++)
            for (int i = 0; i < s.h * s.w; i++) {
                size_t k = IDX(s, n, c, 0, 0) + (size_t)i;
                y[k] = t->w[c] * (t->x[0][k] - mean[c]) / sqrt(var[c] + t->d.p.bn_eps) + t->b[c];
            }
    free(mean), free(var);
}

static void ref_fc(const gc *t, double *y)
{
    vdnn_shape in = t->d.in[0];
    size_t k = (size_t)in.c * in.h * in.w;
    int o_n = t->d.p.filters;
    for (int n = 0; n < in.n; n++)
        for (int o = 0; o < o_n; o++) {
            double s = t->d.p.bias ? t->b[o] : 0.0;
            for (size_t i = 0; i < k; i++) s += (double)t->w[(size_t)o * k + i] * t->x[0][(size_t)n * k + i];
            y[(size_t)n * o_n + o] = s;
        }
}

static void reference(const gc *t, double *y, double *loss)
{
    const vdnn_op_desc *d = &t->d;
    size_t n0 = t->nx[0];
    switch (d->kind) {
    case VDNN_LAYER_CONV: ref_conv(t, y); break;
    case VDNN_LAYER_MAXPOOL:
    case VDNN_LAYER_AVGPOOL: ref_pool(t, y); break;
    case VDNN_LAYER_RELU:
        for (size_t i = 0; i < n0; i++) y[i] = t->x[0][i] > 0 ? t->x[0][i] : 0.0;
        break;
    case VDNN_LAYER_LRN: ref_lrn(t, y); break;
    case VDNN_LAYER_BATCHNORM: ref_bn(t, y); break;
    case VDNN_LAYER_FC: ref_fc(t, y); break;
    case VDNN_LAYER_DROPOUT: {
        float p = d->p.dropout_p;
        for (size_t i = 0; i < n0; i++)
            y[i] = !d->training ? t->x[0][i] : vdnn_dropout_keep(t->seed, i, p) ? t->x[0][i] / (1.0 - p) : 0.0;
        break;
    }
    case VDNN_LAYER_CONCAT: {
        int off = 0;
        for (int i = 0; i < d->n_inputs; i++) {
            vdnn_shape s = d->in[i];
            for (int n = 0; n < s.n; n++)
                for (int c = 0; c < s.c; c++)
                    for (int k = 0; k < s.h * s.w; k++)
                        y[IDX(d->out, n, off + c, 0, 0) + (size_t)k] = t->x[i][IDX(s, n, c, 0, 0) + (size_t)k];
            off += s.c;
        }
        break;
    }
    case VDNN_LAYER_ADD:
        for (size_t k = 0; k < n0; k++) {
            y[k] = 0.0;
            for (int i = 0; i < d->n_inputs; i++) y[k] += t->x[i][k];
        }
        break;
    case VDNN_LAYER_GAP: {
        vdnn_shape s = d->in[0];
        for (int n = 0; n < s.n; n++)
            for (int c = 0; c < s.c; c++) {
                double sum = 0.0;
                for (int k = 0; k < s.h * s.w; k++) sum += t->x[0][IDX(s, n, c, 0, 0) + (size_t)k];
                y[(size_t)n * s.c + c] = sum / (s.h * s.w);
            }
        break;
    }
    case VDNN_LAYER_FLATTEN:
        for (size_t i = 0; i < n0; i++) y[i] = t->x[0][i];
        break;
    case VDNN_LAYER_SOFTMAX_XENT: {
        int n_b = d->in[0].n, k = d->in[0].c;
        *loss = 0.0;
        for (int n = 0; n < n_b; n++) {
            const float *z = t->x[0] + (size_t)n * k;
            double mx = z[0], sum = 0.0;
            for (int c = 1; c < k; c++) mx = fmax(mx, z[c]);
            for (int c = 0; c < k; c++) sum += exp(z[c] - mx);
            for (int c = 0; c < k; c++) y[(size_t)n * k + c] = exp(z[c] - mx) / sum;
            *loss += (log(sum) + mx - z[t->labels[n]]) / n_b;
        }
        break;
    }
    default: fail_msg("no reference for layer kind %d", (int)d->kind);
    }
}

/* ---------- checks ---------- */

static void check_forward(gc *t)
{
    gc_forward(t, false);
    double *ref = calloc(t->ny, sizeof *ref), loss = 0.0;
    assert_non_null(ref);
    reference(t, ref, &loss);
    for (size_t i = 0; i < t->ny; i++)
        if (!(fabs(t->y[i] - ref[i]) <= FWD_TOL * (1.0 + fabs(ref[i]))))
            fail_msg("%s forward: y[%zu] = %.7g, reference %.7g", t->name, i, (double)t->y[i], ref[i]);
    if (is_xent(t) && !(fabs(t->loss - loss) <= FWD_TOL * (1.0 + loss)))
        fail_msg("%s forward: loss %.7g, reference %.7g", t->name, (double)t->loss, loss);
    free(ref);
}

static void fd_check(gc *t, float *param, size_t n, const float *g, const char *what)
{
    if (!n) return;
    double gmax = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(g[j])) fail_msg("%s %s[%zu] = %g (not written?)", t->name, what, j, (double)g[j]);
        gmax = fmax(gmax, fabs(g[j]));
    }
    double scale = fmax(gmax, 0.1), worst = 0.0, worst_fd = 0.0;
    size_t step = n > MAX_FD_CHECKS ? (n + MAX_FD_CHECKS - 1) / MAX_FD_CHECKS : 1, worst_j = 0;
    for (size_t j = (size_t)(t->seed % step); j < n; j += step) {
        float v = param[j], vp = v + (float)FD_EPS, vm = v - (float)FD_EPS;
        param[j] = vp;
        double lp = gc_objective(t);
        param[j] = vm;
        double lm = gc_objective(t);
        param[j] = v;
        double fd = (lp - lm) / ((double)vp - (double)vm);
        double e = fabs(fd - g[j]) / scale;
        if (e >= worst) worst = e, worst_j = j, worst_fd = fd;
    }
    if (!(worst <= GRAD_TOL))
        fail_msg("%s: %s[%zu] = %.6g but finite differences give %.6g (error %.3g of max |g| %.3g)", t->name, what,
                 worst_j, (double)g[worst_j], worst_fd, worst, gmax);
}

/* Forward against the reference, then backward against finite differences for every input and parameter. */
static void gradcheck(vdnn_backend_t *be, const char *name, vdnn_op_desc d, int style, uint64_t seed)
{
    gc t;
    gc_init(&t, be, name, &d, style, seed);
    check_forward(&t);
    bool has_backward = !(d.kind == VDNN_LAYER_BATCHNORM && !d.training);
    if (has_backward) {
        gc_forward(&t, false);
        gc_backward(&t);
        char what[32];
        for (int i = 0; i < d.n_inputs; i++) {
            snprintf(what, sizeof what, "dx%d", i);
            fd_check(&t, t.x[i], t.nx[i], t.dx[i], what);
        }
        fd_check(&t, t.w, t.nw, t.dw, d.kind == VDNN_LAYER_BATCHNORM ? "dgamma" : "dw");
        fd_check(&t, t.b, t.nb, t.db, d.kind == VDNN_LAYER_BATCHNORM ? "dbeta" : "db");
    }
    gc_free(&t);
}

/* ---------- tests ---------- */

static int setup(void **state)
{
    vdnn_error err = {0};
    vdnn_cpu_options opt = {0};
    vdnn_backend_t *be = NULL;
    if (vdnn_backend_cpu_create(&opt, &be, &err)) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        return -1;
    }
    *state = be;
    return 0;
}

static int teardown(void **state)
{
    vdnn_backend_destroy(*state);
    return 0;
}

static void test_conv(void **state)
{
    vdnn_backend_t *be = *state;
    gradcheck(be, "conv 3x3 s1 p1", conv_desc(shp(2, 3, 6, 6), 4, 3, 3, 1, 1, 1, 1, 1, 1), X_UNIFORM, 1);
    gradcheck(be, "conv 5x5 s2 p0 (floored output)", conv_desc(shp(2, 3, 10, 10), 4, 5, 5, 2, 2, 0, 0, 1, 1),
              X_UNIFORM, 2);
    gradcheck(be, "conv 1x1 no bias", conv_desc(shp(2, 8, 5, 5), 6, 1, 1, 1, 1, 0, 0, 1, 0), X_UNIFORM, 3);
    gradcheck(be, "conv 7x7 s2 p3", conv_desc(shp(1, 3, 12, 12), 4, 7, 7, 2, 2, 3, 3, 1, 1), X_UNIFORM, 4);
    gradcheck(be, "conv 5x5 s1 p2", conv_desc(shp(2, 2, 7, 7), 3, 5, 5, 1, 1, 2, 2, 1, 1), X_UNIFORM, 5);
    gradcheck(be, "conv 11x11 s4 p2 (AlexNet conv1 shape)", conv_desc(shp(1, 3, 23, 23), 2, 11, 11, 4, 4, 2, 2, 1, 1),
              X_UNIFORM, 6);
}

/* Every convolution algorithm, with the batch cut into chunks (a small chunk cap makes the test's
 * shapes chunk as VGG's do at batch 256): forward against the reference and backward against finite
 * differences, so chunked copies and summed weight gradients are checked, Winograd included. */
static void test_conv_algorithms_chunked(void **state)
{
    (void)state;
    vdnn_error err = {0};
    /* 16 channels of 10x10 take 6400 bytes an image: chunks of 2 images (2+2+1), 1 for lean. */
    vdnn_cpu_options opt = {.conv_chunk_bytes = 2 * 6400};
    vdnn_backend_t *be = NULL;
    vt_assert_ok(vdnn_backend_cpu_create(&opt, &be, &err), err);
    const vdnn_op_desc descs[2] = {conv_desc(shp(5, 16, 10, 10), 16, 3, 3, 1, 1, 1, 1, 1, 1),
                                   conv_desc(shp(5, 16, 10, 10), 16, 3, 3, 2, 2, 1, 1, 1, 0)};
    const int expect[2] = {4, 2}; /* fast (Winograd), direct, lean, lean-direct; without Winograd: fast, lean */
    for (int k = 0; k < 2; k++) {
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vt_assert_ok(be->ops->op_algos(be, &descs[k], algos, &n, &err), err);
        assert_int_equal(n, expect[k]);
        /* The lean algorithms copy one image at a time: less workspace than the default. */
        assert_true(algos[n - 1].info.bwd_ws_bytes < algos[0].info.bwd_ws_bytes);
        for (int a = 1; a < n; a++) assert_true(algos[a].numerics != algos[0].numerics);
        for (int a = 0; a < n; a++) {
            vdnn_op_desc d = descs[k];
            d.algo = a;
            char name[64];
            snprintf(name, sizeof name, "conv %s, algorithm %.23s", k ? "3x3 s2 no bias" : "3x3 s1", algos[a].name);
            gradcheck(be, name, d, X_UNIFORM, 40 + (uint64_t)(k * 4 + a));
            /* Same shape in and out: dx may be written over dy, with bitwise the same gradients. */
            gc t;
            gc_init(&t, be, name, &d, X_UNIFORM, 60 + (uint64_t)a);
            assert_int_equal(t.info.bwd_inplace_ok, k == 0);
            if (k == 0) {
                gc_forward(&t, false);
                gc_backward(&t);
                float *buf = malloc(t.ny * sizeof(float)), *dw = malloc(t.nw * sizeof(float));
                assert_true(buf && dw);
                memcpy(buf, t.r, t.ny * sizeof(float));
                memcpy(dw, t.dw, t.nw * sizeof(float));
                vdnn_op_args args = bwd_args(&t);
                args.dy = buf, args.dx[0] = buf;
                vt_assert_ok(be->ops->op_backward(be, t.op, &args, &err), err);
                if (memcmp(buf, t.dx[0], t.ny * sizeof(float))) fail_msg("%s: dx over dy differs", name);
                if (memcmp(dw, t.dw, t.nw * sizeof(float))) fail_msg("%s: dw differs with dx over dy", name);
                free(buf);
                free(dw);
            }
            gc_free(&t);
        }
        vdnn_op_desc bad = descs[k];
        bad.algo = n;
        vdnn_op_info info;
        assert_int_equal(be->ops->op_query(be, &bad, &info, &err), VDNN_ERR_INVALID_ARG);
    }
    vdnn_backend_destroy(be);
}

static void test_conv_groups_and_rect(void **state)
{
    vdnn_backend_t *be = *state;
    gradcheck(be, "conv groups=2", conv_desc(shp(2, 4, 6, 6), 6, 3, 3, 1, 1, 1, 1, 2, 1), X_UNIFORM, 11);
    gradcheck(be, "conv depthwise s2", conv_desc(shp(2, 4, 7, 7), 4, 3, 3, 2, 2, 1, 1, 4, 1), X_UNIFORM, 12);
    gradcheck(be, "conv depthwise x2 multiplier", conv_desc(shp(1, 3, 5, 5), 6, 3, 3, 1, 1, 1, 1, 3, 0), X_UNIFORM, 13);
    gradcheck(be, "conv 3x1 s2x1 p1x0", conv_desc(shp(2, 3, 7, 6), 4, 3, 1, 2, 1, 1, 0, 1, 1), X_UNIFORM, 14);
    gradcheck(be, "conv 1x7 p0x3", conv_desc(shp(1, 2, 5, 9), 3, 1, 7, 1, 1, 0, 3, 1, 1), X_UNIFORM, 15);
}

static void test_pool(void **state)
{
    vdnn_backend_t *be = *state;
    gradcheck(be, "maxpool 3x3 s2", pool_desc(VDNN_LAYER_MAXPOOL, shp(2, 3, 9, 9), 3, 3, 2, 2, 0, 0), X_DISTINCT, 21);
    gradcheck(be, "maxpool 3x3 s2 (floored)", pool_desc(VDNN_LAYER_MAXPOOL, shp(1, 2, 8, 8), 3, 3, 2, 2, 0, 0),
              X_DISTINCT, 22);
    gradcheck(be, "maxpool 2x2 s2", pool_desc(VDNN_LAYER_MAXPOOL, shp(2, 3, 8, 8), 2, 2, 2, 2, 0, 0), X_DISTINCT, 23);
    gradcheck(be, "maxpool 3x3 s2 p1", pool_desc(VDNN_LAYER_MAXPOOL, shp(2, 2, 8, 8), 3, 3, 2, 2, 1, 1), X_DISTINCT,
              24);
    gradcheck(be, "maxpool 3x3 s1 p1", pool_desc(VDNN_LAYER_MAXPOOL, shp(1, 2, 6, 6), 3, 3, 1, 1, 1, 1), X_DISTINCT,
              25);
    gradcheck(be, "maxpool 3x2 s2x1", pool_desc(VDNN_LAYER_MAXPOOL, shp(1, 2, 7, 5), 3, 2, 2, 1, 0, 0), X_DISTINCT, 26);
    gradcheck(be, "avgpool 3x3 s1 p1", pool_desc(VDNN_LAYER_AVGPOOL, shp(2, 3, 6, 6), 3, 3, 1, 1, 1, 1), X_UNIFORM, 27);
    gradcheck(be, "avgpool 2x2 s2", pool_desc(VDNN_LAYER_AVGPOOL, shp(2, 2, 6, 6), 2, 2, 2, 2, 0, 0), X_UNIFORM, 28);
    gradcheck(be, "avgpool 5x5 s3", pool_desc(VDNN_LAYER_AVGPOOL, shp(1, 2, 11, 11), 5, 5, 3, 3, 0, 0), X_UNIFORM, 29);
    gradcheck(be, "avgpool 3x2 s2 p1x1", pool_desc(VDNN_LAYER_AVGPOOL, shp(1, 2, 7, 6), 3, 2, 2, 2, 1, 1), X_UNIFORM,
              30);
}

static void test_relu_lrn(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_shape s = shp(2, 3, 5, 5);
    gradcheck(be, "relu", one_input(VDNN_LAYER_RELU, s, s), X_AWAY_FROM_ZERO, 41);
    gradcheck(be, "lrn size 5 (strong alpha)", lrn_desc(shp(2, 7, 3, 3), 5, 0.5f, 0.75f, 2.0f), X_UNIFORM, 42);
    gradcheck(be, "lrn size 3 beta 1 k 1", lrn_desc(shp(1, 4, 3, 4), 3, 1.0f, 1.0f, 1.0f), X_UNIFORM, 43);
    gradcheck(be, "lrn AlexNet constants", lrn_desc(shp(2, 6, 3, 3), 5, 1e-4f, 0.75f, 2.0f), X_UNIFORM, 44);
    /* 35 positions per channel: whole and partial blocks of the backward's spatial tiling. */
    gradcheck(be, "lrn size 5 on 5x7", lrn_desc(shp(2, 8, 5, 7), 5, 0.8f, 0.75f, 1.5f), X_UNIFORM, 45);
    gradcheck(be, "lrn size 7 beta 0.6", lrn_desc(shp(1, 9, 4, 5), 7, 0.8f, 0.6f, 1.0f), X_UNIFORM, 46);
}

static void test_batchnorm(void **state)
{
    vdnn_backend_t *be = *state;
    gradcheck(be, "batchnorm training", bn_desc(shp(4, 3, 4, 4), true), X_UNIFORM, 51);
    gradcheck(be, "batchnorm training 1x1 spatial", bn_desc(shp(6, 5, 1, 1), true), X_UNIFORM, 52);
    gradcheck(be, "batchnorm inference", bn_desc(shp(2, 3, 4, 4), false), X_UNIFORM, 53);
}

static void test_fc(void **state)
{
    vdnn_backend_t *be = *state;
    gradcheck(be, "fc from 4x3x3", fc_desc(shp(3, 4, 3, 3), 5, 1), X_UNIFORM, 61);
    gradcheck(be, "fc no bias", fc_desc(shp(4, 10, 1, 1), 3, 0), X_UNIFORM, 62);
}

static void test_simple_ops(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_shape s = shp(2, 3, 4, 4);
    gradcheck(be, "dropout training", dropout_desc(s, 0.3f, true), X_UNIFORM, 71);
    gradcheck(be, "dropout inference", dropout_desc(s, 0.3f, false), X_UNIFORM, 72);
    vdnn_shape cat[3] = {shp(2, 2, 3, 3), shp(2, 3, 3, 3), shp(2, 1, 3, 3)};
    gradcheck(be, "concat of 2", multi_desc(VDNN_LAYER_CONCAT, 2, cat), X_UNIFORM, 73);
    gradcheck(be, "concat of 3", multi_desc(VDNN_LAYER_CONCAT, 3, cat), X_UNIFORM, 74);
    vdnn_shape add[3] = {s, s, s};
    gradcheck(be, "add of 2", multi_desc(VDNN_LAYER_ADD, 2, add), X_UNIFORM, 75);
    gradcheck(be, "add of 3", multi_desc(VDNN_LAYER_ADD, 3, add), X_UNIFORM, 76);
    gradcheck(be, "gap", one_input(VDNN_LAYER_GAP, s, shp(2, 3, 1, 1)), X_UNIFORM, 77);
    gradcheck(be, "flatten", one_input(VDNN_LAYER_FLATTEN, s, shp(2, 48, 1, 1)), X_UNIFORM, 78);
    gradcheck(be, "softmax_xent", one_input(VDNN_LAYER_SOFTMAX_XENT, shp(4, 5, 1, 1), shp(4, 5, 1, 1)), X_UNIFORM, 79);
}

/* The planner trusts these numbers: check them per op semantics. */
static void test_info_flags(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_shape s = shp(2, 4, 6, 6);
    struct {
        const char *name;
        vdnn_op_desc d;
        bool needs_x, needs_y, inplace, has_aux;
    } cases[] = {
        {"conv", conv_desc(s, 4, 3, 3, 1, 1, 1, 1, 1, 1), true, false, false, false},
        {"maxpool", pool_desc(VDNN_LAYER_MAXPOOL, s, 2, 2, 2, 2, 0, 0), false, false, false, true},
        {"avgpool", pool_desc(VDNN_LAYER_AVGPOOL, s, 2, 2, 2, 2, 0, 0), false, false, false, false},
        {"relu", one_input(VDNN_LAYER_RELU, s, s), false, false, true, true}, /* a bit mask as aux */
        {"lrn", lrn_desc(s, 5, 1e-4f, 0.75f, 2.f), true, false, false, false},
        {"batchnorm training", bn_desc(s, true), true, false, false, true},
        {"batchnorm inference", bn_desc(s, false), false, false, false, false},
        {"fc", fc_desc(s, 5, 1), true, false, false, false},
        {"dropout", dropout_desc(s, 0.5f, true), false, false, true, false},
        {"gap", one_input(VDNN_LAYER_GAP, s, shp(2, 4, 1, 1)), false, false, false, false},
        {"flatten", one_input(VDNN_LAYER_FLATTEN, s, shp(2, 144, 1, 1)), false, false, true, false},
        {"softmax_xent", one_input(VDNN_LAYER_SOFTMAX_XENT, shp(2, 5, 1, 1), shp(2, 5, 1, 1)), false, true, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vdnn_op_info info;
        vdnn_error err = {0};
        vt_assert_ok(be->ops->op_query(be, &cases[i].d, &info, &err), err);
        if (info.bwd_needs_x != cases[i].needs_x || info.bwd_needs_y != cases[i].needs_y ||
            info.inplace_ok != cases[i].inplace)
            fail_msg("%s: needs_x %d needs_y %d inplace %d, expected %d %d %d", cases[i].name, info.bwd_needs_x,
                     info.bwd_needs_y, info.inplace_ok, cases[i].needs_x, cases[i].needs_y, cases[i].inplace);
        if ((info.aux_bytes > 0) != cases[i].has_aux)
            fail_msg("%s: aux_bytes %zu", cases[i].name, info.aux_bytes);
    }
    vdnn_op_info info;
    vdnn_error err = {0};
    vdnn_op_desc bn = bn_desc(s, true);
    vt_assert_ok(be->ops->op_query(be, &bn, &info, &err), err);
    assert_int_equal(info.aux_bytes, 2 * 4 * sizeof(float));
}

/* Ops that allow y == x[0] give bitwise the same result in place. */
static void test_inplace(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_shape s = shp(2, 3, 5, 5);
    vdnn_op_desc ds[] = {one_input(VDNN_LAYER_RELU, s, s), dropout_desc(s, 0.4f, true),
                         one_input(VDNN_LAYER_FLATTEN, s, shp(2, 75, 1, 1))};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        gc t;
        gc_init(&t, be, "inplace", &ds[k], X_UNIFORM, 90 + k);
        assert_true(t.info.inplace_ok);
        gc_forward(&t, false);
        float *buf = malloc(t.ny * sizeof(float));
        assert_non_null(buf);
        memcpy(buf, t.x[0], t.ny * sizeof(float));
        vdnn_op_args a = fwd_args(&t, false);
        a.x[0] = buf, a.y = buf;
        vdnn_error err = {0};
        vt_assert_ok(be->ops->op_forward(be, t.op, &a, &err), err);
        if (memcmp(buf, t.y, t.ny * sizeof(float))) fail_msg("layer kind %d: in-place forward differs", (int)ds[k].kind);
        free(buf);
        gc_free(&t);
    }
}

/* PyTorch's rule: running = (1-m)*running + m*batch, with the unbiased batch variance; aux keeps mean, biased var. */
static void test_bn_running_stats(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_shape s = shp(3, 4, 3, 2);
    vdnn_op_desc d = bn_desc(s, true);
    d.p.bn_momentum = 0.25f;
    gc t;
    gc_init(&t, be, "bn stats", &d, X_UNIFORM, 101);
    for (size_t i = 0; i < t.nx[0]; i++) t.x[0][i] = t.x[0][i] * 2.f + 0.7f;
    int c = s.c;
    double mean[4], var[4], m = (double)s.n * s.h * s.w;
    batch_stats(t.x[0], s, mean, var);
    float before[8];
    memcpy(before, t.stats, sizeof before);

    gc_forward(&t, false);
    if (memcmp(before, t.stats, sizeof before)) fail_msg("running statistics changed without update_stats");
    gc_forward(&t, true);
    for (int i = 0; i < c; i++) {
        double rm = 0.75 * before[i] + 0.25 * mean[i];
        double rv = 0.75 * before[c + i] + 0.25 * var[i] * m / (m - 1);
        assert_true(fabs(t.stats[i] - rm) < 1e-5 * (1 + fabs(rm)));
        assert_true(fabs(t.stats[c + i] - rv) < 1e-5 * (1 + fabs(rv)));
        assert_true(fabs(t.aux[i] - mean[i]) < 1e-5 * (1 + fabs(mean[i])));
        assert_true(fabs(t.aux[c + i] - var[i]) < 1e-5 * (1 + var[i]));
    }
    gc_free(&t);

    /* Inference reads the running statistics and leaves them alone, even with update_stats. */
    d = bn_desc(s, false);
    gc_init(&t, be, "bn inference", &d, X_UNIFORM, 102);
    memcpy(before, t.stats, sizeof before);
    check_forward(&t);
    gc_forward(&t, true);
    if (memcmp(before, t.stats, sizeof before)) fail_msg("inference changed the running statistics");
    gc_free(&t);
}

/* A NULL dx (the layer right after the data) still gives the parameter gradients. */
static void test_no_dx(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_op_desc ds[] = {conv_desc(shp(2, 3, 6, 6), 4, 3, 3, 1, 1, 1, 1, 1, 1), bn_desc(shp(4, 3, 3, 3), true),
                         fc_desc(shp(2, 3, 2, 2), 4, 1)};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        gc t;
        gc_init(&t, be, "no dx", &ds[k], X_UNIFORM, 110 + k);
        gc_forward(&t, false);
        gc_backward(&t);
        float *dw = malloc(t.nw * sizeof(float)), *db = malloc(t.nb * sizeof(float));
        assert_non_null(dw), assert_non_null(db);
        memcpy(dw, t.dw, t.nw * sizeof(float));
        memcpy(db, t.db, t.nb * sizeof(float));
        poison_grads(&t);
        vdnn_op_args a = bwd_args(&t);
        a.dx[0] = NULL;
        vdnn_error err = {0};
        vt_assert_ok(be->ops->op_backward(be, t.op, &a, &err), err);
        for (size_t i = 0; i < t.nw; i++)
            if (!(fabsf(dw[i] - t.dw[i]) <= 1e-5f * (1 + fabsf(dw[i]))))
                fail_msg("kind %d: dw[%zu] %g without dx, %g with", (int)ds[k].kind, i, (double)t.dw[i], (double)dw[i]);
        for (size_t i = 0; i < t.nb; i++)
            if (!(fabsf(db[i] - t.db[i]) <= 1e-5f * (1 + fabsf(db[i]))))
                fail_msg("kind %d: db[%zu] %g without dx, %g with", (int)ds[k].kind, i, (double)t.db[i], (double)db[i]);
        free(dw), free(db);
        gc_free(&t);
    }
}

/* Batchnorm's gradients do not depend on beta: backward works without it. */
static void test_bn_backward_without_beta(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_op_desc d = bn_desc(shp(3, 4, 3, 3), true);
    gc t;
    gc_init(&t, be, "bn no beta", &d, X_UNIFORM, 115);
    gc_forward(&t, false);
    gc_backward(&t);
    float *dx = malloc(t.nx[0] * sizeof(float));
    assert_non_null(dx);
    memcpy(dx, t.dx[0], t.nx[0] * sizeof(float));
    poison_grads(&t);
    vdnn_op_args a = bwd_args(&t);
    a.b = NULL;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->op_backward(be, t.op, &a, &err), err);
    assert_memory_equal(dx, t.dx[0], t.nx[0] * sizeof(float));
    free(dx);
    gc_free(&t);
}

/* Max pooling forward without aux (evaluation) gives the same output. */
static void test_maxpool_without_aux(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_op_desc d = pool_desc(VDNN_LAYER_MAXPOOL, shp(2, 3, 9, 9), 3, 3, 2, 2, 1, 1);
    gc t;
    gc_init(&t, be, "maxpool no aux", &d, X_UNIFORM, 120);
    gc_forward(&t, false);
    float *y = malloc(t.ny * sizeof(float));
    assert_non_null(y);
    memcpy(y, t.y, t.ny * sizeof(float));
    memset(t.y, 0, t.ny * sizeof(float));
    vdnn_op_args a = fwd_args(&t, false);
    a.aux = NULL;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->op_forward(be, t.op, &a, &err), err);
    assert_memory_equal(y, t.y, t.ny * sizeof(float));
    free(y);
    gc_free(&t);
}

/* The same inputs give bitwise the same outputs and gradients, run after run. */
static void test_determinism(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_op_desc ds[] = {conv_desc(shp(4, 8, 12, 12), 16, 3, 3, 1, 1, 1, 1, 1, 1),
                         conv_desc(shp(4, 8, 12, 12), 8, 3, 3, 2, 2, 1, 1, 2, 1), bn_desc(shp(8, 16, 8, 8), true),
                         fc_desc(shp(8, 16, 4, 4), 10, 1), lrn_desc(shp(4, 8, 6, 6), 5, 1e-2f, 0.75f, 2.f)};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        gc t;
        gc_init(&t, be, "determinism", &ds[k], X_UNIFORM, 130 + k);
        gc_forward(&t, false);
        gc_backward(&t);
        size_t ny = t.ny * sizeof(float), nx = t.nx[0] * sizeof(float), nw = t.nw * sizeof(float);
        float *y = malloc(ny), *dx = malloc(nx), *dw = malloc(nw + 1);
        assert_non_null(y), assert_non_null(dx), assert_non_null(dw);
        memcpy(y, t.y, ny), memcpy(dx, t.dx[0], nx);
        if (nw) memcpy(dw, t.dw, nw);
        for (int rep = 0; rep < 3; rep++) {
            gc_forward(&t, false);
            gc_backward(&t);
            if (memcmp(y, t.y, ny) || memcmp(dx, t.dx[0], nx) || (nw && memcmp(dw, t.dw, nw)))
                fail_msg("layer kind %d: results differ between runs", (int)ds[k].kind);
        }
        free(y), free(dx), free(dw);
        gc_free(&t);
    }
}

static void test_errors(void **state)
{
    vdnn_backend_t *be = *state;
    vdnn_error err = {0};
    vdnn_op_info info;
    vdnn_op *op = NULL;

    vdnn_op_desc d = conv_desc(shp(1, 3, 6, 6), 4, 3, 3, 1, 1, 1, 1, 2, 1);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "groups");
    d = conv_desc(shp(1, 3, 6, 6), 4, 3, 3, 1, 1, 1, 1, 1, 1);
    d.out.h = 5;
    vt_assert_error(be->ops->op_create(be, &d, &op, &err), err, VDNN_ERR_SHAPE, "expected 1x4x6x6");
    assert_null(op);

    d = pool_desc(VDNN_LAYER_MAXPOOL, shp(1, 3, 6, 6), 2, 2, 2, 2, 2, 2);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_INVALID_ARG, "pad 2x2");

    d = lrn_desc(shp(1, 6, 3, 3), 4, 1e-4f, 0.75f, 2.f);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_UNSUPPORTED, "size 4");

    d = bn_desc(shp(1, 3, 1, 1), true);
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "more than 1 value");

    d = fc_desc(shp(2, 3, 2, 2), 4, 1);
    d.out.c = 5;
    vt_assert_error(be->ops->op_query(be, &d, &info, &err), err, VDNN_ERR_SHAPE, "4 outputs");

    /* Missing buffers are reported, not dereferenced. */
    d = bn_desc(shp(2, 3, 2, 2), true);
    gc t;
    gc_init(&t, be, "bn errors", &d, X_UNIFORM, 140);
    vdnn_op_args a = fwd_args(&t, false);
    a.aux = NULL;
    vt_assert_error(be->ops->op_forward(be, t.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "aux");
    a = fwd_args(&t, true);
    a.stats = NULL;
    vt_assert_error(be->ops->op_forward(be, t.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "running statistics");
    gc_free(&t);

    d = conv_desc(shp(1, 3, 6, 6), 4, 3, 3, 1, 1, 1, 1, 1, 1);
    gc_init(&t, be, "conv errors", &d, X_UNIFORM, 141);
    a = fwd_args(&t, false);
    a.w = NULL;
    vt_assert_error(be->ops->op_forward(be, t.op, &a, &err), err, VDNN_ERR_INVALID_ARG, "weights");
    gc_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_conv_algorithms_chunked),
        cmocka_unit_test(test_conv_groups_and_rect),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_relu_lrn),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_fc),
        cmocka_unit_test(test_simple_ops),
        cmocka_unit_test(test_info_flags),
        cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_bn_running_stats),
        cmocka_unit_test(test_no_dx),
        cmocka_unit_test(test_bn_backward_without_beta),
        cmocka_unit_test(test_maxpool_without_aux),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
