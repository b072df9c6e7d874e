/* FC on the CPU: oneDNN inner product on x viewed as (N, C*H*W) with PyTorch's (out, in) weights; fp32 or bf16 maps. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

/* fp32: the primitives read and write the plain weights and gradient in place, no copies. bf16: the fp32 master
 * weights are rounded into a bf16 copy in the workspace each call (the weights change every step), and
 * backward-weights writes the fp32 gradient straight into dw in plain (out, in) order. Workspace:
 *   forward:  [weights copy][scratchpad]
 *   backward: [weights copy][scratchpad], backward-weights' scratchpad over both (backward-data is done by then)
 * Why plain bf16 weights below a batch of FC_BLOCKED_MIN_BATCH: oneDNN 2.6's copies into the blocked layouts its
 * brgemm kernels read take about 1.4 ns a weight on one core of an AVX-512 BF16 EPYC (23 ms for VGG-16's 4096x4096
 * fc7), about four times its plain bf16 GEMM at batch 32 (5 to 6 ms), while rounding into plain order takes 3 ms;
 * the blocked kernels win only once the product is large enough to pay for the copy (at batch 256 forward 42 ms
 * against 87). The weight gradient is never blocked: oneDNN's GEMM writes the plain fp32 gradient directly (8 ms
 * at batch 32, 40 at 256), where the blocked kernel's gradient took another 23 ms to copy out. */
#define FC_BLOCKED_MIN_BATCH 128

typedef struct fc_state {
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
    cpu_dnnl_reorder f_wei, d_wei;         /* blocked bf16: w -> forward's weights, w -> backward-data's */
    bool round_plain;                      /* plain bf16: the copy is w rounded in its own order */
    size_t copy_bytes;                     /* the weights copy (0: the primitives read w itself) */
    size_t f_scratch, b_scratch;           /* offsets in the aligned workspace */
    size_t f_bytes, b_bytes;
} fc_state;

static size_t fc_max(size_t a, size_t b) { return a > b ? a : b; }

static vdnn_status fc_copies(cpu_backend *be, const vdnn_op_desc *d, const dnnl_memory_desc_t *wei, bool make,
                             fc_state *s, vdnn_error *err)
{
    size_t r_scratch = 0;
    if (vdnn_cpu_is_bf16(d) && !s->round_plain) {
        const char *what = "fc: weights copy";
        vdnn_status st = vdnn_cpu_dnnl_reorder_init(be, wei, vdnn_cpu_dnnl_arg_md(&s->fwd, DNNL_ARG_WEIGHTS), make,
                                                    &s->f_wei, what, err);
        if (!st)
            st = vdnn_cpu_dnnl_reorder_init(be, wei, vdnn_cpu_dnnl_arg_md(&s->bwd_data, DNNL_ARG_WEIGHTS), make,
                                            &s->d_wei, what, err);
        if (st) return st;
        /* The workspace holds the primitive's side of each copy: the bf16 weights. */
        s->copy_bytes = fc_max(s->f_wei.to_bytes, s->d_wei.to_bytes);
        r_scratch = fc_max(s->f_wei.scratch_bytes, s->d_wei.scratch_bytes);
    } else if (s->round_plain) {
        s->copy_bytes = (size_t)(wei->dims[0] * wei->dims[1]) * vdnn_dtype_size(d->dtype);
    }
    const size_t fs = fc_max(s->fwd.scratch_bytes, r_scratch), bs = fc_max(s->bwd_data.scratch_bytes, r_scratch);
    const size_t bw = s->bwd_weights.scratch_bytes;
    size_t used = 0;
    vdnn_cpu_ws_take(&used, s->copy_bytes);
    s->f_scratch = vdnn_cpu_ws_take(&used, fs);
    s->f_bytes = s->copy_bytes ? used + CPU_WS_SLACK : fs;
    used = 0;
    vdnn_cpu_ws_take(&used, s->copy_bytes);
    s->b_scratch = vdnn_cpu_ws_take(&used, bs);
    s->b_bytes = s->copy_bytes ? fc_max(used, bw) + CPU_WS_SLACK : fc_max(bs, bw);
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
    const bool half = vdnn_cpu_is_bf16(d), blocked = half && in.n >= FC_BLOCKED_MIN_BATCH;
    s->round_plain = half && !blocked;
    dnnl_memory_desc_t src, wei, pwei, dwei, bia, dst;
    vdnn_status st = vdnn_cpu_dnnl_md_of(&src, 2, src_dims, d->dtype, dnnl_nc, "fc: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&wei, 2, w_dims, dnnl_oi, "fc: weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_md_of(&pwei, 2, w_dims, d->dtype, blocked ? dnnl_format_tag_any : dnnl_oi,
                                 "fc: weights descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&dwei, 2, w_dims, dnnl_oi, "fc: weights descriptor", err);
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
    return st ? st : fc_copies(be, d, &wei, make, s, err);
}

static void fc_free(fc_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
    vdnn_cpu_dnnl_reorder_fini(&s->f_wei);
    vdnn_cpu_dnnl_reorder_fini(&s->d_wei);
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

/* The weights the primitives read: w rounded into the workspace (plain) or copied into the layout r says (blocked),
 * else w itself. */
static vdnn_status fc_weights(cpu_backend *be, fc_state *s, cpu_dnnl_reorder *r, const float *w, char *ws,
                              char *scratch, void **out, const char *what, vdnn_error *err)
{
    *out = (void *)w;
    if (!s->copy_bytes) return VDNN_OK;
    *out = ws;
    if (s->round_plain)
        return vdnn_cpu_convert(&be->base, ws, VDNN_DTYPE_BF16, w, VDNN_DTYPE_F32, s->copy_bytes / sizeof(uint16_t), err);
    return vdnn_cpu_dnnl_reorder_run(be, r, w, ws, scratch, what, err);
}

static vdnn_status fc_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL bias");
    if (s->copy_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL workspace (%zu bytes needed)", s->f_bytes);
    char *ws = s->copy_bytes ? vdnn_cpu_ws_align(a->ws) : (char *)a->ws;
    char *scratch = ws ? ws + s->f_scratch : NULL;
    void *wei;
    vdnn_status st = fc_weights(be, s, &s->f_wei, a->w, ws, scratch, &wei, "fc forward: weights copy", err);
    if (st) return st;
    void *ptrs[] = {(void *)a->x[0], wei, (void *)a->b, a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, scratch, "fc forward", err);
}

static vdnn_status fc_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL bias gradient");
    if (s->copy_bytes && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL workspace (%zu bytes needed)", s->b_bytes);
    char *ws = s->copy_bytes ? vdnn_cpu_ws_align(a->ws) : (char *)a->ws;
    char *scratch = ws ? ws + s->b_scratch : NULL;
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        void *wei;
        st = fc_weights(be, s, &s->d_wei, a->w, ws, scratch, &wei, "fc backward-data: weights copy", err);
        if (!st) {
            void *ptrs[] = {(void *)a->dy, wei, a->dx[0]};
            st = vdnn_cpu_dnnl_step_run(be, &s->bwd_data, ptrs, scratch, "fc backward-data", err);
        }
    }
    if (!st) {
        void *ptrs[] = {(void *)a->x[0], (void *)a->dy, a->dw, a->db};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_weights, ptrs, ws, "fc backward-weights", err);
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
