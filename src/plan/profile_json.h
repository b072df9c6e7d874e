/* Inside the profile file code: the reader's checked getters, shared by the file's parts (profile_json.c: times and
 * the link; profile_json_ops.c: the device and the op info). Errors name file:line:col. */
#ifndef VDNN_PLAN_PROFILE_JSON_H
#define VDNN_PLAN_PROFILE_JSON_H

#include <stdio.h>

#include "plan/json.h"
#include "plan/profile.h"

typedef struct vdnn_pjson_reader {
    const char *path;
    vdnn_error *err;
} vdnn_pjson_reader;

vdnn_status vdnn_pjson_missing(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key);
vdnn_status vdnn_pjson_wrong(const vdnn_pjson_reader *r, const vdnn_json *v, const char *key, const char *what);
/* The member key of obj, of type t (what: how the message says it must be). */
vdnn_status vdnn_pjson_get(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, vdnn_json_type t,
                           const char *what, const vdnn_json **out);
/* A number >= 0 (rate: > 0). */
vdnn_status vdnn_pjson_num(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, bool rate, double *out);
/* A whole number from 0 to max. */
vdnn_status vdnn_pjson_int(const vdnn_pjson_reader *r, const vdnn_json *obj, const char *key, double max, double *out);

/* The largest integer a double holds exactly: larger ones were rounded on the way in. */
#define VDNN_PJSON_MAX_INT 9007199254740992.0

/* Writing (p checked by the caller): the device description and op type, written after "measured"; a layer's
 * kind and shape, after its name; its candidates, last. */
void vdnn_profile_write_device(FILE *f, const vdnn_profile *p);
void vdnn_profile_write_layer_shape(FILE *f, const vdnn_profile *p, int l);
void vdnn_profile_write_layer_ops(FILE *f, const vdnn_profile *p, int l);

/* Reading: the device description and op type (optional: older files and estimates have none); a layer's kind and
 * shape, checked against g where present; its candidates (all layers or none). */
vdnn_status vdnn_profile_read_device(const vdnn_pjson_reader *r, const vdnn_json *root, vdnn_profile *p);
vdnn_status vdnn_profile_check_layer_shape(const vdnn_pjson_reader *r, const vdnn_json *ly, const vdnn_graph_t *g, int l);
vdnn_status vdnn_profile_read_layer_ops(const vdnn_pjson_reader *r, const vdnn_json *ly, vdnn_profile *p, int l);

#endif
