/* Profiles that carry op info: the round trip of the device description and every layer's candidates; a plan made
 * from a profile with no backend equals the plan the recording backend makes (JSON text, and every block's offset,
 * class and action), for several zoo nets and policies;
 * older files (format version 1, no op info) fall back to the CPU backend's op info; newer, malformed and truncated
 * files, and profiles made for another batch or another backend, fail with messages that name the file or what
 * differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "plan/op_source.h"
#include "plan/profile.h"
#include "testutil.h"
#include "vdnn/model.h"
#include "vdnn/plan.h"

/* A roofline estimate of model m at (in, classes) with the op info of be recorded into it, as a measuring run
 * records it. */
static vdnn_profile_t *profile_with_ops(const vdnn_model_t *m, vdnn_shape in, int classes, vdnn_backend_t *be)
{
    vdnn_profile_t *p = NULL;
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate_model(m, in, classes, 1e12, 1e11, 1e10, 1e10, &p, &err), err);
    vt_assert_ok(vdnn_graph_resolved_copy(m, in, classes, &g, &err), err);
    vt_assert_ok(vdnn_profile_record_ops(p, g, be, &err), err);
    vdnn_graph_free(g);
    return p;
}


/* The plan's JSON text (malloc'd). */
static char *plan_json(const vdnn_model_t *m, vdnn_backend_t *be, const vdnn_profile_t *prof, vdnn_shape in,
                       const vdnn_memory_options *mem, vdnn_plan_summary *sum)
{
    vdnn_plan_t *plan = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_create(m, be, prof, in, 0, mem, &plan, &err), err);
    if (sum) vt_assert_ok(vdnn_plan_summarize(plan, sum, &err), err);
    size_t n = 0;
    vt_assert_ok(vdnn_plan_json(plan, NULL, 0, &n, &err), err);
    char *text = malloc(n + 1);
    assert_non_null(text);
    vt_assert_ok(vdnn_plan_json(plan, text, n + 1, NULL, &err), err);
    vdnn_plan_free(plan);
    return text;
}

static vdnn_model_t *zoo(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.cfg", VDNN_SOURCE_DIR, name);
    vdnn_model_t *m = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_model_load(path, &m, &err), err);
    return m;
}

/* The two plans place every block at the same offset over the same steps, give every storage the same class and
 * host place, choose the same algorithms and replay the same actions: what the JSON text does not show. */
static void assert_same_placement(const vdnn_plan_t *a, const vdnn_plan_t *b, const char *what)
{
    if (a->n_storages != b->n_storages || a->n_blocks != b->n_blocks || a->n_actions != b->n_actions ||
        a->peak_device_bytes != b->peak_device_bytes)
        fail_msg("%s: %d/%d storages, %d/%d blocks, %d/%d actions, peak %zu/%zu", what, a->n_storages, b->n_storages,
                 a->n_blocks, b->n_blocks, a->n_actions, b->n_actions, a->peak_device_bytes, b->peak_device_bytes);
    for (int i = 0; i < a->n_storages; i++)
        if (a->st[i].cls != b->st[i].cls || a->st[i].host_offset != b->st[i].host_offset || a->st[i].bytes != b->st[i].bytes)
            fail_msg("%s: storage %s differs", what, a->st[i].name);
    for (int i = 0; i < a->n_blocks; i++) {
        const vdnn_block *x = &a->blocks[i], *y = &b->blocks[i];
        if (x->storage != y->storage || x->bytes != y->bytes || x->offset != y->offset || x->begin != y->begin ||
            x->end != y->end)
            fail_msg("%s: block %d: offset %zu/%zu, %zu/%zu bytes", what, i, x->offset, y->offset, x->bytes, y->bytes);
    }
    for (int i = 0; i < a->n_actions; i++) {
        const vdnn_action *x = &a->actions[i], *y = &b->actions[i];
        if (x->kind != y->kind || x->a != y->a || x->b != y->b || x->event != y->event)
            fail_msg("%s: action %d differs", what, i);
    }
    for (int l = 1; l < a->n_layers; l++)
        if (a->algo[l] != b->algo[l]) fail_msg("%s: layer %d runs candidate %d/%d", what, l, a->algo[l], b->algo[l]);
}

