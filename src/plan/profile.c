/* Profiles: allocation, the roofline estimate used when nothing was measured, and the copy-link fit. */
#include "plan/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a copy engine needs to start a transfer; PCIe and NVLink DMA are of this order. */
#define ESTIMATE_COPY_LATENCY_S 10e-6

vdnn_status vdnn_profile_init(vdnn_profile *p, int n_layers, vdnn_error *err)
{
    memset(p, 0, sizeof *p);
    if (n_layers < 1) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile: %d layers (need at least 1)", n_layers);
    p->n_layers = n_layers;
    p->version = VDNN_PROFILE_VERSION;
    p->names = calloc((size_t)n_layers, sizeof *p->names);
    p->kinds = calloc((size_t)n_layers, sizeof *p->kinds);
    p->outs = calloc((size_t)n_layers, sizeof *p->outs);
    p->fwd_s = calloc((size_t)n_layers, sizeof *p->fwd_s);
    p->bwd_s = calloc((size_t)n_layers, sizeof *p->bwd_s);
    p->n_algos = calloc((size_t)n_layers, sizeof *p->n_algos);
    p->algo_fwd_s = calloc((size_t)n_layers, sizeof *p->algo_fwd_s);
    p->algo_bwd_s = calloc((size_t)n_layers, sizeof *p->algo_bwd_s);
    if (!p->names || !p->kinds || !p->outs || !p->fwd_s || !p->bwd_s || !p->n_algos || !p->algo_fwd_s || !p->algo_bwd_s) {
        vdnn_profile_release(p);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "profile: out of memory for %d layers", n_layers);
    }
    return VDNN_OK;
}

vdnn_status vdnn_profile_init_graph(vdnn_profile *p, const vdnn_graph_t *g, vdnn_error *err)
{
    if (!g->resolved) {
        memset(p, 0, sizeof *p);
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile: the graph %s has no resolved shapes", g->name);
    }
    vdnn_status rc = vdnn_profile_init(p, g->n_layers, err);
    if (rc) return rc;
    snprintf(p->model, sizeof p->model, "%s", g->name);
    p->input = g->input;
    p->classes = g->classes;
    for (int l = 0; l < g->n_layers; l++) {
        snprintf(p->names[l], sizeof p->names[l], "%s", g->layers[l].name);
        p->kinds[l] = g->layers[l].kind;
        p->outs[l] = g->layers[l].out;
    }
    return VDNN_OK;
}

void vdnn_profile_release(vdnn_profile *p)
{
    free(p->names);
    free(p->kinds);
    free(p->outs);
    free(p->fwd_s);
    free(p->bwd_s);
    free(p->n_algos);
    free(p->algo_fwd_s);
    free(p->algo_bwd_s);
    free(p->sample_bytes);
    free(p->sample_d2h_s);
    free(p->sample_h2d_s);
    free(p->ops);
    memset(p, 0, sizeof *p);
}

static bool positive(double x) { return isfinite(x) && x > 0; }

/* Whether the executor runs anything for the layer's backward: it skips layers with no parameters
 * whose only inputs are the data, as no gradient is wanted there. */
static bool has_backward(const vdnn_layer *ly)
{
    if (ly->n_weight || ly->n_bias) return true;
    for (int i = 0; i < ly->n_inputs; i++)
        if (ly->inputs[i] != 0) return true;
    return false;
}

