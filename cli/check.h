/* The GPU check and timing harness, shared by `attnbwd check`, `attnbwd
 * bench`-style timing and the GPU tests.
 *
 * check: fresh random inputs drawn as the spec says (seeded), the output
 * poisoned with NaN before the launch, the kernel run once on a stream, the
 * result compared with the fp64 CPU reference under the public acceptance
 * rule (|out-ref| <= atol + rtol*|ref| for >= match_ratio of elements, no
 * NaN/Inf, every element written). Very large cases compare a sample of rows
 * against the reference but still scan every element for NaN/Inf/poison.
 *
 * time: cold L2 before each iteration (a 2x-L2 buffer is zeroed), 10 warm-ups,
 * median of `iters` launches, device time from CUDA events around the kernel. */
#ifndef ATTNBWD_CHECK_H
#define ATTNBWD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "attnbwd.h"
#include "suite.h"

typedef struct check_result {
    int pass;
    size_t elements;          /* elements of the output */
    size_t compared;          /* elements compared with the reference */
    size_t failed;            /* compared elements outside the tolerance */
    size_t nonfinite;         /* NaN or Inf anywhere in the output */
    double max_abs_err, max_rel_err;
    double match_fraction;    /* (compared - failed) / compared */
    double median_us;         /* filled by check_time, else 0 */
    double gbytes_per_s;      /* floor bytes / median time, filled by check_time */
    char message[256];        /* why it failed, or a one-line summary */
    char breakdown[2048];     /* check_time of problem 2: one line per kernel, slowest first */
} check_result;

/* 0 when a CUDA device can be used by the harness, else -1 with why. */
int check_gpu_available(char *why, size_t why_len);

/* Check one case with the kernel ctx gives for it. Returns ATTNBWD_OK when the
 * check could run (r->pass says whether it passed), an error otherwise. */
attnbwd_status check_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);

/* Time one case (median of iters, cold L2), filling r->median_us and
 * r->gbytes_per_s. Inputs are random, as for check_case. */
attnbwd_status check_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, check_result *r);
/* check_time_case without problem 2's per-kernel breakdown when !alone (an
 * A/B of whole calls then spends its device time on them only). */
attnbwd_status check_time_case_ex(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r);
/* check_edit_time_tiles (below) on the context's device; problem 2 only. */
attnbwd_status check_time_tiles(attnbwd_ctx *ctx, const suite_case *c, int n, const char *const *tiles, int iters,
                                int reps, uint64_t seed, double *time_us);
/* The median of v[0..n-1] (n > 0), which it sorts: the middle value, or the
 * mean of the two middle ones. */
double check_median(double *v, int n);
/* The most tile choices one timing takes. */
#define CHECK_MAX_CHOICES 64
/* The order of round `round` of a timing of n choices: rounds come in pairs,
 * the second the first reversed, so that each choice's mean position is the
 * same and a drift over a round hits all alike; seed 0 takes 0..n-1 first in
 * every pair, another seed a shuffle of its own for each pair, so that an
 * effect that recurs at fixed times in a run (the GPU's clocks capped on a
 * schedule) falls on different choices in every pair and in every run. */
void check_round_order(int n, int round, uint64_t seed, int *order);

/* The timing loop shared by the problems: fn launches the work on stream s
 * (a cudaStream_t); median device time in us of `iters` launches, each after
 * a cold L2, following 10 warm-ups. */
typedef attnbwd_status (*check_launch_fn)(void *user, void *s);
attnbwd_status check_time_launches(check_launch_fn fn, void *user, int iters, double *median_us);

/* Bytes that must move for a case (the spec's floor). */
double check_floor_bytes(const suite_case *c);

/* Floating-point operations (2 per multiply-add) of the spec's floor: problem
 * 2's matrix work, B*T*8*2^20 + 4*B*16*T*T*64 multiply-adds; 0 for problem 1. */
double check_floor_flops(const suite_case *c);

/* ---- problem 2, the edit-attention backward (check_edit.c) ----
 *
 * check_case and check_time_case hand problem-2 cases to the two below.
 * Inputs come from the reference's seeded drawer (ref_edit_draw_inputs: the
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

#endif
