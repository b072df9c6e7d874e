/* Stand-in for builds without NCCL (or without the CUDA backend): every call says NCCL is not built. */
#include "dist/nccl_comm.h"

bool vdnn_nccl_built(void) { return false; }

static vdnn_status absent(vdnn_error *err)
{
    return vdnn_fail(err, VDNN_ERR_UNSUPPORTED, "this build has no NCCL (it needs the CUDA backend and nccl.h/libnccl)");
}

vdnn_status vdnn_nccl_create(const vdnn_comm *c, MPI_Comm comm, vdnn_backend_t *be, vdnn_nccl **out, vdnn_error *err)
{
    *out = NULL;
    return absent(err);
}

void vdnn_nccl_free(vdnn_nccl *n) {}

vdnn_status vdnn_nccl_allreduce(vdnn_nccl *n, float *const *bufs, const size_t *counts, int k, const char *what,
                                vdnn_error *err)
{
    return absent(err);
}

vdnn_status vdnn_nccl_send(vdnn_nccl *n, const float *buf, size_t count, int peer, const char *what, vdnn_error *err)
{
    return absent(err);
}

vdnn_status vdnn_nccl_recv(vdnn_nccl *n, float *buf, size_t count, int peer, const char *what, vdnn_error *err)
{
    return absent(err);
}

vdnn_status vdnn_nccl_wait(vdnn_nccl *n, const char *what, vdnn_error *err) { return absent(err); }
