/* The CUDA backend's description of itself for profiles: the GPU, the runtime, driver and cuDNN versions, and the
 * settings its op info depends on (TF32, determinism, benchmark mode, workspace and tensor limits): a plan made from
 * a profile on another machine is this device's plan only under these. Also the same description of a GPU that is
 * not here, for profiles written from the backend's rules alone. */
#include "backend/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* "13.0" from CUDA's 13000; "?" when the call failed. */
static void cuda_version(int v, char *buf, size_t n)
{
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    else snprintf(buf, n, "?");
}

static void size_setting(size_t v, char *buf, size_t n)
{
    if (v == SIZE_MAX) snprintf(buf, n, "unlimited");
    else snprintf(buf, n, "%zu", v);
}

/* The switches and limits op info depends on, as resolved. */
static void describe_settings(const vdnn_cuda_options *o, vdnn_device_info *out)
{
    out->tf32 = o->tf32 ? 1 : 0;
    out->deterministic = o->deterministic ? 1 : 0;
    out->benchmark = o->benchmark ? 1 : 0;
    char ws[24], find[24], values[24];
    size_setting(o->conv_ws_limit, ws, sizeof ws);
    size_setting(o->conv_find_limit, find, sizeof find);
    size_setting(o->tensor_values, values, sizeof values);
    snprintf(out->settings, sizeof out->settings, "conv_ws_limit=%s conv_find_limit=%s tensor_values=%s", ws, find,
             values);
}

void vdnn_cuda_describe(vdnn_backend_t *be, vdnn_device_info *out)
{
    const cuda_backend *b = (const cuda_backend *)be;
    snprintf(out->name, sizeof out->name, "%.127s", b->device_name);
    snprintf(out->compute, sizeof out->compute, "%d.%d", b->cc_major, b->cc_minor);
    int rt = 0, drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    (void)cudaGetLastError();
    char r[16], d[16];
    cuda_version(rt, r, sizeof r);
    cuda_version(drv, d, sizeof d);
    snprintf(out->runtime, sizeof out->runtime, "CUDA runtime %s, driver %s", r, d);
    int major = 0, minor = 0, patch = 0;
    /* By property, not cudnnGetVersion(): its encoding changed between cuDNN 8 and 9. */
    if (cudnnGetProperty(MAJOR_VERSION, &major) != CUDNN_STATUS_SUCCESS ||
        cudnnGetProperty(MINOR_VERSION, &minor) != CUDNN_STATUS_SUCCESS ||
        cudnnGetProperty(PATCH_LEVEL, &patch) != CUDNN_STATUS_SUCCESS)
        snprintf(out->library, sizeof out->library, "cuDNN %zu", cudnnGetVersion());
    else
        snprintf(out->library, sizeof out->library, "cuDNN %d.%d.%d", major, minor, patch);
    describe_settings(&b->opt, out);
}

vdnn_status vdnn_cuda_describe_offline(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const char *name,
                                       vdnn_device_info *out, vdnn_error *err)
{
    vdnn_cuda_options o;
    vdnn_status st = vdnn_cuda_resolve_options(opt, &o, err);
    if (st) return st;
    memset(out, 0, sizeof *out);
    snprintf(out->backend, sizeof out->backend, "cuda");
    snprintf(out->name, sizeof out->name, "%s", name);
    out->total_bytes = out->free_bytes = SIZE_MAX; /* not known: the file leaves them out */
    snprintf(out->compute, sizeof out->compute, "%d.%d", cc_major, cc_minor);
    /* The versions this code was built against, which the op rules are those of; no runtime or driver ran. */
    char r[16];
    cuda_version(CUDART_VERSION, r, sizeof r);
    snprintf(out->runtime, sizeof out->runtime, "CUDA %s headers (no device, no driver)", r);
    snprintf(out->library, sizeof out->library, "cuDNN %d.%d.%d headers", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    describe_settings(&o, out);
    return VDNN_OK;
}
