/* The CPU backend's description of itself for profiles: the processor's model, oneDNN's version, and the settings
 * its op info depends on. */
#include "backend/cpu/cpu_internal.h"

#include <stdio.h>
#include <string.h>

/* The first "model name" line of /proc/cpuinfo, or "" where there is none (not Linux, or a processor that does
 * not say). */
static void cpu_model(char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(buf, n, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

void vdnn_cpu_describe(vdnn_backend_t *be, vdnn_device_info *out)
{
    const cpu_backend *b = (const cpu_backend *)be;
    cpu_model(out->name, sizeof out->name);
    const dnnl_version_t *v = dnnl_version();
    snprintf(out->library, sizeof out->library, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    char chunk[32] = "default";
    if (b->opt.conv_chunk_bytes) snprintf(chunk, sizeof chunk, "%zu", b->opt.conv_chunk_bytes);
    snprintf(out->settings, sizeof out->settings, "threads=%d conv_chunk_bytes=%s bf16=%s", be->threads, chunk,
             b->bf16 ? "on" : "off");
}
