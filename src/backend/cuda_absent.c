/* Stand-in CUDA backend for builds without a CUDA toolkit: reports that no GPU support was built. */
#include "backend/backend.h"

vdnn_status vdnn_backend_cuda_create(int device, int threads, vdnn_backend_t **out, vdnn_error *err)
{
    *out = NULL;
    return vdnn_fail(err, VDNN_ERR_NO_DEVICE, "no GPU: this vdnn was built without the CUDA backend");
}
