/* The start every GPU test shares: exit 77 (skipped) where no GPU can be
 * used, and a seed that ATTNBWD_SEED replays. */
#ifndef ATTNBWD_GPU_TEST_H
#define ATTNBWD_GPU_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static inline double gpu_test_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether case k of a test is in ATTNBWD_TEST_CASES, "FROM-TO" by index
 * (inclusive; either end may be left out: "40-" is 40 onward), so that a run
 * cut by a time limit resumes where it stopped. Unset: every case. */
static inline int gpu_test_case_selected(size_t k) {
    const char *env = getenv("ATTNBWD_TEST_CASES");
    if (!env || !*env) return 1;
    char *end = NULL;
    unsigned long long from = strtoull(env, &end, 10), to = ~0ull;
    if (*end == '-' && end[1]) to = strtoull(end + 1, NULL, 10);
    else if (*end != '-') to = from;
    return k >= from && k <= to;
}

/* Whether ATTNBWD_TEST_CASES leaves the run's last case in, where a test's
 * once-a-run checks (timing) go. */
static inline int gpu_test_runs_to_end(void) {
    const char *env = getenv("ATTNBWD_TEST_CASES");
    return !env || !*env || env[strlen(env) - 1] == '-';
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
