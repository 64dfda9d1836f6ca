/* Tests of what the library trusts around its disk cache, through the public
 * API and the tool ($ATTNBWD_BINARY), with no GPU (--arch, options.arch): a
 * planted entry with a valid checksum is not launched; the user's tuning
 * table, when broken, is a warning naming the file and line, and `info` says
 * which table is in effect; `info` and the prewarm summary say how a
 * read-only folder is used; debug dumps never write through a symlink; a
 * file size limit does not kill the process; problem 2's batch limit is
 * stated up front. Each test works in its own mkdtemp folder. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>


#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "test_util.h"
#include "attnbwd.h"

/* ---- helpers ------------------------------------------------------------- */

/* The warnings a context logged, joined by newlines. */
typedef struct captured {
    char text[16384];
    int warnings;
} captured;

static void capture(int level, const char *line, void *user) {
    captured *c = user;
    if (level != ATTNBWD_LOG_WARN) return;
    c->warnings++;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "%s\n", line);
    if (getenv("TEST_VERBOSE")) fprintf(stderr, "  [warn] %s\n", line);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static attnbwd_ctx *open_ctx(const char *arch, const char *dir, int disk_cache, captured *cap) {
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = arch;
    o.cache_dir = dir;
    o.disk_cache = disk_cache;
    o.log_fn = capture;
    o.log_user = cap;
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(&o, &ctx) != ATTNBWD_OK) fail_msg("attnbwd_open: %s", attnbwd_last_error());
    return ctx;
}

static const attnbwd_shape SMALL = {ATTNBWD_SOFTMAX_DROPOUT_BWD, 1, 2, 64, 0, 0};

static attnbwd_origin build(attnbwd_ctx *ctx, const attnbwd_shape *s) {
    attnbwd_kernel *k = NULL;
    if (attnbwd_get_kernel(ctx, s, &k) != ATTNBWD_OK) fail_msg("get_kernel: %s", attnbwd_last_error());
    attnbwd_kernel_info info;
    assert_int_equal(attnbwd_kernel_get_info(k, &info), ATTNBWD_OK);
    return info.origin;
}

/* The one entry file of dir (asserts there is exactly one). */
static char *only_entry(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *found = NULL;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len == 37 && strcmp(e->d_name + 32, ".atbc") == 0) {
            free(found);
            found = join(dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    assert_int_equal(n, 1);
    return found;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Rewrites entry `path` with `payload` in place of its cubin and checksums
 * that match (runtime/cache.h's layout, written by the library's own
 * cache_header_write): what anyone who can write the folder can make, since
 * the checksums have no key. */
static void plant_payload(const char *path, const void *payload, size_t plen) {
    const size_t h = CACHE_FILE_HEADER_LEN;
    size_t len;
    unsigned char *old = read_file(path, &len);
    uint32_t mlen = old[12] | old[13] << 8 | old[14] << 16 | (uint32_t)old[15] << 24;
    unsigned char *out = malloc(h + mlen + plen);
    memcpy(out + h, old + h, mlen);
    memcpy(out + h + mlen, payload, plen);
    cache_header_write(out, (const char *)out + h, mlen, payload, plen);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, h + mlen + plen, f), h + mlen + plen);
    fclose(f);
    free(out);
    free(old);
}

/* The cubin of an entry (its payload). */
static unsigned char *entry_payload(const char *path, size_t *plen) {
    size_t len;
    unsigned char *b = read_file(path, &len);
    uint32_t mlen = b[12] | b[13] << 8 | b[14] << 16 | (uint32_t)b[15] << 24;
    *plen = len - CACHE_FILE_HEADER_LEN - mlen;
    unsigned char *p = malloc(*plen);
    memcpy(p, b + CACHE_FILE_HEADER_LEN + mlen, *plen);
    free(b);
    return p;
}

/* Runs the tool with args (NULL-terminated) and extra environment
 * ("NAME=value", NULL-terminated); stdout into out. Killed after 20 s, so a
 * hang is a failed test. Returns the exit code, or 128 + signal. */
