/* SVG charts of simulated timelines, written as plain text: device memory over an iteration (step lines on
 * shared axes) and a Gantt chart of the compute and copy lanes. */
#include "plan/svg.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plan/outfile.h"

/* Title and subtitle take the top of every chart; the legend starts below. */
#define TITLE_H 52
#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"

/* Colour-blind-safe series colours (Tableau 10 order). */
static const char *palette[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
#define PALETTE_N (int)(sizeof palette / sizeof palette[0])

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

/* Rough width of text in the chart's sans font, for layout (no font metrics in plain text). */
static double text_width(const char *s, double size) { return 0.58 * size * (double)strlen(s); }

typedef struct axis {
    double hi, step;
    int decimals;
} axis;

/* Ticks at 1, 2, 2.5 or 5 times a power of ten, about `target` of them up to `hi` (round_up: the axis
 * ends at the next tick instead). */
static axis nice_axis(double hi, int target, bool round_up)
{
    if (!(hi > 0) || !isfinite(hi)) hi = 1;
    double raw = hi / target, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
    axis a = {round_up ? ceil(hi / step - 1e-9) * step : hi, step, 0};
    while (a.decimals < 9) {
        double scaled = step * pow(10, a.decimals);
        if (fabs(scaled - round(scaled)) < 1e-6 * scaled) break;
        a.decimals++;
    }
    return a;
}

typedef struct unit {
    double bytes;
    const char *name;
} unit;

static unit memory_unit(double max_bytes)
{
    if (max_bytes >= 1.5 * 1024 * 1024 * 1024) return (unit){1024.0 * 1024 * 1024, "GiB"};
    if (max_bytes >= 1.5 * 1024 * 1024) return (unit){1024.0 * 1024, "MiB"};
    if (max_bytes >= 1.5 * 1024) return (unit){1024.0, "KiB"};
    return (unit){1, "bytes"};
}

static const char *fmt_bytes(double b, char *buf, size_t n)
{
    unit u = memory_unit(b);
    snprintf(buf, n, u.bytes == 1 ? "%.0f %s" : "%.2f %s", b / u.bytes, u.name);
    return buf;
}

static vdnn_status check_args(const char *path, const vdnn_timeline *const *tl, const char *const *names, int n,
                              vdnn_error *err)
{
    if (n < 1 || !tl || !names) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: no timeline to draw", path);
    for (int i = 0; i < n; i++)
        if (!tl[i] || !names[i]) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: timeline %d is missing", path, i);
    return VDNN_OK;
}

static void header(FILE *f, double w, double h, const char *title, const char *subtitle)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"%s\" font-size=\"12\">\n", w, h, w, h, FONT);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", w, h);
    if (title && title[0]) {
        fprintf(f, "<text x=\"%.1f\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">", w / 2);
        esc(f, title);
        fprintf(f, "</text>\n");
    }
    if (subtitle && subtitle[0]) {
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555555\">", w / 2, TITLE_H - 8);
        esc(f, subtitle);
        fprintf(f, "</text>\n");
    }
}

/* A legend laid out in rows from (x0, y) to x1; returns the y below it. Each item's swatch is drawn by
 * `swatch` (a line or a box), its text is text[i]. With f NULL it only measures. */
typedef void (*swatch_fn)(FILE *f, int i, double x, double y, const void *ctx);

static double legend(FILE *f, double x0, double x1, double y, int n, const char *const *text, swatch_fn swatch,
                     const void *ctx)
{
    double x = x0;
    for (int i = 0; i < n; i++) {
        double w = 26 + text_width(text[i], 12) + 22;
        if (x > x0 && x + w > x1) {
            x = x0;
            y += 20;
        }
        if (f) {
            swatch(f, i, x, y, ctx);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 26, y + 4);
            esc(f, text[i]);
            fprintf(f, "</text>\n");
        }
        x += w;
    }
    return y + 20;
}

/* ---- memory over time ---- */

static void line_swatch(FILE *f, int i, double x, double y, const void *ctx)
{
    (void)ctx;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", x, y, x + 20, y,
            palette[i % PALETTE_N]);
}

typedef struct frame {
    double x0, x1, y0, y1; /* plot area: x0 left, y0 top */
    axis ax, ay;
} frame;

static double fx(const frame *fr, double v) { return fr->x0 + (fr->x1 - fr->x0) * v / fr->ax.hi; }
static double fy(const frame *fr, double v) { return fr->y1 - (fr->y1 - fr->y0) * v / fr->ay.hi; }

