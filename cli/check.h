/* The GPU check and timing harness, shared by `attnbwd check`, `attnbwd
 * bench`-style timing and the GPU tests.
 *
 * check: fresh random inputs drawn as the spec says (seeded), the output
 * poisoned with NaN before the launch, the kernel run once on a stream, the
 * result compared with the fp64 CPU reference under the public acceptance
 * rule (|out-ref| <= atol + rtol*|ref| for >= match_ratio of elements, no
 * NaN/Inf, every element written). Very large cases compare a sample of rows
 * against the reference but still scan every element for NaN/Inf/poison.
 *
 * time: cold L2 before each iteration (a 2x-L2 buffer is zeroed), 10 warm-ups,
 * median of `iters` launches, device time from CUDA events around the kernel. */
#ifndef ATTNBWD_CHECK_H
#define ATTNBWD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "attnbwd.h"
#include "suite.h"

typedef struct check_result {
    int pass;
    size_t elements;          /* elements of the output */
    size_t compared;          /* elements compared with the reference */
    size_t failed;            /* compared elements outside the tolerance */
    size_t nonfinite;         /* NaN or Inf anywhere in the output */
    double max_abs_err, max_rel_err;
    double match_fraction;    /* (compared - failed) / compared */
    double median_us;         /* filled by check_time, else 0 */
    double gbytes_per_s;      /* floor bytes / median time, filled by check_time */
    char message[256];        /* why it failed, or a one-line summary */
} check_result;

/* 0 when a CUDA device can be used by the harness, else -1 with why. */
int check_gpu_available(char *why, size_t why_len);

/* Check one case with the kernel ctx gives for it. Returns ATTNBWD_OK when the
 * check could run (r->pass says whether it passed), an error otherwise. */
attnbwd_status check_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);

/* Time one case (median of iters, cold L2), filling r->median_us and
 * r->gbytes_per_s. Inputs are random, as for check_case. */
attnbwd_status check_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, check_result *r);

/* Bytes that must move for a case (the spec's floor). */
double check_floor_bytes(const suite_case *c);

#endif
