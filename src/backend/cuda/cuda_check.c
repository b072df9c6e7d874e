/* Turning CUDA runtime, cuDNN and cuBLAS statuses into vdnn errors that name the failing call; tensor descriptors,
 * whole or in batch chunks. */
#include "backend/cuda/cuda_internal.h"

#include <stdarg.h>
#include <stdio.h>

static void format_what(char *buf, size_t len, const char *fmt, va_list ap) { vsnprintf(buf, len, fmt, ap); }

vdnn_status vdnn_cuda_check(cudaError_t e, vdnn_error *err, const char *fmt, ...)
{
    if (e == cudaSuccess) return VDNN_OK;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    format_what(what, sizeof what, fmt, ap);
    va_end(ap);
    vdnn_status s = e == cudaErrorMemoryAllocation ? VDNN_ERR_NO_MEMORY : VDNN_ERR_BACKEND;
    /* An allocation failure leaves no sticky state; clear it so later calls do not report it again. */
    if (e == cudaErrorMemoryAllocation) (void)cudaGetLastError();
    return vdnn_fail(err, s, "CUDA: %s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

vdnn_status vdnn_cudnn_check(cudnnStatus_t st, vdnn_error *err, const char *fmt, ...)
{
    if (st == CUDNN_STATUS_SUCCESS) return VDNN_OK;
    char what[512], detail[384];
    va_list ap;
    va_start(ap, fmt);
    format_what(what, sizeof what, fmt, ap);
    va_end(ap);
    /* cuDNN 9 keeps a thread-local explanation of its last failure, often naming the bad parameter. */
    detail[0] = '\0';
    cudnnGetLastErrorString(detail, sizeof detail);
    vdnn_status s = vdnn_cuda_cudnn_status((int)st);
    return vdnn_fail(err, s, "cuDNN: %s failed: %s (%d)%s%s%s", what, cudnnGetErrorString(st), (int)st,
                     s == VDNN_ERR_NO_MEMORY && (int)st != (int)CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
                         ? ": out of device memory"
                         : "",
                     detail[0] ? ": " : "", detail);
}

void vdnn_cudnn_clear_last(void)
{
    char stale[256];
    cudnnGetLastErrorString(stale, sizeof stale);
}

vdnn_status vdnn_cublas_check(cublasStatus_t st, vdnn_error *err, const char *fmt, ...)
{
    if (st == CUBLAS_STATUS_SUCCESS) return VDNN_OK;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    format_what(what, sizeof what, fmt, ap);
    va_end(ap);
    vdnn_status s = st == CUBLAS_STATUS_ALLOC_FAILED ? VDNN_ERR_NO_MEMORY : VDNN_ERR_BACKEND;
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) s = VDNN_ERR_UNSUPPORTED;
    return vdnn_fail(err, s, "cuBLAS: %s failed: %s (%s)", what, cublasGetStatusString(st), cublasGetStatusName(st));
}

vdnn_status vdnn_cuda_use(cuda_backend *b, vdnn_error *err)
{
    return vdnn_cuda_check(cudaSetDevice(b->device), err, "cudaSetDevice(%d)", b->device);
}

vdnn_status vdnn_cuda_tensor(cudnnTensorDescriptor_t *t, vdnn_shape s, vdnn_dtype type, const char *what,
                             vdnn_error *err)
{
    *t = NULL;
    vdnn_status st = vdnn_cudnn_check(cudnnCreateTensorDescriptor(t), err, "cudnnCreateTensorDescriptor (%s)", what);
    if (st) {
        *t = NULL;
        return st;
    }
    st = vdnn_cudnn_check(cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, vdnn_cudnn_type(type), s.n, s.c, s.h, s.w),
                          err, "cudnnSetTensor4dDescriptor (%s, %s %dx%dx%dx%d)", what, vdnn_dtype_name(type), s.n,
                          s.c, s.h, s.w);
    if (st) vdnn_cuda_tensor_free(t);
    return st;
}

void vdnn_cuda_tensor_free(cudnnTensorDescriptor_t *t)
{
    if (*t) cudnnDestroyTensorDescriptor(*t);
    *t = NULL;
}

vdnn_status vdnn_cuda_chunks(const cuda_backend *b, const vdnn_op_desc *d, const char *name, cuda_chunks *c,
                             vdnn_error *err)
{
    size_t image = vdnn_cuda_image_values(d->out);
    for (int i = 0; i < d->n_inputs; i++) image = vdnn_cuda_max_sz(image, vdnn_cuda_image_values(d->in[i]));
    if (!vdnn_cuda_chunk_plan(image, d->out.n, b->opt.tensor_values, &c->per, &c->count, &c->last))
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "%s: one image holds %zu values, more than cuDNN takes in a tensor (%zu)",
                         name, image, b->opt.tensor_values);
    return VDNN_OK;
}

vdnn_status vdnn_cuda_chunk_tensor(cuda_chunk_tensor *t, vdnn_shape s, vdnn_dtype type, const cuda_chunks *c,
                                   const char *what, vdnn_error *err)
{
    t->full = t->last = NULL;
    vdnn_shape f = s, l = s;
    f.n = c->per;
    l.n = c->last;
    vdnn_status st = vdnn_cuda_tensor(&t->full, f, type, what, err);
    if (!st && c->last != c->per) st = vdnn_cuda_tensor(&t->last, l, type, what, err);
    if (!st && c->last == c->per) t->last = t->full;
    if (st) vdnn_cuda_chunk_tensor_free(t);
    return st;
}

void vdnn_cuda_chunk_tensor_free(cuda_chunk_tensor *t)
{
    if (t->last != t->full) vdnn_cuda_tensor_free(&t->last);
    vdnn_cuda_tensor_free(&t->full);
    t->last = NULL;
}
