/* Policy um (OC-DNN's Unified Memory mode) without a GPU: the CPU backend given stand-in managed-memory ops (host
 * memory that never moves; prefetches counted) runs the um plan through the real executor and must give bitwise
 * the parameters of policy none; a managed pool beyond the free device memory is refused before anything is
 * allocated; and the plain CPU backend refuses um with a clear message. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "backend/backend.h"
#include "exec/net_impl.h"
#include "train/net_checkpoint.h"
#include "plan/plan.h"

/* The stand-in's state. The ops get only the backend, so it lives here, one test at a time. */
typedef struct fake_um {
    vdnn_backend_ops ops;          /* the CPU backend's, with managed memory added */
    const vdnn_backend_ops *cpu;
    size_t free_bytes;             /* what dev_free_bytes reports */
    int dev_allocs, managed_allocs;
    char *pool;
    size_t pool_bytes;
    long to_device, to_host, misplaced;
} fake_um;

static fake_um fake;

static vdnn_status fake_dev_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    fake.dev_allocs++;
    return fake.cpu->dev_alloc(be, bytes, ptr, err);
}

static size_t fake_free_bytes(vdnn_backend_t *be) { return fake.free_bytes; }

static vdnn_status fake_managed_alloc(vdnn_backend_t *be, size_t bytes, void **ptr, vdnn_error *err)
{
    fake.managed_allocs++;
    *ptr = calloc(1, bytes ? bytes : 1);
    if (!*ptr) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "fake managed_alloc of %zu bytes", bytes);
    fake.pool = *ptr;
    fake.pool_bytes = bytes;
    return VDNN_OK;
}

static void fake_managed_free(vdnn_backend_t *be, void *ptr)
{
    if (ptr == fake.pool) fake.pool = NULL;
    free(ptr);
}

/* Host and "device" are the same memory here: nothing moves, the calls are only checked and counted. */
static vdnn_status fake_prefetch(vdnn_backend_t *be, void *ptr, size_t bytes, bool to_device, vdnn_queue_id q,
                                 vdnn_error *err)
{
    const char *p = ptr;
    bool inside = fake.pool && p >= fake.pool && p + bytes <= fake.pool + fake.pool_bytes;
    if (!inside || q != (to_device ? VDNN_QUEUE_H2D : VDNN_QUEUE_D2H)) fake.misplaced++;
    if (to_device) fake.to_device++;
    else fake.to_host++;
    return VDNN_OK;
}

static vdnn_backend_t *cpu_backend(void)
{
    vdnn_cpu_options co = {.threads = 2};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    return be;
}

/* A CPU backend that also offers managed memory, reporting `free_bytes` of free device memory. */
static vdnn_backend_t *um_backend(size_t free_bytes)
{
    vdnn_backend_t *be = cpu_backend();
    memset(&fake, 0, sizeof fake);
    fake.cpu = be->ops;
    fake.ops = *be->ops;
    fake.ops.dev_alloc = fake_dev_alloc;
    fake.ops.dev_free_bytes = fake_free_bytes;
    fake.ops.managed_alloc = fake_managed_alloc;
    fake.ops.managed_free = fake_managed_free;
    fake.ops.mem_prefetch = fake_prefetch;
    fake.free_bytes = free_bytes;
    be->ops = &fake.ops;
    return be;
}

typedef struct model {
    const char *name;
    vdnn_shape in;
    int steps;
} model;

static const model lenet = {"lenet", {8, 1, 28, 28}, 3};

static void config(const model *m, vdnn_policy pol, vdnn_net_options *cfg)
{
    *cfg = vdnn_net_options_default();
    cfg->batch = m->in.n;
    cfg->in_c = m->in.c, cfg->in_h = m->in.h, cfg->in_w = m->in.w;
    cfg->classes = 10;
    cfg->memory.policy = pol;
    cfg->seed = 11;
}

typedef struct result {
    vdnn_checkpoint ck;
    float loss[4];
    int correct;
    double eval_loss;
    size_t managed_bytes;
    int swapped;
} result;

static void train(vdnn_backend_t *be, const model *m, vdnn_policy pol, bool poison, result *r)
{
    vdnn_error err;
    vdnn_graph_t *g = vt_load_zoo(m->name);
    vdnn_net_options cfg;
    config(m, pol, &cfg);
    cfg.memory.poison = poison;
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    memset(r, 0, sizeof *r);
    r->managed_bytes = net->managed_bytes;
    for (int i = 0; i < net->plan_train->n_storages; i++) r->swapped += net->plan_train->st[i].cls == VDNN_CLASS_SWAP;
    size_t n = vdnn_shape_count(net->g->input);
    float *images = malloc(n * sizeof *images);
    int32_t *labels = malloc((size_t)m->in.n * sizeof *labels);
    assert_true(images && labels);
    for (int s = 0; s < m->steps; s++) {
        vt_fill_uniform(images, n, 500 + (uint64_t)s, 0, 1);
        for (int i = 0; i < m->in.n; i++) labels[i] = (int32_t)((i * 3 + s) % 10);
        vt_assert_ok(vdnn_net_train_step(net, images, labels, 0.05f, &r->loss[s], &err), err);
    }
    vt_assert_ok(vdnn_net_eval_batch(net, images, labels, m->in.n - 1, &r->correct, &r->eval_loss, &err), err);
    vt_assert_ok(vdnn_net_export(net, &r->ck, &err), err);
    vdnn_net_free(net);
    vdnn_graph_free(g);
    free(images);
    free(labels);
}

