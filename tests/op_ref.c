/* Naive references of every op's forward pass, summed in double. */
#include "op_ref.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "testutil.h"

#define IDX(s, n_, c_, h_, w_) \
    ((((size_t)(n_) * (size_t)(s).c + (size_t)(c_)) * (size_t)(s).h + (size_t)(h_)) * (size_t)(s).w + (size_t)(w_))

typedef struct pos {
    int n, c, h, w;
} pos;

static pos unravel(vdnn_shape s, size_t i)
{
    pos p;
    p.w = (int)(i % (size_t)s.w), i /= (size_t)s.w;
    p.h = (int)(i % (size_t)s.h), i /= (size_t)s.h;
    p.c = (int)(i % (size_t)s.c);
    p.n = (int)(i / (size_t)s.c);
    return p;
}

static double conv_at(const vt_op_data *in, pos o)
{
    const vdnn_layer_params *p = &in->d.p;
    const vdnn_shape s = in->d.in[0];
    const int cg = s.c / p->groups, fg = p->filters / p->groups, g = o.c / fg;
    double sum = p->bias ? in->b[o.c] : 0.0;
    for (int ic = 0; ic < cg; ic++)
        for (int i = 0; i < p->kernel_h; i++)
            for (int j = 0; j < p->kernel_w; j++) {
                int ih = o.h * p->stride_h - p->pad_h + i, iw = o.w * p->stride_w - p->pad_w + j;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                double wv = in->w[(((size_t)o.c * cg + ic) * p->kernel_h + i) * p->kernel_w + j];
                sum += wv * in->x[0][IDX(s, o.n, g * cg + ic, ih, iw)];
            }
    return sum;
}

/* PyTorch's pooling loops: a window starts at o * stride - pad and ends at the padded input's end at the latest;
 * padding never wins a max, and counts in an average's divisor unless exclude_pad. */
static double pool_at(const vt_op_data *in, pos o)
{
    const vdnn_layer_params *p = &in->d.p;
    const vdnn_shape s = in->d.in[0];
    const bool max = in->d.kind == VDNN_LAYER_MAXPOOL;
    const int h0 = o.h * p->stride_h - p->pad_h, w0 = o.w * p->stride_w - p->pad_w;
    const int h1 = h0 + p->kernel_h < s.h + p->pad_h ? h0 + p->kernel_h : s.h + p->pad_h;
    const int w1 = w0 + p->kernel_w < s.w + p->pad_w ? w0 + p->kernel_w : s.w + p->pad_w;
    double acc = max ? -INFINITY : 0.0;
    int seen = 0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
            double v = in->x[0][IDX(s, o.n, o.c, ih, iw)];
            acc = max ? fmax(acc, v) : acc + v;
            seen++;
        }
    if (max) return acc;
    return acc / (p->exclude_pad ? seen : (h1 - h0) * (w1 - w0));
}

static double act_at(const vdnn_op_desc *d, double x)
{
    const vdnn_layer_params *p = &d->p;
    switch (d->kind) {
    case VDNN_LAYER_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case VDNN_LAYER_HARDSIGMOID: return fmin(fmax(p->alpha * x + p->beta, 0.0), 1.0);
    case VDNN_LAYER_HARDSWISH: return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case VDNN_LAYER_SILU: return x / (1.0 + exp(-x));
    default: return fmin(fmax(x, p->clip_lo), p->clip_hi);
    }
}

static double lrn_at(const vt_op_data *in, pos o)
{
    const vdnn_layer_params *p = &in->d.p;
    const vdnn_shape s = in->d.in[0];
    double sum = 0.0;
    for (int c = o.c - p->lrn_size / 2; c <= o.c + (p->lrn_size - 1) / 2; c++) {
        if (c < 0 || c >= s.c) continue;
        double v = in->x[0][IDX(s, o.n, c, o.h, o.w)];
        sum += v * v;
    }
    return in->x[0][IDX(s, o.n, o.c, o.h, o.w)] / pow(p->lrn_k + p->lrn_alpha / p->lrn_size * sum, p->lrn_beta);
}

static double fc_at(const vt_op_data *in, pos o)
{
    const vdnn_shape s = in->d.in[0];
    const size_t k = (size_t)s.c * s.h * s.w;
    double sum = in->d.p.bias ? in->b[o.c] : 0.0;
    for (size_t i = 0; i < k; i++) sum += (double)in->w[(size_t)o.c * k + i] * in->x[0][(size_t)o.n * k + i];
    return sum;
}

static double concat_at(const vt_op_data *in, pos o)
{
    int c = o.c, i = 0;
    while (c >= in->d.in[i].c) c -= in->d.in[i++].c;
    return in->x[i][IDX(in->d.in[i], o.n, c, o.h, o.w)];
}

