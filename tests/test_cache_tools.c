/* The disk cache as a store: the size budget (least recently used first,
 * with several processes at once), the stats file, and the tool's
 * `attnbwd cache stats|list|verify|prune|export|import` and `info --json`.
 * Four problem-1 kernels are compiled for sm_90 once (group setup) and
 * copied into a fresh folder for each case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnbwd.h"
#include "cache.h"
#include "cache_tools.h"
#include "manifest.h"
#include "nvrtc_compile.h"
#include "test_util.h"

enum { A, B, C, D, N_KERNELS };

static struct {
    char *abc;                   /* a folder holding A, B and C */
    char key[N_KERNELS][CACHE_KEY_HEX + 1];
    uint64_t bytes[N_KERNELS];   /* each entry file's size */
    attnbwd_shape shape[N_KERNELS];
} G;

static char *entry_path(const char *dir, int k, const char *suffix)
{
    static char path[4][4200];
    static int turn;
    char *p = path[turn++ % 4];
    snprintf(p, sizeof path[0], "%s/%s%s", dir, G.key[k], suffix);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

static void set_age(const char *dir, int k, int seconds_ago)
{
    struct timespec t[2] = {{time(NULL) - seconds_ago, 0}, {time(NULL) - seconds_ago, 0}};
    assert_int_equal(utimensat(AT_FDCWD, entry_path(dir, k, ".atbc"), t, 0), 0);
}

/* A fresh folder holding copies of A, B and C (and their info files). */
static char *copy_of_abc(void)
{
    char *dir = test_tmpdir();
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -p '%s'/*.atbc '%s'/*.info '%s'/", G.abc, G.abc, dir);
    assert_int_equal(system(cmd), 0);
    return dir;
}

static attnbwd_ctx *open_budget(const char *dir, uint64_t max_bytes, log_counts *lc)
{
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.cache_dir = dir;
    o.cache_max_bytes = max_bytes;
    o.log_level = ATTNBWD_LOG_INFO;
    o.log_fn = test_log;
    o.log_user = lc;
    attnbwd_ctx *ctx = NULL;
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
    return ctx;
}

static attnbwd_origin get(attnbwd_ctx *ctx, int k)
{
    attnbwd_kernel *kern = NULL;
    attnbwd_kernel_info info;
    if (attnbwd_get_kernel(ctx, &G.shape[k], &kern) != ATTNBWD_OK)
        fail_msg("get_kernel: %s", attnbwd_last_error());
    assert_int_equal(attnbwd_kernel_get_info(kern, &info), ATTNBWD_OK);
    assert_string_equal(info.cache_key, G.key[k]);
    return info.origin;
}

static int setup(void **state)
{
    (void)state;
    G.shape[A] = test_shape(1, 32, 512, 0);
    G.shape[B] = test_shape(1, 16, 919, 0);
    G.shape[C] = test_shape(2, 16, 541, 1);
    G.shape[D] = test_shape(2, 4, 256, 1);
    G.abc = test_tmpdir();
    char *d_dir = test_tmpdir();
    for (int k = 0; k < N_KERNELS; k++) {
        log_counts lc = {0};
        attnbwd_ctx *ctx = test_open(k == D ? d_dir : G.abc, &lc);
        attnbwd_kernel *kern = NULL;
        attnbwd_kernel_info info;
        if (attnbwd_get_kernel(ctx, &G.shape[k], &kern) != ATTNBWD_OK ||
            attnbwd_kernel_get_info(kern, &info) != ATTNBWD_OK)
            return -1;
        snprintf(G.key[k], sizeof G.key[k], "%s", info.cache_key);
        attnbwd_close(ctx);
        G.bytes[k] = file_size(entry_path(k == D ? d_dir : G.abc, k, ".atbc"));
    }
    test_rmtree(d_dir);
    free(d_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rmtree(G.abc);
    free(G.abc);
    return 0;
}

/* ---- the budget ---- */

/* A disk hit makes an entry the most recently used: the write past the
 * budget then evicts B, the least recently used, not A, the oldest written. */
static void test_budget_evicts_least_recently_used(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    set_age(dir, A, 300);
    set_age(dir, B, 200);
    set_age(dir, C, 100);
    const uint64_t budget = G.bytes[A] + G.bytes[B] + G.bytes[C] + G.bytes[D] - 1;
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(dir, budget, &lc);
    assert_int_equal(get(ctx, A), ATTNBWD_FROM_DISK);
    assert_int_equal(get(ctx, D), ATTNBWD_FROM_COMPILE);
    assert_true(exists(entry_path(dir, A, ".atbc")));
    assert_false(exists(entry_path(dir, B, ".atbc")));
    assert_false(exists(entry_path(dir, B, ".info")));
    assert_true(exists(entry_path(dir, C, ".atbc")));
    assert_true(exists(entry_path(dir, D, ".atbc")));
    assert_true(exists(entry_path(dir, D, ".info")));
    attnbwd_cache_stats st;
    assert_int_equal(attnbwd_cache_get_stats(ctx, &st), ATTNBWD_OK);
    assert_true(st.bytes <= budget);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.evicted, 1);
    assert_int_equal(st.evicted_bytes, G.bytes[B]);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

/* An entry larger than the whole budget is not written; the kernel works
 * from memory and the folder keeps what it had. */
static void test_budget_refuses_entry_larger_than_it(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(dir, 1000, &lc);
    assert_int_equal(get(ctx, D), ATTNBWD_FROM_COMPILE);
    assert_false(exists(entry_path(dir, D, ".atbc")));
    assert_false(exists(entry_path(dir, D, ".info")));
    for (int k = A; k <= C; k++)
        assert_true(exists(entry_path(dir, k, ".atbc")));
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

static void test_budget_from_environment(void **state)
{
    (void)state;
    setenv("ATTNBWD_CACHE_MAX_BYTES", "3M", 1);
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(NULL, 0, &lc);
    attnbwd_cache_stats st;
    assert_int_equal(attnbwd_cache_get_stats(ctx, &st), ATTNBWD_OK);
    assert_int_equal(st.max_bytes, 3u << 20);
    attnbwd_close(ctx);
    const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {{"1073741824", UINT64_C(1) << 30}, {"1.5K", 1536}, {"2GiB", UINT64_C(2) << 30}, {"7B", 7}, {"1T", UINT64_C(1) << 40}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 0;
        assert_int_equal(cache_parse_bytes(good[i].text, &v), 0);
        assert_int_equal(v, good[i].bytes);
    }
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.disk_cache = 0;
    for (const char *bad[] = {"lots", "0", "12Q", "-5", "0x10", "1e3", "1..5G", "2GG", NULL}, **b = bad; *b; b++) {
        setenv("ATTNBWD_CACHE_MAX_BYTES", *b, 1);
        char named[64];
        snprintf(named, sizeof named, "ATTNBWD_CACHE_MAX_BYTES=%s:", *b);
        ctx = NULL;
        EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, named);
        assert_null(ctx);
    }
    unsetenv("ATTNBWD_CACHE_MAX_BYTES");
    ctx = NULL;
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
    assert_int_equal(attnbwd_cache_get_stats(ctx, &st), ATTNBWD_OK);
    assert_int_equal(st.max_bytes, ATTNBWD_CACHE_DEFAULT_MAX_BYTES);
    attnbwd_close(ctx);
}

/* The budget the environment gives is the one a write keeps the folder
 * within; a budget in the options wins over it, and a bad value is refused
 * at open even then. */
static void test_environment_budget_is_the_one_used(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    set_age(dir, A, 300);
    set_age(dir, B, 200);
    set_age(dir, C, 100);
    char env[32];
    snprintf(env, sizeof env, "%llu", (unsigned long long)(G.bytes[B] + G.bytes[C] + G.bytes[D]));
    setenv("ATTNBWD_CACHE_MAX_BYTES", env, 1);
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(dir, 0, &lc);
    assert_int_equal(get(ctx, D), ATTNBWD_FROM_COMPILE);
    assert_false(exists(entry_path(dir, A, ".atbc")));
    for (int k = B; k <= D; k++)
        assert_true(exists(entry_path(dir, k, ".atbc")));
    attnbwd_cache_stats st;
    assert_int_equal(attnbwd_cache_get_stats(ctx, &st), ATTNBWD_OK);
    assert_int_equal(st.max_bytes, G.bytes[B] + G.bytes[C] + G.bytes[D]);
    assert_int_equal(st.evicted, 1);
    assert_int_equal(st.evicted_bytes, G.bytes[A]);
    attnbwd_close(ctx);

    ctx = open_budget(dir, 5000, &lc);
    assert_int_equal(attnbwd_cache_get_stats(ctx, &st), ATTNBWD_OK);
    assert_int_equal(st.max_bytes, 5000);
    attnbwd_close(ctx);

    setenv("ATTNBWD_CACHE_MAX_BYTES", "12Q", 1);
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.cache_dir = dir;
    o.cache_max_bytes = 5000;
    ctx = NULL;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "ATTNBWD_CACHE_MAX_BYTES=12Q:");
    assert_null(ctx);
    unsetenv("ATTNBWD_CACHE_MAX_BYTES");
    test_rmtree(dir);
    free(dir);
}

/* ---- several processes on one folder ---- */

#define WRITERS 4
#define PER_WRITER 12
#define PAYLOAD 6000

static const logger QUIET = {ATTNBWD_LOG_QUIET, NULL, NULL};

/* The 64-byte ELF header of an executable cubin for SM sm (0: none named), as
 * the runtime's cubin check wants it, with no program or section table. */
static void fake_cubin(unsigned char *p, size_t len, unsigned sm)
{
    memset(p, 0, len);
    memcpy(p, "\177ELF\2\1", 6); /* 64-bit, little-endian */
    p[16] = 2;                    /* ET_EXEC */
    p[18] = 190;                  /* EM_CUDA */
    p[48] = (unsigned char)sm;    /* e_flags: the SM (ABI version 0) */
}

/* Writer w's entry j: a manifest and a payload that starts as a cubin does. */
static size_t synthetic(int w, int j, char *manifest, size_t mcap, unsigned char *payload)
{
    fake_cubin(payload, PAYLOAD, 0);
    for (int i = 64; i < PAYLOAD; i++)
        payload[i] = (unsigned char)(w * 131 + j * 17 + i);
    return (size_t)snprintf(manifest, mcap, "attnbwd-cache-manifest 1\nlibrary %s\nsource\nwriter %d entry %d\n",
                            ATTNBWD_VERSION_STRING, w, j);
}

/* Puts its entries one by one, reading each earlier one back as it goes
 * (hits, which touch them, while the others write and evict). */
static void writer(const char *dir, int w, uint64_t budget)
{
    disk_cache c;
    cache_open(&c, dir, 1, &QUIET);
    c.max_bytes = budget;
    char m[256], key[CACHE_KEY_HEX + 1];
    unsigned char payload[PAYLOAD];
    for (int j = 0; j < PER_WRITER; j++) {
        size_t mlen = synthetic(w, j, m, sizeof m, payload);
        cache_key(m, mlen, key);
        if (!cache_put(&c, key, m, mlen, payload, PAYLOAD))
            _exit(3);
        void *back = NULL;
        size_t back_len = 0;
        mlen = synthetic(w, j / 2, m, sizeof m, payload);
        cache_key(m, mlen, key);
        if (cache_get(&c, key, m, mlen, &back, &back_len) && (back_len != PAYLOAD || memcmp(back, payload, PAYLOAD)))
            _exit(4);
        free(back);
    }
    cache_close(&c);
    _exit(0);
}

/* Every entry left is whole and holds its own payload; returns how many
 * there are and their bytes. */
static int check_folder(const char *dir, uint64_t *bytes)
{
    disk_cache c;
    cache_open(&c, dir, 1, &QUIET);
    char m[256], key[CACHE_KEY_HEX + 1];
    unsigned char payload[PAYLOAD];
    int present = 0;
    *bytes = 0;
    for (int w = 0; w < WRITERS; w++)
        for (int j = 0; j < PER_WRITER; j++) {
            size_t mlen = synthetic(w, j, m, sizeof m, payload);
            cache_key(m, mlen, key);
            cache_entry_file f;
            if (cache_entry_file_read(&c, key, 1, &f) == ENOENT)
                continue;
            if (f.problem)
                fail_msg("entry %s of writer %d is damaged: %s", key, w, f.problem);
            assert_int_equal(f.payload_len, PAYLOAD);
            assert_memory_equal(f.payload, payload, PAYLOAD);
            *bytes += f.bytes;
            present++;
            cache_entry_file_free(&f);
        }
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, ".tmp-", 5) == 0)
            fail_msg("a temporary file is left: %s", e->d_name);
    closedir(d);
    cache_close(&c);
    return present;
}