static void same(const char *what, const result *a, const result *b, int steps)
{
    assert_int_equal(a->ck.n_tensors, b->ck.n_tensors);
    for (int i = 0; i < a->ck.n_tensors; i++) {
        assert_string_equal(a->ck.tensors[i].name, b->ck.tensors[i].name);
        if (a->ck.tensors[i].count != b->ck.tensors[i].count ||
            memcmp(a->ck.tensors[i].data, b->ck.tensors[i].data, a->ck.tensors[i].count * sizeof(float)))
            fail_msg("%s: tensor %s differs", what, a->ck.tensors[i].name);
    }
    assert_memory_equal(a->loss, b->loss, sizeof(float) * (size_t)steps);
    assert_int_equal(a->correct, b->correct);
    assert_true(a->eval_loss == b->eval_loss);
}

static void test_cpu_refuses_um(void **state)
{
    vdnn_backend_t *be = cpu_backend();
    assert_null(be->ops->managed_alloc);
    vdnn_graph_t *g = vt_load_zoo("lenet");
    vdnn_net_options cfg;
    config(&lenet, VDNN_POLICY_UM, &cfg);
    vdnn_net_t *net = (vdnn_net_t *)&net;
    vdnn_error err;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_UNSUPPORTED,
                    "policy 'um' needs the CUDA backend (Unified Memory)");
    assert_null(net);
    vdnn_graph_free(g);
    vdnn_backend_destroy(be);
}

/* The um plan through the executor: managed ranges bound, migrations issued on the right queues, and the
 * numbers of none, with --poison (freed arena blocks turn NaN, so a map read from the arena instead of its
 * managed range would show). */
static void test_um_trains_like_none(void **state)
{
    static const model models[] = {{"lenet", {8, 1, 28, 28}, 3}, {"resnet18", {2, 3, 32, 32}, 2}};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        const model *m = &models[k];
        vdnn_backend_t *cpu = cpu_backend(), *um = um_backend((size_t)1 << 40);
        result none, managed;
        train(cpu, m, VDNN_POLICY_NONE, false, &none);
        train(um, m, VDNN_POLICY_UM, true, &managed);
        char what[64];
        snprintf(what, sizeof what, "%s: um vs none", m->name);
        same(what, &managed, &none, m->steps);
        assert_true(managed.swapped > 0 && managed.managed_bytes > 0);
        assert_int_equal(fake.managed_allocs, 1);
        assert_int_equal(fake.pool_bytes, managed.managed_bytes);
        assert_null(fake.pool); /* freed with the net */
        /* Each swapped map goes out and comes back once per training step; evaluation moves nothing. */
        assert_int_equal(fake.to_host, (long)managed.swapped * m->steps);
        assert_int_equal(fake.to_device, (long)managed.swapped * m->steps);
        assert_int_equal(fake.misplaced, 0);
        vdnn_checkpoint_release(&none.ck);
        vdnn_checkpoint_release(&managed.ck);
        vdnn_backend_destroy(cpu);
        vdnn_backend_destroy(um);
    }
}

static void test_um_oversubscription(void **state)
{
    vdnn_error err;
    vdnn_graph_t *g = vt_load_zoo("lenet");
    vdnn_net_options cfg;
    config(&lenet, VDNN_POLICY_UM, &cfg);
    /* What the net needs, from a run with room to spare. */
    vdnn_backend_t *be = um_backend((size_t)1 << 40);
    vdnn_net_t *net = NULL;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    const size_t need = net->dev_bytes + net->managed_bytes;
    assert_true(net->managed_bytes > 0 && net->managed != NULL);
    assert_false(net->oversubscribed);
    vdnn_net_free(net);
    vdnn_backend_destroy(be);

    /* Exactly enough free memory: fine. */
    be = um_backend(need);
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    assert_false(net->oversubscribed);
    vdnn_net_free(net);
    vdnn_backend_destroy(be);

    /* One byte short: refused, and nothing allocated, neither managed memory nor the arena. */
    be = um_backend(need - 1);
    net = (vdnn_net_t *)&net;
    vt_assert_error(vdnn_net_create(g, be, &cfg, &net, &err), err, VDNN_ERR_BUDGET, "memory.allow_oversubscribe");
    assert_non_null(strstr(err.msg, "policy 'um'"));
    assert_non_null(strstr(err.msg, "managed pool"));
    assert_null(net);
    assert_int_equal(fake.managed_allocs, 0);
    assert_int_equal(fake.dev_allocs, 0);

    /* Asked for: allowed, and said so. */
    cfg.memory.allow_oversubscribe = true;
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    assert_true(net->oversubscribed);
    assert_int_equal(fake.managed_allocs, 1);
    vdnn_net_free(net);
    vdnn_backend_destroy(be);

    /* Only um consults the free memory: the same backend trains policy all regardless. */
    be = um_backend(1);
    config(&lenet, VDNN_POLICY_ALL, &cfg);
    vt_assert_ok(vdnn_net_create(g, be, &cfg, &net, &err), err);
    assert_int_equal(fake.managed_allocs, 0);
    assert_false(net->oversubscribed);
    vdnn_net_free(net);
    vdnn_backend_destroy(be);
    vdnn_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_refuses_um),
        cmocka_unit_test(test_um_trains_like_none),
        cmocka_unit_test(test_um_oversubscription),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
