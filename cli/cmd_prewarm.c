/* `attnbwd prewarm`: find in the disk cache or compile the kernel of every
 * distinct shape of one or more suites, for the device or for each GPU model
 * --gpu names, with a progress line per kernel (a live line on a terminal)
 * and a summary per model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gpu_args.h"
#include "precision_args.h"
#include "suite.h"

void cmd_prewarm_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd prewarm [OPTIONS] SUITE...\n\n"
                 "Loads every SUITE (a workload .jsonl file, a Lua suite, or the name of a\n"
                 "shipped suite such as sol066_workload), and finds in the disk cache or compiles\n"
                 "the kernel of each distinct shape, for the GPU model of the device or of each\n"
                 "--gpu. Prints a line per kernel and a summary per model:\n"
                 "  16 kernels for sm_90, NVIDIA H200 (lua/tuning_h200.lua): 16 compiled, 0 from the\n"
                 "  disk cache, 0 failed, 6.21 s (cache: DIR)\n"
                 "A cache made without a GPU for --gpu h100 holds the very kernels an H100 asks\n"
                 "for. Exits 1 when any kernel failed, listing why.\n\n"
                 "options:\n"
                 "  --threads N   compile with N threads (default 0: one per online core)\n"
                 CLI_GPU_HELP CLI_PRECISION_HELP "\n"
                 "examples:\n"
                 "  attnbwd prewarm --gpu h100,h200 sol066_workload sol072_workload\n"
                 "  attnbwd prewarm --precision tf32,fp16 sol072_workload\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

typedef struct prewarm_args {
    int threads;
    int n_suites;
    char **suites; /* points into argv */
    cli_gpus gpus;
    cli_precisions precisions;
} prewarm_args;

static int parse_prewarm_args(prewarm_args *a, int argc, char **argv)
{
    int dashdash = 0;
    a->suites = argv;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        int r = dashdash ? 0 : cli_opt_value("prewarm", argc, argv, &i, "--threads", &val);
        if (r < 0)
            return CLI_USAGE;
        if (r == 0 && !dashdash) {
            r = cli_opt_value("prewarm", argc, argv, &i, "--gpu", &val);
            if (r < 0 || (r > 0 && cli_gpus_add(&a->gpus, "prewarm", val) != CLI_OK))
                return CLI_USAGE;
            if (r > 0)
                continue;
            r = cli_opt_value("prewarm", argc, argv, &i, "--precision", &val);
            if (r < 0 || (r > 0 && cli_precisions_add(&a->precisions, "prewarm", val) != CLI_OK))
                return CLI_USAGE;
            if (r > 0)
                continue;
        }
        if (r > 0) {
            char err[160];
            int64_t t;
            if (cli_parse_i64("--threads", val, 0, 4096, &t, err, sizeof err) != 0)
                return cli_usage_error("prewarm", "%s", err);
            a->threads = (int)t;
        } else if (!dashdash && strcmp(arg, "--") == 0) {
            dashdash = 1;
        } else if (!dashdash && arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("prewarm", "unknown option '%s'", arg);
        } else {
            a->suites[a->n_suites++] = argv[i]; /* compacts in place: n_suites <= i */
        }
    }
    if (a->n_suites == 0)
        return cli_usage_error("prewarm", "no suite given");
    return CLI_OK;
}

static int same_shape(const attnbwd_shape *a, const attnbwd_shape *b)
{
    return a->problem == b->problem && a->batch == b->batch && a->heads == b->heads &&
           a->seq_len == b->seq_len && a->dropout == b->dropout && a->precision == b->precision;
}

/* Loads every suite and keeps each distinct shape once, in order. */
static int collect_shapes(const prewarm_args *a, attnbwd_shape **out, size_t *n_out, int verbose)
{
    suite_case *cases = NULL;
    size_t n = 0;
    for (int i = 0; i < a->n_suites; i++) {
        attnbwd_status s = suite_load(a->suites[i], &cases, &n);
        if (s != ATTNBWD_OK) {
            free(cases);
            return cli_lib_error(s);
        }
    }
    if (cli_precisions_apply(&a->precisions, "prewarm", &cases, &n) != CLI_OK) {
        free(cases);
        return CLI_FAIL;
    }
    attnbwd_shape *shapes = calloc(n ? n : 1, sizeof *shapes);
    if (!shapes) {
        free(cases);
        fprintf(stderr, "attnbwd prewarm: out of memory\n");
        return CLI_FAIL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < m && !same_shape(&shapes[j], &cases[i].shape))
            j++;
        if (j == m)
            shapes[m++] = cases[i].shape;
    }
    if (verbose)
        fprintf(stderr, "attnbwd prewarm: %zu cases in %d suite%s, %zu distinct shapes\n", n,
                a->n_suites, a->n_suites == 1 ? "" : "s", m);
    free(cases);
    *out = shapes;
    *n_out = m;
    return CLI_OK;
}

