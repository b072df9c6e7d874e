// The map value types of the backend's kernels (float, bf16, fp16): loading as float, storing rounded to nearest
// even, and the switch from a launcher's runtime type to a kernel's template argument. Arithmetic is always float
// (or double for sums); a float instantiation does exactly what the float-only kernels did.
#ifndef VDNN_BACKEND_CUDA_TYPES_CUH
#define VDNN_BACKEND_CUDA_TYPES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"

__device__ __forceinline__ float vdnn_ld(float v) { return v; }
__device__ __forceinline__ float vdnn_ld(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float vdnn_ld(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T vdnn_st(float v);
template <> __device__ __forceinline__ float vdnn_st<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 vdnn_st<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half vdnn_st<__half>(float v) { return __float2half_rn(v); }

// Runs the statements after T with T bound to the C type of `type` (variadic, so that template arguments and
// launch configurations may hold commas); an unknown type returns cudaErrorInvalidValue from the enclosing launcher.
#define VDNN_TYPED(type, T, ...)                                                                                      \
    switch (type) {                                                                                                   \
    case VDNN_CUDA_F32: {                                                                                             \
        using T = float;                                                                                              \
        __VA_ARGS__;                                                                                                  \
    } break;                                                                                                          \
    case VDNN_CUDA_BF16: {                                                                                            \
        using T = __nv_bfloat16;                                                                                      \
        __VA_ARGS__;                                                                                                  \
    } break;                                                                                                          \
    case VDNN_CUDA_F16: {                                                                                             \
        using T = __half;                                                                                             \
        __VA_ARGS__;                                                                                                  \
    } break;                                                                                                          \
    default: return cudaErrorInvalidValue;                                                                            \
    }

#endif
