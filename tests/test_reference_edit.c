/* Tests of the fp64 reference of problem 2 (check/reference_edit.c):
 * the forward against a naive loop version (the qkv split order, scores,
 * softmax, dropout), the backward against central differences of
 * L = sum(output * grad_output), output = attention_output @ out_weight^T + out_bias,
 * through the double forward with the dropout mask held fixed; masked keys;
 * p == 0 (dropout mask never read); the zeros of grad_edit_region_bias
 * outside [:T,:T]; T past the position table; determinism of the drawer and
 * of the backward over thread counts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_edit.h"

#define HID REF_EDIT_HIDDEN
#define QKV REF_EDIT_QKV
#define NH REF_EDIT_HEADS
#define HD REF_EDIT_HEAD_DIM

/* One small problem: drawn inputs, the fp32 forward tensors the backward
 * reads, and the double gradients. P is the position-table size. */
typedef struct prob {
    int64_t B, T, P;
    ref_edit_inputs in;
    ref_edit_fwd32 f;
    attnbwd_edit_attention_args a;
    ref_edit_grads g;
    double *ao64; /* scratch for the double forward's attention_output */
} prob;

static void grads_alloc(prob *pb) {
    const size_t BT = (size_t)(pb->B * pb->T), P = (size_t)pb->P;
    ref_edit_grads *g = &pb->g;
    g->grad_hidden_states = malloc(BT * HID * sizeof(double));
    g->grad_qkv_weight = malloc((size_t)QKV * HID * sizeof(double));
    g->grad_qkv_bias = malloc(QKV * sizeof(double));
    g->grad_out_weight = malloc((size_t)HID * HID * sizeof(double));
    g->grad_out_bias = malloc(HID * sizeof(double));
    g->grad_edit_region_bias = malloc(NH * P * P * sizeof(double));
    g->grad_within_edit_bias = malloc(NH * sizeof(double));
    g->grad_cross_edit_bias = malloc(NH * sizeof(double));
    g->grad_qkv = malloc(BT * QKV * sizeof(double));
    assert_non_null(g->grad_hidden_states);
    assert_non_null(g->grad_edit_region_bias);
    assert_non_null(g->grad_qkv);
    /* NaN everywhere: every element the reference promises must be written */
    for (size_t i = 0; i < NH * P * P; i++)
        g->grad_edit_region_bias[i] = NAN;
}

static void grads_free(ref_edit_grads *g) {
    free(g->grad_hidden_states);
    free(g->grad_qkv_weight);
    free(g->grad_qkv_bias);
    free(g->grad_out_weight);
    free(g->grad_out_bias);
    free(g->grad_edit_region_bias);
    free(g->grad_within_edit_bias);
    free(g->grad_cross_edit_bias);
    free(g->grad_qkv);
}

/* Draw (with P = 1024 arrays), then forward in fp32 for the backward. */
static void prob_init(prob *pb, int64_t B, int64_t T, uint64_t seed, unsigned flags) {
    memset(pb, 0, sizeof *pb);
    pb->B = B, pb->T = T, pb->P = REF_EDIT_MAX_POS;
    assert_int_equal(ref_edit_inputs_alloc(B, T, &pb->in), ATTNBWD_OK);
    assert_int_equal(ref_edit_fwd32_alloc(B, T, &pb->f), ATTNBWD_OK);
    assert_int_equal(ref_edit_draw_inputs(B, T, seed, flags, &pb->in), ATTNBWD_OK);
    pb->ao64 = malloc((size_t)(B * T) * HID * sizeof(double));
    assert_non_null(pb->ao64);
}

static void prob_run(prob *pb) {
    assert_int_equal(ref_edit_forward_ex(pb->B, pb->T, pb->P, &pb->in, &pb->f, NULL), ATTNBWD_OK);
    ref_edit_fill_args(&pb->in, &pb->f, &pb->a);
    if (!pb->g.grad_hidden_states)
        grads_alloc(pb);
    assert_int_equal(ref_edit_backward_ex(pb->B, pb->T, pb->P, &pb->a, &pb->g), ATTNBWD_OK);
}

