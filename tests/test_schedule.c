/* Tests for learning-rate schedules: values against PyTorch's schedulers, and spec parsing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "train/schedule.h"

/* Expected values printed by PyTorch 1.13 (python3 with torch), reading the lr before each
 * optimizer step and then calling opt.step(); sched.step():
 *
 *   import torch
 *   from torch.optim.lr_scheduler import StepLR, CosineAnnealingLR, LinearLR, SequentialLR
 *   def run(base, make, n):
 *       p = torch.nn.Parameter(torch.zeros(1)); opt = torch.optim.SGD([p], lr=base)
 *       s = make(opt); out = []
 *       for _ in range(n):
 *           out.append(opt.param_groups[0]['lr']); opt.step(); s.step()
 *       return out
 *   def warm(W, second):
 *       return lambda o: SequentialLR(o, [LinearLR(o, start_factor=1.0/W, end_factor=1.0,
 *                                     total_iters=W-1), second(o)], milestones=[W])
 *   print(run(0.1, lambda o: StepLR(o, step_size=3, gamma=0.5), 11))
 *   print(run(0.1, lambda o: CosineAnnealingLR(o, T_max=10, eta_min=0.001), 11))
 *   print(run(0.05, lambda o: CosineAnnealingLR(o, T_max=7), 8))
 *   print(run(0.1, warm(4, lambda o: CosineAnnealingLR(o, T_max=8, eta_min=0.0)), 13))
 *   print(run(0.2, warm(3, lambda o: StepLR(o, step_size=2, gamma=0.1)), 9))
 */
static const double step_3_half[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125};
static const double cos_10_min[] = {0.1, 0.09757729755661011, 0.0905463412215599, 0.07959536998847742,
                                    0.0657963412215599, 0.0505, 0.03520365877844011, 0.02140463001152259,
                                    0.010453658778440109, 0.0034227024433899004, 0.001};
static const double cos_7[] = {0.05, 0.04752422169756048, 0.040587245046468344, 0.030563023348907863,
                               0.019436976651092144, 0.009412754953531664, 0.002475778302439524, 0.0};
static const double warm4_cos_8[] = {0.025, 0.05, 0.07500000000000001, 0.1, 0.1, 0.09619397662556434,
                                     0.08535533905932738, 0.0691341716182545, 0.05, 0.030865828381745515,
                                     0.014644660940672627, 0.0038060233744356634, 0.0};
static const double warm3_step[] = {0.06666666666666667, 0.13333333333333333, 0.2, 0.2, 0.2,
                                    0.020000000000000004, 0.020000000000000004, 0.0020000000000000005,
                                    0.0020000000000000005};

/* The GPT schedule (nanoGPT's get_lr, llm.c's train_gpt2): linear warmup over W steps to the peak rate, then a
 * cosine to a floor at T steps, the floor afterwards. Computed independently of vdnn's SequentialLR reading above, as one
 * PyTorch LambdaLR with base 6e-4, floor 6e-5, W 5, T 20 (Debian's python3-torch):
 *
 *   m = 6e-5 / 6e-4
 *   def f(t):
 *       if t < 5: return (t + 1) / 5
 *       if t >= 20: return m
 *       return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * (t - 5) / (20 - 5)))
 *   print(run(6e-4, lambda o: LambdaLR(o, f), 23))        # with torch.optim.AdamW in run()
 */
static const double gpt_warm5_cos20[] = {
    0.00011999999999999999, 0.00023999999999999998, 0.00035999999999999997, 0.00047999999999999996, 0.0006, 0.0006,
    0.0005940998521981274, 0.0005766572735635022, 0.0005484345884812357, 0.0005106652637168917, 0.00046499999999999997,
    0.00041343458848123576, 0.0003582226850822664, 0.0003017773149177336, 0.00024656541151876424, 0.00019500000000000005,
    0.00014933473628310837, 0.00011156541151876422, 8.334272643649774e-05, 6.590014780187247e-05, 5.9999999999999995e-05,
    5.9999999999999995e-05, 5.9999999999999995e-05};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* PyTorch updates the rate recursively, so agreement is to rounding, not bit for bit. */
static void expect_series(const vdnn_lr_schedule *s, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double got = vdnn_lr_at(s, (long)i);
        if (fabs(got - want[i]) > 1e-12 * fabs(want[i]) + 1e-15)
            fail_msg("step %zu: lr %.17g, PyTorch %.17g", i, got, want[i]);
    }
}

static vdnn_lr_schedule parsed(const char *spec, double base, long total)
{
    vdnn_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.base_lr = base;
    s.total_steps = total;
    vdnn_error err;
    vt_assert_ok(vdnn_lr_parse(spec, &s, &err), err);
    assert_true(s.base_lr == base); /* left to the caller */
    assert_int_equal(s.total_steps, total);
    return s;
}

