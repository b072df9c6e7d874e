/* Chrome trace-event JSON of simulated timelines, for Perfetto or chrome://tracing. */
#include <stdio.h>

#include "plan/json.h"
#include "plan/outfile.h"
#include "plan/simulate.h"

static const char *lane_names[3] = {"compute", "device-to-host", "host-to-device"};

static const char *category(vdnn_span_kind k)
{
    static const char *names[VDNN_SPAN_KIND_COUNT] = {"load", "forward", "backward", "update", "accumulate",
                                                      "recompute", "offload", "prefetch", "stall"};
    return k < VDNN_SPAN_KIND_COUNT ? names[k] : "other";
}

static void write_timeline(FILE *f, const vdnn_timeline *t, const char *name, int pid)
{
    fprintf(f, "%s\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": ", pid > 1 ? "," : "", pid);
    vdnn_json_write_string(f, name);
    fprintf(f, "}}");
    fprintf(f, ",\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"sort_index\": %d}}", pid, pid);
    for (int l = 0; l < 3; l++)
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}", pid, l,
                lane_names[l]);
    for (int i = 0; i < t->n_spans; i++) {
        const vdnn_span *s = &t->spans[i];
        fprintf(f, ",\n{\"name\": ");
        vdnn_json_write_string(f, s->label);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, ", category(s->kind), pid,
                (int)s->lane, s->start * 1e6, (s->end - s->start) * 1e6);
        /* "terrible" is one of the trace viewer's reserved colours: stalls stand out in red. */
        if (s->stall) fprintf(f, "\"cname\": \"terrible\", ");
        fprintf(f, "\"args\": {\"step\": %d, \"action\": %d}}", s->step, s->action);
    }
    for (int i = 0; i < t->n_mem; i++)
        fprintf(f, ",\n{\"name\": \"device memory\", \"ph\": \"C\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"args\": {\"MiB\": %.3f}}", pid,
                t->mem[i].t * 1e6, (double)t->mem[i].bytes / (1024.0 * 1024.0));
}

vdnn_status vdnn_trace_write(const char *path, const vdnn_timeline *const *tl, const char *const *names, int n,
                             vdnn_error *err)
{
    if (n < 1) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no timeline to write", path);
    vdnn_outfile o;
    vdnn_status rc = vdnn_outfile_open(&o, path, err);
    if (rc) return rc;
    fprintf(o.f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
    for (int i = 0; i < n; i++) write_timeline(o.f, tl[i], names[i], i + 1);
    fprintf(o.f, "\n]}\n");
    return vdnn_outfile_commit(&o, err);
}
