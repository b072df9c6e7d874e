/* Writing a file all at once or not at all: write PATH.tmp, then rename it over PATH. */
#ifndef VDNN_PLAN_OUTFILE_H
#define VDNN_PLAN_OUTFILE_H

#include <stdio.h>

#include "core/error.h"

typedef struct vdnn_outfile {
    FILE *f;
    char path[4096];
    char tmp[4104];
} vdnn_outfile;

/* Opens PATH.tmp for writing. */
vdnn_status vdnn_outfile_open(vdnn_outfile *o, const char *path, vdnn_error *err);
/* Closes and renames it to PATH; on any write error removes it and leaves PATH as it was. */
vdnn_status vdnn_outfile_commit(vdnn_outfile *o, vdnn_error *err);
/* Closes and removes it (after a failure of the caller's own). */
void vdnn_outfile_abort(vdnn_outfile *o);

#endif
