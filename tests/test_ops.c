/* The op harness, in the manner of ggml's test-backend-ops: one table of op cases (op_cases.c), each run forward
 * and backward on every backend present and compared with the CPU backend, the double reference and finite
 * differences (op_case_run.c). Backends that are not present are reported as skipped, with the reason.
 *
 *     test_ops [--backend NAME[,NAME...]] [SUBSTRING]     (backends below; default all)
 *
 * Backends: cpu, cpu-chunked, cpu-bf16, cpu-bf16-chunked, cpu-bf16-portable, cuda, cuda-chunked, cuda-bf16,
 * cuda-fp16; built as test_ops_emulated (with cuda_emulated.c) also cuda-emulated, cuda-emulated-bf16,
 * cuda-emulated-fp16, cuda-emulated-chunked and cuda-emulated-chunked-bf16: the CUDA ops' host code with the runtime,
 * cuBLAS and kernels emulated on the CPU. The 16-bit entries run every case with maps of their type against the fp32 CPU on the same
 * (representable) inputs, within vt_op_rtol_dtype; cpu-bf16 is skipped, saying why, on a CPU without AVX-512 BF16;
 * cpu-bf16-portable acts as such a CPU on every machine and runs the ops that take bf16 there.
 *
 * Exit status 0 when every selected backend ran every case it applies to and passed, 1 on a failure, 77
 * (CTest's SKIP_RETURN_CODE) when a selected backend was not present. VDNN_TEST_QUICK=1 runs the hand-picked
 * cases only; VDNN_TEST_ZOO_FULL=1 runs the zoo's layers at the nets' own input size (minutes on two cores). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_case_run.h"
#include "op_cases.h"
#include "backend/op_check.h"
#include "op_check.h"
#include "op_desc.h"
#include "op_exec.h"
#include "testutil.h"
#ifdef VDNN_TEST_CUDA_EMULATED
#include "cuda_emulated.h"
#endif

typedef struct harness_backend {
    vt_case_backend cb; /* its name and batchnorm layout; cb.be NULL: not present */
    const char *about;
    vdnn_status (*open)(vdnn_backend_t **be, vdnn_error *err);
    bool conv_only; /* runs the convolution cases only: its options change nothing else */
    bool lstm_only; /* runs the lstm cases only */
    bool emulated;  /* the emulated CUDA backend: the cases whose kernels it emulates */
    bool chunked;   /* runs the cases its low tensor cap cuts into batch chunks */
    bool portable;  /* runs the cases whose op runs its type on any CPU (it acts as a CPU without AVX-512 BF16) */
    bool selected;
    char reason[1600];  /* why not present */
    bool broken;        /* present but failed to open: its cases count as failed */
    int run, skipped, failed, candidates;
} harness_backend;

typedef struct job {
    harness_backend *hb;
    const vt_op_case *c;
} job;

static vdnn_status open_cpu(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cpu_options o = {0};
    return vdnn_backend_cpu_create(&o, be, err);
}

/* A CPU without AVX-512 BF16, as far as the backend knows: bf16 ops widen and round on the portable path, the
 * attention's ops and GELU one sample at a time (the smallest groups). */
static vdnn_status open_cpu_no_bf16(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cpu_options o = {.no_bf16 = true, .widen_group_bytes = 1};
    return vdnn_backend_cpu_create(&o, be, err);
}

/* The smallest groups of samples for the widened ops, and the smallest blocks of W_ih's rows for an lstm chunk's
 * bf16 products (cpu_ops_lstm_mm16.c), so the products of a chunk as wide as lstm-lm's go by several blocks. */
static vdnn_status open_cpu_small_groups(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cpu_options o = {.widen_group_bytes = 1};
    return vdnn_backend_cpu_create(&o, be, err);
}

/* A 12.5 KiB cap on a convolution's layout copies cuts the batch of every conv case into chunks (VGG's first
 * layers at batch 256 are cut the same way), so every candidate the CPU lists differs from the default. */
static vdnn_status open_cpu_chunked(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cpu_options o = {.conv_chunk_bytes = 2 * 6400};
    return vdnn_backend_cpu_create(&o, be, err);
}

/* be, if it runs ops of type t; else closed, and VDNN_ERR_NO_DEVICE with the backend's reason (the entry is
 * skipped, as a backend that is not there). */
