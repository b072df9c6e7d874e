/* LSTM on the CPU (fp32, OpenBLAS; bf16 maps reach it widened: cpu_ops_widen.c, with its large products in bf16
 * where AVX-512 BF16 is there: cpu_ops_lstm_mm16.c): one chunk of time steps per op, its parameters as a tensor
 * input, and the gather of chunk outputs along time (docs/sequence.md, "LSTM"). */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_lstm_mm16.h"
#include "backend/lstm_layout.h"

static vdnn_status lstm_fp32(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->dtype != VDNN_DTYPE_F32)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: only fp32 or bf16 maps on the CPU (no %s path)",
                         vdnn_layer_kind_name(d->kind), vdnn_dtype_name(d->dtype));
    if (d->algo != 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: algorithm %d asked of fp32 maps, which have one",
                         vdnn_layer_kind_name(d->kind), d->algo);
    return VDNN_OK;
}

static vdnn_status no_create(cpu_backend *be, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cpu_backend *be, vdnn_op *op) {}

/* ---- the gates' activations, vectorizable ----
 * libm's expf/tanhf are calls the compiler cannot vectorize, and a chunk makes 5 of them per cell and step (over a
 * million per chunk at B=32, H=256, S=32): they were most of the op's time outside its GEMMs. These are plain float
 * arithmetic that `#pragma omp simd` loops turn into vector code; each result is within a few ulp of libm's, far
 * inside what the PyTorch reference test allows, and the same for the same input wherever the tensors sit. */

/* e^v: v = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^7 (truncation below 1e-8 relative), and
 * 2^n put in the exponent bits. v is clamped to where 2^n is a normal float. */
static inline float lstm_exp(float v)
{
    v = v < -87.0f ? -87.0f : v > 88.0f ? 88.0f : v;
    /* Adding 1.5 * 2^23 rounds to the nearest integer without a rounding instruction (SSE2 has none). */
    const float big = 12582912.0f, t = v * 1.44269504f + big, n = t - big;
    const float r = (v - n * 0.693145752f) - n * 1.42860677e-6f; /* ln 2 in two parts: n * hi is exact */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* t and big share their exponent, so their bits differ by n. */
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const int32_t sb = (bits - 0x4B400000 + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    return p * scale;
}

static inline float lstm_sigm(float v) { return 1.0f / (1.0f + lstm_exp(-v)); }

/* tanh: 1 - 2 / (e^{2|v|} + 1) with v's sign, except near 0, where that cancels and its odd Taylor series to v^11
 * (truncation below 1e-8 relative for |v| < 0.3) is exact enough. */
static inline float lstm_tanh(float v)
{
    const float a = v < 0.0f ? -v : v, a2 = a * a;
    float p = -1382.0f / 155925.0f;
    p = p * a2 + 62.0f / 2835.0f;
    p = p * a2 - 17.0f / 315.0f;
    p = p * a2 + 2.0f / 15.0f;
    p = p * a2 - 1.0f / 3.0f;
    const float small = a + a * a2 * p, large = 1.0f - 2.0f / (lstm_exp(2.0f * a) + 1.0f);
    const float r = a < 0.3f ? small : large;
    return v < 0.0f ? -r : r;
}

/* ---- one chunk of steps ----
 * x[0] {B,1,Tin,ldx}: steps step0 .. step0+S-1 of it, the first In columns of each row (an lstm chunk's rows are
 * [h | c]); x[1] (optional) the previous chunk, whose last row is the incoming (h, c); w and b the layer's
 * parameters (lstm_layout.h), dw and db their gradient from this chunk alone.
 * y {B,1,S,P+H}: rows [h_t | c_t]. aux: the activated gates i, f, g, o per step, laid out [t][b][4H] so that each
 * step's recurrent GEMM reads B contiguous rows. */

static vdnn_status lstm_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = lstm_fp32(d, err);
    vdnn_lstm_dims m;
    if (!st) st = vdnn_lstm_dims_of(d, &m, err);
    if (st) return st;
    *info = vdnn_lstm_info(&m);
    return VDNN_OK;
}

