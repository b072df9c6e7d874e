/* cuDNN 9 status codes as vdnn statuses, by category, and the driver a CUDA version needs (see cuda_layout.h). */
#include "backend/cuda/cuda_layout.h"

vdnn_status vdnn_cuda_cudnn_status(int code)
{
    /* cuDNN 9 numbers a status as category * 1000 + detail (CUDNN_STATUS_CATEGORY); the codes below are its. */
    switch (code) {
    case 0: return VDNN_OK;
    case 4003: /* INTERNAL_ERROR_HOST_ALLOCATION_FAILED (the old ALLOC_FAILED) */
    case 4004: /* INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED */
        return VDNN_ERR_NO_MEMORY;
    case 3005: /* NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER */
    case 3006: /* NOT_SUPPORTED_INCOMPATIBLE_CUDART */
    case 3007: /* NOT_SUPPORTED_ARCH_MISMATCH */
        return VDNN_ERR_NO_DEVICE;
    default: break;
    }
    switch (code / 1000 * 1000) {
    case 2000: return VDNN_ERR_INVALID_ARG;  /* BAD_PARAM_* */
    case 3000: return VDNN_ERR_UNSUPPORTED;  /* NOT_SUPPORTED_* */
    default: return VDNN_ERR_BACKEND;        /* NOT_INITIALIZED..., INTERNAL_ERROR_*, EXECUTION_FAILED_* */
    }
}

const char *vdnn_cuda_min_driver(int cuda_major)
{
    switch (cuda_major) {
    case 13: return "580.65.06";
    case 12: return "525.60.13";
    case 11: return "450.80.02";
    default: return "released with this CUDA version";
    }
}
