/* An LSTM chunk's large products in bf16 on a CPU with AVX-512 BF16: the input projection of every step, and in
 * backward dx, dW_ih and dW_hh, each one oneDNN bf16 matmul with fp32 accumulation. The chunk op is widened as
 * elsewhere (cpu_ops_widen.c); these products round their fp32 operands into bf16 copies in the workspace (the
 * maps' copies are bf16 values already, the master weights and the gate gradients are rounded, as autocast rounds
 * them), which oneDNN's bf16 kernels multiply at about twice the fp32 rate. The recurrent per-step products and the
 * cells stay fp32, so the state carried from step to step is not rounded in the chunk. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_lstm_mm16.h"
#include "backend/cpu/cpu_ops_dnnl_util.h"

enum { MM_PROJ, MM_DWIH, MM_DX, MM_DX_ADD, MM_DWHH, MM_COUNT };

struct cpu_lstm_mm16 {
    cpu_dnnl_step mm[MM_COUNT];
    size_t nb; /* rows of W_ih in a block (block_rows) */
};

/* The products go by blocks of W_ih's 4H rows (gate columns of the gates and their gradients), each block's bf16
 * copies of W_ih and dg within this many bytes (or vdnn_cpu_options.widen_group_bytes where set): a whole bf16 W_ih
 * per chunk would be 64 MiB in biglstm, beside the fp32 maps a chunk holds. */
enum { MM16_BLOCK_BYTES = 4 << 20 };

/* Rows of W_ih in a block: 4H halved while a block's copies exceed the cap (every block the same size). */
static size_t block_rows(const cpu_backend *be, const vdnn_lstm_dims *m)
{
    const size_t cap = be->opt.widen_group_bytes ? be->opt.widen_group_bytes : MM16_BLOCK_BYTES;
    const size_t in = (size_t)m->in, bs = (size_t)m->b * (size_t)m->s, widest = in > bs ? in : bs;
    size_t nb = 4 * (size_t)m->h;
    while (nb * widest * sizeof(uint16_t) > cap && nb % 2 == 0 && nb >= 128) nb /= 2;
    return nb;
}

/* A 2-D matrix rows x cols of type dt whose rows are `ld` apart (row-major), or, transposed, its transpose: element
 * (i, j) at j * ld + i. */
static vdnn_status mat(dnnl_memory_desc_t *md, dnnl_dim_t rows, dnnl_dim_t cols, dnnl_dim_t ld, bool transposed,
                       dnnl_data_type_t dt, vdnn_error *err)
{
    const dnnl_dims_t dims = {rows, cols};
    const dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
    return vdnn_cpu_dnnl_check(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides), "lstm bf16 matrix", err);
}

/* C (m x n, fp32, ldc) = A (m x k, bf16) B (k x n, bf16) [+ C], A and B as `mat` lays them out. */
static vdnn_status product(cpu_backend *be, bool make, cpu_dnnl_step *s, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                           dnnl_dim_t lda, bool ta, dnnl_dim_t ldb, bool tb, dnnl_dim_t ldc, bool sum, vdnn_error *err)
{
    dnnl_memory_desc_t a, b, c;
    vdnn_status st = mat(&a, m, k, lda, ta, dnnl_bf16, err);
    if (!st) st = mat(&b, k, n, ldb, tb, dnnl_bf16, err);
    if (!st) st = mat(&c, m, n, ldc, false, dnnl_f32, err);
    dnnl_matmul_desc_t md;
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_matmul_desc_init(&md, &a, &b, NULL, &c), "lstm bf16 matmul", err);
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    if (!st) st = vdnn_cpu_dnnl_step_init_ex(be, &md, NULL, make, sum, args, 3, s, "lstm bf16 matmul", err);
    return st;
}

/* The products of one block of nb gate columns, for a chunk of dimensions m (its rows contiguous: the widened op's
 * copies); the block's copies of dg and W_ih are compact, nb wide and nb rows. */
