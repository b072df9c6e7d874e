/* LSTM on the CPU (fp32, OpenBLAS): one chunk of time steps per op, its parameters as a tensor input, and the
 * gather of chunk outputs along time (docs/sequence.md, "LSTM"). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"

static vdnn_status lstm_fp32(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->dtype != VDNN_DTYPE_F32)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: only fp32 maps on the CPU (the LSTM ops have no %s path yet)",
                         vdnn_layer_kind_name(d->kind), vdnn_dtype_name(d->dtype));
    return VDNN_OK;
}

static vdnn_status need(const void *p, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    if (p) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %s is NULL", vdnn_layer_kind_name(d->kind), what);
}

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

/* ---- one chunk of steps ----
 * x[0] {B,1,Tin,ldx}: steps step0 .. step0+S-1 of it, the first In columns of each row (an lstm chunk's rows are
 * [h | c]); x[1] the parameters; x[2] (optional) the previous chunk, whose last row is the incoming (h, c).
 * y {B,1,S,P+H}: rows [h_t | c_t]. aux: the activated gates i, f, g, o per step, laid out [t][b][4H] so that each
 * step's recurrent GEMM reads B contiguous rows. */

typedef struct lstm_dims {
    int b, s, h, pw, w, in, tin, ldx, step0, sp; /* sp: the previous chunk's steps (0: none, the state is zero) */
    bool proj;
} lstm_dims;

typedef struct lstm_params {
    const float *wih, *whh, *whr, *bih, *bhh;
} lstm_params;

static vdnn_status lstm_dims_of(const vdnn_op_desc *d, lstm_dims *m, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    const vdnn_layer_params *p = &d->p;
    const int h = p->filters, pw = vdnn_lstm_h_width(p);
    *m = (lstm_dims){.b = x.n, .s = y.h, .h = h, .pw = pw, .w = pw + h, .in = p->lstm_in, .tin = x.h, .ldx = x.w,
                     .step0 = p->step0, .proj = p->proj > 0};
    size_t nw, nb;
    vdnn_lstm_param_counts(p, &nw, &nb);
    bool ok = d->n_inputs >= 2 && d->n_inputs <= 3 && h >= 1 && p->proj >= 0 && m->in >= 1 && x.c == 1 &&
              x.w >= m->in && p->step0 >= 0 && p->step0 + y.h <= x.h && y.n == x.n && y.c == 1 && y.w == m->w &&
              (size_t)d->in[1].n * d->in[1].c * d->in[1].h * d->in[1].w == nw + nb;
    if (ok && d->n_inputs == 3) {
        const vdnn_shape s = d->in[2];
        ok = s.n == x.n && s.c == 1 && s.w == m->w;
        m->sp = s.h;
    }
    if (!ok)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "lstm: input %dx%dx%dx%d (steps %d.. of its first %d features), "
                         "parameters of %d values and output %dx%dx%dx%d do not fit hidden=%d proj=%d (expected an "
                         "output Bx1xSx(P+H), %zu parameters, a previous chunk Bx1xS'x(P+H))", x.n, x.c, x.h, x.w,
                         p->step0, m->in, d->in[1].w, y.n, y.c, y.h, y.w, h, p->proj, nw + nb);
    return VDNN_OK;
}

static lstm_params params_at(const lstm_dims *m, const float *base)
{
    lstm_params q;
    const size_t h4 = 4 * (size_t)m->h;
    q.wih = base;
    q.whh = q.wih + h4 * (size_t)m->in;
    q.whr = q.whh + h4 * (size_t)m->pw;
    q.bih = q.whr + (m->proj ? (size_t)m->pw * (size_t)m->h : 0);
    q.bhh = q.bih + h4;
    return q;
}

static size_t bwd_floats(const lstm_dims *m)
{
    const size_t bs = (size_t)m->b * (size_t)m->s, b = (size_t)m->b;
    return bs * 4 * (size_t)m->h + 2 * b * (size_t)m->pw + 3 * b * (size_t)m->h + bs;
}

static vdnn_status lstm_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = lstm_fp32(d, err);
    lstm_dims m;
    if (!st) st = lstm_dims_of(d, &m, err);
    if (st) return st;
    const size_t bs = (size_t)m.b * (size_t)m.s;
    *info = (vdnn_op_info){.aux_bytes = bs * 4 * (size_t)m.h * sizeof(float),
                           /* o * tanh(c) before the projection; one step's gates where no aux is kept
                            * (forward-only plans keep no state for backward) */
                           .fwd_ws_bytes = (size_t)m.b * (size_t)m.h * ((m.proj ? 1 : 0) + 4) * sizeof(float),
                           .bwd_ws_bytes = bwd_floats(&m) * sizeof(float),
                           .bwd_needs_x = true,
                           .bwd_needs_y = true};
    return VDNN_OK;
}

