/* The CUDA backend's op host code (cuda_ops_*.c, cuda_gemm.c, cuda_ops_table.c) on a machine without a GPU: the CUDA
 * runtime calls those ops make, cuBLAS's GEMMs (column-major, leading dimensions and types checked as cuBLAS checks
 * them) and the kernels of the sequence, LSTM, activation, loss and element-wise ops written again in C from their
 * .cu sources, over host memory. test_ops_emulated links these before the libraries (their definitions win) and
 * runs the op harness's sequence, LSTM and fc cases through the CUDA op entries in fp32, bf16 and fp16. It checks the
 * host code (which products, types, workspaces and copies each op asks for), not the kernels, cuBLAS or a device:
 * a kernel changed in its .cu source must be changed here too. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_kernels_layers.h"
#include "backend/cuda/cuda_kernels_lstm.h"
#include "backend/cuda/cuda_kernels_seq.h"
#include "backend/cuda/cuda_layout.h"
#include "core/half.h"

#include <cblas.h>
#include <cudnn.h>
#include <time.h>

#include "cuda_emulated.h"

/* A call real CUDA or cuBLAS would refuse: said on stderr; the call then fails, and so does the op. */
static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emulated CUDA: refused: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* ---- values of a map type ---- */
static float ldt(vdnn_cuda_type t, const void *p, size_t i)
{
    switch (t) {
    case VDNN_CUDA_F32: return ((const float *)p)[i];
    case VDNN_CUDA_BF16: return vdnn_bf16_to_float(((const uint16_t *)p)[i]);
    default: return vdnn_f16_to_float(((const uint16_t *)p)[i]);
    }
}
static void stt(vdnn_cuda_type t, void *p, size_t i, float v)
{
    switch (t) {
    case VDNN_CUDA_F32: ((float *)p)[i] = v; break;
    case VDNN_CUDA_BF16: ((uint16_t *)p)[i] = vdnn_bf16_from_float(v); break;
    default: ((uint16_t *)p)[i] = vdnn_f16_from_float(v); break;
    }
}

/* ---- CUDA runtime ---- */
cudaError_t cudaSetDevice(int d) { (void)d; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) { (void)e; return "emulated error"; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "emulated error"; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) { (void)s; memset(p, v, n); return cudaSuccess; }
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s)
{
    (void)s;
    if (w > pitch) bad("cudaMemset2DAsync width %zu > pitch %zu", w, pitch);
    for (size_t r = 0; r < h; r++) memset((char *)p + r * pitch, v, w);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)k, (void)st;
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k,
                              cudaStream_t st)
{
    (void)k, (void)st;
    if (w > dp || w > sp) bad("cudaMemcpy2DAsync width %zu > pitches %zu %zu", w, dp, sp);
    for (size_t r = 0; r < h; r++) memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    return cudaSuccess;
}

/* Allocations, so that cudaPointerGetAttributes can tell device, pinned and managed memory from the rest. */
typedef struct emu_alloc {
    char *p;
    size_t n;
    enum cudaMemoryType type;
} emu_alloc;
static emu_alloc *allocs;
static size_t n_allocs, cap_allocs;
static const size_t emu_device_bytes = (size_t)16 << 30;

static cudaError_t track(void **ptr, size_t n, enum cudaMemoryType type)
{
    if (!ptr) return cudaErrorInvalidValue;
    if (n_allocs == cap_allocs) {
        size_t cap = cap_allocs ? 2 * cap_allocs : 256;
        emu_alloc *a = realloc(allocs, cap * sizeof *a);
        if (!a) return cudaErrorMemoryAllocation;
        allocs = a;
        cap_allocs = cap;
    }
    *ptr = malloc(n ? n : 1);
    if (!*ptr) return cudaErrorMemoryAllocation;
    allocs[n_allocs++] = (emu_alloc){*ptr, n, type};
    return cudaSuccess;
}
static cudaError_t untrack(void *p, enum cudaMemoryType type)
{
    if (!p) return cudaSuccess;
    for (size_t i = 0; i < n_allocs; i++)
        if (allocs[i].p == p) {
            if (allocs[i].type != type) bad("freeing memory of type %d as type %d", (int)allocs[i].type, (int)type);
            free(p);
            allocs[i] = allocs[--n_allocs];
            return cudaSuccess;
        }
    bad("freeing %p, which was not allocated", p);
    return cudaErrorInvalidValue;
}

