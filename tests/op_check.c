/* The op harness's comparisons: results, double references and central finite differences. */
#include "op_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static bool close_at(double got, double want, double rtol, double scale)
{
    if (rtol == 0) return got == want;
    return fabs(got - want) <= rtol * (fabs(want) + scale); /* false for NaN */
}

static bool report(size_t bad, size_t n, size_t worst, double got, double want, double rtol, double scale, char *msg,
                   size_t len)
{
    if (!bad) return true;
    snprintf(msg, len, "%zu of %zu values differ (rtol %g, scale %.3g); e.g. [%zu] %.9g, expected %.9g", bad, n, rtol,
             scale, worst, got, want);
    return false;
}

bool vt_close(const float *got, const float *want, size_t n, double rtol, char *msg, size_t len)
{
    double scale = 0, worst_err = -1;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    size_t bad = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (close_at(got[i], want[i], rtol, scale)) continue;
        double e = fabs((double)got[i] - (double)want[i]);
        bad++;
        if (isnan(e) || e > worst_err) worst_err = isnan(e) ? INFINITY : e, worst = i;
    }
    return report(bad, n, worst, bad ? got[worst] : 0, bad ? want[worst] : 0, rtol, scale, msg, len);
}

bool vt_close_ref(const float *got, const double *ref, size_t n, double rtol, char *msg, size_t len)
{
    double scale = 0, worst_err = -1;
    for (size_t i = 0; i < n; i++)
        if (!isnan(ref[i])) scale = fmax(scale, fabs(ref[i]));
    size_t bad = 0, worst = 0, checked = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(ref[i])) continue;
        checked++;
        if (close_at(got[i], ref[i], rtol, scale)) continue;
        double e = fabs((double)got[i] - ref[i]);
        bad++;
        if (isnan(e) || e > worst_err) worst_err = isnan(e) ? INFINITY : e, worst = i;
    }
    return report(bad, checked, worst, bad ? got[worst] : 0, bad ? ref[worst] : 0, rtol, scale, msg, len);
}

bool vt_fd_linear(const vdnn_op_desc *d)
{
    switch (d->kind) {
    case VDNN_LAYER_CONV:
    case VDNN_LAYER_AVGPOOL:
    case VDNN_LAYER_FC:
    case VDNN_LAYER_DROPOUT:
    case VDNN_LAYER_CONCAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_GAP:
    case VDNN_LAYER_FLATTEN:
    case VDNN_LAYER_EMBED:
    case VDNN_LAYER_POS_EMBED:
    case VDNN_LAYER_LINEAR:
    case VDNN_LAYER_ATTN_MIX:
    case VDNN_LAYER_SEQ_CAT:
    case VDNN_LAYER_CHANNEL_MUL: return true; /* in each tensor alone, which is how differences perturb them */
    default: return false;
    }
}

double vt_objective_error(const vt_op_data *in, const float *y, const float *y_cpu, float loss, float loss_cpu)
{
    double e = 0.0;
    if (in->labels) {
        e = fabs((double)loss - (double)loss_cpu);
    } else {
        for (size_t i = 0; i < in->ny; i++) e += fabs((double)in->dy[i]) * fabs((double)y[i] - (double)y_cpu[i]);
    }
    return 4 * e;
}

bool vt_fd_elements(vt_exec *e, float *t, size_t n, const float *g, double obj_err, double g_rtol, uint64_t seed,
                    char *msg, size_t len)
{
    if (!n) return true;
    double gmax = 0.0;
    for (size_t j = 0; j < n; j++) gmax = fmax(gmax, fabs(g[j]));
    const double scale = fmax(gmax, 0.1);
    const size_t step = n > VT_FD_MAX_CHECKS ? (n + VT_FD_MAX_CHECKS - 1) / VT_FD_MAX_CHECKS : 1;
    const bool linear = vt_fd_linear(&e->d);
    const float h = (float)(linear ? VT_FD_STEP_LINEAR : VT_FD_STEP);
    const double tol = fmax(linear ? VT_FD_TOL_LINEAR : VT_FD_TOL, g_rtol);
    double worst = -1, worst_fd = 0;
    size_t worst_j = 0;
    for (size_t j = (size_t)(seed % step); j < n; j += step) {
        const float v = t[j], vp = v + h, vm = v - h;
        t[j] = vp;
        double lp = vt_exec_objective(e, NULL);
        t[j] = vm;
        double lm = vt_exec_objective(e, NULL);
        t[j] = v;
        /* The step actually taken: v +- h rounded to float. */
        const double taken = (double)vp - (double)vm;
        double fd = (lp - lm) / taken, err = fmax(fabs(fd - g[j]) - 2 * obj_err / taken, 0.0) / scale;
        if (isnan(err)) err = INFINITY;
        if (err > worst) worst = err, worst_j = j, worst_fd = fd;
    }
    if (worst <= tol) return true;
    snprintf(msg, len, "[%zu] = %.6g but finite differences give %.6g (error %.3g of max(max |g|, 0.1) = %.3g, bound %g)",
             worst_j, (double)g[worst_j], worst_fd, worst, scale, tol);
    return false;
}

bool vt_fd_direction(vt_exec *e, float *t, size_t n, const float *g, double obj_err, double g_rtol, uint64_t seed,
                     char *msg, size_t len)
{
    if (!n) return true;
    float *keep = malloc(n * sizeof *keep), *v = malloc(n * sizeof *v);
    assert_true(keep && v);
    memcpy(keep, t, n * sizeof *keep);
    vt_fill_uniform(v, n, seed, -1.f, 1.f);
    const bool linear = vt_fd_linear(&e->d);
    /* An LSTM chunk's direction moves every gate of every step at once and its state carries the curvature on
     * through the steps: a smaller step keeps the third-order term of central differences below the bound. */
    const float h = (float)(linear ? VT_FD_STEP_LINEAR : VT_FD_STEP) / (e->d.kind == VDNN_LAYER_LSTM ? 8.0f : 1.0f);
    for (size_t j = 0; j < n; j++) t[j] = keep[j] + h * v[j];
    double abs_p, abs_m, lp = vt_exec_objective(e, &abs_p);
    double want = 0.0, rss = 0.0, steps = 0.0, gmax = 0.0;
    for (size_t j = 0; j < n; j++) {
        const float tm = keep[j] - h * v[j];
        const double taken = (double)t[j] - (double)tm;
        const double gd = (double)g[j] * taken;
        want += gd;
        rss += gd * gd;
        steps += taken * taken;
        gmax = fmax(gmax, fabs((double)g[j]));
        t[j] = tm;
    }
    double lm = vt_exec_objective(e, &abs_m);
    memcpy(t, keep, n * sizeof *keep);
    free(keep), free(v);
    /* Errors of g up to g_rtol of its largest value, independent from element to element, move g . step by about
     * that times the step's length. */
    const double noise = ldexp(abs_p + abs_m, -24) + 2 * obj_err + g_rtol * gmax * sqrt(steps);
    const double bound = (linear ? VT_FD_TOL_LINEAR : VT_FD_TOL) * sqrt(rss) + noise;
    const double got = lp - lm;
    if (fabs(got - want) <= bound) return true;
    snprintf(msg, len, "L(t + hv) - L(t - hv) = %.9g but the gradient gives %.9g (error %.3g, bound %.3g)", got, want,
             fabs(got - want), bound);
    return false;
}
