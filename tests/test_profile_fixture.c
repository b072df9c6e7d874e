/* The committed GPU profile fixture, tests/data/profiles/h100-vgg16-b64-described.json: it reads, it plans vgg16 for
 * the GPU it describes on a machine without one, its op info follows the CUDA backend's rules where they differ from
 * the CPU's (ReLU keeps no mask, max pooling no indices), and, in builds with the CUDA backend, it is exactly what
 * that backend's device-less description gives today, so it cannot drift from the code unseen.
 * VDNN_FIXTURE_OUT=PATH (CUDA builds) writes the fixture afresh to PATH: that is how the committed one was made.
 * And the public call that describes any model for a GPU this way (vdnn_profile_describe_gpu_model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "plan/profile.h"
#include "testutil.h"
#include "vdnn/model.h"
#include "vdnn/plan.h"

#ifdef VDNN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#define FIXTURE VDNN_SOURCE_DIR "/tests/data/profiles/h100-vgg16-b64-described.json"

static const vdnn_shape fixture_input = {64, 3, 224, 224};

static vdnn_graph_t *vgg16_at_fixture(void)
{
    vdnn_graph_t *g = vt_load_zoo("vgg16");
    vdnn_error err;
    vt_assert_ok(vdnn_graph_resolve(g, fixture_input, 0, &err), err);
    return g;
}

/* It reads as described CUDA op info, and says which of its numbers are measured. */
static void test_reads(void **state)
{
    (void)state;
    vdnn_graph_t *g = vgg16_at_fixture();
    vdnn_profile p;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_read(FIXTURE, g, &p, &err), err);
    assert_int_equal(p.version, VDNN_PROFILE_VERSION);
    assert_non_null(p.ops);
    assert_string_equal(p.dev.backend, "cuda");
    assert_string_equal(p.op_info_source, "described");
    assert_false(p.measured); /* times are an estimate */
    assert_non_null(strstr(p.note, "not measured"));
    vdnn_profile_release(&p);
    vdnn_graph_free(g);
}

/* Where the two backends' rules differ, the fixture has CUDA's: ReLU backward reads y and keeps no mask, max
 * pooling backward reads x and y and keeps no indices; the CPU backend keeps both. */
static void test_cuda_rules_not_cpu(void **state)
{
    (void)state;
    vdnn_graph_t *g = vgg16_at_fixture();
    vdnn_profile p;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_read(FIXTURE, g, &p, &err), err);
    vdnn_backend_t *cpu = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    assert_non_null(algos);
    vt_assert_ok(vdnn_plan_query_algos(g, cpu, true, algos, NULL, &err), err);
    int relus = 0, pools = 0;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_op_info *gpu = &p.ops[l].a[0].info, *host = &algos[l].a[0].info;
        if (g->layers[l].kind == VDNN_LAYER_RELU) {
            relus++;
            assert_int_equal(gpu->aux_bytes, 0);
            assert_true(gpu->bwd_needs_y);
            assert_true(host->aux_bytes > 0); /* the CPU's bit mask */
        } else if (g->layers[l].kind == VDNN_LAYER_MAXPOOL) {
            pools++;
            assert_int_equal(gpu->aux_bytes, 0);
            assert_true(gpu->bwd_needs_x && gpu->bwd_needs_y);
            assert_true(host->aux_bytes > 0); /* the CPU's indices */
        }
    }
    assert_int_equal(relus, 15);
    assert_int_equal(pools, 5);
    char why[256];
    assert_true(vdnn_profile_ops_differ(&p, algos, why, sizeof why));
    free(algos);
    vdnn_backend_destroy(cpu);
    vdnn_profile_release(&p);
    vdnn_graph_free(g);
}

/* The summary of the plan of vgg16 at the fixture's batch, and the number of aux tensors (what ops keep for their
 * backward besides feature maps) its JSON lists. */
