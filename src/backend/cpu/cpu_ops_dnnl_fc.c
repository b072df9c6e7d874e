/* FC on the CPU: oneDNN inner product on x viewed as (N, C*H*W) with PyTorch's (out, in) weights. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

typedef struct fc_state {
    cpu_dnnl_step fwd, bwd_data, bwd_weights;
} fc_state;

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
    dnnl_memory_desc_t src, wei, bia, dst;
    vdnn_status st = vdnn_cpu_dnnl_md(&src, 2, src_dims, dnnl_nc, "fc: source descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&wei, 2, w_dims, dnnl_oi, "fc: weights descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&bia, 1, b_dims, dnnl_a, "fc: bias descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_md(&dst, 2, dst_dims, dnnl_nc, "fc: destination descriptor", err);
    if (st) return st;
    const dnnl_memory_desc_t *bias = p->bias ? &bia : NULL;

    dnnl_inner_product_desc_t id;
    st = vdnn_cpu_dnnl_check(dnnl_inner_product_forward_desc_init(&id, dnnl_forward_training, &src, &wei, bias, &dst),
                             "fc: forward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &id, NULL, make,
                                     (const int[]){DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST}, 4,
                                     &s->fwd, "fc forward", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_inner_product_backward_data_desc_init(&id, &src, &wei, &dst),
                                 "fc: backward-data descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(be, &id, &s->fwd, make,
                                     (const int[]){DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, 3,
                                     &s->bwd_data, "fc backward-data", err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_inner_product_backward_weights_desc_init(&id, &src, &wei, bias, &dst),
                                 "fc: backward-weights descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &id, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS}, 4,
            &s->bwd_weights, "fc backward-weights", err);
    return st;
}

static void fc_free(fc_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->bwd_data);
    vdnn_cpu_dnnl_step_fini(&s->bwd_weights);
}

static vdnn_status fc_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    fc_state s = {0};
    vdnn_status st = fc_build(be, d, false, &s, err);
    if (!st) {
        size_t bd = s.bwd_data.scratch_bytes, bw = s.bwd_weights.scratch_bytes;
        *info = (vdnn_op_info){
            .fwd_ws_bytes = s.fwd.scratch_bytes,
            .bwd_ws_bytes = bd > bw ? bd : bw,
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

static vdnn_status fc_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (op->d.p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc forward: NULL bias");
    void *ptrs[] = {(void *)a->x[0], (void *)a->w, (void *)a->b, a->y};
    return vdnn_cpu_dnnl_step_run(be, &s->fwd, ptrs, a->ws, "fc forward", err);
}

static vdnn_status fc_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    fc_state *s = op->state;
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL weights gradient");
    if (op->d.p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fc backward: NULL bias gradient");
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        void *ptrs[] = {(void *)a->dy, (void *)a->w, a->dx[0]};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_data, ptrs, a->ws, "fc backward-data", err);
    }
    if (!st) {
        void *ptrs[] = {(void *)a->x[0], (void *)a->dy, a->dw, a->db};
        st = vdnn_cpu_dnnl_step_run(be, &s->bwd_weights, ptrs, a->ws, "fc backward-weights", err);
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