static void prob_free(prob *pb) {
    ref_edit_inputs_free(&pb->in);
    ref_edit_fwd32_free(&pb->f);
    grads_free(&pb->g);
    free(pb->ao64);
}

/* L = sum(output * grad_output) through the double forward. */
static double loss(prob *pb) {
    const ref_edit_fwd64 o = {.attention_output = pb->ao64};
    assert_int_equal(ref_edit_forward_ex(pb->B, pb->T, pb->P, &pb->in, NULL, &o), ATTNBWD_OK);
    const ref_edit_inputs *in = &pb->in;
    double L = 0.0;
    for (int64_t r = 0; r < pb->B * pb->T; r++)
        for (int64_t n = 0; n < HID; n++) {
            double y = in->out_bias[n];
            for (int64_t c = 0; c < HID; c++)
                y += pb->ao64[r * HID + c] * (double)in->out_weight[n * HID + c];
            L += y * (double)in->grad_output[r * HID + n];
        }
    return L;
}

/* dL/dx[idx] by central differences; the step is what float rounding made it. */
static double fd(prob *pb, float *x, int64_t idx) {
    const float x0 = x[idx];
    const double h = 1e-3 * fmax(1.0, fabs((double)x0));
    const float xp = (float)((double)x0 + h), xm = (float)((double)x0 - h);
    x[idx] = xp;
    const double Lp = loss(pb);
    x[idx] = xm;
    const double Lm = loss(pb);
    x[idx] = x0;
    return (Lp - Lm) / ((double)xp - (double)xm);
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Under AddressSanitizer, FD_SAMPLES caps the sampled elements of each
 * tensor at 2: every loss() runs the same loops over the same addresses
 * whichever element is nudged, so more samples find no more memory errors;
 * the plain build's run compares them all. */
#if defined(__SANITIZE_ADDRESS__)
#define FD_SAMPLES(n) ((n) < 2 ? (n) : 2)
#else
#define FD_SAMPLES(n) (n)
#endif

/* n sampled elements (plus the first) of an analytic gradient against FD.
 * Tolerance: 1e-5 relative plus 1e-5 of the tensor's rms, far below what a
 * wrong index, sign, scale or dropout factor gives (all O(1) relative), far
 * above FD truncation and the fp32 rounding of the forward tensors. */
static void check_fd(prob *pb, const char *name, float *x, int64_t nel, const double *an, int n) {
    double rms = 0.0;
    for (int64_t i = 0; i < nel; i++)
        rms += an[i] * an[i];
    rms = sqrt(rms / (double)nel);
    uint64_t s = (uint64_t)nel * 7919u + (uint64_t)n;
    double worst = 0.0;
    for (int t = 0; t < FD_SAMPLES(n); t++) {
        const int64_t idx = t == 0 ? 0 : (int64_t)(lcg(&s) % (uint64_t)nel);
        const double want = fd(pb, x, idx), err = fabs(want - an[idx]);
        const double tol = 1e-5 * fabs(want) + 1e-5 * rms + 1e-12;
        if (err / tol > worst)
            worst = err / tol;
        if (err > tol)
            fail_msg("%s[%lld]: analytic %.10g, finite difference %.10g", name, (long long)idx, an[idx], want);
    }
    print_message("  %-22s rms %.3e, worst error / tolerance %.3f\n", name, rms, worst);
}

/* Every gradient output against FD; erb elements inside [:T,:T] sampled
 * over heads, and a few outside, where both must be exactly 0. */
static void check_all_fd(prob *pb, int n) {
    const int64_t BT = pb->B * pb->T, T = pb->T, P = pb->P;
    ref_edit_inputs *in = &pb->in;
    check_fd(pb, "hidden_states", in->hidden_states, BT * HID, pb->g.grad_hidden_states, n);
    check_fd(pb, "qkv_weight", in->qkv_weight, (int64_t)QKV * HID, pb->g.grad_qkv_weight, n);
    check_fd(pb, "qkv_bias", in->qkv_bias, QKV, pb->g.grad_qkv_bias, n);
    check_fd(pb, "out_weight", in->out_weight, (int64_t)HID * HID, pb->g.grad_out_weight, n);
    check_fd(pb, "out_bias", in->out_bias, HID, pb->g.grad_out_bias, n);
    check_fd(pb, "within_edit_bias", in->within_edit_bias, NH, pb->g.grad_within_edit_bias, NH);
    check_fd(pb, "cross_edit_bias", in->cross_edit_bias, NH, pb->g.grad_cross_edit_bias, NH);
    if (T > P)
        return;
    uint64_t s = 99;
    for (int t = 0; t < FD_SAMPLES(n); t++) {
        const int64_t h = (int64_t)(lcg(&s) % NH), i = (int64_t)(lcg(&s) % (uint64_t)T),
                      j = (int64_t)(lcg(&s) % (uint64_t)T), idx = (h * P + i) * P + j;
        const double want = fd(pb, in->edit_region_bias, idx);
        if (fabs(want - pb->g.grad_edit_region_bias[idx]) > 1e-4 * fabs(want) + 1e-8)
            fail_msg("edit_region_bias[%lld,%lld,%lld]: analytic %.10g, fd %.10g", (long long)h, (long long)i,
                     (long long)j, pb->g.grad_edit_region_bias[idx], want);
    }
    if (T < P) { /* outside [:T,:T]: the forward never reads them */
        const int64_t idx = (3 * P + T) * P + 0;
        assert_true(fd(pb, in->edit_region_bias, idx) == 0.0);
        assert_true(pb->g.grad_edit_region_bias[idx] == 0.0);
    }
}

/* (a) the whole backward against FD, dropout p = 0.1 with its mask fixed,
 * nonzero qkv/out biases so the bias paths carry weight. */
static void test_fd_default(void **state) {
    (void)state;
    prob pb;
    prob_init(&pb, 2, 4, 1, REF_EDIT_DRAW_BIASES);
    assert_true(pb.in.dropout_p > 0.09f);
    prob_run(&pb);
    check_all_fd(&pb, 12);
    prob_free(&pb);
}

/* The forward against naive loops on B=2, T=3: this is what pins the qkv
 * split order (FD alone would accept q and k swapped in both passes). */
static void test_forward_naive(void **state) {
    (void)state;
    prob pb;
    prob_init(&pb, 2, 3, 2, REF_EDIT_DRAW_BIASES);
    pb.in.attention_mask[1 * 3 + 1] = 0.0f; /* b=1 masks key 1 */
    prob_run(&pb);
    const ref_edit_inputs *in = &pb.in;
    const int64_t T = 3, P = REF_EDIT_MAX_POS;
    for (int64_t b = 0; b < 2; b++)
        for (int64_t h = 0; h < NH; h += 5) {
            const int64_t sl = b * NH + h;
            double q[3][HD], k[3][HD], v[3][HD];
            for (int64_t i = 0; i < T; i++)
                for (int64_t d = 0; d < HD; d++) {
                    double *dst[3] = {&q[i][d], &k[i][d], &v[i][d]};
                    for (int w = 0; w < 3; w++) {
                        const int64_t o = w * HID + h * HD + d; /* qkv_size = 3 x heads x head_dim */
                        double acc = in->qkv_bias[o];
                        for (int64_t c = 0; c < HID; c++)
                            acc += (double)in->hidden_states[(b * T + i) * HID + c] * in->qkv_weight[o * HID + c];
                        *dst[w] = acc;
                    }
                    const int64_t e = (sl * T + i) * HD + d;
                    assert_true(fabs(pb.f.query[e] - q[i][d]) < 1e-5 * (1 + fabs(q[i][d])));
                    assert_true(fabs(pb.f.key[e] - k[i][d]) < 1e-5 * (1 + fabs(k[i][d])));
                    assert_true(fabs(pb.f.value[e] - v[i][d]) < 1e-5 * (1 + fabs(v[i][d])));
                }
            for (int64_t i = 0; i < T; i++) {
                double s[3], mx = -INFINITY, sum = 0.0;
                const double mi = in->edit_region_mask[b * T + i];
                for (int64_t j = 0; j < T; j++) {
                    const double mj = in->edit_region_mask[b * T + j];
                    double dot = 0.0;
                    for (int64_t d = 0; d < HD; d++)
                        dot += q[i][d] * k[j][d];
                    s[j] = dot * in->scale + in->edit_region_bias[(h * P + i) * P + j] +
                           (mi == 1.0 && mj == 1.0 ? in->within_edit_bias[h] : 0.0) +
                           (mi != mj ? in->cross_edit_bias[h] : 0.0);
                    if (in->attention_mask[b * T + j] == 0.0f)
                        s[j] = -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                for (int64_t j = 0; j < T; j++)
                    sum += exp(s[j] - mx);
                double out[HD] = {0};
                for (int64_t j = 0; j < T; j++) {
                    const int64_t e = (sl * T + i) * T + j;
                    const double pr = exp(s[j] - mx) / sum;
                    const double pd = pr * in->dropout_mask[e] / (1.0 - in->dropout_p);
                    if (isinf(s[j]))
                        assert_true(isinf(pb.f.attention_scores[e]) && pb.f.attention_scores[e] < 0);
                    else
                        assert_true(fabs(pb.f.attention_scores[e] - s[j]) < 1e-5);
                    assert_true(fabs(pb.f.attention_probs[e] - pr) < 1e-6);
                    assert_true(fabs(pb.f.attention_probs_dropped[e] - pd) < 1e-6);
                    for (int64_t d = 0; d < HD; d++)
                        out[d] += pd * v[j][d];
                }
                for (int64_t d = 0; d < HD; d++)
                    assert_true(fabs(pb.f.attention_output[(b * T + i) * HID + h * HD + d] - out[d]) < 1e-5);
            }
        }
    prob_free(&pb);
}

/* (b) attention_mask zeros: b=0 masks keys 2 and 4, b=1 masks keys 2 and 3.
 * gS = 0 on masked keys, so grad_edit_region_bias[:, :, 2] = 0 (masked in
 * both rows), the key and value parts of grad_qkv of a masked token are 0
 * (gK = gS^T q, gV = Pd^T gA with Pd = 0 there), and FD still agrees. */
static void test_masked_keys(void **state) {
    (void)state;
    prob pb;
    const int64_t T = 5, P = REF_EDIT_MAX_POS;
    prob_init(&pb, 2, T, 3, 0);
    float *am = pb.in.attention_mask;
    am[2] = am[4] = 0.0f;
    am[T + 2] = am[T + 3] = 0.0f;
    prob_run(&pb);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t j = 0; j < T; j++) {
            if (am[b * T + j] != 0.0f)
                continue;
            for (int64_t c = HID; c < QKV; c++) /* key and value columns */
                assert_true(pb.g.grad_qkv[(b * T + j) * QKV + c] == 0.0);
            for (int64_t h = 0; h < NH; h++)
                for (int64_t i = 0; i < T; i++)
                    assert_true(pb.f.attention_probs[((b * NH + h) * T + i) * T + j] == 0.0f);
        }
    double nz = 0.0;
    for (int64_t h = 0; h < NH; h++)
        for (int64_t i = 0; i < T; i++) {
            assert_true(pb.g.grad_edit_region_bias[(h * P + i) * P + 2] == 0.0);
            nz += fabs(pb.g.grad_edit_region_bias[(h * P + i) * P + 4]); /* b=1 still sees key 4 */
        }
    assert_true(nz > 0.0);
    check_all_fd(&pb, 8);

    /* The mask step on its own: probs from a forward without that mask (so
     * nonzero on key 1 of b=0), then the backward told key 1 is masked: it
     * must still zero gS there, hence grad_edit_region_bias[:, :, 1] (key 1
     * is masked in no other row... b=1 keeps it, so compare against b=1's
     * share) and the key part of grad_qkv of token (0, 1). */
    for (int64_t i = 0; i < 2 * T; i++)
        am[i] = 1.0f;
    pb.B = 1;
    prob_run(&pb);
    float *am1 = malloc((size_t)T * sizeof *am1);
    assert_non_null(am1);
    for (int64_t j = 0; j < T; j++)
        am1[j] = j == 1 ? 0.0f : 1.0f;
    pb.a.attention_mask = am1;
    assert_int_equal(ref_edit_backward(1, T, &pb.a, &pb.g), ATTNBWD_OK);
    for (int64_t h = 0; h < NH; h++)
        for (int64_t i = 0; i < T; i++) {
            assert_true(pb.f.attention_probs[(h * T + i) * T + 1] > 0.0f);
            assert_true(pb.g.grad_edit_region_bias[(h * P + i) * P + 1] == 0.0);
        }
    for (int64_t c = HID; c < 2 * HID; c++)
        assert_true(pb.g.grad_qkv[1 * QKV + c] == 0.0);
    free(am1);
    prob_free(&pb);
}

/* A batch row with every key masked: NaN in PyTorch, documented here as
 * probs 0, so its outputs and every gradient from it are 0, all finite. */
static void test_all_keys_masked(void **state) {
    (void)state;
    prob pb;
    const int64_t T = 3;
    prob_init(&pb, 2, T, 4, 0);
    for (int64_t j = 0; j < T; j++)
        pb.in.attention_mask[T + j] = 0.0f;
    prob_run(&pb);
    for (int64_t i = T; i < 2 * T; i++) {
        for (int64_t c = 0; c < HID; c++) {
            assert_true(pb.f.attention_output[i * HID + c] == 0.0f);
            assert_true(pb.g.grad_hidden_states[i * HID + c] == 0.0);
        }
    }
    for (int64_t i = 0; i < QKV * HID; i++)
        assert_true(isfinite(pb.g.grad_qkv_weight[i]));
    for (int64_t h = 0; h < NH; h++)
        assert_true(isfinite(pb.g.grad_within_edit_bias[h]) && isfinite(pb.g.grad_cross_edit_bias[h]));
    prob_free(&pb);
}

/* (c) p == 0: the dropout mask is not read (NULL works, all-zeros changes
 * nothing), probs_dropped = probs, and FD agrees. */
static void test_p_zero(void **state) {
    (void)state;
    prob pb;
    prob_init(&pb, 1, 4, 5, REF_EDIT_DRAW_P0);
    assert_true(pb.in.dropout_p == 0.0f);
    float *dm = pb.in.dropout_mask;
    const size_t tt = (size_t)NH * 4 * 4;
    memset(dm, 0, tt * sizeof *dm); /* would zero every gradient if it were read */
    prob_run(&pb);
    for (size_t e = 0; e < tt; e++)
        assert_true(pb.f.attention_probs_dropped[e] == pb.f.attention_probs[e]);
    double *gh = malloc((size_t)4 * HID * sizeof(double));
    assert_non_null(gh);
    memcpy(gh, pb.g.grad_hidden_states, (size_t)4 * HID * sizeof(double));
    pb.in.dropout_mask = NULL;
    prob_run(&pb);
    assert_memory_equal(gh, pb.g.grad_hidden_states, (size_t)4 * HID * sizeof(double));
    pb.in.dropout_mask = dm;
    check_all_fd(&pb, 6);
    free(gh);
    prob_free(&pb);
}

/* (d) grad_edit_region_bias: every element of [16,P,P] written (the buffer
 * starts NaN), 0 outside [:T,:T], and inside = the sum over b of gS, whose
 * sum over (i,j) with the masks' weights gives the within/cross gradients. */
static void test_region_bias_outside_zero(void **state) {
    (void)state;
    prob pb;
    const int64_t T = 3, P = REF_EDIT_MAX_POS;
    prob_init(&pb, 1, T, 6, 0);
    prob_run(&pb);
    const double *geb = pb.g.grad_edit_region_bias;
    double inside = 0.0;
    for (int64_t h = 0; h < NH; h++) {
        double w = 0.0, c = 0.0;
        for (int64_t i = 0; i < P; i++)
            for (int64_t j = 0; j < P; j++) {
                const double x = geb[(h * P + i) * P + j];
                if (i < T && j < T) {
                    assert_true(isfinite(x));
                    inside += fabs(x);
                    const double mi = pb.in.edit_region_mask[i], mj = pb.in.edit_region_mask[j];
                    w += x * mi * mj;
                    c += x * (mi != mj);
                } else if (x != 0.0) {
                    fail_msg("grad_edit_region_bias[%lld,%lld,%lld] = %g outside [:T,:T]", (long long)h,
                             (long long)i, (long long)j, x);
                }
            }
        /* B = 1: the region bias gradient is gS itself */
        assert_true(fabs(w - pb.g.grad_within_edit_bias[h]) < 1e-12 + 1e-9 * fabs(w));
        assert_true(fabs(c - pb.g.grad_cross_edit_bias[h]) < 1e-12 + 1e-9 * fabs(c));
    }
    assert_true(inside > 0.0);
    prob_free(&pb);
}

/* (e) T past the position table, reached with a small table (P = 4, T = 5):
 * no bias in the scores (same forward as a table of zeros), the whole
 * gradient table 0; and the other gradients as with a zero bias. Also the
 * refused arguments. */
static void test_T_past_table(void **state) {
    (void)state;
    const int64_t T = 5;
    prob big, small;
    prob_init(&big, 1, T, 7, 0);
    prob_init(&small, 1, T, 7, 0);
    free(big.in.edit_region_bias);
    big.in.edit_region_bias = NULL; /* documented: NULL reads as zeros */
    big.P = 8;
    small.P = 4;
    float *tab = small.in.edit_region_bias; /* [16,4,4] of nonzero values */
    for (int64_t i = 0; i < NH * 16; i++)
        tab[i] = 0.5f;
    prob_run(&big);
    prob_run(&small);
    const size_t tt = (size_t)NH * T * T;
    assert_memory_equal(big.f.attention_probs, small.f.attention_probs, tt * sizeof(float));
    assert_memory_equal(big.f.attention_output, small.f.attention_output, (size_t)T * HID * sizeof(float));
    assert_memory_equal(big.g.grad_hidden_states, small.g.grad_hidden_states, (size_t)T * HID * sizeof(double));
    assert_memory_equal(big.g.grad_within_edit_bias, small.g.grad_within_edit_bias, NH * sizeof(double));
    for (int64_t i = 0; i < NH * 16; i++)
        assert_true(small.g.grad_edit_region_bias[i] == 0.0);
    double nz = 0.0; /* with the table of 8 in reach, [:5,:5] is not all zero */
    for (int64_t i = 0; i < NH * 64; i++)
        nz += fabs(big.g.grad_edit_region_bias[i]);
    assert_true(nz > 0.0);
    check_all_fd(&small, 4);

    const ref_edit_fwd32 none = {0};
    assert_int_equal(ref_edit_forward(0, T, &small.in, &none, NULL), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_int_equal(ref_edit_forward(1, 0, &small.in, &none, NULL), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_int_equal(ref_edit_forward(1, T, NULL, &none, NULL), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_int_equal(ref_edit_backward(1, T, NULL, &small.g), ATTNBWD_ERR_INVALID_ARGUMENT);
    attnbwd_edit_attention_args a = small.a;
    a.query = NULL;
    assert_int_equal(ref_edit_backward(1, T, &a, &small.g), ATTNBWD_ERR_INVALID_ARGUMENT);
    a = small.a;
    a.dropout_p = 1.0f;
    assert_int_equal(ref_edit_backward(1, T, &a, &small.g), ATTNBWD_ERR_INVALID_ARGUMENT);
    prob_free(&big);
    prob_free(&small);
}

/* The drawer: the recipe's values, and bits that depend on the seed only
 * (not on the thread count); the backward's bits do not depend on it either. */
static void test_draw_and_threads(void **state) {
    (void)state;
    const int64_t B = 2, T = 8;
    prob a, b;
    prob_init(&a, B, T, 11, 0);
    setenv("ATTNBWD_REF_THREADS", "1", 1);
    prob_init(&b, B, T, 11, 0);
    prob_run(&b);
    unsetenv("ATTNBWD_REF_THREADS");
    setenv("ATTNBWD_REF_THREADS", "3", 1);
    prob_run(&a);
    unsetenv("ATTNBWD_REF_THREADS");
    const size_t BT = (size_t)(B * T), tt = BT * NH * T;
    assert_memory_equal(a.in.hidden_states, b.in.hidden_states, BT * HID * sizeof(float));
    assert_memory_equal(a.in.dropout_mask, b.in.dropout_mask, tt * sizeof(float));
    assert_memory_equal(a.g.grad_qkv_weight, b.g.grad_qkv_weight, (size_t)QKV * HID * sizeof(double));
    assert_memory_equal(a.g.grad_cross_edit_bias, b.g.grad_cross_edit_bias, NH * sizeof(double));
    assert_true(a.in.scale == 0.125f && fabs(a.in.dropout_p - 0.1f) < 1e-7);
    double kept = 0.0, mean = 0.0, var = 0.0;
    for (size_t i = 0; i < tt; i++) {
        assert_true(a.in.dropout_mask[i] == 0.0f || a.in.dropout_mask[i] == 1.0f);
        kept += a.in.dropout_mask[i];
    }
    assert_true(fabs(kept / (double)tt - 0.9) < 0.03);
    for (size_t i = 0; i < BT; i++) {
        assert_true(a.in.attention_mask[i] == 1.0f);
        assert_true(a.in.edit_region_mask[i] == 0.0f || a.in.edit_region_mask[i] == 1.0f);
    }
    for (int64_t i = 0; i < QKV; i++)
        assert_true(a.in.qkv_bias[i] == 0.0f);
    for (int64_t i = 0; i < QKV * HID; i++) {
        mean += a.in.qkv_weight[i];
        var += (double)a.in.qkv_weight[i] * a.in.qkv_weight[i];
    }
    mean /= (double)QKV * HID;
    assert_true(fabs(mean) < 1e-4 && fabs(sqrt(var / ((double)QKV * HID)) - 0.02) < 2e-4);
    prob other;
    prob_init(&other, B, T, 12, 0);
    assert_true(memcmp(a.in.hidden_states, other.in.hidden_states, BT * HID * sizeof(float)) != 0);
    prob_free(&other);
    prob_free(&a);
    prob_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_naive),
        cmocka_unit_test(test_fd_default),
        cmocka_unit_test(test_masked_keys),
        cmocka_unit_test(test_all_keys_masked),
        cmocka_unit_test(test_p_zero),
        cmocka_unit_test(test_region_bias_outside_zero),
        cmocka_unit_test(test_T_past_table),
        cmocka_unit_test(test_draw_and_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