static vdnn_plan_summary plan_with(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_profile_t *prof,
                                   vdnn_policy policy, size_t budget, int *aux)
{
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = policy;
    mem.budget = budget;
    vdnn_plan_t *plan = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_create(m, be, prof, fixture_input, 0, &mem, &plan, &err), err);
    vdnn_plan_summary s;
    vt_assert_ok(vdnn_plan_summarize(plan, &s, &err), err);
    size_t n = 0;
    vt_assert_ok(vdnn_plan_json(plan, NULL, 0, &n, &err), err);
    char *json = malloc(n + 1);
    assert_non_null(json);
    vt_assert_ok(vdnn_plan_json(plan, json, n + 1, NULL, &err), err);
    *aux = 0;
    for (const char *at = json; (at = strstr(at, "\"kind\": \"aux\"")); at++) ++*aux;
    free(json);
    vdnn_plan_free(plan);
    return s;
}

/* Through the public calls, as `vdnn plan vgg16 --profile FIXTURE` makes them: the plan is made from the fixture's
 * op info with no backend and fits 8 GiB under auto. The same request planned with the CPU backend's op info keeps
 * the 15 ReLU masks and 5 pooling index maps as aux tensors; the CUDA plan keeps none, and instead the maps ReLU and
 * pooling backward read (y, and pooling's x), so the two plans' peaks differ. */
static void test_plans_without_gpu(void **state)
{
    (void)state;
    vdnn_model_t *m = NULL;
    vdnn_profile_t *prof = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_load(VDNN_SOURCE_DIR "/models/vgg16.cfg", &m, &err), err);
    vt_assert_ok(vdnn_profile_load(FIXTURE, m, fixture_input, 0, &prof, &err), err);
    vdnn_profile_summary ps;
    vdnn_profile_summarize(prof, &ps);
    assert_true(ps.op_info);
    assert_string_equal(ps.op_info_source, "described");
    int aux = -1;
    vdnn_plan_summary gpu = plan_with(m, NULL, prof, VDNN_POLICY_AUTO, (size_t)8 << 30, &aux);
    assert_true(gpu.feasible);
    vdnn_backend_t *cpu = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    int g_aux = -1, c_aux = -1;
    vdnn_plan_summary g0 = plan_with(m, NULL, prof, VDNN_POLICY_NONE, SIZE_MAX, &g_aux);
    vdnn_plan_summary c0 = plan_with(m, cpu, prof, VDNN_POLICY_NONE, SIZE_MAX, &c_aux);
    assert_int_equal(g_aux, 0);
    assert_int_equal(c_aux, 20);
    assert_true(g0.peak_device_bytes != c0.peak_device_bytes);
    /* Checking the CPU backend against the fixture says whose op info it is and where they first differ. */
    vt_assert_error(vdnn_profile_check_backend(prof, m, cpu, &err), err, VDNN_ERR_MISMATCH, "is not this cpu backend's");
    vdnn_backend_destroy(cpu);
    vdnn_profile_free(prof);
    vdnn_model_free(m);
}

#ifdef VDNN_HAVE_CUDA
/* The settings the fixture is described under: the backend's defaults, fixed here so that no environment
 * variable changes them. */
static vdnn_cuda_options fixture_options(void)
{
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 1;
    o.deterministic = 0;
    o.benchmark = 0;
    o.conv_ws_limit = SIZE_MAX;
    o.conv_find_limit = (size_t)4 << 30;
    o.tensor_values = 0x7fffffff;
    return o;
}

static const char fixture_note[] =
    "Described, not measured: written without a GPU by tests/test_profile_fixture.c (VDNN_FIXTURE_OUT=PATH) from the "
    "CUDA backend's own op rules (vdnn_cuda_describe_op) for compute capability 9.0, fp32 maps, TF32 on, "
    "deterministic and benchmark off. Exact (the backend's code): what each op keeps for backward and what its "
    "backward reads (ReLU: y, no mask; max pooling: x and y, no indices; batch norm: saved statistics; softmax: "
    "y) and the backend's own scratch. Derived, not cuDNN's answer: every convolution lists one candidate, "
    "cuDNN's documented zero-workspace algorithms (implicit-GEMM forward, backward-data and backward-filter "
    "algorithm 0), so convolution workspace is 0 and the faster candidates with workspace a device lists are "
    "missing: convolution scratch in these plans is a lower bound. Times are a roofline estimate (measured: false), "
    "not measurements: 4.95e14 flop/s (H100 SXM TF32 dense, datasheet), 3.35e12 B/s memory (datasheet), "
    "5.5e10 B/s host link each way (PCIe gen5 x16, docs). Replace with `vdnn profile vgg16 --device cuda --batch 64 "
    "--out FILE` on the GPU.";

