/* The training loop's parts that the distributed loop shares: the schedule of a run, and the check that
 * data fits a net. The loop itself and evaluation are public (vdnn/train.h). */
#ifndef VDNN_TRAIN_TRAIN_H
#define VDNN_TRAIN_TRAIN_H

#include <stdbool.h>
#include <stdio.h>

#include "exec/net.h"
#include "train/data.h"
#include "train/schedule.h"
#include "vdnn/train.h"

/* The learning-rate schedule of a run of `total` steps from o's lr and lr_schedule (errors name the field). */
vdnn_status vdnn_train_schedule(const vdnn_train_options *o, long total, vdnn_lr_schedule *out, vdnn_error *err);

/* VDNN_ERR_SHAPE unless the dataset's images and classes fit the net. */
vdnn_status vdnn_train_check_data(const vdnn_net_t *net, const vdnn_dataset_t *ds, vdnn_error *err);

/* Reports progress (when o has a callback). */
void vdnn_train_report(const vdnn_train_options *o, long step, long total, long per_epoch, double loss,
                       const vdnn_lr_schedule *lr, double images_per_sec, double elapsed_s);

#endif
