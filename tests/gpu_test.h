/* The start every GPU test shares: exit 77 (skipped) where no GPU can be
 * used, and a seed that ATTNBWD_SEED replays. */
#ifndef ATTNBWD_GPU_TEST_H
#define ATTNBWD_GPU_TEST_H

#include <inttypes.h>
#include <stdint.h>
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

/* The cases ATTNBWD_TEST_CASES names by index, "FROM-TO" (inclusive; either
 * end may be left out: "40-" is 40 onward, "-9" up to 9; one number, that
 * case alone), so that a run cut by a time limit resumes where it stopped;
 * unset, every case. to_end: the range runs to the last case, where a test's
 * once-a-run checks (timing) go. */
typedef struct gpu_test_cases {
    size_t from, to;
    int to_end;
} gpu_test_cases;

/* A case index of n decimal digits at s (at most 9), into *out; -1 if not. */
static inline int gpu_test_index(const char *s, size_t n, size_t *out) {
    if (n == 0 || n > 9) return -1;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = 10 * v + (size_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Reads ATTNBWD_TEST_CASES once, before the GPU is looked for; a value that
 * is not a range fails the test with a message saying so (exit 1). */
static inline gpu_test_cases gpu_test_cases_chosen(void) {
    gpu_test_cases r = {0, SIZE_MAX, 1};
    const char *env = getenv("ATTNBWD_TEST_CASES");
    if (!env || !*env) return r;
    const char *dash = strchr(env, '-');
    int ok;
    if (!dash) {
        ok = gpu_test_index(env, strlen(env), &r.from) == 0;
        r.to = r.from;
        r.to_end = 0;
    } else {
        const size_t head = (size_t)(dash - env), tail = strlen(dash + 1);
        ok = (head == 0 || gpu_test_index(env, head, &r.from) == 0) &&
             (tail == 0 || gpu_test_index(dash + 1, tail, &r.to) == 0);
        r.to_end = tail == 0;
    }
    if (!ok || r.from > r.to) {
        printf("FAIL: ATTNBWD_TEST_CASES=%s: expected case indices FROM-TO, such as 40-60, 40-, -9 or 7\n", env);
        exit(1);
    }
    return r;
}

static inline int gpu_test_case_in(const gpu_test_cases *r, size_t k) { return k >= r->from && k <= r->to; }

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
