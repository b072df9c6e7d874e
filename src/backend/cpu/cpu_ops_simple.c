/* Hand-written CPU ops: dropout, concat, add, global average pooling, flatten, softmax with cross-entropy. */
#include "backend/op_check.h"
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 32768

static size_t count(vdnn_shape s) { return vdnn_shape_count(s); }

static vdnn_status need_fwd(const vdnn_op *op, const vdnn_op_args *a, const char *name, vdnn_error *err)
{
    for (int i = 0; i < op->d.n_inputs; i++)
        if (!a->x[i]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: input %d is NULL", name, i);
    if (!a->y) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s forward: output is NULL", name);
    return VDNN_OK;
}

static vdnn_status need_dy(const vdnn_op_args *a, const char *name, vdnn_error *err)
{
    if (!a->dy) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s backward: dy is NULL", name);
    return VDNN_OK;
}

static void copy_floats(float *dst, const float *src, size_t n)
{
    if (dst != src) memcpy(dst, src, n * sizeof *dst);
}

static vdnn_status one_input_same_count(const vdnn_op_desc *d, const char *name, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: takes 1 input, got %d", name, d->n_inputs);
    if (count(d->in[0]) != count(d->out) || d->in[0].n != d->out.n)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: input %dx%dx%dx%d does not match output %dx%dx%dx%d", name,
                         d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.n, d->out.c, d->out.h, d->out.w);
    return VDNN_OK;
}

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

/* ---- dropout ---- */

static vdnn_status dropout_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "dropout", err);
    if (st) return st;
    float p = d->p.dropout_p;
    if (!(p >= 0.0f && p <= 1.0f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "dropout: probability %g is not in [0, 1]", (double)p);
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

/* out = in * keep(i) / (1-p): forward and backward are the same masked scaling. */
static void dropout_apply(const vdnn_op_desc *d, uint64_t seed, float *out, const float *in)
{
    size_t n = count(d->out);
    float p = d->p.dropout_p;
    if (!d->training || p == 0.0f) {
        copy_floats(out, in, n);
        return;
    }
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for if (m > PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) out[i] = vdnn_dropout_keep(seed, (uint64_t)i, p) ? in[i] * scale : 0.0f;
}

static vdnn_status dropout_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "dropout", err);
    if (st) return st;
    dropout_apply(&op->d, a->seed, a->y, a->x[0]);
    return VDNN_OK;
}

static vdnn_status dropout_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "dropout", err);
    if (st) return st;
    if (a->dx[0]) dropout_apply(&op->d, a->seed, a->dx[0], a->dy);
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_dropout = {dropout_query, no_create, no_destroy, dropout_forward, dropout_backward, NULL};

/* ---- concat (along channels) ---- */

static vdnn_status concat_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_concat(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

/* Copies `len` floats per sample from src (sample stride src_stride) to dst (dst_stride). */
static void copy_per_sample(float *dst, size_t dst_stride, const float *src, size_t src_stride, size_t len, int n)
{
    for (int i = 0; i < n; i++) memcpy(dst + (size_t)i * dst_stride, src + (size_t)i * src_stride, len * sizeof *dst);
}

static vdnn_status concat_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "concat", err);
    if (st) return st;
    const vdnn_op_desc *d = &op->d;
    size_t hw = (size_t)d->out.h * (size_t)d->out.w, joined = (size_t)d->out.c * hw, off = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        size_t len = (size_t)d->in[i].c * hw;
        copy_per_sample(a->y + off, joined, a->x[i], len, len, d->out.n);
        off += len;
    }
    return VDNN_OK;
}

static vdnn_status concat_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "concat", err);
    if (st) return st;
    const vdnn_op_desc *d = &op->d;
    size_t hw = (size_t)d->out.h * (size_t)d->out.w, joined = (size_t)d->out.c * hw, off = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        size_t len = (size_t)d->in[i].c * hw;
        if (a->dx[i]) copy_per_sample(a->dx[i], len, a->dy + off, joined, len, d->out.n);
        off += len;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_concat = {concat_query, no_create, no_destroy, concat_forward, concat_backward, NULL};

/* ---- add ---- */

static vdnn_status add_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_add(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status add_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "add", err);
    if (st) return st;
    ptrdiff_t m = (ptrdiff_t)count(op->d.out);
    int k = op->d.n_inputs;
    float *y = a->y;
#pragma omp parallel for if (m > PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) {
        float s = a->x[0][i];
        for (int j = 1; j < k; j++) s += a->x[j][i];
        y[i] = s;
    }
    return VDNN_OK;
}

static vdnn_status add_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "add", err);
    if (st) return st;
    for (int i = 0; i < op->d.n_inputs; i++)
        if (a->dx[i]) copy_floats(a->dx[i], a->dy, count(op->d.out));
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_add = {add_query, no_create, no_destroy, add_forward, add_backward, NULL};

/* ---- global average pooling ---- */

