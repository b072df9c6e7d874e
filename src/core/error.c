/* Error reports and the size/number parsing every command-line flag and model file uses. */
#include "core/error.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *vdnn_status_name(vdnn_status s)
{
    switch (s) {
    case VDNN_OK: return "ok";
    case VDNN_ERR_INVALID_ARG: return "invalid argument";
    case VDNN_ERR_PARSE: return "parse error";
    case VDNN_ERR_SHAPE: return "shape error";
    case VDNN_ERR_IO: return "i/o error";
    case VDNN_ERR_FORMAT: return "bad file format";
    case VDNN_ERR_NO_MEMORY: return "out of host memory";
    case VDNN_ERR_BUDGET: return "memory budget too small";
    case VDNN_ERR_BACKEND: return "backend failure";
    case VDNN_ERR_NO_DEVICE: return "no such device";
    case VDNN_ERR_UNSUPPORTED: return "unsupported";
    case VDNN_ERR_MISMATCH: return "mismatch";
    }
    return "unknown status";
}

vdnn_status vdnn_fail(vdnn_error *err, vdnn_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = s;
    }
    return s;
}

void vdnn_error_clear(vdnn_error *err)
{
    if (err) {
        err->status = VDNN_OK;
        err->msg[0] = '\0';
    }
}

bool vdnn_parse_int(const char *s, long *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool vdnn_parse_float(const char *s, double *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

bool vdnn_parse_size(const char *s, size_t *out)
{
    if (!s || !*s) return false;
    if (!strcasecmp(s, "unlimited")) {
        *out = SIZE_MAX;
        return true;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return false;
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0},
        {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0},
        {"GB", 1e9}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcasecmp(end, units[i].suffix)) {
            double b = v * units[i].mult;
            if (b >= 18446744073709551615.0) return false;
            *out = (size_t)llround(b);
            return true;
        }
    }
    return false;
}

const char *vdnn_format_bytes(size_t bytes, char *buf, size_t len)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0) snprintf(buf, len, "%zu B", bytes);
    else snprintf(buf, len, "%.2f %s", v, u[i]);
    return buf;
}
