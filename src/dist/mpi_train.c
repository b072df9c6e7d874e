/* The distributed training loop: shared shuffled global batches, each group's share, a pipeline's GPipe
 * steps, progress lines and checkpoints from world rank 0. */
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"

#include "dist/dist.h"

/* One training step of this rank on the global batch (x, y). */
static vdnn_status train_step(vdnn_dist_t *w, const float *x, const int32_t *y, const int32_t *zeros, float lr,
                        float *loss, vdnn_error *err)
{
    const int b = w->opt.batch;
    const size_t img = (size_t)w->full->input.c * (size_t)w->full->input.h * (size_t)w->full->input.w;
    const float *in = x + (size_t)w->group * (size_t)b * img;
    /* A sequence model's samples carry a label per token. */
    const size_t per = vdnn_graph_labels_per_sample(w->full);
    const int32_t *labels = w->stage == w->stages - 1 ? y + (size_t)w->group * (size_t)b * per : zeros;
    if (w->pipe) {
        vdnn_status rc = w->tie ? vdnn_tie_begin_step(w->tie, err) : VDNN_OK;
        if (rc == VDNN_OK) rc = vdnn_pipe_train_step(w->pipe, in, labels, lr, loss, err);
        if (rc == VDNN_OK && w->tie) rc = vdnn_tie_end_step(w->tie, err);
        return rc;
    }
    return vdnn_net_train_step(w->net, in, labels, lr, loss, err);
}

vdnn_status vdnn_dist_train_run(vdnn_dist_t *w, const vdnn_dataset_t *train, const vdnn_dataset_t *test,
                                const vdnn_dist_run_options *ro, vdnn_train_result *r, vdnn_error *err)
{
    const vdnn_train_options *o = &ro->train;
    memset(r, 0, sizeof *r);
    r->test_accuracy = -1;
    vdnn_net_t *net = w->net;
    const int batch = w->global_batch;
    const bool talk = w->comm.rank == 0;
    vdnn_loader *ld = NULL;
    vdnn_status rc = vdnn_loader_create(train, batch, true, w->seed, &ld, err);
    if (rc != VDNN_OK) return rc;
    const long per_epoch = vdnn_loader_batches_per_epoch(ld);
    const long total = o->steps > 0 ? o->steps : (long)o->epochs * per_epoch;
    vdnn_lr_schedule lr;
    rc = vdnn_train_schedule(o, total, &lr, err);
    const int log_every = o->log_every > 0 ? o->log_every : 100;
    long step = (long)vdnn_net_step(net);
    if (rc == VDNN_OK) rc = vdnn_loader_seek(ld, step, err);
    int32_t *zeros = calloc((size_t)w->opt.batch, sizeof *zeros);
    double *times = malloc(sizeof(double) * (size_t)(total > step ? total - step : 1));
    if (rc == VDNN_OK && (!zeros || !times)) rc = vdnn_fail(err, VDNN_ERR_NO_MEMORY, "out of memory");
    double t0 = vdnn_now_seconds(), train_time = 0, window_loss = 0;
    long window_n = 0, n_times = 0;
    while (rc == VDNN_OK && step < total) {
        const float *x;
        const int32_t *y;
        int n;
        rc = vdnn_loader_next(ld, &x, &y, &n, err);
        if (rc != VDNN_OK) break;
        double t1 = vdnn_now_seconds();
        float loss = 0;
        rc = train_step(w, x, y, zeros, (float)vdnn_lr_at(&lr, step), &loss, err);
        double dt = vdnn_now_seconds() - t1;
        train_time += dt;
        if (r->steps_run > 0) times[n_times++] = dt;
        if (rc != VDNN_OK) break;
        step = (long)vdnn_net_step(net);
        r->steps_run++;
        window_loss += loss;
        window_n++;
        if (ro->after_step) ro->after_step(ro->ctx, step, w->comm.rank);
        bool epoch_end = step % per_epoch == 0;
        if (epoch_end) vdnn_net_set_position(net, step, step / per_epoch);
        if (step % log_every == 0 || step == total || epoch_end) {
            /* The model's loss lives on the last stages: average it over the groups. */
            double sum[2] = {window_loss, (double)window_n};
            rc = vdnn_comm_allreduce(&w->comm, w->comm.world, sum, 2, MPI_DOUBLE, MPI_SUM, "the loss", err);
            if (rc != VDNN_OK) break;
            r->final_loss = sum[0] / (sum[1] / w->stages);
            if (talk)
                vdnn_train_report(o, step, total, per_epoch, r->final_loss, &lr, (double)(r->steps_run * batch) / train_time,
                                  vdnn_now_seconds() - t0);
            window_loss = 0;
            window_n = 0;
        }
        if (o->save_path && (epoch_end || step == total)) rc = vdnn_dist_save(w, o->save_path, err);
    }
    vdnn_loader_free(ld);
    free(zeros);
    r->step_seconds = vdnn_median(times, n_times);
    free(times);
    if (rc != VDNN_OK) return rc;
    r->steps = step;
    r->train_seconds = train_time;
    r->images_per_sec = train_time > 0 ? (double)(r->steps_run * batch) / train_time : 0;
    if (o->evaluate && test) {
        rc = vdnn_dist_evaluate(w, test, &r->test_accuracy, &r->test_loss, err);
        if (rc != VDNN_OK) return rc;
    }
    /* The largest device arena of any rank, and the slowest rank's throughput. */
    vdnn_net_stats st;
    vdnn_net_get_stats(net, &st);
    double peak[2] = {(double)st.peak_device_bytes, -r->images_per_sec};
    rc = vdnn_comm_allreduce(&w->comm, w->comm.world, peak, 2, MPI_DOUBLE, MPI_MAX, "the memory peaks", err);
    r->peak_device_bytes = (size_t)peak[0];
    r->images_per_sec = -peak[1];
    r->elapsed_seconds = vdnn_now_seconds() - t0;
    return rc;
}
