/* Running a net: a training step, and inference on a batch (accuracy and loss, or the probabilities). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/timing.h"
#include "exec/net_impl.h"

/* Points each persistent storage of `plan` at its fixed offset, and under policy um each swapped one at its
 * range of the managed pool; forgets every other pointer. */
void vdnn_net_bind_plan(vdnn_net_t *net, const vdnn_plan_t *plan)
{
    for (int i = 0; i < plan->n_storages; i++) net->ptr[i] = NULL;
    for (int b = 0; b < plan->n_blocks; b++)
        if (plan->st[plan->blocks[b].storage].persistent)
            net->ptr[plan->blocks[b].storage] = (char *)net->dev + plan->blocks[b].offset;
    if (plan->policy != VDNN_POLICY_UM || !net->managed) return;
    for (int i = 0; i < plan->n_storages; i++)
        if (plan->st[i].cls == VDNN_CLASS_SWAP) net->ptr[i] = (char *)net->managed + plan->st[i].host_offset;
}


vdnn_status vdnn_net_train_step(vdnn_net_t *net, const float *images, const int32_t *labels, float lr, float *loss,
                                vdnn_error *err)
{
    if (!images || !labels) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "train_step: no images or labels");
    /* One label per image, or per token of a sequence model. */
    const size_t per = vdnn_graph_labels_per_sample(net->g);
    for (int i = 0; i < (int)((size_t)net->opt.batch * per); i++)
        if (labels[i] < 0 || labels[i] >= net->g->classes)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", labels[i], i,
                             net->g->classes - 1);
    const double t0 = vdnn_now_seconds();
    vdnn_status rc;
    if (net->opt.memory.micro_batches > 1) {
        rc = vdnn_net_micro_step(net, images, labels, lr, loss, err);
    } else {
        vdnn_net_bind_plan(net, net->plan_train);
        rc = vdnn_exec_iteration(net, net->plan_train, net->ops_train, images, labels, lr, err);
        if (rc == VDNN_OK && loss)
            rc = net->be->ops->download(net->be, loss, net->ptr[net->plan_train->loss], sizeof(float), err);
        if (rc == VDNN_OK) net->step++;
    }
    net->last_step_s = vdnn_now_seconds() - t0;
    return rc;
}

/* Inference on n images, padded to the plan's batch with zero images (inference-mode layers treat samples
 * independently): the output of layer `fetch` (the loss: the probabilities) ends in `dst`, which holds that
 * storage's bytes. */
static vdnn_status infer(vdnn_net_t *net, const float *images, const int32_t *labels, int n, int fetch, void *dst,
                         vdnn_error *err)
{
    const int N = net->g->input.n;
    if (!images) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "evaluation: no images");
    if (n <= 0 || n > N)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "evaluation batch: %d images is out of range (1 to %d)", n, N);
    vdnn_status rc = VDNN_OK;
    if (!net->ops_eval) rc = vdnn_net_create_ops(net, false, &net->ops_eval, err);
    if (rc != VDNN_OK) return rc;
    const size_t img = vdnn_shape_bytes(net->g->input) / (size_t)N;
    const float *x = images;
    const size_t per = vdnn_graph_labels_per_sample(net->g);
    int32_t *lab = calloc((size_t)N * per, sizeof *lab);
    float *padded = n < N ? calloc((size_t)N, img) : NULL;
    if (!lab || (n < N && !padded)) {
        free(lab);
        free(padded);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    }
    if (labels) memcpy(lab, labels, sizeof *lab * (size_t)n * per);
    if (padded) {
        memcpy(padded, images, img * (size_t)n);
        x = padded;
    }
    const vdnn_plan_t *p = net->plan_eval;
    vdnn_net_bind_plan(net, p);
    /* Downloaded when its block is freed, so a storage the plan reuses after its last read still arrives. */
    net->fetch_storage = p->ls[fetch].out;
    net->fetch_dst = dst;
    rc = vdnn_exec_iteration(net, p, net->ops_eval, x, lab, 0.0f, err);
    net->fetch_storage = -1;
    /* A 16-bit net's values arrive in its type: widened in place (dst holds the fp32 size), from the end, so no
     * value is overwritten before it is read. */
    if (rc == VDNN_OK && net->g->dtype != VDNN_DTYPE_F32) {
        char *buf = dst;
        for (size_t i = vdnn_shape_count(net->g->layers[fetch].out); i-- > 0;) {
            uint16_t h;  /* through memcpy: the buffer holds two types in turn */
            memcpy(&h, buf + 2 * i, sizeof h);
            const float f = net->g->dtype == VDNN_DTYPE_BF16 ? vdnn_bf16_to_float(h) : vdnn_f16_to_float(h);
            memcpy(buf + 4 * i, &f, sizeof f);
        }
    }
    free(lab);
    free(padded);
    vdnn_net_bind_plan(net, net->plan_train);
    return rc;
}