/* Written and read back, the op info, device description and provenance are what was recorded. */
static void test_round_trip(void **state)
{
    (void)state;
    vdnn_model_t *m = zoo("resnet18");
    const vdnn_shape in = {2, 3, 32, 32};
    vdnn_backend_t *cpu = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_profile_t *a = profile_with_ops(m, in, 10, cpu);
    char dir[256], path[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    vt_assert_ok(vdnn_profile_save(a, path, &err), err);
    vdnn_profile_t *b = NULL;
    vt_assert_ok(vdnn_profile_load(path, m, in, 10, &b, &err), err);
    assert_int_equal(b->version, VDNN_PROFILE_VERSION);
    assert_string_equal(b->op_info_source, "backend");
    assert_string_equal(b->dev.backend, "cpu");
    assert_string_equal(b->dev.name, a->dev.name);
    assert_string_equal(b->dev.library, a->dev.library);
    assert_string_equal(b->dev.settings, a->dev.settings);
    assert_int_equal(b->dev.tf32, -1);
    assert_int_equal(b->dtype, a->dtype);
    assert_non_null(b->ops);
    char why[256] = "";
    if (vdnn_profile_ops_differ(b, a->ops, why, sizeof why)) fail_msg("read back: %s", why);
    for (int l = 1; l < a->n_layers; l++) {
        assert_int_equal(b->ops[l].n, a->ops[l].n);
        for (int k = 0; k < a->ops[l].n; k++) {
            assert_string_equal(b->ops[l].a[k].name, a->ops[l].a[k].name);
            assert_memory_equal(&b->ops[l].a[k].info, &a->ops[l].a[k].info, sizeof a->ops[l].a[k].info);
            assert_int_equal(b->ops[l].a[k].numerics, a->ops[l].a[k].numerics);
        }
    }
    vdnn_profile_summary s;
    vdnn_profile_summarize(b, &s);
    assert_true(s.op_info);
    assert_string_equal(s.device_info.backend, "cpu");
    assert_int_equal(s.version, VDNN_PROFILE_VERSION);
    /* The backend it was recorded on agrees with it. */
    vt_assert_ok(vdnn_profile_check_backend(b, m, cpu, &err), err);
    vdnn_profile_free(a);
    vdnn_profile_free(b);
    vdnn_backend_destroy(cpu);
    vt_rmdir(dir);
    vdnn_model_free(m);
}

/* The plan from a profile's op info (no backend) is the plan the backend it was recorded on makes, byte for byte,
 * for zoo nets of every shape of graph (chain, inception joins, residual adds) under static and cost-driven
 * policies, the latter at a budget between their least and their in-core peak where they have to choose. */
static void test_plan_equal(void **state)
{
    (void)state;
    struct {
        const char *name;
        vdnn_shape in;
    } nets[] = {{"lenet", {4, 1, 28, 28}},
                {"alexnet", {2, 3, 63, 63}},
                {"googlenet", {2, 3, 32, 32}},
                {"vgg16", {2, 3, 32, 32}},
                {"resnet18", {2, 3, 32, 32}}};
    const vdnn_policy policies[] = {VDNN_POLICY_NONE,      VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_RECOMPUTE,
                                    VDNN_POLICY_DYN,       VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
    vdnn_backend_t *cpu = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    char dir[256], path[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.json", dir);
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        vdnn_model_t *m = zoo(nets[i].name);
        vdnn_profile_t *rec = profile_with_ops(m, nets[i].in, 10, cpu), *prof = NULL;
        /* Through the file, as another machine would read it. */
        vt_assert_ok(vdnn_profile_save(rec, path, &err), err);
        vt_assert_ok(vdnn_profile_load(path, m, nets[i].in, 10, &prof, &err), err);
        for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
            vdnn_memory_options mem = vdnn_memory_options_default();
            mem.policy = policies[k];
            if (policies[k] >= VDNN_POLICY_RECOMPUTE) {
                vdnn_plan_summary s;
                free(plan_json(m, cpu, prof, nets[i].in, &mem, &s));
                mem.budget = (s.min_budget_bytes + s.peak_device_bytes) / 2;
            }
            char *live = plan_json(m, cpu, prof, nets[i].in, &mem, NULL);
            char *from = plan_json(m, NULL, prof, nets[i].in, &mem, NULL);
            char what[96];
            snprintf(what, sizeof what, "%s, policy %s", nets[i].name, vdnn_policy_name(policies[k]));
            if (strcmp(live, from)) fail_msg("%s: the plan from the profile differs from the live backend's", what);
            free(live);
            free(from);
            vdnn_plan_t *pl = NULL, *pf = NULL;
            vt_assert_ok(vdnn_plan_create(m, cpu, prof, nets[i].in, 0, &mem, &pl, &err), err);
            vt_assert_ok(vdnn_plan_create(m, NULL, prof, nets[i].in, 0, &mem, &pf, &err), err);
            assert_same_placement(pl, pf, what);
            vdnn_plan_free(pl);
            vdnn_plan_free(pf);
        }
        vdnn_profile_free(rec);
        vdnn_profile_free(prof);
        vdnn_model_free(m);
    }
    vt_rmdir(dir);
    vdnn_backend_destroy(cpu);
}

/* Writes text with the first `from` replaced by `to` to dir/name; returns the path in out. */
static void write_edit(const char *dir, const char *name, const char *text, const char *from, const char *to, char *out,
                       size_t outlen)
{
    const char *at = strstr(text, from);
    if (!at) fail_msg("'%s' not in the profile text", from);
    size_t n = strlen(text), k = strlen(from), m = strlen(to);
    char *buf = malloc(n - k + m + 1);
    assert_non_null(buf);
    memcpy(buf, text, (size_t)(at - text));
    memcpy(buf + (at - text), to, m);
    strcpy(buf + (at - text) + m, at + k);
    vt_write_file(dir, name, buf, strlen(buf), out, outlen);
    free(buf);
}

static void expect_edit_fails(const char *dir, const vdnn_model_t *m, vdnn_shape in, const char *text, const char *from,
                              const char *to, vdnn_status want, const char *needle)
{
    char path[600];
    write_edit(dir, "edit.json", text, from, to, path, sizeof path);
    vdnn_profile_t *p = NULL;
    vdnn_error err;
    vt_assert_error(vdnn_profile_load(path, m, in, 10, &p, &err), err, want, needle);
    if (!strstr(err.msg, path)) fail_msg("message does not name the file: %s", err.msg);
    assert_null(p);
}

/* A file of format version 1 (no "format", "version" or op info) still reads; a plan from it with no backend uses
 * the CPU backend's op info, as before. Asked for op info directly, it says it has none. */
static void test_old_profiles(void **state)
{
    (void)state;
    vdnn_model_t *m = zoo("lenet");
    const vdnn_shape in = {4, 1, 28, 28};
    vdnn_profile_t *est = NULL, *old = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_profile_estimate_model(m, in, 10, 1e12, 1e11, 1e10, 1e10, &est, &err), err);
    char dir[256], path[512], v1[600];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/est.json", dir);
    vt_assert_ok(vdnn_profile_save(est, path, &err), err);
    size_t len;
    char *text = vt_read_file(path, &len);
    write_edit(dir, "v1.json", text, "\"format\": \"vdnn-profile\",\n  \"version\": 2,\n  ", "", v1, sizeof v1);
    vt_assert_ok(vdnn_profile_load(v1, m, in, 10, &old, &err), err);
    vdnn_profile_summary s;
    vdnn_profile_summarize(old, &s);
    assert_int_equal(s.version, 1);
    assert_false(s.op_info);
    assert_string_equal(s.device_info.backend, "");
    vdnn_backend_t *cpu = NULL;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.policy = VDNN_POLICY_AUTO;
    char *live = plan_json(m, cpu, old, in, &mem, NULL);
    char *from = plan_json(m, NULL, old, in, &mem, NULL);
    assert_string_equal(live, from);
    free(live);
    free(from);
    /* No op info to plan from, said as such. */
    vdnn_graph_t *g = NULL;
    vt_assert_ok(vdnn_graph_resolved_copy(m, in, 10, &g, &err), err);
    vdnn_layer_algos *algos = calloc((size_t)g->n_layers, sizeof *algos);
    assert_non_null(algos);
    const vdnn_op_source src = vdnn_op_source_profile(old);
    vt_assert_error(vdnn_op_source_algos(&src, g, true, algos, NULL, &err), err, VDNN_ERR_INVALID_ARG,
                    "records no op info");
    /* Nor is there anything to check a backend against. */
    vt_assert_ok(vdnn_profile_check_backend(old, m, cpu, &err), err);
    free(algos);
    vdnn_graph_free(g);
    free(text);
    vdnn_backend_destroy(cpu);
    vdnn_profile_free(est);
    vdnn_profile_free(old);
    vt_rmdir(dir);
    vdnn_model_free(m);
}

