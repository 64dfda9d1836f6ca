/* `attnbwd explore`: for each case of the suites, every candidate tile choice
 * the problem's Lua script offers is built (through the cache), checked
 * against the fp64 reference (a failing one is rejected) and timed on the GPU
 * (cold L2, median); the fastest is the winner. Prints the heuristic's time
 * against the winner's and, with --out, writes the winners as a Lua tuning
 * table for this GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "suite.h"

void cmd_explore_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd explore [OPTIONS] SUITE...\n\n"
                 "For every case of each SUITE, builds each candidate tile choice of the\n"
                 "problem's Lua script, rejects those that fail the fp64 check, times the rest\n"
                 "(cold L2, median of --iters) and reports the fastest against the heuristic's.\n\n"
                 "options:\n"
                 "  --iters N   timed launches per candidate (default 20)\n"
                 "  --seed N    seed of the check's random inputs (default 1)\n"
                 "  --out FILE  write the winners as a Lua tuning table for this GPU\n\n"
                 "example:\n"
                 "  attnbwd explore --out tuning.lua sol066_workload\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

typedef struct winner {
    char key[128];
    char tiles[256];
    double best_us, heuristic_us;
} winner;

/* Explores one case; fills w. Returns 0, or -1 when no candidate passed. */
static int explore_case(attnbwd_ctx *ctx, const suite_case *c, int iters, uint64_t seed, winner *w)
{
    char **cand = NULL;
    size_t n = 0;
    attnbwd_status s = attnbwd_candidates(ctx, &c->shape, &cand, &n);
    if (s != ATTNBWD_OK) {
        printf("%s: %s: %s\n", c->name, attnbwd_status_name(s), attnbwd_last_error());
        return -1;
    }
    w->best_us = INFINITY;
    w->heuristic_us = NAN;
    printf("%s: %zu candidates\n", c->name, n);
    for (size_t i = 0; i < n; i++) {
        suite_case cc = *c;
        cc.tiles = cand[i];
        check_result r;
        s = check_case(ctx, &cc, seed + i, &r);
        if (s == ATTNBWD_OK && r.pass) s = check_time_case(ctx, &cc, iters, &r);
        if (s != ATTNBWD_OK || !r.pass) {
            printf("  %-72s rejected: %s\n", cand[i], s != ATTNBWD_OK ? attnbwd_last_error() : r.message);
        } else {
            printf("  %-72s %9.2f us%s\n", cand[i], r.median_us, i == 0 ? "  (heuristic)" : "");
            if (i == 0) w->heuristic_us = r.median_us;
            if (r.median_us < w->best_us) {
                w->best_us = r.median_us;
                snprintf(w->tiles, sizeof w->tiles, "%s", cand[i]);
            }
        }
        fflush(stdout);
        attnbwd_free(cand[i]);
    }
    attnbwd_free(cand);
    snprintf(w->key, sizeof w->key, "%s B=%lld H=%lld T=%lld dropout=%d", cli_problem_name(c->shape.problem),
             (long long)c->shape.batch, (long long)c->shape.heads, (long long)c->shape.seq_len, c->shape.dropout);
    if (!isfinite(w->best_us)) return -1;
    printf("  winner %s: %.2f us; heuristic %.2f us (%.3f of the best)\n", w->tiles, w->best_us, w->heuristic_us,
           w->best_us / w->heuristic_us);
    return 0;
}

static int write_table(const char *path, const char *gpu, const winner *w, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "attnbwd explore: cannot write %s\n", path);
        return CLI_FAIL;
    }
    fprintf(f, "-- Tuning table written by `attnbwd explore`: the fastest tiles measured\n"
               "-- for each shape on this GPU model (cold L2, median).\n"
               "return {\n  gpu = \"%s\",\n  entries = {\n", gpu);
    for (size_t i = 0; i < n; i++)
        if (w[i].tiles[0])
            fprintf(f, "    [\"%s\"] = \"%s\", -- %.2f us; heuristic %.2f us\n", w[i].key, w[i].tiles, w[i].best_us,
                    w[i].heuristic_us);
    fprintf(f, "  },\n}\n");
    return fclose(f) == 0 ? CLI_OK : CLI_FAIL;
}

int cmd_explore(const cli_common *common, int argc, char **argv)
{
    int iters = 20;
    uint64_t seed = 1;
    const char *out = NULL;
    char **suites = argv, err[160];
    int n_suites = 0;
    for (int i = 0; i < argc; i++) {
        const char *val = NULL;
        int64_t v;
        int r;
        if ((r = cli_opt_value("explore", argc, argv, &i, "--iters", &val)) != 0) {
            if (r < 0 || cli_parse_i64("--iters", val, 1, 10000, &v, err, sizeof err) != 0)
                return r < 0 ? CLI_USAGE : cli_usage_error("explore", "%s", err);
            iters = (int)v;
        } else if ((r = cli_opt_value("explore", argc, argv, &i, "--seed", &val)) != 0) {
            if (r < 0 || cli_parse_i64("--seed", val, 0, INT64_MAX, &v, err, sizeof err) != 0)
                return r < 0 ? CLI_USAGE : cli_usage_error("explore", "%s", err);
            seed = (uint64_t)v;
        } else if ((r = cli_opt_value("explore", argc, argv, &i, "--out", &val)) != 0) {
            if (r < 0) return CLI_USAGE;
            out = val;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("explore", "unknown option '%s'", argv[i]);
        } else {
            suites[n_suites++] = argv[i];
        }
    }
    if (!n_suites) return cli_usage_error("explore", "no suite given");
    char why[256];
    if (check_gpu_available(why, sizeof why) != 0) {
        fprintf(stderr, "attnbwd explore: no GPU: %s\n", why);
        return CLI_FAIL;
    }
    suite_case *cases = NULL;
    size_t n = 0;
    for (int i = 0; i < n_suites; i++) {
        attnbwd_status s = suite_load(suites[i], &cases, &n);
        if (s != ATTNBWD_OK) return cli_lib_error(s);
    }
    attnbwd_ctx *ctx = NULL;
    int rc = cli_open(common, &ctx);
    if (rc != CLI_OK) {
        free(cases);
        return rc;
    }
    winner *w = calloc(n ? n : 1, sizeof *w);
    double log_ratio = 0;
    size_t explored = 0;
    for (size_t i = 0; w && i < n; i++) {
        if (explore_case(ctx, &cases[i], iters, seed, &w[i]) == 0 && isfinite(w[i].heuristic_us)) {
            log_ratio += log(w[i].best_us / w[i].heuristic_us);
            explored++;
        }
    }
    if (explored)
        printf("heuristic against the explored best over %zu cases: geometric mean %.3f of the best's speed\n",
               explored, exp(log_ratio / (double)explored));
    attnbwd_ctx_info info;
    attnbwd_ctx_get_info(ctx, &info);
    if (out && w) rc = write_table(out, info.device_name, w, n);
    free(w);
    free(cases);
    attnbwd_close(ctx);
    return explored == n ? rc : CLI_FAIL;
}