static void run_writers(const char *dir, uint64_t budget)
{
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0)
            writer(dir, w, budget);
    }
    for (int w = 0; w < WRITERS; w++) {
        int status = 0;
        assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("writer %d: status 0x%x", w, status);
    }
}

static void read_counts(const char *dir, cache_counts *n)
{
    disk_cache c;
    cache_open(&c, dir, 1, &QUIET);
    cache_stats_read(&c, n);
    cache_close(&c);
}

/* With room for everything, concurrent writers and readers lose nothing, and
 * the stats file holds every process's counts. */
static void test_concurrent_writers_lose_nothing_that_fits(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    run_writers(dir, UINT64_C(1) << 30);
    uint64_t bytes = 0;
    assert_int_equal(check_folder(dir, &bytes), WRITERS * PER_WRITER);
    cache_counts n;
    read_counts(dir, &n);
    assert_int_equal(n.misses, WRITERS * PER_WRITER);
    assert_int_equal(n.hits, WRITERS * PER_WRITER);
    assert_int_equal(n.evicted, 0);
    assert_true(n.since > 0);
    test_rmtree(dir);
    free(dir);
}

/* With room for a quarter, the folder ends within the budget, not far
 * under it, and every entry left is whole. */
static void test_concurrent_eviction_leaves_whole_entries(void **state)
{
    (void)state;
    char *dir = test_tmpdir();
    const uint64_t entry = CACHE_FILE_HEADER_LEN + 64 + PAYLOAD;
    const uint64_t budget = entry * WRITERS * PER_WRITER / 4;
    run_writers(dir, budget);
    uint64_t bytes = 0;
    int present = check_folder(dir, &bytes);
    if (bytes > budget || bytes + 2 * entry <= budget)
        fail_msg("%d entries, %llu bytes left for a budget of %llu", present, (unsigned long long)bytes,
                 (unsigned long long)budget);
    cache_counts n;
    read_counts(dir, &n);
    assert_int_equal(n.misses, WRITERS * PER_WRITER);
    assert_int_equal(n.evicted, WRITERS * PER_WRITER - present);
    test_rmtree(dir);
    free(dir);
}

