/* CONV on CUDA: cuDNN's convolution forward, backward-data and backward-filter (in batch chunks where a tensor
 * would exceed cuDNN's size; the filter gradient then sums the chunks' shares) with algorithms chosen once per op
 * (heuristics, or timed with cudnnFind* in benchmark mode), TF32 and determinism as the backend is set; bias by own kernels.
 * op_algos offers up to three candidates trading speed for workspace: fastest, lean, least workspace.
 * 16-bit maps: bf16 or fp16 tensors and filter, fp32 compute (the convolution descriptor's type), tensor-core math;
 * cuDNN's filter is of the maps' type, so the fp32 master weights are rounded into a copy placed after cuDNN's
 * workspace, and the filter gradient of each chunk is computed into that room (backward-data being done with the
 * copy by then) and added to dw in fp32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_conv_select.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

typedef struct conv_pick {
    int algo;
    cudnnMathType_t math;
    size_t ws;
    bool deterministic;
    float time_ms; /* -1: chosen by heuristics */
} conv_pick;

typedef struct conv_state {
    cuda_chunks ch;             /* batch chunks under cuDNN's tensor size */
    vdnn_op_desc dc;            /* the layer at one full chunk's batch: what algorithms are chosen for */
    cuda_chunk_tensor xc, yc;   /* input and output, full and last chunk */
    cudnnTensorDescriptor_t x, y; /* xc.full, yc.full */
    cudnnFilterDescriptor_t w;
    /* One descriptor per pass: each carries the math type of its own algorithm. */
    cudnnConvolutionDescriptor_t cd[VDNN_CONV_PASS_COUNT];
    conv_pick pick[VDNN_CONV_PASS_COUNT];
    int passes; /* 1: forward only (inference op), 3: training */
} conv_state;

static const char *const fwd_names[] = {"fwd_implicit_gemm", "fwd_implicit_precomp_gemm", "fwd_gemm", "fwd_direct",
                                        "fwd_fft", "fwd_fft_tiling", "fwd_winograd", "fwd_winograd_nonfused"};
static const char *const bwd_data_names[] = {"bwd_data_algo_0", "bwd_data_algo_1", "bwd_data_fft",
                                             "bwd_data_fft_tiling", "bwd_data_winograd", "bwd_data_winograd_nonfused"};
static const char *const bwd_filter_names[] = {"bwd_filter_algo_0", "bwd_filter_algo_1", "bwd_filter_fft",
                                               "bwd_filter_algo_3", "bwd_filter_winograd",
                                               "bwd_filter_winograd_nonfused", "bwd_filter_fft_tiling"};
static const char *const pass_names[] = {"forward", "backward-data", "backward-filter"};

static const char *algo_name(vdnn_conv_pass pass, int algo)
{
    const char *const *names = pass == VDNN_CONV_FWD ? fwd_names : pass == VDNN_CONV_BWD_DATA ? bwd_data_names : bwd_filter_names;
    int count = pass == VDNN_CONV_FWD ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
                : pass == VDNN_CONV_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                             : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    return algo >= 0 && algo < count ? names[algo] : "unknown";
}

static int algo_count(vdnn_conv_pass pass)
{
    return pass == VDNN_CONV_FWD ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
           : pass == VDNN_CONV_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                        : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

/* The algorithms cuDNN documents as using atomics; excluded in deterministic mode whatever the perf entry says. */
static bool known_nondeterministic(vdnn_conv_pass pass, int algo)
{
    if (pass == VDNN_CONV_BWD_DATA) return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    if (pass == VDNN_CONV_BWD_FILTER)
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
    return false;
}

/* ---- descriptors ---- */

static vdnn_status conv_check(const vdnn_op_desc *d, vdnn_error *err)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0], out = d->out;
    if (d->n_inputs != 1) return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: %d inputs (needs exactly 1)", d->n_inputs);
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv: kernel %dx%d, stride %dx%d, pad %dx%d out of range",
                         p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
    if (p->groups < 1 || p->filters < 1 || in.c % p->groups || p->filters % p->groups)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: %d input channels and %d filters do not split into %d groups",
                         in.c, p->filters, p->groups);
    int oh = vdnn_cuda_window_out(in.h, p->kernel_h, p->stride_h, p->pad_h);
    int ow = vdnn_cuda_window_out(in.w, p->kernel_w, p->stride_w, p->pad_w);
    if (out.n != in.n || out.c != p->filters || out.h != oh || out.w != ow || oh < 1 || ow < 1)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "conv: output %dx%dx%dx%d does not match input %dx%dx%dx%d (expected %dx%dx%dx%d)",
                         out.n, out.c, out.h, out.w, in.n, in.c, in.h, in.w, in.n, p->filters, oh, ow);
    return VDNN_OK;
}

static void conv_free(conv_state *s)
{
    vdnn_cuda_chunk_tensor_free(&s->xc);
    vdnn_cuda_chunk_tensor_free(&s->yc);
    s->x = s->y = NULL;
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    s->w = NULL;
    for (int i = 0; i < VDNN_CONV_PASS_COUNT; i++) {
        if (s->cd[i]) cudnnDestroyConvolutionDescriptor(s->cd[i]);
        s->cd[i] = NULL;
    }
}

