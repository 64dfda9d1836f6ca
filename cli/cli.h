/* Internal header of the `attnbwd` command-line tool: the common options, the
 * subcommand entry points and small shared helpers (number and shape parsing,
 * opening a context, reporting library errors). The helpers are static inline
 * so every subcommand file (and tests/test_cli.c) can use them without an
 * extra source file. */
#ifndef ATTNBWD_CLI_H
#define ATTNBWD_CLI_H

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnbwd.h"
#include "check.h"

/* Exit codes. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Options every subcommand accepts; main.c fills them. */
typedef struct cli_common {
    const char *arch;      /* --arch sm_XX, or NULL: the device's */
    const char *cache_dir; /* --cache-dir DIR, or NULL: the library's default */
    int no_cache;          /* --no-cache */
    int verbose;           /* number of -v */
    int quiet;             /* -q */
    const char *gpu_model; /* options.gpu_model (prewarm --gpu, info --gpu), or NULL */
} cli_common;

typedef int (*cli_cmd_fn)(const cli_common *common, int argc, char **argv);
typedef void (*cli_usage_fn)(FILE *out);

/* One per subcommand file. argv holds only the subcommand's own arguments
 * (the common options are already taken out); argv[0] is the first of them. */
int cmd_info(const cli_common *common, int argc, char **argv);
int cmd_gen(const cli_common *common, int argc, char **argv);
int cmd_prewarm(const cli_common *common, int argc, char **argv);
int cmd_check(const cli_common *common, int argc, char **argv);
int cmd_explore(const cli_common *common, int argc, char **argv);
int cmd_lua(const cli_common *common, int argc, char **argv);
int cmd_cache(const cli_common *common, int argc, char **argv);
void cmd_info_usage(FILE *out);
void cmd_gen_usage(FILE *out);
void cmd_prewarm_usage(FILE *out);
void cmd_check_usage(FILE *out);
void cmd_explore_usage(FILE *out);
void cmd_lua_usage(FILE *out);
void cmd_cache_usage(FILE *out);

/* Printed at the end of every subcommand's --help. */
#define CLI_COMMON_HELP                                                                   \
    "common options (any command):\n"                                                     \
    "  --arch sm_XX     compile for this architecture; no GPU needed\n"                   \
    "  --cache-dir DIR  the disk cache of cubins (default: $ATTNBWD_CACHE_DIR,\n"         \
    "                   $XDG_CACHE_HOME/attnbwd, ~/.cache/attnbwd)\n"                     \
    "  --no-cache       keep kernels in memory only: no disk cache reads or writes\n"     \
    "                   (ATTNBWD_CACHE=ro: read the folder as a shared read-only\n"      \
    "                   store, never written; ATTNBWD_CACHE_LOCK_WAIT=SECONDS: how\n"    \
    "                   long to wait for another process compiling the same kernel,\n"  \
    "                   default 120)\n"                                                  \
    "  -v, --verbose    log each compile and disk cache hit (-vv: debug)\n"               \
    "  -q, --quiet      no log lines and no progress, only results and errors\n"          \
    "  -h, --help       this help\n"

/* A usage error of subcommand `cmd`: "attnbwd CMD: ..." on stderr, exit 2. */
static inline int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    const char *sep = cmd && cmd[0] ? " " : "";
    cmd = cmd ? cmd : "";
    fprintf(stderr, "attnbwd%s%s: ", sep, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'attnbwd%s%s --help')\n", sep, cmd);
    return CLI_USAGE;
}

/* A failed library call: "attnbwd: <status name>: <message>", exit 1. */
static inline int cli_lib_error(attnbwd_status s)
{
    const char *msg = attnbwd_last_error();
    fprintf(stderr, "attnbwd: %s: %s\n", attnbwd_status_name(s), msg && msg[0] ? msg : "(no message)");
    return CLI_FAIL;
}

