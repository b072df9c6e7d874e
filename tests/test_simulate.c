/* The timeline simulator against iterations worked out by hand (a chain of convolutions, a diamond with a
 * gradient accumulation), its memory curve against the plan's, and the trace and SVG writers' output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan/json.h"
#include "plan/plan.h"
#include "plan/simulate.h"
#include "plan/svg.h"
#include "testutil.h"
#include "backend/backend.h"

#define MS 1e-3
#define EPS 1e-12

static void assert_near(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= EPS + 1e-12 * fabs(want))) fail_msg("%s: got %.15g, want %.15g", what, got, want);
}

/* data(4x1x1) -> conv1 -> conv2 -> conv3 -> softmax: every feature map is 16 bytes at batch 1. */
static const char *chain_text = "[net]\nname=chain\ninput=4x1x1\nclasses=4\n"
                                "[conv1]\ntype=conv\nfilters=4\nsize=1\n"
                                "[conv2]\ntype=conv\nfilters=4\nsize=1\n"
                                "[conv3]\ntype=conv\nfilters=4\nsize=1\n"
                                "[loss]\ntype=softmax\n";

/* data -> a -> (b, c) -> add -> softmax: a's gradient arrives twice and is accumulated. */
static const char *diamond_text = "[net]\nname=diamond\ninput=4x1x1\nclasses=4\n"
                                  "[a]\ntype=conv\nfilters=4\nsize=1\n"
                                  "[b]\ntype=conv\nfilters=4\nsize=1\ninput=a\n"
                                  "[c]\ntype=conv\nfilters=4\nsize=1\ninput=a\n"
                                  "[sum]\ntype=add\ninput=b,c\n"
                                  "[loss]\ntype=softmax\n";

static vdnn_graph_t *graph(const char *text, int batch)
{
    vdnn_graph_t *g = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_graph_parse(text, "t.cfg", &g, &err), err);
    vt_assert_ok(vdnn_graph_resolve(g, (vdnn_shape){batch, 4, 1, 1}, 4, &err), err);
    return g;
}

/* Op info as the CPU backend gives it for these kinds, without a backend: convolutions read x in
 * backward, softmax reads its output, add reads neither. */
static vdnn_op_info *infos(const vdnn_graph_t *g)
{
    vdnn_op_info *info = calloc((size_t)g->n_layers, sizeof *info);
    assert_non_null(info);
    for (int l = 1; l < g->n_layers; l++) {
        if (g->layers[l].kind == VDNN_LAYER_CONV) info[l].bwd_needs_x = true;
        if (g->layers[l].kind == VDNN_LAYER_SOFTMAX_XENT) info[l].bwd_needs_y = true;
    }
    return info;
}

static vdnn_plan_t *plan(const vdnn_graph_t *g, const vdnn_op_info *info, vdnn_policy pol)
{
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.policy = pol;
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(g, info, &rq, &p, &err), err);
    return p;
}

/* Costs in whole milliseconds; copies of the 16-byte maps take copy_s, accumulation accum_s. */
static void profile(const vdnn_graph_t *g, const double *fwd_ms, const double *bwd_ms, double copy_s, double latency_s,
                    double accum_s, vdnn_profile *p)
{
    vdnn_error err;
    vt_assert_ok(vdnn_profile_init_graph(p, g, &err), err);
    for (int l = 1; l < g->n_layers; l++) {
        p->fwd_s[l] = fwd_ms[l] * MS;
        p->bwd_s[l] = bwd_ms[l] * MS;
    }
    p->d2h = p->h2d = (vdnn_copy_model){latency_s, 16 / (copy_s - latency_s)};
    p->accum_bytes_per_s = 16 / accum_s;
}

static void simulate(const vdnn_plan_t *p, const vdnn_graph_t *g, const vdnn_profile *prof, vdnn_timeline *t)
{
    vdnn_error err;
    vt_assert_ok(vdnn_simulate(p, g, prof, t, &err), err);
}

/* The first span with this label starting at or after `from` seconds. */
static const vdnn_span *find_span_from(const vdnn_timeline *t, const char *label, double from)
{
    for (int i = 0; i < t->n_spans; i++)
        if (!strcmp(t->spans[i].label, label) && t->spans[i].start >= from - EPS) return &t->spans[i];
    fail_msg("no span '%s' from %g s", label, from);
    return NULL;
}

static const vdnn_span *find_span(const vdnn_timeline *t, const char *label) { return find_span_from(t, label, 0); }

/* Peak of the simulated memory = the largest live total of any step of the plan, and never above the
 * placed peak; the curve starts and ends at the persistent bytes. */
static void check_memory(const vdnn_plan_t *p, const vdnn_timeline *t)
{
    size_t *live = calloc((size_t)p->n_steps, sizeof *live);
    assert_non_null(live);
    vdnn_plan_live_bytes(p, live);
    size_t max = 0;
    for (int s = 0; s < p->n_steps; s++)
        if (live[s] > max) max = live[s];
    free(live);
    assert_int_equal(t->peak_live_bytes, max);
    assert_true(t->peak_live_bytes <= p->peak_device_bytes);
    assert_true(t->n_mem >= 2);
    assert_int_equal(t->mem[0].bytes, p->persistent_bytes);
    assert_int_equal(t->mem[t->n_mem - 1].bytes, p->persistent_bytes);
    assert_near(t->mem[t->n_mem - 1].t, t->iteration_s, "memory curve end");
    for (int i = 1; i < t->n_mem; i++) assert_true(t->mem[i].t >= t->mem[i - 1].t);
}

