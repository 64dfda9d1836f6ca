/* GPU test of problem 1: every workload of the shipped suite sol066_workload
 * and a set of awkward shapes (T = 1, odd T, T past every suite, odd heads and
 * batches, p = 0 and p > 0, one case past 2^31 elements) run on the device and
 * checked against the fp64 reference under the public acceptance rule, with
 * fresh inputs each run. Exits 77 (skipped) where no CUDA device can be used.
 * ATTNBWD_SEED=<n> replays a run (the seed is printed); ATTNBWD_TEST_CASES=
 * "FROM-TO" runs the cases of those indices (printed first on each line). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gpu_test.h"
#include "suite.h"

static suite_case make_case(int64_t B, int64_t H, int64_t T, double p) {
    suite_case c;
    memset(&c, 0, sizeof c);
    c.shape.problem = ATTNBWD_SOFTMAX_DROPOUT_BWD;
    c.shape.batch = B;
    c.shape.heads = H;
    c.shape.seq_len = T;
    c.shape.dropout = p > 0.0;
    c.p_dropout = p;
    c.atol = c.rtol = 1e-5;
    c.match_ratio = 0.99;
    snprintf(c.name, sizeof c.name, "extra B=%lld H=%lld T=%lld p=%g", (long long)B, (long long)H, (long long)T, p);
    return c;
}

int main(void) {
    const gpu_test_cases chosen = gpu_test_cases_chosen();
    uint64_t seed = gpu_test_begin();

    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load("sol066_workload", &cases, &n) != ATTNBWD_OK) {
        fprintf(stderr, "FAIL: suite sol066_workload: %s\n", attnbwd_last_error());
        return 1;
    }
    if (n != 16) {
        fprintf(stderr, "FAIL: suite sol066_workload has %zu cases, want 16\n", n);
        return 1;
    }
    const suite_case extra[] = {
        make_case(1, 1, 1, 0.0),      make_case(2, 3, 1, 0.1),      make_case(1, 1, 2, 0.0),
        make_case(3, 5, 3, 0.1),      make_case(1, 1, 4, 0.2),      make_case(2, 3, 17, 0.2),
        make_case(1, 7, 31, 0.0),     make_case(5, 1, 32, 0.05),    make_case(1, 3, 33, 0.1),
        make_case(1, 7, 127, 0.0),    make_case(3, 1, 129, 0.15),   make_case(2, 3, 1000, 0.05),
        make_case(1, 1, 1023, 0.0),   make_case(1, 2, 1025, 0.1),   make_case(1, 3, 4097, 0.1),
        make_case(1, 2, 8192, 0.0),   make_case(1, 1, 8193, 0.1),   make_case(1, 1, 16384, 0.1),
        make_case(1, 1, 16384, 0.0),  make_case(7, 9, 61, 0.3),     make_case(1, 2, 32800, 0.1),
    };
    const size_t nextra = sizeof extra / sizeof extra[0];
    suite_case *all = realloc(cases, (n + nextra) * sizeof *all);
    if (!all) {
        free(cases);
        return 1;
    }
    memcpy(all + n, extra, sizeof extra);
    n += nextra;

    attnbwd_ctx *ctx = NULL;
    attnbwd_status st = attnbwd_open(NULL, &ctx);
    if (st != ATTNBWD_OK) {
        fprintf(stderr, "FAIL: attnbwd_open: %s: %s\n", attnbwd_status_name(st), attnbwd_last_error());
        free(all);
        return 1;
    }

    int failures = 0;
    size_t ran = 0;
    for (size_t k = 0; k < n; k++) {
        if (!gpu_test_case_in(&chosen, k)) continue;
        ran++;
        check_result r;
        double t0 = gpu_test_now();
        st = check_case(ctx, &all[k], seed + k, &r);
        double dt = gpu_test_now() - t0;
        if (st != ATTNBWD_OK) {
            printf("%3zu %-44s ERROR %s: %s\n", k, all[k].name, attnbwd_status_name(st), r.message);
            failures++;
            continue;
        }
        printf("%3zu %-44s %s max_abs_err %.3g match %.6f (%zu compared, %zu NaN/Inf) %.1f s\n", k, all[k].name,
               r.pass ? "PASS" : "FAIL", r.max_abs_err, r.match_fraction, r.compared, r.nonfinite, dt);
        if (!r.pass) {
            printf("    %s\n", r.message);
            failures++;
        }
        fflush(stdout);
    }
    attnbwd_close(ctx);
    free(all);
    printf("%d of %zu cases failed\n", failures, ran);
    if (!ran) {
        printf("FAIL: ATTNBWD_TEST_CASES left no case to run\n");
        return 1;
    }
    return failures ? 1 : 0;
}