/* One row's cells of a step: g holds the pre-activations i, f, g, o (4h), activated in place; cp is c_{t-1} (NULL:
 * zero); c gets c_t, out o * tanh(c_t). Always inlined, so that each call's cp == NULL test folds away and the
 * loop vectorizes. */
static inline __attribute__((always_inline)) void cell_forward_row(float *restrict g, const float *restrict cp,
                                                                   float *restrict c, float *restrict out, int h)
{
#pragma omp simd
    for (int j = 0; j < h; j++) {
        const float gi = lstm_sigm(g[j]), gf = lstm_sigm(g[h + j]), gg = lstm_tanh(g[2 * h + j]);
        const float go = lstm_sigm(g[3 * h + j]);
        g[j] = gi, g[h + j] = gf, g[2 * h + j] = gg, g[3 * h + j] = go;
        const float cj = cp ? gf * cp[j] + gi * gg : gi * gg;
        c[j] = cj;
        out[j] = go * lstm_tanh(cj);
    }
}

/* One row's gate gradients of a step: g the activated gates, c c_t, cp c_{t-1} (NULL: zero), dyc dL/dc_t from
 * outside, dm dL/d(o * tanh c_t); dcc carries dL/dc from step t+1 in and to step t-1 out; o gets the 4h gate
 * gradients. */
static inline __attribute__((always_inline)) void cell_backward_row(const float *restrict g,
                                                                    const float *restrict c, const float *restrict cp,
                                                                    const float *restrict dyc, const float *restrict dm,
                                                                    float *restrict dcc, float *restrict o, int h)
{
#pragma omp simd
    for (int j = 0; j < h; j++) {
        const float gi = g[j], gf = g[h + j], gg = g[2 * h + j], go = g[3 * h + j];
        const float tc = lstm_tanh(c[j]), dme = dm[j];
        const float dc = dyc[j] + dcc[j] + dme * go * (1.0f - tc * tc);
        o[j] = dc * gg * gi * (1.0f - gi);
        o[h + j] = cp ? dc * cp[j] * gf * (1.0f - gf) : dc * 0.0f * gf * (1.0f - gf);
        o[2 * h + j] = dc * gi * (1.0f - gg * gg);
        o[3 * h + j] = dme * tc * go * (1.0f - go);
        dcc[j] = dc * gf;
    }
}

