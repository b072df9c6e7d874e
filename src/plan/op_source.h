/* Where a plan's op info comes from: a live backend (its op_algos), or the candidates a profile recorded on its
 * device. Planning reads op info only through this, so a profile plans for its device on any machine. */
#ifndef VDNN_PLAN_OP_SOURCE_H
#define VDNN_PLAN_OP_SOURCE_H

#include "plan/plan.h"
#include "plan/profile.h"

typedef struct vdnn_op_source {
    vdnn_backend_t *be;        /* set: the backend answers */
    const vdnn_profile *prof;  /* otherwise: the profile's recorded candidates (prof->ops) */
} vdnn_op_source;

static inline vdnn_op_source vdnn_op_source_backend(vdnn_backend_t *be) { return (vdnn_op_source){be, NULL}; }
static inline vdnn_op_source vdnn_op_source_profile(const vdnn_profile *p) { return (vdnn_op_source){NULL, p}; }

/* Each layer's candidates (algos[0] zeroed) and, unless info is NULL, each default's info: what
 * vdnn_plan_query_algos gives for a backend. A profile answers only for what it was recorded for: the training
 * ops (evaluation: VDNN_ERR_UNSUPPORTED) of g's layers at g's batch and input and its op type (another:
 * VDNN_ERR_MISMATCH, naming what differs); one without op info is VDNN_ERR_INVALID_ARG. */
vdnn_status vdnn_op_source_algos(const vdnn_op_source *s, const vdnn_graph_t *g, bool training, vdnn_layer_algos *algos,
                                 vdnn_op_info *info, vdnn_error *err);

/* "the cuda backend", "profile (cuda: NVIDIA H100 80GB HBM3)": for messages. */
void vdnn_op_source_name(const vdnn_op_source *s, char *buf, size_t n);

#endif
