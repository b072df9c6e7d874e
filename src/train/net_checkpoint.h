/* A net's parameters, optimizer state and position as checkpoint tensors, and checkpoint files of nets. */
#ifndef VDNN_TRAIN_NET_CHECKPOINT_H
#define VDNN_TRAIN_NET_CHECKPOINT_H

#include "exec/net.h"
#include "train/checkpoint.h"

/* Copies every parameter, statistic and momentum to host tensors, with the step, epoch and seed (caller releases
 * with vdnn_checkpoint_release). */
vdnn_status vdnn_net_export(vdnn_net_t *net, vdnn_checkpoint *ck, vdnn_error *err);
/* Loads them back; VDNN_ERR_MISMATCH (naming `path`) for another model or a tensor missing or of another size. */
vdnn_status vdnn_net_import(vdnn_net_t *net, const vdnn_checkpoint *ck, const char *path, vdnn_error *err);

#endif
