/* The memory a launch's pointers name, checked before the kernels run: a
 * wrong shape, a host pointer or another device's memory then fails with a
 * message saying which argument and why, instead of faulting on the GPU
 * (which would leave the whole CUDA context unusable) or writing past a
 * buffer. */
#ifndef ATTNBWD_POINTER_CHECK_H
#define ATTNBWD_POINTER_CHECK_H

#include <stddef.h>

#include "internal.h"

/* [p, p + bytes): what the kernels read, or (written) write, from p; the
 * argument's name as messages give it, after pointers_check's prefix. */
typedef struct arg_range {
    const char *name;
    const void *p;
    size_t bytes;
    int written;
} arg_range;

/* No written range may share a byte with another range. Then, unless
 * ctx->pointer_checks is 0 ($ATTNBWD_POINTER_CHECKS=0), each range must lie
 * in memory the context's device can reach: device memory of that device,
 * managed or pinned host memory, or any memory where the device reads
 * pageable memory (HMM, ATS); and inside the allocation (or reserved
 * address range) the driver knows it by. `shape` says the kernel's shape in
 * the message. */
attnbwd_status pointers_check(attnbwd_ctx *ctx, const arg_range *r, size_t n, const char *prefix, const char *shape);

#endif
