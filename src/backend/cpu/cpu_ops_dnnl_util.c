/* Helpers shared by the oneDNN-backed CPU ops: plain memory descriptors and one primitive with its argument memories. */
#include "backend/cpu/cpu_ops_dnnl_util.h"

#include <string.h>

static const char *arg_name(int arg)
{
    switch (arg) {
    case DNNL_ARG_SRC: return "source";
    case DNNL_ARG_DST: return "destination";
    case DNNL_ARG_WEIGHTS: return "weights";
    case DNNL_ARG_BIAS: return "bias";
    case DNNL_ARG_MEAN: return "mean";
    case DNNL_ARG_VARIANCE: return "variance";
    case DNNL_ARG_SCALE: return "scale";
    case DNNL_ARG_SHIFT: return "shift";
    case DNNL_ARG_WORKSPACE: return "workspace (aux)";
    case DNNL_ARG_SCRATCHPAD: return "scratchpad (ws)";
    case DNNL_ARG_DIFF_SRC: return "source gradient";
    case DNNL_ARG_DIFF_DST: return "output gradient";
    case DNNL_ARG_DIFF_WEIGHTS: return "weights gradient";
    case DNNL_ARG_DIFF_BIAS: return "bias gradient";
    case DNNL_ARG_DIFF_SCALE: return "scale gradient";
    case DNNL_ARG_DIFF_SHIFT: return "shift gradient";
    }
    return "argument";
}

vdnn_status vdnn_cpu_dnnl_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, dnnl_format_tag_t tag,
                             const char *what, vdnn_error *err)
{
    return vdnn_cpu_dnnl_md_of(md, ndims, dims, VDNN_DTYPE_F32, tag, what, err);
}

vdnn_status vdnn_cpu_dnnl_md_of(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, vdnn_dtype t,
                                dnnl_format_tag_t tag, const char *what, vdnn_error *err)
{
    /* fp16 never gets here: the op table refuses it. */
    const dnnl_data_type_t dt = t == VDNN_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32;
    return vdnn_cpu_dnnl_check(dnnl_memory_desc_init_by_tag(md, ndims, dims, dt, tag), what, err);
}

static bool md_empty(const dnnl_memory_desc_t *md) { return !md || md->ndims == 0; }

vdnn_status vdnn_cpu_dnnl_step_init(cpu_backend *be, const_dnnl_op_desc_t desc, const cpu_dnnl_step *hint,
                                    bool make_prim, const int *args, int n_args, cpu_dnnl_step *s, const char *what,
                                    vdnn_error *err)
{
    return vdnn_cpu_dnnl_step_init_ex(be, desc, hint, make_prim, false, args, n_args, s, what, err);
}

/* A sum post-op: dst = op(...) + dst. */
static vdnn_status add_sum(dnnl_primitive_attr_t attr, const char *what, vdnn_error *err)
{
    dnnl_post_ops_t po = NULL;
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_post_ops_create(&po), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_post_ops_append_sum(po, 1.0f), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_set_post_ops(attr, po), what, err);
    if (po) dnnl_post_ops_destroy(po);
    return st;
}

