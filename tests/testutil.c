/* Shared helpers for the cmocka tests. */
#include "testutil.h"

#include "backend/backend.h"
#include "exec/net_impl.h"
#include "plan/planner.h"
#include "train/net_checkpoint.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vt_tmpdir(char *buf, size_t len)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(buf, len, "%s/vdnn-test-XXXXXX", base);
    if (!mkdtemp(buf)) fail_msg("mkdtemp failed for %s", buf);
}

void vt_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void vt_write_file(const char *dir, const char *name, const void *data, size_t len, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    FILE *f = fopen(out, "wb");
    if (!f) fail_msg("cannot write %s", out);
    if (len && fwrite(data, 1, len, f) != len) fail_msg("short write %s", out);
    fclose(f);
}

void vt_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((double)(s >> 11) / 9007199254740992.0);
    }
}

vdnn_graph_t *vt_load_zoo(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s.cfg", VDNN_SOURCE_DIR, name);
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_load(path, &g, &err), err);
    return g;
}

void vt_assert_same_checkpoint(const char *what, const vdnn_checkpoint *want, const vdnn_checkpoint *got)
{
    assert_int_equal(want->n_tensors, got->n_tensors);
    assert_true(want->n_tensors > 0);
    for (int i = 0; i < want->n_tensors; i++) {
        const vdnn_ckpt_tensor *a = &want->tensors[i], *b = &got->tensors[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->count, b->count);
        if (memcmp(a->data, b->data, a->count * sizeof(float))) {
            size_t k = 0;
            while (!memcmp(&a->data[k], &b->data[k], sizeof(float))) k++;
            fail_msg("%s: tensor %s differs at [%zu]: %.9g vs %.9g", what, a->name, k, (double)a->data[k],
                     (double)b->data[k]);
        }
    }
}


/* VDNN_TEST_PRECISION's type (fp32 unset); an unknown name ends the program. */
static vdnn_dtype precision_named(void)
{
    const char *v = getenv("VDNN_TEST_PRECISION");
    if (!v || !*v) return VDNN_DTYPE_F32;
    vdnn_dtype t = VDNN_DTYPE_COUNT;
    for (int i = 0; i < VDNN_DTYPE_COUNT; i++)
        if (!strcmp(v, vdnn_dtype_name((vdnn_dtype)i))) t = (vdnn_dtype)i;
    if (t == VDNN_DTYPE_COUNT) {
        fprintf(stderr, "VDNN_TEST_PRECISION=%s: expected fp32, bf16 or fp16\n", v);
        exit(1);
    }
    return t;
}

vdnn_dtype vt_test_precision(void)
{
    const vdnn_dtype t = precision_named();
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    if (vdnn_backend_cpu_create(&co, &be, &err) != VDNN_OK) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        exit(1);
    }
    vdnn_status st = vdnn_backend_check_dtype(be, t, NULL, &err);
    vdnn_backend_destroy(be);
    if (st != VDNN_OK) {
        printf("skipped: %s\n", err.msg);
        exit(77);
    }
    return t;
}

char *vt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

int vt_cpu_backend_setup(void **state)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    if (vdnn_backend_cpu_create(&co, &be, &err) != VDNN_OK) return -1;
    *state = be;
    return 0;
}

int vt_cpu_backend_teardown(void **state)
{
    vdnn_backend_destroy(*state);
    return 0;
}

void vt_train_batches(vdnn_net_t *net, const vdnn_dataset_t *ds, int batch, int first, int n, float lr, float *loss,
                      const char *what)
{
    vdnn_error err;
    const size_t per_image = (size_t)ds->c * (size_t)ds->h * (size_t)ds->w;
    for (int s = first; s < first + n; s++) {
        float l = 0;
        vt_assert_ok(vdnn_net_train_step(net, ds->images + per_image * (size_t)s * (size_t)batch,
                                         ds->labels + (size_t)ds->labels_per * (size_t)s * (size_t)batch, lr, &l, &err),
                     err);
        if (!isfinite(l)) fail_msg("%s: step %d loss %g", what, s, (double)l);
        if (loss) loss[s - first] = l;
    }
}

