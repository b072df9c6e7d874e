/* A net's parameters, wherever their authoritative copy lives (device arena or host home): initialisation,
 * listing, and reads and writes by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/net_impl.h"

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* A parameter-like storage of the training plan: on the device for the whole run, or homed in the host pool. */
static bool param_like(const vdnn_storage *s) { return s->persistent || s->homed; }

/* Host address of a homed storage (its authoritative copy), or NULL for one on the device. */
static char *home_ptr(const vdnn_net_t *net, int st)
{
    const vdnn_storage *s = &net->plan_train->st[st];
    return s->homed ? (char *)net->host + s->host_offset : NULL;
}


static vdnn_storage_kind exported_kinds[] = {VDNN_ST_WEIGHT, VDNN_ST_BIAS, VDNN_ST_STATS, VDNN_ST_WMOM, VDNN_ST_BMOM};

static bool exported(vdnn_storage_kind k)
{
    for (size_t i = 0; i < sizeof exported_kinds / sizeof exported_kinds[0]; i++)
        if (exported_kinds[i] == k) return true;
    return false;
}

static int find_persistent(const vdnn_net_t *net, const char *name)
{
    const vdnn_plan_t *p = net->plan_train;
    for (int i = 0; i < p->n_storages; i++)
        if (param_like(&p->st[i]) && !strcmp(p->st[i].name, name)) return i;
    return -1;
}

/* The i-th exported storage of the training plan (-1 past the last). */
static int nth_exported(const vdnn_net_t *net, int i)
{
    const vdnn_plan_t *p = net->plan_train;
    for (int k = 0; k < p->n_storages; k++)
        if (param_like(&p->st[k]) && exported(p->st[k].kind) && i-- == 0) return k;
    return -1;
}

int vdnn_net_param_count(const vdnn_net_t *net)
{
    int n = 0;
    const vdnn_plan_t *p = net->plan_train;
    for (int k = 0; k < p->n_storages; k++) n += param_like(&p->st[k]) && exported(p->st[k].kind);
    return n;
}

vdnn_status vdnn_net_param_info(const vdnn_net_t *net, int i, vdnn_param_info *out, vdnn_error *err)
{
    int k = i >= 0 ? nth_exported(net, i) : -1;
    if (k < 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "param index %d is out of range (0 to %d)", i,
                         vdnn_net_param_count(net) - 1);
    const vdnn_storage *s = &net->plan_train->st[k];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", s->name);
    /* The prefix of its name, as before lstm parameters were shared by reference: "lstm1.params" for an lstm
     * layer's (held by its first chunk), the layer's name for the others. */
    char pre[VDNN_NAME_LEN + 16];
    vdnn_layer_param_prefix(net->g, s->layer, pre, sizeof pre);
    snprintf(out->layer, sizeof out->layer, "%.63s", s->kind == VDNN_ST_STATS ? net->g->layers[s->layer].name : pre);
    snprintf(out->kind, sizeof out->kind, "%s", vdnn_storage_kind_name(s->kind));
    out->count = s->bytes / sizeof(float);
    return VDNN_OK;
}

static char *persistent_ptr(const vdnn_net_t *net, int st)
{
    const vdnn_plan_t *p = net->plan_train;
    if (!p->st[st].persistent) return NULL;
    for (int b = 0; b < p->n_blocks; b++)
        if (p->blocks[b].storage == st) return (char *)net->dev + p->blocks[b].offset;
    return NULL;
}

/* Reads (to_host) or writes a parameter-like storage wherever its authoritative copy is. */
static vdnn_status param_io(vdnn_net_t *net, int st, void *host, bool to_host, vdnn_error *err)
{
    const size_t bytes = net->plan_train->st[st].bytes;
    char *home = home_ptr(net, st);
    if (home) {
        /* Every iteration ends with its copies done: the home holds the latest values. */
        if (to_host) memcpy(host, home, bytes);
        else memcpy(home, host, bytes);
        return VDNN_OK;
    }
    char *dev = persistent_ptr(net, st);
    if (!dev) return vdnn_fail(err, VDNN_ERR_BACKEND, "internal: '%s' has no fixed place", net->plan_train->st[st].name);
    return to_host ? net->be->ops->download(net->be, host, dev, bytes, err)
                   : net->be->ops->upload(net->be, dev, host, bytes, err);
}

float *vdnn_net_param_ptr(vdnn_net_t *net, const char *name, size_t *count)
{
    int i = find_persistent(net, name);
    if (i < 0) return NULL;
    if (count) *count = net->plan_train->st[i].bytes / sizeof(float);
    return (float *)persistent_ptr(net, i);
}

