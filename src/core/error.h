/* Filling vdnn_error reports, and small size/parsing helpers shared by all modules. */
#ifndef VDNN_CORE_ERROR_H
#define VDNN_CORE_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vdnn/base.h"

#if defined(__GNUC__)
#define VDNN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define VDNN_PRINTF(a, b)
#endif

/* Sets err (which may be NULL) and returns s, so callers can write
 * `return vdnn_fail(err, VDNN_ERR_IO, "%s: cannot open", path);`. */
vdnn_status vdnn_fail(vdnn_error *err, vdnn_status s, const char *fmt, ...) VDNN_PRINTF(3, 4);

/* Clears an error report to VDNN_OK with an empty message. */
void vdnn_error_clear(vdnn_error *err);

#endif