/* The head a stored manifest begins with is found whatever its tiles' line
 * holds (an override's text may hold new lines), and only in a manifest of
 * this format. */
static void test_manifest_head_len(void **state)
{
    (void)state;
    const attnbwd_shape shape = test_shape(1, 16, 512, 0);
    const char *const override[] = {NULL, "block=128\ngpu x", NULL};
    const char *const tuned[] = {NULL, NULL, "block=256 warps=4"};
    for (int i = 0; i < 3; i++) {
        manifest_inputs in = {"embedded sha256:00", "sm_90", &shape, 0, override[i], tuned[i]};
        char *head = manifest_head(&in);
        assert_non_null(head);
        const size_t len = strlen(head);
        char whole[4096];
        const int n = snprintf(whole, sizeof whole, "%sgpu - (no table)\ntiles x\nsource\nint x;\n", head);
        assert_int_equal(manifest_head_len(whole, (size_t)n), (long)len);
        assert_int_equal(manifest_head_len(head, len), (long)len);
        assert_int_equal(manifest_head_len(head, len - 1), -1); /* cut in its last line */
        head[23] = '1';                                       /* "attnbwd-cache-manifest 1" */
        assert_int_equal(manifest_head_len(head, len), 0);
        free(head);
    }
}

/* ---- the tool ---- */

