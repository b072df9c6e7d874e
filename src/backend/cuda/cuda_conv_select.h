/* Convolution algorithm choice without CUDA headers: which of cuDNN's candidates a layer may run (executed ones
 * only, under the TF32 / determinism / workspace settings), the three variants offered to planners, and the
 * on-disk cache of measured candidates shared by the profile, plan and train processes. */
#ifndef VDNN_BACKEND_CUDA_CONV_SELECT_H
#define VDNN_BACKEND_CUDA_CONV_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#define VDNN_CONV_CANDS 16

/* cuDNN's math types, by meaning (the enum values are the backend's business). */
typedef enum vdnn_conv_math {
    VDNN_MATH_DEFAULT = 0,   /* FP32 data may run as TF32 on tensor cores */
    VDNN_MATH_TENSOR_OP,     /* tensor cores */
    VDNN_MATH_CONVERSION,    /* tensor cores, may round FP32 data to FP16: never used */
    VDNN_MATH_FMA            /* plain FP32 arithmetic */
} vdnn_conv_math;

/* One candidate of one pass, as cuDNN reported it. */
typedef struct vdnn_conv_cand {
    int algo;
    vdnn_conv_math math;
    float time_ms;      /* measured by cudnnFind*Ex; negative when only the heuristics ranked it */
    size_t ws;          /* workspace bytes */
    bool deterministic; /* cuDNN says reproducible and it is not an algorithm documented to use atomics */
    bool ok;            /* cuDNN returned success for it (for a measured list: it ran) */
} vdnn_conv_cand;

typedef struct vdnn_conv_rules {
    bool tf32;          /* tensor-core math allowed: TF32 on fp32 data (the backend's switch), always on 16-bit data */
    bool deterministic;
    /* A reproducible candidate wherever one is usable, an atomic one only where none is (deterministic: never).
     * With cuDNN's atomic backward algorithms results differ run to run, so every memory policy gave LeNet another
     * loss after 40 steps on an H200 (cuDNN 9.14); in bf16, backward-data algorithm 0 was also 3 to 6 units in
     * the last place off an exact sum. */
    bool prefer_reproducible;
    size_t ws_limit;
} vdnn_conv_rules;

typedef enum vdnn_conv_variant {
    VDNN_CONV_FASTEST = 0, /* the first usable candidate in list order (measured: by time) */
    VDNN_CONV_LEAN,        /* the first usable one whose workspace is within the lean cap, else the least */
    VDNN_CONV_LEAST,       /* the usable one with the least workspace (first of equals) */
    VDNN_CONV_VARIANTS
} vdnn_conv_variant;

/* Whether a candidate may run under the rules; *math is the math type to set for it (DEFAULT becomes FMA when TF32
 * is off). */
bool vdnn_conv_usable(const vdnn_conv_cand *c, const vdnn_conv_rules *r, vdnn_conv_math *math);

/* The index of the variant's pick among c[0..n), or -1 if no candidate is usable (with prefer_reproducible: among
 * the reproducible ones, or among all where none is usable). */
int vdnn_conv_pick(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, vdnn_conv_variant v, size_t lean_cap);

/* The fastest usable candidate whose workspace is at most `ws_max` (-1: none). */
int vdnn_conv_pick_within(const vdnn_conv_cand *c, int n, const vdnn_conv_rules *r, size_t ws_max);

/* ---- the measured-candidate cache ---- */

typedef struct vdnn_conv_cache vdnn_conv_cache;

/* `scope` names what measured results depend on besides the layer (device, compute capability, cuDNN version,
 * TF32): only entries of the same scope are read. `dir` is the cache directory (created if missing); NULL or ""
 * keeps the cache in memory. Never fails: without a usable file the cache is memory-only. */
vdnn_conv_cache *vdnn_conv_cache_open(const char *dir, const char *scope);
void vdnn_conv_cache_close(vdnn_conv_cache *c);

/* The directory the environment asks for: $VDNN_CACHE_DIR (empty or "off": none), else $XDG_CACHE_HOME/vdnn, else
 * $HOME/.cache/vdnn. Writes "" when none. */
void vdnn_conv_cache_dir(char *buf, size_t len);

/* The cached list of `key` (a layer's configuration and pass); false if absent. */
bool vdnn_conv_cache_get(vdnn_conv_cache *c, const char *key, vdnn_conv_cand *out, int *n);

/* Records a list in memory and appends it to the file (one line, written whole). */
void vdnn_conv_cache_put(vdnn_conv_cache *c, const char *key, const vdnn_conv_cand *cands, int n);

/* The file's path ("" when memory-only). */
const char *vdnn_conv_cache_path(const vdnn_conv_cache *c);

/* One cache line and its parse, exposed for the tests. The line ends in '\n'. false: the buffer is too small, or
 * the line is malformed (then nothing is written to the outputs). */
bool vdnn_conv_cache_format(const char *scope, const char *key, const vdnn_conv_cand *cands, int n, char *line,
                            size_t len);
bool vdnn_conv_cache_parse(const char *line, char *scope, size_t scope_len, char *key, size_t key_len,
                           vdnn_conv_cand *cands, int *n);

#endif
