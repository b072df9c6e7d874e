/* Synthetic dataset: seeded class prototypes plus noise, so a network can learn it without any files. */
#include <stdio.h>
#include <stdlib.h>

#include "train/data_internal.h"

#define SYNTH_TRAIN 1024
#define SYNTH_TEST 256
#define SYNTH_GRID 4
/* Signal and noise weights with 0.6^2 + 0.8^2 = 1: pixels come out roughly zero-mean
 * and unit-variance, i.e. already normalised, so no statistics pass is needed. */
#define SYNTH_SIGNAL 0.6f
#define SYNTH_NOISE 0.8f

/* Approximately N(0,1): the sum of four uniforms, rescaled. Plain arithmetic keeps
 * the values bit-identical across libm versions. */
static float gaussianish(uint64_t *s)
{
    double sum = 0;
    for (int i = 0; i < 4; i++) sum += (double)(vdnn_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)((sum - 2.0) * 1.7320508075688772);
}

vdnn_status vdnn_synthetic_open(vdnn_shape shape, int classes, uint64_t seed, vdnn_split split,
                                vdnn_dataset_t **out, vdnn_error *err)
{
    if (shape.c <= 0 || shape.h <= 0 || shape.w <= 0 || (long long)shape.c * shape.h * shape.w > (1 << 24))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "synthetic: bad image shape %dx%dx%d (need 1..%d values per image)",
                         shape.c, shape.h, shape.w, 1 << 24);
    if (classes < 1 || classes > 100000)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "synthetic: bad class count %d (need 1..100000)", classes);
    int count = split == VDNN_SPLIT_TRAIN ? SYNTH_TRAIN : SYNTH_TEST;
    /* shape.n asks for at least that many training images, so one batch of that size fits. */
    if (split == VDNN_SPLIT_TRAIN && shape.n > count) count = shape.n;
    int gh = shape.h < SYNTH_GRID ? shape.h : SYNTH_GRID;
    int gw = shape.w < SYNTH_GRID ? shape.w : SYNTH_GRID;
    size_t cells = (size_t)shape.c * gh * gw;
    float *proto = malloc((size_t)classes * cells * sizeof *proto);
    if (!proto) return vdnn_fail(err, VDNN_ERR_NO_MEMORY, "synthetic: cannot allocate class prototypes");
    vdnn_dataset_t *ds;
    vdnn_status st = vdnn_dataset_alloc(count, shape.c, shape.h, shape.w, classes, &ds, err);
    if (st) {
        free(proto);
        return st;
    }

    /* The prototypes depend on the seed only, so both splits share them; each class
     * is a coarse SYNTH_GRID x SYNTH_GRID pattern that convolutions and pooling keep. */
    uint64_t ps = vdnn_rng_mix(seed, 0x70726f746fULL);
    for (size_t i = 0; i < (size_t)classes * cells; i++) proto[i] = gaussianish(&ps);

    uint64_t rs = vdnn_rng_mix(seed, 1 + (uint64_t)split);
    for (int i = 0; i < count; i++) ds->labels[i] = i % classes;
    for (int i = count - 1; i > 0; i--) {
        int j = (int)vdnn_rng_below(&rs, (uint64_t)i + 1);
        int32_t t = ds->labels[i];
        ds->labels[i] = ds->labels[j];
        ds->labels[j] = t;
    }
    size_t chw = (size_t)shape.c * shape.h * shape.w;
    for (int i = 0; i < count; i++) {
        const float *p = proto + (size_t)ds->labels[i] * cells;
        float *img = ds->images + (size_t)i * chw;
        for (int c = 0; c < shape.c; c++)
            for (int y = 0; y < shape.h; y++)
                for (int x = 0; x < shape.w; x++) {
                    float v = p[((size_t)c * gh + (size_t)y * gh / shape.h) * gw + (size_t)x * gw / shape.w];
                    *img++ = SYNTH_SIGNAL * v + SYNTH_NOISE * gaussianish(&rs);
                }
    }
    free(proto);
    int n = snprintf(ds->source, sizeof ds->source, "synthetic %s %dx%dx%d, %d classes, seed %llu",
                     split == VDNN_SPLIT_TRAIN ? "train" : "test", shape.c, shape.h, shape.w, classes,
                     (unsigned long long)seed);
    (void)n;
    *out = ds;
    return VDNN_OK;
}
