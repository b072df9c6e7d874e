/* Softmax with mean cross-entropy on the CPU (the loss of images and of tokens): oneDNN's softmax over each row of
 * classes, fp32 arithmetic in either map type; bf16 logits are widened a block of rows at a time into the workspace,
 * and backward recomputes the fp32 softmax from them rather than read it back rounded. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"
#include "core/half.h"
#include "graph/graph.h"

/* Rows a block holds at most: a bf16 block's fp32 copy takes this many bytes (at least one row). */
#define XENT_BLOCK_BYTES ((size_t)1 << 20)

/* Below this a probability's logarithm loses digits (and 0 has none): that row's loss is taken from its logits. */
#define XENT_TINY_P 1e-30f

/* Rows go in blocks of `block` (the last one `tail` rows, when the count does not divide): a primitive for each size.
 * bf16 workspaces, forward and backward: [block rows of fp32][scratchpad] */
typedef struct xent_state {
    int rows, classes, block, tail;
    cpu_dnnl_step main, last;
    size_t scratch_at, ws_bytes;
} xent_state;

static bool half(const vdnn_op_desc *d) { return d->dtype == VDNN_DTYPE_BF16; }

static vdnn_status xent_shape(const vdnn_op_desc *d, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "softmax_xent: takes 1 input, got %d", d->n_inputs);
    if (vdnn_shape_count(d->in[0]) != vdnn_shape_count(d->out) || d->in[0].n != d->out.n)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "softmax_xent: input %dx%dx%dx%d does not match output %dx%dx%dx%d",
                         d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.n, d->out.c, d->out.h, d->out.w);
    if (d->dtype != VDNN_DTYPE_F32 && d->dtype != VDNN_DTYPE_BF16)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "softmax_xent: no %s path on the CPU", vdnn_dtype_name(d->dtype));
    return VDNN_OK;
}

/* The softmax of `rows` rows in fp32 (in place on a bf16 block's copy; x into y for fp32 maps). */
static vdnn_status softmax_step(cpu_backend *be, int rows, int classes, bool make, cpu_dnnl_step *s, vdnn_error *err)
{
    const dnnl_dim_t dims[2] = {rows, classes};
    dnnl_memory_desc_t md;
    vdnn_status st = vdnn_cpu_dnnl_md(&md, 2, dims, dnnl_ab, "softmax_xent: rows", err);
    dnnl_softmax_v2_desc_t sd;
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, dnnl_softmax_accurate,
                                                                   &md, &md, 1),
                                 "softmax_xent: softmax descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &sd, NULL, make, (const int[]){DNNL_ARG_SRC, DNNL_ARG_DST}, 2, s,
                                     "softmax_xent", err);
    return st;
}

static void xent_free(xent_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->main);
    vdnn_cpu_dnnl_step_fini(&s->last);
}

static vdnn_status xent_build(cpu_backend *be, const vdnn_op_desc *d, bool make, xent_state *s, vdnn_error *err)
{
    vdnn_status st = xent_shape(d, err);
    if (st) return st;
    /* One row per image, or per token of a sequence (vdnn_xent_rows); the loss is the mean over rows. */
    s->rows = (int)vdnn_xent_rows(d->out);
    s->classes = (int)(vdnn_shape_count(d->out) / (size_t)s->rows);
    const size_t fit = XENT_BLOCK_BYTES / ((size_t)s->classes * sizeof(float));
    s->block = fit < 1 ? 1 : fit > (size_t)s->rows ? s->rows : (int)fit;
    s->tail = s->rows % s->block;
    st = softmax_step(be, s->block, s->classes, make, &s->main, err);
    if (!st && s->tail) st = softmax_step(be, s->tail, s->classes, make, &s->last, err);
    if (st) return st;
    size_t used = 0;
    vdnn_cpu_ws_take(&used, half(d) ? (size_t)s->block * (size_t)s->classes * sizeof(float) : 0);
    s->scratch_at = vdnn_cpu_ws_take(&used, s->main.scratch_bytes > s->last.scratch_bytes ? s->main.scratch_bytes
                                                                                          : s->last.scratch_bytes);
    s->ws_bytes = used ? used + CPU_WS_SLACK : 0;
    return VDNN_OK;
}