static double feat_cat_at(const vt_op_data *in, pos o)
{
    int w = o.w, i = 0;
    while (w >= in->d.in[i].w) w -= in->d.in[i++].w;
    return in->x[i][IDX(in->d.in[i], o.n, o.c, o.h, w)];
}

static double gap_at(const vt_op_data *in, pos o)
{
    const vdnn_shape s = in->d.in[0];
    double sum = 0.0;
    for (int k = 0; k < s.h * s.w; k++) sum += in->x[0][IDX(s, o.n, o.c, 0, 0) + (size_t)k];
    return sum / (s.h * s.w);
}

void vt_ref_batch_stats(const vt_op_data *in, double *mean, double *var)
{
    const vdnn_shape s = in->d.in[0];
    const size_t plane = (size_t)s.h * s.w;
    const double m = (double)s.n * (double)plane;
    for (int c = 0; c < s.c; c++) {
        double sum = 0.0, sq = 0.0;
        for (int n = 0; n < s.n; n++)
            for (size_t i = 0; i < plane; i++) sum += in->x[0][IDX(s, n, c, 0, 0) + i];
        mean[c] = sum / m;
        for (int n = 0; n < s.n; n++)
            for (size_t i = 0; i < plane; i++) {
                double dv = in->x[0][IDX(s, n, c, 0, 0) + i] - mean[c];
                sq += dv * dv;
            }
        var[c] = sq / m;
    }
}

static void ref_bn(const vt_op_data *in, size_t step, double *y)
{
    const vdnn_shape s = in->d.in[0];
    double *mean = calloc((size_t)s.c, sizeof *mean), *var = calloc((size_t)s.c, sizeof *var);
    assert_true(mean && var);
    if (in->d.training) {
        vt_ref_batch_stats(in, mean, var);
    } else {
        for (int c = 0; c < s.c; c++) mean[c] = in->stats[c], var[c] = in->stats[s.c + c];
    }
    for (size_t i = 0; i < in->ny; i += step) {
        int c = unravel(s, i).c;
        y[i] = in->w[c] * (in->x[0][i] - mean[c]) / sqrt(var[c] + in->d.p.bn_eps) + in->b[c];
    }
    free(mean), free(var);
}

/* Sequence ops: rows of the last dimension (docs/sequence.md). */
static double seq_at(const vt_op_data *in, size_t i)
{
    const vdnn_op_desc *d = &in->d;
    const vdnn_shape x = d->in[0];
    const size_t fo = (size_t)d->out.w, r = i / fo, f = i % fo;
    switch (d->kind) {
    case VDNN_LAYER_EMBED: return in->w[(size_t)in->x[0][r] * fo + f];
    case VDNN_LAYER_POS_EMBED: return (double)in->x[0][i] + in->w[(r % (size_t)x.h) * fo + f];
    case VDNN_LAYER_LAYERNORM: {
        const float *row = in->x[0] + r * fo;
        double m = 0, v = 0;
        for (size_t k = 0; k < fo; k++) m += row[k];
        m /= (double)fo;
        for (size_t k = 0; k < fo; k++) v += (row[k] - m) * (row[k] - m);
        v /= (double)fo;
        return in->w[f] * (row[f] - m) / sqrt(v + d->p.bn_eps) + in->b[f];
    }
    case VDNN_LAYER_LINEAR: {
        const size_t fi = (size_t)x.w;
        double s = d->p.bias ? in->b[f] : 0.0;
        for (size_t k = 0; k < fi; k++) s += (double)in->w[f * fi + k] * in->x[0][r * fi + k];
        return s;
    }
    case VDNN_LAYER_GELU: {
        const double v = in->x[0][i];
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
    }
    default: break;
    }
    fail_msg("%s: no sequence reference for layer kind %d", in->name, (int)d->kind);
    return 0;
}

/* Attention: probabilities y[b, h, i, j] (causal softmax of scaled q.k) and their mix of values; fused, the mix of
 * the probabilities (y[b, i, h D + e]). */