/* The cells' loops in 16- and 8-wide variants besides the baseline's 4, picked by the CPU at load time (they were
 * a fifth of the op's time in 4-wide SSE). With contraction off (CMakeLists.txt) each variant does the same IEEE
 * operations in the same order, so the results are the same bits on every CPU. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define LSTM_CELL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LSTM_CELL_CLONES
#endif

LSTM_CELL_CLONES static void cell_forward(float *g, const float *cp, float *c, float *out, int h)
{
    if (cp) cell_forward_row(g, cp, c, out, h);
    else cell_forward_row(g, NULL, c, out, h);
}

LSTM_CELL_CLONES static void cell_backward(const float *g, const float *c, const float *cp, const float *dyc,
                                           const float *dm, float *dcc, float *o, int h)
{
    if (cp) cell_backward_row(g, c, cp, dyc, dm, dcc, o, h);
    else cell_backward_row(g, c, NULL, dyc, dm, dcc, o, h);
}

static vdnn_status lstm_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_lstm_dims m;
    vdnn_status st = vdnn_lstm_dims_of(d, &m, err);
    if (!st) st = vdnn_lstm_check_args(d, &m, a, false, "", err);
    if (st) return st;
    const vdnn_lstm_params q = vdnn_lstm_params_at(&m, a->w, a->b);
    const int h = m.h, h4 = 4 * m.h, b = m.b;
    /* Training keeps every step's gates in aux; a forward-only call keeps one step's in the workspace. */
    float *gates = a->aux, *mbuf = a->ws + (size_t)b * (size_t)h4;
    const int rows = gates ? b * m.s : b;
    if (!gates) gates = a->ws;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < h4; j++) gates[(size_t)r * (size_t)h4 + (size_t)j] = q.bih[j] + q.bhh[j];
    /* Every step's input projection in one GEMM per sequence, onto both biases. */
    cpu_lstm_mm16 *mm = op->state;
    if (a->aux && mm) {
        st = vdnn_cpu_lstm_mm16_project(be, mm, &m, vdnn_lstm_x_row(&m, a->x[0], 0, 0), q.wih, gates, a->ws,
                                        vdnn_lstm_info(&m).fwd_ws_bytes, err);
        if (st) return st;
    } else if (a->aux) {
        for (int i = 0; i < b; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m.s, h4, m.in, 1.0f, vdnn_lstm_x_row(&m, a->x[0], i, 0), m.ldx,
                        q.wih, m.in, 1.0f, gates + (size_t)i * (size_t)h4, b * h4);
    }
    for (int t = 0; t < m.s; t++) {
        float *gt = a->aux ? gates + (size_t)t * (size_t)b * (size_t)h4 : gates;
        if (!a->aux) {
            if (t > 0)
                for (int j = 0; j < b * h4; j++) gt[j] = q.bih[j % h4] + q.bhh[j % h4];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.in, 1.0f, vdnn_lstm_x_row(&m, a->x[0], 0, t),
                        m.tin * m.ldx, q.wih, m.in, 1.0f, gt, h4);
        }
        if (t > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.pw, 1.0f, vdnn_lstm_y_row(&m, a->y, 0, t - 1),
                        m.s * m.w, q.whh, m.pw, 1.0f, gt, h4);
        else if (m.sp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h4, m.pw, 1.0f, vdnn_lstm_prev_row(&m, a->x[1], 0),
                        m.sp * m.w, q.whh, m.pw, 1.0f, gt, h4);
        /* On the calling thread: vectorized, a step's cells take some tens of microseconds, too few to be worth
         * waking a team of threads per step (and OpenBLAS's threads wait on the other cores meanwhile). */
        for (int i = 0; i < b; i++) {
            float *yr = vdnn_lstm_y_row(&m, a->y, i, t);
            const float *cp = t > 0 ? vdnn_lstm_y_row(&m, a->y, i, t - 1) + m.pw
                                    : m.sp ? vdnn_lstm_prev_row(&m, a->x[1], i) + m.pw : NULL;
            float *out = m.proj ? mbuf + (size_t)i * (size_t)h : yr;
            cell_forward(gt + (size_t)i * (size_t)h4, cp, yr + m.pw, out, h);
        }
        /* LSTMP: h = W_hr (o * tanh(c)). */
        if (m.proj)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, m.pw, h, 1.0f, mbuf, h, q.whr, h, 0.0f,
                        vdnn_lstm_y_row(&m, a->y, 0, t), m.s * m.w);
    }
    return VDNN_OK;
}

/* The parameter gradients' parts no product of cpu_ops_lstm_mm16.c makes, from dg ([b][t][4H]): dW_hh from the
 * previous chunk's last h, and the biases. */
static void small_param_grads(const vdnn_lstm_dims *m, const vdnn_op_args *a, const vdnn_lstm_params *dq,
                              const float *dg, float *ones)
{
    const int h4 = 4 * m->h;
    const size_t bs = (size_t)m->b * (size_t)m->s;
    if (m->sp)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, m->pw, m->b, 1.0f, dg, m->s * h4,
                    vdnn_lstm_prev_row(m, a->x[1], 0), m->sp * m->w, 1.0f, (float *)dq->whh, m->pw);
    for (size_t r = 0; r < bs; r++) ones[r] = 1.0f;
    cblas_sgemv(CblasRowMajor, CblasTrans, (int)bs, h4, 1.0f, dg, h4, ones, 1, 0.0f, (float *)dq->bih, 1);
    memcpy((float *)dq->bhh, dq->bih, (size_t)h4 * sizeof(float));
}

/* The previous chunk's gradient: its last row gets dL/dh and dL/dc carried out of step 0, the rest zeros. */
static void prev_grad(const vdnn_op_desc *d, const vdnn_lstm_dims *m, const vdnn_op_args *a, const float *dhr,
                      const float *dcc)
{
    memset(a->dx[1], 0, vdnn_shape_count(d->in[1]) * sizeof(float));
    for (int i = 0; i < m->b; i++) {
        float *r = (float *)vdnn_lstm_prev_row(m, a->dx[1], i);
        memcpy(r, dhr + (size_t)i * m->pw, (size_t)m->pw * sizeof(float));
        memcpy(r + m->pw, dcc + (size_t)i * m->h, (size_t)m->h * sizeof(float));
    }
}

