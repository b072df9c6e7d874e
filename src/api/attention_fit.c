/* vdnn_model_fit_attention and _measured: which attentions to fuse, chosen by the plans of the model with some of
 * them fused, their costs estimated or composed from measured profiles of the model unfused and all fused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/plan_trial.h"
#include "plan/plan.h"

/* How much an attention gains from fusing, by what the unfused plan does with its probabilities: a recomputed one
 * is computed twice either way and fusing drops its memory, a swapped one also drops its copies, a kept one costs
 * the backward's recomputation for the memory it frees. Lower gains first. */
static int class_rank(const vdnn_plan_t *p, int tensors, const char *probs)
{
    for (int t = 0; t < tensors; t++) {
        vdnn_tensor_info ti;
        vdnn_error e = {VDNN_OK, ""};
        if (vdnn_plan_tensor(p, t, &ti, &e) != VDNN_OK || strcmp(ti.kind, "fmap") || strcmp(ti.name, probs)) continue;
        return ti.class_id == VDNN_CLASS_RECOMPUTE ? 0 : ti.class_id == VDNN_CLASS_SWAP ? 1 : 2;
    }
    return 2;
}

typedef struct trial {
    vdnn_model_t *m;
    bool fits;
    size_t need;
    double seconds;
} trial;

/* Fitting beats not fitting; among fitting plans the faster (ties keep the fewer fused, tried first), among the
 * rest the smaller least budget. */
static bool better(const trial *a, const trial *b)
{
    if (a->fits != b->fits) return a->fits;
    return a->fits ? a->seconds < b->seconds : a->need < b->need;
}

static vdnn_status fit(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                       const vdnn_memory_options *mem, const vdnn_trial_costs *costs, vdnn_model_t **out, bool *fused,
                       int *n_fused, bool *fits, vdnn_error *err)
{
    if (!m || !out || !n_fused || !fits)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_fit_attention: no model or no place for the answer");
    *out = NULL;
    *n_fused = 0;
    *fits = false;
    const int n = vdnn_model_attention_count(m);
    if (!n) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "fused attention: %s has no attention (attn_probs) layer", m->source);
    int *order = calloc((size_t)n, sizeof *order), *rank = calloc((size_t)n, sizeof *rank);
    bool *pick = calloc((size_t)n, sizeof *pick);
    vdnn_plan_t *base = NULL;
    vdnn_plan_summary sum;
    vdnn_status rc = order && rank && pick ? VDNN_OK : vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    if (rc == VDNN_OK) rc = vdnn_plan_trial(m, be, input, classes, mem, costs, &base, &sum, err);
    trial best = {NULL, false, SIZE_MAX, 0};
    if (rc == VDNN_OK) rc = vdnn_graph_clone(m, &best.m, err);
    if (rc == VDNN_OK) {
        best = (trial){best.m, sum.feasible, sum.min_budget_bytes, sum.simulated_s};
        for (int l = 1, a = 0; l < m->n_layers; l++)
            if (m->layers[l].kind == VDNN_LAYER_ATTN_PROBS) {
                rank[a] = class_rank(base, sum.tensors, m->layers[l].name);
                order[a] = a;
                a++;
            }
        /* By gain, and later attentions first within a class: their probabilities are the ones the backward
         * needs soonest, the hardest to hide a copy of. A stable insertion sort of a few dozen entries. */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0; j--) {
                const int x = order[j - 1], y = order[j];
                if (rank[x] < rank[y] || (rank[x] == rank[y] && x > y)) break;
                order[j - 1] = y;
                order[j] = x;
            }
    }
    vdnn_plan_free(base);
    /* Fusing the first k of that order for every k: n more plans. */
    for (int k = 1; k <= n && rc == VDNN_OK; k++) {
        pick[order[k - 1]] = true;
        trial t = {NULL, false, SIZE_MAX, 0};
        rc = vdnn_model_with_fused_attentions(m, pick, n, &t.m, err);
        if (rc == VDNN_OK) rc = vdnn_plan_trial(t.m, be, input, classes, mem, costs, NULL, &sum, err);
        if (rc == VDNN_OK) {
            t.fits = sum.feasible;
            t.need = sum.min_budget_bytes;
            t.seconds = sum.simulated_s;
        }
        if (rc == VDNN_OK && better(&t, &best)) {
            vdnn_model_free(best.m);
            best = t;
            *n_fused = k;
        } else {
            vdnn_model_free(t.m);
        }
    }
    if (rc == VDNN_OK) {
        *out = best.m;
        *fits = best.fits;
        if (fused) {
            memset(fused, 0, (size_t)n * sizeof *fused);
            for (int k = 0; k < *n_fused; k++) fused[order[k]] = true;
        }
    } else {
        vdnn_model_free(best.m);
    }
    free(order);
    free(rank);
    free(pick);
    return rc;
}

vdnn_status vdnn_model_fit_attention(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input, int classes,
                                     const vdnn_memory_options *mem, double flops_per_s, double mem_bytes_per_s,
                                     double link_d2h_bytes_per_s, double link_h2d_bytes_per_s, vdnn_model_t **out,
                                     bool *fused, int *n_fused, bool *fits, vdnn_error *err)
{
    const vdnn_trial_costs costs = {{flops_per_s, mem_bytes_per_s, link_d2h_bytes_per_s, link_h2d_bytes_per_s}, NULL,
                                    0};
    return fit(m, be, input, classes, mem, &costs, out, fused, n_fused, fits, err);
}

vdnn_status vdnn_model_fit_attention_measured(const vdnn_model_t *m, vdnn_backend_t *be, vdnn_shape input,
                                              int classes, const vdnn_memory_options *mem,
                                              const vdnn_profile_t *unfused, const vdnn_profile_t *all_fused,
                                              vdnn_model_t **out, bool *fused, int *n_fused, bool *fits,
                                              vdnn_error *err)
{
    if (!unfused || !all_fused)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_fit_attention_measured: a profile of the model with no "
                         "attention fused and one with all fused are needed");
    const vdnn_profile_t *both[2] = {unfused, all_fused};
    const vdnn_trial_costs costs = {{0, 0, 0, 0}, both, 2};
    return fit(m, be, input, classes, mem, &costs, out, fused, n_fused, fits, err);
}
