/* attnbwd_latency: what attnbwd_get_kernel costs, per public workload:
 *   cold  - Lua, NVRTC and a disk-cache write (empty cache folder)
 *   disk  - a new context finding the cubin in the disk cache (Lua renders
 *           the source to form the key; no compile)
 *   memory- a second call in the same context (median of many calls)
 * Usage: attnbwd_latency [--arch sm_90] [SUITE] (default sol066_workload). */
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

int main(int argc, char **argv) {
    const char *arch = NULL, *suite = "sol066_workload";
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) arch = argv[++i];
        else suite = argv[i];
    }
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load(suite, &cases, &n) != ATTNBWD_OK) {
        fprintf(stderr, "%s\n", attnbwd_last_error());
        return 1;
    }
    char dir[] = "/tmp/attnbwd-latency-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    enum { MEMORY_CALLS = 20001 };
    static double mem[MEMORY_CALLS];
    double sum_cold = 0, sum_disk = 0;
    printf("%-40s %10s %10s %10s\n", "workload", "cold ms", "disk us", "memory ns");
    for (size_t i = 0; i < n; ++i) {
        attnbwd_kernel *k = NULL;
        attnbwd_ctx *ctx = open_ctx(arch, dir);
        double t0 = now();
        if (attnbwd_get_kernel(ctx, &cases[i].shape, &k) != ATTNBWD_OK) {
            fprintf(stderr, "%s: %s\n", cases[i].name, attnbwd_last_error());
            return 1;
        }
        double cold = now() - t0;
        attnbwd_close(ctx);
        ctx = open_ctx(arch, dir);
        t0 = now();
        attnbwd_get_kernel(ctx, &cases[i].shape, &k);
        double disk = now() - t0;
        for (int j = 0; j < MEMORY_CALLS; ++j) {
            t0 = now();
            attnbwd_get_kernel(ctx, &cases[i].shape, &k);
            mem[j] = now() - t0;
        }
        qsort(mem, MEMORY_CALLS, sizeof mem[0], cmp_double);
        attnbwd_kernel_info info;
        attnbwd_kernel_get_info(k, &info);
        printf("%-40.40s %10.1f %10.1f %10.0f %s\n", cases[i].name, cold * 1e3, disk * 1e6,
               mem[MEMORY_CALLS / 2] * 1e9, info.origin == ATTNBWD_FROM_DISK ? "" : "(disk miss!)");
        sum_cold += cold;
        sum_disk += disk;
        attnbwd_close(ctx);
    }
    printf("mean: cold %.1f ms, disk hit %.1f us per kernel\n", sum_cold / (double)n * 1e3, sum_disk / (double)n * 1e6);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    free(cases);
    return 0;
}