static const double chain_fwd[] = {0, 1, 1, 1, 0}, chain_bwd[] = {0, 2, 2, 2, 0};

/* The chain under vDNN_all, simulated with copies of copy_s (latency_s of it latency) and compute slowed by
 * `slowdown` while a copy is queued; busy_s > 0: copies overlapping compute take busy_s instead (the
 * profile's busy link). */
typedef struct chain_run {
    vdnn_graph_t *g;
    vdnn_op_info *info;
    vdnn_plan_t *p;
    vdnn_profile prof;
    vdnn_timeline t;
} chain_run;

static void chain_all(double copy_s, double latency_s, double slowdown, double busy_s, chain_run *r)
{
    r->g = graph(chain_text, 1);
    r->info = infos(r->g);
    r->p = plan(r->g, r->info, VDNN_POLICY_ALL);
    profile(r->g, chain_fwd, chain_bwd, copy_s, latency_s, 1 * MS, &r->prof);
    r->prof.copy_slowdown = slowdown;
    if (busy_s > 0) r->prof.d2h_busy = r->prof.h2d_busy = (vdnn_copy_model){0, 16 / busy_s};
    simulate(r->p, r->g, &r->prof, &r->t);
}

static void chain_release(chain_run *r)
{
    vdnn_timeline_release(&r->t);
    vdnn_profile_release(&r->prof);
    vdnn_plan_free(r->p);
    free(r->info);
    vdnn_graph_free(r->g);
}

/* In-core: compute back to back, no copies. */
static void test_chain_none(void **state)
{
    (void)state;
    vdnn_graph_t *g = graph(chain_text, 1);
    vdnn_op_info *info = infos(g);
    vdnn_plan_t *p = plan(g, info, VDNN_POLICY_NONE);
    vdnn_profile prof;
    profile(g, chain_fwd, chain_bwd, 3 * MS, 0, 1 * MS, &prof);
    prof.load_s = 0.5 * MS;
    prof.update_s = 0.25 * MS;
    vdnn_timeline t;
    simulate(p, g, &prof, &t);
    assert_near(t.iteration_s, 0.5 * MS + 3 * MS + 6 * MS + 0.25 * MS, "iteration");
    assert_near(t.compute_s, t.iteration_s, "compute");
    assert_near(t.stall_s, 0, "stall");
    assert_near(t.d2h_s + t.h2d_s, 0, "copies");
    const vdnn_span *s = find_span(&t, "fwd conv2");
    assert_int_equal(s->kind, VDNN_SPAN_FWD);
    assert_int_equal(s->lane, VDNN_LANE_COMPUTE);
    assert_near(s->start, 1.5 * MS, "fwd conv2 start");
    assert_near(s->end, 2.5 * MS, "fwd conv2 end");
    s = find_span(&t, "bwd conv3");
    assert_int_equal(s->kind, VDNN_SPAN_BWD);
    assert_near(s->start, 3.5 * MS, "bwd conv3 start");
    assert_int_equal(find_span(&t, "load")->kind, VDNN_SPAN_LOAD);
    assert_int_equal(find_span(&t, "update")->kind, VDNN_SPAN_UPDATE);
    /* Spans of zero length (the softmax here) are left out. */
    for (int i = 0; i < t.n_spans; i++) assert_true(t.spans[i].end > t.spans[i].start);
    check_memory(p, &t);
    vdnn_timeline_release(&t);
    vdnn_profile_release(&prof);
    vdnn_plan_free(p);
    free(info);
    vdnn_graph_free(g);
}

/* vDNN_all on the chain, each copy 3 ms, forward 1 ms, backward 2 ms per conv:
 *   fwd conv1 0-1, data goes out 0-3: stall 1-3      fwd conv2 3-4, conv1 out 3-6: stall 4-6
 *   fwd conv3 6-7, conv2 out 6-9: stall 7-9          (softmax costs nothing)
 *   conv2 comes back 9-12 (issued at bwd loss):      stall 9-12, bwd conv3 12-14
 *   conv1 back 12-15 (issued at bwd conv3):          stall 14-15, bwd conv2 15-17
 *   data back 15-18 (issued at bwd conv2):           stall 17-18, bwd conv1 18-20
 * Iteration 20 ms = 9 ms compute + 11 ms stall; each copy lane busy 9 ms. */
