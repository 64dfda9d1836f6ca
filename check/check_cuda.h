/* The CUDA runtime checks of the check harness (check/check*.c): a failed call
 * becomes a status with the call's purpose and CUDA's error name, and jumps
 * to the caller's `cleanup` label with `st` set. */
#ifndef ATTNBWD_CHECK_CUDA_H
#define ATTNBWD_CHECK_CUDA_H

#include <cuda_runtime.h>

#include "error.h"

static inline attnbwd_status cuda_err(cudaError_t e, const char *what) {
    attnbwd_status s = e == cudaErrorMemoryAllocation ? ATTNBWD_ERR_OUT_OF_MEMORY : ATTNBWD_ERR_CUDA;
    return err_set(s, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

#define CUDA_TRY(call, what)                                                                              \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            st = cuda_err(e_, what);                                                                      \
            goto cleanup;                                                                                 \
        }                                                                                                 \
    } while (0)

#endif