static inline int cli_log_level(const cli_common *c)
{
    if (c->quiet)
        return ATTNBWD_LOG_QUIET;
    if (c->verbose >= 2)
        return ATTNBWD_LOG_DEBUG;
    return c->verbose == 1 ? ATTNBWD_LOG_INFO : ATTNBWD_LOG_WARN;
}

/* Opens a context for the common options; arch overrides c->arch when set. */
static inline attnbwd_status cli_open_arch(const cli_common *c, const char *arch, attnbwd_ctx **ctx)
{
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = arch ? arch : c->arch;
    o.cache_dir = c->cache_dir;
    if (c->no_cache)
        o.disk_cache = 0;
    o.log_level = cli_log_level(c);
    o.gpu_model = c->gpu_model;
    *ctx = NULL;
    return attnbwd_open(&o, ctx);
}

/* Opens a context, printing the library error (and a hint when there is no
 * GPU and no --arch) on failure. Returns CLI_OK or CLI_FAIL. */
static inline int cli_open(const cli_common *c, attnbwd_ctx **ctx)
{
    attnbwd_status s = cli_open_arch(c, NULL, ctx);
    if (s == ATTNBWD_OK)
        return CLI_OK;
    cli_lib_error(s);
    if ((s == ATTNBWD_ERR_NO_DRIVER || s == ATTNBWD_ERR_NO_DEVICE) && !c->arch)
        fprintf(stderr, "attnbwd: no GPU to read the arch from; pass --arch sm_XX to compile without one\n");
    return CLI_FAIL;
}

