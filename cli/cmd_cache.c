/* `attnbwd cache ...`: the disk cache folder (the one `info` shows) as a
 * store to inspect, trim and ship: clear, stats, list, verify, prune,
 * export and import. Only the public API (attnbwd_cache_*). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "suite.h"

void cmd_cache_usage(FILE *out)
{
    fprintf(out,
            "usage: attnbwd cache SUBCOMMAND [ARGS] [OPTIONS]\n\n"
            "The disk cache folder of compiled kernels. Needs no GPU (except export --suite\n"
            "without --arch). Other processes may use the folder meanwhile.\n\n"
            "subcommands:\n"
            "  clear           remove every entry, its info and the counts\n"
            "  stats [--json]  entries, bytes and the budget; disk hits, misses (kernels\n"
            "                  compiled and written) and evictions, since when\n"
            "  list [--json]   each entry, most recently used first: key, size, last use,\n"
            "                  arch, shape, GPU model, kernel and tiles\n"
            "  verify [--json] read every entry whole and check it (checksum, cubin, key);\n"
            "                  exits 1 when any is damaged, naming each and why\n"
            "  prune [--older-than DURATION]\n"
            "                  remove least recently used entries down to the budget, and\n"
            "                  every entry unused for DURATION (90s, 30m, 12h, 7d, 2w)\n"
            "  export FILE [--suite SUITE]... [--key PREFIX]...\n"
            "                  write one archive of the selected entries (default: all).\n"
            "                  --suite: the kernels of a suite's shapes for --arch or the\n"
            "                  GPU (those not in the folder are compiled first); --key: the\n"
            "                  entries whose key starts with PREFIX (see list)\n"
            "  import FILE     check every entry of an archive, then add each atomically;\n"
            "                  an archive of another format, library or NVRTC version is\n"
            "                  refused\n\n"
            "The budget: ATTNBWD_CACHE_MAX_BYTES (e.g. 512M, 2G; default 1G). Past it, each\n"
            "write removes the least recently used entries (last use: written or found).\n\n"
            "examples:\n"
            "  attnbwd cache stats --cache-dir /tmp/attnbwd-cache\n"
            "  attnbwd cache prune --older-than 30d\n"
            "  attnbwd cache export kernels.atba --arch sm_90 --suite sol066_workload\n"
            "  attnbwd cache import kernels.atba\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

/* ---- output helpers ---- */

static void format_time(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !localtime_r(&tt, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, n, "-");
}

/* Prints a cJSON tree and frees it. */
static int print_json(cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "attnbwd: out of memory writing JSON\n");
        return CLI_FAIL;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return CLI_OK;
}

/* Takes "--json" out of args; returns -1 (message printed) on anything else. */
static int only_json_flag(const char *sub, int argc, char **argv, int *json)
{
    *json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            *json = 1;
        else {
            char who[32];
            snprintf(who, sizeof who, "cache %s", sub);
            cli_usage_error(who, "unexpected argument '%s'", argv[i]);
            return -1;
        }
    }
    return 0;
}

/* ---- clear, stats ---- */

static int cache_clear(attnbwd_ctx *ctx, const char *dir)
{
    uint64_t files = 0, bytes = 0;
    attnbwd_status s = attnbwd_cache_clear(ctx, &files, &bytes);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    char human[32];
    cli_human_bytes(bytes, human, sizeof human);
    if (dir[0])
        printf("removed %" PRIu64 " files (%s) from %s\n", files, human, dir);
    else
        printf("the disk cache is off: nothing to remove\n");
    return CLI_OK;
}

