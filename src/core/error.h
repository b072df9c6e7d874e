/* Filling vdnn_error reports, and small size/parsing helpers shared by all modules. */
#ifndef VDNN_CORE_ERROR_H
#define VDNN_CORE_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vdnn/vdnn.h"

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

/* Parses "123", "64KiB", "3MiB", "1.5GiB", "2GB" (decimal), "unlimited" (-> SIZE_MAX).
 * Returns false on anything else. */
bool vdnn_parse_size(const char *s, size_t *out);

/* Parses a strict integer / float (whole string must be consumed). */
bool vdnn_parse_int(const char *s, long *out);
bool vdnn_parse_float(const char *s, double *out);

/* Formats bytes as "12.3 MiB" into buf. */
const char *vdnn_format_bytes(size_t bytes, char *buf, size_t len);

#endif
