/* Pieces shared by the dataset readers and the loader: a small seeded RNG and internal constructors. */
#ifndef VDNN_TRAIN_DATA_INTERNAL_H
#define VDNN_TRAIN_DATA_INTERNAL_H

#include <stdint.h>

#include "train/data.h"

/* Refuse any IDX/CIFAR payload larger than this many bytes: a header claiming more
 * is corrupt, and it keeps a damaged file from asking for gigabytes. */
#define VDNN_DATA_MAX_BYTES 100000000ULL

/* splitmix64: tiny, good enough for shuffles and synthetic noise, and identical on
 * every platform, which is what makes orders reproducible. */
static inline uint64_t vdnn_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Combines a seed with a stream number (epoch, split, ...) into an independent seed. */
static inline uint64_t vdnn_rng_mix(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL);
    vdnn_rng_next(&s);
    return vdnn_rng_next(&s);
}

/* Uniform integer in [0, n); the modulo bias is negligible for n far below 2^64. */
static inline uint64_t vdnn_rng_below(uint64_t *state, uint64_t n)
{
    return vdnn_rng_next(state) % n;
}

/* Allocates a dataset with room for count images of c*h*w floats. */
vdnn_status vdnn_dataset_alloc(int count, int c, int h, int w, int classes, vdnn_dataset_t **out, vdnn_error *err);

/* The synthetic split described at vdnn_dataset_open. */
vdnn_status vdnn_synthetic_open(vdnn_shape shape, int classes, uint64_t seed, vdnn_split split,
                                vdnn_dataset_t **out, vdnn_error *err);

/* text:FILE (data_text.c): the file's bytes as tokens in sequences of seq_len, each token's target the next byte; the
 * last tenth of the bytes is the test split. */
/* A whole file's bytes (kind names the spec in messages: "text", "tokens"); *buf is the caller's to free. */
vdnn_status vdnn_text_read_file(const char *kind, const char *path, unsigned char **buf, size_t *len, vdnn_error *err);
/* text:DIR: the directory's regular files without NUL bytes, in name order, concatenated (data_text_dir.c). */
vdnn_status vdnn_text_read_dir(const char *dir, unsigned char **buf, size_t *len, vdnn_error *err);
vdnn_status vdnn_text_open(const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out, vdnn_error *err);
/* tokens:FILE: llm.c's .bin token files (a 256-int32 header: magic 20240520, version 1, count; uint16 ids). */
vdnn_status vdnn_tokens_open(const char *path, int seq_len, vdnn_split split, vdnn_dataset_t **out, vdnn_error *err);

/* Reads and concatenates a split's CIFAR-10 batch files from dir (3x32x32 CHW pixels). */
vdnn_status vdnn_cifar_read_split(const char *dir, vdnn_split split, int *count, uint8_t **pixels,
                                  uint8_t **labels, vdnn_error *err);

#endif