static vdnn_status require_dtype(vdnn_backend_t **be, vdnn_dtype t, vdnn_error *err)
{
    vdnn_op_desc d = vt_relu(vt_shape(1, 1, 1, 1));
    d.dtype = t;
    vdnn_op_info info;
    vdnn_status st = (*be)->ops->op_query(*be, &d, &info, err);
    if (st != VDNN_ERR_UNSUPPORTED) return st;
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    vdnn_backend_destroy(*be);
    *be = NULL;
    return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "%s", why);
}

/* A low cap on the values of one cuDNN tensor cuts the batch of every conv case into chunks (as
 * VGG-16's first layers are cut at batch 672 and above under cuDNN's real cap of 2^31-1 values). */
#define CUDA_CHUNK_VALUES 32768

#ifdef VDNN_TEST_CUDA_EMULATED
static vdnn_status open_cuda_emulated(vdnn_backend_t **be, vdnn_error *err) { return vt_cuda_emulated_create(be, 0, err); }
static vdnn_status open_cuda_emulated_chunked(vdnn_backend_t **be, vdnn_error *err)
{
    return vt_cuda_emulated_create(be, CUDA_CHUNK_VALUES, err);
}
#endif

/* Strict FP32 (no TF32), so that results compare with the CPU at FP32 tolerances. */
static vdnn_status open_cuda(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 0;
    return vdnn_backend_cuda_create_ex(&o, be, err);
}

/* A low cap on the values of one cuDNN tensor cuts the batch of convolution, pooling and LRN cases into chunks (as
 * VGG-16's first layers are cut at batch 672 and above under cuDNN's real cap of 2^31-1 values). */
#define CUDA_CHUNK_VALUES 32768

static vdnn_status open_cuda_chunked(vdnn_backend_t **be, vdnn_error *err)
{
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 0;
    o.tensor_values = CUDA_CHUNK_VALUES;
    return vdnn_backend_cuda_create_ex(&o, be, err);
}

/* The first is the CPU backend every other is compared with. */
static harness_backend backends[] = {
    {.cb = {.name = "cpu"}, .about = "the CPU backend (oneDNN, OpenBLAS), also the reference of the others",
     .open = open_cpu},
    {.cb = {.name = "cpu-chunked"}, .about = "the CPU backend with convolution batches cut into chunks",
     .open = open_cpu_chunked, .conv_only = true},
    {.cb = {.name = "cpu-bf16", .dtype = VDNN_DTYPE_BF16}, .about = "the CPU backend with bf16 maps",
     .open = open_cpu},
    {.cb = {.name = "cpu-bf16-chunked", .dtype = VDNN_DTYPE_BF16},
     .about = "the CPU backend with bf16 maps, convolution batches cut into chunks", .open = open_cpu_chunked,
     .conv_only = true},
    {.cb = {.name = "cpu-bf16-small-groups", .dtype = VDNN_DTYPE_BF16},
     .about = "the CPU backend with bf16 maps, lstm chunks in groups of one sample and blocks of W_ih's rows",
     .open = open_cpu_small_groups, .lstm_only = true},
    {.cb = {.name = "cpu-bf16-portable", .dtype = VDNN_DTYPE_BF16},
     .about = "the CPU backend with bf16 maps, acting as a CPU without AVX-512 BF16: the ops that run bf16 anywhere",
     .open = open_cpu_no_bf16, .portable = true},
#ifdef VDNN_TEST_CUDA_EMULATED
    {.cb = {.name = "cuda-emulated", .bn_aux_invstd = true}, .open = open_cuda_emulated, .emulated = true,
     .about = "the CUDA ops' host code, the runtime, cuBLAS and kernels emulated in C (tests/cuda_emulated.c)"},
    {.cb = {.name = "cuda-emulated-bf16", .bn_aux_invstd = true, .dtype = VDNN_DTYPE_BF16}, .open = open_cuda_emulated,
     .emulated = true, .about = "the same with bf16 maps"},
    {.cb = {.name = "cuda-emulated-fp16", .bn_aux_invstd = true, .dtype = VDNN_DTYPE_F16}, .open = open_cuda_emulated,
     .emulated = true, .about = "the same with fp16 maps"},
    {.cb = {.name = "cuda-emulated-chunked", .bn_aux_invstd = true}, .open = open_cuda_emulated_chunked,
     .emulated = true, .chunked = true, .about = "the same with the low tensor cap: fused attention in several blocks"},
    {.cb = {.name = "cuda-emulated-chunked-bf16", .bn_aux_invstd = true, .dtype = VDNN_DTYPE_BF16},
     .open = open_cuda_emulated_chunked, .emulated = true, .chunked = true, .about = "the same with bf16 maps"},
#endif
    {.cb = {.name = "cuda", .bn_aux_invstd = true}, .about = "the CUDA backend (cuDNN, cuBLAS), TF32 off",
     .open = open_cuda},
    {.cb = {.name = "cuda-chunked", .bn_aux_invstd = true},
     .about = "the CUDA backend with convolution, pooling and LRN batches cut into chunks", .open = open_cuda_chunked,
     .chunked = true},
    {.cb = {.name = "cuda-bf16", .bn_aux_invstd = true, .dtype = VDNN_DTYPE_BF16},
     .about = "the CUDA backend with bf16 maps", .open = open_cuda},
    {.cb = {.name = "cuda-fp16", .bn_aux_invstd = true, .dtype = VDNN_DTYPE_F16},
     .about = "the CUDA backend with fp16 maps", .open = open_cuda},
};
enum { N_BACKENDS = sizeof backends / sizeof backends[0] };

