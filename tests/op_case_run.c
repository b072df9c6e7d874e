/* One case of the op harness on one backend: every candidate against the CPU, the reference and finite
 * differences, and the properties the executor relies on. */
#include "op_case_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_check.h"
#include "op_desc.h"
#include "op_exec.h"
#include "op_ref.h"
#include "testutil.h"

/* At most this many outputs of a case are recomputed by the double reference (evenly strided). */
#define REF_MAX_CHECKS 4096
/* Results a variation of the call must not change, though they may be summed in another order (the
 * parameter gradients without dx). */
#define SAME_RTOL 1e-5
/* Batchnorm's running statistics against PyTorch's update rule, and its batch variance recovered from
 * cuDNN's 1/sqrt(var + eps). */
#define STATS_RTOL 1e-5
#define VAR_FROM_INVSTD_RTOL 1e-4
/* A candidate computing through FFT or Winograd against direct summation, and its gradients against finite
 * differences: on an H200 (cuDNN 9.14, TF32 off) the Winograd backward-filter algorithm's dw differed from the CPU
 * by 2.3e-3 of the tensor's scale (AlexNet conv2), and GoogLeNet's 5x5 layers' dw missed the plain finite-difference
 * bound by up to 3x. */
#define TRANSFORM_RTOL 4e-3

typedef struct ctx {
    const vt_case_backend *cb;
    const vt_op_case *c;
    vt_op_data *in;
    int algo;
    const char *algo_name;
    const char *detail; /* what the candidate runs, where the backend says */
} ctx;

static void expect(const ctx *x, bool ok, const char *what, const char *msg)
{
    if (!ok)
        fail_msg("%s on %s (candidate %d, %s%s%s): %s: %s", x->c->name, x->cb->name, x->algo, x->algo_name,
                 x->detail && *x->detail ? ": " : "", x->detail ? x->detail : "", what, msg);
}

static void expect_close(const ctx *x, const char *label, const char *tensor, const float *got, const float *want,
                         size_t n, double rtol)
{
    if (!n || !got || !want) return;
    char msg[256], what[128];
    snprintf(what, sizeof what, "%s, %s", label, tensor);
    expect(x, vt_close(got, want, n, rtol, msg, sizeof msg), what, msg);
}

static bool is_bn_training(const vdnn_op_desc *d) { return d->kind == VDNN_LAYER_BATCHNORM && d->training; }

/* The batch variance from a batchnorm aux laid out either way: the CPU keeps variances right after the C means,
 * cuDNN inverse standard deviations from the first 256-byte boundary after them. */
static void bn_variance(const float *aux, int c, float eps, bool invstd, float *var)
{
    const size_t second = invstd ? ((size_t)c * sizeof(float) + 255) / 256 * 256 / sizeof(float) : (size_t)c;
    for (int i = 0; i < c; i++) var[i] = invstd ? 1.0f / (aux[second + i] * aux[second + i]) - eps : aux[second + i];
}

/* Every output both runs have. */
static void compare_runs(const ctx *x, const char *label, const vt_op_result *got, bool got_invstd,
                         const vt_op_result *want, bool want_invstd, double rtol)
{
    const vt_op_data *in = x->in;
    expect_close(x, label, "y", got->y, want->y, in->ny, rtol);
    if (in->labels) expect_close(x, label, "loss", &got->loss, &want->loss, 1, rtol);
    char name[16];
    for (int i = 0; i < in->d.n_inputs; i++) {
        snprintf(name, sizeof name, "dx[%d]", i);
        expect_close(x, label, name, got->dx[i], want->dx[i], in->nx[i], rtol);
    }
    expect_close(x, label, "dw", got->dw, want->dw, in->nw, rtol);
    expect_close(x, label, "db", got->db, want->db, in->nb, rtol);
    expect_close(x, label, "running statistics", got->stats, want->stats, in->nstats, rtol);
    if (!is_bn_training(&in->d)) return;
    const int c = in->d.in[0].c;
    expect_close(x, label, "aux (batch mean)", got->aux, want->aux, (size_t)c, rtol);
    float *vg = malloc((size_t)c * sizeof *vg), *vw = malloc((size_t)c * sizeof *vw);
    assert_true(vg && vw);
    bn_variance(got->aux, c, in->d.p.bn_eps, got_invstd, vg);
    bn_variance(want->aux, c, in->d.p.bn_eps, want_invstd, vw);
    const double vtol = got_invstd == want_invstd ? rtol : fmax(rtol, VAR_FROM_INVSTD_RTOL);
    expect_close(x, label, "aux (batch variance)", vg, vw, (size_t)c, vtol);
    free(vg), free(vw);
}

