/* Times the CPU backend's LSTM chunk op with fp32 and with bf16 maps, forward and backward (the bf16 op's
 * conversions included: what an op call costs), at the chunk shapes of lstm-lm (batch 32, chunks of 32 steps),
 * lstm-long (batch 8, chunks of 128) and a narrow biglstm (hidden 2048, projection 512, batch 16, 20 steps), the
 * same thread count for both; prints each shape's best time of REPS runs, fp32 and bf16 alternating so that load
 * from other processes meets both alike, and fp32 time over bf16 time (above 1: bf16 faster). Built and run by
 * bench/lstm-ops.sh.
 *
 *     lstm_ops [--threads T] [--reps R] */
#include "lib/op_bench.h"
#include "backend/lstm_layout.h"

typedef struct chunk {
    const char *name;
    int b, s, h, proj, in, tin, ldx, step0, prev;
} chunk;

static const chunk chunks[] = {
    {"lstm-lm lstm1.t1 (in 128)", 32, 32, 256, 0, 128, 128, 128, 32, 32},
    {"lstm-lm lstm2.t1 (in 256)", 32, 32, 256, 0, 256, 32, 512, 0, 32},
    {"lstm-long lstm2.t1", 8, 128, 256, 0, 256, 128, 512, 0, 128},
    {"biglstm/4 lstm2 (proj 512)", 16, 20, 2048, 512, 512, 20, 2560, 0, 0},
};
enum { N_CHUNKS = sizeof chunks / sizeof chunks[0] };

static vdnn_op_desc chunk_desc(const chunk *c, vdnn_dtype t)
{
    const int pw = c->proj ? c->proj : c->h;
    vdnn_op_desc d;
    memset(&d, 0, sizeof d);
    d.kind = VDNN_LAYER_LSTM;
    d.n_inputs = c->prev ? 2 : 1;
    d.in[0] = (vdnn_shape){c->b, 1, c->tin, c->ldx};
    if (c->prev) d.in[1] = (vdnn_shape){c->b, 1, c->prev, pw + c->h};
    d.out = (vdnn_shape){c->b, 1, c->s, pw + c->h};
    d.p.filters = c->h, d.p.proj = c->proj, d.p.lstm_in = c->in, d.p.step0 = c->step0;
    d.training = true;
    d.dtype = t;
    return d;
}

static void open_chunk(vdnn_backend_t *be, const chunk *c, vdnn_dtype t, bench_run *r)
{
    vdnn_error err = {0};
    const vdnn_op_desc d = chunk_desc(c, t);
    vdnn_op_info info;
    if (be->ops->op_query(be, &d, &info, &err)) bench_die(c->name, &err);
    size_t nw, nb;
    vdnn_lstm_param_counts(&d.p, &nw, &nb);
    bench_run_open(be, &d, &info, nw, nb, c->name, r);
}

int main(int argc, char **argv)
{
    int threads = 0, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: lstm_ops [--threads T] [--reps R]\n");
            return 2;
        }
    }
    if (threads < 0 || reps < 1) {
        fprintf(stderr, "lstm_ops: reps must be positive, threads 0 (all) or more\n");
        return 2;
    }
    vdnn_cpu_options o = {.threads = threads};
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    if (vdnn_backend_cpu_create(&o, &be, &err)) bench_die("cpu backend", &err);
    printf("threads %d, best of %d alternating runs after a warm-up; times in ms per call.\n", be->threads, reps);
    printf("%-28s %9s %9s %6s %9s %9s %6s\n", "chunk", "fp32 fwd", "bf16 fwd", "gain", "fp32 bwd", "bf16 bwd", "gain");
    double all[2] = {0};
    for (int i = 0; i < N_CHUNKS; i++) {
        const chunk *c = &chunks[i];
        bench_run r[2];
        open_chunk(be, c, VDNN_DTYPE_F32, &r[0]);
        open_chunk(be, c, VDNN_DTYPE_BF16, &r[1]);
        for (int k = 0; k <= reps; k++)
            for (int j = 0; j < 2; j++) bench_run_once(be, c->name, &r[j], k > 0);
        printf("%-28s %9.2f %9.2f %6.2f %9.2f %9.2f %6.2f\n", c->name, 1e3 * r[0].fwd, 1e3 * r[1].fwd,
               r[0].fwd / r[1].fwd, 1e3 * r[0].bwd, 1e3 * r[1].bwd, r[0].bwd / r[1].bwd);
        for (int j = 0; j < 2; j++) {
            all[j] += r[j].fwd + r[j].bwd;
            bench_run_close(be, &r[j]);
        }
    }
    printf("bf16_vs_fp32_lstm: %.2f\n", all[0] / all[1]);
    vdnn_backend_destroy(be);
    return 0;
}
