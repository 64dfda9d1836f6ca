/* Tests of the `attnbwd` command-line tool: runs the built binary
 * ($ATTNBWD_BINARY) with fork/exec, capturing stdout, stderr, the exit code
 * and the wall time; and unit-tests the shape parser of cli/cli.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnbwd.h"
#include "cli.h"

typedef struct run_result {
    int rc;        /* exit code, or 128 + signal */
    char *out;     /* stdout, NUL-terminated */
    char *err;     /* stderr, NUL-terminated */
    double seconds;
} run_result;

static const char *cli_binary(void)
{
    const char *b = getenv("ATTNBWD_BINARY");
    if (!b || !b[0])
        fail_msg("ATTNBWD_BINARY is not set: run this test through ctest, or set it to the built "
                 "attnbwd executable");
    return b;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_all(int fd)
{
    off_t len = lseek(fd, 0, SEEK_END);
    assert_true(len >= 0);
    char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    size_t got = 0;
    while (got < (size_t)len) {
        ssize_t r = read(fd, buf + got, (size_t)len - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    return buf;
}

static int temp_file(void)
{
    char path[] = "/tmp/attnbwd_cli_out_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

/* Runs the CLI with args (NULL-terminated, without argv[0]). */
static run_result run_cli(const char *const *args)
{
    const char *bin = cli_binary();
    const char *argv[64];
    size_t n = 0;
    argv[n++] = bin;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int out = temp_file(), err = temp_file();
    double t0 = now_seconds();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    run_result r;
    r.seconds = now_seconds() - t0;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_all(out);
    r.err = read_all(err);
    close(out);
    close(err);
    return r;
}

static void free_result(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Prints what the CLI said, for a failing assertion's context. */
static void dump(const char *what, const run_result *r)
{
    print_message("%s: exit %d in %.2f s\n--- stdout ---\n%s\n--- stderr ---\n%s\n", what, r->rc,
                  r->seconds, r->out, r->err);
}

/* run_cli, then its exit status must be rc (what it printed shown where not). */
static run_result run_expect(const char *const *args, int rc, const char *what)
{
    run_result r = run_cli(args);
    if (r.rc != rc)
        dump(what, &r);
    assert_int_equal(r.rc, rc);
    return r;
}

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected to find \"%s\" in:\n%s", needle, text);
}

static int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        if (d)
            closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

static char *make_temp_dir(void)
{
    char tmpl[] = "/tmp/attnbwd_cli_cache_XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    return strdup(dir);
}

/* ---- help, version and usage errors ---- */

static void test_help_lists_commands(void **state)
{
    (void)state;
    const char *forms[2][2] = {{"--help", NULL}, {"help", NULL}};
    for (int f = 0; f < 2; f++) {
        run_result r = run_expect(forms[f], 0, forms[f][0]);
        const char *cmds[] = {"info", "gen", "prewarm", "check", "explore", "lua", "--arch", "--cache-dir", "--no-cache"};
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
            assert_contains(r.out, cmds[i]);
        free_result(&r);
    }
}

static void test_subcommand_help(void **state)
{
    (void)state;
    const char *subs[] = {"info", "gen", "prewarm", "check"};
    for (size_t i = 0; i < 4; i++) {
        char usage[64];
        snprintf(usage, sizeof usage, "usage: attnbwd %s", subs[i]);
        const char *a1[] = {subs[i], "--help", NULL};
        const char *a2[] = {"help", subs[i], NULL};
        run_result r1 = run_cli(a1), r2 = run_cli(a2);
        assert_int_equal(r1.rc, 0);
        assert_int_equal(r2.rc, 0);
        assert_contains(r1.out, usage);
        assert_contains(r1.out, "example");
        assert_string_equal(r1.out, r2.out);
        free_result(&r1);
        free_result(&r2);
    }
}

static void test_version(void **state)
{
    (void)state;
    const char *args[] = {"--version", NULL};
    run_result r = run_cli(args);
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, ATTNBWD_VERSION_STRING);
    free_result(&r);
}

static void test_usage_errors(void **state)
{
    (void)state;
    const char *unknown_cmd[] = {"frobnicate", NULL};
    const char *unknown_opt[] = {"gen", "--frobnicate", "2,16,541", NULL};
    const char *unknown_top[] = {"--frobnicate", "info", NULL};
    const char *bad_arch[] = {"gen", "2,16,541", "--arch", "90", NULL};
    const char *bad_threads[] = {"prewarm", "--threads", "-3", "sol066_workload", NULL};
    const char *no_value[] = {"gen", "2,16,541", "--cache-dir", NULL};
    const char *no_args[] = {NULL};
    const struct {
        const char *const *args;
        const char *named;
    } cases[] = {{unknown_cmd, "frobnicate"}, {unknown_opt, "--frobnicate"}, {unknown_top, "--frobnicate"},
                 {bad_arch, "--arch"},        {bad_threads, "--threads"},    {no_value, "--cache-dir"},
                 {no_args, "usage"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run_expect(cases[i].args, 2, cases[i].named);
        assert_contains(r.err, cases[i].named);
        free_result(&r);
    }
}

/* ---- gen ---- */

static void test_gen_source(void **state)
{
    (void)state;
    const char *args[] = {"gen", "2,16,541,0.1", "--arch", "sm_90", "--no-cache", NULL};
    run_result r = run_expect(args, 0, "gen");
    assert_contains(r.out, "extern \"C\" __global__");
    assert_contains(r.out, "// tiles: ");
    free_result(&r);

    const char *opts[] = {"gen", "--batch", "2", "--heads=16", "--seq-len", "541", "--p-dropout", "0.1",
                          "--arch=sm_90", "--no-cache", "--tiles-only", NULL};
    r = run_expect(opts, 0, "gen --tiles-only");
    assert_null(strstr(r.out, "__global__"));
    assert_true(strlen(r.out) > 1);
    free_result(&r);
}

static void test_gen_bad_shapes(void **state)
{
    (void)state;
    const struct {
        const char *shape, *field;
    } cases[] = {{"2,x,5", "heads"},    {"-1,16,5", "batch"},    {"2,16,99999999999999999999", "seq_len"},
                 {"2,16,5,1.5", "p_dropout"}, {"2,16", "B,H,T"}, {"2,16,5,0.1,7", "B,H,T"},
                 {"2,16,5x", "seq_len"}, {"2,16,5,nan", "p_dropout"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"gen", cases[i].shape, "--arch", "sm_90", "--no-cache", NULL};
        run_result r = run_expect(args, 2, cases[i].shape);
        assert_contains(r.err, cases[i].field);
        free_result(&r);
    }
}

/* ---- prewarm ---- */

/* The seconds of the summary line: "..., 0 failed, 6.21 s (cache: DIR)". */
static double summary_seconds(const char *out)
{
    const char *p = strstr(out, " failed");
    const char *end = p ? strstr(p, " s (cache: ") : NULL;
    if (!end)
        fail_msg("no \"N s (cache: DIR)\" on the summary line of:\n%s", out);
    while (end > p && ((end[-1] >= '0' && end[-1] <= '9') || end[-1] == '.'))
        end--;
    return strtod(end, NULL);
}

/* The integer printed just before `phrase` on the summary line of out. */
static long count_before(const char *out, const char *phrase)
{
    const char *line = strstr(out, " kernels for ");
    if (!line)
        fail_msg("no summary line (\"N kernels for ...\") in:\n%s", out);
    const char *p = strstr(line, phrase);
    if (!p)
        fail_msg("no \"%s\" on the summary line:\n%s", phrase, line);
    while (p > line && p[-1] == ' ')
        p--;
    while (p > line && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtol(p, NULL, 10);
}

static void test_prewarm_disk_cache(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    const char *args[] = {"prewarm", "--arch", "sm_90", "--cache-dir", dir, "sol066_workload", NULL};
    run_result first = run_cli(args);
    dump("prewarm (cold cache)", &first);
    assert_int_equal(first.rc, 0);
    assert_int_equal(count_before(first.out, " compiled"), 16);
    assert_int_equal(count_before(first.out, " from the disk cache"), 0);
    assert_int_equal(count_before(first.out, " failed"), 0);
    assert_contains(first.out, dir);

    run_result second = run_cli(args);
    dump("prewarm (warm cache)", &second);
    assert_int_equal(second.rc, 0);
    assert_int_equal(count_before(second.out, " compiled"), 0);
    assert_int_equal(count_before(second.out, " from the disk cache"), 16);
    assert_int_equal(count_before(second.out, " failed"), 0);
    /* faster: by the library's own count (no process start-up), and by the clock */
    double cold = summary_seconds(first.out), warm = summary_seconds(second.out);
    if (!(warm < cold && second.seconds < first.seconds))
        fail_msg("the warm run was not faster: %.2f s vs %.2f s (wall %.2f s vs %.2f s)", warm, cold,
                 second.seconds, first.seconds);

    const char *info_args[] = {"info", "--arch", "sm_90", "--cache-dir", dir, NULL};
    run_result info = run_cli(info_args);
    assert_int_equal(info.rc, 0);
    assert_contains(info.out, "cache entries");
    free_result(&info);
    free_result(&first);
    free_result(&second);
    remove_tree(dir);
    free(dir);
}

/* ---- check and info ---- */

static int gpu_present(void)
{
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.disk_cache = 0;
    o.log_level = ATTNBWD_LOG_QUIET;
    attnbwd_ctx *ctx = NULL;
    attnbwd_status s = attnbwd_open(&o, &ctx);
    attnbwd_close(ctx);
    return s == ATTNBWD_OK;
}

static void test_check_without_gpu(void **state)
{
    (void)state;
    if (gpu_present()) {
        print_message("a GPU is present: the no-GPU behaviour of check is not tested here\n");
        skip();
    }
    const char *args[] = {"check", "--no-cache", "sol066_workload", NULL};
    run_result r = run_expect(args, 1, "check without a GPU");
    assert_contains(r.err, "no GPU");
    free_result(&r);
}

/* `attnbwd lua --arch sm_90 --no-cache SRC/REL [ARG]`, which must exit 0; the caller frees the result. */
static run_result run_tree_script(const char *src, const char *rel, const char *arg)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", src, rel);
    const char *args[] = {"lua", "--arch", "sm_90", "--no-cache", path, arg, NULL};
    run_result r = run_expect(args, 0, rel);
    return r;
}

/* `attnbwd lua` runs a script with the attnbwd module; compile works without
 * a GPU, and a script's error is exit 1 with its traceback. */
static void test_lua_script(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char script[600], bad[600];
    snprintf(script, sizeof script, "%s/ok.lua", dir);
    snprintf(bad, sizeof bad, "%s/bad.lua", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "local a = require 'attnbwd'\n"
               "local c = { batch = 2, heads = 3, seq_len = 17, p_dropout = 0.1 }\n"
               "local cands = a.candidates(c)\n"
               "assert(#cands > 1, 'several candidates')\n"
               "local k = a.compile(c, cands[2])\n"
               "assert(k.tiles == cands[2], k.tiles)\n"
               "local nok, why = a.try_compile(c, 'split=0 vec=4')\n"
               "assert(nok == nil and why:find('does not divide T=17'), why)\n"
               "assert(a.tuning_key(c) == 'softmax_dropout_bwd B=2 H=3 T=17 dropout=1')\n"
               "assert(#a.suite('sol066_workload') == 16)\n"
               "local e = { problem = 'edit_attention_bwd', batch = 1, heads = 16, seq_len = 17 }\n"
               "assert(a.candidates(e)[1]:find('precision=0', 1, true))\n"
               "assert(a.tuning_key(e) == 'edit_attention_bwd B=1 H=16 T=17 dropout=0 precision=0', a.tuning_key(e))\n"
               "e.precision = 'fp16'\n"
               "assert(a.candidates(e)[1]:find('precision=2', 1, true))\n"
               "e.precision = a.suite('sol072_workload')[1].precision\n"
               "assert(a.candidates(e)[1]:find('precision=0', 1, true))\n"
               "e.precision = 'bf16'\n"
               "local okp, whyp = pcall(a.candidates, e)\n"
               "assert(not okp and tostring(whyp):find('shape.precision'), tostring(whyp))\n"
               "e.precision = 0\n"
               "local okt, whyt = pcall(a.time_tiles, e, {}, 5)\n"
               "assert(not okt and tostring(whyt):find('0 tile choices'), tostring(whyt))\n"
               "okt, whyt = pcall(a.time_tiles, e, {'-', 'pair=0'}, 5, 0)\n"
               "assert(not okt and tostring(whyt):find('reps = 0'), tostring(whyt))\n"
               "okt, whyt = pcall(a.time_tiles, e, {'-', 7.5})\n"
               "assert(not okt and tostring(whyt):find('tile choice 2'), tostring(whyt))\n"
               "print('compiled ' .. k.name .. ' ' .. arg[1])\n");
    fclose(f);
    f = fopen(bad, "w");
    assert_non_null(f);
    fprintf(f, "local a = require 'attnbwd'\nlocal x = a.compile({ batch = 0, heads = 1, seq_len = 8 })\n");
    fclose(f);
    const char *ok_args[] = {"lua", "--arch", "sm_90", "--no-cache", script, "hello", NULL};
    run_result r = run_expect(ok_args, 0, "lua ok.lua");
    assert_contains(r.out, "compiled softmax_dropout_bwd_B2_H3_T17");
    assert_contains(r.out, " hello");
    free_result(&r);
    const char *bad_args[] = {"lua", "--arch", "sm_90", "--no-cache", bad, NULL};
    r = run_cli(bad_args);
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "shape.batch = 0");
    assert_contains(r.err, "bad.lua:2");
    free_result(&r);
    /* The shipped example runs and compiles every candidate without a GPU. */
    const char *src = getenv("ATTNBWD_SOURCE_DIR");
    if (src && !gpu_present()) {
        r = run_tree_script(src, "examples/explore_one.lua", "2,4,37,0.1");
        assert_contains(r.out, "(compiled)");
        assert_contains(r.out, "no GPU");
        free_result(&r);
        /* explore's combination step, on a stand-in for the attnbwd module (the script asserts) */
        r = run_tree_script(src, "tests/explore_combine.lua", NULL);
        assert_contains(r.out, "explore_combine: ok");
        free_result(&r);
        const char *explore_args[] = {"explore", "--arch", "sm_90", "--no-cache", "sol066_workload", NULL};
        r = run_cli(explore_args);
        assert_int_equal(r.rc, 1);
        assert_contains(r.err, "no GPU");
        free_result(&r);
    }
    remove_tree(dir);
    free(dir);
}

/* Writes text to dir/name; returns the path in buf. */
static const char *write_file(const char *dir, const char *name, const char *text, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    FILE *f = fopen(buf, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return buf;
}

/* prewarm --precision: each problem-2 case once in each precision listed
 * (its kernels then found in the cache by a prewarm of one of them, or by
 * one without the option in the suite's tf32), and a name that is none of
 * the three, or one given twice, a usage error naming the option (check's
 * too). */
static void test_prewarm_precision(void **state)
{
    (void)state;
    char *dir = make_temp_dir(), suite[4200];
    write_file(dir, "one.jsonl", "{\"axes\": {\"batch_size\": 1, \"seq_len\": 17}, "
                                 "\"tolerance\": {\"max_atol\": 0.05, \"max_rtol\": 1e-5}}\n", suite, sizeof suite);
    const char *both[] = {"prewarm", "--arch", "sm_90", "--cache-dir", dir, "--precision", "tf32,fp16", suite, NULL};
    run_result r = run_expect(both, 0, "prewarm --precision tf32,fp16");
    assert_int_equal(count_before(r.out, " compiled"), 2);
    assert_contains(r.err, "T=17 p fp16");
    free_result(&r);
    const char *fp16[] = {"prewarm", "--arch", "sm_90", "--cache-dir", dir, "--precision=fp16", suite, NULL};
    const char *plain[] = {"prewarm", "--arch", "sm_90", "--cache-dir", dir, suite, NULL};
    const char *const *again[] = {fp16, plain};
    for (int i = 0; i < 2; i++) {
        r = run_expect(again[i], 0, "prewarm of one precision");
        assert_int_equal(count_before(r.out, " compiled"), 0);
        assert_int_equal(count_before(r.out, " from the disk cache"), 1);
        free_result(&r);
    }
    const char *bad[] = {"bf16", "fp16,fp16", "tf32,", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *pre[] = {"prewarm", "--arch", "sm_90", "--cache-dir", dir, "--precision", bad[i], suite, NULL};
        const char *chk[] = {"check", "--precision", bad[i], suite, NULL};
        const char *const *forms[] = {pre, chk};
        for (int f = 0; f < 2; f++) {
            r = run_expect(forms[f], 2, bad[i]);
            assert_contains(r.err, "--precision");
            free_result(&r);
        }
    }
    remove_tree(dir);
    free(dir);
}

/* The text of the file at path (up to cap - 1 bytes) into buf. */
static char *read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* bench/ab_entries.lua: from two A/B runs (the entry first and last, two
 * variants between), a variant becomes an entry only where it beats both of
 * the entry's times and their mean by more than 1.5% in both runs, laid over
 * the shipped H200 entry, in a table for GPU_NAME; --pairs lists the second
 * stage's candidates. */
static void test_ab_entries(void **state)
{
    (void)state;
    const char *src = getenv("ATTNBWD_SOURCE_DIR");
    if (!src)
        skip();
    char *dir = make_temp_dir();
    char r1[600], r2[600], out[600], script[600];
    snprintf(out, sizeof out, "%s/tuning.lua", dir);
    snprintf(script, sizeof script, "%s/bench/ab_entries.lua", src);
    /* #1: gq_red -2.0% and -1.7%; #2: -4.4% in one run only; #3: tr_vec -3.2% and -2.6%, gq_red -1.1%;
     * #4: -3.8% against the mean but not below the entry's first time */
    const char *lines[2] = {"#1  B=64  T=128       734.0      720.0      735.0      736.0\n"
                            "#2  B=1   T=373        94.4       95.0       94.0       94.6\n"
                            "#3  B=32  T=293      1000.0      990.0      970.0     1004.0\n"
                            "#4  B=4   T=640       100.0      101.0      102.0      110.0\n"
                            "geomean                  1.0        1.0        1.0        1.0\n",
                            "#1  B=64  T=128       733.0      721.0      730.0      734.0\n"
                            "#2  B=1   T=373        94.2       90.0       94.0       94.1\n"
                            "#3  B=32  T=293      1002.0      991.0      975.0     1001.0\n"
                            "#4  B=4   T=640       100.0      101.0      102.0      110.0\n"};
    write_file(dir, "run1.txt", lines[0], r1, sizeof r1);
    write_file(dir, "run2.txt", lines[1], r2, sizeof r2);
    setenv("GPU_NAME", "NVIDIA H200", 1);
    const char *args[] = {"lua", "--arch", "sm_90", "--no-cache", script, r1, r2, out, "+gq_red=1", "+tr_vec=0", NULL};
    run_result r = run_cli(args);
    unsetenv("GPU_NAME");
    if (r.rc != 0)
        dump("ab_entries.lua", &r);
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "2 new entries for NVIDIA H200");
    free_result(&r);
    char table[4096];
    read_text(out, table, sizeof table);
    assert_contains(table, "gpu = \"NVIDIA H200\"");
    const char *big = strstr(table, "B=64 H=16 T=128"), *odd = strstr(table, "B=32 H=16 T=293");
    assert_non_null(big);
    assert_non_null(odd);
    assert_non_null(strstr(big, " gq_red=1\",")); /* the entry's tiles, then the variant's */
    assert_true(strstr(big, "tr_vec") == NULL || strstr(big, "tr_vec") > strchr(big, '\n'));
    assert_true(strstr(odd, "tr_vec=0\",") != NULL && strstr(odd, "tr_vec=0\",") < strchr(odd, '\n'));
    /* Both runs timed all four workloads: the table says so after its entries, for bench/merge_tuning.lua. */
    char *list = strstr(table, "}, timed = {");
    assert_non_null(list);
    *list++ = '\0';
    assert_null(strstr(table, "T=373")); /* no entries there */
    assert_null(strstr(table, "T=640"));
    for (int i = 0; i < 4; i++) {
        static const char *const timed[] = {"\"edit_attention_bwd B=64 H=16 T=128 dropout=1 precision=0\",\n",
                                            "\"edit_attention_bwd B=1 H=16 T=373 dropout=1 precision=0\",\n",
                                            "\"edit_attention_bwd B=32 H=16 T=293 dropout=1 precision=0\",\n",
                                            "\"edit_attention_bwd B=4 H=16 T=640 dropout=1 precision=0\",\n"};
        assert_non_null(strstr(list, timed[i]));
    }
    /* --pairs: where two variants beat the entry's mean by 0.5% in both runs (#3, #4), the faster first, then
     * their pair; where the rule has a winner (#1, #3), it first, so that the second stage re-times it; #2's
     * tr_vec only in one run. */
    const char *pairs[] = {"lua", "--arch", "sm_90", "--no-cache", script, r1, r2, "--pairs", "+gq_red=1",
                           "+tr_vec=0", NULL};
    r = run_expect(pairs, 0, "ab_entries.lua --pairs");
    assert_string_equal(r.out, "1|+gq_red=1\n3|+tr_vec=0|+gq_red=1|+tr_vec=0 gq_red=1\n"
                               "4|+gq_red=1|+tr_vec=0|+gq_red=1 tr_vec=0\n");
    free_result(&r);
    remove_tree(dir);
    free(dir);
}

/* bench/merge_tuning.lua: a later stage's table decides every workload it timed, its entry or none (a
 * first-stage win it did not confirm is dropped); the others keep the earlier entry; tables of other GPUs or
 * that cannot be read are refused and nothing is written. */
static void test_merge_tuning(void **state)
{
    (void)state;
    const char *src = getenv("ATTNBWD_SOURCE_DIR");
    if (!src)
        skip();
    char *dir = make_temp_dir();
    char script[600], s1[600], s2[600], s3[600], bad[600], out[600];
    snprintf(script, sizeof script, "%s/bench/merge_tuning.lua", src);
    snprintf(out, sizeof out, "%s/tuning.lua", dir);
    write_file(dir, "s1.lua",
               "return { gpu = 'NVIDIA H200', entries = { ['k A'] = 'pair=2 side_start=0', ['k B'] = 'gq_red=1' },"
               " timed = { 'k A', 'k B', 'k C' } }\n", s1, sizeof s1);
    write_file(dir, "s2.lua",
               "return { gpu = 'NVIDIA H200', entries = { ['k C'] = 'splitk_red=1' }, timed = { 'k A', 'k C' } }\n",
               s2, sizeof s2);
    write_file(dir, "s3.lua", "return { gpu = 'NVIDIA H100 80GB HBM3', entries = {} }\n", s3, sizeof s3);
    write_file(dir, "bad.lua", "return 7\n", bad, sizeof bad);
    const char *args[] = {"lua", "--arch", "sm_90", "--no-cache", script, out, s1, s2, NULL};
    run_result r = run_expect(args, 0, "merge_tuning.lua");
    assert_contains(r.out, "2 entries in");
    free_result(&r);
    char table[2048];
    read_text(out, table, sizeof table);
    assert_contains(table, "gpu = \"NVIDIA H200\"");
    assert_contains(table, "[\"k B\"] = \"gq_red=1\"");     /* stage 2 did not time B: stage 1's */
    assert_contains(table, "[\"k C\"] = \"splitk_red=1\""); /* stage 2's winner */
    assert_null(strstr(table, "k A"));                          /* timed again, not confirmed: dropped */
    remove(out);
    const char *other[] = {"lua", "--arch", "sm_90", "--no-cache", script, out, s1, s3, NULL};
    r = run_cli(other);
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "is for NVIDIA H100 80GB HBM3");
    free_result(&r);
    const char *unreadable[] = {"lua", "--arch", "sm_90", "--no-cache", script, out, s1, bad, NULL};
    r = run_cli(unreadable);
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "is not a tuning table");
    free_result(&r);
    assert_int_equal(access(out, F_OK), -1); /* nothing written */
    remove_tree(dir);
    free(dir);
}