static void write_words(const char *path, const char *const *words, size_t n_words, uint64_t seed, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t s = seed;
    for (size_t n = 0; n < bytes;) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(s >> 33) % n_words];
        n += fwrite(w, 1, strlen(w), f);
    }
    fclose(f);
}

void vt_text_env_open(vt_text_env *e, const char *model, int batch, int seq, int steps, const char *const *words,
                      size_t n_words, uint64_t seed, size_t bytes)
{
    vdnn_error err;
    memset(e, 0, sizeof *e);
    assert_in_range(steps, 1, VT_TEXT_MAX_STEPS);
    e->batch = batch;
    e->seq = seq;
    e->steps = steps;
    snprintf(e->model, sizeof e->model, "%s", model);
    snprintf(e->path, sizeof e->path, "/tmp/vdnn_test_%s_%d.txt", model, (int)getpid());
    write_words(e->path, words, n_words, seed, bytes);
    e->g = vt_load_zoo(model);
    vt_assert_ok(vdnn_graph_resolve(e->g, (vdnn_shape){batch, 1, seq, 1}, 256, &err), err);
    /* The maps' type: VDNN_TEST_PRECISION's, if this machine runs the model in it (else the program is skipped). */
    e->g->dtype = precision_named();
    vt_assert_ok(vdnn_profile_estimate(e->g, 4e13, 2e12, 16e9, &e->prof, &err), err);
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &e->be, &err), err);
    if (vdnn_backend_check_dtype(e->be, e->g->dtype, e->g, &err) != VDNN_OK) {
        printf("skipped: %s\n", err.msg);
        exit(VT_EXIT_SKIPPED);
    }
    char spec[300];
    snprintf(spec, sizeof spec, "text:%s", e->path);
    vt_assert_ok(vdnn_dataset_open(spec, VDNN_SPLIT_TRAIN, (vdnn_shape){0, 1, seq, 1}, 0, 0, &e->ds, &err), err);
    assert_true(e->ds->count >= batch * steps);
    e->info = calloc((size_t)e->g->n_layers, sizeof *e->info);
    assert_non_null(e->info);
    vt_assert_ok(vdnn_plan_query_ops(e->g, e->be, true, e->info, &err), err);
}

void vt_text_env_close(vt_text_env *e)
{
    free(e->info);
    vdnn_profile_release(&e->prof);
    vdnn_dataset_free(e->ds);
    vdnn_backend_destroy(e->be);
    vdnn_graph_free(e->g);
    remove(e->path);
}

vdnn_net_options vt_text_options(const vt_text_env *e, vdnn_policy pol, size_t budget, uint64_t seed)
{
    vdnn_net_options cfg = vdnn_net_options_default();
    cfg.batch = e->batch;
    cfg.in_c = 1;
    cfg.in_h = e->seq;
    cfg.in_w = 1;
    cfg.classes = 256;
    cfg.memory.policy = pol;
    cfg.memory.budget = budget;
    cfg.memory.poison = true;
    cfg.memory.precision = (vdnn_precision)e->g->dtype;
    cfg.seed = seed;
    cfg.profile = &e->prof;
    return cfg;
}

static int count_class(const vdnn_plan_t *p, vdnn_tensor_class c)
{
    int n = 0;
    for (int i = 0; i < p->n_storages_analyzed; i++) n += p->st[i].cls == c;
    return n;
}

vdnn_net_t *vt_text_train(const vt_text_env *e, const vdnn_net_options *cfg, float lr, vt_text_run *r)
{
    vdnn_net_t *net = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_net_create(e->g, e->be, cfg, &net, &err), err);
    char what[96];
    snprintf(what, sizeof what, "%s/%s", e->model, vdnn_policy_name(cfg->memory.policy));
    const vdnn_plan_t *p = net->plan_train;
    assert_true(p->feasible);
    vt_train_batches(net, e->ds, e->batch, 0, e->steps, lr, r->loss, what);
    r->train_peak = p->peak_device_bytes;
    r->bytes_moved = p->bytes_moved;
    r->n_swap = count_class(p, VDNN_CLASS_SWAP);
    r->n_recompute = count_class(p, VDNN_CLASS_RECOMPUTE);
    if (net->arena.high_water != r->train_peak)
        fail_msg("%s: arena high-water %zu != planned training peak %zu", what, net->arena.high_water, r->train_peak);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    return net;
}