/* What op_query says with the candidate's algorithm is what op_algos listed for it: the planner reads both. */
static void check_info(const ctx *x, const vdnn_op_info *listed, const vdnn_op_info *queried)
{
    char msg[256];
    expect(x, vt_op_info_same(listed, queried, msg, sizeof msg), "op_algos' info against op_query's (listed/queried)",
           msg);
}

static void check_bn_reference(const ctx *x, const vt_op_result *r)
{
    const vt_op_data *in = x->in;
    const vdnn_shape s = in->d.in[0];
    const int c = s.c;
    double *ref = malloc(4 * (size_t)c * sizeof *ref);
    float *var = malloc((size_t)c * sizeof *var);
    assert_true(ref && var);
    double *mean = ref, *bvar = ref + c, *stats = ref + 2 * c;
    vt_ref_batch_stats(in, mean, bvar);
    char msg[256];
    expect(x, vt_close_ref(r->aux, mean, (size_t)c, vt_op_ref_rtol(in->d.kind), msg, sizeof msg),
           "aux (batch mean) against the double reference", msg);
    bn_variance(r->aux, c, in->d.p.bn_eps, x->cb->bn_aux_invstd, var);
    expect(x, vt_close_ref(var, bvar, (size_t)c, VAR_FROM_INVSTD_RTOL, msg, sizeof msg),
           "aux (biased batch variance) against the double reference", msg);
    /* PyTorch's rule: running = (1 - m) running + m batch, with the unbiased batch variance. */
    const double m = in->d.p.bn_momentum, count = (double)s.n * s.h * s.w;
    for (int i = 0; i < c; i++) {
        stats[i] = (1 - m) * in->stats[i] + m * mean[i];
        stats[c + i] = (1 - m) * in->stats[c + i] + m * bvar[i] * count / (count - 1);
    }
    expect(x, vt_close_ref(r->stats, stats, 2 * (size_t)c, STATS_RTOL, msg, sizeof msg),
           "running statistics against PyTorch's update rule", msg);
    free(ref), free(var);
}

static void check_reference(const ctx *x, const vt_op_result *r)
{
    const vt_op_data *in = x->in;
    const size_t step = in->ny > REF_MAX_CHECKS ? (in->ny + REF_MAX_CHECKS - 1) / REF_MAX_CHECKS : 1;
    double *ref = malloc(in->ny * sizeof *ref), loss = 0;
    assert_non_null(ref);
    vt_ref_forward(in, step, ref, &loss);
    char msg[256];
    expect(x, vt_close_ref(r->y, ref, in->ny, vt_op_ref_rtol(in->d.kind), msg, sizeof msg),
           "y against the double reference", msg);
    if (in->labels)
        expect(x, vt_close_ref(&r->loss, &loss, 1, vt_op_ref_rtol(in->d.kind), msg, sizeof msg),
               "loss against the double reference", msg);
    free(ref);
    if (is_bn_training(&in->d)) check_bn_reference(x, r);
    if (in->d.kind == VDNN_LAYER_DROPOUT && in->d.training && in->ny >= 100000) {
        /* The shared mask hash keeps 1 - p of the values, within five standard deviations. */
        size_t kept = 0;
        for (size_t i = 0; i < in->ny; i++) kept += r->y[i] != 0.0f;
        const double p = in->d.p.dropout_p, n = (double)in->ny, sd = sqrt(p * (1 - p) / n);
        snprintf(msg, sizeof msg, "%zu of %zu kept, p %g", kept, in->ny, p);
        expect(x, fabs((double)kept / n - (1 - p)) <= 5 * sd, "dropout's kept fraction", msg);
    }
}

/* Every gradient against central differences of the objective: along a random direction always, element by
 * element on small cases. base: the CPU's results, NULL on the CPU itself. */
