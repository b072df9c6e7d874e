/* cuBLAS products over maps of an op's type, shared by fc, linear and attention: fp32 maps on SGEMM (TF32 where the
 * backend allows it), 16-bit maps on cublasGemmEx with fp32 accumulation (tensor cores), written in the maps' type
 * or in fp32 (weight gradients); and the fp32 master weights rounded into a 16-bit copy for such products. */
#include "backend/cuda/cuda_internal.h"

static const float zero = 0.0f;

static cudaDataType_t blas_type(vdnn_dtype t)
{
    return t == VDNN_DTYPE_BF16 ? CUDA_R_16BF : t == VDNN_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* fp32 operands write fp32; 16-bit ones their own type or fp32. */
static vdnn_status check_types(vdnn_dtype ab, vdnn_dtype c, const char *what, vdnn_error *err)
{
    if (ab == VDNN_DTYPE_F32 ? c == VDNN_DTYPE_F32 : (c == ab || c == VDNN_DTYPE_F32)) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: a product of %s operands into %s", what, vdnn_dtype_name(ab),
                     vdnn_dtype_name(c));
}

vdnn_status vdnn_cuda_gemm(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, float alpha, const void *A, int lda, const void *B, int ldb, void *C, vdnn_dtype ct,
                           int ldc, const char *what, vdnn_error *err)
{
    vdnn_status st = check_types(ab, ct, what, err);
    if (st) return st;
    if (ab == VDNN_DTYPE_F32)
        return vdnn_cublas_check(cublasSgemm(b->cublas, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &zero, C, ldc), err,
                                 "%s: cublasSgemm (%dx%dx%d)", what, m, n, k);
    return vdnn_cublas_check(cublasGemmEx(b->cublas, ta, tb, m, n, k, &alpha, A, blas_type(ab), lda, B, blas_type(ab),
                                          ldb, &zero, C, blas_type(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             err, "%s: cublasGemmEx (%dx%dx%d, %s, fp32 accumulation)", what, m, n, k,
                             vdnn_dtype_name(ab));
}

static vdnn_status gemm_batched(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb, int m,
                                int n, int k, float alpha, const void *A, int lda, long long sa, const void *B, int ldb,
                                long long sb, float beta, void *C, vdnn_dtype ct, int ldc, long long sc, int count,
                                const char *what, vdnn_error *err)
{
    vdnn_status st = check_types(ab, ct, what, err);
    if (st) return st;
    if (ab == VDNN_DTYPE_F32)
        return vdnn_cublas_check(cublasSgemmStridedBatched(b->cublas, ta, tb, m, n, k, &alpha, A, lda, sa, B, ldb, sb,
                                                           &beta, C, ldc, sc, count),
                                 err, "%s: cublasSgemmStridedBatched (%d of %dx%dx%d)", what, count, m, n, k);
    return vdnn_cublas_check(cublasGemmStridedBatchedEx(b->cublas, ta, tb, m, n, k, &alpha, A, blas_type(ab), lda, sa,
                                                        B, blas_type(ab), ldb, sb, &beta, C, blas_type(ct), ldc, sc,
                                                        count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             err, "%s: cublasGemmStridedBatchedEx (%d of %dx%dx%d, %s, fp32 accumulation)", what, count,
                             m, n, k, vdnn_dtype_name(ab));
}

vdnn_status vdnn_cuda_gemm_batched(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb, int m,
                                   int n, int k, float alpha, const void *A, int lda, long long sa, const void *B,
                                   int ldb, long long sb, void *C, vdnn_dtype ct, int ldc, long long sc, int count,
                                   const char *what, vdnn_error *err)
{
    return gemm_batched(b, ab, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, zero, C, ct, ldc, sc, count, what, err);
}

vdnn_status vdnn_cuda_gemm_batched_add(cuda_backend *b, vdnn_dtype ab, cublasOperation_t ta, cublasOperation_t tb,
                                       int m, int n, int k, float alpha, const void *A, int lda, long long sa,
                                       const void *B, int ldb, long long sb, void *C, vdnn_dtype ct, int ldc,
                                       long long sc, int count, const char *what, vdnn_error *err)
{
    return gemm_batched(b, ab, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, 1.0f, C, ct, ldc, sc, count, what, err);
}

size_t vdnn_cuda_weights_copy_bytes(const vdnn_op_desc *d, size_t n)
{
    return vdnn_cuda_half(d) ? vdnn_cuda_align(n * vdnn_cuda_esize(d)) : 0;
}

vdnn_status vdnn_cuda_weights_for(cuda_backend *b, const vdnn_op_desc *d, const vdnn_op_args *a, size_t n,
                                  const void **w, const char *what, vdnn_error *err)
{
    *w = a->w;
    if (!vdnn_cuda_half(d)) return VDNN_OK;
    *w = a->ws;
    if (!a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL workspace (%zu bytes needed)", what,
                         vdnn_cuda_weights_copy_bytes(d, n));
    if (!a->w) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: NULL weights", what);
    return vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], a->ws, vdnn_cuda_type_of(d), a->w,
                                               VDNN_CUDA_F32, n, 0),
                           err, "%s: weights copy kernel", what);
}