static vdnn_status lstm_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_lstm_dims m;
    vdnn_status st = vdnn_lstm_dims_of(d, &m, err);
    if (st) return st;
    if (!a->dx[0] && !a->dw && !(m.sp && a->dx[1])) return VDNN_OK;
    st = vdnn_lstm_check_args(d, &m, a, true, "", err);
    if (st) return st;
    const vdnn_lstm_params q = vdnn_lstm_params_at(&m, a->w, a->b);
    const int h = m.h, h4 = 4 * m.h, b = m.b, pw = m.pw;
    const size_t bs = (size_t)b * (size_t)m.s;
    float *dg = a->ws, *dh = dg + bs * (size_t)h4, *dhr = dh + (size_t)b * (size_t)pw;
    float *dcc = dhr + (size_t)b * (size_t)pw, *dm_buf = dcc + (size_t)b * (size_t)h, *mv = dm_buf + (size_t)b * h;
    float *ones = mv + (size_t)b * (size_t)h;
    /* The parameters' gradient from this chunk alone, written afresh (the executor sums the chunks'). */
    const bool dp = a->dw != NULL;
    vdnn_lstm_params dq = {0};
    if (dp) {
        size_t nw, nb;
        vdnn_lstm_param_counts(&d->p, &nw, &nb);
        dq = vdnn_lstm_params_at(&m, a->dw, a->db);
        memset(a->dw, 0, nw * sizeof(float));
        memset(a->db, 0, nb * sizeof(float));
    }
    memset(dhr, 0, (size_t)b * (size_t)pw * sizeof(float));
    memset(dcc, 0, (size_t)b * (size_t)h * sizeof(float));
    for (int t = m.s - 1; t >= 0; t--) {
        const float *gt = a->aux + (size_t)t * (size_t)b * (size_t)h4;
        /* dg is laid out [b][t][4H] (aux is [t][b]): a step's rows are strided, which its GEMM takes, and the
         * chunk's rows follow y's and, where the input is this chunk's alone, x's, so that the weight gradients
         * and dx are single GEMMs over all B*S rows instead of B thin ones that each re-read dW. */
        float *dgt = dg + (size_t)t * (size_t)h4;
        for (int i = 0; i < b; i++) {
            const float *dyr = a->dy + ((size_t)i * (size_t)m.s + (size_t)t) * (size_t)m.w;
            for (int j = 0; j < pw; j++) dh[(size_t)i * pw + j] = dyr[j] + dhr[(size_t)i * pw + j];
        }
        float *dm = dh;
        if (m.proj) {
            for (int i = 0; i < b; i++) {
                const float *yr = vdnn_lstm_y_row(&m, a->y, i, t);
                for (int j = 0; j < h; j++) mv[(size_t)i * h + j] = gt[(size_t)i * h4 + 3 * h + j] * lstm_tanh(yr[pw + j]);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, pw, 1.0f, dh, pw, q.whr, h, 0.0f, dm_buf, h);
            if (dp)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, pw, h, b, 1.0f, dh, pw, mv, h, 1.0f,
                            (float *)dq.whr, h);
            dm = dm_buf;
        }
        for (int i = 0; i < b; i++) {
            const float *cp = t > 0 ? vdnn_lstm_y_row(&m, a->y, i, t - 1) + pw
                                    : m.sp ? vdnn_lstm_prev_row(&m, a->x[1], i) + pw : NULL;
            const size_t e = (size_t)i * (size_t)h;
            const float *dyr = a->dy + ((size_t)i * (size_t)m.s + (size_t)t) * (size_t)m.w + (size_t)pw;
            const float *g = gt + (size_t)i * (size_t)h4, *c = vdnn_lstm_y_row(&m, a->y, i, t) + pw;
            float *o = dgt + (size_t)i * (size_t)m.s * (size_t)h4;
            cell_backward(g, c, cp, dyr, dm + e, dcc + e, o, h);
        }
        /* dh_{t-1} from this step's gates; at t = 0 it is the previous chunk's (or nobody's). */
        if (t > 0 || m.sp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, pw, h4, 1.0f, dgt, m.s * h4, q.whh, pw, 0.0f,
                        dhr, pw);
    }
    if (dp) small_param_grads(&m, a, &dq, dg, ones);
    cpu_lstm_mm16 *mm = op->state;
    if (mm) {
        const vdnn_lstm_mm16_grads g = {.dg = dg, .x = vdnn_lstm_x_row(&m, a->x[0], 0, 0), .wih = q.wih, .y = a->y,
                                        .dwih = dp ? (float *)dq.wih : NULL, .dx = a->dx[0],
                                        .dwhh = dp ? (float *)dq.whh : NULL};
        st = vdnn_cpu_lstm_mm16_backward(be, mm, &m, &g, a->ws, vdnn_lstm_info(&m).bwd_ws_bytes, err);
        if (!st && m.sp && a->dx[1]) prev_grad(d, &m, a, dhr, dcc);
        return st;
    }
    /* x's rows (b, t) are evenly spaced when the chunk's input has its steps alone (tin == S). */
    const bool x_flat = m.tin == m.s;
    const size_t sh4 = (size_t)m.s * (size_t)h4;
    if (dp) {
        if (x_flat)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, m.in, (int)bs, 1.0f, dg, h4,
                        vdnn_lstm_x_row(&m, a->x[0], 0, 0), m.ldx, 1.0f, (float *)dq.wih, m.in);
        else
            for (int i = 0; i < b; i++)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, m.in, m.s, 1.0f, dg + (size_t)i * sh4, h4,
                            vdnn_lstm_x_row(&m, a->x[0], i, 0), m.ldx, 1.0f, (float *)dq.wih, m.in);
    }
    if (a->dx[0]) {
        memset(a->dx[0], 0, vdnn_shape_count(d->in[0]) * sizeof(float));
        if (x_flat)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bs, m.in, h4, 1.0f, dg, h4, q.wih, m.in, 0.0f,
                        (float *)vdnn_lstm_x_row(&m, a->dx[0], 0, 0), m.ldx);
        else
            for (int i = 0; i < b; i++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m.s, m.in, h4, 1.0f, dg + (size_t)i * sh4, h4,
                            q.wih, m.in, 0.0f, (float *)vdnn_lstm_x_row(&m, a->dx[0], i, 0), m.ldx);
    }
    /* dW_hh += sum over rows (b, t >= 1) of dg(b, t)^T h(b, t-1): y's rows follow dg's, so one GEMM over rows 1 ..
     * B*S-1 pairs each with the row before, once rows (b >= 1, 0) -- paired with the previous sequence's last h --
     * are zeroed. Last, as it spoils dg for everything above. */
    if (dp && m.s > 1) {
        for (int i = 1; i < b; i++) memset(dg + (size_t)i * sh4, 0, (size_t)h4 * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h4, pw, (int)bs - 1, 1.0f, dg + h4, h4,
                    vdnn_lstm_y_row(&m, a->y, 0, 0), m.w, 1.0f, (float *)dq.whh, pw);
    }
    if (m.sp && a->dx[1]) prev_grad(d, &m, a, dhr, dcc);
    return VDNN_OK;
}

