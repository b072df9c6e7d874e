/* vdnn's public C API, all of it: include this. The headers beside it each hold one part. */
#ifndef VDNN_VDNN_H
#define VDNN_VDNN_H

#include "vdnn/base.h"
#include "vdnn/memory.h"
#include "vdnn/model.h"
#include "vdnn/backend.h"
#include "vdnn/plan.h"
#include "vdnn/net.h"
#include "vdnn/train.h"
#include "vdnn/project.h"

#endif
