/* What the GPU checks of every problem share (check/check_<problem>.c use it;
 * check.c dispatches to them): the result of a check or a timing, the timing
 * loop, the median, the order of an A/B's rounds, the device a context's
 * kernels run on. Over the CUDA runtime API; prints nothing. */
#ifndef ATTNBWD_CHECK_COMMON_H
#define ATTNBWD_CHECK_COMMON_H

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
    char breakdown[2048];     /* check_time of problem 2: one line per kernel, slowest first */
} check_result;

/* 0 when a CUDA device can be used by the harness, else -1 with why. */
int check_gpu_available(char *why, size_t why_len);

/* The harness allocates with the CUDA runtime, on the device ctx launches on:
 * makes that device current. A failure empties r and leaves the message in it. */
attnbwd_status check_use_ctx_device(attnbwd_ctx *ctx, check_result *r);

/* The median of v[0..n-1] (n > 0), which it sorts: the middle value, or the
 * mean of the two middle ones. */
double check_median(double *v, int n);

/* The most tile choices one timing takes. */
#define CHECK_MAX_CHOICES 64
/* The order of round `round` of a timing of n choices: rounds come in pairs,
 * the second the first reversed, so that each choice's mean position is the
 * same and a drift over a round hits all alike; seed 0 takes 0..n-1 first in
 * every pair, another seed a shuffle of its own for each pair, so that an
 * effect that recurs at fixed times in a run (the GPU's clocks capped on a
 * schedule) falls on different choices in every pair and in every run. */
void check_round_order(int n, int round, uint64_t seed, int *order);

/* The timing loop shared by the problems: fn launches the work on stream s
 * (a cudaStream_t); median device time in us of `iters` launches, each after
 * a cold L2 (a 2x-L2 buffer zeroed), following 10 warm-ups. */
typedef attnbwd_status (*check_launch_fn)(void *user, void *s);
attnbwd_status check_time_launches(check_launch_fn fn, void *user, int iters, double *median_us);

/* A problem's part of the harness: check/check_<problem>.c defines one
 * (check_case and check_time_case_ex are called with r not NULL and the
 * context's device current), and check.c lists them. */
typedef struct check_problem {
    attnbwd_problem problem;
    const char *name; /* as suites, the tool and the Lua scripts spell it */
    attnbwd_status (*check)(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);
    attnbwd_status (*time)(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r);
    double (*floor_bytes)(const suite_case *c); /* bytes that must move: the spec's floor */
    double (*floor_flops)(const suite_case *c); /* its matrix work (2 per multiply-add); NULL: none counted */
} check_problem;

#endif