static cudnnMathType_t base_math(const cuda_backend *b, vdnn_dtype t)
{
    /* 16-bit data: tensor cores, accumulating in fp32 (what the TF32 switch is about does not arise). */
    if (t != VDNN_DTYPE_F32) return CUDNN_TENSOR_OP_MATH;
    /* FP32 data: DEFAULT lets cuDNN use TF32 tensor cores on Ampere and newer (PyTorch's allow_tf32);
     * FMA keeps it to true FP32 arithmetic. */
    return b->opt.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static vdnn_status conv_descriptors(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    const vdnn_layer_params *p = &d->p;
    vdnn_shape in = d->in[0];
    st = vdnn_cuda_chunks(b, d, "conv", &s->ch, err);
    s->dc = *d;
    s->dc.in[0].n = s->dc.out.n = s->ch.per;
    if (!st) st = vdnn_cuda_chunk_tensor(&s->xc, in, d->dtype, &s->ch, "conv input", err);
    if (!st) st = vdnn_cuda_chunk_tensor(&s->yc, d->out, d->dtype, &s->ch, "conv output", err);
    s->x = s->xc.full;
    s->y = s->yc.full;
    if (!st) st = VDNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&s->w), err, "conv: cudnnCreateFilterDescriptor");
    /* PyTorch's (filters, C/groups, kh, kw) layout is cuDNN's NCHW filter (K, C/groups, R, S). */
    if (!st)
        st = VDNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(s->w, vdnn_cudnn_type(d->dtype), CUDNN_TENSOR_NCHW, p->filters,
                                                         in.c / p->groups, p->kernel_h, p->kernel_w),
                              err, "conv: cudnnSetFilter4dDescriptor (%dx%dx%dx%d)", p->filters, in.c / p->groups,
                              p->kernel_h, p->kernel_w);
    for (int i = 0; !st && i < VDNN_CONV_PASS_COUNT; i++) {
        st = VDNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&s->cd[i]), err, "conv: cudnnCreateConvolutionDescriptor");
        if (!st)
            st = VDNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(s->cd[i], p->pad_h, p->pad_w, p->stride_h, p->stride_w,
                                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                  err, "conv: cudnnSetConvolution2dDescriptor (pad %dx%d, stride %dx%d)", p->pad_h,
                                  p->pad_w, p->stride_h, p->stride_w);
        if (!st)
            st = VDNN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(s->cd[i], p->groups), err,
                                  "conv: cudnnSetConvolutionGroupCount(%d)", p->groups);
        if (!st)
            st = VDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(s->cd[i], base_math(b, d->dtype)), err,
                                  "conv: cudnnSetConvolutionMathType");
    }
    if (st) return st;
    int n, c, h, w;
    st = VDNN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(s->cd[0], s->x, s->w, &n, &c, &h, &w), err,
                          "conv: cudnnGetConvolution2dForwardOutputDim");
    if (!st && (n != s->ch.per || c != d->out.c || h != d->out.h || w != d->out.w))
        st = vdnn_fail(err, VDNN_ERR_SHAPE, "conv: cuDNN computes output %dx%dx%dx%d, the layer says %dx%dx%dx%d", n, c, h,
                       w, s->ch.per, d->out.c, d->out.h, d->out.w);
    return st;
}

/* ---- candidates ---- */

static vdnn_conv_math math_of(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_TENSOR_OP_MATH: return VDNN_MATH_TENSOR_OP;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return VDNN_MATH_CONVERSION;
    case CUDNN_FMA_MATH: return VDNN_MATH_FMA;
    default: return VDNN_MATH_DEFAULT;
    }
}

static cudnnMathType_t cudnn_math(vdnn_conv_math m)
{
    switch (m) {
    case VDNN_MATH_TENSOR_OP: return CUDNN_TENSOR_OP_MATH;
    case VDNN_MATH_CONVERSION: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    case VDNN_MATH_FMA: return CUDNN_FMA_MATH;
    default: return CUDNN_DEFAULT_MATH;
    }
}

#define COPY_PERF(dst, src, pass)                                                                            \
    do {                                                                                                     \
        (dst).algo = (int)(src).algo;                                                                        \
        (dst).ok = (src).status == CUDNN_STATUS_SUCCESS;                                                     \
        (dst).time_ms = (src).time;                                                                          \
        (dst).ws = (src).memory;                                                                             \
        (dst).deterministic = (src).determinism == CUDNN_DETERMINISTIC && !known_nondeterministic(pass, (int)(src).algo); \
        (dst).math = math_of((src).mathType);                                                                \
    } while (0)

/* Tensor-core math is what 16-bit data is for, whatever the TF32 switch (which is about fp32 data) says. Every
 * variant prefers reproducible algorithms (cuda_conv_select.h). */
static vdnn_conv_rules rules_of(const cuda_backend *b, vdnn_dtype t)
{
    return (vdnn_conv_rules){.tf32 = b->opt.tf32 != 0 || t != VDNN_DTYPE_F32, .deterministic = b->opt.deterministic != 0,
                             .prefer_reproducible = true, .ws_limit = b->opt.conv_ws_limit};
}

