/* Backends: compute devices opened by name. */
#ifndef VDNN_BACKEND_PUBLIC_H
#define VDNN_BACKEND_PUBLIC_H

#include "vdnn/base.h"
#include "vdnn/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tri-state switches: -1 takes the environment's value, 0 off, 1 on. */
typedef struct vdnn_backend_options {
    int threads;        /* host threads; 0: every core */
    int tf32;           /* CUDA: TF32 tensor-core math in convolutions and FC (env VDNN_NO_TF32=1: off; default on) */
    int deterministic;  /* CUDA: only bitwise-reproducible algorithms, none atomic (env VDNN_DETERMINISTIC=1;
                         * default off: reproducible ones preferred, an atomic one only where none runs) */
} vdnn_backend_options;

VDNN_API vdnn_backend_options vdnn_backend_options_default(void);

/* name: "cpu"; "cuda" (GPU 0) or "cuda:N"; "auto": CUDA when a GPU is usable, else the CPU, and
 * vdnn_backend_fallback says why. A missing GPU is VDNN_ERR_NO_DEVICE with a one-line reason. */
VDNN_API vdnn_status vdnn_backend_open(const char *name, int threads, vdnn_backend_t **out, vdnn_error *err);
/* The same with every option; the memory options the device honours when opened are its emulated link
 * bandwidth (CPU). o and mem may be NULL (defaults). */
VDNN_API vdnn_status vdnn_backend_open_ex(const char *name, const vdnn_backend_options *o,
                                          const vdnn_memory_options *mem, vdnn_backend_t **out, vdnn_error *err);
/* Closes the backend; one that nets still use closes when the last of them is freed (vdnn_net_free). */
VDNN_API void vdnn_backend_free(vdnn_backend_t *be);

VDNN_API const char *vdnn_backend_name(const vdnn_backend_t *be); /* "cpu", "cuda" */
VDNN_API int vdnn_backend_threads(const vdnn_backend_t *be);
/* Free and total device bytes (SIZE_MAX on the CPU, whose device memory is host memory capped by budgets). */
VDNN_API void vdnn_backend_memory(vdnn_backend_t *be, size_t *free_bytes, size_t *total_bytes);
/* For a backend opened as "auto" that is not CUDA: why CUDA was not used. NULL otherwise. */
VDNN_API const char *vdnn_backend_fallback(const vdnn_backend_t *be);

/* What a backend runs on and the settings its ops' memory needs depend on. Profiles record it, so that a plan made
 * from one on another machine says which device it is for. Strings are "" where they do not apply. */
typedef struct vdnn_device_info {
    char backend[16];      /* "cpu", "cuda" */
    char name[128];        /* "NVIDIA H100 80GB HBM3"; the CPU's model name */
    size_t total_bytes;    /* device memory; SIZE_MAX: unlimited (the CPU's, host memory under budgets) */
    size_t free_bytes;     /* free when asked; SIZE_MAX as above */
    char compute[16];      /* CUDA compute capability, "9.0" */
    char runtime[64];      /* "CUDA runtime 13.0, driver 13.0" */
    char library[64];      /* "cuDNN 9.14.0", "oneDNN 3.6.2" */
    int tf32;              /* CUDA's switches as resolved at opening (0 or 1); -1 on backends without them */
    int deterministic;
    int benchmark;
    char settings[160];    /* the backend's other settings that change op info, "key=value" separated by spaces */
} vdnn_device_info;

/* Describes the device and its settings now (free memory changes). */
VDNN_API vdnn_status vdnn_backend_describe(vdnn_backend_t *be, vdnn_device_info *out, vdnn_error *err);

#ifdef __cplusplus
}
#endif
#endif