typedef struct progress {
    int tty;          /* live line on a terminal */
    int quiet;
    int live;         /* a live line without a newline is on screen */
    int width;        /* digits of the total */
    char **failures;  /* message of each failed shape, by index; NULL otherwise */
    const attnbwd_shape *shapes;
    size_t n;
} progress;

static const char *origin_word(const attnbwd_prewarm_event *ev)
{
    if (ev->status != ATTNBWD_OK)
        return "FAILED";
    switch (ev->origin) {
    case ATTNBWD_FROM_COMPILE: return "compiled";
    case ATTNBWD_FROM_DISK: return "from disk";
    case ATTNBWD_FROM_MEMORY: return "in memory";
    }
    return "?";
}

static char *dup_failure(const attnbwd_prewarm_event *ev)
{
    const char *msg = ev->message && ev->message[0] ? ev->message : "(no message)";
    const char *name = attnbwd_status_name(ev->status);
    size_t len = strlen(name) + strlen(msg) + 3;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s: %s", name, msg);
    return s;
}

static void on_progress(const attnbwd_prewarm_event *ev, void *user)
{
    progress *pg = user;
    if (ev->index >= pg->n)
        return;
    if (ev->status != ATTNBWD_OK && !pg->failures[ev->index])
        pg->failures[ev->index] = dup_failure(ev);
    if (pg->quiet)
        return;
    char desc[96];
    cli_format_shape(ev->shape ? ev->shape : &pg->shapes[ev->index], desc, sizeof desc);
    fprintf(stderr, "%s[%*zu/%zu] %-9s  %-22s %6.2f s%s", pg->tty ? "\r" : "", pg->width, ev->done,
            ev->total, origin_word(ev), desc, ev->seconds, pg->tty ? "\033[K" : "\n");
    pg->live = pg->tty;
    if (pg->tty && ev->status != ATTNBWD_OK) {
        fputc('\n', stderr); /* keep failed kernels on screen */
        pg->live = 0;
    }
    fflush(stderr);
}

static void print_summary(attnbwd_ctx *ctx, size_t n, const attnbwd_prewarm_summary *sum)
{
    attnbwd_ctx_info in;
    memset(&in, 0, sizeof in);
    int ok = attnbwd_ctx_get_info(ctx, &in) == ATTNBWD_OK;
    const char *arch = ok && in.arch ? in.arch : "?";
    /* The folder when entries are read, "read-only" beside it when they are
     * not written; else "off" (the warning at the start said why). */
    char dir[4200] = "off";
    if (ok && in.cache_read && in.cache_dir[0])
        snprintf(dir, sizeof dir, "%.4000s%s", in.cache_dir, in.disk_cache ? "" : ", read-only");
    char memory[64] = "", model[256];
    if (sum->from_memory)
        snprintf(memory, sizeof memory, ", %zu already in memory", sum->from_memory);
    if (ok && in.gpu_model[0])
        snprintf(model, sizeof model, "%s (%s)", in.gpu_model,
                 in.tuning_table[0] ? in.tuning_table : "no tuning table");
    else
        snprintf(model, sizeof model, "no GPU model (the heuristic's tiles)");
    printf("%zu kernels for %s, %s: %zu compiled, %zu from the disk cache, %zu failed%s, %.*f s (cache: %s)\n",
           n, arch, model, sum->compiled, sum->from_disk, sum->failed, memory, sum->seconds < 10.0 ? 2 : 1,
           sum->seconds, dir);
    fflush(stdout);
}

/* Lists the failures on stderr and frees them; returns how many there were.
 * Only the first line of each message unless verbose (Lua tracebacks and
 * NVRTC logs run long). */
