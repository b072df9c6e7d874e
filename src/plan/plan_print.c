/* Human and JSON views of a plan: one row per feature map (and homed parameter), and the plan's memory figures. */
#include <string.h>

#include "plan/plan.h"
#include "core/error.h"

static const char *step_name(const vdnn_plan_t *p, const vdnn_graph_t *g, int s, char *buf, size_t n)
{
    if (s < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    const vdnn_step *st = &p->steps[s];
    switch (st->kind) {
    case VDNN_STEP_LOAD: snprintf(buf, n, "load"); break;
    case VDNN_STEP_FWD: snprintf(buf, n, "fwd %s", g->layers[st->layer].name); break;
    case VDNN_STEP_BWD: snprintf(buf, n, "bwd %s", g->layers[st->layer].name); break;
    case VDNN_STEP_UPDATE:
        if (st->layer > 0) snprintf(buf, n, "update %s", g->layers[st->layer].name);
        else snprintf(buf, n, "update");
        break;
    }
    return buf;
}

/* Feature maps and aux state the iteration uses, and the parameters homed in host memory. */
static bool listed(const vdnn_storage *s)
{
    return s->homed || ((s->kind == VDNN_ST_FMAP || s->kind == VDNN_ST_AUX) && s->def_step >= 0);
}

static const char *class_name(const vdnn_storage *s)
{
    return s->homed ? "offloaded" : s->streamed ? "stream" : vdnn_class_name(s->cls);
}

/* When a storage leaves the device (a homed one after its forward use, with no copy: the home has it),
 * and when the copy back starts (a homed one's for backward). */
static int out_after(const vdnn_storage *s)
{
    if (s->homed) return s->prefetch_step >= 0 ? s->home_fwd : -1;
    return s->cls == VDNN_CLASS_SWAP ? s->last_fwd_use : -1;
}
static int back_from(const vdnn_storage *s)
{
    if (s->homed) return s->prefetch_step;
    return s->cls == VDNN_CLASS_SWAP ? s->prefetch_step : -1;
}

static const char *algo_name(const vdnn_plan_t *p, int l)
{
    const char *n = p->cands[l].a[p->algo[l]].name;
    return *n ? n : "default";
}

/* Under policy um a swapped storage lives in the managed (Unified Memory) pool, not in the arena. */
static bool managed(const vdnn_plan_t *p, const vdnn_storage *s)
{
    return p->policy == VDNN_POLICY_UM && s->cls == VDNN_CLASS_SWAP;
}

int vdnn_plan_listed_count(const vdnn_plan_t *p)
{
    int n = 0;
    for (int i = 0; i < p->n_storages; i++) n += listed(&p->st[i]);
    return n;
}

vdnn_status vdnn_plan_tensor(const vdnn_plan_t *p, int i, vdnn_tensor_info *out, vdnn_error *err)
{
    int k = 0, left = i;
    for (; k < p->n_storages && (left > 0 || !listed(&p->st[k])); k++) left -= listed(&p->st[k]);
    if (i < 0 || k >= p->n_storages)
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "tensor index %d is out of range (0 to %d)", i,
                         vdnn_plan_listed_count(p) - 1);
    const vdnn_storage *s = &p->st[k];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", s->name);
    snprintf(out->kind, sizeof out->kind, "%s", vdnn_storage_kind_name(s->kind));
    snprintf(out->cls, sizeof out->cls, "%s", managed(p, s) ? "managed" : class_name(s));
    out->class_id = s->cls;
    out->layer = s->layer;
    out->bytes = s->bytes;
    step_name(p, p->g, out_after(s), out->out_after, sizeof out->out_after);
    step_name(p, p->g, back_from(s), out->back_from, sizeof out->back_from);
    step_name(p, p->g, s->homed ? s->need_step : s->first_bwd_use, out->first_use, sizeof out->first_use);
    return VDNN_OK;
}

