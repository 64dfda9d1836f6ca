/* `attnbwd check`: run every case of one or more suites on the GPU, compare
 * with the fp64 CPU reference under the public acceptance rule and, with
 * --time, time each case against the bandwidth floor. Needs a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "precision_args.h"
#include "suite.h"

void cmd_check_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd check [OPTIONS] SUITE...\n\n"
                 "Runs every case of each SUITE (a workload .jsonl file, a Lua suite, or a shipped\n"
                 "suite such as sol066_workload) on the GPU with random inputs, and compares the\n"
                 "output with the fp64 CPU reference: |out-ref| <= atol + rtol*|ref| for the\n"
                 "case's share of elements, no NaN or Inf. Prints a line per case and\n"
                 "\"N passed, M failed\"; exits 1 when any case failed or there is no GPU.\n\n"
                 "options:\n"
                 "  --seed N          seed of the random inputs (default 0)\n"
                 "  --time            also time each passing case: median of --iters launches,\n"
                 "                    cold L2, GB/s over the floor bytes, and the fraction of the\n"
                 "                    floor time reached at --copy-gbps\n"
                 "  --iters N         timed launches per case (default 50)\n"
                 "  --copy-gbps X     copy bandwidth of the floor, GB/s (default 4220, an H200)\n"
                 CLI_PRECISION_HELP "\n"
                 "examples:\n"
                 "  attnbwd check --time sol066_workload\n"
                 "  attnbwd check --precision fp16 sol072_workload\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

#define TF32_TFLOPS 407.0 /* measured on the H200 (docs/spec/edit_attention_bwd.md) */

typedef struct check_args {
    uint64_t seed;
    int time;
    int iters;
    double copy_gbps;
    int n_suites;
    char **suites; /* points into argv */
    cli_precisions precisions;
} check_args;

/* Parses the value of one of the value options; 0: argv[*i] is not one. */
static int take_check_value(check_args *a, int argc, char **argv, int *i, int *rc)
{
    const char *val = NULL;
    char err[160];
    int64_t v;
    int r;
    *rc = CLI_OK;
    if ((r = cli_opt_value("check", argc, argv, i, "--seed", &val)) != 0) {
        if (r > 0 && cli_parse_i64("--seed", val, 0, INT64_MAX, &v, err, sizeof err) == 0)
            a->seed = (uint64_t)v;
        else
            *rc = r < 0 ? CLI_USAGE : cli_usage_error("check", "%s", err);
    } else if ((r = cli_opt_value("check", argc, argv, i, "--iters", &val)) != 0) {
        if (r > 0 && cli_parse_i64("--iters", val, 1, 100000, &v, err, sizeof err) == 0)
            a->iters = (int)v;
        else
            *rc = r < 0 ? CLI_USAGE : cli_usage_error("check", "%s", err);
    } else if ((r = cli_opt_value("check", argc, argv, i, "--precision", &val)) != 0) {
        if (r < 0 || cli_precisions_add(&a->precisions, "check", val) != CLI_OK)
            *rc = CLI_USAGE;
    } else if ((r = cli_opt_value("check", argc, argv, i, "--copy-gbps", &val)) != 0) {
        if (r < 0)
            *rc = CLI_USAGE;
        else if (cli_parse_double("--copy-gbps", val, 0.0, 1e6, 0, &a->copy_gbps, err, sizeof err) != 0 ||
                 a->copy_gbps <= 0.0)
            *rc = cli_usage_error("check", "--copy-gbps: '%s' must be a number above 0 and at most 1e6", val);
    }
    return r != 0;
}

static int parse_check_args(check_args *a, int argc, char **argv)
{
    int dashdash = 0;
    a->suites = argv;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        int rc = CLI_OK;
        if (!dashdash && strcmp(arg, "--") == 0) {
            dashdash = 1;
        } else if (!dashdash && strcmp(arg, "--time") == 0) {
            a->time = 1;
        } else if (!dashdash && take_check_value(a, argc, argv, &i, &rc)) {
            if (rc != CLI_OK)
                return rc;
        } else if (!dashdash && arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("check", "unknown option '%s'", arg);
        } else {
            a->suites[a->n_suites++] = argv[i]; /* compacts in place: n_suites <= i */
        }
    }
    if (a->n_suites == 0)
        return cli_usage_error("check", "no suite given");
    return CLI_OK;
}