static int run_tool(const char *const *args, const char *const *env, char *out, size_t out_len) {
    const char *bin = getenv("ATTNBWD_BINARY");
    if (!bin || !*bin) fail_msg("ATTNBWD_BINARY is not set: run this test through ctest");
    char path[] = "/tmp/attnbwd-test-trust-out-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e++) putenv((char *)*e);
        dup2(fd, 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        alarm(20);
        const char *argv[32] = {bin};
        int n = 1;
        for (const char *const *a = args; *a && n < 31; a++) argv[n++] = *a;
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    ssize_t got = pread(fd, out, out_len - 1, 0);
    out[got > 0 ? got : 0] = '\0';
    close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- a planted entry ------------------------------------------------------- */

/* An entry whose manifest matches and whose checksum is valid, but whose
 * cubin is garbage, or a cubin for another architecture: refused before the
 * driver sees it (moved aside, reported), and the kernel is compiled. */
static void test_planted_entry(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE);
    attnbwd_close(ctx);
    char *entry = only_entry(dir);
    size_t cubin_len;
    unsigned char *sm90_cubin = entry_payload(entry, &cubin_len);

    ctx = open_ctx("sm_90", dir, 1, &cap); /* sound: a disk hit */
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_DISK);
    attnbwd_close(ctx);

    plant_payload(entry, "thirty bytes of garbage cubin.", 30);
    memset(&cap, 0, sizeof cap);
    ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE);
    assert_int_equal(cap.warnings, 1);
    assert_non_null(strstr(cap.text, "not an ELF file"));
    attnbwd_close(ctx);
    ctx = open_ctx("sm_90", dir, 1, &cap); /* rebuilt: a disk hit again */
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_DISK);
    attnbwd_close(ctx);

    /* sm_90's cubin planted in sm_80's entry. */
    char *sm80_dir = test_tmpdir(); /* the sm_80 entry alone, to find it */
    ctx = open_ctx("sm_80", sm80_dir, 1, &cap);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE);
    attnbwd_close(ctx);
    char *sm80_entry = only_entry(sm80_dir);
    plant_payload(sm80_entry, sm90_cubin, cubin_len);
    memset(&cap, 0, sizeof cap);
    ctx = open_ctx("sm_80", sm80_dir, 1, &cap);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE);
    assert_int_equal(cap.warnings, 1);
    assert_non_null(strstr(cap.text, "another GPU architecture"));
    attnbwd_close(ctx);

    free(sm80_entry);
    free(sm90_cubin);
    free(entry);
    test_rmtree(sm80_dir);
    test_rmtree(dir);
    free(sm80_dir);
    free(dir);
}

/* ---- the user's tuning table --------------------------------------------------- */

/* Opens a context over dir, whose tuning.lua is broken in some way: the open
 * succeeds, with one warning naming the file (and `want`), and the info says
 * the built-in tables are in effect. */
static void assert_table_rejected(const char *dir, const char *want) {
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
    attnbwd_ctx_info in;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    if (cap.warnings != 1 || !strstr(cap.text, want) || !strstr(cap.text, "tuning.lua"))
        fail_msg("want one warning naming tuning.lua and '%s', got %d:\n%s", want, cap.warnings, cap.text);
    assert_non_null(strstr(in.user_tuning_table, "built-in (rejected: "));
    assert_non_null(strstr(in.user_tuning_table, want));
    attnbwd_close(ctx);
}