static void test_matches_pytorch(void **state)
{
    (void)state;
    vdnn_lr_schedule s = parsed("step:3:0.5", 0.1, 0);
    expect_series(&s, step_3_half, N_OF(step_3_half));
    s = parsed("cosine:0.001", 0.1, 10);
    expect_series(&s, cos_10_min, N_OF(cos_10_min));
    s = parsed("cosine", 0.05, 7);
    expect_series(&s, cos_7, N_OF(cos_7));
    s = parsed("cosine,warmup=4", 0.1, 12);
    expect_series(&s, warm4_cos_8, N_OF(warm4_cos_8));
    s = parsed("step:2:0.1,warmup=3", 0.2, 0);
    expect_series(&s, warm3_step, N_OF(warm3_step));
}

/* --lr-schedule cosine:MIN,warmup=W with --steps T is the usual GPT schedule. */
static void test_gpt_schedule(void **state)
{
    (void)state;
    vdnn_lr_schedule s = parsed("cosine:6e-5,warmup=5", 6e-4, 20);
    expect_series(&s, gpt_warm5_cos20, N_OF(gpt_warm5_cos20));
}

static void test_constant_and_edges(void **state)
{
    (void)state;
    vdnn_lr_schedule s = parsed("constant", 0.01, 100);
    for (long i = 0; i < 1000; i += 37) assert_true(vdnn_lr_at(&s, i) == 0.01);
    s = parsed("constant,warmup=2", 0.01, 100);
    assert_true(vdnn_lr_at(&s, 0) == 0.005);
    assert_true(vdnn_lr_at(&s, 1) == 0.01);
    assert_true(vdnn_lr_at(&s, 2) == 0.01);
    /* Past total_steps the cosine stays at its floor instead of rising again. */
    s = parsed("cosine:0.001", 0.1, 10);
    assert_true(vdnn_lr_at(&s, 11) == 0.001);
    assert_true(vdnn_lr_at(&s, 15) == 0.001);
    assert_true(vdnn_lr_at(&s, 1000000) == 0.001);
    /* A negative step counts as the first. */
    assert_true(vdnn_lr_at(&s, -5) == vdnn_lr_at(&s, 0));
    /* Warmup of one step is no warmup. */
    vdnn_lr_schedule a = parsed("cosine,warmup=1", 0.1, 11), b = parsed("cosine", 0.1, 10);
    for (long i = 0; i < 11; i++) assert_true(vdnn_lr_at(&a, i + 1) == vdnn_lr_at(&b, i));
    assert_true(vdnn_lr_at(&a, 0) == 0.1);
}

static void test_parse_fields(void **state)
{
    (void)state;
    vdnn_lr_schedule s = parsed("step:30:0.1", 0.1, 0);
    assert_int_equal(s.kind, VDNN_LR_STEP);
    assert_int_equal(s.step_size, 30);
    assert_true(s.gamma == 0.1);
    assert_int_equal(s.warmup_steps, 0);
    s = parsed("cosine:1e-4,warmup=500", 0.1, 0);
    assert_int_equal(s.kind, VDNN_LR_COSINE);
    assert_true(s.min_lr == 1e-4);
    assert_int_equal(s.warmup_steps, 500);
    /* Parsing again resets what the new spec does not mention. */
    s = parsed("constant", 0.1, 0);
    assert_int_equal(s.kind, VDNN_LR_CONSTANT);
    assert_true(s.min_lr == 0.0);
    assert_int_equal(s.warmup_steps, 0);
}

static void test_bad_specs(void **state)
{
    (void)state;
    const char *bad[] = {"", "const", "Constant", "constant:1", "step", "step:3", "step:0:0.5", "step:-2:0.5",
                         "step:3:0", "step:3:-1", "step:3:x", "step:3:0.5:1", "step:2.5:0.5", "cosine:", "cosine:-1",
                         "cosine:nan", "cosine,warmup=-1", "cosine,warmup=", "cosine,warmup=2x", "cosine,warm=2",
                         "cosine,", "step:3:inf"};
    for (size_t i = 0; i < N_OF(bad); i++) {
        vdnn_lr_schedule s;
        memset(&s, 0, sizeof s);
        s.kind = VDNN_LR_STEP;
        s.gamma = 0.25;
        vdnn_error err;
        char needle[300];
        snprintf(needle, sizeof needle, "'%s'", bad[i]);
        vt_assert_error(vdnn_lr_parse(bad[i], &s, &err), err, VDNN_ERR_INVALID_ARG, needle);
        assert_int_equal(s.kind, VDNN_LR_STEP); /* untouched on failure */
        assert_true(s.gamma == 0.25);
    }
    char longspec[400];
    memset(longspec, 'x', sizeof longspec - 1);
    longspec[sizeof longspec - 1] = '\0';
    vdnn_lr_schedule s;
    vdnn_error err;
    vt_assert_error(vdnn_lr_parse(longspec, &s, &err), err, VDNN_ERR_INVALID_ARG, "too long");
    vt_assert_error(vdnn_lr_parse(NULL, &s, &err), err, VDNN_ERR_INVALID_ARG, "schedule");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gpt_schedule),
        cmocka_unit_test(test_constant_and_edges),
        cmocka_unit_test(test_parse_fields),
        cmocka_unit_test(test_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