static void check_chain_all(double latency_s)
{
    chain_run r;
    chain_all(3 * MS, latency_s, 0, 0, &r);
    const vdnn_plan_t *p = r.p;
    const vdnn_timeline t = r.t;
    assert_near(t.iteration_s, 20 * MS, "iteration");
    assert_near(t.compute_s, 9 * MS, "compute");
    assert_near(t.stall_s, 11 * MS, "stall");
    assert_near(t.d2h_s, 9 * MS, "d2h busy");
    assert_near(t.h2d_s, 9 * MS, "h2d busy");
    static const struct { const char *label; double start, end; vdnn_lane lane; vdnn_span_kind kind; } want[] = {
        {"d2h data", 0, 3, VDNN_LANE_D2H, VDNN_SPAN_D2H},        {"wait data", 1, 3, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL},
        {"d2h conv1", 3, 6, VDNN_LANE_D2H, VDNN_SPAN_D2H},       {"wait conv1", 4, 6, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL},
        {"d2h conv2", 6, 9, VDNN_LANE_D2H, VDNN_SPAN_D2H},       {"wait conv2", 7, 9, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL},
        {"h2d conv2", 9, 12, VDNN_LANE_H2D, VDNN_SPAN_H2D},      {"wait conv2", 9, 12, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL},
        {"bwd conv3", 12, 14, VDNN_LANE_COMPUTE, VDNN_SPAN_BWD}, {"h2d conv1", 12, 15, VDNN_LANE_H2D, VDNN_SPAN_H2D},
        {"wait conv1", 14, 15, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL}, {"h2d data", 15, 18, VDNN_LANE_H2D, VDNN_SPAN_H2D},
        {"wait data", 17, 18, VDNN_LANE_COMPUTE, VDNN_SPAN_STALL},  {"bwd conv1", 18, 20, VDNN_LANE_COMPUTE, VDNN_SPAN_BWD},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const vdnn_span *s = find_span_from(&t, want[i].label, want[i].start * MS);
        assert_near(s->start, want[i].start * MS, want[i].label);
        assert_near(s->end, want[i].end * MS, want[i].label);
        assert_int_equal(s->lane, want[i].lane);
        assert_int_equal(s->kind, want[i].kind);
        assert_int_equal(s->stall, want[i].kind == VDNN_SPAN_STALL);
        assert_int_equal(p->actions[s->action].kind,
                         want[i].kind == VDNN_SPAN_STALL ? VDNN_ACT_WAIT
                         : want[i].kind == VDNN_SPAN_D2H ? VDNN_ACT_OFFLOAD
                         : want[i].kind == VDNN_SPAN_H2D ? VDNN_ACT_PREFETCH
                                                         : VDNN_ACT_COMPUTE);
    }
    int stalls = 0;
    for (int i = 0; i < t.n_spans; i++) stalls += t.spans[i].stall;
    assert_int_equal(stalls, 6);
    check_memory(p, &t);
    chain_release(&r);
}

static void test_chain_all(void **state)
{
    (void)state;
    check_chain_all(0);
}

/* The same with 1 ms of each copy being latency: only the total counts. */
static void test_chain_all_latency(void **state)
{
    (void)state;
    check_chain_all(1 * MS);
}

/* A faster link hides every copy: 0.5 ms per copy under 1-2 ms of compute never stalls. */
static void test_chain_all_hidden(void **state)
{
    (void)state;
    chain_run r;
    chain_all(0.5 * MS, 0, 0, 0, &r);
    /* The prefetch of conv2 is issued at the softmax's backward, which takes no time: its 0.5 ms
     * are the only copy the compute lane must wait for. */
    assert_near(r.t.stall_s, 0.5 * MS, "stall");
    assert_near(r.t.iteration_s, 9.5 * MS, "iteration");
    assert_near(r.t.d2h_s, 1.5 * MS, "d2h busy");
    chain_release(&r);
}

/* A link that is fast alone but slow while layers compute (the profile's busy models): copies take the
 * busy time, 3 ms, and the timeline is the 3 ms one of test_chain_all, not the hidden one. */
static void test_chain_all_busy_link(void **state)
{
    (void)state;
    chain_run r;
    chain_all(0.5 * MS, 0, 0, 3 * MS, &r);
    assert_near(r.t.iteration_s, 20 * MS, "iteration");
    assert_near(r.t.stall_s, 11 * MS, "stall");
    assert_near(r.t.d2h_s, 9 * MS, "d2h busy");
    assert_near(r.t.h2d_s, 9 * MS, "h2d busy");
    chain_release(&r);
}

/* vDNN_all on the chain where compute runs at half speed while a copy is queued (copy_slowdown 1):
 *   fwd conv1 0-2 under data's copy (0-3), stall 2-3; conv2 3-5, stall 5-6; conv3 6-8, stall 8-9
 *   conv2 back 9-12: stall 9-12; bwd conv3 from 12 under conv1's copy back (12-15): 3 ms at half speed
 *   do 1.5 ms of its 2, the last 0.5 ms at full speed: 12-15.5; conv1 is back, no stall
 *   bwd conv2 15.5-19 under data's copy back (15.5-18.5); bwd conv1 19-21 alone.
 * Iteration 21 ms = 15 ms compute + 6 ms stall. */
/* What the profiler fits copy_slowdown from, read off a timeline: the seconds the layers took beyond the profile's
 * times, and the seconds copies ran beside them (the union of the copy spans over each layer's span). */