typedef struct tool_run {
    int rc;
    char out[1 << 16]; /* stdout and stderr */
} tool_run;

/* Runs `attnbwd --cache-dir DIR ARGS` (args: one shell-safe string). */
static tool_run *tool(const char *dir, const char *args)
{
    static tool_run r;
    const char *bin = getenv("ATTNBWD_BINARY");
    if (!bin || !bin[0])
        fail_msg("ATTNBWD_BINARY is not set: run this test through ctest");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --cache-dir '%s' %s 2>&1 </dev/null", bin, dir, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(r.out, 1, sizeof r.out - 1, p);
    r.out[n] = '\0';
    int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return &r;
}

static tool_run *tool_expect(const char *dir, const char *args, int rc)
{
    tool_run *r = tool(dir, args);
    if (r->rc != rc)
        fail_msg("attnbwd %s: exit %d, expected %d:\n%s", args, r->rc, rc, r->out);
    return r;
}

static void assert_says(const tool_run *r, const char *needle)
{
    if (!strstr(r->out, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, r->out);
}

static cJSON *tool_json(const char *dir, const char *args)
{
    cJSON *j = cJSON_Parse(tool_expect(dir, args, 0)->out);
    if (!j)
        fail_msg("attnbwd %s: not JSON", args);
    return j;
}

static double json_number(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v))
        fail_msg("no number \"%s\"", name);
    return v->valuedouble;
}

static void test_tool_list_json(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    set_age(dir, A, 30);
    set_age(dir, B, 20);
    set_age(dir, C, 10);
    cJSON *list = tool_json(dir, "cache list --json");
    assert_int_equal(cJSON_GetArraySize(list), 3);
    const int order[3] = {C, B, A}; /* most recently used first */
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const int k = order[i];
        assert_string_equal(cJSON_GetObjectItem(e, "key")->valuestring, G.key[k]);
        assert_int_equal(json_number(e, "bytes"), G.bytes[k]);
        const double age = (double)time(NULL) - json_number(e, "last_use"); /* set_age's, a second or two ago */
        assert_true(age >= 10 * (i + 1) && age <= 10 * (i + 1) + 3);
        assert_string_equal(cJSON_GetObjectItem(e, "arch")->valuestring, "sm_90");
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "problem")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(e, "current")));
        assert_non_null(strstr(cJSON_GetObjectItem(e, "tiles")->valuestring, "block="));
        const cJSON *s = cJSON_GetObjectItem(e, "shape");
        assert_string_equal(cJSON_GetObjectItem(s, "problem")->valuestring, "softmax_dropout_bwd");
        assert_int_equal(json_number(s, "batch"), G.shape[k].batch);
        assert_int_equal(json_number(s, "heads"), G.shape[k].heads);
        assert_int_equal(json_number(s, "seq_len"), G.shape[k].seq_len);
        assert_int_equal(json_number(s, "dropout"), G.shape[k].dropout);
        assert_string_equal(cJSON_GetObjectItem(e, "gpu_model")->valuestring, "");
    }
    cJSON_Delete(list);
    tool_run *r = tool_expect(dir, "cache list", 0);
    assert_says(r, "B=1 H=16 T=919");
    char prefix[17];
    snprintf(prefix, sizeof prefix, "%.16s", G.key[C]);
    assert_says(r, prefix);
    test_rmtree(dir);
    free(dir);
}

/* Flips one byte of the file at offset from its end. */
static void flip_byte(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -from_end, SEEK_END), 0);
    int ch = fgetc(f);
    assert_int_equal(fseek(f, -from_end, SEEK_END), 0);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

/* Flips one byte of an entry's source text, at offset from its start. */
static void flip_source_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    unsigned char h[CACHE_FILE_HEADER_LEN];
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    const long launch_len = h[32] | h[33] << 8 | h[34] << 16 | (long)h[35] << 24;
    const long at = (long)sizeof h + launch_len + offset;
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    int ch = fgetc(f);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