static void ref_attn(const vt_op_data *in, double *y)
{
    const vdnn_op_desc *d = &in->d;
    if (d->kind == VDNN_LAYER_ATTN) {
        const int B = d->in[0].n, T = d->in[0].h, F = d->in[0].w / 3, H = d->p.heads, D = F / H;
        double *row = malloc((size_t)T * sizeof *row);
        assert_non_null(row);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    const float *qkv = in->x[0] + (size_t)b * T * 3 * F, *q = qkv + (size_t)i * 3 * F + (size_t)h * D;
                    double mx = -INFINITY, sum = 0;
                    for (int j = 0; j <= i; j++) {
                        const float *k = qkv + (size_t)j * 3 * F + F + (size_t)h * D;
                        double s = 0;
                        for (int e = 0; e < D; e++) s += (double)q[e] * k[e];
                        row[j] = s / sqrt((double)D);
                        mx = fmax(mx, row[j]);
                    }
                    for (int j = 0; j <= i; j++) sum += exp(row[j] - mx);
                    for (int e = 0; e < D; e++) {
                        double s = 0;
                        for (int j = 0; j <= i; j++) s += exp(row[j] - mx) / sum * qkv[(size_t)j * 3 * F + 2 * F + (size_t)h * D + e];
                        y[((size_t)b * T + i) * F + (size_t)h * D + e] = s;
                    }
                }
        free(row);
        return;
    }
    const bool probs = d->kind == VDNN_LAYER_ATTN_PROBS;
    const vdnn_shape qs = probs ? d->in[0] : d->in[1];
    /* The op's H heads from head0 on of d->p.heads (a head group), or every head. */
    const int B = qs.n, T = qs.h, F = qs.w / 3, H = probs ? d->out.c : d->in[0].c;
    const int D = F / (d->p.heads ? d->p.heads : H), h0 = d->p.head0, W = H * D;
    const float *qkv = probs ? in->x[0] : in->x[1];
    double *row = malloc((size_t)T * sizeof *row);
    assert_non_null(row);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * 3 * F + (size_t)(h0 + h) * D;
                if (probs) {
                    double mx = -INFINITY, sum = 0;
                    for (int j = 0; j <= i; j++) {
                        const float *k = qkv + ((size_t)b * T + j) * 3 * F + F + (size_t)(h0 + h) * D;
                        double s = 0;
                        for (int e = 0; e < D; e++) s += (double)q[e] * k[e];
                        row[j] = s / sqrt((double)D);
                        mx = fmax(mx, row[j]);
                    }
                    for (int j = 0; j <= i; j++) sum += exp(row[j] - mx);
                    double *out = y + (((size_t)b * H + h) * T + i) * T;
                    for (int j = 0; j < T; j++) out[j] = j <= i ? exp(row[j] - mx) / sum : 0.0;
                } else {
                    const float *p = in->x[0] + (((size_t)b * H + h) * T + i) * T;
                    for (int e = 0; e < D; e++) {
                        double s = 0;
                        for (int j = 0; j < T; j++)
                            s += (double)p[j] * qkv[((size_t)b * T + j) * 3 * F + 2 * F + (size_t)(h0 + h) * D + e];
                        y[((size_t)b * T + i) * W + (size_t)h * D + e] = s;
                    }
                }
            }
    free(row);
}

/* LSTM chunk, PyTorch's equations in double: rows [h_t | c_t]. */
static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

static void ref_lstm(const vt_op_data *in, double *y)
{
    const vdnn_op_desc *d = &in->d;
    const int B = d->in[0].n, S = d->out.h, H = d->p.filters, P = vdnn_lstm_h_width(&d->p), W = P + H;
    const int In = d->p.lstm_in, ldx = d->in[0].w, tin = d->in[0].h, sp = d->n_inputs > 1 ? d->in[1].h : 0;
    const float *wih = in->w, *whh = wih + (size_t)4 * H * In, *whr = whh + (size_t)4 * H * P;
    const float *bih = in->b, *bhh = bih + 4 * H;
    double *h = malloc((size_t)P * sizeof *h), *c = malloc((size_t)H * sizeof *c);
    double *g = malloc(4 * (size_t)H * sizeof *g), *m = malloc((size_t)H * sizeof *m);
    assert_true(h && c && g && m);
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < P; j++) h[j] = sp ? in->x[1][((size_t)b * sp + sp - 1) * W + j] : 0.0;
        for (int j = 0; j < H; j++) c[j] = sp ? in->x[1][((size_t)b * sp + sp - 1) * W + P + j] : 0.0;
        for (int t = 0; t < S; t++) {
            const float *x = in->x[0] + ((size_t)b * tin + d->p.step0 + t) * ldx;
            for (int r = 0; r < 4 * H; r++) {
                double s = (double)bih[r] + bhh[r];
                for (int k = 0; k < In; k++) s += (double)wih[(size_t)r * In + k] * x[k];
                for (int k = 0; k < P; k++) s += (double)whh[(size_t)r * P + k] * h[k];
                g[r] = s;
            }
            double *out = y + ((size_t)b * S + t) * W;
            for (int j = 0; j < H; j++) {
                c[j] = sig(g[H + j]) * c[j] + sig(g[j]) * tanh(g[2 * H + j]);
                m[j] = sig(g[3 * H + j]) * tanh(c[j]);
                out[P + j] = c[j];
            }
            for (int j = 0; j < P; j++) {
                double s = 0;
                if (!d->p.proj) s = m[j];
                else
                    for (int k = 0; k < H; k++) s += (double)whr[(size_t)j * H + k] * m[k];
                h[j] = out[j] = s;
            }
        }
    }
    free(h), free(c), free(g), free(m);
}

