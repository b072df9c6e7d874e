/* Ops on CUDA with no cuDNN/cuBLAS counterpart that fits: dropout, concat, add, global average pooling, flatten,
 * softmax with cross-entropy. Own kernels (cuda_kernels_*.cu) and strided copies, all on the compute queue, over
 * maps of any type. */
#include "backend/op_check.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

static size_t count(vdnn_shape s) { return vdnn_shape_count(s); }

static cudaStream_t compute(const cuda_backend *b) { return b->stream[VDNN_QUEUE_COMPUTE]; }

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
static vdnn_status copy_values(const cuda_backend *b, const vdnn_op_desc *d, void *dst, const void *src, size_t n,
                               const char *what, vdnn_error *err)
{
    if (dst == src || !n) return VDNN_OK;
    /* Default, not DeviceToDevice: under policy um an operand may be managed memory; the runtime tells. */
    return vdnn_cuda_check(cudaMemcpyAsync(dst, src, n * vdnn_cuda_esize(d), cudaMemcpyDefault, compute(b)), err,
                           "%s: cudaMemcpyAsync of %zu values", what, n);
}

static vdnn_status one_input_same_count(const vdnn_op_desc *d, const char *name, vdnn_error *err)
{
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: takes 1 input, got %d", name, d->n_inputs);
    if (count(d->in[0]) != count(d->out) || d->in[0].n != d->out.n)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: input %dx%dx%dx%d does not match output %dx%dx%dx%d", name,
                         d->in[0].n, d->in[0].c, d->in[0].h, d->in[0].w, d->out.n, d->out.c, d->out.h, d->out.w);
    return VDNN_OK;
}

static vdnn_status no_create(cuda_backend *b, vdnn_op *op, vdnn_error *err) { return VDNN_OK; }
static void no_destroy(cuda_backend *b, vdnn_op *op) {}

/* ---- dropout ---- */

static vdnn_status dropout_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "dropout", err);
    if (st) return st;
    float p = d->p.dropout_p;
    if (!(p >= 0.0f && p <= 1.0f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "dropout: probability %g is not in [0, 1]", (double)p);
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

/* out = in * keep(i) / (1-p): forward and backward are the same masked scaling, the mask recomputed from the seed. */
static vdnn_status dropout_apply(const cuda_backend *b, const vdnn_op_desc *d, uint64_t seed, void *out,
                                 const void *in, const char *what, vdnn_error *err)
{
    size_t n = count(d->out);
    float p = d->p.dropout_p;
    if (!d->training || p == 0.0f) return copy_values(b, d, out, in, n, what, err);
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    return vdnn_cuda_check(vdnn_cuda_k_dropout(compute(b), vdnn_cuda_type_of(d), out, in, n, seed, p, scale), err,
                           "%s kernel", what);
}

static vdnn_status dropout_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "dropout", err);
    return st ? st : dropout_apply(b, &op->d, a->seed, a->y, a->x[0], "dropout forward", err);
}

static vdnn_status dropout_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "dropout", err);
    if (st || !a->dx[0]) return st;
    return dropout_apply(b, &op->d, a->seed, a->dx[0], a->dy, "dropout backward", err);
}

const cuda_op_impl vdnn_cuda_op_dropout = {dropout_query, no_create, no_destroy, dropout_forward, dropout_backward, NULL};

/* ---- concat (along channels) and feat_cat (along the last dimension) ---- */