static void test_tool_verify(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    tool_run *r = tool_expect(dir, "cache verify", 0);
    assert_says(r, "3 entries checked: 3 sound, 0 damaged\n");
    /* A sound entry of another library version: listed as such, left out of an export. */
    disk_cache c;
    cache_open(&c, dir, 1, &QUIET);
    static const char foreign[] = "attnbwd-cache-manifest 1\nlibrary 0.0.1\nnvrtc 1.0\narch sm_80\nsource\nold\n";
    unsigned char cubin[64];
    fake_cubin(cubin, sizeof cubin, 80);
    char key[CACHE_KEY_HEX + 1];
    cache_key(foreign, strlen(foreign), key);
    assert_int_equal(cache_put(&c, key, foreign, strlen(foreign), cubin, sizeof cubin), 1);
    cache_close(&c);
    r = tool_expect(dir, "cache verify", 0);
    assert_says(r, "4 entries checked: 4 sound, 0 damaged (1 of the sound from another library");
    cJSON *list = tool_json(dir, "cache list --json");
    int foreign_listed = 0;
    for (int i = 0; i < cJSON_GetArraySize(list); i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const int is_foreign = strcmp(cJSON_GetObjectItem(e, "key")->valuestring, key) == 0;
        foreign_listed += is_foreign;
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(e, "current")), !is_foreign);
        if (is_foreign)
            assert_string_equal(cJSON_GetObjectItem(e, "library")->valuestring, "0.0.1");
    }
    assert_int_equal(foreign_listed, 1);
    cJSON_Delete(list);
    char archive[4300], args[4400];
    snprintf(archive, sizeof archive, "%s/all.atba", dir);
    snprintf(args, sizeof args, "cache export %s", archive);
    r = tool_expect(dir, args, 0);
    assert_says(r, "built by another library version");
    assert_says(r, "exported 3 entries");
    assert_int_equal(unlink(archive), 0);
    flip_byte(entry_path(dir, A, ".atbc"), 100); /* in the cubin */
    assert_int_equal(truncate(entry_path(dir, B, ".atbc"), (off_t)G.bytes[B] - 7), 0);
    flip_source_byte(entry_path(dir, C, ".atbc"), 10); /* a disk hit does not read it; verify does */
    r = tool_expect(dir, "cache verify", 1);
    char line[128];
    snprintf(line, sizeof line, "damaged  %s: checksum mismatch\n", G.key[A]);
    assert_says(r, line);
    snprintf(line, sizeof line, "damaged  %s: size does not match", G.key[B]);
    assert_says(r, line);
    snprintf(line, sizeof line, "damaged  %s: checksum mismatch in its source", G.key[C]);
    assert_says(r, line);
    assert_says(r, "4 entries checked: 1 sound, 3 damaged");
    /* A FIFO or a link under an entry's name is reported, never waited on or followed. */
    unlink(entry_path(dir, A, ".atbc"));
    assert_int_equal(mkfifo(entry_path(dir, A, ".atbc"), 0600), 0);
    unlink(entry_path(dir, B, ".atbc"));
    assert_int_equal(symlink(entry_path(G.abc, B, ".atbc"), entry_path(dir, B, ".atbc")), 0);
    r = tool_expect(dir, "cache verify", 1);
    snprintf(line, sizeof line, "damaged  %s: not a regular file", G.key[A]);
    assert_says(r, line);
    snprintf(line, sizeof line, "damaged  %s: a symbolic link", G.key[B]);
    assert_says(r, line);
    test_rmtree(dir);
    free(dir);
}

/* Counts from the processes that used the folder, and clear starts them again. */
static void test_tool_stats(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(dir, 0, &lc);
    assert_int_equal(get(ctx, A), ATTNBWD_FROM_DISK);
    assert_int_equal(get(ctx, B), ATTNBWD_FROM_DISK);
    assert_int_equal(get(ctx, D), ATTNBWD_FROM_COMPILE);
    attnbwd_close(ctx);
    cJSON *st = tool_json(dir, "cache stats --json");
    assert_int_equal(json_number(st, "entries"), 4);
    assert_int_equal(json_number(st, "bytes"), G.bytes[A] + G.bytes[B] + G.bytes[C] + G.bytes[D]);
    assert_int_equal(json_number(st, "hits"), 2);
    assert_int_equal(json_number(st, "misses"), 1);
    assert_int_equal(json_number(st, "max_bytes"), ATTNBWD_CACHE_DEFAULT_MAX_BYTES);
    assert_true(json_number(st, "since") > time(NULL) - 60);
    cJSON_Delete(st);
    tool_run *r = tool_expect(dir, "cache stats", 0);
    assert_says(r, "hits       2");
    tool_expect(dir, "cache clear", 0);
    assert_false(exists(entry_path(dir, D, ".info")));
    st = tool_json(dir, "cache stats --json");
    assert_int_equal(json_number(st, "entries"), 0);
    assert_int_equal(json_number(st, "hits"), 0);
    assert_int_equal(json_number(st, "misses"), 0);
    cJSON_Delete(st);
    test_rmtree(dir);
    free(dir);
}

static void test_tool_prune(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    /* Files that are not entries stay: others' names, and a write in progress. */
    char in_progress[64];
    snprintf(in_progress, sizeof in_progress, ".tmp-%s-99999-0", G.key[D]);
    const char *others[] = {"notes.txt", ".tmp-editor-swap", "0123.atbc", "thesis.bad-draft.txt", "tuning.lua",
                            in_progress};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs("mine\n", f);
        fclose(f);
    }
    set_age(dir, A, 3 * 3600);
    set_age(dir, B, 2 * 3600);
    tool_run *r = tool_expect(dir, "cache prune --older-than 150m", 0);
    assert_says(r, "removed 1 entries");
    assert_false(exists(entry_path(dir, A, ".atbc")));
    assert_false(exists(entry_path(dir, A, ".info")));
    assert_true(exists(entry_path(dir, B, ".atbc")));
    char env[64];
    snprintf(env, sizeof env, "%llu", (unsigned long long)G.bytes[C]);
    setenv("ATTNBWD_CACHE_MAX_BYTES", env, 1);
    r = tool_expect(dir, "cache prune", 0);
    unsetenv("ATTNBWD_CACHE_MAX_BYTES");
    assert_says(r, "removed 1 entries");
    assert_false(exists(entry_path(dir, B, ".atbc")));
    assert_true(exists(entry_path(dir, C, ".atbc")));
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        if (!exists(p))
            fail_msg("prune removed %s", others[i]);
    }
    r = tool_expect(dir, "cache prune --older-than 3", 2);
    assert_says(r, "--older-than");
    test_rmtree(dir);
    free(dir);
}

