/* Shape and type checks of the ops every backend validates the same way, so all backends refuse the same descriptions. */
#ifndef VDNN_BACKEND_OP_CHECK_H
#define VDNN_BACKEND_OP_CHECK_H

#include "backend/backend.h"

/* Inputs of equal batch and spatial size whose channels add up to the output's. */
vdnn_status vdnn_op_check_concat(const vdnn_op_desc *d, vdnn_error *err);
/* Inputs shaped exactly like the output. */
vdnn_status vdnn_op_check_add(const vdnn_op_desc *d, vdnn_error *err);
/* a and b are values of vdnn_dtype (VDNN_ERR_INVALID_ARG naming `what` otherwise); pass a twice for one type. */
vdnn_status vdnn_op_check_dtypes(vdnn_dtype a, vdnn_dtype b, const char *what, vdnn_error *err);

#endif
