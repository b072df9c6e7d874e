/* Model parallelism: a stage's GPipe step, and its activation and gradient exchanges with its neighbours. */
#include "dist/mpi_pipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "dist/stages.h"

/* One tag per micro-batch and direction: a message can only ever match the receive meant for it. */
enum { TAG_BASE = 16 };
static int tag_act(int j) { return TAG_BASE + 2 * j; }
static int tag_grad(int j) { return TAG_BASE + 2 * j + 1; }

/* Requests, m of each kind, in this order. */
enum { RECV_ACT, RECV_GRAD, SEND_ACT, SEND_GRAD, N_KINDS };

struct vdnn_pipe {
    const vdnn_comm *c;
    vdnn_nccl *nccl;              /* borrowed; set: messages go device to device */
    float *d_act_in, *d_act_out;  /* with NCCL: device staging of the activations, m micro-batches each */
    float *d_grad_out;            /* with NCCL: the input gradients sent back (freed by the plan after the hook) */
    MPI_Comm comm;
    vdnn_net_t *net;
    int stage, stages, m;
    int prev_world, next_world;   /* for messages */
    int tail, out_layer;          /* the tail softmax and the stage's own last layer (not the last stage) */
    int out_storage, tail_dx;     /* the output's storage; where the tail softmax writes its input gradient */
    int in_grad;                  /* the gradient storage of the input identity layer */
    size_t in_count, out_count;   /* values per micro-batch */
    /* Maps cross stages in their own type (half the bytes in bf16): elem bytes a value, MPI type dt. The
     * buffers have room for fp32 values, so a received bf16 input widens in place for the net's fp32 input. */
    vdnn_dtype dtype;
    size_t elem;
    MPI_Datatype dt;
    float *act_in, *grad_out;     /* from / to the previous stage, one micro-batch after another */
    float *act_out, *grad_in;     /* to / from the next stage */
    MPI_Request *reqs;            /* N_KINDS x m */
};

static MPI_Request *req(vdnn_pipe *p, int kind, int j) { return &p->reqs[kind * p->m + j]; }