static size_t image_values(vdnn_shape t) { return (size_t)t.c * (size_t)t.h * (size_t)t.w; }

/* The chunked CUDA backend runs the cases it cuts into two or more chunks. */
static bool chunked_case(const vdnn_op_desc *d)
{
    const vdnn_layer_kind k = d->kind;
    /* Fused attention's blocks of query rows: the low cap makes several (CUDA's block holds every head's scores). */
    if (k == VDNN_LAYER_ATTN) return (size_t)d->p.heads * (size_t)d->in[0].h * (size_t)d->in[0].h > CUDA_CHUNK_VALUES;
    if (k != VDNN_LAYER_CONV && k != VDNN_LAYER_MAXPOOL && k != VDNN_LAYER_AVGPOOL && k != VDNN_LAYER_LRN) return false;
    size_t image = image_values(d->out);
    for (int i = 0; i < d->n_inputs; i++) image = image > image_values(d->in[i]) ? image : image_values(d->in[i]);
    return image <= CUDA_CHUNK_VALUES && (size_t)d->out.n * image > CUDA_CHUNK_VALUES;
}

/* Whether hb's backend runs c's op in hb's type (what a portable entry runs). */
static bool runs_type(const harness_backend *hb, const vt_op_case *c)
{
    vdnn_op_desc d = c->d;
    d.dtype = hb->cb.dtype;
    vdnn_op_info info;
    return hb->cb.be && hb->cb.be->ops->op_query(hb->cb.be, &d, &info, &(vdnn_error){0}) == VDNN_OK;
}

/* The kinds whose CUDA kernels cuda_emulated.c writes again (the sequence models' and fc's). */
static bool emulated_kind(vdnn_layer_kind k)
{
    switch (k) {
    case VDNN_LAYER_EMBED:
    case VDNN_LAYER_POS_EMBED:
    case VDNN_LAYER_LAYERNORM:
    case VDNN_LAYER_LINEAR:
    case VDNN_LAYER_ATTN_PROBS:
    case VDNN_LAYER_ATTN_MIX:
    case VDNN_LAYER_ATTN:
    case VDNN_LAYER_GELU:
    case VDNN_LAYER_SIGMOID:
    case VDNN_LAYER_SILU:
    case VDNN_LAYER_LSTM:
    case VDNN_LAYER_SEQ_CAT:
    case VDNN_LAYER_FEAT_CAT:
    case VDNN_LAYER_SOFTMAX_XENT:
    case VDNN_LAYER_ADD:
    case VDNN_LAYER_FC: return true;
    default: return false;
    }
}

