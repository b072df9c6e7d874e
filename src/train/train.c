/* The training loop: batches from a loader, the learning-rate schedule, progress lines, evaluation and checkpoints. */
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

#include "core/timing.h"

vdnn_status vdnn_train_save(vdnn_net_t *net, const char *path, vdnn_error *err)
{
    vdnn_checkpoint ck;
    vdnn_status rc = vdnn_net_export(net, &ck, err);
    if (rc == VDNN_OK) rc = vdnn_checkpoint_write(path, &ck, err);
    vdnn_checkpoint_release(&ck);
    return rc;
}

vdnn_status vdnn_train_resume(vdnn_net_t *net, const char *path, vdnn_error *err)
{
    vdnn_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    vdnn_status rc = vdnn_checkpoint_read(path, &ck, err);
    if (rc == VDNN_OK) rc = vdnn_net_import(net, &ck, path, err);
    vdnn_checkpoint_release(&ck);
    return rc;
}

static vdnn_status check_shape(const vdnn_net_t *net, const vdnn_dataset_t *ds, vdnn_error *err)
{
    const vdnn_shape in = net->g->input;
    if (ds->c != in.c || ds->h != in.h || ds->w != in.w)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: images are %dx%dx%d but the net takes %dx%dx%d", ds->source, ds->c, ds->h,
                         ds->w, in.c, in.h, in.w);
    if (ds->classes > net->g->classes)
        return vdnn_fail(err, VDNN_ERR_SHAPE, "%s: %d classes but the net has %d outputs", ds->source, ds->classes,
                         net->g->classes);
    return VDNN_OK;
}

vdnn_status vdnn_evaluate(vdnn_net_t *net, const vdnn_dataset_t *ds, double *accuracy, double *loss, vdnn_error *err)
{
    vdnn_status sc = check_shape(net, ds, err);
    if (sc != VDNN_OK) return sc;
    vdnn_loader *ld = NULL;
    vdnn_status rc = vdnn_loader_create(ds, net->g->input.n < ds->count ? net->g->input.n : ds->count, false, 0, &ld, err);
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
        seen += n;
    }
    vdnn_loader_free(ld);
    if (rc == VDNN_OK) {
        *accuracy = seen ? (double)correct / (double)seen : 0.0;
        if (loss) *loss = seen ? loss_sum / (double)seen : 0.0;
    }
    return rc;
}

vdnn_status vdnn_train_run(vdnn_net_t *net, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                           const vdnn_train_options *o, vdnn_train_result *r, vdnn_error *err)
{
    memset(r, 0, sizeof *r);
    r->test_accuracy = -1;
    const int batch = net->cfg.batch; /* a step's images (the graph's batch is one micro-batch's) */
    vdnn_loader *ld = NULL;
    vdnn_status rc = check_shape(net, train, err);
    if (rc == VDNN_OK && test) rc = check_shape(net, test, err);
    if (rc == VDNN_OK) rc = vdnn_loader_create(train, batch, true, net->cfg.seed, &ld, err);
    if (rc != VDNN_OK) return rc;
    const long per_epoch = vdnn_loader_batches_per_epoch(ld);
    const long total = o->steps > 0 ? o->steps : (long)o->epochs * per_epoch;
    vdnn_lr_schedule lr = o->lr;
    lr.total_steps = total;
    const int log_every = o->log_every > 0 ? o->log_every : 100;
    rc = vdnn_loader_seek(ld, (long)net->step, err);

    double t0 = vdnn_now_seconds(), train_time = 0, window_loss = 0;
    long window_n = 0;
    long n_times = 0;
    double *times = malloc(sizeof(double) * (size_t)(total > net->step ? total - net->step : 1));
    if (!times) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    while (rc == VDNN_OK && net->step < total) {
        const float *x;
        const int32_t *y;
        int n;
        rc = vdnn_loader_next(ld, &x, &y, &n, err);
        if (rc != VDNN_OK) break;
        double t1 = vdnn_now_seconds();
        float loss = 0;
        if (o->record_last && net->step == total - 1) net->rec.tl = o->record_last;
        rc = vdnn_net_train_step(net, x, y, (float)vdnn_lr_at(&lr, (long)net->step), &loss, err);
        net->rec.tl = NULL;
        double dt = vdnn_now_seconds() - t1;
        train_time += dt;
        if (r->steps_run > 0) times[n_times++] = dt;
        if (rc != VDNN_OK) break;
        r->steps_run++;
        window_loss += loss;
        window_n++;
        if (net->step % per_epoch == 0) net->epoch = net->step / per_epoch;
        bool epoch_end = net->step % per_epoch == 0;
        if (o->log && (net->step % log_every == 0 || net->step == total || epoch_end)) {
            fprintf(o->log, "step %ld/%ld  epoch %.2f  loss %.4f  lr %.5f  %.1f img/s  elapsed %.1fs\n",
                    (long)net->step, total, (double)net->step / (double)per_epoch, window_loss / (double)window_n,
                    vdnn_lr_at(&lr, (long)net->step - 1), (double)(r->steps_run * batch) / train_time,
                    vdnn_now_seconds() - t0);
            fflush(o->log);
            r->final_loss = window_loss / (double)window_n;
            window_loss = 0;
            window_n = 0;
        }
        if (o->save_path && (epoch_end || net->step == total)) rc = vdnn_train_save(net, o->save_path, err);
    }
    vdnn_loader_free(ld);
    r->step_seconds = vdnn_median(times, n_times);
    free(times);
    if (rc != VDNN_OK) return rc;
    if (window_n) r->final_loss = window_loss / (double)window_n;
    r->steps = (long)net->step;
    r->train_seconds = train_time;
    r->images_per_sec = train_time > 0 ? (double)(r->steps_run * batch) / train_time : 0;
    if (o->evaluate && test) {
        rc = vdnn_evaluate(net, test, &r->test_accuracy, &r->test_loss, err);
        if (rc != VDNN_OK) return rc;
    }
    r->elapsed_seconds = vdnn_now_seconds() - t0;
    r->peak_device_bytes = net->arena.high_water;
    return VDNN_OK;
}