static size_t report_failures(progress *pg, const attnbwd_shape *shapes, size_t n, int verbose)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pg->failures[i])
            continue;
        char desc[96];
        cli_format_shape(&shapes[i], desc, sizeof desc);
        const char *msg = pg->failures[i];
        int first = verbose ? (int)strlen(msg) : (int)strcspn(msg, "\n");
        fprintf(stderr, "attnbwd prewarm: failed %s: %.*s%s\n", desc, first, msg,
                msg[first] ? " [...; -v for the full message]" : "");
        free(pg->failures[i]);
        count++;
    }
    return count;
}

static int run_prewarm(attnbwd_ctx *ctx, const attnbwd_shape *shapes, size_t n, int threads,
                       const cli_common *common)
{
    progress pg = {.tty = isatty(STDERR_FILENO), .quiet = common->quiet, .width = 1,
                   .shapes = shapes, .n = n};
    for (size_t t = n; t >= 10; t /= 10)
        pg.width++;
    pg.failures = calloc(n ? n : 1, sizeof *pg.failures);
    if (!pg.failures) {
        fprintf(stderr, "attnbwd prewarm: out of memory\n");
        return CLI_FAIL;
    }
    attnbwd_prewarm_summary sum;
    memset(&sum, 0, sizeof sum);
    attnbwd_status s = n ? attnbwd_prewarm(ctx, shapes, n, threads, on_progress, &pg, &sum) : ATTNBWD_OK;
    char saved[512];
    snprintf(saved, sizeof saved, "%s", attnbwd_last_error());
    if (pg.live)
        fputs("\r\033[K", stderr);
    print_summary(ctx, n, &sum);
    size_t failed = report_failures(&pg, shapes, n, common->verbose > 0);
    free(pg.failures);
    if (s != ATTNBWD_OK && failed == 0 && sum.failed == 0) {
        fprintf(stderr, "attnbwd: %s: %s\n", attnbwd_status_name(s), saved[0] ? saved : "(no message)");
        return CLI_FAIL;
    }
    return s == ATTNBWD_OK && failed == 0 && sum.failed == 0 ? CLI_OK : CLI_FAIL;
}

/* Which table the context's model gets, before its kernels (the summary
 * names it again); a warning where a prewarm without a GPU names no model. */
static void say_model(attnbwd_ctx *ctx, const cli_common *common)
{
    attnbwd_ctx_info in;
    memset(&in, 0, sizeof in);
    if (common->quiet || attnbwd_ctx_get_info(ctx, &in) != ATTNBWD_OK)
        return;
    if (in.gpu_model[0])
        fprintf(stderr, "attnbwd prewarm: for %s (from %s): tuning table %s\n", in.gpu_model, in.gpu_model_from,
                in.tuning_note);
    else
        fprintf(stderr, "attnbwd prewarm: no GPU model (no device, --gpu or ATTNBWD_GPU_MODEL): the heuristic's "
                        "tiles, which a GPU with a tuning table does not ask for where it has an entry; "
                        "--gpu h100,h200 prewarms for the shipped tables\n");
}

/* One prewarm per model (--gpu), or one for the device's. */
static int prewarm_models(const prewarm_args *a, const attnbwd_shape *shapes, size_t n, const cli_common *common)
{
    int rc = CLI_OK, models = a->gpus.n ? a->gpus.n : 1;
    for (int m = 0; m < models; m++) {
        cli_common c = *common;
        if (a->gpus.n)
            c.gpu_model = a->gpus.names[m];
        attnbwd_ctx *ctx = NULL;
        int r = cli_open(&c, &ctx);
        if (r == CLI_OK) {
            say_model(ctx, &c);
            r = run_prewarm(ctx, shapes, n, a->threads, &c);
        }
        attnbwd_close(ctx);
        if (r != CLI_OK)
            rc = r;
    }
    return rc;
}

int cmd_prewarm(const cli_common *common, int argc, char **argv)
{
    prewarm_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_prewarm_args(&a, argc, argv);
    attnbwd_shape *shapes = NULL;
    size_t n = 0;
    if (rc == CLI_OK)
        rc = collect_shapes(&a, &shapes, &n, common->verbose > 0);
    if (rc == CLI_OK)
        rc = prewarm_models(&a, shapes, n, common);
    cli_gpus_free(&a.gpus);
    free(shapes);
    return rc;
}
