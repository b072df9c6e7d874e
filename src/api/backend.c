/* The public backend calls: devices opened by name ("cpu", "cuda", "cuda:N", "auto"), and what they say of
 * themselves. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

vdnn_backend_options vdnn_backend_options_default(void)
{
    return (vdnn_backend_options){.threads = 0, .tf32 = -1, .deterministic = -1};
}

static vdnn_status open_cpu(const vdnn_backend_options *o, const vdnn_memory_options *mem, vdnn_backend_t **out,
                            vdnn_error *err)
{
    vdnn_cpu_options co = {.threads = o->threads, .link_bandwidth_d2h = mem->link_bandwidth_d2h,
                           .link_bandwidth_h2d = mem->link_bandwidth_h2d};
    return vdnn_backend_cpu_create(&co, out, err);
}

static vdnn_status open_cuda(int device, const vdnn_backend_options *o, vdnn_backend_t **out, vdnn_error *err)
{
    vdnn_cuda_options co;
    vdnn_cuda_options_default(&co);
    co.device = device;
    co.threads = o->threads;
    co.tf32 = o->tf32;
    co.deterministic = o->deterministic;
    return vdnn_backend_cuda_create_ex(&co, out, err);
}

/* "cuda" -> 0, "cuda:N" -> N; -1 for anything else. */
static int cuda_device(const char *name)
{
    if (!strcmp(name, "cuda")) return 0;
    if (strncmp(name, "cuda:", 5) || !name[5]) return -1;
    char *end;
    long d = strtol(name + 5, &end, 10);
    return *end || d < 0 || d > 1024 ? -1 : (int)d;
}

vdnn_status vdnn_backend_open_ex(const char *name, const vdnn_backend_options *o, const vdnn_memory_options *mem,
                                 vdnn_backend_t **out, vdnn_error *err)
{
    if (!out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "backend_open: no place for the backend");
    *out = NULL;
    const vdnn_backend_options bo = o ? *o : vdnn_backend_options_default();
    const vdnn_memory_options mo = mem ? *mem : vdnn_memory_options_default();
    if (bo.threads < 0 || bo.threads > 4096)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "threads: %d is out of range (0, every core, to 4096)", bo.threads);
    vdnn_status rc = vdnn_memory_options_check(&mo, err);
    if (rc != VDNN_OK) return rc;
    if (!name) name = "auto";
    if (!strcmp(name, "cpu")) return open_cpu(&bo, &mo, out, err);
    const int dev = cuda_device(name);
    if (dev >= 0) return open_cuda(dev, &bo, out, err);
    if (strcmp(name, "auto"))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "backend: unknown device '%s' (cpu, cuda, cuda:N or auto)", name);
    vdnn_error cerr;
    if (open_cuda(0, &bo, out, &cerr) == VDNN_OK) return VDNN_OK;
    rc = open_cpu(&bo, &mo, out, err);
    if (rc == VDNN_OK) snprintf((*out)->fallback, sizeof (*out)->fallback, "%.250s", cerr.msg);
    return rc;
}

vdnn_status vdnn_backend_open(const char *name, int threads, vdnn_backend_t **out, vdnn_error *err)
{
    vdnn_backend_options o = vdnn_backend_options_default();
    o.threads = threads;
    return vdnn_backend_open_ex(name, &o, NULL, out, err);
}

void vdnn_backend_free(vdnn_backend_t *be)
{
    if (!be) return;
    /* A caller whose objects are collected in no set order (Python's cyclic garbage at exit) may free the
     * backend before its nets: it then closes with the last of them. */
    if (be->nets > 0) {
        be->freed = true;
        return;
    }
    vdnn_backend_destroy(be);
}
const char *vdnn_backend_name(const vdnn_backend_t *be) { return be->ops->name; }
int vdnn_backend_threads(const vdnn_backend_t *be) { return be->threads; }
const char *vdnn_backend_fallback(const vdnn_backend_t *be) { return be->fallback[0] ? be->fallback : NULL; }

void vdnn_backend_memory(vdnn_backend_t *be, size_t *free_bytes, size_t *total_bytes)
{
    const size_t f = be->ops->dev_free_bytes(be);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = be->total_bytes ? be->total_bytes : SIZE_MAX;
}

vdnn_status vdnn_backend_describe(vdnn_backend_t *be, vdnn_device_info *out, vdnn_error *err)
{
    if (!be || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "backend_describe: no backend or no place for it");
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "%s", be->ops->name);
    vdnn_backend_memory(be, &out->free_bytes, &out->total_bytes);
    out->tf32 = out->deterministic = out->benchmark = -1;
    if (be->ops->describe) be->ops->describe(be, out);
    return VDNN_OK;
}
