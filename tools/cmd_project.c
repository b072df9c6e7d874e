/* `vdnn project`: projected time to train with data parallelism alone and with hybrid data + model
 * parallelism at given device counts, from a profile (or estimate), link bandwidths and an epochs table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_planning.h"

static const char project_usage[] =
    "usage: vdnn project MODEL --devices N[,N...] --epochs-table FILE [--batch B] [--input CxHxW] [--classes N]\n"
    "                    [--profile FILE | estimate flags] [--stages K[,K...]] [--micro-batches M]\n"
    "                    [--allreduce-bandwidth BW] [--allreduce-latency S] [--p2p-bandwidth BW]\n"
    "                    [--p2p-latency S] [--bucket SIZE] [--dataset-size N] [--json]\n"
    "Projects the time to train MODEL on N devices as data parallelism alone (N workers of one device) and\n"
    "as hybrids (N/K workers of K pipelined stages each, K in --stages; default every power of two up to\n"
    "N that the model can be cut into), and says which layout wins and by how much.\n"
    "  step time   per-layer times from the profile, measured at --batch (the batch of one worker; default\n"
    "              64), scaled linearly to micro-batches; stages balanced over the places where one tensor\n"
    "              alone crosses; GPipe schedule with --micro-batches M (default 4) and activations sent\n"
    "              at --p2p-bandwidth (default 25GB/s, latency 5e-6 s); gradients summed by ring\n"
    "              all-reduce over the workers at --allreduce-bandwidth per device (default 10GB/s,\n"
    "              latency 1e-5 s per ring step) in --bucket buckets (default 25MiB) overlapping backward\n"
    "  epochs      from --epochs-table: lines 'GLOBAL_BATCH EPOCHS' (epochs to reach the target accuracy),\n"
    "              interpolated in log2(batch); beyond the last row, extrapolated (marked '*')\n"
    "  time        epochs x ceil(--dataset-size / global batch) steps (default 1281167, ImageNet-1k); for a\n"
    "              sequence model the samples are sequences of the model's context (or --seq-len) tokens\n"
    "  sharing     a tied output projection (tie=) in another stage than its embedding keeps a copy of the\n"
    "              table, whose gradients the two stages exchange each step over the stage link\n"
    "BW takes GB/s or MB/s suffixes (decimal).\n";

static bool parse_bw(const char *s, double *out)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    size_t n = strlen(buf);
    if (n > 2 && !strcmp(buf + n - 2, "/s")) buf[n - 2] = '\0';
    size_t v;
    double d;
    if (vdnn_parse_float(buf, &d) && d > 0) {
        *out = d;
        return true;
    }
    if (!vdnn_parse_size(buf, &v) || v == 0 || v == SIZE_MAX) return false;
    *out = (double)v;
    return true;
}

static int parse_list(const char *s, int *out, int max, int lo, int hi)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long v;
        if (n == max || !vdnn_parse_int(tok, &v) || v < lo || v > hi) return -1;
        out[n++] = (int)v;
    }
    return n;
}

static bool bad(const char *flag, const char *v, const char *what)
{
    fprintf(stderr, "vdnn project: %s: invalid value '%s' (%s)\n", flag, v, what);
    return false;
}

typedef struct project_flags {
    int devices[32], n_devices;
    int stages[16], n_stages;
    const char *table;
    vdnn_project_config c;
} project_flags;

static bool take_flags(int *argc, char **argv, project_flags *f)
{
    const char *dev = NULL, *stages = NULL, *mb = NULL, *arbw = NULL, *arlat = NULL, *pbw = NULL, *plat = NULL,
               *bucket = NULL, *ds = NULL;
    const char *names[] = {"--devices", "--stages", "--micro-batches", "--allreduce-bandwidth", "--allreduce-latency",
                           "--p2p-bandwidth", "--p2p-latency", "--bucket", "--dataset-size", "--epochs-table"};
    const char **vals[] = {&dev, &stages, &mb, &arbw, &arlat, &pbw, &plat, &bucket, &ds, &f->table};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!cli_take_flag(argc, argv, names[i], vals[i], "project")) return false;
    vdnn_project_config *c = &f->c;
    c->micro_batches = 4;
    c->allreduce_bytes_per_s = 10e9;
    c->allreduce_latency_s = 10e-6;
    c->p2p_bytes_per_s = 25e9;
    c->p2p_latency_s = 5e-6;
    c->bucket_bytes = 25u << 20;
    c->dataset_images = 1281167;
    long v;
    double d;
    if (!dev || !f->table) {
        fprintf(stderr, "vdnn project: --devices and --epochs-table are required (see vdnn project --help)\n");
        return false;
    }
    if ((f->n_devices = parse_list(dev, f->devices, 32, 1, 1 << 20)) < 1)
        return bad("--devices", dev, "device counts such as 8,16,32");
    if (stages && (f->n_stages = parse_list(stages, f->stages, 16, 1, VDNN_MAX_STAGES)) < 1)
        return bad("--stages", stages, "stage counts such as 1,2,4");
    if (mb) {
        if (!vdnn_parse_int(mb, &v) || v < 1 || v > 4096) return bad("--micro-batches", mb, "a positive integer");
        c->micro_batches = (int)v;
    }
    if (arbw && !parse_bw(arbw, &c->allreduce_bytes_per_s)) return bad("--allreduce-bandwidth", arbw, "e.g. 10GB/s");
    if (pbw && !parse_bw(pbw, &c->p2p_bytes_per_s)) return bad("--p2p-bandwidth", pbw, "e.g. 25GB/s");
    if (arlat) {
        if (!vdnn_parse_float(arlat, &d) || d < 0 || d > 1) return bad("--allreduce-latency", arlat, "seconds, e.g. 1e-5");
        c->allreduce_latency_s = d;
    }
    if (plat) {
        if (!vdnn_parse_float(plat, &d) || d < 0 || d > 1) return bad("--p2p-latency", plat, "seconds, e.g. 5e-6");
        c->p2p_latency_s = d;
    }
    if (bucket && !vdnn_parse_size(bucket, &c->bucket_bytes)) return bad("--bucket", bucket, "a size such as 25MiB");
    if (ds) {
        if (!vdnn_parse_float(ds, &d) || d < 1 || d > 1e12) return bad("--dataset-size", ds, "a number of images");
        c->dataset_images = d;
    }
    return true;
}

static const char *duration(double s, char *buf, size_t n)
{
    if (s >= 86400 * 2) snprintf(buf, n, "%.1f d", s / 86400);
    else if (s >= 3600) snprintf(buf, n, "%.2f h", s / 3600);
    else if (s >= 60) snprintf(buf, n, "%.1f min", s / 60);
    else snprintf(buf, n, "%.1f s", s);
    return buf;
}

static void layout_name(const vdnn_layout_estimate *e, char *buf, size_t n)
{
    if (e->stages == 1) snprintf(buf, n, "dp %dx1", e->workers);
    else snprintf(buf, n, "hybrid %dx%d", e->workers, e->stages);
}

/* All layouts of one device count; returns how many were estimated (-1 on error). */
static int project_devices(const vdnn_model_t *g, const vdnn_profile_t *p, project_flags *f, int devices,
                           vdnn_layout_estimate *out, int max, vdnn_error *err)
{
    int ks[VDNN_MAX_STAGES + 1], nk = 0;
    if (f->n_stages) {
        for (int i = 0; i < f->n_stages; i++) ks[nk++] = f->stages[i];
    } else {
        for (int k = 1; k <= devices && k <= VDNN_MAX_STAGES; k *= 2) ks[nk++] = k;
    }
    int n = 0;
    vdnn_project_config c = f->c;
    c.devices = devices;
    for (int i = 0; i < nk && n < max; i++) {
        int k = ks[i];
        if (devices % k || (k > 1 && c.micro_batches > c.batch)) continue;
        vdnn_error e2;
        vdnn_status rc = vdnn_project_layout(g, p, &c, k, &out[n], &e2);
        if (rc == VDNN_OK) n++;
        else if (rc == VDNN_ERR_INVALID_ARG && k > 1 && !f->n_stages) continue; /* the model has fewer cuts */
        else {
            *err = e2;
            return -1;
        }
    }
    return n;
}

