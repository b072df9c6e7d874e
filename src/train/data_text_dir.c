/* text:DIR: the text files of a directory (regular files without a NUL byte, in name order) read as one text, so a
 * package's data directory (Debian's fortunes) is one corpus. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/data_internal.h"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Symlinks (fortune's .u8 aliases), subdirectories and binary files (strfile's .dat indexes) are left out. */
static vdnn_status list_files(const char *dir, char ***names, size_t *n, vdnn_error *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return vdnn_fail(err, VDNN_ERR_IO, "text:%s: cannot open the directory: %s", dir, strerror(errno));
    size_t cap = 0;
    vdnn_status st = VDNN_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        char path[4096];
        struct stat sb;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || lstat(path, &sb) != 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (*n == cap) {
            char **grown = realloc(*names, (cap = cap ? 2 * cap : 64) * sizeof *grown);
            if (!grown) {
                st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "text:%s: out of memory", dir);
                break;
            }
            *names = grown;
        }
        if (!((*names)[*n] = strdup(path))) st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "text:%s: out of memory", dir);
        else (*n)++;
    }
    closedir(d);
    if (!st && *n) qsort(*names, *n, sizeof **names, by_name);
    return st;
}

vdnn_status vdnn_text_read_dir(const char *dir, unsigned char **buf, size_t *len, vdnn_error *err)
{
    *buf = NULL;
    *len = 0;
    char **names;
    size_t n;
    vdnn_status st = list_files(dir, &names, &n, err);
    unsigned char *all = NULL;
    size_t used = 0, files = 0;
    for (size_t i = 0; !st && i < n; i++) {
        unsigned char *b;
        size_t bl;
        st = vdnn_text_read_file("text", names[i], &b, &bl, err);
        if (st) break;
        if (memchr(b, 0, bl) || bl == 0) {
            free(b);
            continue;
        }
        unsigned char *grown = realloc(all, used + bl);
        if (!grown) {
            free(b);
            st = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "text:%s: out of memory", dir);
            break;
        }
        all = grown;
        memcpy(all + used, b, bl);
        used += bl;
        files++;
        free(b);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (!st && !files)
        st = vdnn_fail(err, VDNN_ERR_FORMAT, "text:%s: the directory holds no text file (a regular file without NUL "
                       "bytes)", dir);
    if (st) {
        free(all);
        return st;
    }
    *buf = all;
    *len = used;
    return VDNN_OK;
}
