/* The LSTM ops on CUDA (fp32; bf16 and fp16 maps widened into it by cuda_ops_lstm_half.c): one chunk of time steps with
 * cuBLAS SGEMMs (the input projection of all steps in one strided-batched call over the sequences, one recurrent
 * GEMM per step, one more with a projection) around small kernels for the gates, the parameters as a tensor, and
 * seq_cat. Shapes, flags, aux and workspaces are the CPU backend's (cpu_ops_lstm.c, docs/sequence.md "LSTM"), so
 * plans made with either backend's op info hold on the other, and the GEMMs mirror its cblas calls one for one.
 * cuBLAS is column-major: a row-major matrix M (r x c, leading dimension ld) is the column-major M^T with the same
 * ld, so the CPU's row-major C = op(A) op(B) is asked here as C^T = op(B)^T op(A)^T, B's pointer first. */
#include "backend/cuda/cuda_internal.h"
#include "backend/lstm_layout.h"
#include "backend/cuda/cuda_kernels_lstm.h"

#include <stdint.h>

static const float one = 1.0f, zero = 0.0f;

static cudaStream_t compute(cuda_backend *b) { return b->stream[VDNN_QUEUE_COMPUTE]; }

static vdnn_status need(const void *p, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    if (p) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "cuda %s: %s is NULL", vdnn_layer_kind_name(d->kind), what);
}

static vdnn_status kernel(cudaError_t e, const vdnn_op_desc *d, const char *what, vdnn_error *err)
{
    return vdnn_cuda_check(e, err, "cuda %s: %s", vdnn_layer_kind_name(d->kind), what);
}

static vdnn_status gemm(cuda_backend *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc,
                        const char *what, vdnn_error *err)
{
    return vdnn_cublas_check(cublasSgemm(b->cublas, ta, tb, m, n, k, &one, A, lda, B, ldb, beta, C, ldc), err,
                             "cuda lstm %s: cublasSgemm (%dx%dx%d)", what, m, n, k);
}

/* The same product for `count` matrices sa, sb and sc values apart (sa = 0: one A for all). */
static vdnn_status gemm_batched(cuda_backend *b, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                                const float *beta, float *C, int ldc, long long sc, int count, const char *what,
                                vdnn_error *err)
{
    return vdnn_cublas_check(cublasSgemmStridedBatched(b->cublas, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb, beta,
                                                       C, ldc, sc, count),
                             err, "cuda lstm %s: cublasSgemmStridedBatched (%d of %dx%dx%d)", what, count, m, n, k);
}

/* ---- one chunk of steps ----
 * x[0] {B,1,Tin,ldx}: steps step0 .. step0+S-1 of it, the first In columns of each row; x[1] (optional) the
 * previous chunk, whose last row is the incoming (h, c); w and b the layer's parameters, dw and db their gradient
 * from this chunk alone (lstm_layout.h). y {B,1,S,P+H}: rows [h_t | c_t].
 * aux: the activated gates per step, [t][b][4H], so that each step's recurrent GEMM reads B contiguous rows. */

static vdnn_status lstm_dims_of(const vdnn_op_desc *d, vdnn_lstm_dims *m, vdnn_error *err)
{
    vdnn_status st = vdnn_lstm_dims_of(d, m, err);
    if (st) return st;
    size_t nw, nb;
    vdnn_lstm_param_counts(&d->p, &nw, &nb);
    /* cuBLAS takes int sizes and leading dimensions: the gates of the chunk (ldc B 4H) and the parameters are the
     * largest of them (the tensors are held to VDNN_CUDA_MAX_TENSOR_VALUES by the op lookup). */
    if ((size_t)m->b * (size_t)m->s * 4 * (size_t)m->h > (size_t)INT32_MAX || nw + nb > (size_t)INT32_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda lstm: %d x %d steps of %d cells exceed cuBLAS's int sizes "
                         "(a smaller batch or chunk=)", m->b, m->s, m->h);
    return VDNN_OK;
}

static vdnn_status lstm_query(cuda_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_lstm_dims m;
    vdnn_status st = lstm_dims_of(d, &m, err);
    if (st) return st;
    *info = vdnn_lstm_info(&m);
    return VDNN_OK;
}