static int load_cases(const check_args *a, suite_case **cases, size_t *n)
{
    for (int i = 0; i < a->n_suites; i++) {
        attnbwd_status s = suite_load(a->suites[i], cases, n);
        if (s != ATTNBWD_OK)
            return cli_lib_error(s);
    }
    return cli_precisions_apply(&a->precisions, "check", cases, n);
}

/* Times a passing case and appends the timing columns; 0 or -1 on error. */
static int time_case(attnbwd_ctx *ctx, const check_args *a, const suite_case *c, check_result *r)
{
    attnbwd_status s = check_time_case(ctx, c, a->iters, r);
    if (s != ATTNBWD_OK) {
        printf("  time: %s: %s\n", attnbwd_status_name(s), attnbwd_last_error());
        return -1;
    }
    /* The floor: the bytes that must move at the copy rate, or for problem 2
     * the matrix work at the measured TF32 tensor-core rate if that is longer. */
    double floor_us = check_floor_bytes(c) / (a->copy_gbps * 1e9) * 1e6;
    double math_us = check_floor_flops(c) / (TF32_TFLOPS * 1e12) * 1e6;
    if (math_us > floor_us) floor_us = math_us;
    double frac = r->median_us > 0.0 ? floor_us / r->median_us : 0.0;
    printf("  %9.2f us  %7.1f GB/s  %.2f of floor", r->median_us, r->gbytes_per_s, frac);
    if (check_floor_flops(c) > 0.0 && r->median_us > 0.0)
        printf("  %.1f TFLOP/s", check_floor_flops(c) / (r->median_us * 1e-6) / 1e12);
    printf("\n");
    /* Problem 2: each kernel alone, slowest first. */
    for (const char *line = r->breakdown; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        printf("      %.*s\n", len, line);
        line += len + (end ? 1 : 0);
    }
    return 0;
}

/* Checks (and times) one case, printing its line; returns 1 when it passed. */
static int run_case(attnbwd_ctx *ctx, const check_args *a, const suite_case *c)
{
    check_result r;
    memset(&r, 0, sizeof r);
    attnbwd_status s = check_case(ctx, c, a->seed, &r);
    if (s != ATTNBWD_OK) {
        printf("%-44s ERROR %s: %s\n", c->name, attnbwd_status_name(s), attnbwd_last_error());
        fflush(stdout);
        return 0;
    }
    printf("%-44s %s  max abs err %.3g  match %.6f", c->name, r.pass ? "PASS" : "FAIL", r.max_abs_err,
           r.match_fraction);
    int ok = r.pass;
    if (ok && a->time)
        ok = time_case(ctx, a, c, &r) == 0;
    else
        printf("\n");
    if (!r.pass && r.message[0])
        printf("    %s\n", r.message);
    fflush(stdout);
    return ok;
}

static int run_cases(const cli_common *common, const check_args *a, const suite_case *cases, size_t n)
{
    attnbwd_ctx *ctx = NULL;
    int rc = cli_open(common, &ctx);
    if (rc != CLI_OK)
        return rc;
    size_t passed = 0;
    for (size_t i = 0; i < n; i++)
        passed += (size_t)run_case(ctx, a, &cases[i]);
    attnbwd_close(ctx);
    printf("%zu passed, %zu failed\n", passed, n - passed);
    return passed == n ? CLI_OK : CLI_FAIL;
}

int cmd_check(const cli_common *common, int argc, char **argv)
{
    check_args a = {.seed = 0, .iters = 50, .copy_gbps = 4220.0};
    int rc = parse_check_args(&a, argc, argv);
    if (rc != CLI_OK)
        return rc;
    char why[256] = "";
    if (check_gpu_available(why, sizeof why) != 0) {
        fprintf(stderr, "attnbwd check: no GPU: %s\n", why[0] ? why : "no usable CUDA device");
        return CLI_FAIL;
    }
    suite_case *cases = NULL;
    size_t n = 0;
    rc = load_cases(&a, &cases, &n);
    if (rc == CLI_OK)
        rc = run_cases(common, &a, cases, n);
    free(cases);
    return rc;
}
