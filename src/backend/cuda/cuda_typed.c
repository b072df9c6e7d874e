/* The CUDA backend's helpers over maps of any type: convert between types and accumulate (own kernels, compute queue). */
#include "backend/cuda/cuda_internal.h"
#include "backend/op_check.h"

/* The checks both helpers make, then the device made current. */
static vdnn_status begin(cuda_backend *b, vdnn_dtype dt, vdnn_dtype st, void *dst, const void *src, size_t n,
                         const char *what, vdnn_error *err)
{
    vdnn_status s = vdnn_op_check_dtypes(dt, st, what, err);
    if (s || !n) return s;
    if (!dst || !src) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL pointer for %zu values", what, n);
    return vdnn_cuda_use(b, err);
}

vdnn_status vdnn_cuda_convert(vdnn_backend_t *be, void *dst, vdnn_dtype dst_type, const void *src, vdnn_dtype src_type,
                              size_t n, vdnn_error *err)
{
    cuda_backend *b = (cuda_backend *)be;
    vdnn_status st = begin(b, dst_type, src_type, dst, src, n, "convert", err);
    if (st || !n) return st;
    cudaStream_t s = b->stream[VDNN_QUEUE_COMPUTE];
    if (dst_type == src_type)
        return dst == src ? VDNN_OK
                          : vdnn_cuda_check(cudaMemcpyAsync(dst, src, n * vdnn_dtype_size(dst_type), cudaMemcpyDefault, s),
                                            err, "convert: cudaMemcpyAsync of %zu values", n);
    return vdnn_cuda_check(vdnn_cuda_k_convert(s, dst, (vdnn_cuda_type)dst_type, src, (vdnn_cuda_type)src_type, n, 0), err,
                           "convert kernel (%zu values, %s to %s)", n, vdnn_dtype_name(src_type), vdnn_dtype_name(dst_type));
}

vdnn_status vdnn_cuda_accumulate_typed(vdnn_backend_t *be, vdnn_dtype type, void *dst, const void *src, size_t n,
                                       vdnn_error *err)
{
    cuda_backend *b = (cuda_backend *)be;
    vdnn_status st = begin(b, type, type, dst, src, n, "accumulate_typed", err);
    if (st || !n) return st;
    return vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], dst, (vdnn_cuda_type)type, src,
                                               (vdnn_cuda_type)type, n, 1),
                           err, "accumulate_typed kernel (%zu %s values)", n, vdnn_dtype_name(type));
}