vdnn_status vdnn_pipe_create(const vdnn_comm *c, MPI_Comm pipe_comm, vdnn_nccl *nccl, vdnn_net_t *net, int stage,
                             int stages, vdnn_pipe **out, vdnn_error *err)
{
    *out = NULL;
    const vdnn_graph_t *g = vdnn_net_graph(net);
    const vdnn_plan_t *pl = vdnn_net_plan(net);
    const vdnn_memory_options *mem = &vdnn_net_options_of(net)->memory;
    const bool last = stage == stages - 1;
    if (!vdnn_net_extras_of(net)->hooks || g->n_layers < VDNN_STAGE_PREFIX + 1 + (last ? 0 : VDNN_STAGE_TAIL) ||
        strcmp(g->layers[1].name, VDNN_STAGE_INPUT))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "stage %d: the net does not run a stage graph with hooks", stage);
    if (mem->micro_batches > 1 && !mem->pipelined)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "stage %d: a stage with micro-batches must hold them all", stage);
    vdnn_pipe *p = calloc(1, sizeof *p);
    if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    p->c = c;
    p->nccl = nccl;
    p->comm = pipe_comm;
    p->net = net;
    p->stage = stage;
    p->stages = stages;
    p->m = mem->micro_batches;
    p->prev_world = stage > 0 ? vdnn_comm_world_rank(c, pipe_comm, stage - 1) : -1;
    p->next_world = !last ? vdnn_comm_world_rank(c, pipe_comm, stage + 1) : -1;
    p->tail = p->out_layer = p->out_storage = p->tail_dx = -1;
    p->in_grad = pl->ls[1].grad;
    p->in_count = vdnn_shape_count(g->layers[0].out);
    p->dtype = g->dtype;
    p->elem = vdnn_dtype_size(g->dtype);
    p->dt = p->elem == sizeof(float) ? MPI_FLOAT : MPI_UINT16_T;
    vdnn_status rc = VDNN_OK;
    /* NCCL moves the maps device to device as fp32 values (the worker opens none for 16-bit maps). */
    if (nccl && g->dtype != VDNN_DTYPE_F32)
        rc = vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "stage %d: %s maps between stages over NCCL (fp32 only; --no-nccl)",
                       stage, vdnn_dtype_name(g->dtype));
    p->reqs = malloc(sizeof *p->reqs * (size_t)N_KINDS * (size_t)p->m);
    if (rc == VDNN_OK && !p->reqs) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; rc == VDNN_OK && i < N_KINDS * p->m; i++) p->reqs[i] = MPI_REQUEST_NULL;
    const size_t m = (size_t)p->m;
    if (rc == VDNN_OK && stage > 0) {
        p->act_in = malloc(m * p->in_count * sizeof(float));
        p->grad_out = malloc(m * p->in_count * sizeof(float));
        if (!p->act_in || !p->grad_out) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for stage buffers");
        if (rc == VDNN_OK && p->in_grad < 0)
            rc = vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the plan computes no gradient for the stage input", stage);
    }
    if (rc == VDNN_OK && !last) {
        p->tail = g->n_layers - 1;
        p->out_layer = g->n_layers - 1 - VDNN_STAGE_TAIL;
        p->out_storage = pl->ls[p->out_layer].out;
        p->out_count = vdnn_shape_count(g->layers[p->out_layer].out);
        for (int s = 0; s < pl->n_steps; s++)
            if (pl->steps[s].kind == VDNN_STEP_BWD && pl->steps[s].layer == p->tail) p->tail_dx = pl->steps[s].dx[0];
        p->act_out = malloc(m * p->out_count * sizeof(float));
        p->grad_in = malloc(m * p->out_count * sizeof(float));
        if (!p->act_out || !p->grad_in) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for stage buffers");
        if (rc == VDNN_OK && (p->tail_dx < 0 || p->out_storage < 0))
            rc = vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the plan has no gradient for the stage output", stage);
    }
    vdnn_backend_t *be = vdnn_net_backend(net);
    if (rc == VDNN_OK && nccl && stage > 0) {
        rc = be->ops->dev_alloc(be, m * p->in_count * sizeof(float), (void **)&p->d_act_in, err);
        if (rc == VDNN_OK) rc = be->ops->dev_alloc(be, m * p->in_count * sizeof(float), (void **)&p->d_grad_out, err);
    }
    if (rc == VDNN_OK && nccl && !last) rc = be->ops->dev_alloc(be, m * p->out_count * sizeof(float), (void **)&p->d_act_out, err);
    if (rc != VDNN_OK) {
        vdnn_pipe_free(p);
        return rc;
    }
    *out = p;
    return VDNN_OK;
}

void vdnn_pipe_free(vdnn_pipe *p)
{
    if (!p) return;
    /* Requests still in flight belong to an aborted step; MPI_Abort or MPI_Finalize ends them. */
    vdnn_backend_t *be = vdnn_net_backend(p->net);
    if (p->d_act_in) be->ops->dev_free(be, p->d_act_in);
    if (p->d_grad_out) be->ops->dev_free(be, p->d_grad_out);
    if (p->d_act_out) be->ops->dev_free(be, p->d_act_out);
    free(p->reqs);
    free(p->act_in);
    free(p->grad_out);
    free(p->act_out);
    free(p->grad_in);
    free(p);
}

void vdnn_pipe_progress(vdnn_pipe *p) { vdnn_comm_progress(N_KINDS * p->m, p->reqs); }

/* n 16-bit values at the start of x become fp32 in place (exact), from the end so none is overwritten unread;
 * the net rounds them back to the same values as it takes its input. */
static void widen(float *x, size_t n, vdnn_dtype t)
{
    const uint16_t *h = (const uint16_t *)x;
    for (size_t i = n; i-- > 0;) x[i] = t == VDNN_DTYPE_BF16 ? vdnn_bf16_to_float(h[i]) : vdnn_f16_to_float(h[i]);
}