cudaError_t cudaMalloc(void **p, size_t n) { return track(p, n, cudaMemoryTypeDevice); }
cudaError_t cudaFree(void *p) { return untrack(p, cudaMemoryTypeDevice); }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; return track(p, n, cudaMemoryTypeHost); }
cudaError_t cudaFreeHost(void *p) { return untrack(p, cudaMemoryTypeHost); }
cudaError_t cudaMallocManaged(void **p, size_t n, unsigned flags)
{
    (void)flags;
    return track(p, n, cudaMemoryTypeManaged);
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    for (size_t i = 0; i < n_allocs; i++)
        if ((const char *)p >= allocs[i].p && (const char *)p < allocs[i].p + (allocs[i].n ? allocs[i].n : 1)) {
            a->type = allocs[i].type;
            a->devicePointer = a->type == cudaMemoryTypeHost ? NULL : (void *)p;
            a->hostPointer = a->type == cudaMemoryTypeDevice ? NULL : (void *)p;
        }
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    size_t used = 0;
    for (size_t i = 0; i < n_allocs; i++) used += allocs[i].type == cudaMemoryTypeDevice ? allocs[i].n : 0;
    *total = emu_device_bytes;
    *free_b = used < emu_device_bytes ? emu_device_bytes - used : 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    (void)d;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "an emulated GPU");
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = emu_device_bytes;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
    (void)a, (void)d;
    *v = 1;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *f)
{
    (void)f;
    memset(a, 0, sizeof *a);
    return cudaSuccess;
}
/* Every call runs at once: streams are empty whenever anyone waits for them. */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = (cudaStream_t)malloc(16);
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)s, (void)e, (void)flags;
    return cudaSuccess;
}
static double emu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    double *t = calloc(1, sizeof *t);
    *e = (cudaEvent_t)(void *)t;
    return t ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)s;
    *(double *)(void *)e = emu_now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(1e3 * (*(double *)(void *)b - *(double *)(void *)a));
    return cudaSuccess;
}
cudaError_t cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation l)
{
    (void)p, (void)n, (void)a, (void)l;
    return cudaSuccess;
}
cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation l, unsigned flags, cudaStream_t s)
{
    (void)p, (void)n, (void)l, (void)flags, (void)s;
    return cudaSuccess;
}

/* ---- cuDNN's and cuBLAS's handles (no cuDNN op is emulated) ---- */
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }
cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    *h = (cudnnHandle_t)malloc(16);
    return *h ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { free(h); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) { (void)h, (void)s; return CUDNN_STATUS_SUCCESS; }
cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = (cublasHandle_t)malloc(16);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { free(h); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { (void)h, (void)s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { (void)h, (void)m; return CUBLAS_STATUS_SUCCESS; }

/* ---- cuBLAS ---- */
const char *cublasGetStatusName(cublasStatus_t s) { (void)s; return "EMU"; }
const char *cublasGetStatusString(cublasStatus_t s) { (void)s; return "emulated cuBLAS error"; }

static vdnn_cuda_type of(cudaDataType t, bool *ok)
{
    *ok = true;
    if (t == CUDA_R_32F) return VDNN_CUDA_F32;
    if (t == CUDA_R_16BF) return VDNN_CUDA_BF16;
    if (t == CUDA_R_16F) return VDNN_CUDA_F16;
    *ok = false;
    return VDNN_CUDA_F32;
}

/* A column-major matrix of `cols` columns ld apart, of type t, widened into float. */
static float *widen(vdnn_cuda_type t, const void *p, long long ld, int cols)
{
    const size_t n = (size_t)ld * (size_t)(cols > 0 ? cols : 0);
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) return NULL;
    for (size_t i = 0; i < n; i++) f[i] = ldt(t, p, i);
    return f;
}

/* C = alpha op(A) op(B) + beta C per batch entry, in fp32 (cuBLAS's CUBLAS_COMPUTE_32F; OpenBLAS does the products),
 * a 16-bit C rounded once; C is not read when beta is 0, as cuBLAS. */
static cublasStatus_t gemm(const char *who, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const void *A, vdnn_cuda_type at, int lda, long long sa, const void *B,
                           vdnn_cuda_type bt, int ldb, long long sb, const float *beta, void *C, vdnn_cuda_type ct,
                           int ldc, long long sc, int count)
{
    const int need_a = ta == CUBLAS_OP_N ? m : k, need_b = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || count < 0 || lda < (need_a > 1 ? need_a : 1) || ldb < (need_b > 1 ? need_b : 1) ||
        ldc < (m > 1 ? m : 1)) {
        bad("%s: m %d n %d k %d lda %d ldb %d ldc %d (ta %d tb %d)", who, m, n, k, lda, ldb, ldc, ta, tb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!m || !n) return CUBLAS_STATUS_SUCCESS;
    const int acols = ta == CUBLAS_OP_N ? k : m, bcols = tb == CUBLAS_OP_N ? n : k;
    float *c32 = malloc((size_t)ldc * (size_t)n * sizeof *c32);
    if (!c32) return CUBLAS_STATUS_ALLOC_FAILED;
    for (int c = 0; c < count; c++) {
        const void *a = (const char *)A + (size_t)(c * sa) * (at == VDNN_CUDA_F32 ? 4 : 2);
        const void *b = (const char *)B + (size_t)(c * sb) * (bt == VDNN_CUDA_F32 ? 4 : 2);
        void *cc = (char *)C + (size_t)(c * sc) * (ct == VDNN_CUDA_F32 ? 4 : 2);
        float *a32 = widen(at, a, lda, acols), *b32 = widen(bt, b, ldb, bcols);
        if (!a32 || !b32) {
            free(a32), free(b32), free(c32);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                const size_t ci = (size_t)i + (size_t)j * ldc;
                c32[ci] = *beta != 0 ? ldt(ct, cc, ci) : 0.0f;
            }
        if (k > 0)
            cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                        tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, *alpha, a32, lda, b32, ldb, *beta, c32,
                        ldc);
        else
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) c32[(size_t)i + (size_t)j * ldc] *= *beta;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) stt(ct, cc, (size_t)i + (size_t)j * ldc, c32[(size_t)i + (size_t)j * ldc]);
        free(a32);
        free(b32);
    }
    free(c32);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    (void)h;
    return gemm("cublasSgemm", ta, tb, m, n, k, alpha, A, VDNN_CUDA_F32, lda, 0, B, VDNN_CUDA_F32, ldb, 0, beta, C,
                VDNN_CUDA_F32, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int count)
{
    (void)h;
    return gemm("cublasSgemmStridedBatched", ta, tb, m, n, k, alpha, A, VDNN_CUDA_F32, lda, sa, B, VDNN_CUDA_F32, ldb,
                sb, beta, C, VDNN_CUDA_F32, ldc, sc, count);
}

static bool ex_types(const char *who, cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t ct,
                     vdnn_cuda_type *ta, vdnn_cuda_type *tb, vdnn_cuda_type *tc)
{
    bool o1, o2, o3;
    *ta = of(a, &o1), *tb = of(b, &o2), *tc = of(c, &o3);
    if (!o1 || !o2 || !o3 || a != b || ct != CUBLAS_COMPUTE_32F || (c != CUDA_R_32F && c != a)) {
        bad("%s: types A %d B %d C %d compute %d", who, (int)a, (int)b, (int)c, (int)ct);
        return false;
    }
    return true;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo)
{
    (void)h, (void)algo;
    vdnn_cuda_type a, b, c;
    if (!ex_types("cublasGemmEx", at, bt, ct, comp, &a, &b, &c)) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm("cublasGemmEx", ta, tb, m, n, k, alpha, A, a, lda, 0, B, b, ldb, 0, beta, C, c, ldc, 0, 1);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int count,
                                          cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    (void)h, (void)algo;
    vdnn_cuda_type a, b, c;
    if (!ex_types("cublasGemmStridedBatchedEx", at, bt, ct, comp, &a, &b, &c)) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm("cublasGemmStridedBatchedEx", ta, tb, m, n, k, alpha, A, a, lda, sa, B, b, ldb, sb, beta, C, c, ldc,
                sc, count);
}

cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
                              int lda, const float *x, int incx, const float *beta, float *y, int incy)
{
    (void)h;
    if (lda < (m > 1 ? m : 1) || incx < 1 || incy < 1) {
        bad("cublasSgemv: m %d n %d lda %d", m, n, lda);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const int rows = t == CUBLAS_OP_N ? m : n, cols = t == CUBLAS_OP_N ? n : m;
    for (int i = 0; i < rows; i++) {
        double acc = 0;
        for (int j = 0; j < cols; j++) {
            const float a = t == CUBLAS_OP_N ? A[(size_t)i + (size_t)j * lda] : A[(size_t)j + (size_t)i * lda];
            acc += (double)a * x[(size_t)j * incx];
        }
        y[(size_t)i * incy] = (float)(*alpha * acc) + (*beta != 0 ? *beta * y[(size_t)i * incy] : 0);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- element-wise kernels ---- */
cudaError_t vdnn_cuda_k_fill(cudaStream_t s, float *dst, float value, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = value;
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_accumulate(cudaStream_t s, float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_scale(cudaStream_t s, float *dst, float alpha, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] *= alpha;
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_convert(cudaStream_t s, void *dst, vdnn_cuda_type dt, const void *src, vdnn_cuda_type st,
                                size_t n, int add)
{
    if (dst == src && dt != st) bad("convert in place across types");
    for (size_t i = 0; i < n; i++) stt(dt, dst, i, add ? ldt(dt, dst, i) + ldt(st, src, i) : ldt(st, src, i));
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_add(cudaStream_t s, vdnn_cuda_type t, void *y, const void *const *x, int k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float a = ldt(t, x[0], i);
        for (int j = 1; j < k; j++) a += ldt(t, x[j], i);
        stt(t, y, i, a);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_bias_add(cudaStream_t s, vdnn_cuda_type t, void *y, const float *b, int n, int c, size_t hw)
{
    const size_t total = (size_t)n * (size_t)c * hw;
    for (size_t i = 0; i < total; i++) stt(t, y, i, ldt(t, y, i) + b[(i / hw) % (size_t)c]);
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_bias_grad(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes, float *db,
                                  const void *dy, int n, int c, size_t hw)
{
    if (c <= 0) return cudaSuccess;
    if (vdnn_cuda_sum_splits(n, c, hw, 1, scratch_bytes) < 1) {
        bad("bias_grad: scratch of %zu bytes", scratch_bytes);
        return cudaErrorInvalidValue;
    }
    if (!scratch) bad("bias_grad: no scratch");
    for (int j = 0; j < c; j++) {
        double a = 0;
        for (int b = 0; b < n; b++)
            for (size_t p = 0; p < hw; p++) a += ldt(t, dy, ((size_t)b * (size_t)c + (size_t)j) * hw + p);
        db[j] = (float)a;
    }
    return cudaSuccess;
}

cudaError_t vdnn_cuda_k_probe(void) { return cudaSuccess; }
cudaError_t vdnn_cuda_k_sgd(cudaStream_t s, float *w, const float *dw, float *v, size_t n, float lr, float momentum,
                            float weight_decay)
{
    for (size_t i = 0; i < n; i++) {
        const float g = dw[i] + weight_decay * w[i];
        const float vi = momentum * v[i] + g;
        v[i] = vi;
        w[i] -= lr * vi;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_adamw(cudaStream_t s, float *w, const float *dw, float *m, float *v, size_t n, float decay,
                              float beta1, float beta2, float eps, float step_size, float bc2_sqrt)
{
    const float omb1 = 1.0f - beta1, omb2 = 1.0f - beta2;
    for (size_t i = 0; i < n; i++) {
        const float g = dw[i];
        const float wi = w[i] * decay;
        const float a = m[i] * beta1, b = g * omb1;
        const float mi = a + b;
        const float c = v[i] * beta2, e = omb2 * g, f = e * g;
        const float vi = c + f;
        const float r = sqrtf(vi), q = r / bc2_sqrt, den = q + eps;
        const float u = mi / den, t = -step_size * u;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi + t;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_nonfinite(cudaStream_t s, unsigned *flag, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) *flag = 1u;
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_sum_squares(cudaStream_t s, double *out, const float *x, size_t n)
{
    double a = 0;
    for (size_t i = 0; i < n; i++) a += (double)x[i] * (double)x[i];
    *out = a;
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_dropout(cudaStream_t s, vdnn_cuda_type t, void *out, const void *in, size_t n, uint64_t seed,
                                float p, float scale)
{
    for (size_t i = 0; i < n; i++) stt(t, out, i, vdnn_dropout_keep(seed, (uint64_t)i, p) ? ldt(t, in, i) * scale : 0.0f);
    return cudaSuccess;
}

/* ---- activations ---- */
static const float GELU_K = 0.7978845608028654f, GELU_C = 0.044715f;
static float act_f(vdnn_cuda_act k, float x, float a, float b)
{
    switch (k) {
    case VDNN_CUDA_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case VDNN_CUDA_ACT_SILU: return x / (1.0f + expf(-x));
    case VDNN_CUDA_ACT_GELU: return 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x)));
    default: bad("act %d not emulated", (int)k); return 0;
    }
}
static float act_b(vdnn_cuda_act k, float v, float g, float a, float b)
{
    switch (k) {
    case VDNN_CUDA_ACT_SIGMOID: return g * v * (1.0f - v);
    case VDNN_CUDA_ACT_SILU: {
        const float s = 1.0f / (1.0f + expf(-v));
        return g * (s * (1.0f + v * (1.0f - s)));
    }
    case VDNN_CUDA_ACT_GELU: {
        const float th = tanhf(GELU_K * (v + GELU_C * v * v * v));
        const float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        return g * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
    }
    default: bad("act %d not emulated", (int)k); return 0;
    }
}
cudaError_t vdnn_cuda_k_act_fwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *y, const void *x, size_t n,
                                float a, float b)
{
    for (size_t i = 0; i < n; i++) stt(t, y, i, act_f(act, ldt(t, x, i), a, b));
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_act_bwd(cudaStream_t s, vdnn_cuda_type t, vdnn_cuda_act act, void *dx, const void *v,
                                const void *dy, size_t n, float a, float b)
{
    for (size_t i = 0; i < n; i++) stt(t, dx, i, act_b(act, ldt(t, v, i), ldt(t, dy, i), a, b));
    return cudaSuccess;
}

/* ---- loss ---- */
static double row_lse(vdnn_cuda_type t, const void *x, size_t row, int k)
{
    float m = -INFINITY;
    for (int c = 0; c < k; c++) m = fmaxf(m, ldt(t, x, row * (size_t)k + (size_t)c));
    double acc = 0;
    for (int c = 0; c < k; c++) acc += exp((double)ldt(t, x, row * (size_t)k + (size_t)c) - (double)m);
    return (double)m + log(acc);
}
cudaError_t vdnn_cuda_k_softmax_xent_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x,
                                         const int32_t *labels, double *per_sample, int n, int k)
{
    for (int r = 0; r < n; r++) {
        const double lse = row_lse(t, x, (size_t)r, k);
        if (per_sample) {
            const int32_t lab = labels[r];
            per_sample[r] = lab >= 0 && lab < k ? lse - (double)ldt(t, x, (size_t)r * k + lab) : (double)NAN;
        }
        for (int c = 0; c < k; c++)
            stt(t, y, (size_t)r * k + c, (float)exp((double)ldt(t, x, (size_t)r * k + c) - lse));
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_mean_loss(cudaStream_t s, float *loss, const double *per, int n)
{
    double a = 0;
    for (int i = 0; i < n; i++) a += per[i];
    *loss = (float)(a / (double)n);
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_softmax_xent_bwd(cudaStream_t s, float *dx, const float *y, const int32_t *labels, int n, int k,
                                         float scale)
{
    const float inv_n = (1.0f / (float)n) * scale;
    for (size_t i = 0; i < (size_t)n * (size_t)k; i++) {
        const int row = (int)(i / (size_t)k), c = (int)(i % (size_t)k);
        const int32_t lab = labels[row];
        dx[i] = lab < 0 || lab >= k ? NAN : (y[i] - (c == lab ? 1.0f : 0.0f)) * inv_n;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_softmax_xent_bwd_logits(cudaStream_t s, vdnn_cuda_type t, void *dx, const void *x,
                                                const int32_t *labels, int n, int k, float scale)
{
    const float inv_n = (1.0f / (float)n) * scale;
    for (int r = 0; r < n; r++) {
        const double lse = row_lse(t, x, (size_t)r, k);
        const int32_t lab = labels[r];
        for (int c = 0; c < k; c++) {
            const float y = (float)exp((double)ldt(t, x, (size_t)r * k + c) - lse);
            stt(t, dx, (size_t)r * k + c, lab < 0 || lab >= k ? NAN : (y - (c == lab ? 1.0f : 0.0f)) * inv_n);
        }
    }
    return cudaSuccess;
}

/* ---- sequence kernels ---- */
static int token_id(float v, int vocab)
{
    if (!(v >= 0.0f && v < (float)vocab) || v != floorf(v)) return -1;
    return (int)v;
}
cudaError_t vdnn_cuda_k_embed_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, size_t rows,
                                  int f, int vocab)
{
    for (size_t i = 0; i < rows * (size_t)f; i++) {
        const size_t r = i / (size_t)f, j = i % (size_t)f;
        const int id = token_id(ldt(t, x, r), vocab);
        stt(t, y, i, id < 0 ? NAN : w[(size_t)id * (size_t)f + j]);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_embed_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *x, const void *dy,
                                  size_t rows, int f, int vocab)
{
    if (f <= 0 || vocab <= 0) return cudaSuccess;
    memset(dw, 0, (size_t)vocab * (size_t)f * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const int id = token_id(ldt(t, x, r), vocab);
        if (id < 0) continue;
        for (int j = 0; j < f; j++) dw[(size_t)id * (size_t)f + (size_t)j] += ldt(t, dy, r * (size_t)f + (size_t)j);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_pos_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, int n,
                                size_t tf)
{
    for (size_t i = 0; i < (size_t)n * tf; i++) stt(t, y, i, ldt(t, x, i) + w[i % tf]);
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_pos_bwd(cudaStream_t s, vdnn_cuda_type t, float *dw, const void *dy, int n, size_t tf,
                                size_t context_tf)
{
    for (size_t i = 0; i < context_tf; i++) {
        float a = 0;
        if (i < tf)
            for (int b = 0; b < n; b++) a += ldt(t, dy, (size_t)b * tf + i);
        dw[i] = a;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_ln_fwd(cudaStream_t s, vdnn_cuda_type t, void *y, const void *x, const float *w, const float *b,
                               float *mean, float *var, size_t rows, int f, float eps)
{
    for (size_t r = 0; r < rows; r++) {
        double acc = 0;
        for (int j = 0; j < f; j++) acc += ldt(t, x, r * f + j);
        const double mu = acc / f;
        acc = 0;
        for (int j = 0; j < f; j++) {
            const double d = ldt(t, x, r * f + j) - mu;
            acc += d * d;
        }
        const double va = acc / f;
        const float m = (float)mu, inv = (float)(1.0 / sqrt(va + (double)eps));
        if (mean) mean[r] = m;
        if (var) var[r] = (float)va;
        for (int j = 0; j < f; j++) stt(t, y, r * f + j, (ldt(t, x, r * f + j) - m) * inv * w[j] + b[j]);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_ln_bwd(cudaStream_t s, vdnn_cuda_type t, double *scratch, size_t scratch_bytes, void *dx,
                               float *dw, float *db, const void *x, const float *mean, const float *var, const void *dy,
                               const float *w, size_t rows, int f, float eps)
{
    for (size_t r = 0; dx && r < rows; r++) {
        const float m = mean[r], inv = (float)(1.0 / sqrt((double)var[r] + (double)eps));
        double a1 = 0, a2 = 0;
        for (int j = 0; j < f; j++) {
            const double g = (double)ldt(t, dy, r * f + j) * w[j];
            a1 += g;
            a2 += g * (double)((ldt(t, x, r * f + j) - m) * inv);
        }
        const double s1 = a1 / f, s2 = a2 / f;
        for (int j = 0; j < f; j++) {
            const double xh = (double)((ldt(t, x, r * f + j) - m) * inv);
            stt(t, dx, r * f + j, (float)((double)inv * ((double)ldt(t, dy, r * f + j) * w[j] - s1 - xh * s2)));
        }
    }
    if (!dw && !db) return cudaSuccess;
    if (scratch_bytes / (2 * sizeof(double) * (size_t)f) < 1 || !scratch) {
        bad("ln_bwd: scratch of %zu bytes for %d columns", scratch_bytes, f);
        return cudaErrorInvalidValue;
    }
    for (int j = 0; j < f; j++) {
        double aw = 0, ab = 0;
        for (size_t r = 0; r < rows; r++) {
            const float g = ldt(t, dy, r * f + j);
            const float inv = (float)(1.0 / sqrt((double)var[r] + (double)eps));
            aw += (double)g * (double)((ldt(t, x, r * f + j) - mean[r]) * inv);
            ab += g;
        }
        if (dw) dw[j] = (float)aw;
        if (db) db[j] = (float)ab;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_causal_softmax_rows(cudaStream_t s, vdnn_cuda_type t, void *p, float *sc, size_t rows, int cols,
                                            int block, int r0)
{
    if (rows > 0x7fffffffu || block < 1 || r0 < 0 || r0 + block > cols) {
        bad("causal softmax rows %zu cols %d block %d r0 %d", rows, cols, block, r0);
        return cudaErrorInvalidConfiguration;
    }
    for (size_t r = 0; r < rows; r++) {
        float *sr = sc + r * cols;
        const int live = r0 + (int)(r % block) + 1;
        float mx = -INFINITY;
        for (int j = 0; j < live; j++) mx = fmaxf(mx, sr[j]);
        double acc = 0;
        for (int j = 0; j < live; j++) {
            sr[j] = expf(sr[j] - mx);
            acc += sr[j];
        }
        const float inv = (float)(1.0 / acc);
        for (int j = 0; j < cols; j++) stt(t, p, r * cols + j, j < live ? sr[j] * inv : 0.0f);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_causal_softmax(cudaStream_t s, vdnn_cuda_type t, void *p, float *scores, size_t rows, int cols)
{
    return vdnn_cuda_k_causal_softmax_rows(s, t, p, scores, rows, cols, cols, 0);
}
cudaError_t vdnn_cuda_k_causal_softmax_bwd_rows(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p,
                                                const void *dp, size_t rows, int cols, int block, int r0)
{
    if (rows > 0x7fffffffu || block < 1 || r0 < 0 || r0 + block > cols) {
        bad("causal softmax bwd rows %zu cols %d block %d r0 %d", rows, cols, block, r0);
        return cudaErrorInvalidConfiguration;
    }
    for (size_t r = 0; r < rows; r++) {
        const int live = r0 + (int)(r % block) + 1;
        double acc = 0;
        for (int j = 0; j < live; j++) acc += (double)ldt(t, p, r * cols + j) * ldt(t, dp, r * cols + j);
        const float dot = (float)acc;
        for (int j = 0; j < cols; j++)
            stt(t, ds, r * cols + j, j < live ? ldt(t, p, r * cols + j) * (ldt(t, dp, r * cols + j) - dot) : 0.0f);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_causal_softmax_bwd(cudaStream_t s, vdnn_cuda_type t, void *ds, const void *p, const void *dp,
                                           size_t rows, int cols)
{
    return vdnn_cuda_k_causal_softmax_bwd_rows(s, t, ds, p, dp, rows, cols, cols, 0);
}

/* ---- LSTM kernels ---- */
static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }
cudaError_t vdnn_cuda_k_lstm_bias(cudaStream_t s, float *g, const float *bih, const float *bhh, size_t rows, int h4)
{
    for (size_t e = 0; e < rows * (size_t)h4; e++) {
        const int j = (int)(e % (size_t)h4);
        g[e] = bih[j] + bhh[j];
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_lstm_cell_fwd(cudaStream_t s, float *g, float *y, long long ld_y, const float *cp,
                                      long long ld_cp, float *m, int b, int h, int p)
{
    for (size_t e = 0; e < (size_t)b * (size_t)h; e++) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        float *gr = g + i * 4 * (size_t)h;
        const float gi = sigm(gr[j]), gf = sigm(gr[h + j]), gg = tanhf(gr[2 * h + j]), go = sigm(gr[3 * h + j]);
        gr[j] = gi, gr[h + j] = gf, gr[2 * h + j] = gg, gr[3 * h + j] = go;
        float *yr = y + (long long)i * ld_y;
        const float c_prev = cp ? cp[(long long)i * ld_cp + j] : 0.0f;
        const float c = gf * c_prev + gi * gg;
        yr[p + j] = c;
        const float out = go * tanhf(c);
        if (m) m[e] = out;
        else yr[j] = out;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_lstm_dh(cudaStream_t s, float *dh, const float *dy, long long ld_dy, const float *dhr, int b,
                                int p)
{
    for (size_t e = 0; e < (size_t)b * (size_t)p; e++) {
        const size_t i = e / (size_t)p, j = e % (size_t)p;
        dh[e] = dy[(long long)i * ld_dy + (long long)j] + dhr[e];
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_lstm_m(cudaStream_t s, float *m, const float *g, const float *y, long long ld_y, int b, int h,
                               int p)
{
    for (size_t e = 0; e < (size_t)b * (size_t)h; e++) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        m[e] = g[i * 4 * (size_t)h + 3 * (size_t)h + j] * tanhf(y[(long long)i * ld_y + p + j]);
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_lstm_cell_bwd(cudaStream_t s, float *dg, const float *g, const float *y, long long ld_y,
                                      const float *dy, long long ld_dy, const float *cp, long long ld_cp,
                                      const float *dm, float *dcc, int b, int h, int p)
{
    for (size_t e = 0; e < (size_t)b * (size_t)h; e++) {
        const size_t i = e / (size_t)h;
        const int j = (int)(e % (size_t)h);
        const float *gr = g + i * 4 * (size_t)h;
        float *o = dg + i * 4 * (size_t)h;
        const float gi = gr[j], gf = gr[h + j], gg = gr[2 * h + j], go = gr[3 * h + j];
        const float c = y[(long long)i * ld_y + p + j], tc = tanhf(c);
        const float dyc = dy[(long long)i * ld_dy + p + j];
        const float dme = dm[e];
        const float dc = dyc + dcc[e] + dme * go * (1.0f - tc * tc);
        const float c_prev = cp ? cp[(long long)i * ld_cp + j] : 0.0f;
        o[j] = dc * gg * gi * (1.0f - gi);
        o[h + j] = dc * c_prev * gf * (1.0f - gf);
        o[2 * h + j] = dc * gi * (1.0f - gg * gg);
        o[3 * h + j] = dme * tc * go * (1.0f - go);
        dcc[e] = dc * gf;
    }
    return cudaSuccess;
}
cudaError_t vdnn_cuda_k_rows_copy(cudaStream_t s, vdnn_cuda_type type, void *dst, long long ld_dst, long long batch_dst,
                                  int dst_w, const void *src, long long ld_src, long long batch_src, int n, int t,
                                  int cols)
{
    for (size_t e = 0; e < (size_t)n * (size_t)t * (size_t)dst_w; e++) {
        const long long j = (long long)(e % (size_t)dst_w), r = (long long)(e / (size_t)dst_w);
        const long long k = r / t, q = r % t;
        stt(type, dst, (size_t)(k * batch_dst + q * ld_dst + j),
            j < cols ? ldt(type, src, (size_t)(k * batch_src + q * ld_src + j)) : 0.0f);
    }
    return cudaSuccess;
}

/* ---- the fake backend ---- */
static vdnn_status e_alloc(vdnn_backend_t *be, size_t bytes, void **p, vdnn_error *err)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "emulated CUDA: out of memory");
}
static void e_free(vdnn_backend_t *be, void *p) { free(p); }
static vdnn_status e_copy(vdnn_backend_t *be, void *d, const void *s, size_t n, vdnn_error *err)
{
    memmove(d, s, n);
    return VDNN_OK;
}
static vdnn_status e_sync(vdnn_backend_t *be, vdnn_error *err) { return VDNN_OK; }
static vdnn_status e_poison(vdnn_backend_t *be, void *dst, size_t bytes, vdnn_error *err)
{
    memset(dst, 0xff, bytes);
    return VDNN_OK;
}
static void e_destroy(vdnn_backend_t *be)
{
    cuda_backend *b = (cuda_backend *)be;
    free(b->sum_scratch);
    free(b);
}

static const vdnn_backend_ops emu_ops = {
    .name = "cuda",
    .destroy = e_destroy,
    .dev_alloc = e_alloc,
    .dev_free = e_free,
    .upload = e_copy,
    .download = e_copy,
    .sync_all = e_sync,
    .poison = e_poison,
    .op_query = vdnn_cuda_op_query,
    .op_algos = vdnn_cuda_op_algos,
    .op_create = vdnn_cuda_op_create,
    .op_destroy = vdnn_cuda_op_destroy,
    .op_forward = vdnn_cuda_op_forward,
    .op_backward = vdnn_cuda_op_backward,
};

vdnn_status vt_cuda_emulated_create(vdnn_backend_t **out, size_t tensor_values, vdnn_error *err)
{
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "emulated CUDA: out of memory");
    b->base.ops = &emu_ops;
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 0;
    o.tensor_values = tensor_values;
    vdnn_status st = vdnn_cuda_resolve_options(&o, &b->opt, err);
    if (st) {
        free(b);
        return st;
    }
    b->device = 0;
    b->cc_major = 9;
    b->cc_minor = 0;
    snprintf(b->device_name, sizeof b->device_name, "an emulated GPU of compute capability 9.0");
    b->cublas = (cublasHandle_t)(void *)b;
    b->sum_scratch = malloc(VDNN_CUDA_SUM_SCRATCH_BYTES);
    if (!b->sum_scratch) {
        free(b);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "emulated CUDA: out of memory");
    }
    *out = &b->base;
    return VDNN_OK;
}