/* Newer versions, malformed op info and truncation: errors with file, line and column; made for something else:
 * errors saying what differs. */
static void test_bad_files(void **state)
{
    (void)state;
    vdnn_model_t *m = zoo("lenet");
    const vdnn_shape in = {4, 1, 28, 28};
    vdnn_backend_t *cpu = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_profile_t *a = profile_with_ops(m, in, 10, cpu), *p = NULL;
    char dir[256], path[512], bad[600];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ops.json", dir);
    vt_assert_ok(vdnn_profile_save(a, path, &err), err);
    size_t len;
    char *text = vt_read_file(path, &len);

    const vdnn_status F = VDNN_ERR_FORMAT, M = VDNN_ERR_MISMATCH;
    expect_edit_fails(dir, m, in, text, "\"version\": 2", "\"version\": 3", F, "format version 3 is newer than this vdnn reads");
    expect_edit_fails(dir, m, in, text, "\"version\": 2", "\"version\": \"2\"", F, "\"version\" must be a whole number");
    expect_edit_fails(dir, m, in, text, "\"vdnn-profile\"", "\"vdnn-plan\"", F, "\"format\" must be \"vdnn-profile\"");
    expect_edit_fails(dir, m, in, text, "\"aux_bytes\": ", "\"aux_byte\": 0, \"x\": ", F, "unknown key \"aux_byte\" in an op candidate");
    expect_edit_fails(dir, m, in, text, "\"fwd_ws_bytes\": ", "\"fwd_ws_bytes\": -", F, "\"fwd_ws_bytes\" must be a whole number");
    expect_edit_fails(dir, m, in, text, "\"bwd_needs_x\": true", "\"bwd_needs_x\": 1", F, "\"bwd_needs_x\" must be true or false");
    expect_edit_fails(dir, m, in, text, ", \"chunk_images\": 0", "", F, "missing \"chunk_images\"");
    expect_edit_fails(dir, m, in, text, "\"ops\": [", "\"ops\": [], \"x\": [", F, "\"ops\" must be an array of 1 to 4");
    expect_edit_fails(dir, m, in, text, "\"op_info_source\": \"backend\"", "\"op_info_source\": \"guess\"", F,
                      "\"op_info_source\" must be");
    expect_edit_fails(dir, m, in, text, "\"op_info_source\": \"backend\",", "", F, "missing \"op_info_source\"");
    expect_edit_fails(dir, m, in, text, "\"device_info\": {", "\"x\": {", F, "missing \"device_info\"");
    expect_edit_fails(dir, m, in, text, "\"precision\": \"fp32\"", "\"precision\": \"fp64\"", F, "\"precision\" must be");
    /* Op info on some layers only. */
    const char *second = strstr(strstr(text, "\"ops\": [") + 1, ", \"ops\": [");
    assert_non_null(second);
    const char *end = strstr(second, "]}");
    char cut[1024];
    snprintf(cut, sizeof cut, "%.*s", (int)(end + 1 - second), second);
    expect_edit_fails(dir, m, in, text, cut, "", F, "but the layers before it do");
    /* Another definition of the model: a layer's kind or shape. */
    expect_edit_fails(dir, m, in, text, "\"kind\": \"conv\"", "\"kind\": \"relu\"", M, "not what the profile says");
    expect_edit_fails(dir, m, in, text, "\"out\": \"4x", "\"out\": \"5x", M, "another definition of the model");

    /* Every proper prefix (the file truncated anywhere) is an error naming the file. */
    size_t last = (size_t)(strrchr(text, '}') - text);
    for (size_t k = 0; k <= last; k += 7) {
        vt_write_file(dir, "cut.json", text, k, bad, sizeof bad);
        vdnn_status st = vdnn_profile_load(bad, m, in, 10, &p, &err);
        if (st != VDNN_ERR_FORMAT || !strstr(err.msg, "cut.json"))
            fail_msg("prefix of %zu bytes: %s %s", k, vdnn_status_name(st), err.msg);
    }
    vdnn_profile_free(a);
    free(text);
    vdnn_backend_destroy(cpu);
    vt_rmdir(dir);
    vdnn_model_free(m);
}

