/* Helpers shared by the oneDNN-backed CPU ops: plain memory descriptors and one primitive with its argument memories. */
#ifndef VDNN_BACKEND_CPU_OPS_DNNL_UTIL_H
#define VDNN_BACKEND_CPU_OPS_DNNL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_internal.h"

#define CPU_DNNL_MAX_ARGS 10

/* One oneDNN primitive plus a memory object per execution argument, created
 * without storage: every call points them at that call's buffers, so the
 * primitive is built once per op and the executor's arena is used in place. */
typedef struct cpu_dnnl_step {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;              /* NULL when built only to read sizes */
    int n;
    int arg[CPU_DNNL_MAX_ARGS];         /* DNNL_ARG_* in the order run() takes pointers */
    dnnl_memory_t mem[CPU_DNNL_MAX_ARGS]; /* NULL where this primitive has no such argument */
    dnnl_memory_t scratch;              /* NULL when the scratchpad is empty */
    size_t scratch_bytes;
} cpu_dnnl_step;

/* A plain f32 descriptor: dims in logical order, laid out by `tag`. */
vdnn_status vdnn_cpu_dnnl_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, dnnl_format_tag_t tag,
                             const char *what, vdnn_error *err);
/* The same with values of type t (a feature map of the op's dtype). */
vdnn_status vdnn_cpu_dnnl_md_of(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, vdnn_dtype t,
                                dnnl_format_tag_t tag, const char *what, vdnn_error *err);

/* Creates the primitive descriptor for `desc` (user scratchpad, `hint` may be NULL)
 * and, if make_prim, the primitive and one memory per entry of args. */
vdnn_status vdnn_cpu_dnnl_step_init(cpu_backend *be, const_dnnl_op_desc_t desc, const cpu_dnnl_step *hint,
                                    bool make_prim, const int *args, int n_args, cpu_dnnl_step *s, const char *what,
                                    vdnn_error *err);

/* The same; with sum, the primitive adds its result into dst (a sum post-op) instead of writing it. */
vdnn_status vdnn_cpu_dnnl_step_init_ex(cpu_backend *be, const_dnnl_op_desc_t desc, const cpu_dnnl_step *hint,
                                       bool make_prim, bool sum, const int *args, int n_args, cpu_dnnl_step *s,
                                       const char *what, vdnn_error *err);

/* Bytes of the primitive's memory for an execution argument (0 if it has none). */
size_t vdnn_cpu_dnnl_arg_bytes(const cpu_dnnl_step *s, int arg);

/* Executes with ptrs[i] bound to args[i] of init and `scratch` as the scratchpad,
 * then waits for the stream. A NULL pointer for an argument the primitive uses fails. */
vdnn_status vdnn_cpu_dnnl_step_run(cpu_backend *be, cpu_dnnl_step *s, void *const *ptrs, void *scratch,
                                   const char *what, vdnn_error *err);

void vdnn_cpu_dnnl_step_fini(cpu_dnnl_step *s);

/* A copy between one of our plain arena tensors and the layout a primitive chose
 * (format_tag any, e.g. nChw16c). When both layouts are the same nothing is built,
 * bytes is 0 and the primitive reads or writes the plain tensor directly. */
typedef struct cpu_dnnl_reorder {
    dnnl_primitive_t prim;             /* NULL: no copy needed */
    dnnl_memory_t src, dst;
    size_t bytes;                      /* size of the chosen layout when a copy is needed, else 0 */
    /* Each side's own size (0 without a copy): a workspace holds only its side of the copy, e.g. a bf16 weights
     * copy made from the fp32 master weights (half the master's bytes), or a gradient before it goes to dw. */
    size_t from_bytes, to_bytes;
    size_t scratch_bytes;
    dnnl_memory_t scratch;
} cpu_dnnl_reorder;

/* Prepares the copy from `from` to `to` (make: also the primitive; else sizes only). */
vdnn_status vdnn_cpu_dnnl_reorder_init(cpu_backend *be, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                       bool make, cpu_dnnl_reorder *r, const char *what, vdnn_error *err);

/* Copies src to dst (no-op when no copy is needed); scratch holds scratch_bytes. */
vdnn_status vdnn_cpu_dnnl_reorder_run(cpu_backend *be, cpu_dnnl_reorder *r, const void *src, void *dst, void *scratch,
                                      const char *what, vdnn_error *err);

/* As reorder_init; with accumulate the copy adds into `to` (to += from), and is built even when the
 * layouts are equal. */
vdnn_status vdnn_cpu_dnnl_reorder_init_ex(cpu_backend *be, const dnnl_memory_desc_t *from,
                                          const dnnl_memory_desc_t *to, bool make, bool accumulate,
                                          cpu_dnnl_reorder *r, const char *what, vdnn_error *err);

void vdnn_cpu_dnnl_reorder_fini(cpu_dnnl_reorder *r);

/* The layout a primitive chose for an execution argument (NULL if it has none). */
const dnnl_memory_desc_t *vdnn_cpu_dnnl_arg_md(const cpu_dnnl_step *s, int arg);

/* A workspace laid out with vdnn_cpu_ws_take is asked for with this much slack, and used from
 * its first 64-byte boundary on: the arena aligns it anyway, but some JIT kernels (Winograd)
 * fault on a less aligned buffer, and callers such as tests may pass plain malloc memory. */
#define CPU_WS_SLACK 63

static inline char *vdnn_cpu_ws_align(void *ws)
{
    return ws ? (char *)(((uintptr_t)ws + CPU_WS_SLACK) & ~(uintptr_t)CPU_WS_SLACK) : NULL;
}

/* Bump allocation inside a workspace: returns the offset of `bytes` (0 bytes take no room),
 * keeping every piece 64-byte aligned like the arena. */
static inline size_t vdnn_cpu_ws_take(size_t *used, size_t bytes)
{
    size_t at = *used;
    *used += (bytes + 63) / 64 * 64;
    return at;
}

/* Output size of a window of k with stride s and padding p on both sides, as PyTorch computes it. */
static inline int vdnn_cpu_window_out(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

#endif
