/* lstm-lm (docs/sequence.md, "LSTM") trained a few steps from a text file under every policy and planner that runs
 * on the CPU, with freed and offloaded memory poisoned: every parameter, momentum and loss bit for bit as under none,
 * and the arena's high-water mark the planned peak. The planners plan midway between the smallest budget any plan
 * reaches and in-core's need, where they choose which chunks' state to keep, swap or recompute. */
#include <stdio.h>
#include <string.h>

#include "exec/net.h"
#include "testutil.h"

#define BATCH 32
#define SEQ 128 /* lstm-lm's file length: its four chunks of 32 steps */
#define STEPS 2

/* Text with a byte distribution to learn: words drawn from a short list. */
static const char *const words[] = {"the ", "cell ", "state ", "of ", "a ", "chunk ", "is ", "swapped ", "to ",
                                    "host ", "or ", "recomputed. ", "Recurrence\n"};

static void train_run(const vt_text_env *e, vdnn_policy pol, size_t budget, vt_text_run *r)
{
    const vdnn_net_options cfg = vt_text_options(e, pol, budget, 5);
    vdnn_net_free(vt_text_train(e, &cfg, 0.5f, r));
}

static void test_lstm_policies_bitwise(void **state)
{
    (void)state;
    vt_text_env e;
    vt_text_env_open(&e, "lstm-lm", BATCH, SEQ, STEPS, words, sizeof words / sizeof words[0], 11, 60000);
    vt_text_run ref;
    memset(&ref, 0, sizeof ref);
    train_run(&e, VDNN_POLICY_NONE, SIZE_MAX, &ref);
    /* The loss starts near ln 256 (uniform bytes) and a step lowers it. */
    assert_true(ref.loss[0] > 5.0f && ref.loss[0] < 6.0f && ref.loss[1] < ref.loss[0]);
    vt_text_policies_bitwise(&e, "lstm-lm", train_run, &ref);
    vdnn_checkpoint_release(&ref.ck);
    vt_text_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_policies_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