static void test_tuning_table(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    char *table = join(dir, "tuning.lua");
    char *model = getenv("ATTNBWD_GPU_MODEL") ? strdup(getenv("ATTNBWD_GPU_MODEL")) : NULL;
    /* No GPU model until the sound table's: a name that matches no model is a warning of its own. */
    unsetenv("ATTNBWD_GPU_MODEL");

    write_text(table, "return {\n  gpu = 'Test GPU',\n  entries = { a = 'x',, },\n}\n");
    assert_table_rejected(dir, "tuning.lua:3:"); /* a syntax error: its line */
    write_text(table, "local t = {}\nreturn t.x.y\n");
    assert_table_rejected(dir, "tuning.lua:2:"); /* an error at run time: its line */
    write_text(table, "while true do end\n");
    assert_table_rejected(dir, "budget"); /* a loop: stopped */
    write_text(table, "return 7\n");
    assert_table_rejected(dir, "not a table");
    write_text(table, "return { entries = {} }\n");
    assert_table_rejected(dir, "no gpu");
    char *big = malloc((2 << 20) + 64);
    strcpy(big, "return { gpu = 'Test GPU', entries = {} }\n--");
    memset(big + strlen(big), 'x', 2 << 20);
    big[(2 << 20) + 40] = '\0';
    write_text(table, big);
    free(big);
    assert_table_rejected(dir, "over 1 MiB");
    unlink(table);
    assert_int_equal(symlink("/etc/passwd", table), 0);
    assert_table_rejected(dir, "symbolic link");
    unlink(table);

    /* A FIFO: refused at once (a child opens it, so a wait is a failure, not a hang). */
    assert_int_equal(mkfifo(table, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        captured cap = {0};
        attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
        attnbwd_ctx_info in;
        attnbwd_ctx_get_info(ctx, &in);
        _exit(cap.warnings == 1 && strstr(in.user_tuning_table, "not a regular file") ? 0 : 3);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(table);

    /* No table: built-in, and nothing to say. */
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
    attnbwd_ctx_info in;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_string_equal(in.user_tuning_table, "built-in");
    assert_int_equal(cap.warnings, 0);
    /* A sound table of this model: in effect, and its tiles are the kernel's.
     * Its entry is a candidate other than the heuristic's. */
    char **cands = NULL;
    size_t n = 0;
    assert_int_equal(attnbwd_candidates(ctx, &SMALL, &cands, &n), ATTNBWD_OK);
    assert_true(n >= 2);
    char text[1024];
    snprintf(text, sizeof text,
             "return { gpu = 'Test GPU', entries = {\n  ['softmax_dropout_bwd B=1 H=2 T=64 dropout=0'] = '%s',\n} }\n",
             cands[1]);
    char *want_tiles = strdup(cands[1]);
    for (size_t i = 0; i < n; i++) attnbwd_free(cands[i]);
    attnbwd_free(cands);
    attnbwd_close(ctx);
    write_text(table, text);
    /* A model of no shipped table is no typo when the user's table is for it: nothing to say. */
    setenv("ATTNBWD_GPU_MODEL", "Test GPU", 1);
    ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_int_equal(cap.warnings, 0);
    assert_non_null(strstr(in.user_tuning_table, table));
    assert_non_null(strstr(in.user_tuning_table, "(for Test GPU)"));
    char *src = NULL, *tiles = NULL;
    assert_int_equal(attnbwd_generate(ctx, &SMALL, &src, &tiles), ATTNBWD_OK);
    assert_string_equal(tiles, want_tiles);
    attnbwd_free(src);
    attnbwd_free(tiles);
    attnbwd_close(ctx);
    /* The same table on another model: built-in, and why. */
    setenv("ATTNBWD_GPU_MODEL", "Other GPU", 1);
    ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_non_null(strstr(in.user_tuning_table, "is for Test GPU, not Other GPU"));
    attnbwd_close(ctx);

    if (model) setenv("ATTNBWD_GPU_MODEL", model, 1);
    else unsetenv("ATTNBWD_GPU_MODEL");
    free(model);
    free(want_tiles);
    free(table);
    test_rmtree(dir);
    free(dir);
}

/* ---- how the cache is used, as info and the tool say it ------------------------------ */

static void test_cache_modes(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE);
    attnbwd_ctx_info in;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_string_equal(in.cache_mode, "read-write");
    assert_true(in.disk_cache && in.cache_read);
    attnbwd_close(ctx);

    /* A shared read-only store: read (a disk hit), never written, and said so. */
    ctx = open_ctx("sm_90", dir, ATTNBWD_DISK_CACHE_READ_ONLY, &cap);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_non_null(strstr(in.cache_mode, "read-only"));
    assert_true(!in.disk_cache && in.cache_read);
    assert_int_equal(in.cache_entries, 1);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_DISK);
    const attnbwd_shape other = {ATTNBWD_SOFTMAX_DROPOUT_BWD, 1, 2, 32, 0, 0};
    assert_int_equal(build(ctx, &other), ATTNBWD_FROM_COMPILE);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_int_equal(in.cache_entries, 1); /* not written */
    attnbwd_close(ctx);

    char out[8192];
    char env_dir[4200], env_ro[] = "ATTNBWD_CACHE=ro";
    snprintf(env_dir, sizeof env_dir, "ATTNBWD_CACHE_DIR=%s", dir);
    const char *const env[] = {env_dir, env_ro, NULL};
    const char *const info[] = {"info", "--arch", "sm_90", NULL};
    assert_int_equal(run_tool(info, env, out, sizeof out), 0);
    assert_non_null(strstr(out, "cache mode     read-only"));
    assert_non_null(strstr(out, "cache entries  1 (read, not written)"));
    assert_non_null(strstr(out, "user table     built-in"));
    char suite[4200], want[4300];
    snprintf(suite, sizeof suite, "%s/suite.lua", dir);
    write_text(suite, "return {{ batch = 1, heads = 2, seq_len = 64 }}\n");
    const char *const prewarm[] = {"prewarm", "--arch", "sm_90", suite, NULL};
    assert_int_equal(run_tool(prewarm, env, out, sizeof out), 0);
    snprintf(want, sizeof want, "1 from the disk cache, 0 failed");
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof want, "(cache: %s, read-only)", dir);
    assert_non_null(strstr(out, want));

    /* A folder anyone may write: refused, and said so with the folder's name. */
    assert_int_equal(chmod(dir, 0777), 0);
    memset(&cap, 0, sizeof cap);
    ctx = open_ctx("sm_90", dir, 1, &cap);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_non_null(strstr(in.cache_mode, "off (refused: "));
    assert_non_null(strstr(in.cache_mode, dir));
    assert_int_equal(cap.warnings, 1);
    assert_int_equal(build(ctx, &SMALL), ATTNBWD_FROM_COMPILE); /* memory only */
    attnbwd_close(ctx);
    assert_int_equal(chmod(dir, 0700), 0);

    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.disk_cache = 3;
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "options.disk_cache = 3"));
    test_rmtree(dir);
    free(dir);
}