static vdnn_status concat_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_concat(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

/* Each row's slice is one row of a 2-D copy: `len` values per row, rows `dst_stride` / `src_stride` values apart.
 * Direction Default, as in copy_values: operands may be managed memory. */
static vdnn_status copy_rows(const cuda_backend *b, const vdnn_op_desc *d, void *dst, size_t dst_stride, const void *src,
                             size_t src_stride, size_t len, size_t rows, const char *what, vdnn_error *err)
{
    const size_t es = vdnn_cuda_esize(d);
    return vdnn_cuda_check(cudaMemcpy2DAsync(dst, dst_stride * es, src, src_stride * es, len * es, rows,
                                             cudaMemcpyDefault, compute(b)),
                           err, "%s: cudaMemcpy2DAsync (%zu rows of %zu values)", what, rows, len);
}

static vdnn_status concat_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need_fwd(op, a, vdnn_layer_kind_name(d->kind), err);
    size_t rows, joined, len[VDNN_MAX_INPUTS], off = 0;
    vdnn_op_concat_rows(d, &rows, &joined, len);
    for (int i = 0; !st && i < d->n_inputs; i++) {
        st = copy_rows(b, d, vdnn_cuda_at(d, a->y, off), joined, a->x[i], len[i], len[i], rows, "concat forward", err);
        off += len[i];
    }
    return st;
}

static vdnn_status concat_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    const vdnn_op_desc *d = &op->d;
    vdnn_status st = need_dy(a, vdnn_layer_kind_name(d->kind), err);
    size_t rows, joined, len[VDNN_MAX_INPUTS], off = 0;
    vdnn_op_concat_rows(d, &rows, &joined, len);
    for (int i = 0; !st && i < d->n_inputs; i++) {
        if (a->dx[i])
            st = copy_rows(b, d, a->dx[i], len[i], vdnn_cuda_at(d, a->dy, off), joined, len[i], rows,
                           "concat backward", err);
        off += len[i];
    }
    return st;
}

const cuda_op_impl vdnn_cuda_op_concat = {concat_query, no_create, no_destroy, concat_forward, concat_backward, NULL};

/* ---- add ---- */

static vdnn_status add_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = vdnn_op_check_add(d, err);
    if (st) return st;
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status add_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "add", err);
    if (st) return st;
    return vdnn_cuda_check(vdnn_cuda_k_add(compute(b), vdnn_cuda_type_of(&op->d), a->y, (const void *const *)a->x,
                                           op->d.n_inputs, count(op->d.out)),
                           err, "add forward kernel (%d inputs)", op->d.n_inputs);
}

static vdnn_status add_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "add", err);
    for (int i = 0; !st && i < op->d.n_inputs; i++)
        if (a->dx[i]) st = copy_values(b, &op->d, a->dx[i], a->dy, count(op->d.out), "add backward", err);
    return st;
}

const cuda_op_impl vdnn_cuda_op_add = {add_query, no_create, no_destroy, add_forward, add_backward, NULL};

/* ---- global average pooling ---- */

static vdnn_status gap_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_shape s = d->in[0];
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "gap: takes 1 input, got %d", d->n_inputs);
    if (d->out.n != s.n || d->out.c != s.c || d->out.h != 1 || d->out.w != 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "gap: output %dx%dx%dx%d is not %dx%dx1x1", d->out.n, d->out.c, d->out.h,
                         d->out.w, s.n, s.c);
    *info = (vdnn_op_info){0};
    return VDNN_OK;
}

static vdnn_status gap_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "gap", err);
    if (st) return st;
    vdnn_shape s = op->d.in[0];
    return vdnn_cuda_check(vdnn_cuda_k_gap_fwd(compute(b), vdnn_cuda_type_of(&op->d), a->y, a->x[0],
                                               (size_t)s.n * (size_t)s.c, (size_t)s.h * (size_t)s.w),
                           err, "gap forward kernel");
}

static vdnn_status gap_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "gap", err);
    if (st || !a->dx[0]) return st;
    vdnn_shape s = op->d.in[0];
    return vdnn_cuda_check(vdnn_cuda_k_gap_bwd(compute(b), vdnn_cuda_type_of(&op->d), a->dx[0], a->dy,
                                               (size_t)s.n * (size_t)s.c, (size_t)s.h * (size_t)s.w),
                           err, "gap backward kernel");
}

const cuda_op_impl vdnn_cuda_op_gap = {gap_query, no_create, no_destroy, gap_forward, gap_backward, NULL};

/* ---- flatten ---- */

static vdnn_status flatten_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "flatten", err);
    if (st) return st;
    *info = (vdnn_op_info){.inplace_ok = true, .bwd_inplace_ok = true};
    return VDNN_OK;
}

