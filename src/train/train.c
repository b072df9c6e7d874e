/* The training loop: batches from a loader, the learning-rate schedule, progress lines, evaluation and checkpoints. */
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "plan/simulate.h"

vdnn_train_options vdnn_train_options_default(void)
{
    return (vdnn_train_options){.epochs = 2, .lr = 0.05, .lr_schedule = "cosine", .log_every = 100, .evaluate = true};
}

vdnn_status vdnn_train_schedule(const vdnn_train_options *o, long total, vdnn_lr_schedule *out, vdnn_error *err)
{
    if (!(o->lr > 0 && o->lr <= 100))
        return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "lr: %g is out of range (more than 0, at most 100)", o->lr);
    vdnn_status rc = vdnn_lr_parse(o->lr_schedule ? o->lr_schedule : "constant", out, err);
    if (rc != VDNN_OK) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return vdnn_fail(err, rc, "lr_schedule: %.900s", why);
    }
    out->base_lr = o->lr;
    out->total_steps = total;
    return VDNN_OK;
}

void vdnn_train_report(const vdnn_train_options *o, long step, long total, long per_epoch, double loss,
                       const vdnn_lr_schedule *lr, double images_per_sec, double elapsed_s)
{
    if (!o->progress) return;
    vdnn_progress p = {.step = step, .total = total, .epoch = (double)step / (double)per_epoch, .loss = loss,
                       .lr = vdnn_lr_at(lr, step - 1), .images_per_sec = images_per_sec, .elapsed_s = elapsed_s};
    o->progress(o->progress_ctx, &p);
}

vdnn_status vdnn_train_check_data(const vdnn_net_t *net, const vdnn_dataset_t *ds, vdnn_error *err)
{
    if (!ds) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "no dataset given");
    const vdnn_graph_t *g = vdnn_net_graph(net);
    const vdnn_shape in = g->input;
    /* The loader hands labels_per labels per sample and the loss reads one per row: they must agree. */
    const size_t want = vdnn_graph_labels_per_sample(g);
    if ((size_t)ds->labels_per != want && (ds->labels_per == 1 || want == 1))
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %s, but the net %s", ds->source,
                         ds->labels_per == 1 ? "one label per image" : "one target per token",
                         want == 1 ? "classifies whole images (give it images)"
                                   : "predicts every token of a sequence (give it --data text:FILE or tokens:FILE)");
    if (ds->labels_per > 1 && ds->h != in.h)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: sequences of %d tokens but the net takes %d (set --seq-len)",
                         ds->source, ds->h, in.h);
    if (ds->c != in.c || ds->h != in.h || ds->w != in.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: images are %dx%dx%d but the net takes %dx%dx%d", ds->source, ds->c, ds->h,
                         ds->w, in.c, in.h, in.w);
    if (ds->classes > g->classes)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %d classes but the net has %d outputs", ds->source, ds->classes,
                         g->classes);
    return VDNN_OK;
}

vdnn_status vdnn_net_evaluate(vdnn_net_t *net, const vdnn_dataset_t *ds, double *accuracy, double *loss,
                              vdnn_error *err)
{
    vdnn_status sc = vdnn_train_check_data(net, ds, err);
    if (sc != VDNN_OK) return sc;
    vdnn_loader *ld = NULL;
    const int n_max = vdnn_net_graph(net)->input.n;
    vdnn_status rc = vdnn_loader_create(ds, n_max < ds->count ? n_max : ds->count, false, 0, &ld, err);
    long correct = 0, seen = 0;
    double loss_sum = 0;
    int batches = rc == VDNN_OK ? vdnn_loader_batches_per_epoch(ld) : 0;
    for (int b = 0; rc == VDNN_OK && b < batches; b++) {
        const float *x;
        const int32_t *y;
        int n, ok = 0;
        double ls = 0;
        rc = vdnn_loader_next(ld, &x, &y, &n, err);
        if (rc == VDNN_OK) rc = vdnn_net_eval_batch(net, x, y, n, &ok, &ls, err);
        correct += ok;
        loss_sum += ls;
        seen += (long)n * ds->labels_per; /* eval_batch counts tokens for text: per-token means */
    }
    vdnn_loader_free(ld);
    if (rc == VDNN_OK) {
        if (accuracy) *accuracy = seen ? (double)correct / (double)seen : 0.0;
        if (loss) *loss = seen ? loss_sum / (double)seen : 0.0;
    }
    return rc;
}

