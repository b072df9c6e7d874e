/* A GPU's profile without the GPU: the CUDA backend's own op rules for every layer as they would answer on a device of
 * a given compute capability (vdnn_cuda_describe_op: what each op keeps, what backward reads, its own scratch;
 * convolution workspaces derived as a lower bound), and times from a roofline estimate, so that `vdnn plan` tells
 * on any machine what fits that GPU and what moves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "plan/profile.h"

static double or_default(double v, double d) { return v > 0 ? v : d; }

/* Every layer's training op as the CUDA backend with options o describes it for the graph's map type. */
static vdnn_status describe_layers(const vdnn_graph_t *g, const vdnn_cuda_options *o, int cc_major, int cc_minor,
                                   vdnn_layer_algos **out, vdnn_error *err)
{
    vdnn_layer_algos *ops = calloc((size_t)g->n_layers, sizeof *ops);
    if (!ops) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for the op info of %d layers", g->n_layers);
    vdnn_status rc = VDNN_OK;
    for (int l = 1; rc == VDNN_OK && l < g->n_layers; l++) {
        vdnn_op_desc d;
        vdnn_op_desc_from_layer(g, l, true, &d);
        bool derived = false;
        rc = vdnn_cuda_describe_op(o, cc_major, cc_minor, &d, ops[l].a, &ops[l].n, &derived, err);
        if (rc != VDNN_OK) {
            /* Name the layer as well: the op's own message names its kind. */
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            rc = vdnn_fail(err, rc, "layer '%s': %s", g->layers[l].name, why);
        }
    }
    if (rc != VDNN_OK) {
        free(ops);
        return rc;
    }
    *out = ops;
    return VDNN_OK;
}

vdnn_status vdnn_profile_describe_gpu_model(const vdnn_model_t *m, vdnn_shape input, int classes,
                                            vdnn_precision precision, const vdnn_gpu_description *gpu,
                                            vdnn_profile_t **out, vdnn_error *err)
{
    if (!m || !gpu || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile_describe_gpu: no model, GPU or place for it");
    *out = NULL;
    if (gpu->cc_major < 3 || gpu->cc_major > 99 || gpu->cc_minor < 0 || gpu->cc_minor > 9)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "compute capability %d.%d is out of range (3.0 to 99.9)", gpu->cc_major,
                         gpu->cc_minor);
    if ((int)precision < 0 || precision >= VDNN_PRECISION_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "precision: %d is none of fp32, bf16, fp16", (int)precision);
    const double flops = or_default(gpu->flops_per_s, VDNN_ESTIMATE_FLOPS_PER_S);
    const double mem = or_default(gpu->mem_bytes_per_s, VDNN_ESTIMATE_MEM_BYTES_PER_S);
    const double d2h = or_default(gpu->link_d2h_bytes_per_s, VDNN_ESTIMATE_LINK_BYTES_PER_S);
    const double h2d = or_default(gpu->link_h2d_bytes_per_s, VDNN_ESTIMATE_LINK_BYTES_PER_S);
    vdnn_cuda_options o;
    vdnn_cuda_options_default(&o);
    o.tf32 = gpu->tf32;
    o.deterministic = 0; /* its convolution workspaces are cuDNN's to size, on a device */
    char name[128];
    if (gpu->name && gpu->name[0]) snprintf(name, sizeof name, "%s (described: compute capability %d.%d)", gpu->name,
                                           gpu->cc_major, gpu->cc_minor);
    else snprintf(name, sizeof name, "a GPU of compute capability %d.%d (described)", gpu->cc_major, gpu->cc_minor);
    vdnn_graph_t *g = NULL;
    vdnn_profile *p = calloc(1, sizeof *p);
    vdnn_status rc = p ? vdnn_graph_resolved_copy(m, input, classes, &g, err)
                       : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory for a profile");
    if (rc == VDNN_OK) {
        g->dtype = (vdnn_dtype)precision;
        rc = vdnn_profile_estimate(g, flops, mem, d2h, p, err);
    }
    /* The device first: a build without the CUDA backend says so here, before any layer. */
    if (rc == VDNN_OK) rc = vdnn_cuda_describe_offline(&o, gpu->cc_major, gpu->cc_minor, name, &p->dev, err);
    if (rc == VDNN_OK) {
        p->h2d.bytes_per_s = h2d;
        rc = describe_layers(g, &o, gpu->cc_major, gpu->cc_minor, &p->ops, err);
    }
    if (rc == VDNN_OK) {
        snprintf(p->device, sizeof p->device, "cuda");
        p->dtype = g->dtype;
        snprintf(p->op_info_source, sizeof p->op_info_source, "described");
        snprintf(p->note, sizeof p->note,
                 "Described without the GPU (vdnn_profile_describe_gpu_model): op info from the CUDA backend's own op "
                 "rules for compute capability %d.%d, %s maps, TF32 %s; convolutions take cuDNN's documented "
                 "zero-workspace algorithms (workspace 0: convolution scratch is a lower bound). Times are a roofline "
                 "estimate (measured: false): %.4g flop/s, %.4g B/s memory, %.4g B/s to the host, %.4g B/s from it. "
                 "`vdnn profile --device cuda` on the GPU measures them.",
                 gpu->cc_major, gpu->cc_minor, vdnn_precision_name(precision), p->dev.tf32 ? "on" : "off", flops, mem,
                 d2h, h2d);
    }
    vdnn_graph_free(g);
    if (rc != VDNN_OK) {
        if (p) vdnn_profile_release(p);
        free(p);
        return rc;
    }
    *out = p;
    return VDNN_OK;
}