/* With bf16 maps (widened) a chunk has up to three candidates (vdnn_cpu_lstm16_variant): "default", its fp32 copies
 * of the batch within VDNN_WIDEN_LSTM_GROUP_BYTES and, where AVX-512 BF16 is there, its large products in bf16;
 * "grouped", smaller groups within the other widened ops' bound (less workspace; more and smaller recurrent
 * products); "grouped-fp32", those groups with fp32 products and no bf16 copies (the least workspace). Their
 * parameter gradients round differently (sums over other groups, other products): numerics tells the planners. fp32
 * has one. */
static vdnn_status lstm_algos(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_algo *out, int *n, vdnn_error *err)
{
    if (d->dtype != VDNN_DTYPE_BF16) return vdnn_op_algos_single(&be->base, d, out, n, err);
    *n = 0;
    int group;
    bool products;
    for (int k = 0; k < VDNN_MAX_ALGOS; k++) {
        vdnn_op_desc dk = *d;
        dk.algo = k;
        if (!vdnn_cpu_lstm16_variant(be, &dk, &group, &products)) break;
        memset(&out[k], 0, sizeof out[k]);
        snprintf(out[k].name, sizeof out[k].name, "%s", k == 0 ? "default" : products || !be->bf16 ? "grouped"
                                                                                                 : "grouped-fp32");
        snprintf(out[k].detail, sizeof out[k].detail, "fp32 copies of %d of the batch's %d samples at a time, %s "
                 "products", group, d->out.n, products ? "bf16" : "fp32");
        out[k].numerics = group | (products ? 1 << 24 : 0);
        vdnn_status st = vdnn_cpu_op_query(&be->base, &dk, &out[k].info, err);
        if (st) return st;
        *n = k + 1;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_lstm = {lstm_query, no_create, no_destroy, lstm_forward, lstm_backward, lstm_algos};

/* The chunk op whose large products run in bf16 (chosen for bf16 maps where AVX-512 BF16 is there, and widened:
 * it runs on the fp32 copies of a group of samples, op->d). Its d->algo 1, set by the widening for the
 * "grouped-fp32" candidate, keeps the products fp32, with no bf16 copies. */
static vdnn_status mm16_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_op_desc d0 = *d;
    d0.algo = 0;
    vdnn_status st = lstm_query(be, &d0, info, err);
    vdnn_lstm_dims m;
    if (!st) st = vdnn_lstm_dims_of(d, &m, err);
    return st || d->algo == 1 ? st : vdnn_cpu_lstm_mm16_info(be, &m, info, err);
}

static vdnn_status mm16_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    vdnn_lstm_dims m;
    vdnn_status st = vdnn_lstm_dims_of(&op->d, &m, err);
    if (st || op->d.algo == 1) return st;
    return vdnn_cpu_lstm_mm16_create(be, &m, (cpu_lstm_mm16 **)&op->state, err);
}