/* The CUDA backend's device-less description of every vgg16 layer at the fixture's batch. */
static vdnn_layer_algos *describe_all(const vdnn_graph_t *g)
{
    const vdnn_cuda_options o = fixture_options();
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    assert_non_null(algos);
    vdnn_error err;
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, true, &d);
        bool derived = false;
        vt_assert_ok(vdnn_cuda_describe_op(&o, 9, 0, &d, algos[l].a, &algos[l].n, &derived, &err), err);
        assert_int_equal(derived, g->layers[l].kind == VDNN_LAYER_CONV);
    }
    return algos;
}

/* Writes the fixture to path: the estimate's times, the description's op info and device. */
static void write_fixture(const vdnn_graph_t *g, vdnn_layer_algos *algos, const char *path)
{
    vdnn_profile q;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate(g, 4.95e14, 3.35e12, 5.5e10, &q, &err), err);
    snprintf(q.device, sizeof q.device, "cuda");
    const vdnn_cuda_options o = fixture_options();
    vt_assert_ok(vdnn_cuda_describe_offline(&o, 9, 0, "NVIDIA H100 (described: compute capability 9.0, no device asked)",
                                            &q.dev, &err),
                 err);
    q.ops = algos;
    q.dtype = VDNN_DTYPE_F32;
    snprintf(q.op_info_source, sizeof q.op_info_source, "described");
    snprintf(q.note, sizeof q.note, "%s", fixture_note);
    vt_assert_ok(vdnn_profile_write(path, &q, &err), err);
    q.ops = NULL; /* the caller's */
    vdnn_profile_release(&q);
}

/* The committed op info is the description the CUDA backend gives now. */
static void test_matches_cuda_backend(void **state)
{
    (void)state;
    vdnn_graph_t *g = vgg16_at_fixture();
    vdnn_layer_algos *algos = describe_all(g);
    const char *out = getenv("VDNN_FIXTURE_OUT");
    if (out && *out) write_fixture(g, algos, out);
    vdnn_profile p;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_read(FIXTURE, g, &p, &err), err);
    char why[256] = "";
    if (vdnn_profile_ops_differ(&p, algos, why, sizeof why))
        fail_msg("the fixture's op info is not the CUDA backend's description (%s): regenerate it with "
                 "VDNN_FIXTURE_OUT=%s",
                 why, FIXTURE);
    /* Deterministic mode's convolution workspaces are not guessed. */
    vdnn_cuda_options det = fixture_options();
    det.deterministic = 1;
    vdnn_op_desc d;
    vdnn_op_desc_from_layer(g, 1, true, &d);
    vdnn_op_algo a[VDNN_MAX_ALGOS];
    int n = 0;
    bool derived = false;
    vt_assert_error(vdnn_cuda_describe_op(&det, 9, 0, &d, a, &n, &derived, &err), err, VDNN_ERR_UNSUPPORTED,
                    "only cuDNN on the device");
    vdnn_profile_release(&p);
    free(algos);
    vdnn_graph_free(g);
}
#endif

#ifdef VDNN_HAVE_CUDA
/* One plan's in-core peak from a profile, for the model at that input and precision. */
static size_t incore_peak(const vdnn_model_t *m, const vdnn_profile_t *p, vdnn_shape in, vdnn_precision prec)
{
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.precision = prec;
    vdnn_plan_t *plan = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_create(m, NULL, p, in, 0, &mem, &plan, &err), err);
    vdnn_plan_summary s;
    vt_assert_ok(vdnn_plan_summarize(plan, &s, &err), err);
    assert_true(s.feasible);
    vdnn_plan_free(plan);
    return s.peak_device_bytes;
}
#endif

/* vdnn_profile_describe_gpu_model (`vdnn profile --describe-gpu`): in CUDA builds a described profile whose op info is
 * what the backend describes layer by layer, that plans its model here (gpt-mini in bf16 in-core in well under fp32's)
 * and reads back from its file to the same plan; a precision the GPU lacks is refused naming the layer, a compute
 * capability out of range is an argument error. Without the CUDA backend it says it cannot. */
