/* ONNX ops with parameters besides convolution: BatchNormalization, Gemm, MatMul (+ Add of its bias), and Add. */
#include <stdlib.h>
#include <string.h>

#include "graph/onnx_ops.h"

vdnn_status onnx_map_batchnorm(onnx_map *x)
{
    const onnx_value *in;
    const Onnx__TensorProto *t[4]; /* scale, bias, mean, variance */
    vdnn_status st = onnx_input_layer(x, 0, 0, &in);
    for (int k = 0; k < 4 && !st; k++) st = onnx_input_const(x, k + 1, &t[k]);
    float eps, mom;
    int64_t spatial, training;
    if (!st) st = onnx_attr_float(x, "epsilon", 1e-5f, &eps);
    if (!st) st = onnx_attr_float(x, "momentum", 0.9f, &mom);
    if (!st) st = onnx_attr_int(x, "spatial", 1, 0, 1, &spatial);
    /* training_mode only says which outputs the file's runtime fills: vdnn trains with batch statistics and
     * evaluates with the running ones either way. */
    if (!st) st = onnx_attr_int(x, "training_mode", 0, 0, 1, &training);
    if (st) return st;
    if (!(eps > 0.0f && eps <= 1.0f))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "epsilon=%g is not supported (vdnn takes (0, 1])", (double)eps);
    if (!(mom >= 0.0f && mom <= 1.0f))
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "momentum=%g is not supported (vdnn takes [0, 1])", (double)mom);
    if (!spatial)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "spatial=0 (statistics per element, not per channel) is not supported");
    float *v[4] = {0};
    size_t n[4] = {0};
    for (int k = 0; k < 4 && !st; k++) st = onnx_const_floats(x, t[k], &v[k], &n[k]);
    if (!st && (n[1] != n[0] || n[2] != n[0] || n[3] != n[0]))
        st = onnx_fail(x, VDNN_ERR_PARSE, "scale, bias, mean and variance have %zu, %zu, %zu and %zu values (one per "
                       "channel each)", n[0], n[1], n[2], n[3]);
    float *stats = st ? NULL : malloc(2 * n[0] * sizeof *stats + 1);
    if (!st && !stats) st = onnx_fail(x, VDNN_ERR_NO_MEMORY, "out of memory");
    int layer;
    if (!st) st = onnx_add_layer(x, VDNN_LAYER_BATCHNORM, &in->layer, 1, in->rank, &layer);
    if (!st) {
        vdnn_layer *L = &x->g->layers[layer];
        L->p.bn_eps = eps;
        /* ONNX keeps momentum of the running value; vdnn (as PyTorch) the weight of the new batch. */
        L->p.bn_momentum = 1.0f - mom;
        memcpy(stats, v[2], n[0] * sizeof *stats);
        memcpy(stats + n[0], v[3], n[0] * sizeof *stats);
        st = onnx_set_init(x, layer, ".weight", v[0], n[0], t[0]);
        v[0] = NULL;
        if (!st) st = onnx_set_init(x, layer, ".bias", v[1], n[1], t[1]);
        v[1] = NULL;
        if (!st) st = onnx_set_init(x, layer, ".stats", stats, 2 * n[0], t[2]);
        stats = NULL;
        if (!st) x->init_src[x->g->n_init - 1].from_var = t[3]; /* export writes the second half back there */
    }
    for (int k = 0; k < 4; k++) free(v[k]);
    free(stats);
    return st;
}

/* A bias of `k` values: a vector, or a 1 x K row. */
static vdnn_status check_bias(onnx_map *x, const Onnx__TensorProto *t, int k)
{
    size_t n;
    vdnn_status st = onnx_const_count(x, t, &n);
    if (st) return st;
    bool row = t->n_dims == 1 || (t->n_dims == 2 && t->dims[0] == 1);
    if (n != (size_t)k || !row) {
        char dims[64];
        onnx_dims_str(t, dims, sizeof dims);
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "bias '%s' is %s: vdnn maps only a bias of one value per output (%d)",
                         vdnn_onnx_str(t->name), dims, k);
    }
    return VDNN_OK;
}

/* A matrix constant whose dimension `outputs_dim` is the output count. */
static vdnn_status matrix(onnx_map *x, int k, int outputs_dim, const Onnx__TensorProto **t, int *outputs)
{
    vdnn_status st = onnx_input_const(x, k, t);
    if (st) return st;
    if ((*t)->n_dims != 2 || (*t)->dims[outputs_dim] < 1 || (*t)->dims[outputs_dim] > VDNN_ONNX_MAX_COUNT ||
        (*t)->dims[1 - outputs_dim] < 1) {
        char dims[64];
        onnx_dims_str(*t, dims, sizeof dims);
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "weight '%s' is %s (vdnn maps a matrix here)",
                         vdnn_onnx_str((*t)->name), dims);
    }
    *outputs = (int)(*t)->dims[outputs_dim];
    return VDNN_OK;
}

static vdnn_status add_fc(onnx_map *x, const onnx_value *in, int outputs, bool bias, int *layer)
{
    vdnn_status st = onnx_add_layer(x, VDNN_LAYER_FC, &in->layer, 1, 2, layer);
    if (st) return st;
    x->g->layers[*layer].p.filters = outputs;
    x->g->layers[*layer].p.bias = bias;
    return VDNN_OK;
}