/* cuDNN's heuristic ranking of one pass (no device work). Times are -1. */
static vdnn_status heuristic_list(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, vdnn_conv_cand *out, int *n,
                                  vdnn_error *err)
{
    cudnnHandle_t h = b->cudnn;
    cudnnConvolutionDescriptor_t cd = s->cd[pass];
    int got = 0;
    vdnn_status st = VDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, base_math(b, s->dc.dtype)), err,
                                      "conv: cudnnSetConvolutionMathType");
    if (st) return st;
    if (pass == VDNN_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, s->x, s->w, cd, s->y, VDNN_CONV_CANDS, &got, perf),
                              err, "conv: cudnnGetConvolutionForwardAlgorithm_v7");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    } else if (pass == VDNN_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(
            cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->w, s->y, cd, s->x, VDNN_CONV_CANDS, &got, perf), err,
            "conv: cudnnGetConvolutionBackwardDataAlgorithm_v7");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(
            cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->x, s->y, cd, s->w, VDNN_CONV_CANDS, &got, perf), err,
            "conv: cudnnGetConvolutionBackwardFilterAlgorithm_v7");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    }
    *n = st ? 0 : (got < VDNN_CONV_CANDS ? got : VDNN_CONV_CANDS);
    for (int i = 0; i < *n; i++) out[i].time_ms = -1.0f;
    return st;
}

/* The scratch cudnnFind*Ex runs on: the pass's two operands, its output and a workspace. */
typedef struct find_scratch {
    void *in0, *in1, *out, *ws;
    size_t ws_bytes;
} find_scratch;

static void scratch_free(find_scratch *f)
{
    void *p[4] = {f->in0, f->in1, f->out, f->ws};
    for (int i = 0; i < 4; i++)
        if (p[i] && cudaFree(p[i]) != cudaSuccess) (void)cudaGetLastError();
    memset(f, 0, sizeof *f);
}

/* Room for the operands (filled with a small non-zero pattern: zeros can run faster than real data) and the
 * largest workspace that leaves half of what is free: false if the device has no room for them now. */
static bool scratch_alloc(const cuda_backend *b, size_t in0, size_t in1, size_t out, find_scratch *f)
{
    memset(f, 0, sizeof *f);
    size_t want[3] = {in0, in1, out};
    void **slot[3] = {&f->in0, &f->in1, &f->out};
    for (int i = 0; i < 3; i++) {
        if (cudaMalloc(slot[i], want[i] ? want[i] : 256) != cudaSuccess ||
            cudaMemsetAsync(*slot[i], 0x3c, want[i], b->stream[VDNN_QUEUE_COMPUTE]) != cudaSuccess) {
            (void)cudaGetLastError();
            scratch_free(f);
            return false;
        }
    }
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    size_t ws = free_b / 2;
    if (ws > ((size_t)8 << 30)) ws = (size_t)8 << 30;
    if (ws > b->opt.conv_ws_limit) ws = b->opt.conv_ws_limit;
    while (ws >= ((size_t)1 << 20) && cudaMalloc(&f->ws, ws) != cudaSuccess) {
        (void)cudaGetLastError();
        f->ws = NULL;
        ws /= 2;
    }
    f->ws_bytes = f->ws ? ws : 0;
    return true;
}

/* Runs every algorithm of the pass once on scratch memory (cudnnFind*Ex), fastest first. *ran is false (and no
 * error) when the operands exceed the measuring limit (large batches: measuring would take long) or do not fit on
 * the device now. */
static vdnn_status find_list(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, vdnn_conv_pass pass,
                             vdnn_conv_cand *out, int *n, bool *ran, vdnn_error *err)
{
    *ran = false;
    *n = 0;
    const size_t es = vdnn_cuda_esize(d);
    const size_t xb = vdnn_shape_count(d->in[0]) * es, yb = vdnn_shape_count(d->out) * es;
    const size_t wb = es * (size_t)d->p.filters * (size_t)(d->in[0].c / d->p.groups) * (size_t)d->p.kernel_h *
                      (size_t)d->p.kernel_w;
    if (xb + yb + wb > b->opt.conv_find_limit) return VDNN_OK;
    find_scratch f;
    /* fwd: x, w -> y; bwd data: w, dy -> dx; bwd filter: x, dy -> dw. */
    bool fits = pass == VDNN_CONV_FWD       ? scratch_alloc(b, xb, wb, yb, &f)
                : pass == VDNN_CONV_BWD_DATA ? scratch_alloc(b, wb, yb, xb, &f)
                                             : scratch_alloc(b, xb, yb, wb, &f);
    if (!fits) return VDNN_OK;
    cudnnHandle_t h = b->cudnn;
    cudnnConvolutionDescriptor_t cd = s->cd[pass];
    int got = 0;
    vdnn_status st = VDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, base_math(b, d->dtype)), err,
                                      "conv: cudnnSetConvolutionMathType");
    if (!st && pass == VDNN_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, s->x, f.in0, s->w, f.in1, cd, s->y, f.out,
                                                                     VDNN_CONV_CANDS, &got, perf, f.ws, f.ws_bytes),
                              err, "conv: cudnnFindConvolutionForwardAlgorithmEx");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    } else if (!st && pass == VDNN_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, s->w, f.in0, s->y, f.in1, cd, s->x, f.out,
                                                                          VDNN_CONV_CANDS, &got, perf, f.ws, f.ws_bytes),
                              err, "conv: cudnnFindConvolutionBackwardDataAlgorithmEx");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    } else if (!st) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[VDNN_CONV_CANDS];
        st = VDNN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, s->x, f.in0, s->y, f.in1, cd, s->w, f.out,
                                                                            VDNN_CONV_CANDS, &got, perf, f.ws, f.ws_bytes),
                              err, "conv: cudnnFindConvolutionBackwardFilterAlgorithmEx");
        for (int i = 0; !st && i < got && i < VDNN_CONV_CANDS; i++) COPY_PERF(out[i], perf[i], pass);
    }
    if (!st) st = vdnn_cuda_check(cudaStreamSynchronize(b->stream[VDNN_QUEUE_COMPUTE]), err, "conv: after cudnnFind*Ex");
    scratch_free(&f);
    if (st) return st;
    *n = got < VDNN_CONV_CANDS ? got : VDNN_CONV_CANDS;
    *ran = true;
    return VDNN_OK;
}