static vdnn_status xent_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    xent_state s = {0};
    vdnn_status st = xent_build(be, d, false, &s, err);
    /* bf16: backward recomputes the softmax from the logits (backend.h, "Precision"). */
    if (!st)
        *info = (vdnn_op_info){.bwd_needs_x = half(d),
                               .bwd_needs_y = !half(d),
                               .fwd_ws_bytes = s.ws_bytes,
                               .bwd_ws_bytes = half(d) ? s.ws_bytes : 0};
    xent_free(&s);
    return st;
}

static vdnn_status xent_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    xent_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "softmax_xent: out of memory");
    vdnn_status st = xent_build(be, &op->d, true, s, err);
    if (st) {
        xent_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void xent_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    xent_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status check_labels(const int32_t *labels, int n, int k, const char *what, vdnn_error *err)
{
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent %s: label %d of sample %d is not in [0, %d)", what,
                             (int)labels[i], i, k);
    return VDNN_OK;
}

static float logit(const vdnn_op_desc *d, const void *x, size_t i)
{
    return half(d) ? vdnn_bf16_to_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* -log softmax(x)[label] of row r from its logits, in double from the row's maximum: for a probability too small
 * for its logarithm. */
static double row_loss(const vdnn_op_desc *d, const void *x, size_t r, int k, int label)
{
    const size_t o = r * (size_t)k;
    float m = logit(d, x, o);
    for (int c = 1; c < k; c++) m = fmaxf(m, logit(d, x, o + (size_t)c));
    double s = 0.0;
    for (int c = 0; c < k; c++) s += exp((double)logit(d, x, o + (size_t)c) - (double)m);
    return (double)m + log(s) - (double)logit(d, x, o + (size_t)label);
}

/* Block b's rows' fp32 softmax: p (the workspace's copy for bf16 maps, y's rows for fp32 ones) and its row count. */
static vdnn_status block_softmax(cpu_backend *be, const vdnn_op *op, const void *x, float *y, char *ws, int b,
                                 float **p, int *rows, vdnn_error *err)
{
    xent_state *s = op->state;
    const size_t r0 = (size_t)b * (size_t)s->block, k = (size_t)s->classes;
    *rows = r0 + (size_t)s->block <= (size_t)s->rows ? s->block : s->tail;
    cpu_dnnl_step *step = *rows == s->block ? &s->main : &s->last;
    const size_t n = (size_t)*rows * k;
    vdnn_status st = VDNN_OK;
    if (half(&op->d)) {
        *p = (float *)ws;
        st = vdnn_cpu_convert(&be->base, *p, VDNN_DTYPE_F32, (const uint16_t *)x + r0 * k, VDNN_DTYPE_BF16, n, err);
        void *ptrs[] = {*p, *p};
        if (!st) st = vdnn_cpu_dnnl_step_run(be, step, ptrs, ws ? ws + s->scratch_at : NULL, "softmax_xent", err);
    } else {
        *p = y + r0 * k;
        void *ptrs[] = {(void *)((const float *)x + r0 * k), *p};
        st = vdnn_cpu_dnnl_step_run(be, step, ptrs, ws ? ws + s->scratch_at : NULL, "softmax_xent", err);
    }
    return st;
}

static int blocks(const xent_state *s) { return (s->rows + s->block - 1) / s->block; }

static vdnn_status xent_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    xent_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    if (!a->x[0] || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: %s is NULL", a->x[0] ? "output" : "input");
    char *ws = vdnn_cpu_ws_align(a->ws);
    if (s->ws_bytes && !ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: no workspace");
    if (a->loss) {
        if (!a->labels) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: loss wanted but labels are NULL");
        vdnn_status st = check_labels(a->labels, s->rows, s->classes, "forward", err);
        if (st) return st;
    }
    const size_t k = (size_t)s->classes;
    /* Rows' losses are summed in row order, so the result does not depend on threads. */
    double loss = 0.0;
    vdnn_status st = VDNN_OK;
    for (int b = 0; !st && b < blocks(s); b++) {
        float *p;
        int rows;
        st = block_softmax(be, op, a->x[0], a->y, ws, b, &p, &rows, err);
        const size_t r0 = (size_t)b * (size_t)s->block;
        for (int i = 0; !st && a->loss && i < rows; i++) {
            const int label = a->labels[r0 + (size_t)i];
            const float q = p[(size_t)i * k + (size_t)label];
            loss += q >= XENT_TINY_P ? -log((double)q) : row_loss(d, a->x[0], r0 + (size_t)i, (int)k, label);
        }
        if (!st && half(d))
            st = vdnn_cpu_convert(&be->base, (uint16_t *)a->y + r0 * k, VDNN_DTYPE_BF16, p, VDNN_DTYPE_F32,
                                  (size_t)rows * k, err);
    }
    if (!st && a->loss) *a->loss = (float)(loss / s->rows);
    return st;
}

static vdnn_status xent_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    xent_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    const void *in = half(d) ? (const void *)a->x[0] : (const void *)a->y;
    if (!in || !a->labels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent backward: %s is NULL",
                         in ? "labels" : half(d) ? "x (bf16 recomputes the softmax from the logits)" : "y");
    const int n = s->rows, k = s->classes;
    vdnn_status st = check_labels(a->labels, n, k, "backward", err);
    if (st) return st;
    /* A power-of-two loss scale times 1/n is exact, so dx is the unscaled one times the scale, bit for bit. */
    const float inv_n = (1.0f / (float)n) * (a->grad_scale > 0.0f ? a->grad_scale : 1.0f);
    if (!half(d)) {
        const float *y = a->y;
        float *dx = a->dx[0];
#pragma omp parallel for if ((ptrdiff_t)n * k > 32768)
        for (int i = 0; i < n; i++) {
            const float *yr = y + (size_t)i * (size_t)k;
            float *dr = dx + (size_t)i * (size_t)k;
            for (int c = 0; c < k; c++) dr[c] = (yr[c] - (c == a->labels[i] ? 1.0f : 0.0f)) * inv_n;
        }
        return VDNN_OK;
    }
    char *ws = vdnn_cpu_ws_align(a->ws);
    if (!ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent backward: bf16 maps need the workspace");
    for (int b = 0; !st && b < blocks(s); b++) {
        float *p;
        int rows;
        st = block_softmax(be, op, in, NULL, ws, b, &p, &rows, err);
        const size_t r0 = (size_t)b * (size_t)s->block;
        /* The fp32 path's arithmetic on the fp32 softmax, rounded once to bf16. */
#pragma omp parallel for if (!st && (ptrdiff_t)rows * k > 32768)
        for (int i = 0; i < rows; i++) {
            float *pr = p + (size_t)i * (size_t)k;
            const int label = a->labels[r0 + (size_t)i];
            for (int c = 0; c < k; c++) pr[c] = (pr[c] - (c == label ? 1.0f : 0.0f)) * inv_n;
        }
        if (!st)
            st = vdnn_cpu_convert(&be->base, (uint16_t *)a->dx[0] + r0 * (size_t)k, VDNN_DTYPE_BF16, p,
                                  VDNN_DTYPE_F32, (size_t)rows * (size_t)k, err);
    }
    return st;
}

const cpu_op_impl vdnn_cpu_op_softmax_xent = {
    .query = xent_query,
    .create = xent_create,
    .destroy = xent_destroy,
    .forward = xent_forward,
    .backward = xent_backward,
};
