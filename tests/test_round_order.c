/* Tests of the timing rounds' order (check_round_order, check/check_common.c)
 * and of the median each choice's rounds come to (check_median, check/check_common.c),
 * which the A/B harness's comparisons rest on: every round a permutation,
 * each pair's second round the first reversed (every choice's mean position
 * the same), seed 0 the given order, other seeds shuffles that differ
 * between pairs and between seeds and repeat for the same seed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "check.h"

enum { N = 17 };

static void assert_permutation(const int *order, int n) {
    int seen[CHECK_MAX_CHOICES] = {0};
    for (int i = 0; i < n; i++) {
        assert_true(order[i] >= 0 && order[i] < n);
        assert_int_equal(seen[order[i]]++, 0);
    }
}

static void seed_zero_keeps_the_order(void **state) {
    (void)state;
    int a[N], b[N];
    check_round_order(N, 0, 0, a);
    check_round_order(N, 1, 0, b);
    for (int i = 0; i < N; i++) {
        assert_int_equal(a[i], i);
        assert_int_equal(b[i], N - 1 - i);
    }
}

static void pairs_balance_every_position(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed < 40; seed++) {
        int pos_sum[N] = {0};
        for (int round = 0; round < 6; round++) {
            int o[N];
            check_round_order(N, round, seed, o);
            assert_permutation(o, N);
            for (int j = 0; j < N; j++)
                pos_sum[o[j]] += j;
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(pos_sum[i], 3 * (N - 1)); /* three pairs, positions j and N-1-j each */
    }
}

static void shuffles_differ_by_pair_and_seed(void **state) {
    (void)state;
    int p0[N], p1[N], q0[N], again[N], ident = 0;
    check_round_order(N, 0, 7, p0);
    check_round_order(N, 2, 7, p1); /* the next pair's first round */
    check_round_order(N, 0, 8, q0);
    check_round_order(N, 0, 7, again);
    assert_memory_not_equal(p0, p1, sizeof p0);
    assert_memory_not_equal(p0, q0, sizeof p0);
    assert_memory_equal(p0, again, sizeof p0);
    for (int i = 0; i < N; i++)
        ident += p0[i] == i;
    assert_true(ident < N / 2); /* shuffled, not the given order */
    int one = -1;
    check_round_order(1, 1, 7, &one);
    assert_int_equal(one, 0);
}

/* A choice's time is the median of its rounds' (check_median): the middle of
 * an odd count, the mean of the two middle of an even one, in any order. */
static void median_of_rounds(void **state) {
    (void)state;
    double odd[] = {5.0, 1.0, 4.0, 2.0, 3.0}, even[] = {9.0, 2.0, 7.0, 1.0}, one[] = {6.5};
    assert_true(check_median(odd, 5) == 3.0);
    assert_true(check_median(even, 4) == 4.5);
    assert_true(check_median(one, 1) == 6.5);
    assert_true(even[0] == 1.0 && even[3] == 9.0); /* sorted in place */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_zero_keeps_the_order),
        cmocka_unit_test(pairs_balance_every_position),
        cmocka_unit_test(shuffles_differ_by_pair_and_seed),
        cmocka_unit_test(median_of_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
