/* Times the CPU backend's convolutions with fp32 and with bf16 maps, forward and backward (layout copies and the
 * weights' rounding included: what an op call costs), at the layer shapes of ResNet-18 and VGG-16 on 3x64x64
 * images, the same thread count for all; prints each layer's best time of REPS runs, the runs of fp32, fp32 with
 * direct kernels and bf16 alternating so that load from other processes meets all three alike, and the bf16 gain
 * (fp32 time over bf16 time) per layer and per net, each shape weighted by how often the net has it. Built and
 * run by bench/bf16-ops.sh.
 *
 *     bf16_ops [--batch N] [--threads T] [--reps R] */
#include "lib/op_bench.h"

typedef struct layer {
    const char *net, *name;
    int c, hw, k, filters, stride, pad, bias, count; /* count: how many layers of this shape the net has */
} layer;

/* ResNet-18 at 64x64: conv1 and the max pool halve twice, to 16x16 for layer1. VGG-16: 64x64 down to 4x4. */
static const layer layers[] = {
    {"resnet18", "conv1 7x7 s2 3->64 @64", 3, 64, 7, 64, 2, 3, 0, 1},
    {"resnet18", "layer1 3x3 64->64 @16", 64, 16, 3, 64, 1, 1, 0, 4},
    {"resnet18", "layer2.0 3x3 s2 64->128 @16", 64, 16, 3, 128, 2, 1, 0, 1},
    {"resnet18", "layer2 3x3 128->128 @8", 128, 8, 3, 128, 1, 1, 0, 3},
    {"resnet18", "layer2.0 1x1 s2 64->128 @16", 64, 16, 1, 128, 2, 0, 0, 1},
    {"resnet18", "layer3.0 3x3 s2 128->256 @8", 128, 8, 3, 256, 2, 1, 0, 1},
    {"resnet18", "layer3 3x3 256->256 @4", 256, 4, 3, 256, 1, 1, 0, 3},
    {"resnet18", "layer3.0 1x1 s2 128->256 @8", 128, 8, 1, 256, 2, 0, 0, 1},
    {"resnet18", "layer4.0 3x3 s2 256->512 @4", 256, 4, 3, 512, 2, 1, 0, 1},
    {"resnet18", "layer4 3x3 512->512 @2", 512, 2, 3, 512, 1, 1, 0, 3},
    {"resnet18", "layer4.0 1x1 s2 256->512 @4", 256, 4, 1, 512, 2, 0, 0, 1},
    {"vgg16", "conv1_1 3->64 @64", 3, 64, 3, 64, 1, 1, 1, 1},
    {"vgg16", "conv1_2 64->64 @64", 64, 64, 3, 64, 1, 1, 1, 1},
    {"vgg16", "conv2_1 64->128 @32", 64, 32, 3, 128, 1, 1, 1, 1},
    {"vgg16", "conv2_2 128->128 @32", 128, 32, 3, 128, 1, 1, 1, 1},
    {"vgg16", "conv3_1 128->256 @16", 128, 16, 3, 256, 1, 1, 1, 1},
    {"vgg16", "conv3_2,3 256->256 @16", 256, 16, 3, 256, 1, 1, 1, 2},
    {"vgg16", "conv4_1 256->512 @8", 256, 8, 3, 512, 1, 1, 1, 1},
    {"vgg16", "conv4_2,3 512->512 @8", 512, 8, 3, 512, 1, 1, 1, 2},
    {"vgg16", "conv5_x 512->512 @4", 512, 4, 3, 512, 1, 1, 1, 3},
};
enum { N_LAYERS = sizeof layers / sizeof layers[0] };

static vdnn_op_desc conv_desc(const layer *l, int batch, vdnn_dtype t)
{
    const int out = (l->hw + 2 * l->pad - l->k) / l->stride + 1;
    vdnn_op_desc d;
    memset(&d, 0, sizeof d);
    d.kind = VDNN_LAYER_CONV;
    d.n_inputs = 1;
    d.in[0] = (vdnn_shape){batch, l->c, l->hw, l->hw};
    d.out = (vdnn_shape){batch, l->filters, out, out};
    d.p.filters = l->filters;
    d.p.kernel_h = d.p.kernel_w = l->k;
    d.p.stride_h = d.p.stride_w = l->stride;
    d.p.pad_h = d.p.pad_w = l->pad;
    d.p.groups = 1;
    d.p.bias = l->bias;
    d.training = true;
    d.dtype = t;
    return d;
}

