/* vdnn export: an ONNX model written back with a checkpoint's trained parameters (vdnn_model_export_onnx). */
#include <stdio.h>
#include <string.h>

#include "cmd_common.h"

static const char export_usage[] =
    "usage: vdnn export --resume CKPT --model FILE.onnx --out TRAINED.onnx\n"
    "Writes the ONNX model FILE.onnx with the parameters of checkpoint CKPT (vdnn train --model FILE.onnx\n"
    "--save CKPT) as its initializers: weights, biases, batch-norm scales, shifts and running statistics. The\n"
    "rest of the graph is FILE.onnx's, unchanged. TRAINED.onnx is written whole or not at all (a temporary file\n"
    "beside it, then renamed). The checkpoint must hold every parameter of the model at the model's size.\n";

int vdnn_cmd_export(int argc, char **argv)
{
    const char *model = NULL, *ckpt = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(export_usage, stdout);
            return 0;
        }
        const char **dst = !strcmp(a, "--model") ? &model : !strcmp(a, "--resume") ? &ckpt
                                                         : !strcmp(a, "--out")    ? &out
                                                                                  : NULL;
        if (!dst) {
            fprintf(stderr, "vdnn export: unknown flag '%s'\n%s", a, export_usage);
            return 2;
        }
        if (i + 1 >= argc || !*argv[i + 1]) {
            fprintf(stderr, "vdnn export: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!model || !ckpt || !out) {
        fprintf(stderr, "vdnn export: --model, --resume and --out are all required\n%s", export_usage);
        return 2;
    }
    vdnn_error err = {VDNN_OK, ""};
    vdnn_model_t *m = NULL;
    vdnn_status rc = cli_load_model(model, &m, &err);
    if (rc == VDNN_OK) rc = vdnn_model_export_onnx(m, ckpt, out, &err);
    vdnn_model_free(m);
    if (rc != VDNN_OK) return cli_fail("export", &err);
    printf("wrote %s: %s with the parameters of %s\n", out, model, ckpt);
    return 0;
}
