/* The data types of feature maps, gradient maps and workspaces: names and element sizes, shared by the backends,
 * the tests and (later) the graph and the planner, which count bytes by type. */
#ifndef VDNN_CORE_DTYPE_H
#define VDNN_CORE_DTYPE_H

#include <stddef.h>

/* Zero is fp32, so a description that never names a type keeps the behaviour it always had. */
typedef enum vdnn_dtype {
    VDNN_DTYPE_F32 = 0,
    VDNN_DTYPE_BF16,  /* bfloat16: fp32's exponent range, 8 significant bits */
    VDNN_DTYPE_F16,   /* IEEE half: 11 significant bits, values up to 65504 */
    VDNN_DTYPE_COUNT
} vdnn_dtype;

static inline size_t vdnn_dtype_size(vdnn_dtype t) { return t == VDNN_DTYPE_F32 ? 4 : 2; }

/* "fp32", "bf16", "fp16"; "?" for a value outside the enum. */
static inline const char *vdnn_dtype_name(vdnn_dtype t)
{
    switch (t) {
    case VDNN_DTYPE_F32: return "fp32";
    case VDNN_DTYPE_BF16: return "bf16";
    case VDNN_DTYPE_F16: return "fp16";
    default: return "?";
    }
}

static inline int vdnn_dtype_valid(vdnn_dtype t) { return (int)t >= 0 && t < VDNN_DTYPE_COUNT; }

#endif
