/* The start every GPU test shares: exit 77 (skipped) where no GPU can be
 * used, and a seed that ATTNBWD_SEED replays. */
#ifndef ATTNBWD_GPU_TEST_H
#define ATTNBWD_GPU_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

static inline double gpu_test_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Exits with 77 when there is no GPU; returns the run's seed, printed. */
static inline uint64_t gpu_test_begin(void) {
    char why[256];
    if (check_gpu_available(why, sizeof why) != 0) {
        printf("skipped: %s\n", why);
        exit(77);
    }
    uint64_t seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    const char *env = getenv("ATTNBWD_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    printf("seed %" PRIu64 " (ATTNBWD_SEED=%" PRIu64 " replays this run)\n", seed, seed);
    return seed;
}

#endif
