/* The harness's entry points (check.h): each case handed to its problem's
 * check and timing, on the device the context's kernels run on; the
 * problems' names. A problem is one row of `problems`. */
#include "check.h"

#include <stdio.h>
#include <string.h>

#include "check_edit.h"

#include "error.h"

/* Each problem's part, defined by its check/check_<problem>.c. */
extern const check_problem check_softmax_problem, check_edit_problem;
static const check_problem *const problems[] = {&check_softmax_problem, &check_edit_problem};
#define N_PROBLEMS (sizeof problems / sizeof problems[0])

static const check_problem *problem_of(const suite_case *c) {
    for (size_t i = 0; c && i < N_PROBLEMS; i++)
        if (problems[i]->problem == c->shape.problem)
            return problems[i];
    return NULL;
}

/* The case's problem with the device made current, or NULL with r's
 * message and *st saying why not. */
static const check_problem *prepare(attnbwd_ctx *ctx, const suite_case *c, check_result *r, attnbwd_status *st) {
    *st = check_use_ctx_device(ctx, r);
    if (*st != ATTNBWD_OK)
        return NULL;
    memset(r, 0, sizeof *r);
    const check_problem *p = problem_of(c);
    if (!ctx || !c)
        *st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check: null ctx or case");
    else if (!p)
        *st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: unknown problem %d", c->name, (int)c->shape.problem);
    if (*st != ATTNBWD_OK)
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
    return *st == ATTNBWD_OK ? p : NULL;
}

attnbwd_status check_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r) {
    if (!r)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_case: null result");
    attnbwd_status st;
    const check_problem *p = prepare(ctx, c, r, &st);
    return p ? p->check(ctx, c, seed, r) : st;
}

attnbwd_status check_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, check_result *r) {
    return check_time_case_ex(ctx, c, iters, 1, r);
}

attnbwd_status check_time_case_ex(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r) {
    if (!r)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_time_case: null result");
    attnbwd_status st;
    const check_problem *p = prepare(ctx, c, r, &st);
    return p ? p->time(ctx, c, iters, alone, r) : st;
}

attnbwd_status check_time_tiles(attnbwd_ctx *ctx, const suite_case *c, int n, const char *const *tiles, int iters,
                                int reps, uint64_t seed, double *time_us) {
    check_result r;
    attnbwd_status st = check_use_ctx_device(ctx, &r);
    if (st != ATTNBWD_OK)
        return st;
    if (!c || c->shape.problem != ATTNBWD_EDIT_ATTENTION_BWD)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_time_tiles: problem-2 cases only");
    return check_edit_time_tiles(ctx, c, n, tiles, iters, reps, seed, time_us);
}

double check_floor_bytes(const suite_case *c) {
    const check_problem *p = problem_of(c);
    return p ? p->floor_bytes(c) : 0.0;
}

double check_floor_flops(const suite_case *c) {
    const check_problem *p = problem_of(c);
    return p && p->floor_flops ? p->floor_flops(c) : 0.0;
}

attnbwd_problem check_problem_from_name(const char *name) {
    for (size_t i = 0; name && i < N_PROBLEMS; i++)
        if (!strcmp(problems[i]->name, name))
            return problems[i]->problem;
    return (attnbwd_problem)0;
}

const char *check_problem_name(attnbwd_problem p) {
    for (size_t i = 0; i < N_PROBLEMS; i++)
        if (problems[i]->problem == p)
            return problems[i]->name;
    return "unknown_problem";
}

void check_problem_names(char *buf, size_t len) {
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < N_PROBLEMS && used < len; i++) {
        const int n = snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "", problems[i]->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}
