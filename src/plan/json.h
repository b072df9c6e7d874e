/* A small JSON reader (a tree of values) for the profile files and the tests that check written traces. */
#ifndef VDNN_PLAN_JSON_H
#define VDNN_PLAN_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

typedef enum vdnn_json_type {
    VDNN_JSON_NULL,
    VDNN_JSON_BOOL,
    VDNN_JSON_NUMBER,
    VDNN_JSON_STRING,
    VDNN_JSON_ARRAY,
    VDNN_JSON_OBJECT
} vdnn_json_type;

typedef struct vdnn_json vdnn_json;
struct vdnn_json {
    vdnn_json_type type;
    int line, col;       /* where the value starts in the text, for messages */
    bool boolean;
    double number;
    char *string;        /* NUL-terminated; \u0000 is refused */
    int n;               /* array items or object members */
    vdnn_json *items;
    char **keys;         /* object member names, parallel to items */
};

/* Parses one JSON value (and nothing after it but white space). Errors name source:line:col. */
vdnn_status vdnn_json_parse(const char *text, size_t len, const char *source, vdnn_json **out, vdnn_error *err);
/* Reads and parses a file (at most 256 MiB). */
vdnn_status vdnn_json_read_file(const char *path, vdnn_json **out, vdnn_error *err);
void vdnn_json_free(vdnn_json *v);

/* The member `key` of an object, or NULL (also when v is not an object). */
const vdnn_json *vdnn_json_get(const vdnn_json *v, const char *key);

/* Writes s as a JSON string literal. */
void vdnn_json_write_string(FILE *f, const char *s);

#endif