static double refit_slowdown(const vdnn_timeline *t, const vdnn_plan_t *p, const vdnn_profile *prof)
{
    double extra = 0, overlap = 0;
    for (int k = 0; k < t->n_spans; k++) {
        const vdnn_span *c = &t->spans[k];
        if (c->lane != VDNN_LANE_COMPUTE || (c->kind != VDNN_SPAN_FWD && c->kind != VDNN_SPAN_BWD)) continue;
        const int l = p->steps[c->step].layer;
        extra += c->end - c->start - (c->kind == VDNN_SPAN_FWD ? prof->fwd_s[l] : prof->bwd_s[l]);
        double reach = c->start;
        for (int j = 0; j < t->n_spans; j++) {
            const vdnn_span *q = &t->spans[j];
            if (q->lane == VDNN_LANE_COMPUTE) continue;
            const double a = fmax(q->start, reach), b = fmin(q->end, c->end);
            if (b > a) overlap += b - a, reach = b;
        }
    }
    return vdnn_copy_slowdown_fit(extra, overlap);
}

/* The fit inverts the simulator's stretch: compute beside copies at 1 / (1 + s) of full speed costs s / (1 + s) of
 * the overlapped time extra, whether a layer is overlapped all along or in part. */
static void test_slowdown_fit(void **state)
{
    (void)state;
    assert_near(vdnn_copy_slowdown_fit(0.25 * MS, 0.5 * MS), 1, "half the overlap extra");
    assert_near(vdnn_copy_slowdown_fit(0.2 * MS, 1 * MS), 0.25, "a fifth extra");
    assert_near(vdnn_copy_slowdown_fit(0, 1 * MS), 0, "no extra");
    assert_near(vdnn_copy_slowdown_fit(-0.1 * MS, 1 * MS), 0, "faster beside copies");
    assert_near(vdnn_copy_slowdown_fit(1 * MS, 0), 0, "no overlap");
    assert_near(vdnn_copy_slowdown_fit(0.9 * MS, 1 * MS), 4, "capped");
    for (int k = 0; k < 3; k++) {
        const double s = (double[]){0.25, 1.0, 3.0}[k];
        chain_run r;
        chain_all(3 * MS, 0, s, 0, &r);
        const double got = refit_slowdown(&r.t, r.p, &r.prof);
        if (!(fabs(got - s) <= 1e-9)) fail_msg("slowdown %g simulated, %g fitted back", s, got);
        chain_release(&r);
    }
}

static void test_chain_all_contention(void **state)
{
    (void)state;
    chain_run r;
    chain_all(3 * MS, 0, 1.0, 0, &r);
    assert_near(r.t.iteration_s, 21 * MS, "iteration");
    assert_near(r.t.compute_s, 15 * MS, "compute");
    assert_near(r.t.stall_s, 6 * MS, "stall");
    const vdnn_span *s = find_span(&r.t, "fwd conv1");
    assert_near(s->end, 2 * MS, "fwd conv1 end");
    s = find_span(&r.t, "bwd conv3");
    assert_near(s->start, 12 * MS, "bwd conv3 start");
    assert_near(s->end, 15.5 * MS, "bwd conv3 end");
    s = find_span(&r.t, "bwd conv1");
    assert_near(s->start, 19 * MS, "bwd conv1 start");
    assert_near(s->end, 21 * MS, "bwd conv1 end");
    chain_release(&r);
}

/* The chain at batch 4 with conv2's input streamed in chunks of 2 images (32 bytes, 2 ms on the link),
 * in-core otherwise; forward 1 ms and backward 2 ms per conv, split evenly over the chunks:
 *   fwd conv1 0-1
 *   fwd conv2 1-5: chunk 0's input goes out 1-3, its output is written at 3; chunk 1's goes out 3-5
 *   fwd conv3 5-6, bwd conv3 6-8
 *   bwd conv2 8-13: chunk 0 comes back 8-10 and is used 10-11; chunk 1 comes back 10-12, used 12-13
 *   bwd conv1 13-15
 * Iteration 15 ms, each copy lane busy 4 ms in a span per chunk named after the host copy. */
