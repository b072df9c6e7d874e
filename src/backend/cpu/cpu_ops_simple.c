/* Hand-written CPU ops: dropout, concat, add, global average pooling, flatten; fp32 or
 * bf16 maps (bf16 values are widened to fp32 for the arithmetic and rounded once when stored). */
#include "backend/op_check.h"
#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_internal.h"
#include "core/half.h"

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

/* n values of the op's type. */
static void copy_values(const vdnn_op_desc *d, void *dst, const void *src, size_t n)
{
    if (dst != src) memcpy(dst, src, n * vdnn_cpu_esize(d));
}

/* Value i of a map of the op's type, as a float; and storing one, rounded. */
static inline float get(const vdnn_op_desc *d, const void *p, size_t i)
{
    return vdnn_cpu_is_bf16(d) ? vdnn_bf16_to_float(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void put(const vdnn_op_desc *d, void *p, size_t i, float v)
{
    if (vdnn_cpu_is_bf16(d)) ((uint16_t *)p)[i] = vdnn_bf16_from_float(v);
    else ((float *)p)[i] = v;
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

/* out = in * keep(i) / (1-p): forward and backward are the same masked scaling. The mask hash costs more than the
 * value's conversion, so bf16 values go one at a time. */
static void dropout_apply(const vdnn_op_desc *d, uint64_t seed, void *out, const void *in)
{
    size_t n = count(d->out);
    float p = d->p.dropout_p;
    if (!d->training || p == 0.0f) {
        copy_values(d, out, in, n);
        return;
    }
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    ptrdiff_t m = (ptrdiff_t)n;
    if (vdnn_cpu_is_bf16(d)) {
#pragma omp parallel for if (m > PAR_MIN)
        for (ptrdiff_t i = 0; i < m; i++)
            put(d, out, (size_t)i, vdnn_dropout_keep(seed, (uint64_t)i, p) ? get(d, in, (size_t)i) * scale : 0.0f);
        return;
    }
    const float *fi = in;
    float *fo = out;
#pragma omp parallel for if (m > PAR_MIN)
    for (ptrdiff_t i = 0; i < m; i++) fo[i] = vdnn_dropout_keep(seed, (uint64_t)i, p) ? fi[i] * scale : 0.0f;
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

/* ---- concat (along channels) and feat_cat (along the last dimension) ---- */

static vdnn_status concat_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_concat(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

/* Copies `len` values per row from src (rows src_stride values apart) to dst (dst_stride), values of es bytes. */
static void copy_rows(void *dst, size_t dst_stride, const void *src, size_t src_stride, size_t len, size_t rows,
                      size_t es)
{
    for (size_t i = 0; i < rows; i++)
        memcpy((char *)dst + i * dst_stride * es, (const char *)src + i * src_stride * es, len * es);
}

static vdnn_status concat_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, vdnn_layer_kind_name(op->d.kind), err);
    if (st) return st;
    const vdnn_op_desc *d = &op->d;
    size_t rows, joined, len[VDNN_MAX_INPUTS], off = 0, es = vdnn_cpu_esize(d);
    vdnn_op_concat_rows(d, &rows, &joined, len);
    for (int i = 0; i < d->n_inputs; i++) {
        copy_rows((char *)a->y + off * es, joined, a->x[i], len[i], len[i], rows, es);
        off += len[i];
    }
    return VDNN_OK;
}

static vdnn_status concat_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, vdnn_layer_kind_name(op->d.kind), err);
    if (st) return st;
    const vdnn_op_desc *d = &op->d;
    size_t rows, joined, len[VDNN_MAX_INPUTS], off = 0, es = vdnn_cpu_esize(d);
    vdnn_op_concat_rows(d, &rows, &joined, len);
    for (int i = 0; i < d->n_inputs; i++) {
        if (a->dx[i]) copy_rows(a->dx[i], len[i], (const char *)a->dy + off * es, joined, len[i], rows, es);
        off += len[i];
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
    if (vdnn_cpu_is_bf16(&op->d) && be->bf16) {
        vdnn_cpu_bf16_sum((uint16_t *)a->y, (const uint16_t *const *)a->x, k, (size_t)m);
        return VDNN_OK;
    }
    if (vdnn_cpu_is_bf16(&op->d)) { /* the same sums, rounded once, without AVX-512 BF16 */
#pragma omp parallel for if (m > PAR_MIN)
        for (ptrdiff_t i = 0; i < m; i++) {
            float s = get(&op->d, a->x[0], (size_t)i);
            for (int j = 1; j < k; j++) s += get(&op->d, a->x[j], (size_t)i);
            put(&op->d, a->y, (size_t)i, s);
        }
        return VDNN_OK;
    }
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
        if (a->dx[i]) copy_values(&op->d, a->dx[i], a->dy, count(op->d.out));
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
    const vdnn_op_desc *d = &op->d;
    vdnn_shape s = d->in[0];
    size_t hw = (size_t)s.h * (size_t)s.w;
    ptrdiff_t planes = (ptrdiff_t)s.n * s.c;
#pragma omp parallel for if (planes * (ptrdiff_t)hw > PAR_MIN)
    for (ptrdiff_t p = 0; p < planes; p++) {
        double sum = 0.0;
        for (size_t i = 0; i < hw; i++) sum += get(d, a->x[0], (size_t)p * hw + i);
        put(d, a->y, (size_t)p, (float)(sum / (double)hw));
    }
    return VDNN_OK;
}

static vdnn_status gap_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "gap", err);
    if (st) return st;
    if (!a->dx[0]) return VDNN_OK;
    const vdnn_op_desc *d = &op->d;
    vdnn_shape s = d->in[0];
    size_t hw = (size_t)s.h * (size_t)s.w;
    ptrdiff_t planes = (ptrdiff_t)s.n * s.c;
#pragma omp parallel for if (planes * (ptrdiff_t)hw > PAR_MIN)
    for (ptrdiff_t p = 0; p < planes; p++) {
        float g = get(d, a->dy, (size_t)p) / (float)hw;
        if (vdnn_cpu_is_bf16(d)) { /* one value per plane: rounded once */
            const uint16_t h = vdnn_bf16_from_float(g);
            uint16_t *dp = (uint16_t *)a->dx[0] + (size_t)p * hw;
            for (size_t i = 0; i < hw; i++) dp[i] = h;
        } else {
            float *dp = a->dx[0] + (size_t)p * hw;
            for (size_t i = 0; i < hw; i++) dp[i] = g;
        }
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
    copy_values(&op->d, a->y, a->x[0], count(op->d.out));
    return VDNN_OK;
}

static vdnn_status flatten_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "flatten", err);
    if (st) return st;
    if (a->dx[0]) copy_values(&op->d, a->dx[0], a->dy, count(op->d.out));
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_flatten = {flatten_query, no_create, no_destroy, flatten_forward, flatten_backward, NULL};