static cJSON *stats_json(const attnbwd_cache_stats *st, const char *dir)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cache_dir", dir);
    cJSON_AddNumberToObject(o, "entries", (double)st->entries);
    cJSON_AddNumberToObject(o, "bytes", (double)st->bytes);
    cJSON_AddNumberToObject(o, "max_bytes", (double)st->max_bytes);
    cJSON_AddNumberToObject(o, "hits", (double)st->hits);
    cJSON_AddNumberToObject(o, "misses", (double)st->misses);
    cJSON_AddNumberToObject(o, "evicted", (double)st->evicted);
    cJSON_AddNumberToObject(o, "evicted_bytes", (double)st->evicted_bytes);
    if (st->since)
        cJSON_AddNumberToObject(o, "since", (double)st->since);
    else
        cJSON_AddNullToObject(o, "since");
    return o;
}

static int cache_stats(attnbwd_ctx *ctx, const char *dir, int json)
{
    attnbwd_cache_stats st;
    attnbwd_status s = attnbwd_cache_get_stats(ctx, &st);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    if (json)
        return print_json(stats_json(&st, dir));
    char used[32], max[32], evicted[32], since[32];
    cli_human_bytes(st.bytes, used, sizeof used);
    cli_human_bytes(st.max_bytes, max, sizeof max);
    cli_human_bytes(st.evicted_bytes, evicted, sizeof evicted);
    format_time(st.since, since, sizeof since);
    printf("%-10s %s\n", "cache dir", dir[0] ? dir : "(off)");
    printf("%-10s %" PRIu64 "\n", "entries", st.entries);
    printf("%-10s %s of a %s budget (%" PRIu64 " of %" PRIu64 " bytes)\n", "size", used, max, st.bytes, st.max_bytes);
    printf("%-10s %" PRIu64 "\n", "hits", st.hits);
    printf("%-10s %" PRIu64 " (kernels compiled and written)\n", "misses", st.misses);
    printf("%-10s %" PRIu64 " entries (%s)\n", "evicted", st.evicted, evicted);
    printf("%-10s %s\n", "since", st.since ? since : "- (nothing counted yet)");
    return CLI_OK;
}

/* ---- list, verify ---- */

static cJSON *entry_json(const attnbwd_cache_entry *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", e->key);
    cJSON_AddNumberToObject(o, "bytes", (double)e->bytes);
    cJSON_AddNumberToObject(o, "last_use", (double)e->last_use);
    if (e->problem)
        cJSON_AddStringToObject(o, "problem", e->problem);
    else
        cJSON_AddNullToObject(o, "problem");
    cJSON_AddBoolToObject(o, "current", e->current);
    cJSON_AddStringToObject(o, "library", e->library_version);
    cJSON_AddStringToObject(o, "nvrtc", e->nvrtc_version);
    cJSON_AddStringToObject(o, "arch", e->arch);
    cJSON_AddStringToObject(o, "kernel", e->kernel);
    cJSON_AddStringToObject(o, "tiles", e->tiles);
    if (e->has_shape) {
        cJSON *s = cJSON_AddObjectToObject(o, "shape");
        cJSON_AddStringToObject(s, "problem", cli_problem_name(e->shape.problem));
        cJSON_AddNumberToObject(s, "batch", (double)e->shape.batch);
        cJSON_AddNumberToObject(s, "heads", (double)e->shape.heads);
        cJSON_AddNumberToObject(s, "seq_len", (double)e->shape.seq_len);
        cJSON_AddNumberToObject(s, "dropout", e->shape.dropout);
        cJSON_AddNumberToObject(s, "precision", e->shape.precision);
        cJSON_AddStringToObject(o, "gpu_model", e->gpu_model);
    } else {
        cJSON_AddNullToObject(o, "shape");
        cJSON_AddNullToObject(o, "gpu_model");
    }
    return o;
}

typedef struct lister {
    int json, verify;
    cJSON *array;
    uint64_t count, stale;
} lister;