static void test_chain_streamed(void **state)
{
    (void)state;
    vdnn_graph_t *g = graph(chain_text, 4);
    vdnn_op_info *info = infos(g);
    info[2].stream_ok = info[2].bwd_inplace_ok = true;
    info[2].chunk_images = 2;
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.stream_inputs = true;
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(g, info, &rq, &p, &err), err);
    assert_int_equal(vdnn_plan_streamed_layers(p), 1);
    vdnn_profile prof;
    profile(g, chain_fwd, chain_bwd, 1 * MS, 0, 1 * MS, &prof);
    vdnn_timeline t;
    simulate(p, g, &prof, &t);
    assert_near(t.iteration_s, 15 * MS, "iteration");
    assert_near(t.d2h_s, 4 * MS, "d2h");
    assert_near(t.h2d_s, 4 * MS, "h2d");
    const vdnn_span *s = find_span(&t, "fwd conv2");
    assert_near(s->start, 1 * MS, "fwd conv2 start");
    assert_near(s->end, 5 * MS, "fwd conv2 end");
    s = find_span(&t, "bwd conv2");
    assert_near(s->start, 8 * MS, "bwd conv2 start");
    assert_near(s->end, 13 * MS, "bwd conv2 end");
    /* One span per chunk's copy. */
    s = find_span(&t, "d2h conv2.input.streamed");
    assert_int_equal(s->lane, VDNN_LANE_D2H);
    assert_near(s->start, 1 * MS, "d2h chunk 0 start");
    assert_near(s->end, 3 * MS, "d2h chunk 0 end");
    s = find_span_from(&t, "d2h conv2.input.streamed", 3 * MS);
    assert_near(s->end, 5 * MS, "d2h chunk 1 end");
    s = find_span(&t, "h2d conv2.input.streamed");
    assert_int_equal(s->lane, VDNN_LANE_H2D);
    assert_near(s->start, 8 * MS, "h2d chunk 0 start");
    assert_near(s->end, 10 * MS, "h2d chunk 0 end");
    s = find_span_from(&t, "h2d conv2.input.streamed", 10 * MS);
    assert_near(s->end, 12 * MS, "h2d chunk 1 end");
    s = find_span(&t, "bwd conv1");
    assert_near(s->start, 13 * MS, "bwd conv1 start");
    check_memory(p, &t);
    vdnn_timeline_release(&t);
    vdnn_profile_release(&prof);

    /* Chunk copies of 0.5 ms, compute at half speed beside a copy (copy_slowdown 1), only while one runs:
     *   fwd conv2 1-2.5: copies 1-1.5 and 1.5-2; chunk 0 computes 1-2 (slowed all along), chunk 1 2-2.5
     *   fwd conv3 2.5-3.5, bwd conv3 3.5-5.5
     *   bwd conv2 5.5-8.25: copies 5.5-6 and 6-6.5; chunk 0 computes from 6, slowed until 6.5 (0.25 ms of
     *   work done), the rest 6.5-7.25; chunk 1 7.25-8.25 with no copy beside it
     *   bwd conv1 8.25-10.25 */
    profile(g, chain_fwd, chain_bwd, 0.25 * MS, 0, 1 * MS, &prof);
    prof.copy_slowdown = 1;
    simulate(p, g, &prof, &t);
    assert_near(t.iteration_s, 10.25 * MS, "iteration, slowed beside copies");
    s = find_span(&t, "fwd conv2");
    assert_near(s->end, 2.5 * MS, "fwd conv2 end, slowed");
    s = find_span(&t, "bwd conv2");
    assert_near(s->start, 5.5 * MS, "bwd conv2 start, slowed");
    assert_near(s->end, 8.25 * MS, "bwd conv2 end, slowed");
    vdnn_timeline_release(&t);
    vdnn_profile_release(&prof);
    vdnn_plan_free(p);
    free(info);
    vdnn_graph_free(g);
}

static const double diamond_fwd[] = {0, 1, 2, 3, 0.5, 0}, diamond_bwd[] = {0, 2, 4, 6, 0.25, 0};

/* The diamond in-core: all compute plus one accumulation of a's gradient (0.5 ms). A recompute of b
 * put in the accumulation's place costs b's forward time instead. */
static void test_diamond(void **state)
{
    (void)state;
    vdnn_graph_t *g = graph(diamond_text, 1);
    vdnn_op_info *info = infos(g);
    vdnn_plan_t *p = plan(g, info, VDNN_POLICY_NONE);
    vdnn_profile prof;
    profile(g, diamond_fwd, diamond_bwd, 3 * MS, 0, 0.5 * MS, &prof);
    vdnn_timeline t;
    simulate(p, g, &prof, &t);
    assert_near(t.iteration_s, (6.5 + 12.25 + 0.5) * MS, "iteration");
    assert_near(t.stall_s, 0, "stall");
    const vdnn_span *acc = find_span(&t, "accum a");
    assert_int_equal(acc->kind, VDNN_SPAN_ACCUM);
    assert_near(acc->end - acc->start, 0.5 * MS, "accumulation");
    /* b runs its backward after c (reverse topological order) and accumulates into a's gradient. */
    assert_near(acc->start, find_span(&t, "bwd b")->end, "accumulation follows bwd b");
    check_memory(p, &t);
    int k = acc->action;
    vdnn_timeline_release(&t);

    p->actions[k] = (vdnn_action){VDNN_ACT_RECOMPUTE, 2, -1, -1};
    simulate(p, g, &prof, &t);
    assert_near(t.iteration_s, (6.5 + 12.25 + 2) * MS, "iteration with recompute");
    const vdnn_span *rc = find_span(&t, "recompute b");
    assert_int_equal(rc->kind, VDNN_SPAN_RECOMPUTE);
    assert_near(rc->end - rc->start, 2 * MS, "recompute");
    vdnn_timeline_release(&t);

    /* vDNN_all on the diamond: slower than in-core, memory as planned, iteration = compute + stall
     * (the compute lane waits for every copy it issued). */
    vdnn_plan_t *pa = plan(g, info, VDNN_POLICY_ALL);
    simulate(pa, g, &prof, &t);
    assert_true(t.iteration_s > (6.5 + 12.25 + 0.5) * MS);
    assert_near(t.iteration_s, t.compute_s + t.stall_s, "compute + stall");
    assert_true(t.d2h_s > 0 && t.h2d_s > 0);
    check_memory(pa, &t);
    vdnn_timeline_release(&t);
    vdnn_plan_free(pa);
    vdnn_profile_release(&prof);
    vdnn_plan_free(p);
    free(info);
    vdnn_graph_free(g);
}