static vdnn_status gap_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_shape s = d->in[0];
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "gap: takes 1 input, got %d", d->n_inputs);
    if (d->out.n != s.n || d->out.c != s.c || d->out.h != 1 || d->out.w != 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "gap: output %dx%dx%dx%d is not %dx%dx1x1", d->out.n, d->out.c, d->out.h,
                         d->out.w, s.n, s.c);
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status gap_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "gap", err);
    if (st) return st;
    vdnn_shape s = op->d.in[0];
    size_t hw = (size_t)s.h * (size_t)s.w;
    ptrdiff_t planes = (ptrdiff_t)s.n * s.c;
    const float *x = a->x[0];
    float *y = a->y;
#pragma omp parallel for if (planes * (ptrdiff_t)hw > PAR_MIN)
    for (ptrdiff_t p = 0; p < planes; p++) {
        const float *xp = x + (size_t)p * hw;
        double sum = 0.0;
        for (size_t i = 0; i < hw; i++) sum += xp[i];
        y[p] = (float)(sum / (double)hw);
    }
    return VDNN_OK;
}

static vdnn_status gap_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "gap", err);
    if (st) return st;
    if (!a->dx[0]) return VDNN_OK;
    vdnn_shape s = op->d.in[0];
    size_t hw = (size_t)s.h * (size_t)s.w;
    ptrdiff_t planes = (ptrdiff_t)s.n * s.c;
    float *dx = a->dx[0];
    const float *dy = a->dy;
#pragma omp parallel for if (planes * (ptrdiff_t)hw > PAR_MIN)
    for (ptrdiff_t p = 0; p < planes; p++) {
        float g = dy[p] / (float)hw;
        float *dp = dx + (size_t)p * hw;
        for (size_t i = 0; i < hw; i++) dp[i] = g;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_gap = {gap_query, no_create, no_destroy, gap_forward, gap_backward, NULL};

/* ---- flatten ---- */

static vdnn_status flatten_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "flatten", err);
    if (st) return st;
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status flatten_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "flatten", err);
    if (st) return st;
    copy_floats(a->y, a->x[0], count(op->d.out));
    return VDNN_OK;
}

static vdnn_status flatten_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "flatten", err);
    if (st) return st;
    if (a->dx[0]) copy_floats(a->dx[0], a->dy, count(op->d.out));
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_flatten = {flatten_query, no_create, no_destroy, flatten_forward, flatten_backward, NULL};

/* ---- softmax + mean cross-entropy ---- */

static vdnn_status xent_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "softmax_xent", err);
    if (st) return st;
    *info = (vdnn_op_info){.bwd_needs_y = true};
    return VDNN_OK;
}

static vdnn_status check_labels(const int32_t *labels, int n, int k, const char *what, vdnn_error *err)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent %s: label %d of sample %d is not in [0, %d)", what,
                             (int)labels[i], i, k);
    return VDNN_OK;
}

static vdnn_status xent_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "softmax_xent", err);
    if (st) return st;
    int n = op->d.out.n;
    int k = (int)(count(op->d.out) / (size_t)n);
    if (a->loss) {
        if (!a->labels) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: loss wanted but labels are NULL");
        st = check_labels(a->labels, n, k, "forward", err);
        if (st) return st;
    }
    const float *x = a->x[0];
    float *y = a->y;
    double loss = 0.0;
    /* Per-sample losses are summed in sample order below, so the result does not depend on threads. */
    double per[64];
    for (int n0 = 0; n0 < n; n0 += 64) {
        int nb = n - n0 < 64 ? n - n0 : 64;
#pragma omp parallel for if ((ptrdiff_t)nb * k > PAR_MIN)
        for (int j = 0; j < nb; j++) {
            const float *xr = x + (size_t)(n0 + j) * (size_t)k;
            float *yr = y + (size_t)(n0 + j) * (size_t)k;
            float m = xr[0];
            for (int c = 1; c < k; c++) m = xr[c] > m ? xr[c] : m;
            double s = 0.0;
            for (int c = 0; c < k; c++) s += exp((double)xr[c] - (double)m);
            double lse = (double)m + log(s);
            if (a->loss) per[j] = lse - (double)xr[a->labels[n0 + j]];
            /* Written after reading xr, in case y aliases x. */
            for (int c = 0; c < k; c++) yr[c] = (float)exp((double)xr[c] - lse);
        }
        if (a->loss)
            for (int j = 0; j < nb; j++) loss += per[j];
    }
    if (a->loss) *a->loss = (float)(loss / n);
    return VDNN_OK;
}

static vdnn_status xent_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    if (!a->y || !a->labels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent backward: %s is NULL", a->y ? "labels" : "y");
    int n = op->d.out.n;
    int k = (int)(count(op->d.out) / (size_t)n);
    vdnn_status st = check_labels(a->labels, n, k, "backward", err);
    if (st) return st;
    const float *y = a->y;
    float *dx = a->dx[0];
    float inv_n = 1.0f / (float)n;
#pragma omp parallel for if ((ptrdiff_t)n * k > PAR_MIN)
    for (int i = 0; i < n; i++) {
        const float *yr = y + (size_t)i * (size_t)k;
        float *dr = dx + (size_t)i * (size_t)k;
        for (int c = 0; c < k; c++) dr[c] = (yr[c] - (c == a->labels[i] ? 1.0f : 0.0f)) * inv_n;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_softmax_xent = {xent_query, no_create, no_destroy, xent_forward, xent_backward, NULL};