/* Row (b, t) of the chunk's input, output and previous chunk. */
static const float *x_row(const lstm_dims *m, const float *x, int b, int t)
{
    return x + ((size_t)b * (size_t)m->tin + (size_t)(m->step0 + t)) * (size_t)m->ldx;
}
static float *y_row(const lstm_dims *m, float *y, int b, int t)
{
    return y + ((size_t)b * (size_t)m->s + (size_t)t) * (size_t)m->w;
}
static const float *prev_row(const lstm_dims *m, const float *xp, int b)
{
    return xp + ((size_t)b * (size_t)m->sp + (size_t)(m->sp - 1)) * (size_t)m->w;
}

/* c_{t-1} of row b: the previous step's, the previous chunk's last, or zero. */
static float c_prev(const lstm_dims *m, const float *y, const float *xp, int b, int t, int j)
{
    if (t > 0) return y[((size_t)b * (size_t)m->s + (size_t)(t - 1)) * (size_t)m->w + (size_t)m->pw + (size_t)j];
    return m->sp ? prev_row(m, xp, b)[m->pw + j] : 0.0f;
}

static vdnn_status lstm_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    lstm_dims m;
    vdnn_status st = lstm_dims_of(d, &m, err);
    if (!st) st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->x[1], d, "the parameters", err);
    if (!st && m.sp) st = need(a->x[2], d, "the previous chunk", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->ws, d, "the workspace", err);
    if (st) return st;
    const lstm_params q = params_at(&m, a->x[1]);
    const int h = m.h, h4 = 4 * m.h, b = m.b;
    /* Training keeps every step's gates in aux; a forward-only call keeps one step's in the workspace. */
    float *gates = a->aux, *mbuf = a->ws + (size_t)b * (size_t)h4;
    const int rows = gates ? b * m.s : b;
    if (!gates) gates = a->ws;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < h4; j++) gates[(size_t)r * (size_t)h4 + (size_t)j] = q.bih[j] + q.bhh[j];
    /* Every step's input projection in one GEMM per sequence, onto both biases. */
    if (a->aux)
        for (int i = 0; i < b; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m.s, h4, m.in, 1.0f, x_row(&m, a->x[0], i, 0), m.ldx,
                        q.wih, m.in, 1.0f, gates + (size_t)i * (size_t)h4, b * h4);
    for (int t = 0; t < m.s; t++) {
        float *gt = a->aux ? gates + (size_t)t * (size_t)b * (size_t)h4 : gates;
        if (!a->aux) {
            if (t > 0)
                for (int j = 0; j < b * h4; j++) gt[j] = q.bih[j % h4] + q.bhh[j % h4];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.in, 1.0f, x_row(&m, a->x[0], 0, t),
                        m.tin * m.ldx, q.wih, m.in, 1.0f, gt, h4);
        }
        if (t > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.pw, 1.0f, y_row(&m, a->y, 0, t - 1),
                        m.s * m.w, q.whh, m.pw, 1.0f, gt, h4);
        else if (m.sp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.pw, 1.0f, prev_row(&m, a->x[2], 0),
                        m.sp * m.w, q.whh, m.pw, 1.0f, gt, h4);
        const long n = (long)b * h;
#pragma omp parallel for if (n * 8 > CPU_PAR_MIN)
        for (long e = 0; e < n; e++) {
            const int i = (int)(e / h), j = (int)(e % h);
            float *g = gt + (size_t)i * (size_t)h4;
            const float gi = sigm(g[j]), gf = sigm(g[h + j]), gg = tanhf(g[2 * h + j]), go = sigm(g[3 * h + j]);
            g[j] = gi, g[h + j] = gf, g[2 * h + j] = gg, g[3 * h + j] = go;
            float *yr = y_row(&m, a->y, i, t);
            const float c = gf * c_prev(&m, a->y, a->x[2], i, t, j) + gi * gg;
            yr[m.pw + j] = c;
            const float out = go * tanhf(c);
            if (m.proj) mbuf[e] = out;
            else yr[j] = out;
        }
        /* LSTMP: h = W_hr (o * tanh(c)). */
        if (m.proj)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, m.pw, h, 1.0f, mbuf, h, q.whr, h, 0.0f,
                        y_row(&m, a->y, 0, t), m.s * m.w);
    }
    return VDNN_OK;
}