static void grid_and_axes(FILE *f, const frame *fr, const char *xlabel, const char *ylabel)
{
    fprintf(f, "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n");
    for (int i = 0; i * fr->ax.step <= fr->ax.hi + 1e-9 * fr->ax.hi; i++)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n", fx(fr, i * fr->ax.step), fr->y0, fx(fr, i * fr->ax.step), fr->y1);
    for (int i = 0; i * fr->ay.step <= fr->ay.hi + 1e-9 * fr->ay.hi; i++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\"/>\n", fr->x0, fy(fr, i * fr->ay.step), fr->x1, fy(fr, i * fr->ay.step));
    fprintf(f, "</g>\n<g fill=\"#333333\">\n");
    for (int i = 0; i * fr->ax.step <= fr->ax.hi + 1e-9 * fr->ax.hi; i++)
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", fx(fr, i * fr->ax.step), fr->y1 + 18,
                fr->ax.decimals, i * fr->ax.step);
    for (int i = 0; i * fr->ay.step <= fr->ay.hi + 1e-9 * fr->ay.hi; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\">%.*f</text>\n", fr->x0 - 8, fy(fr, i * fr->ay.step) + 4,
                fr->ay.decimals, i * fr->ay.step);
    fprintf(f, "</g>\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#555555\"/>\n", fr->x0, fr->y0,
            fr->x1 - fr->x0, fr->y1 - fr->y0);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n", (fr->x0 + fr->x1) / 2, fr->y1 + 42,
            xlabel);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
            fr->x0 - 58, (fr->y0 + fr->y1) / 2, fr->x0 - 58, (fr->y0 + fr->y1) / 2, ylabel);
}

vdnn_status vdnn_svg_memory(const char *path, const char *title, const char *subtitle, const vdnn_timeline *const *tl, const char *const *names,
                            int n, size_t budget, vdnn_error *err)
{
    vdnn_status rc = check_args(path, tl, names, n, err);
    if (rc) return rc;
    if (n > PALETTE_N) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "%s: %d timelines; a memory chart shows at most %d", path, n, PALETTE_N);
    bool has_budget = budget != SIZE_MAX && budget != 0;
    double tmax = 0, bmax = has_budget ? (double)budget : 0;
    for (int i = 0; i < n; i++) {
        tmax = fmax(tmax, tl[i]->iteration_s);
        bmax = fmax(bmax, (double)tl[i]->peak_live_bytes);
    }
    unit u = memory_unit(bmax);
    char texts[PALETTE_N][200];
    const char *items[PALETTE_N];
    int n_items = n;
    for (int i = 0; i < n_items; i++) {
        char pk[32];
        snprintf(texts[i], sizeof texts[i], "%.120s: peak %s, %.2f ms", names[i], fmt_bytes((double)tl[i]->peak_live_bytes, pk, sizeof pk),
                 tl[i]->iteration_s * 1e3);
        items[i] = texts[i];
    }
    const double W = 1000;
    vdnn_outfile o;
    if ((rc = vdnn_outfile_open(&o, path, err))) return rc;
    FILE *f = o.f;
    double legend_end = legend(NULL, 80, W - 30, 0, n_items, items, line_swatch, NULL);
    double top = TITLE_H + 16 + legend_end, H = top + 400 + 64;
    header(f, W, H, title, subtitle);
    legend(f, 80, W - 30, TITLE_H + 14, n_items, items, line_swatch, NULL);
    frame fr = {80, W - 30, top, top + 400, nice_axis(tmax * 1e3 * 1.01, 10, false), nice_axis(bmax / u.bytes * 1.04, 8, true)};
    char ylabel[64];
    snprintf(ylabel, sizeof ylabel, "live device memory (%s)", u.name);
    grid_and_axes(f, &fr, "time in the iteration (ms)", ylabel);
    if (has_budget) {
        char b[32];
        double y = fy(&fr, (double)budget / u.bytes);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#c0392b\" stroke-width=\"1.5\" stroke-dasharray=\"7 4\"/>\n",
                fr.x0, y, fr.x1, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#c0392b\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">budget %s</text>\n", fr.x1 - 6, y - 5,
                fmt_bytes((double)budget, b, sizeof b));
    }
    for (int i = 0; i < n; i++) {
        const vdnn_timeline *t = tl[i];
        if (!t->n_mem) continue;
        /* Earlier curves are drawn wider, so that a later one equal to them leaves them visible as
         * a coloured edge (plans of different policies often coincide). */
        double width = n > 1 ? 1.5 + 1.8 * (double)(n - 1 - i) / (n - 1) : 2;
        fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"%.2f\" stroke-linejoin=\"round\" d=\"M%.2f %.2f",
                palette[i % PALETTE_N], width, fx(&fr, t->mem[0].t * 1e3), fy(&fr, (double)t->mem[0].bytes / u.bytes));
        /* Frees at the end of one step and allocations at the start of the next happen at the same
         * instant: of the samples at one time only the highest (a real peak) and the last count. */
        for (int k = 1; k < t->n_mem;) {
            size_t hi = t->mem[k].bytes;
            int e = k;
            while (e + 1 < t->n_mem && t->mem[e + 1].t == t->mem[k].t) {
                e++;
                if (t->mem[e].bytes > hi) hi = t->mem[e].bytes;
            }
            fprintf(f, " H%.2f V%.2f", fx(&fr, t->mem[k].t * 1e3), fy(&fr, (double)hi / u.bytes));
            if (hi != t->mem[e].bytes) fprintf(f, " V%.2f", fy(&fr, (double)t->mem[e].bytes / u.bytes));
            k = e + 1;
        }
        fprintf(f, "\"><title>");
        esc(f, names[i]);
        fprintf(f, "</title></path>\n");
    }
    fprintf(f, "</svg>\n");
    return vdnn_outfile_commit(&o, err);
}