static void test_cache_clear(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    const char *pre[] = {"prewarm", "-q", "--arch", "sm_90", "--cache-dir", dir, "sol066_workload", NULL};
    run_result r = run_cli(pre);
    assert_int_equal(r.rc, 0);
    free_result(&r);
    const char *clear[] = {"cache", "clear", "--cache-dir", dir, NULL};
    r = run_expect(clear, 0, "cache clear");
    assert_contains(r.out, "removed 16 files");
    free_result(&r);
    r = run_cli(clear);
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "removed 0 files");
    free_result(&r);
    const char *bad[] = {"cache", "empty", NULL};
    r = run_cli(bad);
    assert_int_equal(r.rc, 2);
    assert_contains(r.err, "expected 'clear'");
    free_result(&r);
    remove_tree(dir);
    free(dir);
}

static void test_info(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    const char *args[] = {"info", "--arch", "sm_90", "--cache-dir", dir, NULL};
    run_result r = run_expect(args, 0, "info");
    assert_contains(r.out, dir);
    assert_contains(r.out, "sm_90");
    assert_contains(r.out, ATTNBWD_VERSION_STRING);
    assert_contains(r.out, "nvrtc");
    free_result(&r);

    const char *plain[] = {"info", "--cache-dir", dir, NULL}; /* no --arch: works with or without a GPU */
    r = run_expect(plain, 0, "info without --arch");
    assert_contains(r.out, "target arch");
    free_result(&r);
    remove_tree(dir);
    free(dir);
}