static void print_entry(const attnbwd_cache_entry *e)
{
    char size[32], when[32], shape[96] = "?";
    cli_human_bytes(e->bytes, size, sizeof size);
    format_time(e->last_use, when, sizeof when);
    if (e->has_shape)
        cli_format_shape(&e->shape, shape, sizeof shape);
    if (e->problem) {
        printf("%.16s  %9s  %s  DAMAGED: %s\n", e->key, size, when, e->problem);
        return;
    }
    const char *gpu = !e->has_shape ? "?" : e->gpu_model[0] ? e->gpu_model : "(no model)";
    printf("%.16s  %9s  %s  %-7s %-22s %-22s %s%s\n", e->key, size, when, e->arch, shape, gpu, e->tiles,
           e->current ? "" : "  [another library or NVRTC version]");
}

static int on_entry(const attnbwd_cache_entry *e, void *user)
{
    lister *l = user;
    l->count++;
    l->stale += !e->problem && !e->current;
    if (l->json)
        cJSON_AddItemToArray(l->array, entry_json(e));
    else if (!l->verify)
        print_entry(e);
    else if (e->problem)
        printf("damaged  %s: %s\n", e->key, e->problem);
    return 0;
}

static int cache_list(attnbwd_ctx *ctx, int json, int verify)
{
    lister l = {.json = json, .verify = verify, .array = json ? cJSON_CreateArray() : NULL};
    if (!json && !verify)
        printf("%-16s  %9s  %-19s  %-7s %-22s %-22s %s\n", "KEY", "SIZE", "LAST USE", "ARCH", "SHAPE", "GPU", "TILES");
    uint64_t damaged = 0;
    attnbwd_status s = attnbwd_cache_list(ctx, verify ? ATTNBWD_CACHE_VERIFY : 0, on_entry, &l, &damaged);
    if (s != ATTNBWD_OK) {
        cJSON_Delete(l.array);
        return cli_lib_error(s);
    }
    int rc = json ? print_json(l.array) : CLI_OK;
    if (verify && !json) {
        printf("%" PRIu64 " entries checked: %" PRIu64 " sound, %" PRIu64 " damaged", l.count, l.count - damaged,
               damaged);
        if (l.stale)
            printf(" (%" PRIu64 " of the sound from another library or NVRTC version, never used by this one)",
                   l.stale);
        printf("\n");
    }
    return rc == CLI_OK && verify && damaged ? CLI_FAIL : rc;
}

/* ---- prune ---- */

/* "90s", "30m", "12h", "7d", "2w" -> seconds; -1 when not such a duration. */
static int64_t parse_duration(const char *text)
{
    char *end = NULL;
    if (!(text[0] >= '0' && text[0] <= '9'))
        return -1;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    static const struct {
        char unit;
        int64_t seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    for (size_t i = 0; errno == 0 && v > 0 && end[0] && !end[1] && i < sizeof units / sizeof units[0]; i++)
        if (end[0] == units[i].unit && v <= INT64_MAX / units[i].seconds)
            return v * units[i].seconds;
    return -1;
}

static int cache_prune(attnbwd_ctx *ctx, const char *dir, int argc, char **argv)
{
    int64_t older = 0;
    for (int i = 0; i < argc; i++) {
        const char *val = NULL;
        int r = cli_opt_value("cache prune", argc, argv, &i, "--older-than", &val);
        if (r < 0)
            return CLI_USAGE;
        if (r == 0)
            return cli_usage_error("cache prune", "unexpected argument '%s'", argv[i]);
        if ((older = parse_duration(val)) <= 0)
            return cli_usage_error("cache prune", "--older-than: '%s' is not a duration such as 90s, 30m, 12h, 7d or 2w",
                                   val);
    }
    uint64_t files = 0, bytes = 0;
    attnbwd_status s = attnbwd_cache_prune(ctx, 0, older, &files, &bytes);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    attnbwd_cache_stats st;
    char human[32], left[32], max[32];
    attnbwd_cache_get_stats(ctx, &st);
    cli_human_bytes(bytes, human, sizeof human);
    cli_human_bytes(st.bytes, left, sizeof left);
    cli_human_bytes(st.max_bytes, max, sizeof max);
    printf("removed %" PRIu64 " entries (%s) from %s; %" PRIu64 " left (%s of a %s budget)\n", files, human, dir,
           st.entries, left, max);
    return CLI_OK;
}

/* ---- export, import ---- */

typedef struct export_args {
    const char *file;
    const char **suites, **prefixes;
    size_t n_suites, n_prefixes;
} export_args;

static int parse_export_args(export_args *a, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *val = NULL;
        int r = cli_opt_value("cache export", argc, argv, &i, "--suite", &val);
        if (r == 0 && (r = cli_opt_value("cache export", argc, argv, &i, "--key", &val)) > 0)
            a->prefixes[a->n_prefixes++] = val;
        else if (r > 0)
            a->suites[a->n_suites++] = val;
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("cache export", "unknown option '%s'", argv[i]);
        if (a->file)
            return cli_usage_error("cache export", "one FILE only ('%s' and '%s')", a->file, argv[i]);
        a->file = argv[i];
    }
    if (!a->file)
        return cli_usage_error("cache export", "no FILE given");
    return CLI_OK;
}

