/* The measured convolution candidates per layer configuration, in memory and in a file that every process on the
 * machine appends to, so that profile, plan and train agree on the algorithms and do not measure twice. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/cuda_conv_select.h"

#define CACHE_FILE "conv-algos-v1.tsv"
#define LINE_MAX_BYTES 4096

typedef struct cache_entry {
    char *key;
    int n;
    vdnn_conv_cand cands[VDNN_CONV_CANDS];
} cache_entry;

struct vdnn_conv_cache {
    char scope[512];
    char path[1024];
    cache_entry *e;
    int n, cap;
};

void vdnn_conv_cache_dir(char *buf, size_t len)
{
    const char *d = getenv("VDNN_CACHE_DIR");
    buf[0] = '\0';
    if (d) {
        if (*d && strcmp(d, "off")) snprintf(buf, len, "%s", d);
        return;
    }
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x) snprintf(buf, len, "%s/vdnn", x);
    else if (h && *h) snprintf(buf, len, "%s/.cache/vdnn", h);
}

bool vdnn_conv_cache_format(const char *scope, const char *key, const vdnn_conv_cand *cands, int n, char *line,
                            size_t len)
{
    if (n < 0 || n > VDNN_CONV_CANDS) return false;
    int w = snprintf(line, len, "%s\t%s\t%d\t", scope, key, n);
    for (int i = 0; i < n && w >= 0 && (size_t)w < len; i++) {
        const vdnn_conv_cand *c = &cands[i];
        w += snprintf(line + w, len - (size_t)w, "%s%d,%d,%.6g,%zu,%d,%d", i ? ";" : "", c->algo, (int)c->math,
                      (double)c->time_ms, c->ws, c->deterministic ? 1 : 0, c->ok ? 1 : 0);
    }
    if (w < 0 || (size_t)w + 2 > len) return false;
    line[w++] = '\n';
    line[w] = '\0';
    return true;
}

/* Copies the tab-terminated field at *p into out and moves *p past the tab. */
static bool field(const char **p, char *out, size_t len)
{
    const char *t = strchr(*p, '\t');
    if (!t || (size_t)(t - *p) >= len || t == *p) return false;
    memcpy(out, *p, (size_t)(t - *p));
    out[t - *p] = '\0';
    *p = t + 1;
    return true;
}

bool vdnn_conv_cache_parse(const char *line, char *scope, size_t scope_len, char *key, size_t key_len,
                           vdnn_conv_cand *cands, int *n)
{
    char sc[512], k[512], count[16];
    const char *p = line;
    if (!field(&p, sc, sizeof sc) || !field(&p, k, sizeof k) || !field(&p, count, sizeof count)) return false;
    long want;
    if (!vdnn_parse_int(count, &want) || want < 0 || want > VDNN_CONV_CANDS) return false;
    vdnn_conv_cand c[VDNN_CONV_CANDS];
    for (int i = 0; i < want; i++) {
        int algo, math, det, ok, used = 0;
        double t;
        unsigned long long ws;
        if (sscanf(p, "%d,%d,%lf,%llu,%d,%d%n", &algo, &math, &t, &ws, &det, &ok, &used) != 6 || used <= 0) return false;
        if (algo < 0 || algo > 63 || math < VDNN_MATH_DEFAULT || math > VDNN_MATH_FMA || (det != 0 && det != 1) ||
            (ok != 0 && ok != 1))
            return false;
        c[i] = (vdnn_conv_cand){algo, (vdnn_conv_math)math, (float)t, (size_t)ws, det == 1, ok == 1};
        p += used;
        if (i + 1 < want) {
            if (*p != ';') return false;
            p++;
        }
    }
    if (*p != '\n' && *p != '\0') return false;
    if (strlen(sc) >= scope_len || strlen(k) >= key_len) return false;
    memcpy(scope, sc, strlen(sc) + 1);
    memcpy(key, k, strlen(k) + 1);
    memcpy(cands, c, sizeof c[0] * (size_t)want);
    *n = (int)want;
    return true;
}

static cache_entry *find(vdnn_conv_cache *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key)) return &c->e[i];
    return NULL;
}

static void remember(vdnn_conv_cache *c, const char *key, const vdnn_conv_cand *cands, int n)
{
    if (find(c, key)) return; /* the first record wins: every process then reads the same choice */
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        cache_entry *e = realloc(c->e, sizeof *e * (size_t)cap);
        if (!e) return;
        c->e = e;
        c->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return;
    cache_entry *e = &c->e[c->n++];
    e->key = k;
    e->n = n;
    memcpy(e->cands, cands, sizeof cands[0] * (size_t)n);
}

/* mkdir -p; false if the directory cannot be made. */
static bool make_dirs(const char *dir)
{
    char p[1024];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return false;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) && errno != EEXIST) return false;
        *s = '/';
    }
    return !mkdir(p, 0755) || errno == EEXIST;
}

vdnn_conv_cache *vdnn_conv_cache_open(const char *dir, const char *scope)
{
    vdnn_conv_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->scope, sizeof c->scope, "%s", scope);
    for (char *s = c->scope; *s; s++)
        if (*s == '\t' || *s == '\n') *s = ' ';
    if (!dir || !*dir || !make_dirs(dir) || snprintf(c->path, sizeof c->path, "%s/%s", dir, CACHE_FILE) >= (int)sizeof c->path) {
        c->path[0] = '\0';
        return c;
    }
    FILE *f = fopen(c->path, "r");
    if (!f) return c;
    char line[LINE_MAX_BYTES], sc[512], key[512];
    vdnn_conv_cand cands[VDNN_CONV_CANDS];
    int n;
    /* Lines of other scopes, and malformed ones (a torn write, an older format), are skipped. */
    while (fgets(line, sizeof line, f))
        if (vdnn_conv_cache_parse(line, sc, sizeof sc, key, sizeof key, cands, &n) && !strcmp(sc, c->scope))
            remember(c, key, cands, n);
    fclose(f);
    return c;
}

void vdnn_conv_cache_close(vdnn_conv_cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].key);
    free(c->e);
    free(c);
}

bool vdnn_conv_cache_get(vdnn_conv_cache *c, const char *key, vdnn_conv_cand *out, int *n)
{
    const cache_entry *e = c ? find(c, key) : NULL;
    if (!e) return false;
    memcpy(out, e->cands, sizeof e->cands[0] * (size_t)e->n);
    *n = e->n;
    return true;
}

void vdnn_conv_cache_put(vdnn_conv_cache *c, const char *key, const vdnn_conv_cand *cands, int n)
{
    if (!c || find(c, key)) return;
    remember(c, key, cands, n);
    if (!c->path[0]) return;
    char line[LINE_MAX_BYTES];
    if (!vdnn_conv_cache_format(c->scope, key, cands, n, line, sizeof line)) return;
    /* One write of a whole line with O_APPEND: processes appending at once do not interleave their lines. */
    int fd = open(c->path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return;
    size_t len = strlen(line);
    if (write(fd, line, len) != (ssize_t)len) { /* a short write leaves a malformed line, which readers skip */ }
    close(fd);
}

const char *vdnn_conv_cache_path(const vdnn_conv_cache *c) { return c ? c->path : ""; }