static void mm16_destroy(cpu_backend *be, vdnn_op *op) { vdnn_cpu_lstm_mm16_destroy(op->state); }

const cpu_op_impl vdnn_cpu_op_lstm_mm16 = {mm16_query, mm16_create, mm16_destroy, lstm_forward, lstm_backward,
                                           lstm_algos};

/* ---- seq_cat: inputs' first `cols` columns, one after another along time ---- */

static vdnn_status cat_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    /* Copies of rows: any type the backend took (bf16 too). */
    vdnn_status st = vdnn_seq_cat_check(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status cat_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = vdnn_cpu_need(a->y, d, "y", err);
    for (int i = 0; i < d->n_inputs && !st; i++) st = vdnn_cpu_need(a->x[i], d, "x", err);
    if (st) return st;
    const size_t cols = (size_t)d->p.filters, t_out = (size_t)d->out.h, es = vdnn_cpu_esize(d);
    size_t at = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        const vdnn_shape s = d->in[i];
        for (int b = 0; b < s.n; b++)
            for (int t = 0; t < s.h; t++)
                memcpy((char *)a->y + ((size_t)b * t_out + at + (size_t)t) * cols * es,
                       (const char *)a->x[i] + ((size_t)b * (size_t)s.h + (size_t)t) * (size_t)s.w * es, cols * es);
        at += (size_t)s.h;
    }
    return VDNN_OK;
}

static vdnn_status cat_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const size_t cols = (size_t)d->p.filters, t_out = (size_t)d->out.h, es = vdnn_cpu_esize(d);
    size_t at = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        const vdnn_shape s = d->in[i];
        if (a->dx[i]) {
            vdnn_status st = vdnn_cpu_need(a->dy, d, "dy", err);
            if (st) return st;
            memset(a->dx[i], 0, vdnn_shape_count(s) * es); /* all-zero bits: +0 in every type */
            for (int b = 0; b < s.n; b++)
                for (int t = 0; t < s.h; t++)
                    memcpy((char *)a->dx[i] + ((size_t)b * (size_t)s.h + (size_t)t) * (size_t)s.w * es,
                           (const char *)a->dy + ((size_t)b * t_out + at + (size_t)t) * cols * es, cols * es);
        }
        at += (size_t)s.h;
    }
    return VDNN_OK;
}

const cpu_op_impl vdnn_cpu_op_seq_cat = {cat_query, no_create, no_destroy, cat_forward, cat_backward, NULL};