/* The distinct cache keys of the suites' kernels (each found or compiled):
 * *held, malloc'd, *n_held of them. */
static int suite_keys(attnbwd_ctx *ctx, const export_args *a, char (**held)[33], size_t *n_held)
{
    suite_case *cases = NULL;
    size_t n = 0;
    *held = NULL;
    *n_held = 0;
    for (size_t i = 0; i < a->n_suites; i++) {
        attnbwd_status s = suite_load(a->suites[i], &cases, &n);
        if (s != ATTNBWD_OK) {
            free(cases);
            return cli_lib_error(s);
        }
    }
    char(*keys)[33] = calloc(n ? n : 1, sizeof *keys);
    int rc = keys ? CLI_OK : CLI_FAIL;
    for (size_t i = 0; rc == CLI_OK && i < n; i++) {
        attnbwd_kernel *k = NULL;
        attnbwd_kernel_info info;
        attnbwd_status s = cases[i].tiles ? attnbwd_get_kernel_tiles(ctx, &cases[i].shape, cases[i].tiles, &k)
                                          : attnbwd_get_kernel(ctx, &cases[i].shape, &k);
        if (s == ATTNBWD_OK)
            s = attnbwd_kernel_get_info(k, &info);
        if (s != ATTNBWD_OK) {
            fprintf(stderr, "attnbwd cache export: %s:\n", cases[i].name);
            rc = cli_lib_error(s);
            break;
        }
        size_t j = 0;
        while (j < *n_held && strcmp(keys[j], info.cache_key) != 0)
            j++;
        if (j == *n_held)
            snprintf(keys[(*n_held)++], 33, "%s", info.cache_key);
    }
    free(cases);
    *held = keys;
    return rc;
}

static int cache_export(const cli_common *common, attnbwd_ctx *ctx, int argc, char **argv)
{
    export_args a = {0};
    a.suites = calloc((size_t)argc + 1, sizeof *a.suites);
    a.prefixes = calloc((size_t)argc + 1, sizeof *a.prefixes);
    int rc = a.suites && a.prefixes ? parse_export_args(&a, argc, argv) : CLI_FAIL;
    attnbwd_ctx *target = NULL;
    char(*held)[33] = NULL;
    size_t n_held = 0;
    /* A suite's kernels as this machine (or --arch) asks for them: a context of the device's arch. */
    if (rc == CLI_OK && a.n_suites && (rc = cli_open(common, &target)) == CLI_OK)
        rc = suite_keys(target, &a, &held, &n_held);
    const char **sel = rc == CLI_OK ? calloc(n_held + a.n_prefixes + 1, sizeof *sel) : NULL;
    if (rc == CLI_OK && !sel)
        rc = CLI_FAIL;
    size_t n_sel = 0;
    for (size_t i = 0; sel && i < n_held; i++)
        sel[n_sel++] = held[i];
    for (size_t i = 0; sel && i < a.n_prefixes; i++)
        sel[n_sel++] = a.prefixes[i];
    uint64_t entries = 0, bytes = 0;
    if (rc == CLI_OK) {
        attnbwd_status s = attnbwd_cache_export(target ? target : ctx, a.file, sel, n_sel, &entries, &bytes);
        if (s != ATTNBWD_OK)
            rc = cli_lib_error(s);
    }
    if (rc == CLI_OK) {
        char human[32];
        cli_human_bytes(bytes, human, sizeof human);
        printf("exported %" PRIu64 " entries to %s (%s)\n", entries, a.file, human);
    }
    attnbwd_close(target);
    free(sel);
    free(held);
    free(a.suites);
    free(a.prefixes);
    return rc;
}