/* The layer with maps of type t under candidate algo; false if the layer has no such candidate. */
static bool run_open(vdnn_backend_t *be, const layer *l, int batch, vdnn_dtype t, int algo, bench_run *r)
{
    vdnn_error err = {0};
    vdnn_op_desc d = conv_desc(l, batch, t);
    vdnn_op_algo algos[VDNN_MAX_ALGOS];
    int n = 0;
    if (be->ops->op_algos(be, &d, algos, &n, &err)) bench_die(l->name, &err);
    if (algo >= n) return false;
    d.algo = algo;
    const size_t nw = (size_t)l->filters * l->c * l->k * l->k;
    bench_run_open(be, &d, &algos[algo].info, nw, l->bias ? (size_t)l->filters : 0, l->name, r);
    return true;
}

int main(int argc, char **argv)
{
    int batch = 64, threads = 0, reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bf16_ops [--batch N] [--threads T] [--reps R]\n");
            return 2;
        }
    }
    if (batch < 1 || threads < 0 || reps < 1) {
        fprintf(stderr, "bf16_ops: batch and reps must be positive, threads 0 (all) or more\n");
        return 2;
    }
    vdnn_cpu_options o = {.threads = threads};
    vdnn_backend_t *be = NULL;
    vdnn_error err = {0};
    if (vdnn_backend_cpu_create(&o, &be, &err)) bench_die("cpu backend", &err);
    vdnn_op_desc probe = conv_desc(&layers[0], 1, VDNN_DTYPE_BF16);
    vdnn_op_info info;
    if (be->ops->op_query(be, &probe, &info, &err)) bench_die("bf16", &err);
    printf("batch %d, threads %d, best of %d alternating runs after a warm-up; times in ms per call.\n", batch,
           be->threads, reps);
    printf("fp32: the backend's default (Winograd where it fits, else direct); fp32d: direct kernels, as bf16 uses.\n");
    printf("%-9s %-30s %2s %8s %8s %8s %6s %6s %8s %8s %8s %6s %6s\n", "net", "layer", "x", "fp32 fwd", "fp32d", "bf16",
           "gain", "gain d", "fp32 bwd", "fp32d", "bf16", "gain", "gain d");
    double net[3] = {0}, all[3] = {0};
    for (int i = 0; i < N_LAYERS; i++) {
        const layer *l = &layers[i];
        bench_run r[3];
        run_open(be, l, batch, VDNN_DTYPE_F32, 0, &r[0]);
        /* fp32's second candidate is "direct" where Winograd was the default; otherwise the default is direct. */
        vdnn_op_algo algos[VDNN_MAX_ALGOS];
        int n = 0;
        vdnn_op_desc d = conv_desc(l, batch, VDNN_DTYPE_F32);
        if (be->ops->op_algos(be, &d, algos, &n, &err)) bench_die(l->name, &err);
        const bool direct = n > 1 && !strcmp(algos[1].name, "direct");
        if (direct) run_open(be, l, batch, VDNN_DTYPE_F32, 1, &r[1]);
        run_open(be, l, batch, VDNN_DTYPE_BF16, 0, &r[2]);
        for (int k = 0; k <= reps; k++)
            for (int j = 0; j < 3; j++)
                if (j != 1 || direct) bench_run_once(be, l->name, &r[j], k > 0);
        if (!direct) r[1].fwd = r[0].fwd, r[1].bwd = r[0].bwd;
        printf("%-9s %-30s %2d %8.2f %8.2f %8.2f %6.2f %6.2f %8.2f %8.2f %8.2f %6.2f %6.2f\n", l->net, l->name, l->count,
               1e3 * r[0].fwd, 1e3 * r[1].fwd, 1e3 * r[2].fwd, r[0].fwd / r[2].fwd, r[1].fwd / r[2].fwd, 1e3 * r[0].bwd,
               1e3 * r[1].bwd, 1e3 * r[2].bwd, r[0].bwd / r[2].bwd, r[1].bwd / r[2].bwd);
        for (int j = 0; j < 3; j++) net[j] += l->count * (r[j].fwd + r[j].bwd);
        for (int j = 0; j < 3; j++)
            if (j != 1 || direct) bench_run_close(be, &r[j]);
        if (i + 1 == N_LAYERS || strcmp(layers[i + 1].net, l->net)) {
            printf("%s convolutions, forward + backward: fp32 %.1f ms, fp32 direct %.1f ms, bf16 %.1f ms; bf16 gain %.2f "
                   "over fp32, %.2f over fp32 direct\n",
                   l->net, 1e3 * net[0], 1e3 * net[1], 1e3 * net[2], net[0] / net[2], net[1] / net[2]);
            for (int j = 0; j < 3; j++) all[j] += net[j], net[j] = 0;
        }
    }
    printf("bf16_vs_fp32_direct_conv: %.2f\n", all[1] / all[2]);
    printf("bf16_vs_fp32_conv: %.2f\n", all[0] / all[2]);
    vdnn_backend_destroy(be);
    return 0;
}
