/* BATCHNORM on the CPU: batch normalization over plain nchw (batch or running statistics) plus PyTorch's running-stat update, as OpenMP loops; fp32 or bf16 maps, fp32 statistics and parameters. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

/* Why not oneDNN here: on nchw oneDNN 2.6 has only its generic ncsp_bnorm, which
 * was several times slower than these loops (its JIT versions want nhwc or
 * nChw16c, and copying to those costs more than the normalization itself).
 * Each channel is reduced by one thread in a fixed order, so results do not
 * depend on the thread count; a channel's values stay in L2 between passes.
 * bf16 maps go through float blocks on the stack (CPU_BF16_BLOCK): the same
 * arithmetic on the widened values, y and dx rounded once as they are stored. */
typedef struct bn_state {
    bool half;         /* bf16 maps */
    int n, c;
    size_t hw;
    size_t m;          /* values per channel: N*H*W */
    double *red;       /* synchronized batch norm: 2*C+1 sums handed to the reduction */
} bn_state;

static vdnn_status bn_check(const vdnn_op_desc *d, bn_state *s, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n,
                         out.c, out.h, out.w, in.n, in.c, in.h, in.w);
    if (!(p->bn_eps >= 0.f) || !(p->bn_momentum >= 0.f && p->bn_momentum <= 1.f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm: eps %g must be >= 0 and momentum %g in [0, 1]",
                         (double)p->bn_eps, (double)p->bn_momentum);
    s->half = vdnn_cpu_is_bf16(d);
    s->n = in.n;
    s->c = in.c;
    s->hw = (size_t)in.h * (size_t)in.w;
    s->m = (size_t)in.n * s->hw;
    /* Like PyTorch: the unbiased variance of a single value per channel is undefined. */
    if (d->training && s->m < 2)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: training needs more than 1 value per channel (input %dx%dx%dx%d)",
                         in.n, in.c, in.h, in.w);
    return VDNN_OK;
}

static vdnn_status bn_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    bn_state s = {0};
    vdnn_status st = bn_check(d, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .aux_bytes = d->training ? 2 * (size_t)s.c * sizeof(float) : 0,
            .bwd_needs_x = d->training,
        };
    }
    return st;
}