/* ---- writes that must not go astray or kill ---------------------------------------- */

static void test_dump_no_symlink(void **state) {
    (void)state;
    char *dump = test_tmpdir();
    setenv("ATTNBWD_DUMP_DIR", dump, 1);
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", NULL, 0, &cap);
    attnbwd_kernel *k = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx, &SMALL, &k), ATTNBWD_OK);
    attnbwd_kernel_info info;
    assert_int_equal(attnbwd_kernel_get_info(k, &info), ATTNBWD_OK);
    char name[512];
    snprintf(name, sizeof name, "%s.cu", info.name);
    attnbwd_close(ctx);
    char *dumped = join(dump, name), *victim = join(dump, "victim");
    unlink(dumped);
    assert_int_equal(symlink(victim, dumped), 0);
    ctx = open_ctx("sm_90", NULL, 0, &cap);
    assert_int_equal(attnbwd_get_kernel(ctx, &SMALL, &k), ATTNBWD_OK);
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_DUMP_DIR");
    struct stat st;
    assert_int_not_equal(lstat(victim, &st), 0); /* nothing written where the link pointed */
    assert_int_equal(lstat(dumped, &st), 0);
    assert_true(S_ISREG(st.st_mode)); /* the dump made anew in its place */
    assert_true(st.st_size > 100);
    free(dumped);
    free(victim);
    test_rmtree(dump);
    free(dump);
}

/* `ulimit -f` below the entry's size: the write is not started (SIGXFSZ
 * would kill the process), one warning, and the kernel works from memory. */
static void test_file_size_limit(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(2);
        captured cap = {0};
        attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
        attnbwd_kernel *k = NULL;
        if (attnbwd_get_kernel(ctx, &SMALL, &k) != ATTNBWD_OK) _exit(3);
        attnbwd_kernel_info info;
        if (attnbwd_kernel_get_info(k, &info) != ATTNBWD_OK || info.cubin_bytes < 4096) _exit(4);
        if (cap.warnings != 1 || !strstr(cap.text, "too large")) _exit(5);
        attnbwd_close(ctx);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) fail_msg("the child died of signal %d", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", dir, 1, &cap);
    attnbwd_ctx_info in;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_int_equal(in.cache_entries, 0); /* nothing half-written */
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

/* ---- problem 2's batch limit, stated up front ---------------------------------- */

static void test_edit_batch_limit(void **state) {
    (void)state;
    captured cap = {0};
    attnbwd_ctx *ctx = open_ctx("sm_90", NULL, 0, &cap);
    attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, 4096, 16, 16, 0, ATTNBWD_PRECISION_TF32};
    char *src = NULL, *tiles = NULL;
    assert_int_equal(attnbwd_generate(ctx, &s, &src, &tiles), ATTNBWD_ERR_UNSUPPORTED);
    assert_non_null(strstr(attnbwd_last_error(), "B <= 4095"));
    s.batch = 65536;
    s.seq_len = 1;
    assert_int_equal(attnbwd_generate(ctx, &s, &src, &tiles), ATTNBWD_ERR_UNSUPPORTED);
    /* Up to the limit every precision plans, at the longest T too. */
    s.batch = 4095;
    for (int prec = ATTNBWD_PRECISION_TF32; prec <= ATTNBWD_PRECISION_FP16; prec++) {
        for (int64_t t = 1; t <= 1024; t *= 32) {
            s.precision = prec;
            s.seq_len = t;
            if (attnbwd_generate(ctx, &s, &src, &tiles) != ATTNBWD_OK)
                fail_msg("B=4095 T=%lld precision %d: %s", (long long)t, prec, attnbwd_last_error());
            attnbwd_free(src);
            attnbwd_free(tiles);
        }
    }
    attnbwd_close(ctx);
}

int main(void) {
    unsetenv("ATTNBWD_CACHE");
    unsetenv("ATTNBWD_CACHE_DIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_entry),  cmocka_unit_test(test_tuning_table),
        cmocka_unit_test(test_cache_modes),    cmocka_unit_test(test_dump_no_symlink),
        cmocka_unit_test(test_file_size_limit), cmocka_unit_test(test_edit_batch_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