vdnn_status vdnn_cpu_dnnl_step_init_ex(cpu_backend *be, const_dnnl_op_desc_t desc, const cpu_dnnl_step *hint,
                                       bool make_prim, bool sum, const int *args, int n_args, cpu_dnnl_step *s,
                                       const char *what, vdnn_error *err)
{
    memset(s, 0, sizeof *s);
    if (n_args > CPU_DNNL_MAX_ARGS)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %d oneDNN arguments (at most %d)", what, n_args,
                         CPU_DNNL_MAX_ARGS);
    dnnl_primitive_attr_t attr = NULL;
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_create(&attr), what, err);
    if (st) return st;
    /* User mode: the memory planner owns the scratch bytes, so oneDNN never allocates behind its back. */
    st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), what, err);
    if (!st && sum) st = add_sum(attr, what, err);
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_primitive_desc_create(&s->pd, desc, attr, be->engine, hint ? hint->pd : NULL),
                                 what, err);
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;

    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(s->pd, dnnl_query_scratchpad_md, 0);
    s->scratch_bytes = md_empty(smd) ? 0 : dnnl_memory_desc_get_size(smd);
    if (!make_prim) return VDNN_OK;

    st = vdnn_cpu_dnnl_check(dnnl_primitive_create(&s->prim, s->pd), what, err);
    if (!st && s->scratch_bytes)
        st = vdnn_cpu_dnnl_check(dnnl_memory_create(&s->scratch, smd, be->engine, DNNL_MEMORY_NONE), what, err);
    for (int i = 0; !st && i < n_args; i++) {
        s->arg[i] = args[i];
        s->n = i + 1;
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(s->pd, dnnl_query_exec_arg_md, args[i]);
        if (md_empty(md)) continue;
        st = vdnn_cpu_dnnl_check(dnnl_memory_create(&s->mem[i], md, be->engine, DNNL_MEMORY_NONE), what, err);
    }
    if (st) vdnn_cpu_dnnl_step_fini(s);
    return st;
}

size_t vdnn_cpu_dnnl_arg_bytes(const cpu_dnnl_step *s, int arg)
{
    if (!s->pd) return 0;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(s->pd, dnnl_query_exec_arg_md, arg);
    return md_empty(md) ? 0 : dnnl_memory_desc_get_size(md);
}

vdnn_status vdnn_cpu_dnnl_step_run(cpu_backend *be, cpu_dnnl_step *s, void *const *ptrs, void *scratch,
                                   const char *what, vdnn_error *err)
{
    if (!s->prim) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: primitive was not created", what);
    dnnl_exec_arg_t ex[CPU_DNNL_MAX_ARGS + 1];
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if (!s->mem[i]) continue;
        if (!ptrs[i]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL %s buffer", what, arg_name(s->arg[i]));
        vdnn_status st = vdnn_cpu_dnnl_check(dnnl_memory_set_data_handle(s->mem[i], ptrs[i]), what, err);
        if (st) return st;
        ex[n++] = (dnnl_exec_arg_t){s->arg[i], s->mem[i]};
    }
    if (s->scratch) {
        if (!scratch)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL %s buffer (%zu bytes needed)", what,
                             arg_name(DNNL_ARG_SCRATCHPAD), s->scratch_bytes);
        vdnn_status st = vdnn_cpu_dnnl_check(dnnl_memory_set_data_handle(s->scratch, scratch), what, err);
        if (st) return st;
        ex[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, s->scratch};
    }
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_primitive_execute(s->prim, be->stream, n, ex), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_stream_wait(be->stream), what, err);
    return st;
}

void vdnn_cpu_dnnl_step_fini(cpu_dnnl_step *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->mem[i]) dnnl_memory_destroy(s->mem[i]);
    if (s->scratch) dnnl_memory_destroy(s->scratch);
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->pd) dnnl_primitive_desc_destroy(s->pd);
    memset(s, 0, sizeof *s);
}

const dnnl_memory_desc_t *vdnn_cpu_dnnl_arg_md(const cpu_dnnl_step *s, int arg)
{
    if (!s->pd) return NULL;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(s->pd, dnnl_query_exec_arg_md, arg);
    return md_empty(md) ? NULL : md;
}

vdnn_status vdnn_cpu_dnnl_reorder_init(cpu_backend *be, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                       bool make, cpu_dnnl_reorder *r, const char *what, vdnn_error *err)
{
    return vdnn_cpu_dnnl_reorder_init_ex(be, from, to, make, false, r, what, err);
}

