/* Suites: lists of workloads to prewarm, check or time.
 *
 * A suite is either a workload file in the public benchmark's JSONL format
 * (read as it is: axes batch_size / n_heads / seq_len, inputs.p_dropout.value,
 * tolerance), or a Lua file of our own returning a table of cases:
 *   return { { problem = "softmax_dropout_bwd", batch = 2, heads = 16,
 *              seq_len = 541, p_dropout = 0.1, atol = 1e-5, rtol = 1e-5 }, ... }
 * A name without a slash that is not a file ("sol066_workload") is looked up
 * among the suites shipped inside the library (suites/ in the repository). */
#ifndef ATTNBWD_SUITE_H
#define ATTNBWD_SUITE_H

#include <stddef.h>

#include "attnbwd.h"

typedef struct suite_case {
    attnbwd_shape shape;
    double p_dropout;      /* problem 1: p_dropout; problem 2: dropout_p */
    double atol, rtol;     /* the acceptance rule's tolerances */
    double match_ratio;    /* fraction of elements that must pass (0.99 unless given) */
    char name[96];         /* e.g. "sol066_workload#3 B=2 H=16 T=541 p=0.1" */
    const char *tiles;     /* NULL: the library's choice; else tiles to build with (exploration) */
} suite_case;

/* Appends the cases of one suite to *cases (realloc'd; *n updated).
 * Returns ATTNBWD_OK, or an error with attnbwd_last_error() saying which file,
 * which line and what was wrong. */
attnbwd_status suite_load(const char *path_or_name, suite_case **cases, size_t *n);

#endif
