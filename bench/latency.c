/* attnbwd_latency: what attnbwd_get_kernel costs, per workload of a suite:
 *   cold   - Lua plans and renders, NVRTC compiles, the entry is written
 *            (only where the cache folder does not hold the kernel yet)
 *   disk   - a new context finding the kernel in the disk cache: the
 *            median, and the slowest, of --reps new contexts (each one's
 *            first call; opening the context is not counted)
 *   memory - a later call in the same context (median of many calls)
 * Usage: attnbwd_latency [--arch sm_90] [--cache-dir DIR] [--reps N] [SUITE]
 * (default sol066_workload; without --cache-dir a temporary folder, so every
 * kernel is compiled first). ATTNBWD_GPU_MODEL picks the tuning table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attnbwd.h"
#include "suite.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static attnbwd_ctx *open_ctx(const char *arch, const char *dir) {
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = arch;
    o.cache_dir = dir;
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(&o, &ctx) != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd_open: %s\n", attnbwd_last_error());
        exit(1);
    }
    return ctx;
}

/* Seconds of one attnbwd_get_kernel call; *origin says where the kernel came from. */
static double timed_get(attnbwd_ctx *ctx, const suite_case *c, attnbwd_kernel **k, attnbwd_origin *origin) {
    double t0 = now();
    if (attnbwd_get_kernel(ctx, &c->shape, k) != ATTNBWD_OK) {
        fprintf(stderr, "%s: %s\n", c->name, attnbwd_last_error());
        exit(1);
    }
    double t = now() - t0;
    attnbwd_kernel_info info;
    attnbwd_kernel_get_info(*k, &info);
    *origin = info.origin;
    return t;
}

enum { MEMORY_CALLS = 20001, MAX_REPS = 101 };

int main(int argc, char **argv) {
    const char *arch = NULL, *suite = "sol066_workload", *cache_dir = NULL;
    int reps = 7;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) arch = argv[++i];
        else if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc) cache_dir = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else suite = argv[i];
    }
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "--reps: 1 to %d\n", MAX_REPS);
        return 2;
    }
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load(suite, &cases, &n) != ATTNBWD_OK) {
        fprintf(stderr, "%s\n", attnbwd_last_error());
        return 1;
    }
    char tmp[] = "/tmp/attnbwd-latency-XXXXXX";
    const char *dir = cache_dir;
    if (!dir && !(dir = mkdtemp(tmp))) return 1;
    static double mem[MEMORY_CALLS], disk[MAX_REPS];
    double sum_disk = 0, worst_disk = 0;
    printf("%-40s %9s %9s %9s %10s\n", "workload", "cold ms", "disk us", "(slowest)", "memory ns");
    for (size_t i = 0; i < n; ++i) {
        attnbwd_kernel *k = NULL;
        attnbwd_origin origin;
        attnbwd_ctx *ctx = open_ctx(arch, dir);
        double cold = timed_get(ctx, &cases[i], &k, &origin);
        attnbwd_close(ctx);
        char cold_text[32] = "-";
        if (origin == ATTNBWD_FROM_COMPILE) snprintf(cold_text, sizeof cold_text, "%.1f", cold * 1e3);
        int missed = 0;
        for (int r = 0; r < reps; ++r) {
            ctx = open_ctx(arch, dir);
            disk[r] = timed_get(ctx, &cases[i], &k, &origin);
            missed |= origin != ATTNBWD_FROM_DISK;
            if (r < reps - 1) attnbwd_close(ctx);
        }
        qsort(disk, (size_t)reps, sizeof disk[0], cmp_double);
        for (int j = 0; j < MEMORY_CALLS; ++j) {
            double t0 = now();
            attnbwd_get_kernel(ctx, &cases[i].shape, &k);
            mem[j] = now() - t0;
        }
        qsort(mem, MEMORY_CALLS, sizeof mem[0], cmp_double);
        printf("%-40.40s %9s %9.1f %9.1f %10.0f %s\n", cases[i].name, cold_text, disk[reps / 2] * 1e6,
               disk[reps - 1] * 1e6, mem[MEMORY_CALLS / 2] * 1e9, missed ? "(disk miss!)" : "");
        sum_disk += disk[reps / 2];
        if (disk[reps / 2] > worst_disk) worst_disk = disk[reps / 2];
        attnbwd_close(ctx);
    }
    printf("disk hit: mean of the medians %.1f us, largest median %.1f us (%d new contexts a workload)\n",
           sum_disk / (double)n * 1e6, worst_disk * 1e6, reps);
    if (!cache_dir) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    free(cases);
    return 0;
}
