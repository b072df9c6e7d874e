/* lstm-lm (docs/sequence.md, "LSTM") trained a few steps from a text file under every policy and planner that runs
 * on the CPU, with freed and offloaded memory poisoned: every parameter, momentum and loss bit for bit as under none,
 * and the arena's high-water mark the planned peak. The planners plan midway between the smallest budget any plan
 * reaches and in-core's need, where they choose which chunks' state to keep, swap or recompute. Also the shared
 * parameters' update steps under offload_params (their own steps after backward, below the fused schedule's peak). */
#include <stdio.h>
#include <string.h>

#include "exec/net_impl.h"
#include "plan/plan_validate.h"
#include "testutil.h"

#define BATCH 32
#define SEQ 128 /* lstm-lm's file length: its four chunks of 32 steps */
#define STEPS 2
#define SMALL_BATCH 4

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

/* lstm-lm with AdamW, a plan of policy none under offload_params: the fused schedule (a plan analyzed in-core, then
 * its parameters homed, as it was made before shared parameters had steps of their own) updates each layer's shared
 * parameters in its chunk 0's backward step. */
static vdnn_plan_t *fused_homed_plan(const vt_text_env *e, const vdnn_plan_request *rq)
{
    vdnn_plan_t *p = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_analyze(e->g, e->info, rq, &p, &err), err);
    vdnn_plan_set_offload_params(p, true);
    vt_assert_ok(vdnn_plan_finalize(p, &err), err);
    vt_assert_ok(vdnn_plan_validate(p, &err), err);
    return p;
}

/* Checks that exactly the lstm layers' chunk 0 (the owners of the shared parameters) have update steps of their own,
 * after backward, and returns how many. */
static int owner_update_steps(const vdnn_plan_t *p)
{
    int n = 0;
    for (int l = 1; l < p->n_layers; l++) {
        const int u = p->ls[l].upd;
        if (!vdnn_lstm_owner(&p->g->layers[l])) {
            assert_int_equal(u, -1);
            continue;
        }
        assert_true(u >= p->update_begin && u < p->n_steps);
        assert_int_equal(p->steps[u].kind, VDNN_STEP_UPDATE);
        assert_int_equal(p->steps[u].layer, l);
        n++;
    }
    return n;
}

/* The layers with update steps of their own. */
static int own_update_steps(const vdnn_plan_t *p)
{
    int n = 0;
    for (int l = 1; l < p->n_layers; l++) n += p->ls[l].upd >= 0;
    return n;
}

/* With the parameters homed in host memory and AdamW, the shared parameters' update runs in a step of its own after
 * the last chunk's backward, where its moments no longer come in beside chunk 0's gates and workspace: the plan
 * peaks lower than the fused schedule, trains bit for bit as in-core, and the arena reaches exactly the planned
 * peak. Where the steps lower nothing (SGD), the fused schedule stays. */
static void test_lstm_shared_update_steps(void **state)
{
    (void)state;
    /* At batch 4 the parameters' update is what peaks (at 32 the head's maps do, under either schedule). */
    vt_text_env e;
    vt_text_env_open(&e, "lstm-lm", SMALL_BATCH, SEQ, STEPS, words, sizeof words / sizeof words[0], 11, 60000);
    vdnn_plan_request rq = vdnn_plan_request_default();
    rq.memory.optimizer_moments = 2;
    rq.profile = &e.prof;
    vdnn_plan_t *fused = fused_homed_plan(&e, &rq);
    assert_false(fused->shared_steps);
    rq.memory.offload_params = true;
    vdnn_plan_t *own = NULL;
    vdnn_error err;
    vt_assert_ok(vdnn_plan_build(e.g, e.info, &rq, &own, &err), err);
    vt_assert_ok(vdnn_plan_validate(own, &err), err);
    assert_true(own->shared_steps && own->offload_params);
    assert_int_equal(owner_update_steps(own), 2);
    print_message("lstm-lm b%d AdamW offload_params: peak %zu with update steps, %zu fused\n", SMALL_BATCH,
                  own->peak_device_bytes, fused->peak_device_bytes);
    if (own->peak_device_bytes >= fused->peak_device_bytes)
        fail_msg("update steps peak at %zu, the fused schedule at %zu", own->peak_device_bytes,
                 fused->peak_device_bytes);
    /* With SGD (one moment) the fp32 peak is elsewhere, the same under both schedules: the fused one, which moves
     * the gradients fewer times, is kept. (bf16 maps are half as large, so there the update may peak.) */
    rq.memory.optimizer_moments = 1;
    vdnn_plan_t *sgd = NULL;
    vt_assert_ok(vdnn_plan_build(e.g, e.info, &rq, &sgd, &err), err);
    assert_true(sgd->offload_params);
    if (e.g->dtype == VDNN_DTYPE_F32) {
        assert_false(sgd->shared_steps);
        assert_int_equal(own_update_steps(sgd), 0);
    }
    vdnn_plan_free(sgd);

    vdnn_net_options cfg = vt_text_options(&e, VDNN_POLICY_NONE, SIZE_MAX, 5);
    cfg.optimizer = VDNN_OPTIMIZER_ADAMW;
    cfg.weight_decay = 0.01f;
    vt_text_run ref, r;
    memset(&ref, 0, sizeof ref);
    memset(&r, 0, sizeof r);
    vdnn_net_free(vt_text_train(&e, &cfg, 0.01f, &ref));
    cfg.memory.offload_params = true;
    vdnn_net_t *net = vt_text_train(&e, &cfg, 0.01f, &r);
    /* The net made the plan checked above (vt_text_train also checks the arena's high-water mark against it). */
    assert_true(net->plan_train->shared_steps);
    assert_int_equal(r.train_peak, own->peak_device_bytes);
    vdnn_net_free(net);
    vt_text_assert_same_run(&e, "lstm-lm AdamW offload_params with update steps: against in-core", &ref, &r);
    vdnn_checkpoint_release(&ref.ck);
    vdnn_checkpoint_release(&r.ck);
    vdnn_plan_free(own);
    vdnn_plan_free(fused);
    vt_text_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lstm_policies_bitwise),
        cmocka_unit_test(test_lstm_shared_update_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