static vdnn_status lstm_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    lstm_dims m;
    vdnn_status st = lstm_dims_of(d, &m, err);
    if (st) return st;
    if (!a->dx[0] && !a->dx[1] && !(m.sp && a->dx[2])) return VDNN_OK;
    if (!st) st = need(a->x[0], d, "x", err);
    if (!st) st = need(a->x[1], d, "the parameters", err);
    if (!st && m.sp) st = need(a->x[2], d, "the previous chunk", err);
    if (!st) st = need(a->y, d, "y", err);
    if (!st) st = need(a->dy, d, "dy", err);
    if (!st) st = need(a->aux, d, "aux", err);
    if (!st) st = need(a->ws, d, "the workspace", err);
    if (st) return st;
    const lstm_params q = params_at(&m, a->x[1]);
    const int h = m.h, h4 = 4 * m.h, b = m.b, pw = m.pw;
    const size_t bs = (size_t)b * (size_t)m.s;
    float *dg = a->ws, *dh = dg + bs * (size_t)h4, *dhr = dh + (size_t)b * (size_t)pw;
    float *dcc = dhr + (size_t)b * (size_t)pw, *dm_buf = dcc + (size_t)b * (size_t)h, *mv = dm_buf + (size_t)b * h;
    float *ones = mv + (size_t)b * (size_t)h;
    float *dp = a->dx[1];
    lstm_params dq = {0};
    if (dp) {
        dq = params_at(&m, dp);
        memset(dp, 0, (size_t)vdnn_shape_count(d->in[1]) * sizeof(float));
    }
    memset(dhr, 0, (size_t)b * (size_t)pw * sizeof(float));
    memset(dcc, 0, (size_t)b * (size_t)h * sizeof(float));
    for (int t = m.s - 1; t >= 0; t--) {
        const float *gt = a->aux + (size_t)t * (size_t)b * (size_t)h4;
        float *dgt = dg + (size_t)t * (size_t)b * (size_t)h4;
        for (int i = 0; i < b; i++) {
            const float *dyr = a->dy + ((size_t)i * (size_t)m.s + (size_t)t) * (size_t)m.w;
            for (int j = 0; j < pw; j++) dh[(size_t)i * pw + j] = dyr[j] + dhr[(size_t)i * pw + j];
        }
        float *dm = dh;
        if (m.proj) {
            for (int i = 0; i < b; i++) {
                const float *yr = y_row(&m, a->y, i, t);
                for (int j = 0; j < h; j++) mv[(size_t)i * h + j] = gt[(size_t)i * h4 + 3 * h + j] * tanhf(yr[pw + j]);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, pw, 1.0f, dh, pw, q.whr, h, 0.0f, dm_buf, h);
            if (dp)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, pw, h, b, 1.0f, dh, pw, mv, h, 1.0f,
                            (float *)dq.whr, h);
            dm = dm_buf;
        }
        const long n = (long)b * h;
#pragma omp parallel for if (n * 8 > CPU_PAR_MIN)
        for (long e = 0; e < n; e++) {
            const int i = (int)(e / h), j = (int)(e % h);
            const float *g = gt + (size_t)i * (size_t)h4;
            float *o = dgt + (size_t)i * (size_t)h4;
            const float gi = g[j], gf = g[h + j], gg = g[2 * h + j], go = g[3 * h + j];
            const float c = y_row(&m, a->y, i, t)[pw + j], tc = tanhf(c);
            const float dyc = a->dy[((size_t)i * (size_t)m.s + (size_t)t) * (size_t)m.w + (size_t)pw + (size_t)j];
            const float dme = dm[e];
            const float dc = dyc + dcc[e] + dme * go * (1.0f - tc * tc);
            o[j] = dc * gg * gi * (1.0f - gi);
            o[h + j] = dc * c_prev(&m, a->y, a->x[2], i, t, j) * gf * (1.0f - gf);
            o[2 * h + j] = dc * gi * (1.0f - gg * gg);
            o[3 * h + j] = dme * tc * go * (1.0f - go);
            dcc[e] = dc * gf;
        }
        /* dh_{t-1} from this step's gates; at t = 0 it is the previous chunk's (or nobody's). */
        if (t > 0 || m.sp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, pw, h4, 1.0f, dgt, h4, q.whh, pw, 0.0f, dhr, pw);
    }
    if (dp) {
        for (int i = 0; i < b; i++) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, m.in, m.s, 1.0f, dg + (size_t)i * h4, b * h4,
                        x_row(&m, a->x[0], i, 0), m.ldx, 1.0f, (float *)dq.wih, m.in);
            if (m.s > 1)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, pw, m.s - 1, 1.0f,
                            dg + (size_t)b * h4 + (size_t)i * h4, b * h4, y_row(&m, a->y, i, 0), m.w, 1.0f,
                            (float *)dq.whh, pw);
        }
        if (m.sp)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, pw, b, 1.0f, dg, h4, prev_row(&m, a->x[2], 0),
                        m.sp * m.w, 1.0f, (float *)dq.whh, pw);
        for (size_t r = 0; r < bs; r++) ones[r] = 1.0f;
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)bs, h4, 1.0f, dg, h4, ones, 1, 0.0f, (float *)dq.bih, 1);
        memcpy((float *)dq.bhh, dq.bih, (size_t)h4 * sizeof(float));
    }
    if (a->dx[0]) {
        memset(a->dx[0], 0, vdnn_shape_count(d->in[0]) * sizeof(float));
        for (int i = 0; i < b; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m.s, m.in, h4, 1.0f, dg + (size_t)i * h4, b * h4,
                        q.wih, m.in, 0.0f, (float *)x_row(&m, a->dx[0], i, 0), m.ldx);
    }
    if (m.sp && a->dx[2]) {
        memset(a->dx[2], 0, vdnn_shape_count(d->in[2]) * sizeof(float));
        for (int i = 0; i < b; i++) {
            float *r = (float *)prev_row(&m, a->dx[2], i);
            memcpy(r, dhr + (size_t)i * pw, (size_t)pw * sizeof(float));
            memcpy(r + pw, dcc + (size_t)i * h, (size_t)h * sizeof(float));
        }
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_lstm = {lstm_query, no_create, no_destroy, lstm_forward, lstm_backward, NULL};

/* ---- parameters as a tensor: y = [weights | biases]; backward hands the summed gradient to dw, db ---- */

static vdnn_status params_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = lstm_fp32(d, err);
    if (st) return st;
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    if (d->n_inputs != 1 || d->out.n != 1 || d->out.c != 1 || d->out.h != 1 || (size_t)d->out.w != nw + nb)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "params: output %dx%dx%dx%d, expected 1x1x1x%zu (the lstm's weights "
                         "and biases)", d->out.n, d->out.c, d->out.h, d->out.w, nw + nb);
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status params_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->y, d, "y", err);
    if (!st) st = need(a->w, d, "w", err);
    if (!st) st = need(a->b, d, "b", err);
    if (st) return st;
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    memcpy(a->y, a->w, nw * sizeof(float));
    memcpy(a->y + nw, a->b, nb * sizeof(float));
    return VDNN_OK;
}