/* c_{t-1} for step t: row 0 of it and the distance between the batch's rows; NULL when the state is zero. */
static const float *c_prev_at(const vdnn_lstm_dims *m, const float *y, const float *xp, int t, long long *ld)
{
    if (t > 0) {
        *ld = (long long)m->s * m->w;
        return vdnn_lstm_y_row(m, (float *)y, 0, t - 1) + m->pw;
    }
    *ld = (long long)m->sp * m->w;
    return m->sp ? vdnn_lstm_prev_row(m, xp, 0) + m->pw : NULL;
}

static vdnn_status lstm_forward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_lstm_dims m;
    vdnn_status st = lstm_dims_of(d, &m, err);
    if (!st) st = vdnn_lstm_check_args(d, &m, a, false, "cuda ", err);
    if (st) return st;
    const vdnn_lstm_params q = vdnn_lstm_params_at(&m, a->w, a->b);
    const int h = m.h, h4 = 4 * m.h, b = m.b, sw = m.s * m.w;
    cudaStream_t s = compute(be);
    /* Training keeps every step's gates in aux; a forward-only call keeps one step's in the workspace. */
    float *gates = a->aux, *mbuf = a->ws + (size_t)b * (size_t)h4;
    const size_t rows = gates ? (size_t)b * (size_t)m.s : (size_t)b;
    if (!gates) gates = a->ws;
    st = kernel(vdnn_cuda_k_lstm_bias(s, gates, q.bih, q.bhh, rows, h4), d, "bias kernel", err);
    /* Every step's input projection in one call, one matrix per sequence: row-major G_i (S x 4H, rows B 4H apart,
     * sequences 4H apart) += X_i (S x In, ld ldx) W_ih^T, asked as G_i^T (4H x S) = W_ih (stored as the column-major
     * W_ih^T: op T, ld In) X_i^T (as stored, ld ldx); W_ih shared (stride 0), X_i Tin ldx values apart. */
    if (!st && a->aux)
        st = gemm_batched(be, CUBLAS_OP_T, CUBLAS_OP_N, h4, m.s, m.in, q.wih, m.in, 0, vdnn_lstm_x_row(&m, a->x[0], 0, 0), m.ldx,
                          (long long)m.tin * m.ldx, &one, gates, b * h4, h4, b, "input projection", err);
    for (int t = 0; t < m.s && !st; t++) {
        float *gt = a->aux ? gates + (size_t)t * (size_t)b * (size_t)h4 : gates;
        if (!a->aux) {
            if (t > 0) st = kernel(vdnn_cuda_k_lstm_bias(s, gt, q.bih, q.bhh, (size_t)b, h4), d, "bias kernel", err);
            /* Step t alone: G_t (B x 4H) += X_t (B x In, rows Tin ldx apart) W_ih^T, asked as
             * G_t^T (4H x B) = W_ih (op T, ld In) X_t^T (as stored, ld Tin ldx). */
            if (!st)
                st = gemm(be, CUBLAS_OP_T, CUBLAS_OP_N, h4, b, m.in, q.wih, m.in, vdnn_lstm_x_row(&m, a->x[0], 0, t),
                          m.tin * m.ldx, &one, gt, h4, "input projection of a step", err);
        }
        /* The recurrent part: G_t (B x 4H) += H_{t-1} (B x P, rows S(P+H) apart in y, or S'(P+H) in the previous
         * chunk) W_hh^T, asked as G_t^T (4H x B) = W_hh (op T, ld P) H_{t-1}^T (as stored). */
        if (!st && t > 0)
            st = gemm(be, CUBLAS_OP_T, CUBLAS_OP_N, h4, b, m.pw, q.whh, m.pw, vdnn_lstm_y_row(&m, a->y, 0, t - 1), sw, &one, gt,
                      h4, "recurrent step", err);
        else if (!st && m.sp)
            st = gemm(be, CUBLAS_OP_T, CUBLAS_OP_N, h4, b, m.pw, q.whh, m.pw, vdnn_lstm_prev_row(&m, a->x[1], 0), m.sp * m.w,
                      &one, gt, h4, "recurrent step from the previous chunk", err);
        long long ldc = 0;
        const float *cp = c_prev_at(&m, a->y, a->x[1], t, &ldc);
        if (!st)
            st = kernel(vdnn_cuda_k_lstm_cell_fwd(s, gt, vdnn_lstm_y_row(&m, a->y, 0, t), sw, cp, ldc, m.proj ? mbuf : NULL, b, h,
                                                  m.pw),
                        d, "cell kernel", err);
        /* LSTMP: H_t (B x P, rows S(P+H) apart) = M (B x H) W_hr^T, asked as H_t^T (P x B) = W_hr (stored as the
         * column-major W_hr^T: op T, ld H) M^T (as stored, ld H). */
        if (!st && m.proj)
            st = gemm(be, CUBLAS_OP_T, CUBLAS_OP_N, m.pw, b, h, q.whr, h, mbuf, h, &zero, vdnn_lstm_y_row(&m, a->y, 0, t), sw,
                      "projection", err);
    }
    return st;
}

