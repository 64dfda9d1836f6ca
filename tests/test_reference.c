/* Tests of the fp64 reference of problem 1 (check/reference.c) against
 * values worked out by hand: the order dropout -> softmax backward with s over
 * every column -> mask; p == 0 never reading dropout_mask; the mask shared by
 * the heads of a batch row; row ranges writing only their rows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "reference.h"

#define EPS 1e-12

/* One 1x1x3x3 case with p = 0.5, row 0 by hand:
 *   grad_output = [1, 2, 3], p_attn = [0.5, 0.25, 0.25]
 *   dropout_mask = [1, 0, 1] -> g' = [1*2, 0, 3*2] = [2, 0, 6]
 *   s = 0.5*2 + 0.25*0 + 0.25*6 = 2.5   (column 2 counts though it is masked)
 *   d = [0.5*(2-2.5), 0.25*(0-2.5), 0.25*(6-2.5)] = [-0.25, -0.625, 0.875]
 *   mask = [1, 1, 0] -> grad_scores = [-0.25, -0.625, 0]
 * Had s skipped the masked column it would be 1 and d[0] = +0.5.
 * Row 1: grad_output = [4, 0, -2], p_attn = [0.2, 0.3, 0.5], dropout = [1, 1, 1]
 *   g' = [8, 0, -4]; s = 1.6 + 0 - 2 = -0.4
 *   d = [0.2*8.4, 0.3*0.4, 0.5*(-3.6)] = [1.68, 0.12, -1.8]; mask [0, 1, 1] -> [0, 0.12, -1.8]
 * Row 2: every mask false -> all zero whatever the inputs. */
static const float go3[9] = {1, 2, 3, 4, 0, -2, 7, 8, 9};
static const float pa3[9] = {0.5f, 0.25f, 0.25f, 0.2f, 0.3f, 0.5f, 0.1f, 0.2f, 0.7f};
static const uint8_t dm3[9] = {1, 0, 1, 1, 1, 1, 0, 1, 0};
static const uint8_t mk3[9] = {1, 1, 0, 0, 1, 1, 0, 0, 0};

static void test_hand_case_with_dropout(void **state) {
    (void)state;
    double out[9];
    ref_softmax_dropout_bwd(1, 1, 3, go3, pa3, mk3, dm3, 0.5, 0, 3, out);
    const double want[9] = {-0.25, -0.625, 0, 0, 0.3f * 0.4, 0.5 * -3.6, 0, 0, 0};
    for (int k = 0; k < 9; k++)
        assert_true(fabs(out[k] - want[k]) < 1e-6); /* p_attn is fp32: 0.2f, 0.3f are inexact */
    assert_true(fabs(out[0] - -0.25) < EPS);        /* row 0 is exact in binary */
    assert_true(fabs(out[1] - -0.625) < EPS);
    assert_true(out[0] < 0); /* s over all columns: +0.5 if the masked one were left out */
}

/* p == 0, by hand on row 0: g' = [1, 2, 3]; s = 0.5 + 0.5 + 0.75 = 1.75;
 * d = [0.5*(-0.75), 0.25*0.25, 0.25*1.25] = [-0.375, 0.0625, 0.3125]; mask [1,1,0]. */
static void test_p_zero_ignores_dropout_mask(void **state) {
    (void)state;
    double a[9], b[9];
    const uint8_t zeros[9] = {0}; /* would zero every gradient if it were read */
    ref_softmax_dropout_bwd(1, 1, 3, go3, pa3, mk3, NULL, 0.0, 0, 3, a);
    ref_softmax_dropout_bwd(1, 1, 3, go3, pa3, mk3, zeros, 0.0, 0, 3, b);
    assert_memory_equal(a, b, sizeof a);
    assert_true(fabs(a[0] - -0.375) < EPS);
    assert_true(fabs(a[1] - 0.0625) < EPS);
    assert_true(a[2] == 0.0);
}

/* B=2, H=2, T=2, p=0: p_attn = [0.5, 0.5] and grad_output = [4(r+1), 0] on row
 * r give s = 2(r+1) and d = [r+1, -(r+1)] before the mask. The mask is
 * [B,1,T,T]: per batch row, the same for both heads. */
static void test_mask_shared_by_heads(void **state) {
    (void)state;
    float go[16], pa[16];
    for (int r = 0; r < 8; r++) {
        go[2 * r] = 4.0f * (float)(r + 1);
        go[2 * r + 1] = 0.0f;
        pa[2 * r] = pa[2 * r + 1] = 0.5f;
    }
    const uint8_t mk[8] = {1, 0, 0, 1, /* b = 0: i=0 keeps col 0, i=1 keeps col 1 */
                           1, 1, 0, 0}; /* b = 1: i=0 keeps both, i=1 none */
    double out[16];
    ref_softmax_dropout_bwd(2, 2, 2, go, pa, mk, NULL, 0.0, 0, 8, out);
    for (int r = 0; r < 8; r++) {
        int b = r / 4, i = r % 2;
        for (int j = 0; j < 2; j++) {
            double d = j == 0 ? r + 1 : -(r + 1);
            double want = mk[(b * 2 + i) * 2 + j] ? d : 0.0;
            assert_true(fabs(out[2 * r + j] - want) < EPS);
        }
    }
}

/* A row range writes its rows and nothing else; the single-row call agrees. */
static void test_row_range_and_single_row(void **state) {
    (void)state;
    double out[9], row[3];
    for (int k = 0; k < 9; k++)
        out[k] = 12345.0;
    ref_softmax_dropout_bwd(1, 1, 3, go3, pa3, mk3, dm3, 0.5, 1, 2, out);
    for (int k = 0; k < 3; k++) {
        assert_true(out[k] == 12345.0);
        assert_true(out[6 + k] == 12345.0);
    }
    ref_softmax_dropout_bwd_row(1, 1, 3, go3, pa3, mk3, dm3, 0.5, 1, row);
    assert_memory_equal(row, out + 3, sizeof row);
    assert_true(fabs(row[2] - -1.8) < 1e-6);
}

/* Dropout scaling on its own: one column, p = 0.2, all kept: g' = 5/0.8 = 6.25,
 * p_attn = 1 -> s = 6.25 and d = 0 (softmax of one element has no gradient);
 * with two equal columns and the second dropped: g' = [6.25, 0], p = [0.5, 0.5],
 * s = 3.125, d = [1.5625, -1.5625]. */
static void test_dropout_scale(void **state) {
    (void)state;
    const float go1[1] = {5}, pa1[1] = {1};
    const uint8_t one[2] = {1, 1}, dm[2] = {1, 0};
    double out1[1];
    ref_softmax_dropout_bwd_row(1, 1, 1, go1, pa1, one, one, 0.2, 0, out1);
    assert_true(fabs(out1[0]) < EPS);
    const float go2[4] = {5, 5, 5, 5}, pa2[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    double out2[2];
    ref_softmax_dropout_bwd_row(1, 1, 2, go2, pa2, one, dm, 0.2, 0, out2);
    assert_true(fabs(out2[0] - 1.5625) < 1e-12);
    assert_true(fabs(out2[1] + 1.5625) < 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_case_with_dropout),
        cmocka_unit_test(test_p_zero_ignores_dropout_mask),
        cmocka_unit_test(test_mask_shared_by_heads),
        cmocka_unit_test(test_row_range_and_single_row),
        cmocka_unit_test(test_dropout_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
