/* Reference data written by PyTorch scripts (tests/reference/make_reference.py, tests/data/onnx/make_torchvision.py)
 * in the VDNNREF1 format that tests/reference/README.md describes: named float32, int32 and uint64 arrays. */
#ifndef VDNN_TEST_REF_FILE_H
#define VDNN_TEST_REF_FILE_H

#include <stddef.h>

enum { VT_REF_F32 = 1, VT_REF_I32 = 2, VT_REF_U64 = 3 };

typedef struct vt_ref_array {
    char name[160];
    int dtype;
    int ndim;
    size_t dims[5];
    size_t count;
    void *data; /* float, int32_t or uint64_t, host order */
} vt_ref_array;

typedef struct vt_ref_file {
    int n, cap;
    vt_ref_array *a;
} vt_ref_file;

/* Reads a whole file, failing the test on a damaged one. */
void vt_ref_load(const char *path, vt_ref_file *rf);
void vt_ref_free(vt_ref_file *rf);
/* The array of that name, or NULL. */
vt_ref_array *vt_ref_find(vt_ref_file *rf, const char *name);
/* The array of that name, dtype and element count; fails the test otherwise. */
vt_ref_array *vt_ref_get(vt_ref_file *rf, const char *name, int dtype, size_t count);
static inline float *vt_ref_f32(vt_ref_file *rf, const char *name, size_t count)
{
    return vt_ref_get(rf, name, VT_REF_F32, count)->data;
}

#endif
