/* Shapes of the sequence ops that every backend checks alike: rows of a sequence tensor, attention's dimensions,
 * and the shape error naming the op (docs/sequence.md). */
#ifndef VDNN_BACKEND_SEQ_SHAPES_H
#define VDNN_BACKEND_SEQ_SHAPES_H

#include "backend/backend.h"

/* Rows a row-wise op (linear, layer norm, softmax) sees: every dimension but the last. */
static inline size_t vdnn_seq_rows(vdnn_shape s) { return (size_t)s.n * (size_t)s.c * (size_t)s.h; }

typedef struct vdnn_attn_dims {
    int b, h, t, f, dh; /* batch, heads of this op, tokens, width, width of a head */
    int h0, w;          /* the op's first head (a group's, 0 for every head) and its heads' width h * dh */
} vdnn_attn_dims;

/* qkv Bx1xTx3F and probabilities BxHxTxT, the op's H heads from d->p.head0 on of d->p.heads (0: H) dividing F;
 * otherwise VDNN_ERR_SHAPE naming the op. */
vdnn_status vdnn_attn_dims_of(const vdnn_op_desc *d, vdnn_shape qkv, vdnn_shape probs, vdnn_attn_dims *a,
                              vdnn_error *err);
/* The heads an attn_probs op computes: its group's, else every head. */
static inline int vdnn_attn_op_heads(const vdnn_op_desc *d) { return d->p.head_count ? d->p.head_count : d->p.heads; }
/* A fused attention op's dimensions (qkv Bx1xTx3F to Bx1xTxF, heads dividing F) and its blocks of query rows: as many
 * rows as keep a block's scores within block_values values, a row holding T of them per head (every head's in a
 * block when all_heads, one head's otherwise), at least one row and at most T. VDNN_ERR_SHAPE naming the op. */
typedef struct vdnn_fused_dims {
    int b, h, t, f, dh, rows;
} vdnn_fused_dims;
vdnn_status vdnn_fused_dims_of(const vdnn_op_desc *d, size_t block_values, bool all_heads, vdnn_fused_dims *m,
                               vdnn_error *err);
/* VDNN_ERR_SHAPE: "OP: input ..., output ...: want". */
vdnn_status vdnn_seq_shape_fail(const vdnn_op_desc *d, const char *want, vdnn_error *err);

#endif
