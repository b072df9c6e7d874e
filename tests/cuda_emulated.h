/* A CUDA backend whose ops run their host code over host memory, with the CUDA runtime, cuBLAS and the kernels
 * emulated in C (cuda_emulated.c): for test_ops_emulated on machines without a GPU. */
#ifndef VDNN_TEST_CUDA_EMULATED_H
#define VDNN_TEST_CUDA_EMULATED_H

#include "backend/backend.h"

/* The backend: op entries from cuda_ops_table.c, memory from malloc; compute capability 9.0, TF32 off, the largest
 * tensor tensor_values values (0: cuDNN's limit). */
vdnn_status vt_cuda_emulated_create(vdnn_backend_t **out, size_t tensor_values, vdnn_error *err);

#endif
