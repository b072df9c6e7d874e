/* LSTM layers against PyTorch's nn.LSTM (tests/reference/lstm-tiny.bin, written by make_lstm_reference.py): a tiny
 * LSTM language model, one layer with a projection, through the library with each LSTM layer as one node and in
 * chunks of 3 steps (the last of 2): the logits, the step-0 loss and every parameter gradient, three SGD steps'
 * losses and final parameters, and three AdamW steps'. */
#include <stdlib.h>

#include "exec/net.h"
#include "seq_reference.h"
#include "testutil.h"

/* PyTorch and OpenBLAS sum in other orders, and the recurrence carries each step's rounding into the next: at most
 * 4.9e-7 of a tensor's scale here (lstm2.params.weight.grad in chunks; 3.9e-7 as one node). The bound is relative to
 * the tensor's largest value, as in test_gpt_reference. */
#define TOL_STEP0 2e-6
#define TOL_FINAL 2e-6
/* AdamW divides by sqrt(v) + eps and so magnifies the rounding of small gradients (as in test_gpt_reference): at
 * most 2.1e-7 of scale here (head.bias). */
#define TOL_ADAMW 1e-5

typedef struct ctx {
    vt_seq_ref ref;
    vdnn_backend_t *be;
} ctx;

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    vt_seq_ref_load(&c->ref, "lstm-tiny");
    vdnn_cpu_options opt = {.threads = 1};
    vdnn_error err;
    vt_assert_ok(vdnn_backend_cpu_create(&opt, &c->be, &err), err);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    vdnn_backend_destroy(c->be);
    vt_seq_ref_free(&c->ref);
    free(c);
    return 0;
}

/* SGD: the logits, then each step's loss, the step-0 gradients and the final parameters. AdamW: each step's loss
 * and the final parameters. */
static void run(ctx *c, const char *model, bool adamw)
{
    vt_seq_ref *r = &c->ref;
    r->model = model;
    vdnn_graph_t *g = vt_seq_ref_graph(r, model);
    const vdnn_net_options cfg = vt_seq_options(r, g, adamw);
    vdnn_net_t *net = vt_seq_net(r, g, c->be, &cfg, true);
    if (adamw) {
        vt_seq_train(r, g, net, r->adamw[0], "adamw.losses", "AdamW loss", TOL_STEP0, 0);
        vt_seq_check_params(r, g, net, "adamw.final.", "", TOL_ADAMW, false);
    } else {
        /* The logits first, in evaluation mode (no state kept for backward). */
        vt_seq_check_logits(r, g, net, "head.out (logits)", TOL_STEP0);
        vt_seq_train(r, g, net, r->lr, "meta.losses", "loss", TOL_STEP0, TOL_STEP0);
        vt_seq_check_params(r, g, net, "final.", "", TOL_FINAL, false);
    }
    vdnn_net_free(net);
    vdnn_graph_free(g);
}

static void test_sgd_matches_pytorch(void **state)
{
    ctx *c = *state;
    c->ref.bad = 0;
    run(c, "lstm-tiny", false);
    run(c, "lstm-tiny-chunks", false);
    vt_seq_assert_good(&c->ref);
}

static void test_adamw_matches_pytorch(void **state)
{
    ctx *c = *state;
    c->ref.bad = 0;
    run(c, "lstm-tiny", true);
    run(c, "lstm-tiny-chunks", true);
    vt_seq_assert_good(&c->ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_pytorch),
        cmocka_unit_test(test_adamw_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