vdnn_status vdnn_net_get(vdnn_net_t *net, const char *name, float *host, size_t count, vdnn_error *err)
{
    int i = find_persistent(net, name);
    if (i < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no parameter named '%s'", name);
    if (count * sizeof(float) != net->plan_train->st[i].bytes)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "'%s' has %zu values, not %zu", name,
                         net->plan_train->st[i].bytes / sizeof(float), count);
    return param_io(net, i, host, true, err);
}

vdnn_status vdnn_net_set(vdnn_net_t *net, const char *name, const float *host, size_t count, vdnn_error *err)
{
    int i = find_persistent(net, name);
    if (i < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no parameter named '%s'", name);
    if (count * sizeof(float) != net->plan_train->st[i].bytes)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "'%s' has %zu values, not %zu", name,
                         net->plan_train->st[i].bytes / sizeof(float), count);
    return param_io(net, i, (void *)host, false, err);
}

/* PyTorch's default initialisation for conv and linear layers: weights and biases uniform in
 * +-1/sqrt(fan_in); embeddings uniform with GPT-2's spread; batch and layer norm gamma 1, beta 0, running mean 0, running variance 1. Storages the model file
 * gives values for (a pretrained ONNX model) start from those instead, so training fine-tunes them. */
vdnn_status vdnn_net_init_params(vdnn_net_t *net, vdnn_error *err)
{
    const vdnn_plan_t *p = net->plan_train;
    /* Sized by every storage the loop below fills, not by the layers' parameters alone: the labels are
     * persistent too, and at a large batch on a small net they outgrow every weight. */
    size_t max_n = 0;
    for (int i = 0; i < p->n_storages; i++)
        if (param_like(&p->st[i])) max_n = max_sz(max_n, p->st[i].bytes / sizeof(float));
    float *buf = malloc(max_sz(max_n, 1) * sizeof(float));
    if (!buf) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory initialising parameters");
    vdnn_status rc = VDNN_OK;
    for (int i = 0; rc == VDNN_OK && i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!param_like(s)) continue;
        const vdnn_layer *ly = &net->g->layers[s->layer];
        size_t n = s->bytes / sizeof(float);
        bool bn = ly->kind == VDNN_LAYER_BATCHNORM || ly->kind == VDNN_LAYER_LAYERNORM;
        const vdnn_param_init *given = vdnn_graph_param_init(net->g, s->name);
        if (given && given->count != n) {
            rc = vdnn_fail(err, VDNN_ERR_SHAPE,
                           "%s: the model's initial '%s' has %zu values but layer '%s' needs %zu at input %dx%dx%d "
                           "(was the model made for another input size?)",
                           net->g->source, s->name, given->count, ly->name, n, net->g->input.c, net->g->input.h,
                           net->g->input.w);
        } else if (given) {
            memcpy(buf, given->values, n * sizeof(float));
        } else if (s->kind == VDNN_ST_WEIGHT || s->kind == VDNN_ST_BIAS) {
            if (bn) {
                for (size_t k = 0; k < n; k++) buf[k] = s->kind == VDNN_ST_WEIGHT ? 1.0f : 0.0f;
            } else {
                const vdnn_shape in = net->g->layers[ly->inputs[0]].out;
                double fan_in = ly->kind == VDNN_LAYER_CONV
                                    ? (double)in.c / ly->p.groups * ly->p.kernel_h * ly->p.kernel_w
                                    : ly->kind == VDNN_LAYER_LINEAR ? (double)in.w
                                    /* nn.LSTM draws every weight and bias in +-1/sqrt(hidden) */
                                    : ly->kind == VDNN_LAYER_LSTM ? (double)ly->p.filters
                                                                   : (double)in.c * in.h * in.w;
                double bound = 1.0 / sqrt(fan_in);
                /* Embedding tables: GPT-2 draws them with standard deviation 0.02; a uniform of that spread. */
                if (ly->kind == VDNN_LAYER_EMBED || ly->kind == VDNN_LAYER_POS_EMBED) bound = 0.02 * sqrt(3.0);
                /* Seeded by the layer's index as numbered when lstm layers had parameter nodes (graph.h). */
                const uint64_t at = (uint64_t)vdnn_graph_seed_index(net->g, s->layer, true);
                uint64_t st = vdnn_mix64(net->opt.seed ^ vdnn_mix64(at * 2 + (s->kind == VDNN_ST_BIAS)));
                for (size_t k = 0; k < n; k++) {
                    uint64_t r = vdnn_mix64(st + k);
                    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
                    buf[k] = (float)((2.0 * u - 1.0) * bound);
                }
            }
        } else if (s->kind == VDNN_ST_STATS) {
            for (size_t k = 0; k < n; k++) buf[k] = k < n / 2 ? 0.0f : 1.0f;
        } else {
            for (size_t k = 0; k < n; k++) buf[k] = 0.0f;
        }
        if (rc == VDNN_OK) rc = param_io(net, i, buf, false, err);
    }
    free(buf);
    return rc;
}