static vdnn_status lstm_backward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_lstm_dims m;
    vdnn_status st = lstm_dims_of(d, &m, err);
    if (st) return st;
    if (!a->dx[0] && !a->dw && !(m.sp && a->dx[1])) return VDNN_OK;
    st = vdnn_lstm_check_args(d, &m, a, true, "cuda ", err);
    if (st) return st;
    const vdnn_lstm_params q = vdnn_lstm_params_at(&m, a->w, a->b);
    const int h = m.h, h4 = 4 * m.h, b = m.b, pw = m.pw, sw = m.s * m.w;
    const size_t bs = (size_t)b * (size_t)m.s;
    cudaStream_t s = compute(be);
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
        st = vdnn_cuda_check(cudaMemsetAsync(a->dw, 0, nw * sizeof(float), s), err,
                             "cuda lstm: cudaMemsetAsync of the weights' gradient");
        if (!st)
            st = vdnn_cuda_check(cudaMemsetAsync(a->db, 0, nb * sizeof(float), s), err,
                                 "cuda lstm: cudaMemsetAsync of the biases' gradient");
    }
    if (!st)
        st = vdnn_cuda_check(cudaMemsetAsync(dhr, 0, (size_t)b * (size_t)pw * sizeof(float), s), err,
                             "cuda lstm: cudaMemsetAsync of dh");
    if (!st)
        st = vdnn_cuda_check(cudaMemsetAsync(dcc, 0, (size_t)b * (size_t)h * sizeof(float), s), err,
                             "cuda lstm: cudaMemsetAsync of dc");
    for (int t = m.s - 1; t >= 0 && !st; t--) {
        const float *gt = a->aux + (size_t)t * (size_t)b * (size_t)h4;
        float *dgt = dg + (size_t)t * (size_t)b * (size_t)h4;
        const float *yt = vdnn_lstm_y_row(&m, a->y, 0, t), *dyt = a->dy + (size_t)t * (size_t)m.w;
        st = kernel(vdnn_cuda_k_lstm_dh(s, dh, dyt, sw, dhr, b, pw), d, "dh kernel", err);
        const float *dm = dh;
        if (!st && m.proj) {
            st = kernel(vdnn_cuda_k_lstm_m(s, mv, gt, yt, sw, b, h, pw), d, "o tanh(c) kernel", err);
            /* dM (B x H) = dH (B x P) W_hr (P x H, ld H), asked as dM^T (H x B) = W_hr^T (W_hr as stored, ld H)
             * dH^T (as stored, ld P). */
            if (!st)
                st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_N, h, b, pw, q.whr, h, dh, pw, &zero, dm_buf, h,
                          "projection backward-data", err);
            /* dW_hr (P x H) += dH^T (dH: B x P) M (B x H), asked as dW_hr^T (H x P, ld H) = M^T (as stored, ld H)
             * dH (stored as the column-major dH^T: op T, ld P). */
            if (!st && dp)
                st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_T, h, pw, b, mv, h, dh, pw, &one, (float *)dq.whr, h,
                          "projection backward-weights", err);
            dm = dm_buf;
        }
        long long ldc = 0;
        const float *cp = c_prev_at(&m, a->y, a->x[1], t, &ldc);
        if (!st)
            st = kernel(vdnn_cuda_k_lstm_cell_bwd(s, dgt, gt, yt, sw, dyt, sw, cp, ldc, dm, dcc, b, h, pw), d,
                        "cell backward kernel", err);
        /* dh_{t-1}: dHr (B x P) = dG_t (B x 4H) W_hh (4H x P, ld P), asked as dHr^T (P x B) = W_hh^T (W_hh as
         * stored, ld P) dG_t^T (as stored, ld 4H). At t = 0 it is the previous chunk's (or nobody's). */
        if (!st && (t > 0 || m.sp))
            st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_N, pw, b, h4, q.whh, pw, dgt, h4, &zero, dhr, pw, "recurrent backward",
                      err);
    }
    if (!st && dp) {
        /* Per sequence, in the CPU's order (each adds onto the same gradient, so no batching across them). */
        for (int i = 0; i < b && !st; i++) {
            /* dW_ih (4H x In) += dG_i^T (dG_i: S x 4H, ld B 4H) X_i (S x In, ld ldx), asked as
             * dW_ih^T (In x 4H, ld In) = X_i^T (as stored, ld ldx) dG_i (stored as the column-major dG_i^T:
             * op T, ld B 4H). */
            st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_T, m.in, h4, m.s, vdnn_lstm_x_row(&m, a->x[0], i, 0), m.ldx,
                      dg + (size_t)i * h4, b * h4, &one, (float *)dq.wih, m.in, "input backward-weights", err);
            /* dW_hh (4H x P) += dG_i[1..S-1]^T H_i[0..S-2] (H rows P+H apart), asked as
             * dW_hh^T (P x 4H, ld P) = H_i^T (as stored, ld P+H) dG_i[1..] (op T, ld B 4H). */
            if (!st && m.s > 1)
                st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_T, pw, h4, m.s - 1, vdnn_lstm_y_row(&m, a->y, i, 0), m.w,
                          dg + (size_t)b * h4 + (size_t)i * h4, b * h4, &one, (float *)dq.whh, pw,
                          "recurrent backward-weights", err);
        }
        /* The first step's recurrent weights' gradient from the previous chunk's h: dW_hh += dG_0^T (B x 4H, ld 4H)
         * H_prev (B x P, rows S'(P+H) apart), asked as dW_hh^T = H_prev^T (as stored) dG_0 (op T, ld 4H). */
        if (!st && m.sp)
            st = gemm(be, CUBLAS_OP_N, CUBLAS_OP_T, pw, h4, b, vdnn_lstm_prev_row(&m, a->x[1], 0), m.sp * m.w, dg, h4, &one,
                      (float *)dq.whh, pw, "recurrent backward-weights from the previous chunk", err);
        /* Both biases' gradient: db (4H) = dG^T (dG: BS x 4H) ones, a GEMV (one writer per value, no atomics) on
         * the column-major dG^T (4H x BS, ld 4H) as stored. */
        if (!st) st = kernel(vdnn_cuda_k_fill(s, ones, 1.0f, bs), d, "fill kernel", err);
        if (!st)
            st = vdnn_cublas_check(cublasSgemv(be->cublas, CUBLAS_OP_N, h4, (int)bs, &one, dg, h4, ones, 1, &zero,
                                               (float *)dq.bih, 1),
                                   err, "cuda lstm bias backward: cublasSgemv (%d x %zu)", h4, bs);
        if (!st)
            st = vdnn_cuda_check(cudaMemcpyAsync((float *)dq.bhh, dq.bih, (size_t)h4 * sizeof(float),
                                                 cudaMemcpyDeviceToDevice, s),
                                 err, "cuda lstm: copy of the bias gradient");
    }
    if (!st && a->dx[0]) {
        st = vdnn_cuda_check(cudaMemsetAsync(a->dx[0], 0, vdnn_shape_count(d->in[0]) * sizeof(float), s), err,
                             "cuda lstm: cudaMemsetAsync of dx");
        /* dX_i (S x In, ld ldx) = dG_i (S x 4H, ld B 4H) W_ih (4H x In, ld In) for each sequence (disjoint outputs:
         * one batched call), asked as dX_i^T (In x S) = W_ih^T (W_ih as stored, ld In) dG_i^T (as stored). */
        if (!st)
            st = gemm_batched(be, CUBLAS_OP_N, CUBLAS_OP_N, m.in, m.s, h4, q.wih, m.in, 0, dg, b * h4, h4, &zero,
                              (float *)vdnn_lstm_x_row(&m, a->dx[0], 0, 0), m.ldx, (long long)m.tin * m.ldx, b,
                              "input backward-data", err);
    }
    if (!st && m.sp && a->dx[1]) {
        /* Only the previous chunk's last row gets a gradient: (dh, dc) of the incoming state. */
        float *last = (float *)vdnn_lstm_prev_row(&m, a->dx[1], 0);
        const size_t pitch = (size_t)m.sp * (size_t)m.w * sizeof(float);
        st = vdnn_cuda_check(cudaMemsetAsync(a->dx[1], 0, vdnn_shape_count(d->in[1]) * sizeof(float), s), err,
                             "cuda lstm: cudaMemsetAsync of the previous chunk's gradient");
        if (!st)
            st = vdnn_cuda_check(cudaMemcpy2DAsync(last, pitch, dhr, (size_t)pw * sizeof(float),
                                                   (size_t)pw * sizeof(float), (size_t)b, cudaMemcpyDeviceToDevice, s),
                                 err, "cuda lstm: copy of the incoming h's gradient");
        if (!st)
            st = vdnn_cuda_check(cudaMemcpy2DAsync(last + pw, pitch, dcc, (size_t)h * sizeof(float),
                                                   (size_t)h * sizeof(float), (size_t)b, cudaMemcpyDeviceToDevice, s),
                                 err, "cuda lstm: copy of the incoming c's gradient");
    }
    return st;
}