static void conv_key(const vdnn_op_desc *d, vdnn_conv_pass pass, char *buf, size_t len)
{
    const vdnn_layer_params *p = &d->p;
    vdnn_shape x = d->in[0];
    /* fp32 keys keep the form they had before maps had types, so existing caches stay valid. */
    snprintf(buf, len, "%s x%dx%dx%dx%d k%dx%dx%dx%d pad%dx%d stride%dx%d groups%d%s%s", pass_names[pass], x.n, x.c, x.h,
             x.w, p->filters, x.c / p->groups, p->kernel_h, p->kernel_w, p->pad_h, p->pad_w, p->stride_h, p->stride_w,
             p->groups, vdnn_cuda_half(d) ? " " : "", vdnn_cuda_half(d) ? vdnn_dtype_name(d->dtype) : "");
}

static vdnn_conv_cache *conv_cache(cuda_backend *b)
{
    if (!b->conv_cache) {
        char dir[1024];
        vdnn_conv_cache_dir(dir, sizeof dir);
        b->conv_cache = vdnn_conv_cache_open(dir, b->cache_scope);
    }
    return b->conv_cache;
}

/* The candidates of one pass that ran on this device, fastest first: from the cache, else measured now (and
 * cached). *measured is false when the scratch did not fit: the list is then cuDNN's heuristic one, unverified. */
static vdnn_status measured_list(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, vdnn_conv_pass pass,
                                 vdnn_conv_cand *out, int *n, bool *measured, vdnn_error *err)
{
    char key[256];
    conv_key(d, pass, key, sizeof key);
    vdnn_conv_cache *c = conv_cache(b);
    *measured = true;
    if (vdnn_conv_cache_get(c, key, out, n)) return VDNN_OK;
    vdnn_status st = find_list(b, d, s, pass, out, n, measured, err);
    if (st) return st;
    if (*measured) {
        vdnn_conv_cache_put(c, key, out, *n);
        return VDNN_OK;
    }
    return heuristic_list(b, s, pass, out, n, err);
}

/* The pass's candidates in the order variants pick from. Benchmark mode: by measured time. Otherwise cuDNN's
 * heuristic ranking, keeping only the algorithms that ran (each with its measured figures), so a run's choice
 * does not depend on timing noise. */
static vdnn_status pass_candidates(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, vdnn_conv_pass pass,
                                   vdnn_conv_cand *out, int *n, vdnn_error *err)
{
    vdnn_conv_cand ran[VDNN_CONV_CANDS], ranked[VDNN_CONV_CANDS];
    int n_ran = 0, n_ranked = 0;
    bool measured;
    vdnn_status st = measured_list(b, d, s, pass, ran, &n_ran, &measured, err);
    if (st) return st;
    if (b->opt.benchmark || !measured) {
        memcpy(out, ran, sizeof ran[0] * (size_t)n_ran);
        *n = n_ran;
        return VDNN_OK;
    }
    st = heuristic_list(b, s, pass, ranked, &n_ranked, err);
    if (st) return st;
    *n = 0;
    for (int i = 0; i < n_ranked; i++) {
        bool dup = false;
        for (int k = 0; k < *n; k++) dup |= out[k].algo == ranked[i].algo;
        if (dup) continue;
        for (int j = 0; j < n_ran; j++)
            if (ran[j].ok && ran[j].algo == ranked[i].algo) {
                out[(*n)++] = ran[j];
                break;
            }
    }
    return VDNN_OK;
}

/* The candidates op_algos lists, in this order, duplicates dropped. Deterministic mode offers the first alone:
 * another algorithm would give other (if also reproducible) numbers, and a planner that mixed them would make
 * a run's result depend on the budget. */

/* A quarter of the layer's largest feature map, at least 64 KiB: scratch that small next to the maps a plan
 * already holds around the layer rarely decides whether the plan fits, and it leaves the fast GEMM-based
 * algorithms in. */
static size_t lean_cap(const vdnn_op_desc *d)
{
    const size_t es = vdnn_cuda_esize(d);
    size_t cap = vdnn_cuda_max_sz(vdnn_shape_count(d->in[0]) * es, vdnn_shape_count(d->out) * es) / 4;
    return vdnn_cuda_max_sz(cap, (size_t)64 << 10);
}

typedef struct conv_cands {
    int n;
    vdnn_conv_variant variant[VDNN_MAX_ALGOS];
    conv_pick pick[VDNN_MAX_ALGOS][VDNN_CONV_PASS_COUNT];
} conv_cands;

