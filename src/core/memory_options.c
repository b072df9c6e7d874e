/* The memory options' one default and their range checks (messages name the field: callers map fields to
 * their own names, as the command maps them to its flags). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/dtype.h"
#include "vdnn/memory.h"

/* The public enum mirrors the backends' type, so a precision is a dtype by a cast. */
_Static_assert((int)VDNN_PRECISION_BF16 == (int)VDNN_DTYPE_BF16 && (int)VDNN_PRECISION_FP16 == (int)VDNN_DTYPE_F16 &&
                   (int)VDNN_PRECISION_COUNT == (int)VDNN_DTYPE_COUNT,
               "vdnn_precision and vdnn_dtype must agree");

const char *vdnn_precision_name(vdnn_precision p) { return vdnn_dtype_name((vdnn_dtype)p); }

bool vdnn_precision_parse(const char *s, vdnn_precision *out)
{
    for (int i = 0; s && i < VDNN_PRECISION_COUNT; i++)
        if (!strcmp(s, vdnn_precision_name((vdnn_precision)i))) {
            *out = (vdnn_precision)i;
            return true;
        }
    return false;
}

vdnn_memory_options vdnn_memory_options_default(void)
{
    return (vdnn_memory_options){
        .policy = VDNN_POLICY_NONE,
        .budget = SIZE_MAX,
        .host_budget = SIZE_MAX,
        .conv_algo = VDNN_ALGO_DEFAULT,
        .micro_batches = 1,
        .optimizer_moments = 1,
    };
}

vdnn_status vdnn_memory_options_check(const vdnn_memory_options *m, vdnn_error *err)
{
    if (!m) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory: no options given");
    if ((unsigned)m->policy >= VDNN_POLICY_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.policy: %d is out of range (0 to %d)", (int)m->policy,
                         VDNN_POLICY_COUNT - 1);
    if (m->budget == 0)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.budget: 0 is out of range (1 byte to unlimited)");
    if (m->conv_algo < VDNN_ALGO_LEANEST)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "memory.conv_algo: %d is out of range (VDNN_ALGO_LEANEST, VDNN_ALGO_CHOOSE or a candidate "
                         "index from 0)", m->conv_algo);
    if (m->micro_batches < 1 || m->micro_batches > VDNN_MAX_MICRO_BATCHES)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.micro_batches: %d is out of range (1 to %d)",
                         m->micro_batches, VDNN_MAX_MICRO_BATCHES);
    if (m->optimizer_moments < 1 || m->optimizer_moments > 2)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.optimizer_moments: %d is out of range (1, SGD, or 2, AdamW)",
                         m->optimizer_moments);
    if (!(m->link_bandwidth_d2h >= 0) || !isfinite(m->link_bandwidth_d2h))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "memory.link_bandwidth_d2h: %g is out of range (0, unthrottled, or bytes per second)",
                         m->link_bandwidth_d2h);
    if (!(m->link_bandwidth_h2d >= 0) || !isfinite(m->link_bandwidth_h2d))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                         "memory.link_bandwidth_h2d: %g is out of range (0, unthrottled, or bytes per second)",
                         m->link_bandwidth_h2d);
    if ((unsigned)m->precision >= VDNN_PRECISION_COUNT)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "memory.precision: %d is out of range (fp32, bf16 or fp16)",
                         (int)m->precision);
    return VDNN_OK;
}