vdnn_status onnx_map_gemm(onnx_map *x)
{
    const onnx_value *a;
    const Onnx__TensorProto *b, *c = NULL;
    int64_t ta, tb;
    float alpha, beta;
    int outputs, layer;
    vdnn_status st = onnx_input_layer(x, 0, 2, &a);
    if (!st) st = onnx_attr_int(x, "transA", 0, 0, 1, &ta);
    if (!st) st = onnx_attr_int(x, "transB", 0, 0, 1, &tb);
    if (!st) st = onnx_attr_float(x, "alpha", 1.0f, &alpha);
    if (!st) st = onnx_attr_float(x, "beta", 1.0f, &beta);
    if (st) return st;
    if (ta) return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "transA=1 is not supported (the input must be N x features)");
    if (!tb)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "transB=0 is not supported (vdnn maps Gemm with transB=1, as PyTorch's Linear exports it, to "
                         "a fully connected layer)");
    if (alpha != 1.0f) return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "alpha=%g is not supported (only 1)", (double)alpha);
    if (onnx_has_input(x, 2) && beta != 1.0f)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "beta=%g is not supported (only 1)", (double)beta);
    if ((st = matrix(x, 1, 0, &b, &outputs))) return st;
    if (onnx_has_input(x, 2) && ((st = onnx_input_const(x, 2, &c)) || (st = check_bias(x, c, outputs)))) return st;
    /* B is outputs x inputs, vdnn's fc weight layout. */
    if ((st = add_fc(x, a, outputs, c != NULL, &layer))) return st;
    st = onnx_init_from(x, layer, ".weight", b);
    if (!st && c) st = onnx_init_from(x, layer, ".bias", c);
    return st;
}

vdnn_status onnx_map_matmul(onnx_map *x)
{
    const onnx_value *a;
    const Onnx__TensorProto *b;
    int outputs, layer;
    vdnn_status st = onnx_input_layer(x, 0, 2, &a);
    if (!st) st = matrix(x, 1, 1, &b, &outputs);
    float *w = NULL, *wt = NULL;
    size_t n = 0;
    if (!st) st = onnx_const_floats(x, b, &w, &n);
    if (st) return st;
    /* B is inputs x outputs; vdnn's fc weight is outputs x inputs. */
    size_t inputs = n / (size_t)outputs;
    wt = malloc(n * sizeof *wt + 1);
    if (!wt) st = onnx_fail(x, VDNN_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; !st && i < inputs; i++)
        for (size_t o = 0; o < (size_t)outputs; o++) wt[o * inputs + i] = w[i * (size_t)outputs + o];
    free(w);
    if (!st) st = add_fc(x, a, outputs, false, &layer);
    if (st) {
        free(wt);
        return st;
    }
    st = onnx_set_init(x, layer, ".weight", wt, n, b);
    if (!st) x->init_src[x->g->n_init - 1].transposed = true; /* export transposes it back */
    return st;
}

/* Add(MatMul(..), bias) is one fc layer with a bias, when nothing else reads the product. */
static vdnn_status add_bias(onnx_map *x, const onnx_value *prod, const Onnx__TensorProto *c)
{
    vdnn_layer *L = &x->g->layers[prod->layer];
    int node = x->layer_node[prod->layer];
    bool after_matmul = L->kind == VDNN_LAYER_FC && !L->p.bias && node >= 0 &&
                        !strcmp(x->m->graph->node[node]->op_type, "MatMul") && onnx_uses(x, prod->name) == 1;
    if (!after_matmul)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "adding the constant '%s' is supported only as the bias right after a MatMul",
                         vdnn_onnx_str(c->name));
    vdnn_status st = check_bias(x, c, L->p.filters);
    if (st) return st;
    L->p.bias = 1;
    if ((st = onnx_init_from(x, prod->layer, ".bias", c))) return st;
    return onnx_bind(x, 0, prod);
}

vdnn_status onnx_map_add(onnx_map *x)
{
    const onnx_value *a, *b;
    vdnn_status st = onnx_input(x, 0, &a);
    if (!st) st = onnx_input(x, 1, &b);
    if (st) return st;
    if (a->layer < 0 && b->layer < 0)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "adds two constants (vdnn does not fold constants)");
    if (a->layer < 0 || b->layer < 0) {
        int k = a->layer < 0 ? 1 : 0;
        const onnx_value *prod;
        st = onnx_input_layer(x, k, 0, &prod);
        return st ? st : add_bias(x, prod, (k ? a : b)->konst);
    }
    if ((st = onnx_input_layer(x, 0, 0, &a)) || (st = onnx_input_layer(x, 1, 0, &b))) return st;
    if (a->rank != b->rank)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED,
                         "adds a rank-%d and a rank-%d tensor (vdnn adds tensors of the same shape, no broadcasting)",
                         a->rank, b->rank);
    if (a->layer == b->layer)
        return onnx_fail(x, VDNN_ERR_UNSUPPORTED, "adds '%s' to itself, which vdnn's add layer does not support",
                         a->name);
    int layer;
    return onnx_add_layer(x, VDNN_LAYER_ADD, (const int[]){a->layer, b->layer}, 2, a->rank, &layer);
}