/* Is name the option `opt`, as "--opt" or "--opt=VALUE"? */
static inline int cli_is_opt(const char *arg, const char *opt)
{
    size_t n = strlen(opt);
    return strncmp(arg, opt, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Takes the value of option `opt` at argv[*i] ("--opt V" or "--opt=V").
 * Returns 0 when argv[*i] is not that option, 1 with *val set (and *i moved
 * past a separate value), -1 when the value is missing (message printed). */
static inline int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *opt,
                                const char **val)
{
    const char *arg = argv[*i];
    if (!cli_is_opt(arg, opt))
        return 0;
    size_t n = strlen(opt);
    if (arg[n] == '=') {
        *val = arg + n + 1;
    } else if (*i + 1 < argc) {
        *val = argv[++*i];
    } else {
        cli_usage_error(cmd, "option '%s' needs a value", opt);
        return -1;
    }
    if (!(*val)[0]) {
        cli_usage_error(cmd, "option '%s' needs a non-empty value", opt);
        return -1;
    }
    return 1;
}

/* Parses a whole decimal integer in [min, max]. On failure writes a message
 * naming `field` into err and returns -1. */
static inline int cli_parse_i64(const char *field, const char *text, int64_t min, int64_t max,
                                int64_t *out, char *err, size_t errlen)
{
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (*p < '0' || *p > '9') {
        snprintf(err, errlen, "%s: '%s' is not an integer", field, text);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0') {
        snprintf(err, errlen, "%s: '%s' is not an integer", field, text);
        return -1;
    }
    if (errno == ERANGE || v < min || v > max) {
        snprintf(err, errlen, "%s: %s is out of range (%" PRId64 " to %" PRId64 ")", field, text, min,
                 max);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* Parses a whole finite decimal number in [min, max) (max_open) or [min, max]. */
static inline int cli_parse_double(const char *field, const char *text, double min, double max,
                                   int max_open, double *out, char *err, size_t errlen)
{
    const char *p = text;
    if (*p == '+' || *p == '-')
        p++;
    if (!((*p >= '0' && *p <= '9') || *p == '.')) {
        snprintf(err, errlen, "%s: '%s' is not a number", field, text);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (*end != '\0' || !isfinite(v) || errno == ERANGE) {
        snprintf(err, errlen, "%s: '%s' is not a finite number", field, text);
        return -1;
    }
    if (v < min || v > max || (max_open && v == max)) {
        snprintf(err, errlen, "%s: %s is out of range (%g to %g%s)", field, text, min, max,
                 max_open ? ", exclusive" : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* Largest batch, heads or seq_len the tool passes on (the library has its own limits). */
#define CLI_DIM_MAX INT64_C(2147483647)

/* A shape as typed on the command line: "B,H,T" or "B,H,T,p". */
typedef struct cli_shape {
    int64_t batch, heads, seq_len;
    double p_dropout; /* 0 when not given */
    int has_p;
} cli_shape;

/* Parses "B,H,T[,p]". heads_min is 1 for softmax_dropout_bwd, 0 where 0 is
 * allowed. On failure err names the field (batch, heads, seq_len, p_dropout). */
static inline int cli_parse_shape(const char *text, int64_t heads_min, cli_shape *out, char *err,
                                  size_t errlen)
{
    static const char *const fields[4] = {"batch", "heads", "seq_len", "p_dropout"};
    char buf[128];
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "shape '%.40s...' is too long (expected B,H,T[,p])", text);
        return -1;
    }
    memcpy(buf, text, strlen(text) + 1);
    char *parts[5];
    int n = 0;
    char *s = buf;
    for (;;) {
        if (n == 4) {
            snprintf(err, errlen, "shape '%s' has too many fields (expected B,H,T[,p])", text);
            return -1;
        }
        parts[n++] = s;
        char *comma = strchr(s, ',');
        if (!comma)
            break;
        *comma = '\0';
        s = comma + 1;
    }
    if (n < 3) {
        snprintf(err, errlen, "shape '%s' has %d field%s (expected B,H,T[,p])", text, n,
                 n == 1 ? "" : "s");
        return -1;
    }
    cli_shape sh = {0};
    int64_t *dims[3] = {&sh.batch, &sh.heads, &sh.seq_len};
    for (int k = 0; k < 3; k++) {
        int64_t lo = k == 1 ? heads_min : 1;
        if (cli_parse_i64(fields[k], parts[k], lo, CLI_DIM_MAX, dims[k], err, errlen) != 0)
            return -1;
    }
    if (n == 4) {
        if (cli_parse_double(fields[3], parts[3], 0.0, 1.0, 1, &sh.p_dropout, err, errlen) != 0)
            return -1;
        sh.has_p = 1;
    }
    *out = sh;
    return 0;
}

/* A problem's name (check.h's table), or its number ("1", "2") -> the enum; 0 when unknown. */
static inline attnbwd_problem cli_parse_problem(const char *name)
{
    char *end = NULL;
    const long n = strtol(name, &end, 10);
    if (end != name && *end == '\0')
        return strcmp(check_problem_name((attnbwd_problem)n), "unknown_problem") ? (attnbwd_problem)n
                                                                                 : (attnbwd_problem)0;
    return check_problem_from_name(name);
}

static inline const char *cli_problem_name(attnbwd_problem p) { return check_problem_name(p); }

/* Problem 2's name of an attnbwd_precision, as --precision takes it. */
static inline const char *cli_precision_name(int p)
{
    return p == ATTNBWD_PRECISION_FP16 ? "fp16" : p == ATTNBWD_PRECISION_FP32 ? "fp32" : "tf32";
}

/* A short description of a shape: "B=2 H=16 T=541 p" (p: dropout on);
 * problem 2 is prefixed with "edit ", and followed by its precision where
 * that is not the default tf32 ("edit B=1 H=16 T=17 p fp16"). */
static inline void cli_format_shape(const attnbwd_shape *s, char *buf, size_t len)
{
    const int edit = s->problem == ATTNBWD_EDIT_ATTENTION_BWD, named = edit && s->precision != ATTNBWD_PRECISION_TF32;
    snprintf(buf, len, "%sB=%" PRId64 " H=%" PRId64 " T=%" PRId64 "%s%s%s", edit ? "edit " : "", s->batch, s->heads,
             s->seq_len, s->dropout ? " p" : "", named ? " " : "", named ? cli_precision_name(s->precision) : "");
}

/* "1234 bytes" -> "1.2 KiB" style; exact bytes below 1 KiB. */
static inline void cli_human_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", bytes);
        return;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
}

#endif
