/* The GPU check and timing harness, shared by `attnbwd check`, the Lua API
 * of exploration (lua_api.h), the benchmarks and the GPU tests: the entry
 * points, which hand each case to its problem's check (check_softmax.c,
 * check_edit.c).
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
#include "check_common.h"
#include "suite.h"

/* Check one case with the kernel ctx gives for it. Returns ATTNBWD_OK when the
 * check could run (r->pass says whether it passed), an error otherwise. */
attnbwd_status check_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);

/* Time one case (median of iters, cold L2), filling r->median_us and
 * r->gbytes_per_s. Inputs are random, as for check_case. */
attnbwd_status check_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, check_result *r);
/* check_time_case without problem 2's per-kernel breakdown when !alone (an
 * A/B of whole calls then spends its device time on them only). */
attnbwd_status check_time_case_ex(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r);
/* check_edit_time_tiles (check_edit.h) on the context's device; problem 2 only. */
attnbwd_status check_time_tiles(attnbwd_ctx *ctx, const suite_case *c, int n, const char *const *tiles, int iters,
                                int reps, uint64_t seed, double *time_us);
/* Bytes that must move for a case (the spec's floor). */
double check_floor_bytes(const suite_case *c);

/* Floating-point operations (2 per multiply-add) of the spec's floor: problem
 * 2's matrix work (check_edit_floor_flops); 0 for problem 1. */
double check_floor_flops(const suite_case *c);

/* The problem a name spells ("softmax_dropout_bwd", "edit_attention_bwd"),
 * 0 when none does. */
attnbwd_problem check_problem_from_name(const char *name);
/* A problem's name, "unknown_problem" for none. */
const char *check_problem_name(attnbwd_problem p);
/* Every problem's name, quoted and ", "-separated, into buf (for messages). */
void check_problem_names(char *buf, size_t len);

#endif