/* Plans of real nets (op info from the CPU backend) under the static policies with an estimated profile:
 * memory matches the plan and the lanes add up. */
static void test_zoo_consistency(void **state)
{
    (void)state;
    static const char *models[] = {"lenet", "resnet18", "googlenet"};
    vdnn_backend_t *be = NULL;
    vdnn_error err;
    vdnn_cpu_options co = {.threads = 1};
    vt_assert_ok(vdnn_backend_cpu_create(&co, &be, &err), err);
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        vdnn_graph_t *g = vt_load_zoo(models[m]);
        vdnn_shape in = m == 0 ? (vdnn_shape){8, 1, 28, 28} : (vdnn_shape){8, 3, 32, 32};
        vt_assert_ok(vdnn_graph_resolve(g, in, 10, &err), err);
        vdnn_op_info *info = calloc((size_t)g->n_layers, sizeof *info);
        assert_non_null(info);
        vt_assert_ok(vdnn_plan_query_ops(g, be, true, info, &err), err);
        vdnn_profile prof;
        vt_assert_ok(vdnn_profile_estimate(g, 1e11, 1e10, 1e9, &prof, &err), err);
        double none_time = 0;
        for (int pol = VDNN_POLICY_NONE; pol <= VDNN_POLICY_CONV; pol++) {
            vdnn_plan_t *p = plan(g, info, (vdnn_policy)pol);
            vdnn_timeline t;
            simulate(p, g, &prof, &t);
            check_memory(p, &t);
            assert_near(t.iteration_s, t.compute_s + t.stall_s, "compute + stall");
            double busy_out = 0, busy_in = 0;
            for (int i = 0; i < t.n_spans; i++) {
                const vdnn_span *s = &t.spans[i];
                if (s->lane == VDNN_LANE_D2H) busy_out += s->end - s->start;
                if (s->lane == VDNN_LANE_H2D) busy_in += s->end - s->start;
                assert_true(s->end <= t.iteration_s + EPS);
            }
            assert_near(t.d2h_s, busy_out, "d2h sum");
            assert_near(t.h2d_s, busy_in, "h2d sum");
            /* Copies in one direction never overlap each other. */
            double last_out = 0, last_in = 0;
            for (int i = 0; i < t.n_spans; i++) {
                const vdnn_span *s = &t.spans[i];
                double *last = s->lane == VDNN_LANE_D2H ? &last_out : s->lane == VDNN_LANE_H2D ? &last_in : NULL;
                if (!last) continue;
                assert_true(s->start >= *last - EPS);
                *last = s->end;
            }
            if (pol == VDNN_POLICY_NONE) none_time = t.iteration_s;
            else assert_true(t.iteration_s >= none_time - EPS);
            assert_near(t.compute_s, none_time, "swapping adds no compute");
            /* Every byte the plan moves is on a lane: copy time = moved bytes at the link plus latencies. */
            int copies = 0;
            for (int i = 0; i < t.n_spans; i++) copies += t.spans[i].lane != VDNN_LANE_COMPUTE;
            assert_near(t.d2h_s + t.h2d_s, (double)p->bytes_moved / 1e9 + copies * prof.d2h.latency_s, "copy time");
            vdnn_timeline_release(&t);
            vdnn_plan_free(p);
        }
        vdnn_profile_release(&prof);
        free(info);
        vdnn_graph_free(g);
    }
    vdnn_backend_destroy(be);
}

/* Plans the simulator cannot replay, and profiles that do not fit the plan. */
static void test_errors(void **state)
{
    (void)state;
    vdnn_graph_t *g = graph(chain_text, 1);
    vdnn_op_info *info = infos(g);
    vdnn_plan_t *p = plan(g, info, VDNN_POLICY_ALL);
    vdnn_profile prof;
    profile(g, chain_fwd, chain_bwd, 3 * MS, 0, 1 * MS, &prof);
    vdnn_timeline t;
    vdnn_error err;
    /* The first wait is for data's offload; make it wait for data's return, which nothing issued yet. */
    int k = 0;
    while (p->actions[k].kind != VDNN_ACT_WAIT) k++;
    int ev = p->actions[k].event;
    p->actions[k].event = ev + 1;
    vt_assert_error(vdnn_simulate(p, g, &prof, &t, &err), err, VDNN_ERR_INVALID_ARG, "which no earlier copy records");
    assert_null(t.spans);
    p->actions[k].event = p->n_events;
    vt_assert_error(vdnn_simulate(p, g, &prof, &t, &err), err, VDNN_ERR_INVALID_ARG, "wait for event");
    p->actions[k].event = ev;
    simulate(p, g, &prof, &t);
    vdnn_timeline_release(&t);

    vdnn_copy_model keep = prof.d2h;
    prof.d2h.bytes_per_s = 0;
    vt_assert_error(vdnn_simulate(p, g, &prof, &t, &err), err, VDNN_ERR_INVALID_ARG, "device-to-host");
    prof.d2h = keep;
    prof.fwd_s[2] = NAN;
    vt_assert_error(vdnn_simulate(p, g, &prof, &t, &err), err, VDNN_ERR_INVALID_ARG, "conv2");
    vdnn_profile_release(&prof);

    vdnn_graph_t *d = graph(diamond_text, 1);
    profile(d, diamond_fwd, diamond_bwd, 3 * MS, 0, 1 * MS, &prof);
    vt_assert_error(vdnn_simulate(p, g, &prof, &t, &err), err, VDNN_ERR_MISMATCH, "layers");
    vdnn_profile_release(&prof);
    vdnn_graph_free(d);
    vdnn_plan_free(p);
    free(info);
    vdnn_graph_free(g);
}