static vdnn_status flatten_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "flatten", err);
    return st ? st : copy_values(b, &op->d, a->y, a->x[0], count(op->d.out), "flatten forward", err);
}

static vdnn_status flatten_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_dy(a, "flatten", err);
    if (st || !a->dx[0]) return st;
    return copy_values(b, &op->d, a->dx[0], a->dy, count(op->d.out), "flatten backward", err);
}

const cuda_op_impl vdnn_cuda_op_flatten = {flatten_query, no_create, no_destroy, flatten_forward, flatten_backward, NULL};

/* ---- softmax + mean cross-entropy ---- */

/* Labels live on the device, so they are not checked here as on the CPU: an out-of-range label makes the loss
 * and that sample's gradient NaN instead (the trainer checks labels on the host before uploading them). */

static vdnn_status xent_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = one_input_same_count(d, "softmax_xent", err);
    if (st) return st;
    if (vdnn_xent_rows(d->out) > (size_t)INT32_MAX)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "cuda softmax_xent: %zu rows (at most %d)", vdnn_xent_rows(d->out),
                         INT32_MAX);
    /* Per-sample losses (double), summed in a fixed order by a second kernel. 16-bit maps: backward recomputes the
     * softmax from the logits (backend.h, "Precision"). */
    const bool half = vdnn_cuda_half(d);
    *info = (vdnn_op_info){.bwd_needs_x = half, .bwd_needs_y = !half,
                           .fwd_ws_bytes = vdnn_xent_rows(d->out) * sizeof(double)};
    return VDNN_OK;
}

static vdnn_status xent_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    vdnn_status st = need_fwd(op, a, "softmax_xent", err);
    if (st) return st;
    /* One row per image, or per token of a sequence (vdnn_xent_rows); the loss is the mean over rows. */
    int n = (int)vdnn_xent_rows(op->d.out);
    int k = (int)(count(op->d.out) / (size_t)n);
    double *per = NULL;
    if (a->loss) {
        if (!a->labels) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: loss wanted but labels are NULL");
        if (!a->ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent forward: loss wanted but ws is NULL");
        per = (double *)(void *)a->ws;
    }
    st = vdnn_cuda_check(vdnn_cuda_k_softmax_xent_fwd(compute(b), vdnn_cuda_type_of(&op->d), a->y, a->x[0], a->labels,
                                                      per, n, k),
                         err, "softmax_xent forward kernel (%d x %d)", n, k);
    if (!st && a->loss)
        st = vdnn_cuda_check(vdnn_cuda_k_mean_loss(compute(b), a->loss, per, n), err, "softmax_xent loss kernel");
    return st;
}

static vdnn_status xent_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    if (!a->dx[0]) return VDNN_OK;
    const bool half = vdnn_cuda_half(&op->d);
    const void *in = half ? (const void *)a->x[0] : (const void *)a->y;
    if (!in || !a->labels)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "softmax_xent backward: %s is NULL",
                         in ? "labels" : half ? "x (16-bit maps recompute the softmax from the logits)" : "y");
    /* One row per image, or per token of a sequence (vdnn_xent_rows); the loss is the mean over rows. */
    int n = (int)vdnn_xent_rows(op->d.out);
    int k = (int)(count(op->d.out) / (size_t)n);
    const float scale = a->grad_scale > 0.0f ? a->grad_scale : 1.0f;
    if (half)
        return vdnn_cuda_check(vdnn_cuda_k_softmax_xent_bwd_logits(compute(b), vdnn_cuda_type_of(&op->d), a->dx[0], in,
                                                                   a->labels, n, k, scale),
                               err, "softmax_xent backward kernel (%d x %d, from the logits)", n, k);
    return vdnn_cuda_check(vdnn_cuda_k_softmax_xent_bwd(compute(b), a->dx[0], a->y, a->labels, n, k, scale), err,
                           "softmax_xent backward kernel (%d x %d)", n, k);
}

const cuda_op_impl vdnn_cuda_op_softmax_xent = {xent_query, no_create, no_destroy, xent_forward, xent_backward, NULL};
