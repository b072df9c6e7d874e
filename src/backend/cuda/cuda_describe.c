/* The CUDA backend's description of itself for profiles: the GPU, the runtime, driver and cuDNN versions, and the
 * settings its op info depends on (TF32, determinism, benchmark mode, workspace and tensor limits): a plan made from
 * a profile on another machine is this device's plan only under these. */
#include "backend/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>

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
    out->tf32 = b->opt.tf32 ? 1 : 0;
    out->deterministic = b->opt.deterministic ? 1 : 0;
    out->benchmark = b->opt.benchmark ? 1 : 0;
    char ws[24], find[24], values[24];
    size_setting(b->opt.conv_ws_limit, ws, sizeof ws);
    size_setting(b->opt.conv_find_limit, find, sizeof find);
    size_setting(b->opt.tensor_values, values, sizeof values);
    snprintf(out->settings, sizeof out->settings, "conv_ws_limit=%s conv_find_limit=%s tensor_values=%s", ws, find,
             values);
}