static vdnn_status post_receives(vdnn_pipe *p, vdnn_error *err)
{
    char what[96];
    snprintf(what, sizeof what, "posting stage %d's receives of step %lld", p->stage, (long long)vdnn_net_step(p->net));
    vdnn_status rc = VDNN_OK;
    for (int j = 0; rc == VDNN_OK && !p->nccl && j < p->m; j++) {
        if (p->stage > 0)
            rc = vdnn_comm_check(p->c, MPI_Irecv(p->act_in + (size_t)j * p->in_count, (int)p->in_count, p->dt,
                                                 p->stage - 1, tag_act(j), p->comm, req(p, RECV_ACT, j)),
                                 what, err);
        if (rc == VDNN_OK && p->out_storage >= 0)
            rc = vdnn_comm_check(p->c, MPI_Irecv(p->grad_in + (size_t)j * p->out_count, (int)p->out_count, p->dt,
                                                 p->stage + 1, tag_grad(j), p->comm, req(p, RECV_GRAD, j)),
                                 what, err);
    }
    return rc;
}

/* After micro-batch j's forward pass: its output, still on the device or copied out when the plan freed it. */
static vdnn_status send_output(vdnn_pipe *p, int j, vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    vdnn_backend_t *be = vdnn_net_backend(net);
    float *dst = p->act_out + (size_t)j * p->out_count;
    const float *out = vdnn_exec_storage_ptr(net, p->out_storage);
    vdnn_status rc = VDNN_OK;
    if (out && !p->nccl) rc = be->ops->download(be, dst, out, p->out_count * p->elem, err);
    vdnn_exec_fetch(net, -1, NULL);
    if (rc) return rc;
    char what[112];
    snprintf(what, sizeof what, "sending stage %d's output of micro-batch %d of step %lld", p->stage, j,
             (long long)vdnn_net_step(net));
    if (p->nccl) {
        /* Staged on the device (the plan may reuse the output's block before the send is done). */
        float *d = p->d_act_out + (size_t)j * p->out_count;
        rc = be->ops->upload(be, d, out ? out : dst, p->out_count * sizeof(float), err);
        return rc ? rc : vdnn_nccl_send(p->nccl, d, p->out_count, p->stage + 1, what, err);
    }
    return vdnn_comm_check(p->c, MPI_Isend(dst, (int)p->out_count, p->dt, p->stage + 1, tag_act(j), p->comm,
                                           req(p, SEND_ACT, j)),
                           what, err);
}

static vdnn_status take_output_grad(vdnn_pipe *p, vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    vdnn_backend_t *be = vdnn_net_backend(net);
    const int j = vdnn_net_current_micro(net);
    char what[112];
    snprintf(what, sizeof what, "the gradient of stage %d's output of micro-batch %d of step %lld", p->stage, j,
             (long long)vdnn_net_step(net));
    float *dx = vdnn_exec_storage_ptr(net, p->tail_dx);
    if (!dx) return vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the output gradient is not on the device", p->stage);
    if (p->nccl) {
        /* Straight into the block the softmax wrote; the compute queue waits for it. */
        vdnn_status rc = vdnn_nccl_recv(p->nccl, dx, p->out_count, p->stage + 1, what, err);
        return rc ? rc : vdnn_nccl_wait(p->nccl, what, err);
    }
    vdnn_status rc = vdnn_comm_waitall(p->c, 1, req(p, RECV_GRAD, j), what, p->next_world, err);
    if (rc) return rc;
    return be->ops->upload(be, dx, p->grad_in + (size_t)j * p->out_count, p->out_count * p->elem, err);
}