vdnn_status vdnn_profile_estimate(const vdnn_graph_t *g, double flops_per_s, double mem_bytes_per_s,
                                  double link_bytes_per_s, vdnn_profile *p, vdnn_error *err)
{
    if (!positive(flops_per_s)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile estimate: compute rate %g flop/s must be positive", flops_per_s);
    if (!positive(mem_bytes_per_s)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile estimate: memory bandwidth %g B/s must be positive", mem_bytes_per_s);
    if (!positive(link_bytes_per_s)) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "profile estimate: link bandwidth %g B/s must be positive", link_bytes_per_s);
    vdnn_status rc = vdnn_profile_init_graph(p, g, err);
    if (rc) return rc;
    snprintf(p->device, sizeof p->device, "estimate");
    double param_bytes = 0;
    for (int l = 1; l < g->n_layers; l++) {
        const vdnn_layer *ly = &g->layers[l];
        double bytes = (double)vdnn_map_bytes(g, ly->out);
        for (int i = 0; i < ly->n_inputs; i++) bytes += (double)vdnn_map_bytes(g, g->layers[ly->inputs[i]].out);
        p->fwd_s[l] = fmax(ly->flops_fwd / flops_per_s, bytes / mem_bytes_per_s);
        /* Backward reads x (or y) and dy and writes dx: about twice the traffic of forward. */
        p->bwd_s[l] = has_backward(ly) ? fmax(ly->flops_bwd / flops_per_s, 2 * bytes / mem_bytes_per_s) : 0;
        param_bytes += (double)(ly->n_weight + ly->n_bias) * sizeof(float);
    }
    /* The executor uploads the images and the labels (one per sample, or per token of a sequence) first. */
    p->load_s = ((double)vdnn_map_bytes(g, g->input) + (double)vdnn_graph_label_count(g) * 4) / link_bytes_per_s;
    /* SGD with momentum streams five arrays per parameter: reads w, dw and v, writes w and v. */
    p->update_s = 5 * param_bytes / mem_bytes_per_s;
    /* a += b reads two arrays and writes one. */
    p->accum_bytes_per_s = mem_bytes_per_s / 3;
    p->d2h = p->h2d = (vdnn_copy_model){ESTIMATE_COPY_LATENCY_S, link_bytes_per_s};
    p->measured = false;
    return VDNN_OK;
}

vdnn_status vdnn_profile_estimate_default(const vdnn_graph_t *g, vdnn_profile *p, vdnn_error *err)
{
    return vdnn_profile_estimate(g, VDNN_ESTIMATE_FLOPS_PER_S, VDNN_ESTIMATE_MEM_BYTES_PER_S,
                                 VDNN_ESTIMATE_LINK_BYTES_PER_S, p, err);
}

double vdnn_copy_slowdown_fit(double extra_s, double overlap_s)
{
    const double most = 4, r = overlap_s > 0 ? extra_s / overlap_s : 0;
    if (!(r > 0)) return 0;
    return r >= most / (1 + most) ? most : r / (1 - r);
}

/* seconds = latency + bytes / bandwidth, least squares. A negative intercept means the latency is below
 * what the samples resolve: the constrained optimum then lies on latency = 0, a line through the origin.
 * Times that do not grow with size (noise) fall back to that line too, which keeps the bandwidth finite. */
static bool usable(double s) { return isfinite(s) && s >= 0; }

vdnn_copy_model vdnn_copy_model_fit(const size_t *bytes, const double *seconds, int n)
{
    vdnn_copy_model m = {0, 0};
    double mx = 0, my = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!usable(seconds[i])) continue;
        mx += (double)bytes[i];
        my += seconds[i];
        k++;
    }
    if (k == 0) return m;
    mx /= k;
    my /= k;
    /* Centred sums: sizes reach 1e9, and raw sums of squares would cancel badly. */
    double sxx = 0, sxy = 0, ox = 0, oxy = 0;
    for (int i = 0; i < n; i++) {
        if (!usable(seconds[i])) continue;
        double x = (double)bytes[i], dx = x - mx;
        sxx += dx * dx;
        sxy += dx * (seconds[i] - my);
        ox += x * x;
        oxy += x * seconds[i];
    }
    if (sxx > 1e-12 * ox) {
        double slope = sxy / sxx, icpt = my - slope * mx;
        if (slope > 0 && icpt >= 0) {
            m.latency_s = icpt;
            m.bytes_per_s = 1 / slope;
            return m;
        }
    }
    if (ox > 0 && oxy > 0) m.bytes_per_s = ox / oxy;
    return m;
}
