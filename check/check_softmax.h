/* The GPU check and timing of problem 1, the masked softmax with dropout
 * backward (check_softmax.c); check.c's check_case and check_time_case hand
 * its cases here. */
#ifndef ATTNBWD_CHECK_SOFTMAX_H
#define ATTNBWD_CHECK_SOFTMAX_H

#include <stdint.h>

#include "attnbwd.h"
#include "check_common.h"
#include "suite.h"

/* check_case for a problem-1 case (r not NULL, the device made current). */
attnbwd_status check_softmax_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r);

/* check_time_case_ex for a problem-1 case (one kernel: `alone` changes nothing). */
attnbwd_status check_softmax_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone,
                                       check_result *r);

/* Bytes that must move (the spec's floor): the inputs, masks and output. */
double check_softmax_floor_bytes(const suite_case *c);

#endif