/* fp32 maps run the chunk as above; bf16 and fp16 maps widened into it (cuda_ops_lstm_half.c). */
static const cuda_op_impl fp32_chunk = {.query = lstm_query, .forward = lstm_forward, .backward = lstm_backward};

static vdnn_status any_query(cuda_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    return vdnn_cuda_half(d) ? vdnn_cuda_lstm_half_query(d, info, err) : lstm_query(be, d, info, err);
}

static vdnn_status any_forward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    return vdnn_cuda_half(&op->d) ? vdnn_cuda_lstm_half_forward(be, op, a, &fp32_chunk, err) : lstm_forward(be, op, a, err);
}

static vdnn_status any_backward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    return vdnn_cuda_half(&op->d) ? vdnn_cuda_lstm_half_backward(be, op, a, &fp32_chunk, err)
                                  : lstm_backward(be, op, a, err);
}

const cuda_op_impl vdnn_cuda_op_lstm = {.query = any_query, .forward = any_forward, .backward = any_backward};

/* ---- seq_cat: inputs' first `cols` columns, one after another along time ---- */

static vdnn_status cat_query(cuda_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_seq_cat_check(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status cat_forward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need(a->y, d, "y", err);
    for (int i = 0; i < d->n_inputs && !st; i++) st = need(a->x[i], d, "x", err);
    const long long cols = d->p.filters, t_out = d->out.h;
    long long at = 0;
    for (int i = 0; i < d->n_inputs && !st; i++) {
        const vdnn_shape x = d->in[i];
        st = kernel(vdnn_cuda_k_rows_copy(compute(be), vdnn_cuda_type_of(d), vdnn_cuda_at(d, a->y, (size_t)(at * cols)), cols,
                                          t_out * cols, (int)cols, a->x[i], x.w, (long long)x.h * x.w, x.n, x.h, (int)cols),
                    d, "gather kernel", err);
        at += x.h;
    }
    return st;
}

static vdnn_status cat_backward(cuda_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    const long long cols = d->p.filters, t_out = d->out.h;
    long long at = 0;
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < d->n_inputs && !st; i++) {
        const vdnn_shape x = d->in[i];
        /* Whole rows of dx: dy's columns, zeros beyond them (the c columns of an lstm chunk). */
        if (a->dx[i] && !(st = need(a->dy, d, "dy", err)))
            st = kernel(vdnn_cuda_k_rows_copy(compute(be), vdnn_cuda_type_of(d), a->dx[i], x.w, (long long)x.h * x.w, x.w,
                                              vdnn_cuda_at(d, a->dy, (size_t)(at * cols)), cols, t_out * cols, x.n, x.h,
                                              (int)cols),
                        d, "gather backward kernel", err);
        at += x.h;
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_seq_cat = {.query = cat_query, .forward = cat_forward, .backward = cat_backward};