static void ref_seq_cat(const vt_op_data *in, double *y)
{
    const vdnn_op_desc *d = &in->d;
    const int cols = d->p.filters, T = d->out.h;
    int at = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        const vdnn_shape s = d->in[i];
        for (int b = 0; b < s.n; b++)
            for (int t = 0; t < s.h; t++)
                for (int j = 0; j < cols; j++)
                    y[((size_t)b * T + at + t) * cols + j] = in->x[i][((size_t)b * s.h + t) * s.w + j];
        at += s.h;
    }
}

static void ref_softmax_xent(const vt_op_data *in, double *y, double *loss)
{
    /* One row per image, or per token of a sequence. */
    const int n_b = (int)vdnn_xent_rows(in->d.in[0]), k = (int)(in->nx[0] / (size_t)n_b);
    *loss = 0.0;
    for (int n = 0; n < n_b; n++) {
        const float *z = in->x[0] + (size_t)n * k;
        double mx = z[0], sum = 0.0;
        for (int c = 1; c < k; c++) mx = fmax(mx, z[c]);
        for (int c = 0; c < k; c++) sum += exp(z[c] - mx);
        for (int c = 0; c < k; c++) y[(size_t)n * k + c] = exp(z[c] - mx) / sum;
        *loss += (log(sum) + mx - z[in->labels[n]]) / n_b;
    }
}

void vt_ref_forward(const vt_op_data *in, size_t step, double *y, double *loss)
{
    const vdnn_op_desc *d = &in->d;
    for (size_t i = 0; i < in->ny; i++) y[i] = NAN;
    if (d->kind == VDNN_LAYER_BATCHNORM) return ref_bn(in, step, y);
    if (d->kind == VDNN_LAYER_SOFTMAX_XENT) return ref_softmax_xent(in, y, loss);
    if (d->kind == VDNN_LAYER_ATTN_PROBS || d->kind == VDNN_LAYER_ATTN_MIX || d->kind == VDNN_LAYER_ATTN)
        return ref_attn(in, y);
    if (d->kind == VDNN_LAYER_LSTM) return ref_lstm(in, y);
    if (d->kind == VDNN_LAYER_SEQ_CAT) return ref_seq_cat(in, y);
    const float p = d->p.dropout_p;
    for (size_t i = 0; i < in->ny; i += step) {
        const pos o = unravel(d->out, i);
        switch (d->kind) {
        case VDNN_LAYER_CONV: y[i] = conv_at(in, o); break;
        case VDNN_LAYER_MAXPOOL:
        case VDNN_LAYER_AVGPOOL: y[i] = pool_at(in, o); break;
        case VDNN_LAYER_RELU: y[i] = in->x[0][i] > 0 ? in->x[0][i] : 0.0; break;
        case VDNN_LAYER_LRN: y[i] = lrn_at(in, o); break;
        case VDNN_LAYER_FC: y[i] = fc_at(in, o); break;
        case VDNN_LAYER_DROPOUT:
            y[i] = !d->training ? in->x[0][i] : vdnn_dropout_keep(in->seed, i, p) ? in->x[0][i] / (1.0 - p) : 0.0;
            break;
        case VDNN_LAYER_CONCAT: y[i] = concat_at(in, o); break;
        case VDNN_LAYER_FEAT_CAT: y[i] = feat_cat_at(in, o); break;
        case VDNN_LAYER_ADD:
            y[i] = 0.0;
            for (int k = 0; k < d->n_inputs; k++) y[i] += in->x[k][i];
            break;
        case VDNN_LAYER_GAP: y[i] = gap_at(in, o); break;
        case VDNN_LAYER_FLATTEN: y[i] = in->x[0][i]; break;
        case VDNN_LAYER_SIGMOID:
        case VDNN_LAYER_HARDSIGMOID:
        case VDNN_LAYER_HARDSWISH:
        case VDNN_LAYER_SILU:
        case VDNN_LAYER_CLIP: y[i] = act_at(d, in->x[0][i]); break;
        case VDNN_LAYER_CHANNEL_MUL: y[i] = (double)in->x[0][i] * in->x[1][(size_t)o.n * d->out.c + (size_t)o.c]; break;
        case VDNN_LAYER_EMBED:
        case VDNN_LAYER_POS_EMBED:
        case VDNN_LAYER_LAYERNORM:
        case VDNN_LAYER_LINEAR:
        case VDNN_LAYER_GELU: y[i] = seq_at(in, i); break;
        default: fail_msg("%s: no reference for layer kind %d", in->name, (int)d->kind);
        }
    }
}
