/* CONV on CUDA: cuDNN's convolution forward, backward-data and backward-filter with algorithms chosen once per op
 * (heuristics, or timed with cudnnFind* in benchmark mode), TF32 and determinism as the backend is set; bias by own kernels.
 * op_algos offers up to three candidates trading speed for workspace: fastest, lean, least workspace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"

/* cuDNN's algorithm enums have at most 8 members; room for a newer library that lists more. */
#define MAX_CANDS 16

typedef struct conv_pick {
    int algo;
    cudnnMathType_t math;
    size_t ws;
    bool deterministic;
    float time_ms; /* -1: chosen by heuristics */
} conv_pick;

typedef struct conv_state {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    /* One descriptor per pass: each carries the math type of its own algorithm. */
    cudnnConvolutionDescriptor_t cd[VDNN_CONV_PASS_COUNT];
    conv_pick pick[VDNN_CONV_PASS_COUNT];
    int passes; /* 1: forward only (inference op), 3: training */
} conv_state;

/* One entry of cudnnGet*_v7 / cudnnFind*, whichever pass. */
typedef struct cand {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} cand;

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
    vdnn_cuda_tensor_free(&s->x);
    vdnn_cuda_tensor_free(&s->y);
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    s->w = NULL;
    for (int i = 0; i < VDNN_CONV_PASS_COUNT; i++) {
        if (s->cd[i]) cudnnDestroyConvolutionDescriptor(s->cd[i]);
        s->cd[i] = NULL;
    }
}

static cudnnMathType_t base_math(const cuda_backend *b)
{
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
    st = vdnn_cuda_tensor(&s->x, in, "conv input", err);
    if (!st) st = vdnn_cuda_tensor(&s->y, d->out, "conv output", err);
    if (!st) st = vdnn_cudnn_check(cudnnCreateFilterDescriptor(&s->w), err, "conv: cudnnCreateFilterDescriptor");
    /* PyTorch's (filters, C/groups, kh, kw) layout is cuDNN's NCHW filter (K, C/groups, R, S). */
    if (!st)
        st = vdnn_cudnn_check(cudnnSetFilter4dDescriptor(s->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, p->filters,
                                                         in.c / p->groups, p->kernel_h, p->kernel_w),
                              err, "conv: cudnnSetFilter4dDescriptor (%dx%dx%dx%d)", p->filters, in.c / p->groups,
                              p->kernel_h, p->kernel_w);
    for (int i = 0; !st && i < VDNN_CONV_PASS_COUNT; i++) {
        st = vdnn_cudnn_check(cudnnCreateConvolutionDescriptor(&s->cd[i]), err, "conv: cudnnCreateConvolutionDescriptor");
        if (!st)
            st = vdnn_cudnn_check(cudnnSetConvolution2dDescriptor(s->cd[i], p->pad_h, p->pad_w, p->stride_h, p->stride_w,
                                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                  err, "conv: cudnnSetConvolution2dDescriptor (pad %dx%d, stride %dx%d)", p->pad_h,
                                  p->pad_w, p->stride_h, p->stride_w);
        if (!st)
            st = vdnn_cudnn_check(cudnnSetConvolutionGroupCount(s->cd[i], p->groups), err,
                                  "conv: cudnnSetConvolutionGroupCount(%d)", p->groups);
        if (!st)
            st = vdnn_cudnn_check(cudnnSetConvolutionMathType(s->cd[i], base_math(b)), err,
                                  "conv: cudnnSetConvolutionMathType");
    }
    if (st) return st;
    int n, c, h, w;
    st = vdnn_cudnn_check(cudnnGetConvolution2dForwardOutputDim(s->cd[0], s->x, s->w, &n, &c, &h, &w), err,
                          "conv: cudnnGetConvolution2dForwardOutputDim");
    if (!st && (n != d->out.n || c != d->out.c || h != d->out.h || w != d->out.w))
        st = vdnn_fail(err, VDNN_ERR_SHAPE, "conv: cuDNN computes output %dx%dx%dx%d, the layer says %dx%dx%dx%d", n, c, h,
                       w, d->out.n, d->out.c, d->out.h, d->out.w);
    return st;
}

/* ---- candidates ---- */

#define COPY_PERF(dst, src)                \
    do {                                   \
        (dst).algo = (int)(src).algo;      \
        (dst).status = (src).status;       \
        (dst).time = (src).time;           \
        (dst).memory = (src).memory;       \
        (dst).determinism = (src).determinism; \
        (dst).math = (src).mathType;       \
    } while (0)

/* cuDNN's candidates for one pass, in heuristic order or (measure) by measured time. */
static vdnn_status list_candidates(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, bool measure, cand *out,
                                   int *n, vdnn_error *err)
{
    cudnnHandle_t h = b->cudnn;
    cudnnConvolutionDescriptor_t cd = s->cd[pass];
    int got = 0;
    vdnn_status st = vdnn_cudnn_check(cudnnSetConvolutionMathType(cd, base_math(b)), err, "conv: cudnnSetConvolutionMathType");
    if (st) return st;
    const char *fn = measure ? "cudnnFind" : "cudnnGet";
    if (pass == VDNN_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_CANDS];
        cudnnStatus_t r = measure ? cudnnFindConvolutionForwardAlgorithm(h, s->x, s->w, cd, s->y, MAX_CANDS, &got, perf)
                                  : cudnnGetConvolutionForwardAlgorithm_v7(h, s->x, s->w, cd, s->y, MAX_CANDS, &got, perf);
        st = vdnn_cudnn_check(r, err, "conv: %sConvolutionForwardAlgorithm%s", fn, measure ? "" : "_v7");
        for (int i = 0; !st && i < got && i < MAX_CANDS; i++) COPY_PERF(out[i], perf[i]);
    } else if (pass == VDNN_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CANDS];
        cudnnStatus_t r = measure
                              ? cudnnFindConvolutionBackwardDataAlgorithm(h, s->w, s->y, cd, s->x, MAX_CANDS, &got, perf)
                              : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->w, s->y, cd, s->x, MAX_CANDS, &got, perf);
        st = vdnn_cudnn_check(r, err, "conv: %sConvolutionBackwardDataAlgorithm%s", fn, measure ? "" : "_v7");
        for (int i = 0; !st && i < got && i < MAX_CANDS; i++) COPY_PERF(out[i], perf[i]);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CANDS];
        cudnnStatus_t r = measure
                              ? cudnnFindConvolutionBackwardFilterAlgorithm(h, s->x, s->y, cd, s->w, MAX_CANDS, &got, perf)
                              : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->x, s->y, cd, s->w, MAX_CANDS, &got, perf);
        st = vdnn_cudnn_check(r, err, "conv: %sConvolutionBackwardFilterAlgorithm%s", fn, measure ? "" : "_v7");
        for (int i = 0; !st && i < got && i < MAX_CANDS; i++) COPY_PERF(out[i], perf[i]);
    }
    *n = st ? 0 : (got < MAX_CANDS ? got : MAX_CANDS);
    return st;
}

