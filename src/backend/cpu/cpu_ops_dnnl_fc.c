/* FC on the CPU: oneDNN inner product on x viewed as (N, C*H*W) with PyTorch's (out, in) weights; fp32 or bf16 maps. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

/* fp32: the primitives read and write the plain weights and gradient in place, no copies. bf16: the fp32 master
 * weights are rounded into a bf16 copy in the layout oneDNN prefers (workspace, each call: the weights change every
 * step), and backward-weights writes an fp32 gradient, copied out when its layout is not plain. Workspace:
 *   forward:  [weights copy][scratchpad]
 *   backward: [weights copy, then the weight gradient copy][scratchpad]
 * The gradient's layout (oneDNN's brgemm: blocks of 64 outputs outermost) usually keeps each block of output rows
 * in the same contiguous bytes as the plain layout. Where the gradient copy would exceed the cap on one layout copy
 * (the convolutions' chunk cap, 256 MiB by default), backward-weights writes into dw itself, and each row block
 * goes to its plain layout through a workspace piece of one block (fc6 of VGG-16 at batch 256: 6.4 MB instead of
 * 411 MB). The copies are exact, so the gradient is the same bit for bit either way; below the cap the one copy
 * moves fewer bytes (the blocks cost an extra pass over the gradient). */
/* The cap on one layout copy, as the convolutions' default chunk cap (cpu_ops_dnnl_conv.c). */
#define FC_COPY_CAP ((size_t)256 << 20)

typedef struct fc_state {
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
    cpu_dnnl_reorder f_wei, d_wei, w_dw;   /* w -> forward's weights, w -> backward-data's, gradient -> dw */
    cpu_dnnl_reorder w_row;                /* one row block of the gradient -> plain, when dw holds it (rows > 0) */
    size_t rows, row_bytes;                /* row blocks, and bytes of each */
    size_t f_scratch, b_piece, b_scratch;  /* offsets in the aligned workspace */
    size_t b_wscratch;                     /* backward-weights' scratchpad */
    size_t f_bytes, b_bytes;
} fc_state;

/* Whether the gradient layout g of (out, in) keeps whole blocks of rows contiguous in plain order: blocked, no
 * padding, the rows' blocks outermost. Then *row is the layout of one row block. */
static bool fc_rows_in_place(const dnnl_memory_desc_t *g, dnnl_memory_desc_t *row, size_t *rows)
{
    if (g->format_kind != dnnl_blocked || g->ndims != 2 || g->data_type != dnnl_f32) return false;
    const dnnl_blocking_desc_t *b = &g->format_desc.blocking;
    dnnl_dim_t blk = 1;
    for (int i = 0; i < b->inner_nblks; i++)
        if (b->inner_idxs[i] == 0) blk *= b->inner_blks[i];
    const dnnl_dim_t o = g->dims[0], k = g->dims[1];
    if (g->padded_dims[0] != o || g->padded_dims[1] != k || o % blk || b->strides[0] != blk * k ||
        g->offset0 != 0 || dnnl_memory_desc_get_size(g) != (size_t)(o * k) * sizeof(float))
        return false;
    *row = *g;
    row->dims[0] = row->padded_dims[0] = blk;
    if (dnnl_memory_desc_get_size(row) != (size_t)(blk * k) * sizeof(float)) return false;
    *rows = (size_t)(o / blk);
    return true;
}