static bool applies(const harness_backend *hb, const vt_op_case *c)
{
    if (hb->portable) return runs_type(hb, c);
    if (hb->emulated && !emulated_kind(c->d.kind)) return false;
    if (hb->chunked) return chunked_case(&c->d);
    if (hb->lstm_only) return c->d.kind == VDNN_LAYER_LSTM;
    return !hb->conv_only || c->d.kind == VDNN_LAYER_CONV;
}

static void run_job(void **state)
{
    job *j = *state;
    /* Counted as failed until it returns: a failed check leaves the test through cmocka's longjmp. */
    j->hb->run++;
    j->hb->failed++;
    j->hb->candidates += vt_case_run(&j->hb->cb, j->c);
    j->hb->failed--;
}

/* The checks can fail: a result off by more than the tolerance, and a gradient off in one element or in
 * scale, are each caught. */
static void test_checks_catch_errors(void **state)
{
    vdnn_backend_t *cpu = *state;
    const vdnn_op_desc d = vt_conv(vt_shape(2, 3, 6, 6), 4, 3, 1, 1, 1, 1);
    vt_op_data in;
    vt_op_data_random(&in, "self-test conv", &d, VT_FILL_UNIFORM, 99);
    vt_op_result r;
    const vt_call call = {.backward = true};
    vt_op_run(cpu, &in, &call, &r);
    char msg[256];
    float *y = malloc(in.ny * sizeof *y);
    assert_non_null(y);
    memcpy(y, r.y, in.ny * sizeof *y);
    assert_true(vt_close(y, r.y, in.ny, vt_op_rtol(d.kind), msg, sizeof msg));
    y[in.ny / 2] += 1e-2f;
    assert_false(vt_close(y, r.y, in.ny, vt_op_rtol(d.kind), msg, sizeof msg));
    printf("a y off by 1e-2 is caught: %s\n", msg);
    free(y);

    vt_exec e;
    vt_exec_open(&e, cpu, &in, 0);
    assert_true(vt_fd_elements(&e, in.w, in.nw, r.dw, 0, 0, 1, msg, sizeof msg));
    assert_true(vt_fd_direction(&e, in.w, in.nw, r.dw, 0, 0, 1, msg, sizeof msg));
    float gmax = 0;
    for (size_t i = 0; i < in.nw; i++) gmax = fabsf(r.dw[i]) > gmax ? fabsf(r.dw[i]) : gmax;
    r.dw[5] += 0.01f * gmax;
    assert_false(vt_fd_elements(&e, in.w, in.nw, r.dw, 0, 0, 1, msg, sizeof msg));
    printf("one dw element off by 1%% of max |dw| is caught: %s\n", msg);
    r.dw[5] -= 0.01f * gmax;
    for (size_t i = 0; i < in.nw; i++) r.dw[i] *= 1.01f;
    assert_false(vt_fd_direction(&e, in.w, in.nw, r.dw, 0, 0, 1, msg, sizeof msg));
    printf("dw scaled by 1.01 is caught: %s\n", msg);
    vt_exec_close(&e);
    vt_op_result_free(&r);
    vt_op_data_free(&in);
}

static void select_backends(const char *list)
{
    for (int b = 0; b < N_BACKENDS; b++) backends[b].selected = list == NULL;
    if (!list) return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int b = 0;
        while (b < N_BACKENDS && strcmp(backends[b].cb.name, tok)) b++;
        if (b == N_BACKENDS) {
            fprintf(stderr, "test_ops: no backend '%s' (", tok);
            for (int k = 0; k < N_BACKENDS; k++) fprintf(stderr, "%s%s", k ? ", " : "", backends[k].cb.name);
            fprintf(stderr, ")\n");
            exit(2);
        }
        backends[b].selected = true;
    }
}

static void open_backends(vdnn_backend_t *cpu)
{
    for (int b = 0; b < N_BACKENDS; b++) {
        harness_backend *hb = &backends[b];
        hb->cb.ref = cpu;
        if (!hb->selected) continue;
        if (b == 0) {
            hb->cb.be = cpu;
            continue;
        }
        vdnn_error err = {0};
        vdnn_status st = hb->open(&hb->cb.be, &err);
        if (st == VDNN_OK && hb->cb.dtype != VDNN_DTYPE_F32 && !hb->portable)
            st = require_dtype(&hb->cb.be, hb->cb.dtype, &err);
        if (st == VDNN_OK) continue;
        hb->cb.be = NULL;
        hb->broken = st != VDNN_ERR_NO_DEVICE;
        snprintf(hb->reason, sizeof hb->reason, "%s", err.msg);
        printf("%s %s: %s\n", hb->broken ? "FAILED to open" : "SKIPPED", hb->cb.name, hb->reason);
    }
}