vdnn_status vdnn_net_eval_batch(vdnn_net_t *net, const float *images, const int32_t *labels, int n, int *correct,
                                double *loss_sum, vdnn_error *err)
{
    const int K = net->g->classes, N = net->g->input.n;
    if (!labels) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "evaluation: no labels");
    /* A sequence model's images are its sequences and its rows their tokens: correct and loss_sum count tokens. */
    const size_t per = vdnn_graph_labels_per_sample(net->g);
    if (n <= 0 || n > N)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "evaluation batch: %d images is out of range (1 to %d)", n, N);
    /* Checked here, not by the loss op: the counting below indexes the probabilities by label. */
    for (int i = 0; i < (int)((size_t)n * per); i++)
        if (labels[i] < 0 || labels[i] >= K)
            return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "label %d of sample %d is outside 0..%d", labels[i], i, K - 1);
    vdnn_status rc = infer(net, images, labels, n, net->g->n_layers - 1, net->host_scratch, err);
    if (rc != VDNN_OK) return rc;
    const float *probs = net->host_scratch;
    int ok = 0;
    double ls = 0;
    for (int i = 0; i < (int)((size_t)n * per); i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (probs[(size_t)i * K + k] > probs[(size_t)i * K + best]) best = k;
        ok += best == labels[i];
        double pl = probs[(size_t)i * K + labels[i]];
        ls += -log(pl > 1e-30 ? pl : 1e-30);
    }
    if (correct) *correct = ok;
    if (loss_sum) *loss_sum = ls;
    return VDNN_OK;
}

int vdnn_net_labels_per_sample(const vdnn_net_t *net)
{
    return (int)vdnn_graph_labels_per_sample(net->g);
}

vdnn_status vdnn_net_predict(vdnn_net_t *net, const float *images, int n, float *probs, vdnn_error *err)
{
    if (!probs) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "predict: no buffer for the probabilities");
    vdnn_status rc = infer(net, images, NULL, n, net->g->n_layers - 1, net->host_scratch, err);
    if (rc == VDNN_OK) memcpy(probs, net->host_scratch, sizeof *probs * (size_t)n * (size_t)net->g->classes *
                                         vdnn_graph_labels_per_sample(net->g));
    return rc;
}

vdnn_status vdnn_net_forward(vdnn_net_t *net, const float *images, int n, float *logits, vdnn_error *err)
{
    if (!logits) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "forward: no buffer for the logits");
    const vdnn_graph_t *g = net->g;
    const vdnn_layer *loss = &g->layers[g->n_layers - 1];
    /* The logits are the loss's input: the model's output before vdnn's softmax. It holds batch x classes
     * values (an N x C x 1 x 1 map or an N x F vector alike; a sequence model's per token), the size of the
     * probabilities' scratch. */
    const int src = loss->inputs[0];
    const vdnn_shape s = g->layers[src].out;
    if (vdnn_shape_bytes(s) != vdnn_shape_bytes(loss->out))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "forward: '%s' gives %dx%dx%d values per image, not %d logits",
                         g->layers[src].name, s.c, s.h, s.w, g->classes);
    vdnn_status rc = infer(net, images, NULL, n, src, net->host_scratch, err);
    if (rc == VDNN_OK)
        memcpy(logits, net->host_scratch,
               sizeof *logits * (size_t)n * (size_t)g->classes * vdnn_graph_labels_per_sample(g));
    return rc;
}