static void test_tool_export_import(void **state)
{
    (void)state;
    char *dir = copy_of_abc(), *other = test_tmpdir(), archive[4200], args[12000];
    snprintf(archive, sizeof archive, "%s/kernels.atba", other);
    snprintf(args, sizeof args, "cache export %s --key %.6s --key %s", archive, G.key[A], G.key[B]);
    tool_run *r = tool_expect(dir, args, 0);
    assert_says(r, "exported 2 entries");
    char *into = test_tmpdir();
    snprintf(args, sizeof args, "cache import %s", archive);
    assert_says(tool_expect(into, args, 0), "imported 2 entries");
    cJSON *st = tool_json(into, "cache stats --json");
    assert_int_equal(json_number(st, "misses"), 0); /* an import compiles nothing */
    cJSON_Delete(st);
    assert_true(exists(entry_path(into, A, ".info")));
    assert_false(exists(entry_path(into, C, ".atbc")));
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_budget(into, 0, &lc);
    assert_int_equal(get(ctx, A), ATTNBWD_FROM_DISK);
    assert_int_equal(get(ctx, B), ATTNBWD_FROM_DISK);
    attnbwd_close(ctx);
    cJSON *list = tool_json(into, "cache list --json");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const int k = strcmp(cJSON_GetObjectItem(e, "key")->valuestring, G.key[A]) == 0 ? A : B;
        assert_string_equal(cJSON_GetObjectItem(e, "key")->valuestring, G.key[k]);
        assert_int_equal(json_number(cJSON_GetObjectItem(e, "shape"), "seq_len"), G.shape[k].seq_len);
    }
    cJSON_Delete(list);

    /* By suite: the kernel of each of its shapes. */
    char suite[4200];
    snprintf(suite, sizeof suite, "%s/one.lua", other);
    FILE *f = fopen(suite, "w");
    assert_non_null(f);
    fprintf(f, "return {{problem = 'softmax_dropout_bwd', batch = 2, heads = 16, seq_len = 541, p_dropout = 0.1}}\n");
    fclose(f);
    snprintf(args, sizeof args, "cache export %s --arch sm_90 --suite %s", archive, suite);
    assert_says(tool_expect(dir, args, 0), "exported 1 entries");
    test_rmtree(into);
    into = (free(into), test_tmpdir());
    snprintf(args, sizeof args, "cache import %s", archive);
    tool_expect(into, args, 0);
    assert_true(exists(entry_path(into, C, ".atbc")));
    assert_false(exists(entry_path(into, A, ".atbc")));

    snprintf(args, sizeof args, "cache export %s --key 0123456789abcdef0123456789abcdeg", archive);
    assert_says(tool_expect(dir, args, 1), "not 1 to 32 lowercase hex digits");
    test_rmtree(dir);
    test_rmtree(other);
    test_rmtree(into);
    free(dir);
    free(other);
    free(into);
}