static void print_summary(const vt_op_cases *cs)
{
    int per_kind[VDNN_LAYER_KIND_COUNT] = {0}, small = 0;
    for (int i = 0; i < cs->n; i++) per_kind[cs->c[i].d.kind]++, small += cs->c[i].small;
    printf("\nop harness: %d cases (%d small enough for element-wise finite differences):", cs->n, small);
    for (int k = 0; k < VDNN_LAYER_KIND_COUNT; k++)
        if (per_kind[k]) printf(" %s %d", vdnn_layer_kind_name((vdnn_layer_kind)k), per_kind[k]);
    printf("\n%-16s %6s %8s %7s %11s\n", "backend", "run", "skipped", "failed", "candidates");
    for (int b = 0; b < N_BACKENDS; b++) {
        const harness_backend *hb = &backends[b];
        if (!hb->selected) continue;
        printf("%-16s %6d %8d %7d %11d  %s%s%s\n", hb->cb.name, hb->run, hb->skipped, hb->failed, hb->candidates,
               hb->about, hb->reason[0] ? ": " : "", hb->reason);
    }
}

int main(int argc, char **argv)
{
    const char *list = NULL, *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) list = argv[++i];
        else filter = argv[i];
    }
    select_backends(list);
    const char *q = getenv("VDNN_TEST_QUICK");
    vt_op_cases cs;
    vt_op_cases_build(&cs, q && *q && strcmp(q, "0"));
    vdnn_backend_t *cpu = NULL;
    vdnn_error err = {0};
    if (open_cpu(&cpu, &err)) {
        fprintf(stderr, "test_ops: the CPU backend: %s\n", err.msg);
        return 1;
    }
    open_backends(cpu);

    struct CMUnitTest *tests = calloc((size_t)(N_BACKENDS * cs.n + 1), sizeof *tests);
    job *jobs = calloc((size_t)(N_BACKENDS * cs.n), sizeof *jobs);
    char **names = calloc((size_t)(N_BACKENDS * cs.n), sizeof *names);
    assert_true(tests && jobs && names);
    int nt = 0, nj = 0;
    if (backends[0].selected && !filter)
        tests[nt++] = (struct CMUnitTest){"the checks catch wrong results", test_checks_catch_errors, NULL, NULL, cpu};
    for (int b = 0; b < N_BACKENDS; b++) {
        harness_backend *hb = &backends[b];
        if (!hb->selected) continue;
        for (int i = 0; i < cs.n; i++) {
            if (!applies(hb, &cs.c[i]) || (filter && !strstr(cs.c[i].name, filter))) continue;
            if (!hb->cb.be) {
                *(hb->broken ? &hb->failed : &hb->skipped) += 1;
                continue;
            }
            jobs[nj] = (job){hb, &cs.c[i]};
            names[nj] = malloc(strlen(hb->cb.name) + strlen(cs.c[i].name) + 3);
            assert_non_null(names[nj]);
            sprintf(names[nj], "%s: %s", hb->cb.name, cs.c[i].name);
            tests[nt++] = (struct CMUnitTest){names[nj], run_job, NULL, NULL, &jobs[nj]};
            nj++;
        }
    }
    int cmocka_failed = nt ? _cmocka_run_group_tests("op harness", tests, (size_t)nt, NULL, NULL) : 0;
    print_summary(&cs);

    int failed = 0, skipped = 0;
    for (int b = 0; b < N_BACKENDS; b++) {
        failed += backends[b].failed;
        skipped += backends[b].skipped;
        if (b > 0 && backends[b].cb.be) vdnn_backend_destroy(backends[b].cb.be);
    }
    vdnn_backend_destroy(cpu);
    for (int i = 0; i < nj; i++) free(names[i]);
    free(names), free(jobs), free(tests);
    vt_op_cases_free(&cs);
    if (failed || cmocka_failed) return 1;
    return skipped ? VT_EXIT_SKIPPED : 0;
}