static int best_of(const vdnn_layout_estimate *e, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (e[i].train_s < e[b].train_s) b = i;
    return b;
}

int vdnn_cmd_project(int argc, char **argv)
{
    if (cli_help_asked(argc, argv)) {
        fputs(project_usage, stdout);
        fputs(CLI_COST_USAGE, stdout);
        return 0;
    }
    char **args = cli_args_copy(argc, argv);
    if (!args) return 1;
    int n = argc;
    project_flags f;
    memset(&f, 0, sizeof f);
    cli_cost_options costs;
    cli_options o;
    cli_defaults(&o);
    o.model = NULL;
    bool ok = take_flags(&n, args, &f) && cli_take_cost_flags(&n, args, &costs, "project") &&
              cli_parse(n, args, 2, OPT_SHAPE | OPT_BATCH | OPT_JSON, true, &o, "project");
    free(args);
    if (!ok) return 2;
    if (!o.model) {
        fputs(project_usage, stderr);
        return 2;
    }
    f.c.batch = o.batch;
    vdnn_error err = {VDNN_OK, ""};
    vdnn_epochs_table table;
    f.c.epochs = &table;
    cli_model m;
    memset(&m, 0, sizeof m);
    o.device = "cpu";
    vdnn_status rc = vdnn_epochs_table_read(f.table, &table, &err);
    if (rc == VDNN_OK) rc = cli_model_load(&o, &costs, &m, "project", &err);
    /* Projection needs per-layer times: without a profile or estimate flags, the default estimate's. */
    if (rc == VDNN_OK && !m.prof) {
        costs.estimate_given = true;
        rc = cli_cost_profile(&costs, m.m, m.in, m.classes, &m.prof, &err);
        costs.estimate_given = false;
    }
    const vdnn_model_t *g = m.m;
    const vdnn_profile_t *prof = m.prof;
    const vdnn_shape in = m.in;
    const bool seq = rc == VDNN_OK && cli_sequence_model(g);
    char desc[512] = "", a[32], b[32];
    if (rc == VDNN_OK) cli_cost_describe(&costs, prof, desc, sizeof desc);
    if (rc == VDNN_OK && !o.json) {
        /* A sequence model's samples are sequences (--dataset-size counts them), each of in.h tokens. */
        char unit[64] = "images";
        if (seq) snprintf(unit, sizeof unit, "sequences of %d tokens", in.h);
        printf("projection for %s, input %dx%dx%d, batch %d per worker, %.0f %s per epoch\n", vdnn_model_name(g), in.c,
               in.h, in.w, f.c.batch, f.c.dataset_images, unit);
        printf("costs: %s\n", desc);
        printf("links: all-reduce %.4g GB/s per device (%.3g us per ring step), stages %.4g GB/s (%.3g us), "
               "buckets %s, %d micro-batches per hybrid step\n",
               f.c.allreduce_bytes_per_s / 1e9, f.c.allreduce_latency_s * 1e6, f.c.p2p_bytes_per_s / 1e9,
               f.c.p2p_latency_s * 1e6, vdnn_format_bytes(f.c.bucket_bytes, a, sizeof a), f.c.micro_batches);
        printf("%-8s %-14s %8s %8s %10s %10s %10s %12s %14s\n", "devices", "layout", "batch", "epochs", "step ms",
               "exposed ms", "bubble ms", seq ? "sequences/s" : "images/s", "time to train");
    }
    if (rc == VDNN_OK && o.json)
        printf("{\"model\": \"%s\", \"input\": \"%dx%dx%d\", \"batch_per_worker\": %d, \"micro_batches\": %d, "
               "\"dataset_images\": %.0f, \"results\": [",
               vdnn_model_name(g), in.c, in.h, in.w, f.c.batch, f.c.micro_batches, f.c.dataset_images);
    for (int d = 0; rc == VDNN_OK && d < f.n_devices; d++) {
        vdnn_layout_estimate est[VDNN_MAX_STAGES + 1];
        int ne = project_devices(g, prof, &f, f.devices[d], est, VDNN_MAX_STAGES + 1, &err);
        if (ne < 0) {
            rc = err.status;
            break;
        }
        if (ne == 0) {
            rc = cli_error(&err, VDNN_ERR_INVALID_ARG, "no layout of the --stages counts divides %d devices", f.devices[d]);
            break;
        }
        int bi = best_of(est, ne), dp = -1;
        for (int i = 0; i < ne; i++)
            if (est[i].stages == 1) dp = i;
        char name[32], bname[32];
        layout_name(&est[bi], bname, sizeof bname);
        if (o.json) {
            printf("%s{\"devices\": %d, \"layouts\": [", d ? ", " : "", f.devices[d]);
            for (int i = 0; i < ne; i++) {
                const vdnn_layout_estimate *e = &est[i];
                char split[1024];
                vdnn_stage_split_format(g, &e->split, split, sizeof split);
                printf("%s{\"workers\": %d, \"stages\": %d, \"global_batch\": %d, \"epochs\": %.4g, \"extrapolated\": %s, "
                       "\"step_s\": %.6g, \"compute_s\": %.6g, \"bubble_s\": %.6g, \"comm_s\": %.6g, \"exposed_s\": %.6g, "
                       "\"images_per_s\": %.6g, \"train_s\": %.6g, \"split\": \"%s\"}",
                       i ? ", " : "", e->workers, e->stages, e->global_batch, e->epochs, e->extrapolated ? "true" : "false",
                       e->step_s, e->compute_s, e->bubble_s, e->comm_s, e->exposed_s, e->images_per_s, e->train_s, split);
            }
            printf("], \"best\": {\"workers\": %d, \"stages\": %d}, \"speedup_over_dp\": ", est[bi].workers, est[bi].stages);
            if (dp >= 0) printf("%.6g}", est[dp].train_s / est[bi].train_s);
            else printf("null}");
            continue;
        }
        for (int i = 0; i < ne; i++) {
            const vdnn_layout_estimate *e = &est[i];
            layout_name(e, name, sizeof name);
            char ep[24];
            snprintf(ep, sizeof ep, "%.1f%s", e->epochs, e->extrapolated ? "*" : "");
            printf("%-8d %-14s %8d %8s %10.2f %10.2f %10.2f %12.0f %14s\n", f.devices[d], name, e->global_batch, ep,
                   e->step_s * 1e3, e->exposed_s * 1e3, e->bubble_s * 1e3, e->images_per_s,
                   duration(e->train_s, a, sizeof a));
        }
        if (dp < 0) printf("%d devices: best %s (no data-parallel layout among --stages)\n", f.devices[d], bname);
        else if (bi == dp) printf("%d devices: best %s: data parallelism alone wins\n", f.devices[d], bname);
        else
            printf("%d devices: best %s: %.2fx faster than data parallelism alone (%.1f%% less time: %s vs %s)\n",
                   f.devices[d], bname, est[dp].train_s / est[bi].train_s,
                   100.0 * (1 - est[bi].train_s / est[dp].train_s), duration(est[bi].train_s, a, sizeof a),
                   duration(est[dp].train_s, b, sizeof b));
    }
    if (rc == VDNN_OK && o.json) printf("]}\n");
    cli_model_free(&m);
    return rc == VDNN_OK ? 0 : cli_fail("project", &err);
}
