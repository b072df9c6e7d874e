/* LRN on the CPU: oneDNN local response normalization across channels (PyTorch LocalResponseNorm semantics). */
#include <stdlib.h>

#include "backend/cpu/cpu_ops_dnnl_util.h"

typedef struct lrn_state {
    cpu_dnnl_step fwd;     /* training: may write a workspace into aux */
    cpu_dnnl_step fwd_inf; /* only if there is a workspace: used when forward gets no aux */
    cpu_dnnl_step bwd;
} lrn_state;

static vdnn_status lrn_build(cpu_backend *be, const vdnn_op_desc *d, bool make, lrn_state *s, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: %d inputs (needs exactly 1)", d->n_inputs);
    if (in.n != out.n || in.c != out.c || in.h != out.h || in.w != out.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "lrn: output %dx%dx%dx%d differs from input %dx%dx%dx%d", out.n, out.c,
                         out.h, out.w, in.n, in.c, in.h, in.w);
    /* oneDNN centres an even window differently from PyTorch, so only odd sizes mean the same thing. */
    if (p->lrn_size < 1 || p->lrn_size % 2 == 0)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "lrn: size %d (must be odd and positive)", p->lrn_size);
    if (!(p->lrn_k > 0.f) || !(p->lrn_alpha >= 0.f) || !(p->lrn_beta >= 0.f))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lrn: k=%g alpha=%g beta=%g (need k > 0, alpha >= 0, beta >= 0)",
                         (double)p->lrn_k, (double)p->lrn_alpha, (double)p->lrn_beta);
    dnnl_memory_desc_t md;
    const dnnl_dim_t dims[4] = {in.n, in.c, in.h, in.w};
    vdnn_status st = vdnn_cpu_dnnl_md(&md, 4, dims, dnnl_nchw, "lrn: data descriptor", err);
    if (st) return st;
    /* oneDNN's across-channel LRN divides alpha by the window size, as PyTorch does. */
    const dnnl_alg_kind_t alg = dnnl_lrn_across_channels;
    const int fwd_args[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};
    dnnl_lrn_desc_t ld;
    st = vdnn_cpu_dnnl_check(dnnl_lrn_forward_desc_init(&ld, dnnl_forward_training, alg, &md, p->lrn_size,
                                                        p->lrn_alpha, p->lrn_beta, p->lrn_k),
                             "lrn: forward descriptor", err);
    if (!st) st = vdnn_cpu_dnnl_step_init(be, &ld, NULL, make, fwd_args, 3, &s->fwd, "lrn forward", err);
    if (!st && vdnn_cpu_dnnl_arg_bytes(&s->fwd, DNNL_ARG_WORKSPACE)) {
        st = vdnn_cpu_dnnl_check(dnnl_lrn_forward_desc_init(&ld, dnnl_forward_inference, alg, &md, p->lrn_size,
                                                            p->lrn_alpha, p->lrn_beta, p->lrn_k),
                                 "lrn: inference descriptor", err);
        if (!st) st = vdnn_cpu_dnnl_step_init(be, &ld, NULL, make, fwd_args, 2, &s->fwd_inf, "lrn inference", err);
    }
    if (!st)
        st = vdnn_cpu_dnnl_check(
            dnnl_lrn_backward_desc_init(&ld, alg, &md, &md, p->lrn_size, p->lrn_alpha, p->lrn_beta, p->lrn_k),
            "lrn: backward descriptor", err);
    if (!st)
        st = vdnn_cpu_dnnl_step_init(
            be, &ld, &s->fwd, make,
            (const int[]){DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_WORKSPACE, DNNL_ARG_DIFF_SRC}, 4, &s->bwd,
            "lrn backward", err);
    return st;
}

static void lrn_free(lrn_state *s)
{
    vdnn_cpu_dnnl_step_fini(&s->fwd);
    vdnn_cpu_dnnl_step_fini(&s->fwd_inf);
    vdnn_cpu_dnnl_step_fini(&s->bwd);
}

static vdnn_status lrn_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    lrn_state s = {0};
    vdnn_status st = lrn_build(be, d, false, &s, err);
    if (!st) {
        size_t fws = s.fwd.scratch_bytes > s.fwd_inf.scratch_bytes ? s.fwd.scratch_bytes : s.fwd_inf.scratch_bytes;
        *info = (vdnn_op_info){
            .aux_bytes = vdnn_cpu_dnnl_arg_bytes(&s.fwd, DNNL_ARG_WORKSPACE),
            .fwd_ws_bytes = fws,
            .bwd_ws_bytes = s.bwd.scratch_bytes,
            .bwd_needs_x = true,
        };
    }
    lrn_free(&s);
    return st;
}

static vdnn_status lrn_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    lrn_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "lrn: out of memory");
    vdnn_status st = lrn_build(be, &op->d, true, s, err);
    if (st) {
        lrn_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void lrn_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    lrn_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status lrn_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    void *ptrs[] = {(void *)a->x[0], a->y, a->aux};
    bool keep = op->info.aux_bytes == 0 || a->aux;
    return vdnn_cpu_dnnl_step_run(be, keep ? &s->fwd : &s->fwd_inf, ptrs, a->ws, keep ? "lrn forward" : "lrn inference",
                                  err);
}

static vdnn_status lrn_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    lrn_state *s = op->state;
    if (!a->dx[0]) return VDNN_OK;
    void *ptrs[] = {(void *)a->x[0], (void *)a->dy, a->aux, a->dx[0]};
    return vdnn_cpu_dnnl_step_run(be, &s->bwd, ptrs, a->ws, "lrn backward", err);
}

const cpu_op_impl vdnn_cpu_op_lrn = {
    .query = lrn_query,
    .create = lrn_create,
    .destroy = lrn_destroy,
    .forward = lrn_forward,
    .backward = lrn_backward,
};
