/* Learning-rate schedules: parsing a spec string and the rate at each optimizer step. */
#include "train/schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double vdnn_lr_at(const vdnn_lr_schedule *s, long step)
{
    if (step < 0) step = 0;
    long w = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step < w) return s->base_lr * (double)(step + 1) / (double)w;
    long t = step - w;
    switch (s->kind) {
    case VDNN_LR_CONSTANT:
        return s->base_lr;
    case VDNN_LR_STEP:
        if (s->step_size <= 0) return s->base_lr;
        return s->base_lr * pow(s->gamma, (double)(t / s->step_size));
    case VDNN_LR_COSINE: {
        long span = s->total_steps - w;
        if (t >= span) return s->min_lr;
        const double pi = 3.14159265358979323846;
        return s->min_lr + (s->base_lr - s->min_lr) * (1.0 + cos(pi * (double)t / (double)span)) / 2.0;
    }
    }
    return s->base_lr;
}

static vdnn_status bad(vdnn_error *err, const char *spec, const char *why)
{
    return vdnn_fail(err, VDNN_ERR_INVALID_ARG,
                     "bad learning-rate schedule '%s': %s (expected constant, step:STEP_SIZE:GAMMA, cosine or "
                     "cosine:MIN_LR, optionally followed by ,warmup=N)",
                     spec, why);
}

vdnn_status vdnn_lr_parse(const char *spec, vdnn_lr_schedule *s, vdnn_error *err)
{
    if (!spec) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no learning-rate schedule given");
    char buf[256];
    if (strlen(spec) >= sizeof buf) return bad(err, spec, "too long");
    strcpy(buf, spec);

    long warmup = 0;
    char *comma = strchr(buf, ',');
    if (comma) {
        *comma = '\0';
        const char *opt = comma + 1;
        if (strncmp(opt, "warmup=", 7) != 0) return bad(err, spec, "unknown option after ','");
        if (!vdnn_parse_int(opt + 7, &warmup) || warmup < 0)
            return bad(err, spec, "warmup must be a non-negative integer");
    }

    char *args = strchr(buf, ':');
    if (args) *args++ = '\0';
    vdnn_lr_schedule r = *s;
    r.gamma = 1.0;
    r.step_size = 0;
    r.min_lr = 0.0;
    r.warmup_steps = warmup;
    if (!strcmp(buf, "constant")) {
        if (args) return bad(err, spec, "constant takes no arguments");
        r.kind = VDNN_LR_CONSTANT;
    } else if (!strcmp(buf, "step")) {
        char *g = args ? strchr(args, ':') : NULL;
        if (!g) return bad(err, spec, "step needs STEP_SIZE and GAMMA");
        *g++ = '\0';
        if (!vdnn_parse_int(args, &r.step_size) || r.step_size < 1)
            return bad(err, spec, "step size must be a positive integer");
        if (!vdnn_parse_float(g, &r.gamma) || r.gamma <= 0.0)
            return bad(err, spec, "gamma must be a positive number");
        r.kind = VDNN_LR_STEP;
    } else if (!strcmp(buf, "cosine")) {
        if (args && (!vdnn_parse_float(args, &r.min_lr) || r.min_lr < 0.0))
            return bad(err, spec, "minimum learning rate must be a non-negative number");
        r.kind = VDNN_LR_COSINE;
    } else {
        return bad(err, spec, "unknown schedule");
    }
    *s = r;
    return VDNN_OK;
}