/* ---- Gantt chart ---- */

typedef struct style {
    const char *fill, *text, *legend;
} style;

static const style styles[VDNN_SPAN_KIND_COUNT] = {
    [VDNN_SPAN_LOAD] = {"#9d9d9d", "#ffffff", "load / update"},
    [VDNN_SPAN_FWD] = {"#4e79a7", "#ffffff", "forward"},
    [VDNN_SPAN_BWD] = {"#f28e2b", "#ffffff", "backward"},
    [VDNN_SPAN_UPDATE] = {"#9d9d9d", "#ffffff", NULL},
    [VDNN_SPAN_ACCUM] = {"#edc948", "#000000", "accumulate"},
    [VDNN_SPAN_RECOMPUTE] = {"#b07aa1", "#ffffff", "recompute"},
    [VDNN_SPAN_D2H] = {"#59a14f", "#ffffff", "offload (device to host)"},
    [VDNN_SPAN_H2D] = {"#76b7b2", "#000000", "prefetch (host to device)"},
    [VDNN_SPAN_STALL] = {"url(#stall)", "#8b0000", "stall (waits for a copy)"},
};

static void box_swatch(FILE *f, int i, double x, double y, const void *ctx)
{
    const int *kinds = ctx;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"20\" height=\"11\" fill=\"%s\"/>\n", x, y - 6, styles[kinds[i]].fill);
}

/* Lane geometry. */
#define LANE_H 22.0
#define LANE_GAP 4.0
#define GROUP_HEAD 24.0
#define GROUP_GAP 18.0

static void gantt_span(FILE *f, const frame *fr, double lane_y, const vdnn_span *s)
{
    double x = fx(fr, s->start * 1e3), w = fx(fr, s->end * 1e3) - x;
    /* A hair of white between neighbours where there is room; never thinner than a visible sliver. */
    double dw = w > 2.5 ? w - 0.6 : fmax(w, 0.35);
    const style *st = &styles[s->kind < VDNN_SPAN_KIND_COUNT ? s->kind : VDNN_SPAN_LOAD];
    fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"%s><title>", x, lane_y, dw, LANE_H, st->fill,
            s->kind == VDNN_SPAN_STALL ? " stroke=\"#c0392b\" stroke-width=\"0.6\"" : "");
    esc(f, s->label);
    fprintf(f, ": %.3f ms, from %.3f to %.3f ms</title></rect>\n", (s->end - s->start) * 1e3, s->start * 1e3, s->end * 1e3);
    /* The colour says what kind of span it is, so the label inside drops the "fwd " prefix. */
    const char *sp = strchr(s->label, ' '), *name = sp ? sp + 1 : s->label;
    if (w > text_width(name, 9) + 6) {
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"9\" fill=\"%s\">", x + w / 2, lane_y + LANE_H / 2 + 3,
                st->text);
        esc(f, name);
        fprintf(f, "</text>\n");
    }
}

