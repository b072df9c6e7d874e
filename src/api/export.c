/* The public export calls: an ONNX model written back with trained parameters, taken from a checkpoint file or
 * from a live net; both check that every parameter the file holds is there at the file's size. */
#include <stdio.h>
#include <string.h>

#include "exec/net.h"
#include "graph/onnx.h"
#include "train/checkpoint.h"
#include "vdnn/model.h"
#include "vdnn/net.h"

/* Export rewrites the file a model was imported from, so only a model read from an .onnx file has one (the same
 * rule vdnn_model_load follows). */
static vdnn_status check_onnx(const char *source, vdnn_error *err)
{
    size_t n = strlen(source);
    if (n > 5 && !strcmp(source + n - 5, ".onnx")) return VDNN_OK;
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED,
                     "%s: not an ONNX model: export writes an ONNX file back with trained parameters, so it takes "
                     "a model loaded from an .onnx file",
                     source);
}

typedef struct ckpt_src {
    const vdnn_checkpoint *ck;
    const char *path, *model;
} ckpt_src;

static vdnn_status from_checkpoint(void *ctx, const char *name, float *dst, size_t count, vdnn_error *err)
{
    const ckpt_src *c = ctx;
    const vdnn_ckpt_tensor *t = vdnn_checkpoint_find(c->ck, name);
    if (!t)
        return vdnn_fail(err, VDNN_ERR_MISMATCH,
                         "%s: checkpoint has no '%s', a parameter of %s: it is a checkpoint of another model", c->path,
                         name, c->model);
    if (t->count != count)
        return vdnn_fail(err, VDNN_ERR_MISMATCH,
                         "%s: checkpoint's '%s' has %zu values, %s's has %zu: it is a checkpoint of another model "
                         "(or of this one at another input size)",
                         c->path, name, t->count, c->model, count);
    memcpy(dst, t->data, count * sizeof *dst);
    return VDNN_OK;
}

vdnn_status vdnn_model_export_onnx(const vdnn_model_t *m, const char *checkpoint, const char *out, vdnn_error *err)
{
    if (!m || !checkpoint || !out)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "model_export_onnx: no model, checkpoint or output path");
    vdnn_status st = check_onnx(m->source, err);
    if (st) return st;
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    st = vdnn_checkpoint_read(checkpoint, &ck, err);
    ckpt_src c = {.ck = &ck, .path = checkpoint, .model = m->source};
    if (!st) st = vdnn_onnx_export(m->source, from_checkpoint, &c, out, err);
    vdnn_checkpoint_release(&ck);
    return st;
}

static vdnn_status from_net(void *ctx, const char *name, float *dst, size_t count, vdnn_error *err)
{
    vdnn_net_t *net = ctx;
    const int n = vdnn_net_param_count(net);
    for (int i = 0; i < n; i++) {
        vdnn_param_info pi;
        vdnn_status st = vdnn_net_param_info(net, i, &pi, err);
        if (st) return st;
        if (strcmp(pi.name, name)) continue;
        if (pi.count != count)
            return vdnn_fail(err, VDNN_ERR_MISMATCH,
                             "the net's '%s' has %zu values, the model file's %zu (the net runs at another input "
                             "size)",
                             name, pi.count, count);
        return vdnn_net_get(net, name, dst, count, err);
    }
    return vdnn_fail(err, VDNN_ERR_MISMATCH, "the net has no '%s': the model file changed since the net was made",
                     name);
}

vdnn_status vdnn_net_export_onnx(vdnn_net_t *net, const char *out, vdnn_error *err)
{
    if (!net || !out) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "net_export_onnx: no net or output path");
    const char *source = vdnn_net_graph(net)->source;
    vdnn_status st = check_onnx(source, err);
    return st ? st : vdnn_onnx_export(source, from_net, net, out, err);
}