static vdnn_status bn_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    bn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "batchnorm: out of memory");
    vdnn_status st = bn_check(&op->d, s, err);
    if (!st && op->d.training && !(s->red = malloc((2 * (size_t)s->c + 1) * sizeof *s->red)))
        st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "batchnorm: out of memory");
    if (st) {
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void bn_destroy(cpu_backend *be, vdnn_op *op)
{
    bn_state *s = op->state;
    if (s) free(s->red);
    free(op->state);
    op->state = NULL;
}

/* Plane p of channel ch in an nchw tensor. */
static inline size_t plane(const bn_state *s, int i, int ch) { return ((size_t)i * (size_t)s->c + (size_t)ch) * s->hw; }

/* Per plane a float sum (vectorised), added up across planes in double. */
static double channel_sum_f(const bn_state *s, const float *x, int ch)
{
    double acc = 0.0;
    for (int i = 0; i < s->n; i++) {
        const float *xp = x + plane(s, i, ch);
        float t = 0.f;
#pragma omp simd reduction(+ : t)
        for (size_t j = 0; j < s->hw; j++) t += xp[j];
        acc += t;
    }
    return acc;
}

/* Sum of squared deviations from mean: two passes, so a large mean costs no precision. */
static double channel_sq_dev_f(const bn_state *s, const float *x, int ch, float mean)
{
    double acc = 0.0;
    for (int i = 0; i < s->n; i++) {
        const float *xp = x + plane(s, i, ch);
        float t = 0.f;
#pragma omp simd reduction(+ : t)
        for (size_t j = 0; j < s->hw; j++) {
            float v = xp[j] - mean;
            t += v * v;
        }
        acc += t;
    }
    return acc;
}

/* y = x*scale + shift over one channel. */
static void channel_affine_f(const bn_state *s, const float *x, float *y, int ch, float scale, float shift)
{
    for (int i = 0; i < s->n; i++) {
        size_t o = plane(s, i, ch);
        const float *xp = x + o;
        float *yp = y + o;
#pragma omp simd
        for (size_t j = 0; j < s->hw; j++) yp[j] = xp[j] * scale + shift;
    }
}

/* ---- the same over bf16 planes, a block at a time ---- */

static size_t block_len(const bn_state *s, size_t j0) { return s->hw - j0 < CPU_BF16_BLOCK ? s->hw - j0 : CPU_BF16_BLOCK; }

/* The sum of x over one channel (square false, mean 0), or of (x - mean)^2. */
CPU_BF16_TARGET static double channel_pass_h(const bn_state *s, const uint16_t *x, int ch, float mean, bool square)
{
    float b[CPU_BF16_BLOCK];
    double acc = 0.0;
    for (int i = 0; i < s->n; i++) {
        const uint16_t *xp = x + plane(s, i, ch);
        float t = 0.f;
        for (size_t j0 = 0; j0 < s->hw; j0 += CPU_BF16_BLOCK) {
            const size_t len = block_len(s, j0);
            vdnn_cpu_bf16_load(b, xp + j0, len);
#pragma omp simd reduction(+ : t)
            for (size_t j = 0; j < len; j++) {
                float v = b[j] - mean;
                t += square ? v * v : v;
            }
        }
        acc += t;
    }
    return acc;
}

CPU_BF16_TARGET static void channel_affine_h(const bn_state *s, const uint16_t *x, uint16_t *y, int ch, float scale, float shift)
{
    float b[CPU_BF16_BLOCK];
    for (int i = 0; i < s->n; i++) {
        const size_t o = plane(s, i, ch);
        for (size_t j0 = 0; j0 < s->hw; j0 += CPU_BF16_BLOCK) {
            const size_t len = block_len(s, j0);
            vdnn_cpu_bf16_load(b, x + o + j0, len);
#pragma omp simd
            for (size_t j = 0; j < len; j++) b[j] = b[j] * scale + shift;
            vdnn_cpu_bf16_store(y + o + j0, b, len);
        }
    }
}

/* The channel loops over maps of either type. */
static double channel_sum(const bn_state *s, const void *x, int ch)
{
    return s->half ? channel_pass_h(s, x, ch, 0.f, false) : channel_sum_f(s, x, ch);
}

static double channel_sq_dev(const bn_state *s, const void *x, int ch, float mean)
{
    return s->half ? channel_pass_h(s, x, ch, mean, true) : channel_sq_dev_f(s, x, ch, mean);
}

static void channel_affine(const bn_state *s, const void *x, void *y, int ch, float scale, float shift)
{
    if (s->half) channel_affine_h(s, x, y, ch, scale, shift);
    else channel_affine_f(s, x, y, ch, scale, shift);
}

/* PyTorch's rule: running = (1-m)*running + m*batch, the variance unbiased over the `count` values the
 * batch statistics came from. */
static void update_running(const bn_state *s, float momentum, const float *batch, double count, float *running)
{
    const int c = s->c;
    const double unbias = count / (count - 1);
    for (int i = 0; i < c; i++) {
        running[i] = (float)((1.0 - momentum) * running[i] + (double)momentum * batch[i]);
        running[c + i] = (float)((1.0 - momentum) * running[c + i] + (double)momentum * batch[c + i] * unbias);
    }
}

/* Reduction keys: the layer and which of the op's three sums. */
static int red_key(const vdnn_op_args *a, int phase) { return a->reduce_key * 4 + phase; }

static vdnn_status reduce_sums(const vdnn_op_args *a, int phase, double *buf, size_t n, vdnn_error *err)
{
    vdnn_status st = a->reduce->sum(a->reduce->ctx, red_key(a, phase), buf, n, err);
    if (!st && !(buf[n - 1] >= 2.0))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "batchnorm: %g values per channel over all ranks (training needs 2 or more)",
                         buf[n - 1]);
    return st;
}

/* y = gamma * (x - mean) / sqrt(var + eps) + beta over one channel, as a scale and a shift. */
static void normalize_channel(const bn_state *s, const void *x, void *y, int ch, float gamma, float beta, float mean,
                              float var, float eps)
{
    float inv = (float)(1.0 / sqrt((double)var + eps));
    float scale = gamma * inv;
    channel_affine(s, x, y, ch, scale, beta - mean * scale);
}

/* Synchronized batch norm: the statistics of every rank's share together. The same two passes as one
 * device (the sum, then squared deviations from the global mean, each summed over ranks), not sum(x^2)
 * - sum(x)^2, which cancels badly; a channel's planes are whole on one rank, so each rank's per-plane
 * float sums are those one device adds up, and only the double additions across ranks change order. */
static vdnn_status bn_forward_sync(bn_state *s, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const void *x = a->x[0];
    const float *gamma = a->w, *beta = a->b;
    void *y = a->y;
    float *mean = a->aux, *var = a->aux + s->c;
    const float eps = op->d.p.bn_eps;
    const int c = s->c;
    double *buf = s->red;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) buf[ch] = channel_sum(s, x, ch);
    buf[c] = (double)s->m;
    vdnn_status st = reduce_sums(a, 0, buf, (size_t)c + 1, err);
    if (st) return st;
    const double m = buf[c];
    for (int ch = 0; ch < c; ch++) mean[ch] = (float)(buf[ch] / m);
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) buf[ch] = channel_sq_dev(s, x, ch, mean[ch]);
    buf[c] = (double)s->m;
    st = reduce_sums(a, 1, buf, (size_t)c + 1, err);
    if (st) return st;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        var[ch] = (float)(buf[ch] / m);
        normalize_channel(s, x, y, ch, gamma[ch], beta[ch], mean[ch], var[ch], eps);
    }
    /* Every rank updates from the same global figures, so running statistics stay equal everywhere. */
    if (a->update_stats) update_running(s, op->d.p.bn_momentum, a->aux, m, a->stats);
    return VDNN_OK;
}

