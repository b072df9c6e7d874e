/* linear with bf16 maps on a CPU with AVX-512 BF16: Y = X W^T + b over the B x C x T rows, run as the FC op's oneDNN
 * bf16 inner product on a (rows, Fin) view (cpu_ops_dnnl_fc.c: the fp32 master weights rounded into a bf16 copy in
 * the workspace, fp32 accumulation, the weight gradient fp32). Widened instead (cpu_ops_widen.c: bf16 maps converted
 * into fp32 copies, an sgemm on the fp32 master weights), a bf16 transformer trained slower than in fp32
 * on such a CPU, since the products, most of its arithmetic, ran at fp32 speed after the conversions. The weights
 * are rounded to bf16 here, as PyTorch's autocast and the CUDA backend's bf16 linear round them. */
#include <stdlib.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/seq_shapes.h"

/* The FC op that computes d: its rows are d's rows, its features d's last dimension. */
static vdnn_op_desc as_fc(const vdnn_op_desc *d)
{
    vdnn_op_desc f = *d;
    const int rows = (int)vdnn_seq_rows(d->in[0]);
    f.kind = VDNN_LAYER_FC;
    f.in[0] = (vdnn_shape){rows, d->in[0].w, 1, 1};
    f.out = (vdnn_shape){rows, d->p.filters, 1, 1};
    return f;
}

static vdnn_status rows_fit(const vdnn_op_desc *d, vdnn_error *err)
{
    vdnn_status st = vdnn_cpu_linear_shape(d, err);
    if (!st && vdnn_seq_rows(d->in[0]) > (size_t)0x7fffffff)
        return vdnn_seq_shape_fail(d, "at most 2^31 - 1 rows (B x C x T) for one bf16 linear; got a larger", err);
    return st;
}

static vdnn_status lin16_query(cpu_backend *be, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    vdnn_status st = rows_fit(d, err);
    if (st) return st;
    const vdnn_op_desc f = as_fc(d);
    return vdnn_cpu_op_fc.query(be, &f, info, err);
}

/* op_create has queried op->d first (cpu_ops_table.c), so its shape and rows are checked. */
static vdnn_status lin16_create(cpu_backend *be, vdnn_op *op, vdnn_error *err)
{
    vdnn_op *fc = calloc(1, sizeof *fc);
    if (!fc) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "linear: out of memory");
    fc->d = as_fc(&op->d);
    fc->info = op->info;
    fc->impl = &vdnn_cpu_op_fc;
    vdnn_status st = vdnn_cpu_op_fc.create(be, fc, err);
    if (st) {
        free(fc);
        return st;
    }
    op->state = fc;
    return VDNN_OK;
}

static void lin16_destroy(cpu_backend *be, vdnn_op *op)
{
    if (!op->state) return;
    vdnn_cpu_op_fc.destroy(be, op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status lin16_forward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    return vdnn_cpu_op_fc.forward(be, op->state, a, err);
}

static vdnn_status lin16_backward(cpu_backend *be, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    return vdnn_cpu_op_fc.backward(be, op->state, a, err);
}

const cpu_op_impl vdnn_cpu_op_linear_bf16 = {lin16_query, lin16_create, lin16_destroy, lin16_forward, lin16_backward,
                                             NULL};