static bool same_picks(const conv_pick *a, const conv_pick *b, int passes)
{
    for (int i = 0; i < passes; i++)
        if (a[i].algo != b[i].algo || a[i].math != b[i].math) return false;
    return true;
}

static cudnnStatus_t workspace_size(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, int algo,
                                    cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, size_t *ws)
{
    cudnnConvolutionDescriptor_t cd = s->cd[pass];
    if (pass == VDNN_CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(b->cudnn, x, s->w, cd, y, (cudnnConvolutionFwdAlgo_t)algo, ws);
    if (pass == VDNN_CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(b->cudnn, s->w, y, cd, x, (cudnnConvolutionBwdDataAlgo_t)algo,
                                                            ws);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(b->cudnn, x, y, cd, s->w, (cudnnConvolutionBwdFilterAlgo_t)algo,
                                                          ws);
}

/* A batch run in chunks whose last one is smaller runs the chosen algorithm on that shape too: the workspace is the
 * larger of the two. */
static vdnn_status last_chunk_ws(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, conv_pick *p, vdnn_error *err)
{
    if (s->xc.last == s->xc.full) return VDNN_OK;
    size_t ws = 0;
    vdnn_status st = VDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(s->cd[pass], p->math), err,
                                      "conv: cudnnSetConvolutionMathType");
    if (!st)
        st = VDNN_CUDNN_CHECK(workspace_size(b, s, pass, p->algo, s->xc.last, s->yc.last, &ws), err,
                              "conv: %s workspace of %s for the last batch chunk (%d images)", pass_names[pass],
                              algo_name(pass, p->algo), s->ch.last);
    if (!st && ws > p->ws) p->ws = ws;
    return st;
}

/* The op's candidates under the backend's settings (TF32, determinism, workspace limit), from algorithms that ran
 * on this device (see pass_candidates). */
static vdnn_status conv_candidates(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, conv_cands *out,
                                   vdnn_error *err)
{
    const int passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    const int nvar = b->opt.deterministic ? 1 : VDNN_CONV_VARIANTS;
    const vdnn_conv_rules r = rules_of(b, d->dtype);
    conv_pick all[VDNN_CONV_VARIANTS][VDNN_CONV_PASS_COUNT];
    memset(all, 0, sizeof all);
    for (int pass = 0; pass < passes; pass++) {
        vdnn_conv_cand c[VDNN_CONV_CANDS];
        int n = 0;
        vdnn_status st = pass_candidates(b, d, s, (vdnn_conv_pass)pass, c, &n, err);
        if (st) return st;
        for (int v = 0; v < nvar; v++) {
            int i = vdnn_conv_pick(c, n, &r, (vdnn_conv_variant)v, lean_cap(d));
            vdnn_conv_math m = VDNN_MATH_FMA;
            if (i < 0 || !vdnn_conv_usable(&c[i], &r, &m))
                return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                                 "conv: cuDNN has no %s algorithm that ran for this layer under the settings (tf32 %s, "
                                 "deterministic %s, workspace limit %zu bytes)",
                                 pass_names[pass], b->opt.tf32 ? "on" : "off", b->opt.deterministic ? "on" : "off",
                                 b->opt.conv_ws_limit);
            all[v][pass] = (conv_pick){c[i].algo, cudnn_math(m), c[i].ws, c[i].deterministic, c[i].time_ms};
            st = last_chunk_ws(b, s, (vdnn_conv_pass)pass, &all[v][pass], err);
            if (st) return st;
        }
    }
    out->n = 0;
    for (int v = 0; v < nvar; v++) {
        bool dup = false;
        for (int k = 0; k < out->n; k++) dup |= same_picks(out->pick[k], all[v], passes);
        if (dup) continue;
        out->variant[out->n] = (vdnn_conv_variant)v;
        memcpy(out->pick[out->n], all[v], sizeof all[v]);
        out->n++;
    }
    return VDNN_OK;
}

/* Descriptors and the algorithms of candidate d->algo. */
static vdnn_status conv_build(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, vdnn_error *err)
{
    conv_cands c;
    vdnn_status st = conv_descriptors(b, d, s, err);
    s->passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    if (!st) st = conv_candidates(b, &s->dc, s, &c, err);
    if (!st && (d->algo < 0 || d->algo >= c.n))
        st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv: algorithm %d asked of a layer with %d (0..%d)", d->algo, c.n,
                       c.n - 1);
    for (int pass = 0; !st && pass < s->passes; pass++) {
        s->pick[pass] = c.pick[d->algo][pass];
        st = VDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(s->cd[pass], s->pick[pass].math), err,
                              "conv: cudnnSetConvolutionMathType");
    }
    return st;
}

/* ---- op ---- */

static size_t filter_values(const vdnn_op_desc *d)
{
    const vdnn_layer_params *p = &d->p;
    return (size_t)p->filters * (size_t)(d->in[0].c / p->groups) * (size_t)p->kernel_h * (size_t)p->kernel_w;
}

/* The 16-bit filter copy (and later its gradient) after cuDNN's workspace of `ws` bytes: where it starts, and the
 * workspace then needed (fp32 maps: no copy, cuDNN's alone). */
static size_t copy_at(size_t ws) { return vdnn_cuda_align(ws); }
static size_t with_copy(const vdnn_op_desc *d, size_t ws)
{
    return vdnn_cuda_half(d) ? copy_at(ws) + vdnn_cuda_align(filter_values(d) * vdnn_cuda_esize(d)) : ws;
}

