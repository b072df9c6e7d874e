/* Writing a file all at once or not at all, so that a failed run never leaves half a file behind. */
#include "plan/outfile.h"

#include <errno.h>
#include <string.h>

vdnn_status vdnn_outfile_open(vdnn_outfile *o, const char *path, vdnn_error *err)
{
    memset(o, 0, sizeof *o);
    if (!path || !path[0]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "output file: empty path");
    if (strlen(path) >= sizeof o->path) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%.100s...: path too long", path);
    snprintf(o->path, sizeof o->path, "%s", path);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
    o->f = fopen(o->tmp, "w");
    if (!o->f) return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot create: %s", o->tmp, strerror(errno));
    return VDNN_OK;
}

vdnn_status vdnn_outfile_commit(vdnn_outfile *o, vdnn_error *err)
{
    bool bad = ferror(o->f) != 0;
    if (fclose(o->f) != 0) bad = true;
    o->f = NULL;
    if (bad) {
        remove(o->tmp);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: write error (disk full?)", o->tmp);
    }
    if (rename(o->tmp, o->path) != 0) {
        int e = errno;
        remove(o->tmp);
        return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot rename %s to it: %s", o->path, o->tmp, strerror(e));
    }
    return VDNN_OK;
}

void vdnn_outfile_abort(vdnn_outfile *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) remove(o->tmp);
}