vdnn_status vdnn_train_run(vdnn_net_t *net, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                           const vdnn_train_options *o, vdnn_train_result *r, vdnn_error *err)
{
    memset(r, 0, sizeof *r);
    r->test_accuracy = -1;
    if (!o) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "train: no options given");
    if (o->epochs < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "epochs: %d is out of range (0 and more)", o->epochs);
    if (o->steps < 0) return vdnn_fail(err, VDNN_ERR_INVALID_ARG, "steps: %ld is out of range (0 and more)", o->steps);
    const int batch = vdnn_net_options_of(net)->batch; /* a step's images (the graph's batch is one micro-batch's) */
    vdnn_loader *ld = NULL;
    vdnn_status rc = vdnn_train_check_data(net, train, err);
    if (rc == VDNN_OK && test) rc = vdnn_train_check_data(net, test, err);
    if (rc == VDNN_OK) rc = vdnn_loader_create(train, batch, true, vdnn_net_options_of(net)->seed, &ld, err);
    if (rc != VDNN_OK) return rc;
    const long per_epoch = vdnn_loader_batches_per_epoch(ld);
    const long total = o->steps > 0 ? o->steps : (long)o->epochs * per_epoch;
    vdnn_lr_schedule lr;
    rc = vdnn_train_schedule(o, total, &lr, err);
    const int log_every = o->log_every > 0 ? o->log_every : 100;
    long step = (long)vdnn_net_step(net);
    if (rc == VDNN_OK) rc = vdnn_loader_seek(ld, step, err);
    vdnn_timeline *recorded = NULL;
    if (rc == VDNN_OK && o->record_last) {
        *o->record_last = NULL;
        recorded = calloc(1, sizeof *recorded);
        if (!recorded) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    }

    double t0 = vdnn_now_seconds(), train_time = 0, window_loss = 0;
    long window_n = 0;
    long n_times = 0;
    double *times = malloc(sizeof(double) * (size_t)(total > step ? total - step : 1));
    if (!times && rc == VDNN_OK) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    while (rc == VDNN_OK && step < total) {
        const float *x;
        const int32_t *y;
        int n;
        rc = vdnn_loader_next(ld, &x, &y, &n, err);
        if (rc != VDNN_OK) break;
        double t1 = vdnn_now_seconds();
        float loss = 0;
        if (recorded && step == total - 1) vdnn_net_record(net, recorded);
        rc = vdnn_net_train_step(net, x, y, (float)vdnn_lr_at(&lr, step), &loss, err);
        vdnn_net_record(net, NULL);
        double dt = vdnn_now_seconds() - t1;
        train_time += dt;
        if (r->steps_run > 0) times[n_times++] = dt;
        if (rc != VDNN_OK) break;
        step = (long)vdnn_net_step(net);
        r->steps_run++;
        window_loss += loss;
        window_n++;
        bool epoch_end = step % per_epoch == 0;
        if (epoch_end) vdnn_net_set_position(net, step, step / per_epoch);
        if (step % log_every == 0 || step == total || epoch_end) {
            r->final_loss = window_loss / (double)window_n;
            vdnn_train_report(o, step, total, per_epoch, r->final_loss, &lr, (double)(r->steps_run * batch) / train_time,
                              vdnn_now_seconds() - t0);
            window_loss = 0;
            window_n = 0;
        }
        if (o->save_path && (epoch_end || step == total)) rc = vdnn_net_save(net, o->save_path, err);
    }
    vdnn_loader_free(ld);
    r->step_seconds = vdnn_median(times, n_times);
    free(times);
    if (rc == VDNN_OK && window_n) r->final_loss = window_loss / (double)window_n;
    r->steps = step;
    r->train_seconds = train_time;
    r->images_per_sec = train_time > 0 ? (double)(r->steps_run * batch) / train_time : 0;
    if (rc == VDNN_OK && o->evaluate && test) rc = vdnn_net_evaluate(net, test, &r->test_accuracy, &r->test_loss, err);
    r->elapsed_seconds = vdnn_now_seconds() - t0;
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    r->peak_device_bytes = st.peak_device_bytes;
    if (rc == VDNN_OK && recorded) {
        *o->record_last = recorded;
        recorded = NULL;
    }
    vdnn_timeline_free(recorded);
    return rc;
}