static void check_gradients(const ctx *x, const vdnn_op_algo *algo, const vt_op_result *r, const vt_op_result *base)
{
    vt_op_data *in = x->in;
    if (!vt_op_has_backward(&in->d)) return;
    const bool bn = in->d.kind == VDNN_LAYER_BATCHNORM;
    struct {
        float *t;
        size_t n;
        const float *g;
        char name[16];
    } ts[VDNN_MAX_INPUTS + 2];
    int nt = 0;
    for (int i = 0; i < in->d.n_inputs; i++) {
        if (in->d.kind == VDNN_LAYER_EMBED) continue; /* token ids: not differentiable (dx is zero) */
        ts[nt].t = in->x[i], ts[nt].n = in->nx[i], ts[nt].g = r->dx[i];
        snprintf(ts[nt++].name, sizeof ts[0].name, "dx[%d]", i);
    }
    ts[nt].t = in->w, ts[nt].n = in->nw, ts[nt].g = r->dw;
    snprintf(ts[nt++].name, sizeof ts[0].name, "%s", bn ? "dgamma" : "dw");
    ts[nt].t = in->b, ts[nt].n = in->nb, ts[nt].g = r->db;
    snprintf(ts[nt++].name, sizeof ts[0].name, "%s", bn ? "dbeta" : "db");
    const double obj_err = base ? vt_objective_error(in, r->y, base->y, r->loss, base->loss) : 0.0;
    const double g_rtol = algo->transform ? TRANSFORM_RTOL : 0.0;
    vt_exec e;
    vt_exec_open(&e, x->cb->be, in, x->algo);
    char msg[256], what[96];
    for (int k = 0; k < nt; k++) {
        if (!ts[k].n) continue;
        const uint64_t seed = x->c->seed + 7 * (uint64_t)k + 1000 * (uint64_t)x->algo;
        snprintf(what, sizeof what, "%s against finite differences along a random direction", ts[k].name);
        expect(x, vt_fd_direction(&e, ts[k].t, ts[k].n, ts[k].g, obj_err, g_rtol, seed, msg, sizeof msg), what, msg);
        if (!x->c->small) continue;
        snprintf(what, sizeof what, "%s against finite differences element by element", ts[k].name);
        expect(x, vt_fd_elements(&e, ts[k].t, ts[k].n, ts[k].g, obj_err, g_rtol, seed, msg, sizeof msg), what, msg);
    }
    vt_exec_close(&e);
}

/* Runs the candidate again with one variation and compares with the plain run r. */
static void vary(const ctx *x, vt_call call, const char *label, const vt_op_result *r, double rtol)
{
    vt_op_result o;
    call.algo = x->algo;
    vt_op_run(x->cb->be, x->in, &call, &o);
    compare_runs(x, label, &o, x->cb->bn_aux_invstd, r, x->cb->bn_aux_invstd, rtol);
    vt_op_result_free(&o);
}

static void check_properties(const ctx *x, const vdnn_op_algo *algo, const vt_op_result *r)
{
    const vt_op_data *in = x->in;
    const vdnn_op_desc *d = &in->d;
    const bool bwd = vt_op_has_backward(d);
    const vt_call plain = {.update_stats = true, .backward = bwd};
    vt_call c;
    if (algo->numerics >= 0) vary(x, plain, "run again (a reproducible candidate)", r, 0);
    if (r->info.inplace_ok) {
        c = plain, c.fwd_inplace = true;
        vary(x, c, "y written over x[0] (op_info.inplace_ok)", r, 0);
    }
    if (bwd && r->info.bwd_inplace_ok) {
        c = plain, c.bwd_inplace = true;
        vary(x, c, "dx written over dy (op_info.bwd_inplace_ok)", r, 0);
    }
    /* The layer right after the data wants no dx; a branch may want the gradient of one input only. */
    if (bwd && (in->nw || d->n_inputs > 1)) {
        c = plain, c.skip_dx = in->nw ? (1u << d->n_inputs) - 1 : 1u << (d->n_inputs - 1);
        /* A candidate that is not reproducible rounds its 16-bit sums differently run to run. */
        const bool half = x->cb->dtype != VDNN_DTYPE_F32 && algo->numerics < 0;
        vary(x, c, "without dx", r, half ? fmax(SAME_RTOL, vt_op_rtol_dtype(d->kind, x->cb->dtype)) : SAME_RTOL);
    }
    /* Evaluation runs max pooling without aux. */
    if (d->kind == VDNN_LAYER_MAXPOOL) {
        c = plain, c.backward = false, c.fwd_no_aux = true;
        vary(x, c, "forward without aux", r, 0);
    }
    /* Batchnorm's gradients do not depend on beta. */
    if (is_bn_training(d)) {
        c = plain, c.bwd_no_bias = true;
        vary(x, c, "backward without beta", r, 0);
    }
    /* Without update_stats the running statistics stay as they were (vt_op_run checks) and y is the same. */
    if (in->nstats) {
        vt_op_result o;
        c = plain, c.algo = x->algo, c.update_stats = false, c.backward = false;
        vt_op_run(x->cb->be, x->in, &c, &o);
        expect_close(x, "forward without updating the running statistics", "y", o.y, r->y, in->ny, 0);
        vt_op_result_free(&o);
    }
}

/* Convolutions may offer several candidates, and so may an LSTM chunk with 16-bit maps (groups of samples); every
 * other op one, named "default", as is the LSTM's first; an index outside the list is refused. d: the case's
 * description in the backend's type. */
