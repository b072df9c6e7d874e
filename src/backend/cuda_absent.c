/* Stand-in CUDA backend for builds without a CUDA toolkit: reports that no GPU support was built. */
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

#include <string.h>

vdnn_status vdnn_backend_cuda_create(int device, int threads, vdnn_backend_t **out, vdnn_error *err)
{
    return vdnn_backend_cuda_create_ex(NULL, out, err);
}

void vdnn_cuda_options_default(vdnn_cuda_options *o)
{
    memset(o, 0, sizeof *o);
    o->tf32 = -1;
    o->deterministic = -1;
    o->benchmark = -1;
}

vdnn_status vdnn_backend_cuda_create_ex(const vdnn_cuda_options *opt, vdnn_backend_t **out, vdnn_error *err)
{
    if (out) *out = NULL;
    return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "no GPU: this vdnn was built without the CUDA backend");
}

vdnn_status vdnn_cuda_describe_op(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const vdnn_op_desc *d,
                                  vdnn_op_algo *algos, int *n, bool *derived, vdnn_error *err)
{
    if (n) *n = 0;
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "describing a GPU: this vdnn was built without the CUDA backend");
}

vdnn_status vdnn_cuda_describe_offline(const vdnn_cuda_options *opt, int cc_major, int cc_minor, const char *name,
                                       vdnn_device_info *out, vdnn_error *err)
{
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "describing a GPU: this vdnn was built without the CUDA backend");
}