/* ---- trace and SVG ---- */


static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void two_timelines(vdnn_timeline *t /* [2] */)
{
    vdnn_graph_t *g = graph(chain_text, 1);
    vdnn_op_info *info = infos(g);
    vdnn_profile prof;
    profile(g, chain_fwd, chain_bwd, 3 * MS, 0, 1 * MS, &prof);
    for (int i = 0; i < 2; i++) {
        vdnn_plan_t *p = plan(g, info, i ? VDNN_POLICY_ALL : VDNN_POLICY_NONE);
        simulate(p, g, &prof, &t[i]);
        vdnn_plan_free(p);
    }
    vdnn_profile_release(&prof);
    free(info);
    vdnn_graph_free(g);
}

static void test_trace(void **state)
{
    (void)state;
    vdnn_timeline t[2];
    two_timelines(t);
    const vdnn_timeline *tl[2] = {&t[0], &t[1]};
    const char *names[2] = {"chain \"none\"", "chain all"};
    char dir[256], path[512], bad[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/trace.json", dir);
    vdnn_error err;
    vt_assert_ok(vdnn_trace_write(path, tl, names, 2, &err), err);
    vdnn_json *root = NULL;
    vt_assert_ok(vdnn_json_read_file(path, &root, &err), err);
    const vdnn_json *ev = vdnn_json_get(root, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->type, VDNN_JSON_ARRAY);
    int spans[3] = {0}, counters[3] = {0}, threads[3] = {0};
    bool named[3] = {false};
    for (int i = 0; i < ev->n; i++) {
        const vdnn_json *e = &ev->items[i];
        const vdnn_json *ph = vdnn_json_get(e, "ph"), *pid = vdnn_json_get(e, "pid"), *name = vdnn_json_get(e, "name");
        assert_true(ph && ph->type == VDNN_JSON_STRING && pid && pid->type == VDNN_JSON_NUMBER && name);
        int k = (int)pid->number;
        assert_true(k == 1 || k == 2);
        if (!strcmp(ph->string, "X")) {
            const vdnn_json *ts = vdnn_json_get(e, "ts"), *dur = vdnn_json_get(e, "dur"), *tid = vdnn_json_get(e, "tid");
            assert_true(ts && dur && tid && ts->number >= 0 && dur->number > 0 && tid->number >= 0 && tid->number <= 2);
            spans[k]++;
        } else if (!strcmp(ph->string, "C")) {
            assert_string_equal(name->string, "device memory");
            assert_non_null(vdnn_json_get(vdnn_json_get(e, "args"), "MiB"));
            counters[k]++;
        } else if (!strcmp(ph->string, "M") && !strcmp(name->string, "thread_name")) {
            threads[k]++;
        } else if (!strcmp(ph->string, "M") && !strcmp(name->string, "process_name")) {
            const vdnn_json *pn = vdnn_json_get(vdnn_json_get(e, "args"), "name");
            assert_string_equal(pn->string, names[k - 1]);
            named[k] = true;
        }
    }
    for (int k = 1; k <= 2; k++) {
        assert_int_equal(spans[k], t[k - 1].n_spans);
        assert_int_equal(counters[k], t[k - 1].n_mem);
        assert_int_equal(threads[k], 3);
        assert_true(named[k]);
    }
    /* The 20 ms of the chain under vDNN_all: the last span ends at 20000 us. */
    double end = 0;
    for (int i = 0; i < ev->n; i++) {
        const vdnn_json *e = &ev->items[i];
        if (strcmp(vdnn_json_get(e, "ph")->string, "X") || vdnn_json_get(e, "pid")->number != 2) continue;
        double x = vdnn_json_get(e, "ts")->number + vdnn_json_get(e, "dur")->number;
        if (x > end) end = x;
    }
    assert_true(fabs(end - 20000) < 1e-2);
    vdnn_json_free(root);
    /* A failed write leaves nothing behind. */
    snprintf(bad, sizeof bad, "%s/no/such/dir/trace.json", dir);
    vt_assert_error(vdnn_trace_write(bad, tl, names, 2, &err), err, VDNN_ERR_IO, "no/such/dir");
    vt_rmdir(dir);
    vdnn_timeline_release(&t[0]);
    vdnn_timeline_release(&t[1]);
}

/* Tags balance and nest, attributes are quoted, text holds no raw '<' and only known entities. */
static void check_xml(const char *s)
{
    char stack[64][32];
    int depth = 0, roots = 0;
    const char *p = s;
    if (!strncmp(p, "<?xml", 5)) p = strstr(p, "?>") + 2;
    while (*p) {
        if (*p == '&') {
            const char *ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#"};
            bool ok = false;
            for (int i = 0; i < 5; i++) ok |= !strncmp(p, ents[i], strlen(ents[i]));
            if (!ok) fail_msg("raw '&' at ...%.30s", p);
            p++;
            continue;
        }
        if (*p != '<') {
            if (*p == '>') fail_msg("raw '>' in text at ...%.30s", p);
            p++;
            continue;
        }
        const char *q = p + 1;
        bool closing = *q == '/';
        if (closing) q++;
        char name[32];
        size_t n = 0;
        while (q[n] && q[n] != ' ' && q[n] != '>' && q[n] != '/' && q[n] != '\n') n++;
        if (n == 0 || n >= sizeof name) fail_msg("bad tag at ...%.30s", p);
        memcpy(name, q, n);
        name[n] = '\0';
        /* Scan to the tag's end; '>' inside quotes does not end it. */
        const char *r = q + n;
        bool quoted = false;
        while (*r && (quoted || *r != '>')) {
            if (*r == '"') quoted = !quoted;
            if (quoted && *r == '<') fail_msg("raw '<' inside an attribute at ...%.30s", r);
            r++;
        }
        if (!*r) fail_msg("unterminated tag <%s", name);
        bool self = r[-1] == '/';
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name)) fail_msg("</%s> closes <%s>", name, depth ? stack[depth - 1] : "nothing");
            depth--;
        } else if (!self) {
            if (depth == 0) roots++;
            assert_true(depth < 64);
            strcpy(stack[depth++], name);
        } else if (depth == 0) {
            fail_msg("element <%s/> outside the root", name);
        }
        p = r + 1;
    }
    if (depth) fail_msg("<%s> never closed", stack[depth - 1]);
    assert_int_equal(roots, 1);
}

