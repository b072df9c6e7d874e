/* vdnn public API: status codes, error reports and the opaque handles a caller trains with. */
#ifndef VDNN_VDNN_H
#define VDNN_VDNN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vdnn_status {
    VDNN_OK = 0,
    VDNN_ERR_INVALID_ARG,  /* a caller passed a bad value or flag */
    VDNN_ERR_PARSE,        /* a model file is malformed */
    VDNN_ERR_SHAPE,        /* shapes do not fit together */
    VDNN_ERR_IO,           /* a file could not be opened, read or written */
    VDNN_ERR_FORMAT,       /* a data or checkpoint file is truncated or corrupt */
    VDNN_ERR_NO_MEMORY,    /* the system allocator failed */
    VDNN_ERR_BUDGET,       /* the plan does not fit the memory budget */
    VDNN_ERR_BACKEND,      /* a compute library reported a failure */
    VDNN_ERR_NO_DEVICE,    /* the requested device is not present */
    VDNN_ERR_UNSUPPORTED,  /* valid request that this build cannot serve */
    VDNN_ERR_MISMATCH      /* a checkpoint does not belong to this model */
} vdnn_status;

/* Every fallible call fills one of these: the status and a message that
 * names the file and line or the flag at fault. */
typedef struct vdnn_error {
    vdnn_status status;
    char msg[1024];
} vdnn_error;

const char *vdnn_status_name(vdnn_status s);

/* Opaque handles. */
typedef struct vdnn_graph vdnn_graph_t;     /* a parsed model: layers as a DAG */
typedef struct vdnn_backend vdnn_backend_t; /* a compute device */
typedef struct vdnn_plan vdnn_plan_t;       /* a memory plan for one iteration */
typedef struct vdnn_net vdnn_net_t;         /* graph + backend + plan + parameters */
typedef struct vdnn_dataset vdnn_dataset_t; /* a source of labelled images */

typedef struct vdnn_shape {
    int n, c, h, w;
} vdnn_shape;

#ifdef __cplusplus
}
#endif
#endif
