/* Model parallelism: a stage's activation and gradient exchanges with its neighbours, driven by the hooks. */
#include "dist/mpi_pipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/stages.h"

enum { TAG_ACT = 11, TAG_GRAD = 12 };

struct vdnn_pipe {
    const vdnn_comm *c;
    MPI_Comm comm;
    vdnn_net_t *net;
    int stage, stages;
    int prev_world, next_world;   /* for messages */
    int tail, out_layer;          /* the tail softmax and the stage's own last layer (not the last stage) */
    int out_storage, tail_dx;     /* the output's storage; where the tail softmax writes its input gradient */
    int in_grad;                  /* the gradient storage of the input identity layer */
    size_t in_count, out_count;   /* floats */
    float *act_in, *grad_out;     /* from / to the previous stage */
    float *act_out, *grad_in;     /* to / from the next stage */
    MPI_Request reqs[2];          /* this step's sends */
};

vdnn_status vdnn_pipe_create(const vdnn_comm *c, MPI_Comm pipe_comm, vdnn_net_t *net, int stage, int stages,
                             vdnn_pipe **out, vdnn_error *err)
{
    *out = NULL;
    const vdnn_graph_t *g = net->g;
    const vdnn_plan_t *pl = net->plan_train;
    const bool last = stage == stages - 1;
    if (!net->cfg.hooks || g->n_layers < VDNN_STAGE_PREFIX + 1 + (last ? 0 : VDNN_STAGE_TAIL) ||
        strcmp(g->layers[1].name, VDNN_STAGE_INPUT))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "stage %d: the net does not run a stage graph with hooks", stage);
    vdnn_pipe *p = calloc(1, sizeof *p);
    if (!p) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    p->c = c;
    p->comm = pipe_comm;
    p->net = net;
    p->stage = stage;
    p->stages = stages;
    p->prev_world = stage > 0 ? vdnn_comm_world_rank(c, pipe_comm, stage - 1) : -1;
    p->next_world = !last ? vdnn_comm_world_rank(c, pipe_comm, stage + 1) : -1;
    p->reqs[0] = p->reqs[1] = MPI_REQUEST_NULL;
    p->tail = p->out_layer = p->out_storage = p->tail_dx = -1;
    p->in_grad = pl->ls[1].grad;
    p->in_count = vdnn_shape_count(g->layers[0].out);
    vdnn_status rc = VDNN_OK;
    if (stage > 0) {
        p->act_in = malloc(p->in_count * sizeof(float));
        p->grad_out = malloc(p->in_count * sizeof(float));
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
        p->act_out = malloc(p->out_count * sizeof(float));
        p->grad_in = malloc(p->out_count * sizeof(float));
        if (!p->act_out || !p->grad_in) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for stage buffers");
        if (rc == VDNN_OK && (p->tail_dx < 0 || p->out_storage < 0))
            rc = vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the plan has no gradient for the stage output", stage);
    }
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
    free(p->act_in);
    free(p->grad_out);
    free(p->act_out);
    free(p->grad_in);
    free(p);
}

vdnn_status vdnn_pipe_recv_input(vdnn_pipe *p, const float **input, vdnn_error *err)
{
    char what[96];
    snprintf(what, sizeof what, "stage %d's output of step %lld", p->stage - 1, (long long)p->net->step);
    *input = p->act_in;
    return vdnn_comm_recv(p->c, p->comm, p->act_in, p->in_count, MPI_FLOAT, p->stage - 1, TAG_ACT, p->prev_world, what,
                          err);
}

void vdnn_pipe_begin_step(vdnn_pipe *p)
{
    if (p->out_storage < 0) return;
    /* The executor copies this storage out just before it frees it: the output survives even when the
     * plan frees or offloads it before the backward pass starts. */
    p->net->fetch_storage = p->out_storage;
    p->net->fetch_dst = p->act_out;
}

static vdnn_status send_output(vdnn_pipe *p, vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    vdnn_backend_t *be = net->be;
    vdnn_status rc = VDNN_OK;
    /* Still on the device (its last use is later in the backward pass): take it from there. */
    if (net->ptr[p->out_storage])
        rc = be->ops->download(be, p->act_out, net->ptr[p->out_storage], p->out_count * sizeof(float), err);
    net->fetch_storage = -1;
    if (rc) return rc;
    char what[96];
    snprintf(what, sizeof what, "sending stage %d's output of step %lld", p->stage, (long long)net->step);
    rc = vdnn_comm_check(p->c, MPI_Isend(p->act_out, (int)p->out_count, MPI_FLOAT, p->stage + 1, TAG_ACT, p->comm, &p->reqs[0]),
                         what, err);
    if (rc) return rc;
    snprintf(what, sizeof what, "the gradient of stage %d's output of step %lld", p->stage, (long long)net->step);
    rc = vdnn_comm_recv(p->c, p->comm, p->grad_in, p->out_count, MPI_FLOAT, p->stage + 1, TAG_GRAD, p->next_world, what,
                        err);
    if (rc) return rc;
    if (!net->ptr[p->tail_dx])
        return vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the output gradient is not on the device", p->stage);
    return be->ops->upload(be, net->ptr[p->tail_dx], p->grad_in, p->out_count * sizeof(float), err);
}

static vdnn_status send_input_grad(vdnn_pipe *p, vdnn_error *err)
{
    vdnn_net_t *net = p->net;
    if (!net->ptr[p->in_grad])
        return vdnn_fail(err, VDNN_ERR_BACKEND, "stage %d: the input gradient is not on the device", p->stage);
    vdnn_status rc = net->be->ops->download(net->be, p->grad_out, net->ptr[p->in_grad], p->in_count * sizeof(float), err);
    if (rc) return rc;
    char what[96];
    snprintf(what, sizeof what, "sending stage %d's input gradient of step %lld", p->stage, (long long)net->step);
    return vdnn_comm_check(p->c, MPI_Isend(p->grad_out, (int)p->in_count, MPI_FLOAT, p->stage - 1, TAG_GRAD, p->comm, &p->reqs[1]),
                           what, err);
}

vdnn_status vdnn_pipe_grads_ready(vdnn_pipe *p, int layer, vdnn_error *err)
{
    if (layer == p->tail) return send_output(p, err);
    if (layer == 1 && p->stage > 0) return send_input_grad(p, err);
    return VDNN_OK;
}

vdnn_status vdnn_pipe_end_step(vdnn_pipe *p, vdnn_error *err)
{
    p->net->fetch_storage = -1;
    char what[96];
    snprintf(what, sizeof what, "stage %d's sends of step %lld to be received", p->stage, (long long)p->net->step - 1);
    return vdnn_comm_waitall(p->c, 2, p->reqs, what, -1, err);
}