static vdnn_status fc_copies(cpu_backend *be, const dnnl_memory_desc_t *wei, bool make, fc_state *s, vdnn_error *err)
{
    const char *what = "fc: weights copy";
    vdnn_status st = vdnn_cpu_dnnl_reorder_init(be, wei, vdnn_cpu_dnnl_arg_md(&s->fwd, DNNL_ARG_WEIGHTS), make, &s->f_wei,
                                                what, err);
    if (!st)
        st = vdnn_cpu_dnnl_reorder_init(be, wei, vdnn_cpu_dnnl_arg_md(&s->bwd_data, DNNL_ARG_WEIGHTS), make, &s->d_wei,
                                        what, err);
    if (!st)
        st = vdnn_cpu_dnnl_reorder_init(be, vdnn_cpu_dnnl_arg_md(&s->bwd_weights, DNNL_ARG_DIFF_WEIGHTS), wei, make,
                                        &s->w_dw, "fc: weight gradient copy", err);
    if (st) return st;
    dnnl_memory_desc_t row, plain_row;
    size_t rows = 0;
    const size_t cap = be->opt.conv_chunk_bytes ? be->opt.conv_chunk_bytes : FC_COPY_CAP;
    if (s->w_dw.from_bytes > cap &&
        fc_rows_in_place(vdnn_cpu_dnnl_arg_md(&s->bwd_weights, DNNL_ARG_DIFF_WEIGHTS), &row, &rows)) {
        const dnnl_dim_t dims[2] = {row.dims[0], row.dims[1]};
        st = vdnn_cpu_dnnl_md(&plain_row, 2, dims, dnnl_oi, "fc: weight gradient rows", err);
        if (!st) st = vdnn_cpu_dnnl_reorder_init(be, &row, &plain_row, make, &s->w_row, "fc: weight gradient rows", err);
        if (st) return st;
        s->rows = rows;
        s->row_bytes = s->w_row.from_bytes;
    }
    size_t r_scratch = s->f_wei.scratch_bytes;
    r_scratch = r_scratch > s->d_wei.scratch_bytes ? r_scratch : s->d_wei.scratch_bytes;
    r_scratch = r_scratch > s->w_dw.scratch_bytes ? r_scratch : s->w_dw.scratch_bytes;
    r_scratch = r_scratch > s->w_row.scratch_bytes ? r_scratch : s->w_row.scratch_bytes;
    size_t used = 0, fs = s->fwd.scratch_bytes > r_scratch ? s->fwd.scratch_bytes : r_scratch;
    /* The workspace holds the primitive's side of each copy: the bf16 weights, the gradient before dw. */
    vdnn_cpu_ws_take(&used, s->f_wei.to_bytes);
    s->f_scratch = vdnn_cpu_ws_take(&used, fs);
    s->f_bytes = s->f_wei.bytes ? used + CPU_WS_SLACK : fs;
    size_t bd = s->bwd_data.scratch_bytes, bw = s->bwd_weights.scratch_bytes;
    const size_t g_piece = s->rows ? s->row_bytes : s->w_dw.from_bytes;
    size_t piece = s->d_wei.to_bytes > g_piece ? s->d_wei.to_bytes : g_piece;
    /* With the gradient written into dw, nothing in the workspace is live while backward-weights runs: its
     * scratchpad takes the workspace from the start, over the weights copy backward-data is done with. */
    const bool w_over = s->rows && piece;
    size_t bs = bd > r_scratch ? bd : r_scratch;
    if (!w_over) bs = bs > bw ? bs : bw;
    used = 0;
    s->b_piece = vdnn_cpu_ws_take(&used, piece);
    s->b_scratch = vdnn_cpu_ws_take(&used, bs);
    s->b_wscratch = w_over ? 0 : s->b_scratch;
    if (w_over && bw > used) used = bw;
    s->b_bytes = piece ? used + CPU_WS_SLACK : bs;
    return VDNN_OK;
}

static vdnn_status fc_build(cpu_backend *be, const vdnn_op_desc *d, bool make, fc_state *s, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "fc: %d inputs (needs exactly 1)", d->n_inputs);
    if (p->filters < 1 || out.n != in.n || out.c != p->filters || out.h != 1 || out.w != 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "fc: output %dx%dx%dx%d does not match %d outputs for input %dx%dx%dx%d",
                         out.n, out.c, out.h, out.w, p->filters, in.n, in.c, in.h, in.w);
    const dnnl_dim_t k = (dnnl_dim_t)in.c * in.h * in.w;
    /* (out, in) row-major is oneDNN's "oi"; x and y are dense, so (N, K) and (N, O) views need no copy. */
    const dnnl_dim_t src_dims[2] = {in.n, k}, w_dims[2] = {p->filters, k};
    const dnnl_dim_t dst_dims[2] = {in.n, p->filters}, b_dims[1] = {p->filters};
    const bool half = vdnn_cpu_is_bf16(d);
    dnnl_memory_desc_t src, wei, pwei, dwei, bia, dst;
    vdnn_status st = vdnn_cpu_dnnl_md_of(&src, 2, src_dims, d->dtype, dnnl_nc, "fc: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&wei, 2, w_dims, dnnl_oi, "fc: weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_md_of(&pwei, 2, w_dims, d->dtype, half ? dnnl_format_tag_any : dnnl_oi, "fc: weights descriptor",
                                 err);
    if (!st) st = vdnn_cpu_dnnl_md(&dwei, 2, w_dims, half ? dnnl_format_tag_any : dnnl_oi, "fc: weights descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&bia, 1, b_dims, dnnl_a, "fc: bias descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md_of(&dst, 2, dst_dims, d->dtype, dnnl_nc, "fc: destination descriptor", err);
    if (st) return st;
    const dnnl_memory_desc_t *bias = p->bias ? &bia : NULL;

    dnnl_inner_product_desc_t id;
    st = vdnn_cpu_dnnl_check(dnnl_inner_product_forward_desc_init(&id, dnnl_forward_training, &src, &pwei, bias, &dst),
                             "fc: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &id, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, 4,
                                     &s->fwd, "fc forward", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_inner_product_backward_data_desc_init(&id, &src, &pwei, &dst),
                                 "fc: backward-data descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &id, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, 3,
                                     &s->bwd_data, "fc backward-data", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_inner_product_backward_weights_desc_init(&id, &src, &dwei, bias, &dst),
                                 "fc: backward-weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &id, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 4,
            &s->bwd_weights, "fc backward-weights", err);
    return st ? st : fc_copies(be, &wei, make, s, err);
}

static void fc_free(fc_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
    vdnn_cpu_dnnl_reorder_fini(&s->f_wei);
    vdnn_cpu_dnnl_reorder_fini(&s->d_wei);
    vdnn_cpu_dnnl_reorder_fini(&s->w_dw);
    vdnn_cpu_dnnl_reorder_fini(&s->w_row);
}

static vdnn_status fc_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    fc_state s = {0};
    vdnn_status st = fc_build(be, d, false, &s, err);
    if (!st) {
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.f_bytes,
            .bwd_ws_bytes = s.b_bytes,
            .bwd_needs_x = true, /* for the weight gradient */
        };
    }
    fc_free(&s);
    return st;
}