void vt_text_assert_same_run(const vt_text_env *e, const char *head, const vt_text_run *ref, const vt_text_run *r)
{
    vt_assert_same_checkpoint(head, &ref->ck, &r->ck);
    for (int s = 0; s < e->steps; s++)
        if (memcmp(&ref->loss[s], &r->loss[s], sizeof(float)))
            fail_msg("%s: step %d loss %.9g, none gave %.9g", head, s, (double)r->loss[s], (double)ref->loss[s]);
}

size_t vt_text_min_budget(const vt_text_env *e)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.profile = &e->prof;
    size_t least = 0;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_min_budget(e->g, e->info, &rq, &least, &err), err);
    return least;
}

size_t vt_text_planner_budget(const vt_text_env *e, vdnn_policy pol, size_t least, size_t peak)
{
    const size_t budgets[3] = {(least + peak) / 2, (least + 3 * peak) / 4, peak};
    vdnn_error err;
    for (int b = 0; b < 3; b++) {
        vdnn_plan_request rq = vdnn_plan_request_default();
        rq.memory.policy = pol;
        rq.memory.budget = budgets[b];
        rq.profile = &e->prof;
        vdnn_plan_t *p = NULL;
        vt_assert_ok(vdnn_plan_build(e->g, e->info, &rq, &p, &err), err);
        const bool fits = p->feasible;
        vdnn_plan_free(p);
        if (fits) return budgets[b];
    }
    return peak;
}

void vt_text_policies_bitwise(const vt_text_env *e, const char *model, vt_text_train_fn train, const vt_text_run *ref)
{
    const size_t least = vt_text_min_budget(e);
    assert_true(least < ref->train_peak);
    const vdnn_policy pols[] = {VDNN_POLICY_ALL, VDNN_POLICY_CONV, VDNN_POLICY_RECOMPUTE, VDNN_POLICY_DYN,
                                VDNN_POLICY_POOCH, VDNN_POLICY_AUTO};
    int all_swaps = 0;
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        const bool planner = pols[k] != VDNN_POLICY_ALL && pols[k] != VDNN_POLICY_CONV;
        const size_t budget = planner ? vt_text_planner_budget(e, pols[k], least, ref->train_peak) : SIZE_MAX;
        vt_text_run r;
        memset(&r, 0, sizeof r);
        train(e, pols[k], budget, &r);
        char head[96];
        snprintf(head, sizeof head, "%s/%s: against policy none", model, vdnn_policy_name(pols[k]));
        vt_text_assert_same_run(e, head, ref, &r);
        print_message("%s b%d t%d %-9s budget %zu: peak %zu (none %zu, %.0f%%), %d swapped (%zu bytes moved), %d "
                      "recomputed\n",
                      model, e->batch, e->seq, vdnn_policy_name(pols[k]), planner ? budget : 0, r.train_peak,
                      ref->train_peak, 100.0 * (double)r.train_peak / (double)ref->train_peak, r.n_swap, r.bytes_moved,
                      r.n_recompute);
        if (r.train_peak >= ref->train_peak)
            fail_msg("%s/%s: peak %zu is not below none's %zu", model, vdnn_policy_name(pols[k]), r.train_peak,
                     ref->train_peak);
        if (!planner && (r.n_swap == 0 || r.bytes_moved == 0))
            fail_msg("%s/%s: %d maps swapped, %zu bytes moved", model, vdnn_policy_name(pols[k]), r.n_swap,
                     r.bytes_moved);
        if (pols[k] == VDNN_POLICY_ALL) all_swaps = r.n_swap;
        if (pols[k] == VDNN_POLICY_CONV && r.n_swap >= all_swaps)
            fail_msg("%s/conv: swaps %d maps, all %d", model, r.n_swap, all_swaps);
        vdnn_checkpoint_release(&r.ck);
    }
}