/* Op sizes depend on the batch: a plan for micro-batches (smaller ones) from a profile's op info is refused, naming
 * both batches. A backend whose op info differs is named with the first layer and field. */
static void test_mismatch(void **state)
{
    (void)state;
    vdnn_model_t *m = zoo("lenet");
    const vdnn_shape in = {4, 1, 28, 28};
    vdnn_backend_t *cpu = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_open("cpu", 1, &cpu, &err), err);
    vdnn_profile_t *p = profile_with_ops(m, in, 10, cpu);
    vdnn_memory_options mem = vdnn_memory_options_default();
    mem.micro_batches = 2;
    vdnn_plan_t *plan = NULL;
    vt_assert_error(vdnn_plan_create(m, NULL, p, in, 0, &mem, &plan, &err), err, VDNN_ERR_MISMATCH,
                    "op info is for batch 4 at 1x28x28, the plan is for batch 2");
    assert_null(plan);
    /* The same profile with the live backend plans (its own op info at the micro-batch). */
    vt_assert_ok(vdnn_plan_create(m, cpu, p, in, 0, &mem, &plan, &err), err);
    vdnn_plan_free(plan);
    int l = 1;
    p->ops[l].a[0].info.aux_bytes += 64;
    vt_assert_error(vdnn_profile_check_backend(p, m, cpu, &err), err, VDNN_ERR_MISMATCH, "aux_bytes");
    if (!strstr(err.msg, p->names[l])) fail_msg("does not name layer %s: %s", p->names[l], err.msg);
    vdnn_profile_free(p);
    vdnn_backend_destroy(cpu);
    vdnn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_plan_equal), cmocka_unit_test(test_old_profiles),
        cmocka_unit_test(test_bad_files),  cmocka_unit_test(test_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