static void check_candidate_list(const vt_case_backend *cb, const vt_op_case *c, const vdnn_op_desc *cd,
                                 const vdnn_op_algo *algos, int n)
{
    vdnn_backend_t *be = cb->be;
    const bool several = cd->kind == VDNN_LAYER_CONV || (cd->kind == VDNN_LAYER_LSTM && cd->dtype != VDNN_DTYPE_F32);
    if (cd->kind != VDNN_LAYER_CONV && ((!several && n != 1) || strcmp(algos[0].name, "default")))
        fail_msg("%s on %s: %d candidates, the first \"%s\"; ops other than conv and a 16-bit LSTM have one, "
                 "\"default\"", c->name, cb->name, n, algos[0].name);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < a; b++)
            if (!strcmp(algos[a].name, algos[b].name))
                fail_msg("%s on %s: two candidates named %s", c->name, cb->name, algos[a].name);
    const int bad[2] = {n, -1};
    for (int k = 0; k < 2; k++) {
        vdnn_op_desc d = *cd;
        vdnn_op_info info;
        vdnn_error err = {0};
        d.algo = bad[k];
        vdnn_status st = be->ops->op_query(be, &d, &info, &err);
        if (st != VDNN_ERR_INVALID_ARG || !strstr(err.msg, "algorithm"))
            fail_msg("%s on %s: candidate %d of %d: %s \"%s\", expected %s naming the algorithm", c->name, cb->name,
                     bad[k], n, vdnn_status_name(st), err.msg, vdnn_status_name(VDNN_ERR_INVALID_ARG));
    }
}

int vt_case_run(const vt_case_backend *cb, const vt_op_case *c)
{
    vdnn_backend_t *be = cb->be;
    vt_op_data in;
    vt_op_data_random(&in, c->name, &c->d, vt_fill_for(&c->d), c->seed);
    /* A 16-bit run and its fp32 reference read the same values: the maps rounded to the type first. */
    const bool reduced = cb->dtype != VDNN_DTYPE_F32;
    if (reduced) vt_op_data_round(&in, cb->dtype);
    /* The same tensors as maps of the backend's type: a view, `in` owns them. */
    vt_op_data run = in;
    run.d.dtype = cb->dtype;
    vdnn_op_algo algos[VDNN_MAX_ALGOS];
    int n = 0;
    vdnn_error err = {0};
    vt_assert_ok(be->ops->op_algos(be, &run.d, algos, &n, &err), err);
    if (n < 1 || n > VDNN_MAX_ALGOS) fail_msg("%s on %s: op_algos gives %d candidates", c->name, cb->name, n);
    check_candidate_list(cb, c, &run.d, algos, n);
    const vt_call plain = {.update_stats = true, .backward = vt_op_has_backward(&c->d)};
    const double rtol = vt_op_rtol_dtype(c->d.kind, cb->dtype);
    vt_op_result base, res[VDNN_MAX_ALGOS];
    const bool other = cb->ref != be || reduced;
    if (other) vt_op_run(cb->ref, &in, &plain, &base);
    for (int a = 0; a < n; a++) {
        const ctx x = {cb, c, &run, a, algos[a].name, algos[a].detail};
        vt_call call = plain;
        call.algo = a;
        vt_op_run(be, &run, &call, &res[a]);
        check_info(&x, &algos[a].info, &res[a].info);
        const double rtol_a = algos[a].transform && !reduced ? fmax(rtol, TRANSFORM_RTOL) : rtol;
        if (other) compare_runs(&x, reduced ? "against fp32 cpu" : "against cpu", &res[a], cb->bn_aux_invstd, &base, false, rtol_a);
        else if (a > 0) compare_runs(&x, "against candidate 0", &res[a], false, &res[0], false, rtol_a);
        /* Candidates with equal numerics promise bitwise equal results. */
        for (int b = 0; b < a; b++)
            if (algos[b].numerics >= 0 && algos[b].numerics == algos[a].numerics)
                compare_runs(&x, "against a candidate with equal numerics", &res[a], cb->bn_aux_invstd, &res[b],
                             cb->bn_aux_invstd, 0);
        /* The fp32 CPU, itself held to the references and finite differences, is the oracle of 16-bit runs. */
        if (!reduced) {
            check_reference(&x, &res[a]);
            check_gradients(&x, &algos[a], &res[a], other ? &base : NULL);
        }
        check_properties(&x, &algos[a], &res[a]);
    }
    for (int a = 0; a < n; a++) vt_op_result_free(&res[a]);
    if (other) vt_op_result_free(&base);
    vt_op_data_free(&in);
    return n;
}