void vdnn_plan_print_table(const vdnn_plan_t *p, const vdnn_graph_t *g, FILE *f)
{
    char a[96], b[96], c[96], x[32], y[32];
    fprintf(f, "plan for %s, batch %d, input %dx%dx%d, policy %s%s%s%s%s\n", g->name, g->input.n, g->input.c,
            g->input.h, g->input.w, vdnn_policy_name(p->policy), g->dtype ? ", maps in " : "",
            g->dtype ? vdnn_dtype_name(g->dtype) : "", p->offload_params ? ", parameters offloaded to host memory" : "",
            vdnn_plan_streamed_layers(p) ? ", convolution inputs streamed through host memory (class stream)" : "");
    fprintf(f, "%-34s %14s %-7s %-26s %-26s %-26s\n", "tensor", "bytes", "class", "last forward use",
            "prefetch starts", "first backward use");
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!listed(s)) continue;
        fprintf(f, "%-34s %14zu %-7s %-26s %-26s %-26s\n", s->name, s->bytes, managed(p, s) ? "managed" : class_name(s),
                step_name(p, g, s->homed ? s->home_fwd : s->last_fwd_use, a, sizeof a),
                step_name(p, g, back_from(s), b, sizeof b),
                step_name(p, g, s->homed ? s->need_step : s->first_bwd_use, c, sizeof c));
    }
    if (p->offload_params)
        fprintf(f, "\npersistent (statistics, labels, loss; parameters and momentum offloaded): %s\n"
                   "parameters' homes:     %s (%zu bytes of the host pool)\n",
                vdnn_format_bytes(p->persistent_bytes, x, sizeof x), vdnn_format_bytes(p->home_bytes, y, sizeof y),
                p->home_bytes);
    else
        fprintf(f, "\npersistent (weights, gradients, momentum, statistics): %s\n",
                vdnn_format_bytes(p->persistent_bytes, x, sizeof x));
    fprintf(f, "peak device memory:    %s (%zu bytes)\n", vdnn_format_bytes(p->peak_device_bytes, x, sizeof x),
            p->peak_device_bytes);
    fprintf(f, "largest live total:    %s (%zu bytes; the rest of the peak is fragmentation)\n",
            vdnn_format_bytes(p->max_live_bytes, x, sizeof x), p->max_live_bytes);
    fprintf(f, "average device memory: %s (%zu bytes, averaged over the %d steps of an iteration)\n",
            vdnn_format_bytes(p->avg_device_bytes, x, sizeof x), p->avg_device_bytes, p->n_steps);
    fprintf(f, "host pool:             %s (%zu bytes)\n", vdnn_format_bytes(p->host_bytes, x, sizeof x), p->host_bytes);
    if (p->policy == VDNN_POLICY_UM)
        fprintf(f, "managed pool:          %s (%zu bytes of Unified Memory: the storages classed 'managed', each at\n"
                   "                       its own range, offloaded and prefetched by cudaMemPrefetchAsync; not in the peak)\n",
                vdnn_format_bytes(p->managed_bytes, x, sizeof x), p->managed_bytes);
    fprintf(f, "moved per iteration:   %s (%zu bytes, both directions)\n", vdnn_format_bytes(p->bytes_moved, x, sizeof x),
            p->bytes_moved);
    if (p->req.memory.budget != SIZE_MAX)
        fprintf(f, "budget:                %s: %s\n", vdnn_format_bytes(p->req.memory.budget, y, sizeof y),
                p->feasible ? "fits" : "does NOT fit");
    int other = 0;
    for (int l = 1; l < p->n_layers; l++) {
        if (!p->algo[l]) continue;
        if (!other++) fprintf(f, "algorithms other than the default:");
        fprintf(f, " %s %s (workspace %zu/%zu bytes)", g->layers[l].name, algo_name(p, l), p->info[l].fwd_ws_bytes,
                p->info[l].bwd_ws_bytes);
    }
    if (other)
        fprintf(f, "\n%s\n", vdnn_plan_algos_change_numerics(p)
                                 ? "  (these round differently: results match in-core training up to float rounding; "
                                   "memory.conv_algo default keeps them bit-identical)"
                                 : "  (same results as the defaults, bit for bit)");
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

void vdnn_plan_print_json(const vdnn_plan_t *p, const vdnn_graph_t *g, size_t min_budget, FILE *f)
{
    char a[96], b[96];
    fprintf(f, "{\"model\": ");
    json_string(f, g->name);
    fprintf(f, ", \"batch\": %d, \"input\": \"%dx%dx%d\", \"policy\": \"%s\", \"precision\": \"%s\", "
               "\"feasible\": %s, ",
            g->input.n, g->input.c, g->input.h, g->input.w, vdnn_policy_name(p->policy), vdnn_dtype_name(g->dtype),
            p->feasible ? "true" : "false");
    fprintf(f, "\"budget_bytes\": ");
    if (p->req.memory.budget == SIZE_MAX) fprintf(f, "null");
    else fprintf(f, "%zu", p->req.memory.budget);
    fprintf(f, ", \"peak_device_bytes\": %zu, \"avg_device_bytes\": %zu, \"persistent_bytes\": %zu, \"host_bytes\": %zu, "
               "\"managed_bytes\": %zu, \"bytes_moved\": %zu, \"min_budget_bytes\": %zu, \"offload_params\": %s, "
               "\"streamed_layers\": %d, \"home_bytes\": %zu, \"steps\": %d, \"tensors\": [",
            p->peak_device_bytes, p->avg_device_bytes, p->persistent_bytes, p->host_bytes, p->managed_bytes, p->bytes_moved,
            min_budget, p->offload_params ? "true" : "false", vdnn_plan_streamed_layers(p), p->home_bytes, p->n_steps);
    bool first = true;
    for (int i = 0; i < p->n_storages; i++) {
        const vdnn_storage *s = &p->st[i];
        if (!listed(s)) continue;
        fprintf(f, "%s{\"name\": ", first ? "" : ", ");
        json_string(f, s->name);
        fprintf(f, ", \"kind\": \"%s\", \"bytes\": %zu, \"class\": \"%s\", \"managed\": %s, \"out_after\": ",
                vdnn_storage_kind_name(s->kind), s->bytes, class_name(s), managed(p, s) ? "true" : "false");
        json_string(f, step_name(p, g, out_after(s), a, sizeof a));
        fprintf(f, ", \"back_from\": ");
        json_string(f, step_name(p, g, back_from(s), b, sizeof b));
        fputc('}', f);
        first = false;
    }
    fprintf(f, "], \"algorithms\": [");
    first = true;
    for (int l = 1; l < p->n_layers; l++) {
        if (p->cands[l].n < 2) continue;
        fprintf(f, "%s{\"layer\": ", first ? "" : ", ");
        json_string(f, g->layers[l].name);
        fprintf(f, ", \"algorithm\": ");
        json_string(f, algo_name(p, l));
        fprintf(f, ", \"candidates\": %d, \"fwd_ws_bytes\": %zu, \"bwd_ws_bytes\": %zu}", p->cands[l].n,
                p->info[l].fwd_ws_bytes, p->info[l].bwd_ws_bytes);
        first = false;
    }
    fprintf(f, "], \"algorithms_change_numerics\": %s}\n", vdnn_plan_algos_change_numerics(p) ? "true" : "false");
}