static void test_describe_gpu_model(void **state)
{
    (void)state;
    vdnn_model_t *m = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_load(VDNN_SOURCE_DIR "/models/gpt-mini.cfg", &m, &err), err);
    const vdnn_shape in = {8, 1, 64, 1};
    vdnn_gpu_description gpu = {.name = "H100 SXM", .cc_major = 9, .cc_minor = 0, .tf32 = 1};
    vdnn_profile_t *p = NULL;
    vdnn_status st = vdnn_profile_describe_gpu_model(m, in, 0, VDNN_PRECISION_BF16, &gpu, &p, &err);
#ifndef VDNN_HAVE_CUDA
    vt_assert_error(st, err, VDNN_ERR_UNSUPPORTED, "built without the CUDA backend");
    assert_null(p);
#else
    vt_assert_ok(st, err);
    vdnn_profile_summary ps;
    vdnn_profile_summarize(p, &ps);
    assert_string_equal(ps.op_info_source, "described");
    assert_false(ps.measured);
    assert_true(ps.op_info);
    assert_string_equal(ps.device_info.compute, "9.0");
    assert_non_null(strstr(ps.device_info.name, "H100 SXM"));
    /* Layer by layer, the backend's own description of the bf16 ops. */
    vdnn_graph_t *g = vt_load_zoo("gpt-mini");
    vt_assert_ok(vdnn_graph_resolve(g, in, 0, &err), err);
    g->dtype = VDNN_DTYPE_BF16;
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = 1;
    o.deterministic = 0;
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    assert_non_null(algos);
    for (int l = 1; l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, true, &d);
        bool derived;
        vt_assert_ok(vdnn_cuda_describe_op(&o, 9, 0, &d, algos[l].a, &algos[l].n, &derived, &err), err);
    }
    char why[256] = "";
    if (vdnn_profile_ops_differ(p, algos, why, sizeof why)) fail_msg("described profile: %s", why);
    free(algos);
    vdnn_graph_free(g);
    /* Plans from it: bf16 in-core under three quarters of fp32's; and the same plan after a round trip. */
    const size_t bf16 = incore_peak(m, p, in, VDNN_PRECISION_BF16);
    vdnn_profile_t *f = NULL;
    vt_assert_ok(vdnn_profile_describe_gpu_model(m, in, 0, VDNN_PRECISION_FP32, &gpu, &f, &err), err);
    const size_t fp32 = incore_peak(m, f, in, VDNN_PRECISION_FP32);
    printf("gpt-mini b8 t64 in-core on a described H100: bf16 %zu bytes, fp32 %zu (%.3f)\n", bf16, fp32,
           (double)bf16 / (double)fp32);
    assert_true(bf16 < fp32 / 4 * 3);
    char dir[256], path[320];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/h100.json", dir);
    vt_assert_ok(vdnn_profile_save(p, path, &err), err);
    vdnn_profile_t *r = NULL;
    vt_assert_ok(vdnn_profile_load(path, m, in, 0, &r, &err), err);
    assert_int_equal(incore_peak(m, r, in, VDNN_PRECISION_BF16), bf16);
    vt_rmdir(dir);
    /* bf16 on a V100, and a compute capability that is none. */
    gpu.cc_major = 7;
    vdnn_profile_t *v = NULL;
    vt_assert_error(vdnn_profile_describe_gpu_model(m, in, 0, VDNN_PRECISION_BF16, &gpu, &v, &err), err,
                    VDNN_ERR_UNSUPPORTED, "layer 'wte'");
    assert_null(v);
    gpu.cc_major = 2;
    vt_assert_error(vdnn_profile_describe_gpu_model(m, in, 0, VDNN_PRECISION_FP32, &gpu, &v, &err), err,
                    VDNN_ERR_INVALID_ARG, "compute capability 2.0");
    vdnn_profile_free(r);
    vdnn_profile_free(f);
#endif
    vdnn_profile_free(p);
    vdnn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads),
        cmocka_unit_test(test_cuda_rules_not_cpu),
        cmocka_unit_test(test_plans_without_gpu),
        cmocka_unit_test(test_describe_gpu_model),
#ifdef VDNN_HAVE_CUDA
        cmocka_unit_test(test_matches_cuda_backend),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
