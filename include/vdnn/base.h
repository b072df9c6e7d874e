/* vdnn's base: the export macro, the version, status codes and error reports, shapes, the opaque handles, and
 * the size helpers every caller needs. */
#ifndef VDNN_BASE_H
#define VDNN_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libvdnn.so is built with hidden visibility: only what is marked VDNN_API is exported. */
#if defined(VDNN_BUILD) && defined(__GNUC__)
#define VDNN_API __attribute__((visibility("default")))
#else
#define VDNN_API
#endif

/* The version; CMake reads these three lines (one place for the number). */
#define VDNN_VERSION_MAJOR 0
#define VDNN_VERSION_MINOR 1
#define VDNN_VERSION_PATCH 0
#define VDNN_VERSION_NUMBER (VDNN_VERSION_MAJOR * 10000 + VDNN_VERSION_MINOR * 100 + VDNN_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library that is loaded (compare with the macros of the headers compiled with). */
VDNN_API const char *vdnn_version(void);

typedef enum vdnn_status {
    VDNN_OK = 0,
    VDNN_ERR_INVALID_ARG,  /* a caller passed a bad value or option */
    VDNN_ERR_PARSE,        /* a model file is malformed */
    VDNN_ERR_SHAPE,        /* shapes do not fit together */
    VDNN_ERR_IO,           /* a file could not be opened, read or written */
    VDNN_ERR_FORMAT,       /* a data or checkpoint file is truncated or corrupt */
    VDNN_ERR_NO_MEMORY,    /* the system allocator failed */
    VDNN_ERR_BUDGET,       /* the plan does not fit the memory budget */
    VDNN_ERR_BACKEND,      /* a compute library reported a failure */
    VDNN_ERR_NO_DEVICE,    /* the requested device is not present */
    VDNN_ERR_UNSUPPORTED,  /* valid request that this build cannot serve */
    VDNN_ERR_MISMATCH      /* a checkpoint or profile does not belong to this model */
} vdnn_status;

/* Every fallible call returns a status and, unless err is NULL, fills this: the status again and a message
 * naming the file and line, or the option field (e.g. "memory.budget"), at fault. */
typedef struct vdnn_error {
    vdnn_status status;
    char msg[1024];
} vdnn_error;

VDNN_API const char *vdnn_status_name(vdnn_status s);

/* Batch (n), channels, height, width. */
typedef struct vdnn_shape {
    int n, c, h, w;
} vdnn_shape;

/* The largest batch and image side the library accepts (sizes beyond overflow the byte counts). */
#define VDNN_MAX_BATCH 1000000
#define VDNN_MAX_SIDE 65536

/* Opaque handles; each has a create (or open / load) and a free. */
typedef struct vdnn_graph vdnn_model_t;       /* a parsed model file; immutable */
typedef struct vdnn_backend vdnn_backend_t;   /* a compute device */
typedef struct vdnn_plan vdnn_plan_t;         /* the memory plan of one iteration */
typedef struct vdnn_profile vdnn_profile_t;   /* measured or estimated costs of a model on a device */
typedef struct vdnn_timeline vdnn_timeline_t; /* a simulated or recorded iteration */
typedef struct vdnn_net vdnn_net_t;           /* a model trained on a backend under a plan */
typedef struct vdnn_dataset vdnn_dataset_t;   /* labelled images in host memory */

/* Parses "123", "64KiB", "3MiB", "1.5GiB", "2GB" (decimal), "unlimited" (SIZE_MAX). False on anything else. */
VDNN_API bool vdnn_parse_size(const char *s, size_t *out);
/* Strict integer and finite number parsing: the whole string must be the number. For option values. */
VDNN_API bool vdnn_parse_int(const char *s, long *out);
VDNN_API bool vdnn_parse_float(const char *s, double *out);
/* Formats bytes as "12.3 MiB" into buf and returns buf. */
VDNN_API const char *vdnn_format_bytes(size_t bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