static int cache_import(attnbwd_ctx *ctx, const char *dir, int argc, char **argv)
{
    if (argc != 1 || (argv[0][0] == '-' && argv[0][1]))
        return cli_usage_error("cache import", argc ? "expected one FILE, got '%s'" : "no FILE given%s",
                               argc ? argv[argc > 1 ? 1 : 0] : "");
    uint64_t entries = 0, bytes = 0;
    attnbwd_status s = attnbwd_cache_import(ctx, argv[0], &entries, &bytes);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    char human[32];
    cli_human_bytes(bytes, human, sizeof human);
    printf("imported %" PRIu64 " entries (%s) into %s\n", entries, human, dir);
    return CLI_OK;
}

/* ---- dispatch ---- */

static const char *const subcommands = "'clear', 'stats', 'list', 'verify', 'prune', 'export' or 'import'";

int cmd_cache(const cli_common *common, int argc, char **argv)
{
    if (argc < 1)
        return cli_usage_error("cache", "expected a subcommand: %s", subcommands);
    const char *sub = argv[0];
    int json = 0;
    const int known = !strcmp(sub, "clear") || !strcmp(sub, "stats") || !strcmp(sub, "list") ||
                      !strcmp(sub, "verify") || !strcmp(sub, "prune") || !strcmp(sub, "export") ||
                      !strcmp(sub, "import");
    if (!known)
        return cli_usage_error("cache", "unknown subcommand '%s' (expected %s)", sub, subcommands);
    const int takes_json = !strcmp(sub, "stats") || !strcmp(sub, "list") || !strcmp(sub, "verify");
    if (takes_json && only_json_flag(sub, argc - 1, argv + 1, &json) != 0)
        return CLI_USAGE;
    if (!strcmp(sub, "clear") && argc != 1)
        return cli_usage_error("cache clear", "unexpected argument '%s'", argv[1]);
    attnbwd_ctx *ctx = NULL;
    /* The folder needs no device: open for an explicit arch when none is given. */
    attnbwd_status s = cli_open_arch(common, common->arch ? NULL : "sm_90", &ctx);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    attnbwd_ctx_info info;
    attnbwd_ctx_get_info(ctx, &info);
    const char *dir = info.cache_dir ? info.cache_dir : "";
    int rc;
    if (!strcmp(sub, "clear"))
        rc = cache_clear(ctx, dir);
    else if (!strcmp(sub, "stats"))
        rc = cache_stats(ctx, dir, json);
    else if (!strcmp(sub, "list") || !strcmp(sub, "verify"))
        rc = cache_list(ctx, json, !strcmp(sub, "verify"));
    else if (!strcmp(sub, "prune"))
        rc = cache_prune(ctx, dir, argc - 1, argv + 1);
    else if (!strcmp(sub, "export"))
        rc = cache_export(common, ctx, argc - 1, argv + 1);
    else
        rc = cache_import(ctx, dir, argc - 1, argv + 1);
    attnbwd_close(ctx);
    return rc;
}