static size_t bwd_cudnn_ws(const conv_pick *pick)
{
    return vdnn_cuda_max_sz(pick[VDNN_CONV_BWD_DATA].ws, pick[VDNN_CONV_BWD_FILTER].ws);
}

static vdnn_op_info info_of(const vdnn_op_desc *d, const conv_pick *pick)
{
    return (vdnn_op_info){
        .fwd_ws_bytes = with_copy(d, pick[VDNN_CONV_FWD].ws),
        .bwd_ws_bytes = d->training ? with_copy(d, bwd_cudnn_ws(pick)) : 0,
        .bwd_needs_x = true, /* for the filter gradient */
    };
}

static vdnn_status conv_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    conv_state s = {0};
    vdnn_status st = conv_build(b, d, &s, err);
    if (!st) *info = info_of(d, s.pick);
    conv_free(&s);
    return st;
}

/* Equal for candidates running the same algorithm and math type in every pass; -1 where a pass is not
 * reproducible (a non-deterministic algorithm, or benchmark mode, whose choice is timed at op_create). */
static int numerics_of(const cuda_backend *b, const conv_pick *pick, int passes)
{
    if (b->opt.benchmark) return -1;
    int code = 0;
    for (int i = passes - 1; i >= 0; i--) {
        if (!pick[i].deterministic) return -1;
        /* cuDNN numbers its algorithms below 16 and its math types below 4. */
        code = code * 64 + (pick[i].algo & 15) * 4 + ((int)pick[i].math & 3);
    }
    return code;
}

static bool is_transform(vdnn_conv_pass pass, int algo)
{
    const char *n = algo_name(pass, algo);
    return strstr(n, "fft") || strstr(n, "winograd");
}

static void describe_pick(const conv_pick *pick, int passes, vdnn_op_algo *out)
{
    size_t at = 0;
    out->detail[0] = '\0';
    for (int pass = 0; pass < passes; pass++) {
        out->transform = out->transform || is_transform((vdnn_conv_pass)pass, pick[pass].algo);
        int w = snprintf(out->detail + at, sizeof out->detail - at, "%s%s%s", pass ? " " : "",
                         algo_name((vdnn_conv_pass)pass, pick[pass].algo), pick[pass].math == CUDNN_FMA_MATH ? "" : "+tc");
        if (w < 0 || (size_t)w >= sizeof out->detail - at) break;
        at += (size_t)w;
    }
}

static vdnn_status conv_algos(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err)
{
    static const char *const names[VDNN_CONV_VARIANTS] = {"fastest", "lean", "least-workspace"};
    conv_state s = {0};
    conv_cands c;
    vdnn_status st = conv_descriptors(b, d, &s, err);
    if (!st) st = conv_candidates(b, &s.dc, &s, &c, err);
    conv_free(&s);
    if (st) return st;
    const int passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    for (int i = 0; i < c.n; i++) {
        size_t ws = 0;
        for (int pass = 0; pass < passes; pass++) ws += c.pick[i][pass].ws;
        memset(&algos[i], 0, sizeof algos[i]);
        /* Named by what it is: a lean candidate that fell back to no workspace at all is "no-workspace". */
        snprintf(algos[i].name, sizeof algos[i].name, "%s",
                 c.variant[i] != VDNN_CONV_FASTEST && ws == 0 ? "no-workspace" : names[c.variant[i]]);
        algos[i].info = info_of(d, c.pick[i]);
        algos[i].numerics = numerics_of(b, c.pick[i], passes);
        describe_pick(c.pick[i], passes, &algos[i]);
    }
    *n = c.n;
    return VDNN_OK;
}

/* A convolution described without a device (vdnn_cuda_describe_op): the candidate made of the algorithms cuDNN
 * documents as needing no workspace (implicit-GEMM forward, backward-data and backward-filter algorithm 0), the
 * "least-workspace" variant op_algos lists on a device where they run. Its workspace is that documented zero (plus
 * the 16-bit filter copy, which is ours), not a cuDNN query: the faster candidates with workspace, and whether these
 * run at all on a given device, only cuDNN on the device says. Both backward algorithms use atomics, so
 * deterministic mode, which would refuse them, is refused here too rather than guessed. (On a device, the
 * variants prefer reproducible algorithms, whose workspace only cuDNN sizes: these stay an estimate.) */
vdnn_status vdnn_cuda_conv_describe(const cuda_backend *b, const vdnn_op_desc *d, vdnn_op_algo *out, vdnn_error *err)
{
    vdnn_status st = conv_check(d, err);
    if (st) return st;
    if (b->opt.deterministic)
        return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                         "conv: deterministic mode's algorithms need workspace only cuDNN on the device can size: "
                         "describe without it, or profile on the device");
    cuda_chunks ch;
    st = vdnn_cuda_chunks(b, d, "conv", &ch, err);
    if (st) return st;
    const cudnnMathType_t m = base_math(b, d->dtype);
    const conv_pick pick[VDNN_CONV_PASS_COUNT] = {
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, m, 0, true, -1.0f},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, m, 0, false, -1.0f},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, m, 0, false, -1.0f},
    };
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "no-workspace");
    out->info = info_of(d, pick);
    out->numerics = numerics_of(b, pick, d->training ? VDNN_CONV_PASS_COUNT : 1);
    return VDNN_OK;
}

