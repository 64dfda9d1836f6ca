/* The GPU check and timing of problem 2, the edit-attention backward
 * (check_edit.c); check.c's check_case and check_time_case hand its cases
 * here, and the GPU tests call the _ex form for its per-output figures. */
#ifndef ATTNBWD_CHECK_EDIT_H
#define ATTNBWD_CHECK_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "attnbwd.h"
#include "check_common.h"
#include "suite.h"

/* Inputs come from the reference's seeded drawer (ref_edit_draw_inputs: the
 * public benchmark's recipe; dropout_p is the case's p_dropout, 0 included)
 * and the fp32 forward tensors from ref_edit_forward; every input of
 * attnbwd_edit_attention_args is uploaded, the 8 outputs and the workspace
 * arrive poisoned with NaN. Each output is compared on its own under the rule
 * above (the case's atol, rtol, match_ratio); grad_edit_region_bias must also
 * be exactly 0 outside [:, :T, :T]. The case passes only if all 8 do; the
 * figures of check_result are the worst output's, and its message names each
 * failing output ("grad_qkv_weight: 97.10% within atol 0.089") and, with
 * precision ATTNBWD_PRECISION_FP32, the relative error ||out-ref||/||ref|| of
 * every output ("rel err hs 1.2e-07 qw ..." in output order). The shape's
 * precision picks the kernel; heads must be 0 or 16. Needs host memory for
 * the inputs, forward tensors and reference (~6.5 GB for B=32, T=773). */
#define CHECK_EDIT_OUTPUTS 8

/* Drawing options of check_edit_case_ex. */
enum {
    CHECK_EDIT_MASK_ZEROS = 1u << 0, /* attention_mask 0 w.p. 1/4 (key 0 always valid), not all ones */
    CHECK_EDIT_BIASES = 1u << 1,     /* qkv_bias, out_bias ~ 0.02*randn instead of 0 */
    CHECK_EDIT_LARGE = 1u << 2       /* grad_output times 2^16 (as a loss scale would): every output too, and
                                        gS past fp16's range unless scaled (the caller scales atol) */
};

/* One output's comparison. */
typedef struct check_edit_output {
    const char *name;         /* "grad_hidden_states" ... "grad_cross_edit_bias", the spec's output order */
    int pass;                 /* nonfinite == 0, nonzero_outside == 0, match_fraction >= match_ratio */
    size_t elements, compared, failed, nonfinite;
    size_t nonzero_outside;   /* grad_edit_region_bias: elements outside [:, :T, :T] not exactly 0 */
    double max_abs_err, max_rel_err; /* over finite elements; rel where ref != 0 */
    double match_fraction;
    double rel_l2_err;        /* ||out-ref||_2 / ||ref||_2; INFINITY with NaN/Inf (or out != 0 == ref) */
} check_edit_output;

/* check_case for a problem-2 case (flags 0, no per-output figures). */
attnbwd_status check_edit_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);

/* The same with CHECK_EDIT_* drawing flags; outputs (may be NULL) receives
 * the CHECK_EDIT_OUTPUTS per-output comparisons (zeroed, names set, when the
 * check could not run). */
attnbwd_status check_edit_case_ex(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, unsigned flags,
                                  check_result *r, check_edit_output *outputs);

/* check_time_case for a problem-2 case: r->message also gives TFLOP/s of
 * check_floor_flops; with `alone`, r->breakdown each kernel timed alone. */
attnbwd_status check_edit_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r);

/* A/B of tile choices on one problem-2 case: the inputs drawn and uploaded
 * once, then `reps` rounds (an odd count runs one more) in which each of the
 * n choices (tiles[i]; NULL: the heuristic's) is timed as check_time_case
 * times it, in the order check_round_order gives for the round and the seed.
 * time_us[i]: the median of its rounds' medians. */
attnbwd_status check_edit_time_tiles(attnbwd_ctx *ctx, const suite_case *c, int n, const char *const *tiles,
                                     int iters, int reps, uint64_t seed, double *time_us);

/* Bytes that must move (the spec's floor): probs, dropped probs and grad_edit_region_bias. */
double check_edit_floor_bytes(const suite_case *c);

/* The spec's floor of matrix work in floating-point operations (2 per
 * multiply-add): B*T*8*2^20 + 4*B*16*T*T*64 multiply-adds. */
double check_edit_floor_flops(const suite_case *c);

#endif