static cudnnStatus_t workspace_size(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, int algo, size_t *ws)
{
    cudnnConvolutionDescriptor_t cd = s->cd[pass];
    if (pass == VDNN_CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(b->cudnn, s->x, s->w, cd, s->y, (cudnnConvolutionFwdAlgo_t)algo, ws);
    if (pass == VDNN_CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(b->cudnn, s->w, s->y, cd, s->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, ws);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(b->cudnn, s->x, s->y, cd, s->w,
                                                          (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
}

/* Whether a candidate may run under the backend's settings; if so, leaves the pass's descriptor set to its
 * math type and writes the pick. A failed cuDNN call here only rules the candidate out. */
static bool usable(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, const cand *c, conv_pick *pick)
{
    if (c->status != CUDNN_STATUS_SUCCESS) return false;
    bool det = c->determinism == CUDNN_DETERMINISTIC && !known_nondeterministic(pass, c->algo);
    if (b->opt.deterministic && !det) return false;
    cudnnMathType_t m = c->math;
    /* ALLOW_CONVERSION may round FP32 data down to FP16. */
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    if (!b->opt.tf32) {
        if (m == CUDNN_TENSOR_OP_MATH) return false;
        m = CUDNN_FMA_MATH;
    }
    size_t ws = 0;
    if (cudnnSetConvolutionMathType(s->cd[pass], m) != CUDNN_STATUS_SUCCESS) return false;
    if (workspace_size(b, s, pass, c->algo, &ws) != CUDNN_STATUS_SUCCESS) return false;
    if (ws > b->opt.conv_ws_limit) return false;
    *pick = (conv_pick){c->algo, m, ws, det, c->time};
    return true;
}

/* Every algorithm of a pass in the order to try them: cuDNN's heuristic ranking, then each algorithm again in enum
 * order (the low numbers are the plain GEMM-like ones that support every shape; cuDNN's own list may omit or
 * misjudge them). The second copies carry the determinism cuDNN reported for the algorithm, if any. */
static vdnn_status ordered_candidates(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, cand *out, int *n,
                                      vdnn_error *err)
{
    int got = 0;
    vdnn_status st = list_candidates(b, s, pass, false, out, &got, err);
    if (st) return st;
    const int ranked = got;
    for (int algo = 0; algo < algo_count(pass) && got < 2 * MAX_CANDS; algo++) {
        cudnnDeterminism_t det = CUDNN_DETERMINISTIC;
        for (int i = 0; i < ranked; i++)
            if (out[i].algo == algo && out[i].status == CUDNN_STATUS_SUCCESS) det = out[i].determinism;
        out[got++] = (cand){algo, CUDNN_STATUS_SUCCESS, -1.0f, 0, det, base_math(b)};
    }
    *n = got;
    return VDNN_OK;
}

/* The candidates op_algos lists, in this order, duplicates dropped. Deterministic mode offers the first alone:
 * another algorithm would give other (if also reproducible) numbers, and a planner that mixed them would make
 * a run's result depend on the budget. */
typedef enum conv_variant {
    VAR_FASTEST = 0, /* cuDNN's top-ranked usable algorithm per pass, whatever its workspace */
    VAR_LEAN,        /* the best-ranked one whose workspace is within lean_cap */
    VAR_LEAST,       /* the one with the least workspace (none, where an implicit-GEMM-like algorithm runs) */
    VAR_COUNT
} conv_variant;

/* A quarter of the layer's largest feature map, at least 64 KiB: scratch that small next to the maps a plan
 * already holds around the layer rarely decides whether the plan fits, and it leaves the fast GEMM-based
 * algorithms in. */
static size_t lean_cap(const vdnn_op_desc *d)
{
    size_t cap = vdnn_cuda_max_sz(vdnn_shape_bytes(d->in[0]), vdnn_shape_bytes(d->out)) / 4;
    return vdnn_cuda_max_sz(cap, (size_t)64 << 10);
}

/* The pick of one variant for one pass from the ordered candidates; false if none is usable. Leaves the pass's
 * descriptor set to the pick's math type. */
static bool pick_variant(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, const cand *c, int n, conv_variant v,
                         size_t cap, conv_pick *out)
{
    conv_pick p, least = {0};
    bool have = false, have_least = false;
    for (int i = 0; i < n && !have; i++) {
        if (!usable(b, s, pass, &c[i], &p)) continue;
        if (v == VAR_FASTEST || (v == VAR_LEAN && p.ws <= cap)) {
            *out = p;
            have = true;
        } else if (!have_least || p.ws < least.ws) {
            least = p;
            have_least = true;
        }
    }
    /* Lean with nothing under its cap falls back to the least workspace (where that holds in every pass, the
     * least-workspace candidate duplicates it and is dropped). */
    if (!have && have_least) *out = least;
    if (!have && !have_least) return false;
    out->time_ms = -1.0f;
    return cudnnSetConvolutionMathType(s->cd[pass], out->math) == CUDNN_STATUS_SUCCESS;
}

typedef struct conv_cands {
    int n;
    conv_variant variant[VDNN_MAX_ALGOS];
    conv_pick pick[VDNN_MAX_ALGOS][VDNN_CONV_PASS_COUNT];
} conv_cands;

static bool same_picks(const conv_pick *a, const conv_pick *b, int passes)
{
    for (int i = 0; i < passes; i++)
        if (a[i].algo != b[i].algo || a[i].math != b[i].math) return false;
    return true;
}

/* The op's candidates under the backend's settings (TF32, determinism, workspace limit), from cuDNN's heuristics
 * only: pure, no device memory. The descriptors' math types are left as the last variant's. */
static vdnn_status conv_candidates(cuda_backend *b, const vdnn_op_desc *d, conv_state *s, conv_cands *out,
                                   vdnn_error *err)
{
    const int passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    const int nvar = b->opt.deterministic ? 1 : VAR_COUNT;
    conv_pick all[VAR_COUNT][VDNN_CONV_PASS_COUNT];
    memset(all, 0, sizeof all);
    for (int pass = 0; pass < passes; pass++) {
        cand c[2 * MAX_CANDS];
        int n = 0;
        vdnn_status st = ordered_candidates(b, s, (vdnn_conv_pass)pass, c, &n, err);
        if (st) return st;
        for (int v = 0; v < nvar; v++)
            if (!pick_variant(b, s, (vdnn_conv_pass)pass, c, n, (conv_variant)v, lean_cap(d), &all[v][pass]))
                return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                                 "conv: cuDNN has no %s algorithm for this layer under the settings (tf32 %s, "
                                 "deterministic %s, workspace limit %zu bytes)",
                                 pass_names[pass], b->opt.tf32 ? "on" : "off", b->opt.deterministic ? "on" : "off",
                                 b->opt.conv_ws_limit);
    }
    out->n = 0;
    for (int v = 0; v < nvar; v++) {
        bool dup = false;
        for (int k = 0; k < out->n; k++) dup |= same_picks(out->pick[k], all[v], passes);
        if (dup) continue;
        out->variant[out->n] = (conv_variant)v;
        memcpy(out->pick[out->n], all[v], sizeof all[v]);
        out->n++;
    }
    return VDNN_OK;
}

/* Benchmark mode: the fastest measured algorithm that needs no more workspace than the heuristic pick,
 * so what op_query reported to the planner still holds. */
static vdnn_status choose_measured(cuda_backend *b, conv_state *s, vdnn_conv_pass pass, conv_pick *pick, vdnn_error *err)
{
    cand c[MAX_CANDS];
    int n = 0;
    vdnn_status st = list_candidates(b, s, pass, true, c, &n, err);
    if (st) return st;
    conv_pick best = *pick, p = {0};
    for (int i = 0; i < n; i++)
        if (usable(b, s, pass, &c[i], &p) && p.ws <= pick->ws) {
            best = p;
            break; /* cudnnFind lists the fastest first */
        }
    *pick = best;
    return vdnn_cudnn_check(cudnnSetConvolutionMathType(s->cd[pass], best.math), err, "conv: cudnnSetConvolutionMathType");
}

/* Descriptors and the algorithms of candidate d->algo; in benchmark mode (measure) each pass then takes the fastest
 * measured algorithm within the candidate's workspace. */
static vdnn_status conv_build(cuda_backend *b, const vdnn_op_desc *d, bool measure, conv_state *s, vdnn_error *err)
{
    conv_cands c;
    vdnn_status st = conv_descriptors(b, d, s, err);
    s->passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    if (!st) st = conv_candidates(b, d, s, &c, err);
    if (!st && (d->algo < 0 || d->algo >= c.n))
        st = vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv: algorithm %d asked of a layer with %d (0..%d)", d->algo, c.n,
                       c.n - 1);
    for (int pass = 0; !st && pass < s->passes; pass++) {
        s->pick[pass] = c.pick[d->algo][pass];
        st = vdnn_cudnn_check(cudnnSetConvolutionMathType(s->cd[pass], s->pick[pass].math), err,
                              "conv: cudnnSetConvolutionMathType");
        if (!st && measure) st = choose_measured(b, s, (vdnn_conv_pass)pass, &s->pick[pass], err);
    }
    return st;
}

/* ---- op ---- */

static vdnn_op_info info_of(const vdnn_op_desc *d, const conv_pick *pick)
{
    return (vdnn_op_info){
        .fwd_ws_bytes = pick[VDNN_CONV_FWD].ws,
        .bwd_ws_bytes = d->training ? vdnn_cuda_max_sz(pick[VDNN_CONV_BWD_DATA].ws, pick[VDNN_CONV_BWD_FILTER].ws) : 0,
        .bwd_needs_x = true, /* for the filter gradient */
    };
}

static vdnn_status conv_query(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_info *info, vdnn_error *err)
{
    conv_state s = {0};
    vdnn_status st = conv_build(b, d, false, &s, err);
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

static vdnn_status conv_algos(cuda_backend *b, const vdnn_op_desc *d, vdnn_op_algo *algos, int *n, vdnn_error *err)
{
    static const char *const names[VAR_COUNT] = {"fastest", "lean", "least-workspace"};
    conv_state s = {0};
    conv_cands c;
    vdnn_status st = conv_descriptors(b, d, &s, err);
    if (!st) st = conv_candidates(b, d, &s, &c, err);
    conv_free(&s);
    if (st) return st;
    const int passes = d->training ? VDNN_CONV_PASS_COUNT : 1;
    for (int i = 0; i < c.n; i++) {
        size_t ws = 0;
        for (int pass = 0; pass < passes; pass++) ws += c.pick[i][pass].ws;
        memset(&algos[i], 0, sizeof algos[i]);
        /* Named by what it is: a lean candidate that fell back to no workspace at all is "no-workspace". */
        snprintf(algos[i].name, sizeof algos[i].name, "%s",
                 c.variant[i] != VAR_FASTEST && ws == 0 ? "no-workspace" : names[c.variant[i]]);
        algos[i].info = info_of(d, c.pick[i]);
        algos[i].numerics = numerics_of(b, c.pick[i], passes);
    }
    *n = c.n;
    return VDNN_OK;
}

static vdnn_status conv_create(cuda_backend *b, vdnn_op *op, vdnn_error *err)
{
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "conv: out of memory");
    vdnn_status st = conv_build(b, &op->d, b->opt.benchmark, s, err);
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

static vdnn_status conv_forward(cuda_backend *b, vdnn_op *op, const vdnn_op_args *a, vdnn_error *err)
{
    conv_state *s = op->state;
    const vdnn_op_desc *d = &op->d;
    const conv_pick *p = &s->pick[VDNN_CONV_FWD];
    if (!a->x[0] || !a->w || !a->y)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL %s", !a->x[0] ? "input" : !a->w ? "weights" : "output");
    if (d->p.bias && !a->b) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv forward: NULL bias");
    vdnn_status st = need_ws(p, a, VDNN_CONV_FWD, err);
    if (st) return st;
    const float one = 1.0f, zero = 0.0f;
    st = vdnn_cudnn_check(cudnnConvolutionForward(b->cudnn, &one, s->x, a->x[0], s->w, a->w, s->cd[VDNN_CONV_FWD],
                                                  (cudnnConvolutionFwdAlgo_t)p->algo, a->ws, p->ws, &zero, s->y, a->y),
                          err, "cudnnConvolutionForward (%s)", algo_name(VDNN_CONV_FWD, p->algo));
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_add(b->stream[VDNN_QUEUE_COMPUTE], a->y, a->b, d->out.n, d->out.c,
                                                  (size_t)d->out.h * (size_t)d->out.w),
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
    vdnn_status st = VDNN_OK;
    if (a->dx[0]) {
        const conv_pick *p = &s->pick[VDNN_CONV_BWD_DATA];
        if (!a->w) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "conv backward: NULL weights");
        st = need_ws(p, a, VDNN_CONV_BWD_DATA, err);
        if (!st)
            st = vdnn_cudnn_check(cudnnConvolutionBackwardData(b->cudnn, &one, s->w, a->w, s->y, a->dy,
                                                               s->cd[VDNN_CONV_BWD_DATA],
                                                               (cudnnConvolutionBwdDataAlgo_t)p->algo, a->ws, p->ws,
                                                               &zero, s->x, a->dx[0]),
                                  err, "cudnnConvolutionBackwardData (%s)", algo_name(VDNN_CONV_BWD_DATA, p->algo));
    }
    if (!st) {
        const conv_pick *p = &s->pick[VDNN_CONV_BWD_FILTER];
        st = need_ws(p, a, VDNN_CONV_BWD_FILTER, err);
        if (!st)
            st = vdnn_cudnn_check(cudnnConvolutionBackwardFilter(b->cudnn, &one, s->x, a->x[0], s->y, a->dy,
                                                                 s->cd[VDNN_CONV_BWD_FILTER],
                                                                 (cudnnConvolutionBwdFilterAlgo_t)p->algo, a->ws, p->ws,
                                                                 &zero, s->w, a->dw),
                                  err, "cudnnConvolutionBackwardFilter (%s)", algo_name(VDNN_CONV_BWD_FILTER, p->algo));
    }
    /* Own kernel rather than cudnnConvolutionBackwardBias: its summation order is fixed. */
    if (!st && d->p.bias)
        st = vdnn_cuda_check(vdnn_cuda_k_bias_grad(b->stream[VDNN_QUEUE_COMPUTE], a->db, a->dy, d->out.n, d->out.c,
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
    cand c[MAX_CANDS];
    int got = 0;
    st = conv_descriptors(b, d, &s, err);
    if (!st) st = list_candidates(b, &s, pass, measure, c, &got, err);
    for (int i = 0; !st && i < got && *n < cap; i++) {
        conv_pick p = {0};
        if (!usable(b, &s, pass, &c[i], &p)) continue;
        if (!measure) p.time_ms = -1.0f;
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