/* oneDNN generates its GEMM kernels on the first GEMM of the process (about 30 ms):
 * one small product here moves that out of the first training step. */
static vdnn_status warm_gemm(vdnn_error *err)
{
    enum { K = 64 };
    static const float a[K * K];
    float c[K * K];
    return vdnn_cpu_dnnl_check(dnnl_sgemm('N', 'N', K, K, K, 1.f, a, K, a, K, 0.f, c, K), "fc: GEMM warm-up", err);
}

static vdnn_status fc_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    fc_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "fc: out of memory");
    vdnn_status st = fc_build(be, &op->d, true, s, err);
    if (!st) st = warm_gemm(err);
    if (st) {
        fc_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void fc_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    fc_free(op->state);
    free(op->state);
    op->state = NULL;
}

/* Where a primitive's weights (or weight gradient) live: the copy in ws when there is one, else the tensor itself. */
static void *fc_piece(const cpu_dnnl_reorder *r, char *ws, size_t off, const void *plain)
{
    return r->bytes ? ws + off : (void *)plain;
}

static vdnn_status fc_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL bias");
    if (s->f_wei.bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL workspace (%zu bytes needed)", s->f_bytes);
    char *ws = s->f_wei.bytes ? vdnn_cpu_ws_align(a->ws) : (char *)a->ws;
    char *scratch = ws ? ws + s->f_scratch : NULL;
    void *wei = fc_piece(&s->f_wei, ws, 0, a->w);
    vdnn_status st = vdnn_cpu_dnnl_reorder_run(be, &s->f_wei, a->w, wei, scratch, "fc forward: weights copy", err);
    if (st) return st;
    void *ptrs[] = {(void *)a->x[0], wei, (void *)a->b, a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, scratch, "fc forward", err);
}

static vdnn_status fc_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL bias gradient");
    const bool pieces = s->d_wei.bytes || s->w_dw.bytes;
    if (pieces && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL workspace (%zu bytes needed)", s->b_bytes);
    char *ws = pieces ? vdnn_cpu_ws_align(a->ws) : (char *)a->ws;
    char *scratch = ws ? ws + s->b_scratch : NULL;
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        void *wei = fc_piece(&s->d_wei, ws, s->b_piece, a->w);
        st = vdnn_cpu_dnnl_reorder_run(be, &s->d_wei, a->w, wei, scratch, "fc backward-data: weights copy", err);
        if (!st) {
            void *ptrs[] = {(void *)a->dy, wei, a->dx[0]};
            st = vdnn_cpu_dnnl_step_run(be, &s->bwd_data, ptrs, scratch, "fc backward-data", err);
        }
    }
    if (!st) {
        void *dw = s->rows ? a->dw : fc_piece(&s->w_dw, ws, s->b_piece, a->dw);
        void *ptrs[] = {(void *)a->x[0], (void *)a->dy, dw, a->db};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_weights, ptrs, ws ? ws + s->b_wscratch : NULL, "fc backward-weights", err);
        if (!st && !s->rows)
            st = vdnn_cpu_dnnl_reorder_run(be, &s->w_dw, dw, a->dw, scratch, "fc backward-weights: dw copy", err);
        /* Row block by row block in place: each block's bytes are the same in both layouts. */
        for (size_t r = 0; !st && r < s->rows; r++) {
            char *block = (char *)a->dw + r * s->row_bytes;
            memcpy(ws + s->b_piece, block, s->row_bytes);
            st = vdnn_cpu_dnnl_reorder_run(be, &s->w_row, ws + s->b_piece, block, scratch,
                                           "fc backward-weights: dw rows", err);
        }
    }
    return st;
}

const cpu_op_impl vdnn_cpu_op_fc = {
    .query = fc_query,
    .create = fc_create,
    .destroy = fc_destroy,
    .forward = fc_forward,
    .backward = fc_backward,
};