vdnn_status vdnn_svg_gantt(const char *path, const char *title, const char *subtitle, const vdnn_timeline *const *tl, const char *const *names,
                           int n, vdnn_error *err)
{
    vdnn_status rc = check_args(path, tl, names, n, err);
    if (rc) return rc;
    /* Legend entries only for kinds that occur. */
    int kinds[VDNN_SPAN_KIND_COUNT], n_kinds = 0;
    const char *items[VDNN_SPAN_KIND_COUNT];
    for (int k = 0; k < VDNN_SPAN_KIND_COUNT; k++) {
        if (!styles[k].legend) continue;
        bool seen = false;
        for (int i = 0; i < n && !seen; i++)
            for (int j = 0; j < tl[i]->n_spans && !seen; j++)
                seen = tl[i]->spans[j].kind == (vdnn_span_kind)k || (k == VDNN_SPAN_LOAD && tl[i]->spans[j].kind == VDNN_SPAN_UPDATE);
        if (!seen) continue;
        kinds[n_kinds] = k;
        items[n_kinds++] = styles[k].legend;
    }
    double tmax = 0;
    for (int i = 0; i < n; i++) tmax = fmax(tmax, tl[i]->iteration_s);
    const double W = 1200, left = 170, right = W - 30;
    vdnn_outfile o;
    if ((rc = vdnn_outfile_open(&o, path, err))) return rc;
    FILE *f = o.f;
    double legend_end = legend(NULL, left, right, 0, n_kinds, items, box_swatch, kinds);
    double top = TITLE_H + 20 + legend_end;
    double group_h = GROUP_HEAD + 3 * LANE_H + 2 * LANE_GAP;
    double bottom = top + n * group_h + (n - 1) * GROUP_GAP, H = bottom + 56;
    header(f, W, H, title, subtitle);
    fprintf(f, "<defs><pattern id=\"stall\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
               "<rect width=\"6\" height=\"6\" fill=\"#fde0dd\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d62728\" "
               "stroke-width=\"2.5\"/></pattern></defs>\n");
    legend(f, left, right, TITLE_H + 14, n_kinds, items, box_swatch, kinds);
    frame fr = {left, right, top, bottom, nice_axis(tmax * 1e3 * 1.01, 12, false), {1, 1, 0}};
    /* Time grid behind every group, labels below the last. */
    fprintf(f, "<g stroke=\"#e6e6e6\">\n");
    for (int i = 0; i * fr.ax.step <= fr.ax.hi + 1e-9 * fr.ax.hi; i++)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n", fx(&fr, i * fr.ax.step), top, fx(&fr, i * fr.ax.step), bottom + 4);
    fprintf(f, "</g>\n<g fill=\"#333333\">\n");
    for (int i = 0; i * fr.ax.step <= fr.ax.hi + 1e-9 * fr.ax.hi; i++)
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", fx(&fr, i * fr.ax.step), bottom + 20,
                fr.ax.decimals, i * fr.ax.step);
    fprintf(f, "</g>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">time in the iteration (ms)</text>\n",
            (left + right) / 2, bottom + 44);
    static const char *lane_names[3] = {"compute", "device &#8594; host", "host &#8594; device"};
    /* Each group's figures follow its name, all in one column: the plot's, unless a name is longer. */
    double figures_x = left;
    for (int i = 0; i < n; i++) figures_x = fmax(figures_x, 16 + text_width(names[i], 13) * 1.1 + 14);
    for (int i = 0; i < n; i++) {
        const vdnn_timeline *t = tl[i];
        double gy = top + i * (group_h + GROUP_GAP);
        fprintf(f, "<text x=\"16\" y=\"%.1f\" font-weight=\"bold\" font-size=\"13\">", gy + 15);
        esc(f, names[i]);
        fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#444444\">iteration %.2f ms: compute %.2f ms, stall %.2f ms; "
                   "copies busy %.2f ms out, %.2f ms in</text>\n",
                figures_x, gy + 15, t->iteration_s * 1e3, t->compute_s * 1e3, t->stall_s * 1e3, t->d2h_s * 1e3, t->h2d_s * 1e3);
        for (int l = 0; l < 3; l++) {
            double ly = gy + GROUP_HEAD + l * (LANE_H + LANE_GAP);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#333333\">%s</text>\n", left - 8, ly + LANE_H / 2 + 4,
                    lane_names[l]);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#f4f4f4\" fill-opacity=\"0.7\"/>\n", left, ly,
                    fx(&fr, t->iteration_s * 1e3) - left, LANE_H);
            for (int k = 0; k < t->n_spans; k++)
                if ((int)t->spans[k].lane == l) gantt_span(f, &fr, ly, &t->spans[k]);
        }
        /* Where the iteration ends. */
        double xe = fx(&fr, t->iteration_s * 1e3);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333333\" stroke-width=\"1.2\"/>\n", xe, gy + GROUP_HEAD - 3, xe,
                gy + group_h + 3);
    }
    fprintf(f, "</svg>\n");
    return vdnn_outfile_commit(&o, err);
}