static vdnn_status params_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    if (a->dx[0]) memset(a->dx[0], 0, vdnn_shape_count(d->in[0]) * sizeof(float));
    if (!a->dw && !a->db) return VDNN_OK;
    vdnn_status st = need(a->dy, d, "dy", err);
    if (st) return st;
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    if (a->dw) memcpy(a->dw, a->dy, nw * sizeof(float));
    if (a->db) memcpy(a->db, a->dy + nw, nb * sizeof(float));
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_params = {params_query, no_create, no_destroy, params_forward, params_backward, NULL};

/* ---- seq_cat: inputs' first `cols` columns, one after another along time ---- */

static vdnn_status cat_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = lstm_fp32(d, err);
    if (st) return st;
    long t = 0;
    bool ok = d->out.c == 1 && d->out.w == d->p.filters;
    for (int i = 0; i < d->n_inputs && ok; i++) {
        ok = d->in[i].n == d->out.n && d->in[i].c == 1 && d->in[i].w >= d->p.filters;
        t += d->in[i].h;
    }
    if (!ok || t != d->out.h)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "seq_cat: inputs Bx1xS_ixW_i (W_i at least %d) do not make the output "
                         "%dx%dx%dx%d", d->p.filters, d->out.n, d->out.c, d->out.h, d->out.w);
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status cat_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->y, d, "y", err);
    for (int i = 0; i < d->n_inputs && !st; i++) st = need(a->x[i], d, "x", err);
    if (st) return st;
    const size_t cols = (size_t)d->p.filters, t_out = (size_t)d->out.h;
    size_t at = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        const vdnn_shape s = d->in[i];
        for (int b = 0; b < s.n; b++)
            for (int t = 0; t < s.h; t++)
                memcpy(a->y + ((size_t)b * t_out + at + (size_t)t) * cols,
                       a->x[i] + ((size_t)b * (size_t)s.h + (size_t)t) * (size_t)s.w, cols * sizeof(float));
        at += (size_t)s.h;
    }
    return VDNN_OK;
}

static vdnn_status cat_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const size_t cols = (size_t)d->p.filters, t_out = (size_t)d->out.h;
    size_t at = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        const vdnn_shape s = d->in[i];
        if (a->dx[i]) {
            vdnn_status st = need(a->dy, d, "dy", err);
            if (st) return st;
            memset(a->dx[i], 0, vdnn_shape_count(s) * sizeof(float));
            for (int b = 0; b < s.n; b++)
                for (int t = 0; t < s.h; t++)
                    memcpy(a->dx[i] + ((size_t)b * (size_t)s.h + (size_t)t) * (size_t)s.w,
                           a->dy + ((size_t)b * t_out + at + (size_t)t) * cols, cols * sizeof(float));
        }
        at += (size_t)s.h;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_seq_cat = {cat_query, no_create, no_destroy, cat_forward, cat_backward, NULL};