static vdnn_status conv_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "conv: out of memory");
    vdnn_status st = conv_build(b, &op->d, s, err);
    if (st) {
        conv_free(s);
        free(s);
        return st;
    }
    op->state = s;
    return VDNN_OK;
}

static void conv_destroy(cuda_backend *b, vdnn_op *op)
{
    if (!op->state) return;
    conv_free(op->state);
    free(op->state);
    op->state = NULL;
}

static vdnn_status need_ws(const conv_pick *p, const vdnn_op_args *a, vdnn_conv_pass pass, vdnn_error *err)
{
    if (p->ws && !a->ws)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv %s: NULL workspace (%s needs %zu bytes)", pass_names[pass],
                         algo_name(pass, p->algo), p->ws);
    return VDNN_OK;
}

/* Values from one chunk's start to the next's in a tensor of shape t. */
static size_t chunk_step(const conv_state *s, vdnn_shape t) { return (size_t)s->ch.per * vdnn_cuda_image_values(t); }

/* The filter cuDNN reads: the fp32 weights themselves, or (16-bit maps) their copy rounded into the workspace at
 * `at`. */
static vdnn_status filter_in(cuda_backend *b, const vdnn_op_desc *d, const vdnn_op_args *a, size_t at,
                             const void **w, const char *what, vdnn_error *err)
{
    *w = a->w;
    if (!vdnn_cuda_half(d)) return VDNN_OK;
    if (!a->ws) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv %s: NULL workspace (the filter copy needs it)", what);
    void *copy = (char *)a->ws + at;
    *w = copy;
    return vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], copy, vdnn_cuda_type_of(d), a->w,
                                               VDNN_CUDA_F32, filter_values(d), 0),
                           err, "conv %s: filter copy kernel", what);
}

static vdnn_status conv_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    const conv_pick *p = &s->pick[VDNN_CONV_FWD];
    if (!a->x[0] || !a->w || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL %s", !a->x[0] ? "input" : !a->w ? "weights" : "output");
    if (d->p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL bias");
    vdnn_status st = need_ws(p, a, VDNN_CONV_FWD, err);
    const void *w = NULL;
    if (!st) st = filter_in(b, d, a, copy_at(p->ws), &w, "forward", err);
    if (st) return st;
    const float one = 1.0f, zero = 0.0f;
    const size_t xs = chunk_step(s, d->in[0]), ys = chunk_step(s, d->out);
    for (int i = 0; !st && i < s->ch.count; i++)
        st = VDNN_CUDNN_CHECK(cudnnConvolutionForward(b->cudnn, &one, vdnn_cuda_chunk_desc(&s->xc, &s->ch, i),
                                                      vdnn_cuda_at(d, a->x[0], i * xs), s->w, w, s->cd[VDNN_CONV_FWD],
                                                      (cudnnConvolutionFwdAlgo_t)p->algo, a->ws, p->ws, &zero,
                                                      vdnn_cuda_chunk_desc(&s->yc, &s->ch, i),
                                                      vdnn_cuda_at(d, a->y, i * ys)),
                              err, "cudnnConvolutionForward (%s, chunk %d of %d)", algo_name(VDNN_CONV_FWD, p->algo),
                              i + 1, s->ch.count);
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_add(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(d), a->y, a->b,
                                                  d->out.n, d->out.c, (size_t)d->out.h * (size_t)d->out.w),
                             err, "conv forward: bias kernel");
    return st;
}