static vdnn_status send_input_grad(vdnn_pipe *p, vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    vdnn_backend_t *be = vdnn_net_backend(net);
    const int j = vdnn_net_current_micro(net);
    float *src = p->grad_out + (size_t)j * p->in_count;
    const float *dx = vdnn_exec_storage_ptr(net, p->in_grad);
    if (!dx) return vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the input gradient is not on the device", p->stage);
    char what[112];
    snprintf(what, sizeof what, "sending stage %d's input gradient of micro-batch %d of step %lld", p->stage, j,
             (long long)vdnn_net_step(net));
    if (p->nccl) {
        float *d = p->d_grad_out + (size_t)j * p->in_count;
        vdnn_status rc = be->ops->upload(be, d, dx, p->in_count * sizeof(float), err);
        return rc ? rc : vdnn_nccl_send(p->nccl, d, p->in_count, p->stage - 1, what, err);
    }
    vdnn_status rc = be->ops->download(be, src, dx, p->in_count * p->elem, err);
    if (rc) return rc;
    return vdnn_comm_check(p->c, MPI_Isend(src, (int)p->in_count, p->dt, p->stage - 1, tag_grad(j), p->comm,
                                           req(p, SEND_GRAD, j)),
                           what, err);
}

vdnn_status vdnn_pipe_grads_ready(vdnn_pipe *p, int layer, vdnn_error *err)
{
    vdnn_status rc = VDNN_OK;
    if (layer == p->tail) rc = take_output_grad(p, err);
    else if (layer == 1 && p->stage > 0) rc = send_input_grad(p, err);
    vdnn_pipe_progress(p);
    return rc;
}

vdnn_status vdnn_pipe_train_step(vdnn_pipe *p, const float *images, const int32_t *labels, float lr, float *loss,
                                 vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    const int b = vdnn_net_micro_batch(net);
    const long long step = (long long)vdnn_net_step(net);
    char what[112];
    double sum = 0;
    /* A sequence model's last stage takes a label per token; the other stages' tail one per sample. */
    const size_t per = vdnn_graph_labels_per_sample(vdnn_net_graph(net));
    vdnn_status rc = post_receives(p, err);
    for (int j = 0; rc == VDNN_OK && j < p->m; j++) {
        const float *in = images + (size_t)j * p->in_count;
        if (p->stage > 0 && p->nccl) {
            /* The net's input upload copies from device memory as well (the backend infers the direction). */
            snprintf(what, sizeof what, "stage %d's output of micro-batch %d of step %lld", p->stage - 1, j, step);
            in = p->d_act_in + (size_t)j * p->in_count;
            rc = vdnn_nccl_recv(p->nccl, p->d_act_in + (size_t)j * p->in_count, p->in_count, p->stage - 1, what, err);
            if (rc == VDNN_OK) rc = vdnn_nccl_wait(p->nccl, what, err);
        } else if (p->stage > 0) {
            snprintf(what, sizeof what, "stage %d's output of micro-batch %d of step %lld", p->stage - 1, j, step);
            rc = vdnn_comm_waitall(p->c, 1, req(p, RECV_ACT, j), what, p->prev_world, err);
            in = p->act_in + (size_t)j * p->in_count;
            if (rc == VDNN_OK && p->dtype != VDNN_DTYPE_F32) widen((float *)in, p->in_count, p->dtype);
        }
        if (p->out_storage >= 0) {
            /* The executor copies the output out just before it frees it: it survives even when the plan
             * frees or offloads it before the forward pass ends. */
            vdnn_exec_fetch(net, p->out_storage, p->act_out + (size_t)j * p->out_count);
        }
        float l = 0;
        if (rc == VDNN_OK) rc = vdnn_net_micro_forward(net, j, in, labels + (size_t)j * (size_t)b * per, &l, err);
        if (rc == VDNN_OK && p->out_storage >= 0) rc = send_output(p, j, err);
        sum += l;
        vdnn_pipe_progress(p);
    }
    for (int j = 0; rc == VDNN_OK && j < p->m; j++) rc = vdnn_net_backward(net, j, err);
    if (rc == VDNN_OK) rc = vdnn_net_update(net, lr, err);
    vdnn_exec_fetch(net, -1, NULL);
    if (rc == VDNN_OK) {
        snprintf(what, sizeof what, "stage %d's sends of step %lld to be received", p->stage, step);
        rc = p->nccl ? vdnn_nccl_wait(p->nccl, what, err) : vdnn_comm_waitall(p->c, 2 * p->m, req(p, SEND_ACT, 0), what, -1, err);
    }
    *loss = p->stage == p->stages - 1 ? (float)(sum / p->m) : 0.0f;
    return rc;
}