static vdnn_status bn_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    const float eps = op->d.p.bn_eps;
    if (!a->x[0] || !a->y || !a->w || !a->b)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: NULL %s",
                         !a->x[0] ? "x" : !a->y ? "y" : !a->w ? "gamma" : "beta");
    const void *x = a->x[0];
    const float *gamma = a->w, *beta = a->b;
    void *y = a->y;
    if (!op->d.training) {
        if (!a->stats) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm inference: NULL running statistics");
        const float *rm = a->stats, *rv = a->stats + s->c;
#pragma omp parallel for schedule(static)
        for (int ch = 0; ch < s->c; ch++) normalize_channel(s, x, y, ch, gamma[ch], beta[ch], rm[ch], rv[ch], eps);
        return VDNN_OK;
    }
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: NULL aux (batch statistics)");
    if (a->update_stats && !a->stats)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm forward: update_stats with NULL running statistics");
    if (a->reduce) return bn_forward_sync(s, op, a, err);
    float *mean = a->aux, *var = a->aux + s->c;
    const double m = (double)s->m;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < s->c; ch++) {
        float mu = (float)(channel_sum(s, x, ch) / m);
        float v = (float)(channel_sq_dev(s, x, ch, mu) / m);
        mean[ch] = mu;
        var[ch] = v;
        normalize_channel(s, x, y, ch, gamma[ch], beta[ch], mu, v, eps);
    }
    if (a->update_stats) update_running(s, op->d.p.bn_momentum, a->aux, (double)s->m, a->stats);
    return VDNN_OK;
}

/* Over one channel: sum of dy and of dy*(x-mean). */
static void channel_grad_sums_f(const bn_state *s, const float *x, const float *dy, int ch, float mean, double *sdy,
                                double *sdyx)
{
    double a1 = 0.0, a2 = 0.0;
    for (int i = 0; i < s->n; i++) {
        size_t o = plane(s, i, ch);
        const float *xp = x + o, *dp = dy + o;
        float t1 = 0.f, t2 = 0.f;
#pragma omp simd reduction(+ : t1, t2)
        for (size_t j = 0; j < s->hw; j++) {
            t1 += dp[j];
            t2 += dp[j] * (xp[j] - mean);
        }
        a1 += t1;
        a2 += t2;
    }
    *sdy = a1;
    *sdyx = a2;
}

/* One channel's input gradient from its sums over the batch (m values): dx = gamma*inv * (dy - sdy/m -
 * (x-mean)*inv^2*sdyx/m), computed as dy*k1 + (x-mean)*k2 + k3. */
CPU_BF16_TARGET static void channel_dx_h(const bn_state *s, const uint16_t *x, const uint16_t *dy, uint16_t *dx, int ch,
                                         float f1, float f2, float f3, float mu)
{
    float bx[CPU_BF16_BLOCK], bd[CPU_BF16_BLOCK];
    for (int i = 0; i < s->n; i++) {
        const size_t o = plane(s, i, ch);
        for (size_t j0 = 0; j0 < s->hw; j0 += CPU_BF16_BLOCK) {
            const size_t len = block_len(s, j0);
            vdnn_cpu_bf16_load(bx, x + o + j0, len);
            vdnn_cpu_bf16_load(bd, dy + o + j0, len);
#pragma omp simd
            for (size_t j = 0; j < len; j++) bd[j] = bd[j] * f1 + (bx[j] - mu) * f2 + f3;
            vdnn_cpu_bf16_store(dx + o + j0, bd, len);
        }
    }
}

static void channel_dx(const bn_state *s, const void *x, const void *dy, void *dx, int ch, float gamma, double inv,
                       double sdy, double sdyx, double m, float mu)
{
    double k1 = gamma * inv;
    float f1 = (float)k1, f2 = (float)(-k1 * inv * inv * sdyx / m), f3 = (float)(-k1 * sdy / m);
    if (s->half) {
        channel_dx_h(s, x, dy, dx, ch, f1, f2, f3, mu);
        return;
    }
    for (int i = 0; i < s->n; i++) {
        size_t o = plane(s, i, ch);
        const float *xp = (const float *)x + o, *dp = (const float *)dy + o;
        float *gp = (float *)dx + o;
#pragma omp simd
        for (size_t j = 0; j < s->hw; j++) gp[j] = dp[j] * f1 + (xp[j] - mu) * f2 + f3;
    }
}