static vdnn_status products(cpu_backend *be, const vdnn_lstm_dims *m, size_t rows, bool make, cpu_dnnl_step *mm,
                            vdnn_error *err)
{
    const dnnl_dim_t nb = (dnnl_dim_t)rows, h4 = 4 * (dnnl_dim_t)m->h, in = m->in, pw = m->pw;
    const dnnl_dim_t bs = (dnnl_dim_t)m->b * m->s;
    /* gates ([t][b][4H], all B*S rows; the block's columns) += x W_blk^T, x's rows copied in that order (a product
     * writing into rows B x 4H apart ran on oneDNN's slower gemm kernels, not its brgemm ones) */
    vdnn_status st = product(be, make, &mm[MM_PROJ], bs, nb, in, in, false, in, true, h4, true, err);
    /* dW_ih's block rows (nb x In) += dg_blk^T x over the B*S rows (dg is [b][t][4H]) */
    if (!st) st = product(be, make, &mm[MM_DWIH], nb, in, bs, nb, true, in, false, in, true, err);
    /* dx (B*S x In) = dg W_ih, summed over the blocks: the first writes, the others add */
    if (!st) st = product(be, make, &mm[MM_DX], bs, in, nb, nb, false, in, false, in, false, err);
    if (!st && nb < h4) st = product(be, make, &mm[MM_DX_ADD], bs, in, nb, nb, false, in, false, in, true, err);
    /* dW_hh's block rows (nb x P) += dg_blk(rows 1..)^T h(rows ..B*S-2) */
    if (!st && bs > 1) st = product(be, make, &mm[MM_DWHH], nb, pw, bs - 1, nb, true, pw, false, pw, true, err);
    return st;
}

static void products_fini(cpu_dnnl_step *mm)
{
    for (int i = 0; i < MM_COUNT; i++) vdnn_cpu_dnnl_step_fini(&mm[i]);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Where the bf16 copies and the scratchpad lie after `base` bytes of the fp32 op's own workspace. */
typedef struct mm16_layout {
    size_t x16, w16, dg16, h16, scratch, bytes;
} mm16_layout;

static mm16_layout layout(const vdnn_lstm_dims *m, size_t nb, const cpu_dnnl_step *mm, size_t base, bool backward)
{
    const size_t bs = (size_t)m->b * (size_t)m->s, u = sizeof(uint16_t);
    mm16_layout l = {0};
    size_t used = (base + 63) / 64 * 64;
    l.x16 = vdnn_cpu_ws_take(&used, bs * (size_t)m->in * u);
    l.w16 = vdnn_cpu_ws_take(&used, nb * (size_t)m->in * u);
    if (backward) {
        l.dg16 = vdnn_cpu_ws_take(&used, bs * nb * u);
        l.h16 = vdnn_cpu_ws_take(&used, bs * (size_t)m->pw * u);
    }
    const size_t pad = backward ? max_size(max_size(mm[MM_DWIH].scratch_bytes, mm[MM_DX].scratch_bytes),
                                           max_size(mm[MM_DX_ADD].scratch_bytes, mm[MM_DWHH].scratch_bytes))
                                : mm[MM_PROJ].scratch_bytes;
    l.scratch = vdnn_cpu_ws_take(&used, pad);
    l.bytes = used;
    return l;
}

static vdnn_status contiguous(const vdnn_lstm_dims *m, vdnn_error *err)
{
    if (m->tin == m->s && m->ldx == m->in && m->step0 == 0) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lstm bf16 products: a chunk whose input rows are its own steps "
                     "alone (the widened op's copies) expected");
}

vdnn_status vdnn_cpu_lstm_mm16_info(cpu_backend *be, const vdnn_lstm_dims *m, vdnn_op_info *info, vdnn_error *err)
{
    cpu_dnnl_step mm[MM_COUNT] = {0};
    vdnn_status st = contiguous(m, err);
    const size_t nb = block_rows(be, m);
    if (!st) st = products(be, m, nb, false, mm, err);
    if (!st) {
        info->fwd_ws_bytes = layout(m, nb, mm, info->fwd_ws_bytes, false).bytes;
        info->bwd_ws_bytes = layout(m, nb, mm, info->bwd_ws_bytes, true).bytes;
    }
    products_fini(mm);
    return st;
}

vdnn_status vdnn_cpu_lstm_mm16_create(cpu_backend *be, const vdnn_lstm_dims *m, cpu_lstm_mm16 **out, vdnn_error *err)
{
    *out = NULL;
    vdnn_status st = contiguous(m, err);
    if (st) return st;
    cpu_lstm_mm16 *p = calloc(1, sizeof *p);
    if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "lstm bf16 products: out of memory");
    p->nb = block_rows(be, m);
    st = products(be, m, p->nb, true, p->mm, err);
    if (st) {
        vdnn_cpu_lstm_mm16_destroy(p);
        return st;
    }
    *out = p;
    return VDNN_OK;
}

void vdnn_cpu_lstm_mm16_destroy(cpu_lstm_mm16 *p)
{
    if (!p) return;
    products_fini(p->mm);
    free(p);
}