/* Writes the archive with its text from `at` replaced by `with` (same length) or cut at `cut` bytes. */
static void altered_copy(const char *from, const char *to, const char *at, const char *with, long cut)
{
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (at) {
        const size_t len = strlen(at);
        char *p = NULL;
        for (size_t i = 0; !p && i + len <= n; i++)
            if (memcmp(buf + i, at, len) == 0)
                p = buf + i;
        assert_non_null(p);
        memcpy(p, with, strlen(with));
    }
    if (cut > 0)
        n = (size_t)cut;
    f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* An archive of another version, cut short or with a damaged entry is
 * refused whole, saying why: nothing is imported. */
static void test_tool_import_refuses(void **state)
{
    (void)state;
    char *dir = copy_of_abc(), *other = test_tmpdir(), *into = test_tmpdir();
    char good[4200], bad[4200], args[12000];
    snprintf(good, sizeof good, "%s/all.atba", other);
    snprintf(bad, sizeof bad, "%s/bad.atba", other);
    snprintf(args, sizeof args, "cache export %s", good);
    assert_says(tool_expect(dir, args, 0), "exported 3 entries");
    const uint64_t total = file_size(good);
    snprintf(args, sizeof args, "cache import %s", bad);
    const struct {
        const char *at, *with;
        long cut;
        const char *says;
    } cases[] = {
        {"library " ATTNBWD_VERSION_STRING, "library 9.9.9", 0, "holds kernels of attnbwd 9.9.9"},
        {"nvrtc ", "nvrtc 1.", 0, "compiled by NVRTC 1."},
        {"archive 2", "archive 7", 0, "an archive of format 7"},
        {"archive 2", "archive 1", 0, "an archive of format 1"}, /* its entries are of the older format */
        {NULL, NULL, (long)total - 3, "is cut short"},
        {NULL, NULL, (long)total / 2, "is cut short"},
        {"attnbwd-cache-manifest 2\nlibrary", "attnbwd-cache-manifest 2\nlibrarx", 0, "checksum mismatch"},
        {"ATBWDC", "XTBWDC", 0, "bad magic"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        altered_copy(good, bad, cases[i].at, cases[i].with, cases[i].cut);
        tool_run *r = tool_expect(into, args, 1);
        assert_says(r, cases[i].says);
        cJSON *st = tool_json(into, "cache stats --json");
        assert_int_equal(json_number(st, "entries"), 0);
        cJSON_Delete(st);
    }
    snprintf(args, sizeof args, "cache import /etc/hostname");
    assert_says(tool_expect(into, args, 1), "not an attnbwd cache archive");
    test_rmtree(dir);
    test_rmtree(other);
    test_rmtree(into);
    free(dir);
    free(other);
    free(into);
}

/* Writes an archive of this library and NVRTC holding the entry file at
 * entry under key, as export would write it. */
static void one_entry_archive(const char *entry, const char *key, const char *archive)
{
    int maj = 0, min = 0;
    nvrtc_version(&maj, &min);
    const uint64_t elen = file_size(entry);
    unsigned char *bytes = malloc(elen);
    FILE *f = fopen(entry, "rb");
    assert_non_null(f);
    assert_int_equal(fread(bytes, 1, elen, f), elen);
    fclose(f);
    f = fopen(archive, "wb");
    assert_non_null(f);
    fprintf(f, "attnbwd-cache-archive 2\nlibrary %s\nnvrtc %d.%d\n\nentry %s %llu 0\n", ATTNBWD_VERSION_STRING, maj,
            min, key, (unsigned long long)elen);
    assert_int_equal(fwrite(bytes, 1, elen, f), elen);
    fprintf(f, "end 1\n");
    fclose(f);
    free(bytes);
}

/* An entry of this version whose payload passes its checksum but not the
 * check a disk hit makes of a cubin: a CUDA ELF magic alone, or a cubin for
 * another SM than its manifest's arch. verify calls it damaged, and an
 * archive holding it is refused: what the tools take is what a kernel uses. */
static void test_tool_refuses_what_is_no_cubin(void **state)
{
    (void)state;
    char *dir = test_tmpdir(), *other = test_tmpdir();
    int maj = 0, min = 0;
    nvrtc_version(&maj, &min);
    char manifest[512], key[2][CACHE_KEY_HEX + 1];
    unsigned char magic_only[64] = "\177ELF\2", sm80[64];
    magic_only[18] = 190; /* EM_CUDA, and nothing else of a cubin */
    fake_cubin(sm80, sizeof sm80, 80);
    const unsigned char *payload[2] = {magic_only, sm80};
    disk_cache c;
    cache_open(&c, dir, 1, &QUIET);
    for (int i = 0; i < 2; i++) {
        const int n = snprintf(manifest, sizeof manifest,
                               "attnbwd-cache-manifest 2\nlibrary %s\nnvrtc %d.%d\narch sm_90\nentry %d\nsource\nx\n",
                               ATTNBWD_VERSION_STRING, maj, min, i);
        cache_key(manifest, (size_t)n, key[i]);
        assert_int_equal(cache_put(&c, key[i], manifest, (size_t)n, payload[i], 64), 1);
    }
    cache_close(&c);
    tool_run *r = tool_expect(dir, "cache verify", 1);
    char line[256];
    snprintf(line, sizeof line, "damaged  %s: not a 64-bit little-endian ELF file", key[0]);
    assert_says(r, line);
    snprintf(line, sizeof line, "damaged  %s: a cubin for another GPU architecture", key[1]);
    assert_says(r, line);

    /* The sm_80 cubin under sm_90 in an archive, as export would write it. */
    char entry[4200], archive[4200], args[4400];
    snprintf(entry, sizeof entry, "%s/%s.atbc", dir, key[1]);
    snprintf(archive, sizeof archive, "%s/planted.atba", other);
    one_entry_archive(entry, key[1], archive);
    char *into = test_tmpdir();
    snprintf(args, sizeof args, "cache import %s", archive);
    r = tool_expect(into, args, 1);
    snprintf(line, sizeof line, "entry %s is refused: a cubin for another GPU architecture", key[1]);
    assert_says(r, line);
    snprintf(entry, sizeof entry, "%s/%s.atbc", into, key[1]);
    assert_false(exists(entry));
    test_rmtree(dir);
    test_rmtree(other);
    test_rmtree(into);
    free(dir);
    free(other);
    free(into);
}

/* An entry's key is the hash of its manifest's head, as a lookup forms it.
 * A sound entry filed under another valid key (an archive record's key
 * changed; an entry file renamed) is refused by import, whole archive and
 * all, and called damaged by verify: a lookup would never take it. */
static void test_tool_refuses_entry_under_another_key(void **state)
{
    (void)state;
    char *dir = copy_of_abc(), *other = test_tmpdir(), *into = test_tmpdir();
    char good[4200], bad[4200], args[12000], at[64], with[64], line[256];
    snprintf(good, sizeof good, "%s/all.atba", other);
    snprintf(bad, sizeof bad, "%s/rekeyed.atba", other);
    snprintf(args, sizeof args, "cache export %s", good);
    assert_says(tool_expect(dir, args, 0), "exported 3 entries");
    /* The archive has no checksum of its own; each entry's covers its manifest and payload, not its key. */
    snprintf(at, sizeof at, "entry %s ", G.key[A]);
    snprintf(with, sizeof with, "entry %s ", G.key[D]);
    altered_copy(good, bad, at, with, 0);
    snprintf(args, sizeof args, "cache import %s", bad);
    tool_run *r = tool_expect(into, args, 1);
    snprintf(line, sizeof line, "entry %s is refused: not its key: its manifest's head hashes to %s", G.key[D],
             G.key[A]);
    assert_says(r, line);
    cJSON *st = tool_json(into, "cache stats --json");
    assert_int_equal(json_number(st, "entries"), 0);
    cJSON_Delete(st);

    /* A's entry renamed to D's key in a folder. */
    assert_int_equal(rename(entry_path(dir, A, ".atbc"), entry_path(dir, D, ".atbc")), 0);
    assert_int_equal(rename(entry_path(dir, A, ".info"), entry_path(dir, D, ".info")), 0);
    r = tool_expect(dir, "cache verify", 1);
    snprintf(line, sizeof line, "damaged  %s: not its key: its manifest's head hashes to %s", G.key[D], G.key[A]);
    assert_says(r, line);
    assert_says(r, "3 entries checked: 2 sound, 1 damaged");
    cJSON *list = tool_json(dir, "cache list --json");
    int flagged = 0;
    for (int i = 0; i < cJSON_GetArraySize(list); i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const int renamed = strcmp(cJSON_GetObjectItem(e, "key")->valuestring, G.key[D]) == 0;
        const cJSON *problem = cJSON_GetObjectItem(e, "problem");
        assert_int_equal(cJSON_IsString(problem), renamed);
        flagged += renamed;
    }
    assert_int_equal(flagged, 1);
    cJSON_Delete(list);
    snprintf(args, sizeof args, "cache export %s", good);
    r = tool_expect(dir, args, 0);
    assert_says(r, "exported 2 entries");

    /* A manifest of another format has a key this library cannot check
     * (and never uses it): refused, even under this library's version. */
    int maj = 0, min = 0;
    nvrtc_version(&maj, &min);
    char manifest[256];
    const int n = snprintf(manifest, sizeof manifest,
                           "attnbwd-cache-manifest 1\nlibrary %s\nnvrtc %d.%d\narch sm_90\nsource\nx\n",
                           ATTNBWD_VERSION_STRING, maj, min);
    unsigned char cubin[64];
    fake_cubin(cubin, sizeof cubin, 90);
    disk_cache c;
    cache_open(&c, other, 1, &QUIET);
    assert_int_equal(cache_put(&c, G.key[B], manifest, (size_t)n, cubin, sizeof cubin), 1);
    cache_close(&c);
    snprintf(line, sizeof line, "%s/%s.atbc", other, G.key[B]);
    one_entry_archive(line, G.key[B], bad);
    snprintf(args, sizeof args, "cache import %s", bad);
    snprintf(line, sizeof line, "entry %s is refused: of another manifest format", G.key[B]);
    assert_says(tool_expect(into, args, 1), line);
    test_rmtree(dir);
    test_rmtree(other);
    test_rmtree(into);
    free(dir);
    free(other);
    free(into);
}

static void test_tool_help_and_usage(void **state)
{
    (void)state;
    tool_run *r = tool_expect("/nonexistent", "cache --help", 0);
    const char *subs[] = {"clear", "stats", "list", "verify", "prune", "--older-than", "export", "--suite",
                          "--key", "import", "ATTNBWD_CACHE_MAX_BYTES"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        assert_says(r, subs[i]);
    assert_says(tool_expect("/nonexistent", "info --help", 0), "--json");
    assert_says(tool_expect("/nonexistent", "cache frob", 2), "unknown subcommand 'frob'");
    assert_says(tool_expect("/nonexistent", "cache list --long", 2), "--long");
    assert_says(tool_expect("/nonexistent", "cache export", 2), "no FILE");
    assert_says(tool_expect("/nonexistent", "cache import", 2), "no FILE");
}

static void test_tool_info_json(void **state)
{
    (void)state;
    char *dir = copy_of_abc();
    setenv("ATTNBWD_CACHE_MAX_BYTES", "2G", 1);
    cJSON *info = tool_json(dir, "info --arch sm_90 --json");
    unsetenv("ATTNBWD_CACHE_MAX_BYTES");
    assert_string_equal(cJSON_GetObjectItem(info, "library")->valuestring, ATTNBWD_VERSION_STRING);
    assert_string_equal(cJSON_GetObjectItem(info, "arch")->valuestring, "sm_90");
    assert_string_equal(cJSON_GetObjectItem(info, "arch_from")->valuestring, "--arch");
    assert_string_equal(cJSON_GetObjectItem(info, "user_tuning_table")->valuestring, "built-in");
    const cJSON *cache = cJSON_GetObjectItem(info, "cache");
    assert_string_equal(cJSON_GetObjectItem(cache, "dir")->valuestring, dir);
    assert_string_equal(cJSON_GetObjectItem(cache, "mode")->valuestring, "read-write");
    assert_int_equal(json_number(cache, "entries"), 3);
    assert_int_equal(json_number(cache, "bytes"), G.bytes[A] + G.bytes[B] + G.bytes[C]);
    assert_int_equal(json_number(cache, "max_bytes"), UINT64_C(2) << 30);
    cJSON_Delete(info);
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_evicts_least_recently_used),
        cmocka_unit_test(test_budget_refuses_entry_larger_than_it),
        cmocka_unit_test(test_budget_from_environment),
        cmocka_unit_test(test_environment_budget_is_the_one_used),
        cmocka_unit_test(test_concurrent_writers_lose_nothing_that_fits),
        cmocka_unit_test(test_concurrent_eviction_leaves_whole_entries),
        cmocka_unit_test(test_manifest_head_len),
        cmocka_unit_test(test_tool_list_json),
        cmocka_unit_test(test_tool_verify),
        cmocka_unit_test(test_tool_stats),
        cmocka_unit_test(test_tool_prune),
        cmocka_unit_test(test_tool_export_import),
        cmocka_unit_test(test_tool_import_refuses),
        cmocka_unit_test(test_tool_refuses_what_is_no_cubin),
        cmocka_unit_test(test_tool_refuses_entry_under_another_key),
        cmocka_unit_test(test_tool_help_and_usage),
        cmocka_unit_test(test_tool_info_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
