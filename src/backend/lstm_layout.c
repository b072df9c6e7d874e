/* The LSTM ops' dimensions, parameter offsets, shape checks and op info, shared by the CPU and CUDA backends. */
#include "backend/lstm_layout.h"

vdnn_status vdnn_lstm_dims_of(const vdnn_op_desc *d, vdnn_lstm_dims *m, vdnn_error *err)
{
    const vdnn_shape x = d->in[0], y = d->out;
    const vdnn_layer_params *p = &d->p;
    const int h = p->filters, pw = vdnn_lstm_h_width(p);
    *m = (vdnn_lstm_dims){.b = x.n, .s = y.h, .h = h, .pw = pw, .w = pw + h, .in = p->lstm_in, .tin = x.h,
                          .ldx = x.w, .step0 = p->step0, .proj = p->proj > 0};
    size_t nw, nb;
    vdnn_lstm_param_counts(p, &nw, &nb);
    bool ok = d->n_inputs >= 1 && d->n_inputs <= 2 && h >= 1 && p->proj >= 0 && m->in >= 1 && x.c == 1 &&
              x.w >= m->in && p->step0 >= 0 && p->step0 + y.h <= x.h && y.n == x.n && y.c == 1 && y.w == m->w;
    if (ok && d->n_inputs == 2) {
        const vdnn_shape s = d->in[1];
        ok = s.n == x.n && s.c == 1 && s.w == m->w;
        m->sp = s.h;
    }
    if (!ok)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "lstm: input %dx%dx%dx%d (steps %d.. of its first %d features) and "
                         "output %dx%dx%dx%d do not fit hidden=%d proj=%d (expected an output Bx1xSx(P+H), a previous "
                         "chunk Bx1xS'x(P+H); %zu parameters)", x.n, x.c, x.h, x.w, p->step0, m->in, y.n, y.c, y.h,
                         y.w, h, p->proj, nw + nb);
    return VDNN_OK;
}

vdnn_lstm_params vdnn_lstm_params_at(const vdnn_lstm_dims *m, const float *w, const float *b)
{
    vdnn_lstm_params q;
    const size_t h4 = 4 * (size_t)m->h;
    q.wih = w;
    q.whh = q.wih + h4 * (size_t)m->in;
    q.whr = m->proj ? q.whh + h4 * (size_t)m->pw : NULL;
    q.bih = b;
    q.bhh = q.bih + h4;
    return q;
}

size_t vdnn_lstm_bwd_floats(const vdnn_lstm_dims *m)
{
    const size_t bs = (size_t)m->b * (size_t)m->s, b = (size_t)m->b;
    return bs * 4 * (size_t)m->h + 2 * b * (size_t)m->pw + 3 * b * (size_t)m->h + bs;
}

vdnn_op_info vdnn_lstm_info(const vdnn_lstm_dims *m)
{
    const size_t bs = (size_t)m->b * (size_t)m->s;
    return (vdnn_op_info){.aux_bytes = bs * 4 * (size_t)m->h * sizeof(float),
                          /* o * tanh(c) before the projection; one step's gates where no aux is kept
                           * (forward-only plans keep no state for backward) */
                          .fwd_ws_bytes = (size_t)m->b * (size_t)m->h * ((m->proj ? 1 : 0) + 4) * sizeof(float),
                          .bwd_ws_bytes = vdnn_lstm_bwd_floats(m) * sizeof(float),
                          .bwd_needs_x = true,
                          .bwd_needs_y = true};
}

vdnn_status vdnn_lstm_check_args(const vdnn_op_desc *d, const vdnn_lstm_dims *m, const vdnn_op_args *a, bool backward,
                                 const char *prefix, vdnn_error *err)
{
    const struct {
        bool wanted;
        const void *p;
        const char *what;
    } bufs[] = {{true, a->x[0], "x"},
                {true, a->w, "the weights"},
                {true, a->b, "the biases"},
                {backward && a->dw, a->db, "db"},
                {m->sp > 0, a->x[1], "the previous chunk"},
                {true, a->y, "y"},
                {backward, a->dy, "dy"},
                {backward, a->aux, "aux"},
                {true, a->ws, "the workspace"}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i].wanted && !bufs[i].p)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s%s: %s is NULL", prefix, vdnn_layer_kind_name(d->kind),
                             bufs[i].what);
    return VDNN_OK;
}

vdnn_status vdnn_seq_cat_check(const vdnn_op_desc *d, vdnn_error *err)
{
    long t = 0;
    bool ok = d->out.c == 1 && d->out.w == d->p.filters;
    for (int i = 0; i < d->n_inputs && ok; i++) {
        ok = d->in[i].n == d->out.n && d->in[i].c == 1 && d->in[i].w >= d->p.filters;
        t += d->in[i].h;
    }
    if (!ok || t != d->out.h)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "seq_cat: inputs Bx1xS_ixW_i (W_i at least %d) do not make the output "
                         "%dx%dx%dx%d", d->p.filters, d->out.n, d->out.c, d->out.h, d->out.w);
    return VDNN_OK;
}
