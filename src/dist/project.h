/* Time-to-train projection for data parallelism alone and for hybrid data + model parallelism (GPipe-style
 * pipelines of stages inside each data-parallel worker), from per-layer times, link bandwidths and a
 * table of epochs to converge against the global batch. No MPI here. */
#ifndef VDNN_DIST_PROJECT_H
#define VDNN_DIST_PROJECT_H

#include <stdbool.h>

#include "dist/stages.h"
#include "vdnn/project.h"
#include "plan/profile.h"

/* The epochs table, the configuration and the estimate are public (vdnn/project.h). */

/* vdnn_project_layout on a graph resolved at p's batch, input and classes. */
vdnn_status vdnn_project_estimate(const vdnn_graph_t *g, const vdnn_profile *p, const vdnn_project_config *c, int stages,
                                vdnn_layout_estimate *e, vdnn_error *err);

/* The ring all-reduce of `bytes` over n devices: 2(n-1) steps of bytes/n each. */
double vdnn_ring_allreduce_s(double bytes, int n, double bytes_per_s, double latency_s);

#endif