static void test_svg(void **state)
{
    (void)state;
    vdnn_timeline t[2];
    two_timelines(t);
    const vdnn_timeline *tl[2] = {&t[0], &t[1]};
    const char *names[2] = {"none <in-core> & \"fast\"", "all"};
    char dir[256], mem[512], gantt[512];
    vt_tmpdir(dir, sizeof dir);
    snprintf(mem, sizeof mem, "%s/mem.svg", dir);
    snprintf(gantt, sizeof gantt, "%s/gantt.svg", dir);
    vdnn_error err;
    vt_assert_ok(vdnn_svg_memory(mem, "chain: memory", "costs by hand", tl, names, 2, 200, &err), err);
    char *s = vt_read_file(mem, NULL);
    check_xml(s);
    assert_non_null(strstr(s, "<svg"));
    assert_non_null(strstr(s, "stroke-dasharray")); /* the budget */
    assert_non_null(strstr(s, "none &lt;in-core&gt; &amp; &quot;fast&quot;"));
    /* The axis unit follows the largest value drawn: a few aligned blocks, so bytes or KiB. */
    const double most = (double)(t[0].peak_live_bytes > t[1].peak_live_bytes ? t[0].peak_live_bytes : t[1].peak_live_bytes);
    assert_non_null(strstr(s, most >= 1.5 * 1024 ? "(KiB)" : "(bytes)"));
    assert_int_equal((int)(strstr(strstr(s, "<path") + 5, "<path") != NULL), 1); /* two curves */
    free(s);
    vt_assert_ok(vdnn_svg_memory(mem, "no budget", NULL, tl, names, 2, SIZE_MAX, &err), err);
    s = vt_read_file(mem, NULL);
    check_xml(s);
    assert_null(strstr(s, "stroke-dasharray"));
    free(s);

    vt_assert_ok(vdnn_svg_gantt(gantt, "chain: lanes", "costs by hand", tl, names, 2, &err), err);
    s = vt_read_file(gantt, NULL);
    check_xml(s);
    /* Every span is a rect with its label as a tooltip; stalls use the hatch. */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < t[k].n_spans; i++) assert_non_null(strstr(s, t[k].spans[i].label));
    assert_non_null(strstr(s, "url(#stall)"));
    assert_non_null(strstr(s, "wait conv2: 3.000 ms, from 9.000 to 12.000 ms"));
    free(s);
    /* Failures leave no file. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/g.svg", dir);
    vt_assert_error(vdnn_svg_gantt(bad, "x", NULL, tl, names, 2, &err), err, VDNN_ERR_IO, "missing");
    vt_assert_error(vdnn_svg_gantt(gantt, "x", NULL, tl, names, 0, &err), err, VDNN_ERR_INVALID_ARG, "no timeline");
    assert_false(exists(bad));
    vt_rmdir(dir);
    vdnn_timeline_release(&t[0]);
    vdnn_timeline_release(&t[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_none),   cmocka_unit_test(test_chain_all),   cmocka_unit_test(test_chain_all_latency),
        cmocka_unit_test(test_chain_all_hidden), cmocka_unit_test(test_chain_all_contention), cmocka_unit_test(test_slowdown_fit), cmocka_unit_test(test_chain_all_busy_link), cmocka_unit_test(test_chain_streamed), cmocka_unit_test(test_diamond), cmocka_unit_test(test_zoo_consistency),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_trace),       cmocka_unit_test(test_svg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