CPU_BF16_TARGET static void channel_grad_sums_h(const bn_state *s, const uint16_t *x, const uint16_t *dy, int ch, float mean,
                                double *sdy, double *sdyx)
{
    float bx[CPU_BF16_BLOCK], bd[CPU_BF16_BLOCK];
    double a1 = 0.0, a2 = 0.0;
    for (int i = 0; i < s->n; i++) {
        const size_t o = plane(s, i, ch);
        float t1 = 0.f, t2 = 0.f;
        for (size_t j0 = 0; j0 < s->hw; j0 += CPU_BF16_BLOCK) {
            const size_t len = block_len(s, j0);
            vdnn_cpu_bf16_load(bx, x + o + j0, len);
            vdnn_cpu_bf16_load(bd, dy + o + j0, len);
#pragma omp simd reduction(+ : t1, t2)
            for (size_t j = 0; j < len; j++) {
                t1 += bd[j];
                t2 += bd[j] * (bx[j] - mean);
            }
        }
        a1 += t1;
        a2 += t2;
    }
    *sdy = a1;
    *sdyx = a2;
}

static void channel_grad_sums(const bn_state *s, const void *x, const void *dy, int ch, float mean, double *sdy,
                              double *sdyx)
{
    if (s->half) channel_grad_sums_h(s, x, dy, ch, mean, sdy, sdyx);
    else channel_grad_sums_f(s, x, dy, ch, mean, sdy, sdyx);
}

/* Synchronized backward: dx needs sum(dy) and sum(dy*(x-mean)) over every rank's share. dgamma and dbeta
 * keep this rank's own sums: the data-parallel gradient average then makes them the whole batch's
 * gradient, as it does for every other weight (each rank's dy is that of its own mean loss, so the global
 * sums in dx carry the same factor of the rank count that the average divides out). */
static vdnn_status bn_backward_sync(bn_state *s, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const void *x = a->x[0], *dy = a->dy;
    const float *gamma = a->w, *mean = a->aux, *var = a->aux + s->c;
    void *dx = a->dx[0];
    float *dgamma = a->dw, *dbeta = a->db;
    const double eps = op->d.p.bn_eps;
    const int c = s->c;
    double *buf = s->red;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        channel_grad_sums(s, x, dy, ch, mean[ch], &buf[ch], &buf[c + ch]);
        dbeta[ch] = (float)buf[ch];
        dgamma[ch] = (float)(buf[c + ch] * (1.0 / sqrt((double)var[ch] + eps)));
    }
    buf[2 * c] = (double)s->m;
    /* Every rank sums, wanted dx or not: the ranks' calls must pair up. */
    vdnn_status st = reduce_sums(a, 2, buf, 2 * (size_t)c + 1, err);
    if (st || !dx) return st;
    const double m = buf[2 * c];
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        channel_dx(s, x, dy, dx, ch, gamma[ch], 1.0 / sqrt((double)var[ch] + eps), buf[ch], buf[c + ch], m, mean[ch]);
    }
    return VDNN_OK;
}

static vdnn_status bn_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    bn_state *s = op->state;
    if (!op->d.training)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: op was created for inference (running statistics)");
    if (!a->aux) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL aux (batch statistics)");
    if (!a->x[0] || !a->dy || !a->w || !a->dw || !a->db)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "batchnorm backward: NULL %s",
                         !a->x[0] ? "x" : !a->dy ? "dy" : !a->w ? "gamma" : !a->dw ? "dgamma" : "dbeta");
    if (a->reduce) return bn_backward_sync(s, op, a, err);
    /* beta is not read: no gradient depends on it. */
    const void *x = a->x[0], *dy = a->dy;
    const float *gamma = a->w, *mean = a->aux, *var = a->aux + s->c;
    void *dx = a->dx[0];
    float *dgamma = a->dw, *dbeta = a->db;
    const double m = (double)s->m;
    const double eps = op->d.p.bn_eps;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < s->c; ch++) {
        double sdy, sdyx;
        channel_grad_sums(s, x, dy, ch, mean[ch], &sdy, &sdyx);
        double inv = 1.0 / sqrt((double)var[ch] + eps);
        dbeta[ch] = (float)sdy;
        dgamma[ch] = (float)(sdyx * inv);
        if (dx) channel_dx(s, x, dy, dx, ch, gamma[ch], inv, sdy, sdyx, m, mean[ch]);
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_batchnorm = {
    .query = bn_query,
    .create = bn_create,
    .destroy = bn_destroy,
    .forward = bn_forward,
    .backward = bn_backward,
};