static vdnn_status conv_backward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    if (s->passes < VDNN_CONV_PASS_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: op was created for inference (training = false)");
    if (!a->dw) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights gradient");
    if (d->p.bias && !a->db) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL bias gradient");
    if (!a->x[0] || !a->dy)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL %s", !a->x[0] ? "input" : "dy");
    const float one = 1.0f, zero = 0.0f;
    const size_t xs = chunk_step(s, d->in[0]), ys = chunk_step(s, d->out);
    /* 16-bit maps: the filter copy, then the filter gradient's, after the larger of the two passes' workspaces. */
    const size_t at = copy_at(bwd_cudnn_ws(s->pick));
    const bool half = vdnn_cuda_half(d);
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        const conv_pick *p = &s->pick[VDNN_CONV_BWD_DATA];
        if (!a->w) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights");
        st = need_ws(p, a, VDNN_CONV_BWD_DATA, err);
        const void *w = NULL;
        if (!st) st = filter_in(b, d, a, at, &w, "backward-data", err);
        for (int i = 0; !st && i < s->ch.count; i++)
            st = VDNN_CUDNN_CHECK(cudnnConvolutionBackwardData(b->cudnn, &one, s->w, w,
                                                               vdnn_cuda_chunk_desc(&s->yc, &s->ch, i),
                                                               vdnn_cuda_at(d, a->dy, i * ys), s->cd[VDNN_CONV_BWD_DATA],
                                                               (cudnnConvolutionBwdDataAlgo_t)p->algo, a->ws, p->ws,
                                                               &zero, vdnn_cuda_chunk_desc(&s->xc, &s->ch, i),
                                                               vdnn_cuda_at(d, a->dx[0], i * xs)),
                                  err, "cudnnConvolutionBackwardData (%s, chunk %d of %d)",
                                  algo_name(VDNN_CONV_BWD_DATA, p->algo), i + 1, s->ch.count);
    }
    if (!st) {
        const conv_pick *p = &s->pick[VDNN_CONV_BWD_FILTER];
        st = need_ws(p, a, VDNN_CONV_BWD_FILTER, err);
        if (!st && half && !a->ws)
            st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward-filter: NULL workspace (the gradient copy needs it)");
        void *dw = half && a->ws ? (char *)a->ws + at : (void *)a->dw;
        /* fp32: chunks after the first add their share to the filter gradient (beta 1). 16-bit: each chunk's share
         * in the maps' type, added to dw in fp32 (the first one written). */
        for (int i = 0; !st && i < s->ch.count; i++) {
            st = VDNN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(b->cudnn, &one, vdnn_cuda_chunk_desc(&s->xc, &s->ch, i),
                                                                 vdnn_cuda_at(d, a->x[0], i * xs),
                                                                 vdnn_cuda_chunk_desc(&s->yc, &s->ch, i),
                                                                 vdnn_cuda_at(d, a->dy, i * ys), s->cd[VDNN_CONV_BWD_FILTER],
                                                                 (cudnnConvolutionBwdFilterAlgo_t)p->algo, a->ws, p->ws,
                                                                 i && !half ? &one : &zero, s->w, dw),
                                  err, "cudnnConvolutionBackwardFilter (%s, chunk %d of %d)",
                                  algo_name(VDNN_CONV_BWD_FILTER, p->algo), i + 1, s->ch.count);
            if (!st && half)
                st = vdnn_cuda_check(vdnn_cuda_k_convert(b->stream[VDNN_QUEUE_COMPUTE], a->dw, VDNN_CUDA_F32, dw,
                                                         vdnn_cuda_type_of(d), filter_values(d), i > 0),
                                     err, "conv backward-filter: gradient copy kernel (chunk %d)", i + 1);
        }
    }
    /* Own kernel rather than cudnnConvolutionBackwardBias: its summation order is fixed. */
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_grad(b->stream[VDNN_QUEUE_COMPUTE], vdnn_cuda_type_of(d), b->sum_scratch,
                                                   VDNN_CUDA_SUM_SCRATCH_BYTES, a->db, a->dy, d->out.n, d->out.c,
                                                   (size_t)d->out.h * (size_t)d->out.w),
                             err, "conv backward: bias gradient kernel");
    return st;
}

const cuda_op_impl vdnn_cuda_op_conv = {
    .query = conv_query,
    .create = conv_create,
    .destroy = conv_destroy,
    .forward = conv_forward,
    .backward = conv_backward,
    .algos = conv_algos,
};

/* ---- for planners (cuda_backend.h) ---- */

static void to_public(vdnn_conv_pass pass, const conv_pick *p, vdnn_conv_algo *out)
{
    memset(out, 0, sizeof *out);
    out->algo = p->algo;
    snprintf(out->name, sizeof out->name, "%s", algo_name(pass, p->algo));
    out->ws_bytes = p->ws;
    out->time_ms = p->time_ms;
    out->deterministic = p->deterministic;
    out->tensor_cores = p->math != CUDNN_FMA_MATH;
}

vdnn_status vdnn_cuda_conv_algos(vdnn_backend_t *be, const vdnn_op_desc *d, vdnn_conv_pass pass, bool measure,
                                 vdnn_conv_algo *out, int cap, int *n, vdnn_error *err)
{
    if (n) *n = 0;
    if (!vdnn_cuda_settings(be, NULL)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv algorithms: not a CUDA backend");
    if (!d || d->kind != VDNN_LAYER_CONV)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv algorithms: the description is not a conv layer");
    if ((int)pass < 0 || pass >= VDNN_CONV_PASS_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv algorithms: no pass %d", (int)pass);
    if (!n || (cap > 0 && !out)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv algorithms: NULL output");
    cuda_backend *b = (cuda_backend *)be;
    vdnn_status st = vdnn_cuda_use(b, err);
    if (st) return st;
    conv_state s = {0};
    vdnn_conv_cand c[VDNN_CONV_CANDS];
    int got = 0;
    bool measured = false;
    const vdnn_conv_rules r = rules_of(b, d->dtype);
    st = conv_descriptors(b, d, &s, err);
    if (!st) st = measure ? measured_list(b, &s.dc, &s, pass, c, &got, &measured, err) : heuristic_list(b, &s, pass, c, &got, err);
    for (int i = 0; !st && i < got && *n < cap; i++) {
        vdnn_conv_math m;
        if (!vdnn_conv_usable(&c[i], &r, &m)) continue;
        conv_pick p = {c[i].algo, cudnn_math(m), c[i].ws, c[i].deterministic, measured ? c[i].time_ms : -1.0f};
        to_public(pass, &p, &out[(*n)++]);
    }
    conv_free(&s);
    return st;
}

bool vdnn_cuda_conv_chosen(const vdnn_backend_t *be, const vdnn_op *op, vdnn_conv_pass pass, vdnn_conv_algo *out)
{
    if (!vdnn_cuda_settings(be, NULL) || !op || op->impl != &vdnn_cuda_op_conv || !op->state) return false;
    const conv_state *s = op->state;
    if ((int)pass < 0 || (int)pass >= s->passes) return false;
    if (out) to_public(pass, &s->pick[pass], out);
    return true;
}
