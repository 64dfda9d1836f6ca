/* The --precision option of prewarm and check: the precisions of problem 2
 * ("--precision tf32,fp16"), each edit_attention_bwd case of the suites
 * taken once in each, in the order given. Problem 1 has none: its cases stay
 * as they are. Without the option each case keeps its suite's precision
 * (tf32 unless the suite says). */
#ifndef ATTNBWD_CLI_PRECISION_ARGS_H
#define ATTNBWD_CLI_PRECISION_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "suite.h"

#define CLI_PRECISION_HELP                                                                    \
    "  --precision P[,P...]  problem 2's cases once in each of these: tf32, fp16,\n"          \
    "                fp32 (default: the suite's, tf32 unless it says)\n"

typedef struct cli_precisions {
    int n;
    int list[3]; /* attnbwd_precision values, each at most once */
} cli_precisions;

/* Adds the precisions of one --precision value; CLI_USAGE (after saying
 * why) for a name that is none of the three or one given twice. */
static inline int cli_precisions_add(cli_precisions *p, const char *cmd, const char *value)
{
    static const struct {
        const char *name;
        int precision;
    } known[] = {{"tf32", ATTNBWD_PRECISION_TF32}, {"fp16", ATTNBWD_PRECISION_FP16}, {"fp32", ATTNBWD_PRECISION_FP32}};
    for (const char *s = value;;) {
        size_t len = strcspn(s, ",");
        int found = -1;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (len == strlen(known[k].name) && strncmp(s, known[k].name, len) == 0)
                found = known[k].precision;
        if (found < 0)
            return cli_usage_error(cmd, "--precision '%s': '%.*s' is not tf32, fp16 or fp32", value, (int)len, s);
        for (int i = 0; i < p->n; i++)
            if (p->list[i] == found)
                return cli_usage_error(cmd, "--precision '%s': %s given twice", value, cli_precision_name(found));
        p->list[p->n++] = found;
        s += len;
        if (*s != ',')
            return CLI_OK;
        s++;
    }
}

/* Replaces *cases by the same cases with each problem-2 case once in each
 * precision of p, named with it ("... fp16"); nothing changes where p lists
 * none. CLI_FAIL (after saying so) when out of memory. */
static inline int cli_precisions_apply(const cli_precisions *p, const char *cmd, suite_case **cases, size_t *n)
{
    if (p->n == 0)
        return CLI_OK;
    size_t m = 0;
    for (size_t i = 0; i < *n; i++)
        m += (*cases)[i].shape.problem == ATTNBWD_EDIT_ATTENTION_BWD ? (size_t)p->n : 1;
    suite_case *out = calloc(m ? m : 1, sizeof *out);
    if (!out) {
        fprintf(stderr, "attnbwd %s: out of memory\n", cmd);
        return CLI_FAIL;
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        const suite_case *c = &(*cases)[i];
        if (c->shape.problem != ATTNBWD_EDIT_ATTENTION_BWD) {
            out[k++] = *c;
            continue;
        }
        for (int j = 0; j < p->n; j++) {
            suite_case *x = &out[k++];
            *x = *c;
            x->shape.precision = p->list[j];
            const size_t len = strlen(c->name), room = sizeof x->name - 6; /* " fp16" and its end */
            snprintf(x->name, sizeof x->name, "%.*s %s", (int)(len < room ? len : room), c->name,
                     cli_precision_name(p->list[j]));
        }
    }
    free(*cases);
    *cases = out;
    *n = m;
    return CLI_OK;
}

#endif
