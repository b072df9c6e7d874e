/* PoocH (Ito et al.): start from every feature map swapped with swap-ins as early as memory allows;
 * maps whose copies hide behind compute stay swapped; those whose copy-out is exposed (L_O) are kept
 * greedily from the output layer back, those whose copy-in is exposed (L_I) are searched exhaustively;
 * then swapped maps move to recompute one at a time by the smallest r(X) = recompute overhead / swap
 * overhead while r(X) < 1. */
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"
#include "plan/policy.h"

/* Beyond this many exposed copy-ins the exhaustive search (2^n simulations) gives way to a greedy pass, */
#define POOCH_EXHAUSTIVE_MAX 10
/* ... and when its simulations (each mask, then the greedy pass over L_O) would exceed this many. */
#define POOCH_EXHAUSTIVE_EVALS 2048L
/* Moving maps to recompute takes two simulations per swapped map per move; past this many simulations
 * the maps still swapped stay swapped (deep nets at tight budgets would otherwise take minutes). */
#define POOCH_MAX_EVALUATIONS 6000

static void all_swapped(vdnn_plan_t *p)
{
    for (int i = 0; i < p->n_storages_analyzed; i++) {
        vdnn_storage *x = &p->st[i];
        x->cls = x->candidate ? VDNN_CLASS_SWAP : VDNN_CLASS_KEEP;
        x->prefetch_step = x->recompute_step = -1;
    }
}

static int by_layer_desc(const void *a, const void *b, const vdnn_plan_t *p)
{
    return p->st[*(const int *)b].layer - p->st[*(const int *)a].layer;
}

