/* Shape and type checks of the ops every backend validates the same way. */
#include "backend/op_check.h"

vdnn_status vdnn_op_check_concat(const vdnn_op_desc *d, vdnn_error *err)
{
    long c = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        vdnn_shape s = d->in[i];
        if (s.n != d->out.n || s.h != d->out.h || s.w != d->out.w)
            return vdnn_fail(err, VDNN_ERR_SHAPE, "concat: input %d is %dx%dx%dx%d but the output is %dx?x%dx%d", i, s.n,
                             s.c, s.h, s.w, d->out.n, d->out.h, d->out.w);
        c += s.c;
    }
    if (c != d->out.c)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "concat: input channels sum to %ld but the output has %d", c, d->out.c);
    return VDNN_OK;
}

vdnn_status vdnn_op_check_add(const vdnn_op_desc *d, vdnn_error *err)
{
    for (int i = 0; i < d->n_inputs; i++) {
        vdnn_shape s = d->in[i];
        if (s.n != d->out.n || s.c != d->out.c || s.h != d->out.h || s.w != d->out.w)
            return vdnn_fail(err, VDNN_ERR_SHAPE, "add: input %d is %dx%dx%dx%d but the output is %dx%dx%dx%d", i, s.n,
                             s.c, s.h, s.w, d->out.n, d->out.c, d->out.h, d->out.w);
    }
    return VDNN_OK;
}

vdnn_status vdnn_op_check_dtypes(vdnn_dtype a, vdnn_dtype b, const char *what, vdnn_error *err)
{
    if (!vdnn_dtype_valid(a) || !vdnn_dtype_valid(b))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: unknown data type %d", what, (int)(vdnn_dtype_valid(a) ? b : a));
    return VDNN_OK;
}