/* ---- the shape parser of cli.h ---- */

static void test_parse_shape(void **state)
{
    (void)state;
    char err[256];
    cli_shape s = {0};
    assert_int_equal(cli_parse_shape("2,16,541,0.1", 1, &s, err, sizeof err), 0);
    assert_true(s.batch == 2 && s.heads == 16 && s.seq_len == 541 && s.has_p);
    assert_true(s.p_dropout > 0.0999 && s.p_dropout < 0.1001);
    assert_int_equal(cli_parse_shape("1,32,512", 1, &s, err, sizeof err), 0);
    assert_true(s.batch == 1 && s.heads == 32 && s.seq_len == 512 && !s.has_p && s.p_dropout == 0.0);
    assert_int_equal(cli_parse_shape("4,0,128", 0, &s, err, sizeof err), 0);

    const struct {
        const char *text, *field;
    } bad[] = {{"2,x,5", "heads"},   {"", "expected"},         {"0,1,1", "batch"},   {"1,0,1", "heads"},
               {"1,1,-4", "seq_len"}, {" 1,1,1", "batch"},  {"1,1,1 ", "seq_len"}, {"1,1,1,1", "p_dropout"},
               {"1,1,1,-0.1", "p_dropout"}, {"1,1,1,inf", "p_dropout"}, {"9223372036854775808,1,1", "batch"},
               {"1,1,3000000000", "seq_len"}, {"1,,1", "heads"}, {"1,1", "expected"}, {"1,1,1,0,1", "expected"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (cli_parse_shape(bad[i].text, 1, &s, err, sizeof err) == 0)
            fail_msg("'%s' was accepted", bad[i].text);
        assert_contains(err, bad[i].field);
    }
}

/* Problem names come from check/'s one table; numbers name the enum's values. */
static void test_parse_problem(void **state)
{
    (void)state;
    assert_int_equal(cli_parse_problem("softmax_dropout_bwd"), ATTNBWD_SOFTMAX_DROPOUT_BWD);
    assert_int_equal(cli_parse_problem("edit_attention_bwd"), ATTNBWD_EDIT_ATTENTION_BWD);
    assert_int_equal(cli_parse_problem("1"), ATTNBWD_SOFTMAX_DROPOUT_BWD);
    assert_int_equal(cli_parse_problem("2"), ATTNBWD_EDIT_ATTENTION_BWD);
    assert_int_equal(cli_parse_problem("3"), 0);
    assert_int_equal(cli_parse_problem("0"), 0);
    assert_int_equal(cli_parse_problem("2x"), 0);
    assert_int_equal(cli_parse_problem("edit"), 0);
    assert_string_equal(cli_problem_name(ATTNBWD_EDIT_ATTENTION_BWD), "edit_attention_bwd");
    assert_string_equal(cli_problem_name((attnbwd_problem)9), "unknown_problem");
    char names[64];
    check_problem_names(names, sizeof names);
    assert_string_equal(names, "\"softmax_dropout_bwd\", \"edit_attention_bwd\"");
    check_problem_names(names, 20); /* cut, still a string */
    assert_int_equal(strlen(names), 19);
}

static void test_human_bytes(void **state)
{
    (void)state;
    char buf[32];
    cli_human_bytes(512, buf, sizeof buf);
    assert_string_equal(buf, "512 B");
    cli_human_bytes(1536, buf, sizeof buf);
    assert_string_equal(buf, "1.5 KiB");
    cli_human_bytes(UINT64_C(3) << 30, buf, sizeof buf);
    assert_string_equal(buf, "3.0 GiB");
}

int main(void)
{
    unsetenv("ATTNBWD_CACHE"); /* the disk cache tests need it on */
    unsetenv("ATTNBWD_CACHE_DIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_shape),
        cmocka_unit_test(test_parse_problem),
        cmocka_unit_test(test_human_bytes),
        cmocka_unit_test(test_help_lists_commands),
        cmocka_unit_test(test_subcommand_help),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_gen_source),
        cmocka_unit_test(test_gen_bad_shapes),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_check_without_gpu),
        cmocka_unit_test(test_prewarm_disk_cache),
        cmocka_unit_test(test_prewarm_precision),
        cmocka_unit_test(test_lua_script),
        cmocka_unit_test(test_ab_entries),
        cmocka_unit_test(test_merge_tuning),
        cmocka_unit_test(test_cache_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