static void sort_layer_desc(int *v, int n, const vdnn_plan_t *p)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && by_layer_desc(&v[j - 1], &v[j], p) > 0; j--) {
            int t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* L_O \ L_I: from the output layer back, keep each map if that stays within memory and is faster. */
static vdnn_status greedy_keep(vdnn_search *s, const int *lo, int n_lo, double *t_cur, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    vdnn_status rc = VDNN_OK;
    for (int k = 0; rc == VDNN_OK && k < n_lo; k++) {
        /* By index, not by pointer: an evaluation may add storages (recompute workspaces) and move p->st. */
        if (p->st[lo[k]].cls != VDNN_CLASS_SWAP) continue;
        p->st[lo[k]].cls = VDNN_CLASS_KEEP;
        double t;
        bool fits = false;
        rc = vdnn_search_eval_early(s, &t, NULL, err);
        if (rc == VDNN_OK && t <= *t_cur) rc = vdnn_search_fits(s, &fits, err);
        if (rc == VDNN_OK && fits) *t_cur = t;
        else p->st[lo[k]].cls = VDNN_CLASS_SWAP;
    }
    return rc;
}

static vdnn_status keep_swap_search(vdnn_search *s, vdnn_classes *out, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    const int n = p->n_storages_analyzed;
    double *so = malloc(sizeof(double) * (size_t)n), *si = malloc(sizeof(double) * (size_t)n);
    int *li = malloc(sizeof(int) * (size_t)n), *lo = malloc(sizeof(int) * (size_t)n);
    vdnn_classes base = {0};
    vdnn_status rc = (!so || !si || !li || !lo) ? vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory in PoocH") : VDNN_OK;
    double t0 = 0, best_t = 1e300;
    bool fits = false;
    if (rc == VDNN_OK) {
        all_swapped(p);
        rc = vdnn_search_eval_early(s, &t0, &fits, err);
    }
    if (rc == VDNN_OK) rc = vdnn_search_stalls(s, so, si, err);
    int n_li = 0, n_lo = 0;
    for (int i = 0; rc == VDNN_OK && i < n; i++) {
        if (p->st[i].cls != VDNN_CLASS_SWAP) continue;
        if (si[i] > 0) li[n_li++] = i;
        else if (so[i] > 0) lo[n_lo++] = i;
    }
    sort_layer_desc(lo, n_lo, p);
    if (rc == VDNN_OK) rc = vdnn_classes_save(p, &base, err);
    if (rc == VDNN_OK) rc = vdnn_classes_save(p, out, err);
    if (rc == VDNN_OK && fits) best_t = t0;
    if (rc == VDNN_OK && n_li <= POOCH_EXHAUSTIVE_MAX && ((long)(n_lo + 2) << n_li) <= POOCH_EXHAUSTIVE_EVALS) {
        for (long mask = 0; rc == VDNN_OK && mask < (1L << n_li); mask++) {
            vdnn_classes_load(p, &base);
            for (int k = 0; k < n_li; k++)
                if (mask & (1L << k)) p->st[li[k]].cls = VDNN_CLASS_KEEP;
            double t;
            rc = vdnn_search_eval_early(s, &t, &fits, err);
            if (rc != VDNN_OK || !fits) continue;
            rc = greedy_keep(s, lo, n_lo, &t, err);
            if (rc == VDNN_OK) rc = vdnn_search_eval_early(s, &t, NULL, err);
            fits = false;
            if (rc == VDNN_OK && t < best_t) rc = vdnn_search_fits(s, &fits, err);
            if (rc == VDNN_OK && fits) {
                best_t = t;
                rc = vdnn_classes_save(p, out, err);
            }
        }
    } else if (rc == VDNN_OK) {
        /* Too many for 2^n: keep exposed copy-ins greedily, largest stall first. */
        for (int a = 1; a < n_li; a++)
            for (int b = a; b > 0 && si[li[b]] > si[li[b - 1]]; b--) {
                int t = li[b];
                li[b] = li[b - 1];
                li[b - 1] = t;
            }
        double t = best_t;
        rc = greedy_keep(s, li, n_li, &t, err);
        if (rc == VDNN_OK) rc = greedy_keep(s, lo, n_lo, &t, err);
        if (rc == VDNN_OK) rc = vdnn_search_eval_early(s, &t, NULL, err);
        fits = false;
        if (rc == VDNN_OK && t < best_t) rc = vdnn_search_fits(s, &fits, err);
        if (rc == VDNN_OK && fits) {
            best_t = t;
            rc = vdnn_classes_save(p, out, err);
        }
    }
    vdnn_classes_release(&base);
    free(so);
    free(si);
    free(li);
    free(lo);
    return rc;
}

/* Step 2: swap -> recompute by r(X), smallest first, while r(X) < 1. Whether a recompute fits is asked
 * (which may place blocks) only of the map about to move, smallest r(X) first. */
static vdnn_status swap_to_recompute(vdnn_search *s, vdnn_error *err)
{
    vdnn_plan_t *p = s->p;
    const int n = p->n_storages_analyzed;
    char *in_l = calloc((size_t)n, 1);
    double *r = malloc(sizeof(double) * (size_t)n);
    if (!in_l || !r) {
        free(in_l);
        free(r);
        return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory in PoocH");
    }
    int left = 0;
    for (int i = 0; i < n; i++)
        if (p->st[i].cls == VDNN_CLASS_SWAP && p->st[i].kind == VDNN_ST_FMAP && p->st[i].layer > 0) {
            in_l[i] = 1;
            left++;
        }
    vdnn_status rc = VDNN_OK;
    while (rc == VDNN_OK && left > 0 && s->evaluations < POOCH_MAX_EVALUATIONS) {
        double t_swap;
        rc = vdnn_search_eval_early(s, &t_swap, NULL, err);
        for (int i = 0; rc == VDNN_OK && i < n; i++) {
            if (!in_l[i]) continue;
            /* By index, not by pointer: an evaluation may add storages (recompute workspaces) and move p->st. */
            double t_keep, t_rc;
            p->st[i].cls = VDNN_CLASS_KEEP;
            rc = vdnn_search_eval_early(s, &t_keep, NULL, err);
            p->st[i].cls = VDNN_CLASS_RECOMPUTE;
            if (rc == VDNN_OK) rc = vdnn_search_eval_early(s, &t_rc, NULL, err);
            p->st[i].cls = VDNN_CLASS_SWAP;
            double swap_ov = t_swap - t_keep, rc_ov = t_rc - t_keep;
            r[i] = swap_ov > 0 ? rc_ov / swap_ov : 1e300;
            if (r[i] >= 1.0) {
                in_l[i] = 0; /* stays swapped */
                left--;
            }
        }
        /* The smallest r(X) whose recompute fits moves; one that does not fit stays swapped. */
        for (;;) {
            int pick = -1;
            for (int i = 0; i < n; i++)
                if (in_l[i] && (pick < 0 || r[i] < r[pick])) pick = i;
            if (pick < 0 || rc != VDNN_OK) break;
            bool fits = false;
            p->st[pick].cls = VDNN_CLASS_RECOMPUTE;
            rc = vdnn_search_eval_early(s, NULL, &fits, err);
            in_l[pick] = 0;
            left--;
            if (fits) break;
            p->st[pick].cls = VDNN_CLASS_SWAP;
        }
    }
    free(in_l);
    free(r);
    if (rc == VDNN_OK) rc = vdnn_search_eval_early(s, NULL, NULL, err);
    return rc;
}

vdnn_status vdnn_planner_pooch(vdnn_plan_t *p, const vdnn_graph_t *g, vdnn_error *err)
{
    vdnn_search s;
    vdnn_classes step1 = {0};
    vdnn_status rc = vdnn_search_begin(&s, p, g, err);
    /* In-core when it fits: nothing to hide. */
    if (rc == VDNN_OK) {
        vdnn_policy_static(p, g, VDNN_POLICY_NONE);
        bool fits = false;
        rc = vdnn_search_eval(&s, NULL, &fits, err);
        if (rc == VDNN_OK && fits) {
            rc = vdnn_search_finish(&s, err);
            vdnn_search_release(&s);
            return rc;
        }
    }
    if (rc == VDNN_OK) rc = keep_swap_search(&s, &step1, err);
    if (rc == VDNN_OK) {
        vdnn_classes_load(p, &step1);
        rc = swap_to_recompute(&s, err);
    }
    if (rc == VDNN_OK) rc = vdnn_search_finish(&s, err);
    vdnn_classes_release(&step1);
    vdnn_search_release(&s);
    return rc;
}