static vdnn_status round_into(cpu_backend *be, void *dst, const float *src, size_t n, vdnn_error *err)
{
    return vdnn_cpu_convert(&be->base, dst, VDNN_DTYPE_BF16, src, VDNN_DTYPE_F32, n, err);
}

static vdnn_status run(cpu_backend *be, cpu_dnnl_step *s, const void *a, const void *b, float *c, void *scratch,
                       vdnn_error *err)
{
    void *const ptrs[] = {(void *)a, (void *)b, c};
    return vdnn_cpu_dnnl_step_run(be, s, ptrs, scratch, "lstm bf16 matmul", err);
}

vdnn_status vdnn_cpu_lstm_mm16_project(cpu_backend *be, cpu_lstm_mm16 *p, const vdnn_lstm_dims *m, const float *x,
                                       const float *wih, float *gates, void *ws, size_t base, vdnn_error *err)
{
    const size_t h4 = 4 * (size_t)m->h, in = (size_t)m->in, s = (size_t)m->s, nb = p->nb;
    const mm16_layout l = layout(m, nb, p->mm, base, false);
    char *at = ws;
    uint16_t *x16 = (uint16_t *)(at + l.x16);
    const size_t b = (size_t)m->b;
    for (size_t i = 0; i < b; i++)
        for (size_t t = 0; t < s; t++) vdnn_cpu_bf16_round_run(x16 + (t * b + i) * in, x + (i * s + t) * in, in);
    vdnn_status st = VDNN_OK;
    for (size_t j = 0; !st && j < h4; j += nb) {
        st = round_into(be, at + l.w16, wih + j * in, nb * in, err);
        if (!st) st = run(be, &p->mm[MM_PROJ], x16, at + l.w16, gates + j, at + l.scratch, err);
    }
    return st;
}

/* The block of dg's columns j .. j+nb-1 ([b][t][4H], bs rows) rounded into a compact bs x nb copy. */
static void round_columns(uint16_t *dst, const float *dg, size_t bs, size_t h4, size_t j, size_t nb)
{
#pragma omp parallel for if (bs * nb > CPU_PAR_MIN)
    for (size_t r = 0; r < bs; r++) vdnn_cpu_bf16_round_run(dst + r * nb, dg + r * h4 + j, nb);
}

vdnn_status vdnn_cpu_lstm_mm16_backward(cpu_backend *be, cpu_lstm_mm16 *p, const vdnn_lstm_dims *m,
                                        const vdnn_lstm_mm16_grads *g, void *ws, size_t base, vdnn_error *err)
{
    const size_t h4 = 4 * (size_t)m->h, in = (size_t)m->in, s = (size_t)m->s, bs = (size_t)m->b * s;
    const size_t pw = (size_t)m->pw, nb = p->nb;
    const mm16_layout l = layout(m, nb, p->mm, base, true);
    char *at = ws;
    uint16_t *dg16 = (uint16_t *)(at + l.dg16), *h16 = (uint16_t *)(at + l.h16);
    void *w16 = at + l.w16, *x16 = at + l.x16, *scratch = at + l.scratch;
    vdnn_status st = VDNN_OK;
    if (g->dwih) st = round_into(be, x16, g->x, bs * in, err);
    const bool dwhh = g->dwhh && bs > 1;
    if (!st && dwhh)
        for (size_t r = 0; r + 1 < bs; r++) vdnn_cpu_bf16_round_run(h16 + r * pw, g->y + r * (size_t)m->w, pw);
    for (size_t j = 0; !st && j < h4; j += nb) {
        round_columns(dg16, g->dg, bs, h4, j, nb);
        if (g->dwih || g->dx) st = round_into(be, w16, g->wih + j * in, nb * in, err);
        if (!st && g->dwih) st = run(be, &p->mm[MM_DWIH], dg16, x16, g->dwih + j * in, scratch, err);
        if (!st && g->dx) st = run(be, &p->mm[j ? MM_DX_ADD : MM_DX], dg16, w16, g->dx, scratch, err);
        if (st || !dwhh) continue;
        /* Rows (b >= 1, t = 0) pair with the previous sequence's last h: zeroed, as the fp32 op zeroes them. */
        for (size_t i = 1; i < (size_t)m->b; i++) memset(dg16 + i * s * nb, 0, nb * sizeof(uint16_t));
        st = run(be, &p->mm[MM_DWHH], dg16 + nb, h16, g->dwhh + j * pw, scratch, err);
    }
    return st;
}
