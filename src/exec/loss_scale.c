/* The dynamic loss scale's state machine (exec/loss_scale.h). */
#include "exec/loss_scale.h"

#include <math.h>

void vdnn_loss_scaler_init(vdnn_loss_scaler *s, float init)
{
    *s = (vdnn_loss_scaler){.scale = init,
                            .growth = VDNN_LOSS_SCALE_GROWTH,
                            .backoff = VDNN_LOSS_SCALE_BACKOFF,
                            .interval = VDNN_LOSS_SCALE_INTERVAL};
}

bool vdnn_loss_scaler_step(vdnn_loss_scaler *s, bool finite)
{
    if (!finite) {
        s->scale *= s->backoff;
        s->good = 0;
        s->skipped++;
        return false;
    }
    s->applied++;
    if (++s->good >= s->interval) {
        const float grown = s->scale * s->growth;
        if (isfinite(grown)) s->scale = grown;
        s->good = 0;
    }
    return true;
}