vdnn_status vdnn_cpu_dnnl_reorder_init_ex(cpu_backend *be, const dnnl_memory_desc_t *from,
                                          const dnnl_memory_desc_t *to, bool make, bool accumulate,
                                          cpu_dnnl_reorder *r, const char *what, vdnn_error *err)
{
    memset(r, 0, sizeof *r);
    if (!from || !to || (!accumulate && dnnl_memory_desc_equal(from, to))) return VDNN_OK;
    /* The chosen layout may pad channels up to its block: room for the larger of the two. */
    size_t a = dnnl_memory_desc_get_size(from), b = dnnl_memory_desc_get_size(to);
    r->bytes = a > b ? a : b;
    r->from_bytes = a;
    r->to_bytes = b;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_create(&attr), what, err);
    if (st) return st;
    st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), what, err);
    if (!st && accumulate) {
        dnnl_post_ops_t po = NULL;
        st = vdnn_cpu_dnnl_check(dnnl_post_ops_create(&po), what, err);
        if (!st) st = vdnn_cpu_dnnl_check(dnnl_post_ops_append_sum(po, 1.0f), what, err);
        if (!st) st = vdnn_cpu_dnnl_check(dnnl_primitive_attr_set_post_ops(attr, po), what, err);
        if (po) dnnl_post_ops_destroy(po);
    }
    if (!st)
        st = vdnn_cpu_dnnl_check(dnnl_reorder_primitive_desc_create(&pd, from, be->engine, to, be->engine, attr), what,
                                 err);
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    r->scratch_bytes = md_empty(smd) ? 0 : dnnl_memory_desc_get_size(smd);
    if (make) {
        st = vdnn_cpu_dnnl_check(dnnl_primitive_create(&r->prim, pd), what, err);
        if (!st) st = vdnn_cpu_dnnl_check(dnnl_memory_create(&r->src, from, be->engine, DNNL_MEMORY_NONE), what, err);
        if (!st) st = vdnn_cpu_dnnl_check(dnnl_memory_create(&r->dst, to, be->engine, DNNL_MEMORY_NONE), what, err);
        if (!st && r->scratch_bytes)
            st = vdnn_cpu_dnnl_check(dnnl_memory_create(&r->scratch, smd, be->engine, DNNL_MEMORY_NONE), what, err);
    }
    dnnl_primitive_desc_destroy(pd);
    if (st) vdnn_cpu_dnnl_reorder_fini(r);
    return st;
}

vdnn_status vdnn_cpu_dnnl_reorder_run(cpu_backend *be, cpu_dnnl_reorder *r, const void *src, void *dst, void *scratch,
                                      const char *what, vdnn_error *err)
{
    if (!r->bytes) return VDNN_OK;
    if (!r->prim) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: reorder was not created", what);
    if (!src || !dst || (r->scratch && !scratch))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL %s buffer", what,
                         !src ? "source" : !dst ? "destination" : "scratchpad (ws)");
    dnnl_exec_arg_t ex[3] = {{DNNL_ARG_FROM, r->src}, {DNNL_ARG_TO, r->dst}, {DNNL_ARG_SCRATCHPAD, r->scratch}};
    vdnn_status st = vdnn_cpu_dnnl_check(dnnl_memory_set_data_handle(r->src, (void *)src), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_memory_set_data_handle(r->dst, dst), what, err);
    if (!st && r->scratch) st = vdnn_cpu_dnnl_check(dnnl_memory_set_data_handle(r->scratch, scratch), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_primitive_execute(r->prim, be->stream, r->scratch ? 3 : 2, ex), what, err);
    if (!st) st = vdnn_cpu_dnnl_check(dnnl_stream_wait(be->stream), what, err);
    return st;
}

void vdnn_cpu_dnnl_reorder_fini(cpu_dnnl_reorder *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->src) dnnl_memory_destroy(r->src);
    if (r->dst) dnnl_memory_destroy(r->dst);
    if (r->scratch) dnnl_memory_destroy(r->scratch);
    memset(r, 0, sizeof *r);
}
