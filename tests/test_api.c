/* The public API without a GPU: argument errors and their messages, the
 * memory and disk caches as seen through attnbwd_get_kernel, threads asking
 * for one shape at once, prewarm, and compile and Lua errors. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

static void open_errors(void **state) {
    (void)state;
    attnbwd_options o;
    attnbwd_options_init(&o);
    EXPECT_STATUS(attnbwd_open(&o, NULL), ATTNBWD_ERR_INVALID_ARGUMENT, "out is NULL");
    attnbwd_ctx *ctx = (attnbwd_ctx *)0x1;
    o.arch = "sm9";
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "options.arch = \"sm9\"");
    assert_null(ctx);
    o.arch = "sm_90";
    o.device = -2;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "options.device = -2");
    o.device = 0;
    o.log_level = 7;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "log_level = 7");
    attnbwd_close(NULL); /* allowed */
}

/* With no GPU (CI), opening without an arch says why and how to go on. */
static void open_without_gpu(void **state) {
    (void)state;
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.disk_cache = 0;
    attnbwd_ctx *ctx = NULL;
    attnbwd_status s = attnbwd_open(&o, &ctx);
    if (s == ATTNBWD_OK) {
        attnbwd_close(ctx);
        skip(); /* a GPU is here */
    }
    assert_true(s == ATTNBWD_ERR_NO_DRIVER || s == ATTNBWD_ERR_NO_DEVICE);
    assert_non_null(strstr(attnbwd_last_error(), "options.arch"));
}

static void shape_errors(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_kernel *k = NULL;
    attnbwd_shape s = test_shape(2, 16, 541, 1);
    EXPECT_STATUS(attnbwd_get_kernel(NULL, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    EXPECT_STATUS(attnbwd_get_kernel(ctx, NULL, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape is NULL");
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, NULL), ATTNBWD_ERR_INVALID_ARGUMENT, "out is NULL");
    s.problem = (attnbwd_problem)9;
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.problem = 9");
    s = test_shape(0, 16, 541, 1);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.batch = 0");
    s = test_shape(2, -3, 541, 1);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.heads = -3");
    s = test_shape(2, 16, 0, 1);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.seq_len = 0");
    s = test_shape(1, 1, (1 << 20) + 1, 0);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_UNSUPPORTED, "longer than the limit");
    s = test_shape(2, 16, 541, 2);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.dropout = 2");
    s = test_shape(INT64_C(1) << 40, INT64_C(1) << 20, 1 << 20, 0);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "overflows 64 bits");
    s = test_shape(1 << 16, 1 << 10, 64, 0);
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_UNSUPPORTED, "rows, over the limit");
    s = test_shape(2, 16, 541, 0);
    s.precision = 1;
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "shape.precision = 1");
    attnbwd_shape e = {ATTNBWD_EDIT_ATTENTION_BWD, 2, 8, 128, 1, 0};
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &e, &k), ATTNBWD_ERR_INVALID_ARGUMENT, "16 heads");
    assert_int_equal(lc.compiled, 0); /* nothing reached the compiler */
    attnbwd_close(ctx);
}

static void launch_errors(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_kernel *k0 = NULL, *k1 = NULL, *odd = NULL;
    attnbwd_shape s = test_shape(2, 4, 256, 0);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &k0), ATTNBWD_OK);
    s.dropout = 1;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &k1), ATTNBWD_OK);
    s = test_shape(1, 2, 7, 1);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &odd), ATTNBWD_OK);
    float *f = (float *)(uintptr_t)0x10000; /* never dereferenced: checks come first */
    uint8_t *m = (uint8_t *)(uintptr_t)0x20000;
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(NULL, f, f, m, m, 0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "kernel is NULL");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, m, -0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "p_dropout = -0.1");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, m, 1.0f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "must be in [0, 1)");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, m, NAN, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "must be in [0, 1)");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k0, f, f, m, m, 0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "shape.dropout = 0");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, m, 0.0f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "shape.dropout = 1");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, NULL, f, m, m, 0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "grad_output is NULL");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, NULL, 0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "dropout_mask is NULL");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f + 1, m, m, 0.1f, f, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "p_attn");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k1, f, f, m, m, 0.1f, f + 2, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "16-byte aligned");
    /* T = 7 has scalar loads: 4-byte alignment is enough. Without a GPU the
     * launch itself is what fails, and it says so. */
    attnbwd_status st = attnbwd_softmax_dropout_bwd(odd, f + 1, f + 3, m + 1, m + 5, 0.1f, f + 1, NULL);
    attnbwd_ctx_info info;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &info), ATTNBWD_OK);
    if (!info.device_name[0]) {
        assert_true(st == ATTNBWD_ERR_NO_DEVICE);
        assert_non_null(strstr(attnbwd_last_error(), "cannot launch"));
    }
    /* p == 0: the dropout mask may be NULL. */
    st = attnbwd_softmax_dropout_bwd(k0, f, f, m, NULL, 0.0f, f, NULL);
    if (!info.device_name[0]) assert_int_equal(st, ATTNBWD_ERR_NO_DEVICE);
    attnbwd_close(ctx);
}

static void memory_and_disk_hits(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(dir, &lc);
    attnbwd_shape s = test_shape(2, 16, 541, 1);
    attnbwd_kernel *a = NULL, *b = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &a), ATTNBWD_OK);
    assert_int_equal(lc.compiled, 1);
    attnbwd_kernel_info ia;
    assert_int_equal(attnbwd_kernel_get_info(a, &ia), ATTNBWD_OK);
    assert_int_equal(ia.origin, ATTNBWD_FROM_COMPILE);
    assert_int_equal(strlen(ia.cache_key), 32);
    assert_true(ia.cubin_bytes > 1000);
    /* A memory hit reads no disk: it holds even with the folder gone. */
    test_rmtree(dir);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &b), ATTNBWD_OK);
    assert_ptr_equal(a, b);
    assert_int_equal(lc.compiled, 1);
    attnbwd_close(ctx);

    /* A new context over the same folder finds the entry on disk. */
    assert_int_equal(mkdir(dir, 0700), 0);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &a), ATTNBWD_OK);
    attnbwd_close(ctx);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &a), ATTNBWD_OK);
    attnbwd_kernel_info ib;
    assert_int_equal(attnbwd_kernel_get_info(a, &ib), ATTNBWD_OK);
    assert_int_equal(ib.origin, ATTNBWD_FROM_DISK);
    assert_int_equal(lc.compiled, 0);
    assert_int_equal(lc.disk_hit, 1);
    attnbwd_ctx_info ci;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &ci), ATTNBWD_OK);
    assert_string_equal(ci.cache_dir, dir);
    assert_int_equal(ci.device, 0);
    assert_int_equal(ci.cache_entries, 1);
    assert_true(ci.cache_bytes > ib.cubin_bytes);
    /* Another shape is another entry. */
    s.seq_len = 542;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &b), ATTNBWD_OK);
    assert_ptr_not_equal(a, b);
    assert_int_equal(lc.compiled, 1);
    /* Clearing removes both entries; the kernels in memory stay usable. */
    uint64_t files = 0, bytes = 0;
    assert_int_equal(attnbwd_cache_clear(ctx, &files, &bytes), ATTNBWD_OK);
    assert_int_equal(files, 2);
    assert_true(bytes > 2 * ib.cubin_bytes / 2);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &ci), ATTNBWD_OK);
    assert_int_equal(ci.cache_entries, 0);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &a), ATTNBWD_OK);
    assert_ptr_equal(a, b);
    attnbwd_close(ctx);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc);
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &a), ATTNBWD_OK);
    assert_int_equal(lc.compiled, 1); /* gone from disk: compiled again */
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

static void cache_turned_off_by_env(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    setenv("ATTNBWD_CACHE", "0", 1);
    for (int round = 0; round < 2; ++round) {
        log_counts lc = {0};
        attnbwd_ctx *ctx = test_open(dir, &lc);
        attnbwd_shape s = test_shape(1, 2, 64, 0);
        attnbwd_kernel *k = NULL;
        assert_int_equal(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_OK);
        assert_int_equal(lc.compiled, 1); /* compiled both times: nothing on disk */
        attnbwd_ctx_info ci;
        attnbwd_ctx_get_info(ctx, &ci);
        assert_int_equal(ci.disk_cache, 0);
        attnbwd_close(ctx);
    }
    unsetenv("ATTNBWD_CACHE");
    test_rmtree(dir);
    free(dir);
}

typedef struct race {
    attnbwd_ctx *ctx;
    attnbwd_kernel *k;
    attnbwd_status s;
} race;

static void *get_same_shape(void *arg) {
    race *r = arg;
    attnbwd_shape s = test_shape(3, 5, 300, 1);
    r->s = attnbwd_get_kernel(r->ctx, &s, &r->k);
    return NULL;
}

static void threads_share_one_build(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    pthread_t t[8];
    race r[8];
    for (int i = 0; i < 8; ++i) {
        r[i] = (race){.ctx = ctx};
        assert_int_equal(pthread_create(&t[i], NULL, get_same_shape, &r[i]), 0);
    }
    for (int i = 0; i < 8; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < 8; ++i) {
        assert_int_equal(r[i].s, ATTNBWD_OK);
        assert_ptr_equal(r[i].k, r[0].k);
    }
    assert_int_equal(lc.compiled, 1);
    attnbwd_close(ctx);
}

static int progress_calls;
static void count_progress(const attnbwd_prewarm_event *ev, void *user) {
    (void)user;
    progress_calls++;
    assert_true(ev->done <= ev->total && ev->index < ev->total);
    assert_int_equal(ev->status, ATTNBWD_OK);
}

static void prewarm_counts(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_shape shapes[] = {test_shape(1, 2, 128, 0), test_shape(1, 2, 129, 1), test_shape(2, 1, 7, 1),
                              test_shape(1, 2, 128, 0)};
    attnbwd_ctx *ctx = test_open(dir, &lc);
    attnbwd_prewarm_summary sum;
    progress_calls = 0;
    assert_int_equal(attnbwd_prewarm(ctx, shapes, 4, 2, count_progress, NULL, &sum), ATTNBWD_OK);
    assert_int_equal(progress_calls, 4);
    assert_int_equal(sum.compiled, 3);
    assert_int_equal(sum.from_memory, 1); /* the repeated shape */
    assert_int_equal(sum.failed, 0);
    attnbwd_close(ctx);
    ctx = test_open(dir, &lc);
    assert_int_equal(attnbwd_prewarm(ctx, shapes, 4, 0, NULL, NULL, &sum), ATTNBWD_OK);
    assert_int_equal(sum.from_disk, 3);
    assert_int_equal(sum.compiled, 0);
    /* One bad shape fails alone, and the status says which. */
    attnbwd_shape bad[] = {test_shape(1, 2, 128, 0), test_shape(1, 0, 128, 0)};
    EXPECT_STATUS(attnbwd_prewarm(ctx, bad, 2, 2, NULL, NULL, &sum), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "shape.heads = 0");
    assert_int_equal(sum.failed, 1);
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

static void generate_source(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_shape s = test_shape(2, 16, 541, 1);
    char *src = NULL, *tiles = NULL;
    assert_int_equal(attnbwd_generate(ctx, &s, &src, &tiles), ATTNBWD_OK);
    assert_non_null(strstr(src, "extern \"C\" __global__"));
    assert_non_null(strstr(src, "kT = 541"));
    assert_non_null(strstr(tiles, "split=1")); /* 541 is odd: 16-byte loads around the aligned middle */
    assert_null(strstr(src, "{{"));
    attnbwd_free(src);
    attnbwd_free(tiles);
    assert_int_equal(lc.compiled, 0);
    attnbwd_close(ctx);
}

/* Copies lua/ and templates/ to a folder for ATTNBWD_LUA_DIR, then appends
 * `text` to `file` there. */
static char *broken_scripts(const char *file, const char *text) {
    const char *src = getenv("ATTNBWD_SOURCE_DIR");
    if (!src) fail_msg("ATTNBWD_SOURCE_DIR is not set (run through ctest)");
    char *dir = test_tmpdir();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp -r '%s/lua' '%s/templates' '%s/' && printf '%%s' '%s' >> '%s/%s'", src, src, dir,
             text, dir, file);
    assert_int_equal(system(cmd), 0);
    return dir;
}

static void compile_error_reports_log_and_source(void **state) {
    (void)state;
    char *dir = broken_scripts("templates/softmax_dropout_bwd.cu", "\nint broken = undeclared_name;\n");
    setenv("ATTNBWD_LUA_DIR", dir, 1);
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_shape s = test_shape(1, 1, 64, 0);
    attnbwd_kernel *k = NULL;
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_COMPILE, "undeclared_name");
    assert_non_null(strstr(attnbwd_last_error(), "source around the first error"));
    assert_non_null(strstr(attnbwd_last_error(), "> "));
    assert_non_null(strstr(attnbwd_last_error(), "--gpu-architecture=sm_90"));
    /* The failure is not cached: asking again fails again, the same way. */
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_COMPILE, "undeclared_name");
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_LUA_DIR");
    test_rmtree(dir);
    free(dir);
}

static void lua_error_has_traceback(void **state) {
    (void)state;
    char *dir = broken_scripts("lua/softmax_dropout.lua", "\nlocal x = = 1\n");
    setenv("ATTNBWD_LUA_DIR", dir, 1);
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_shape s = test_shape(1, 1, 64, 0);
    attnbwd_kernel *k = NULL;
    EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_LUA, "lua/softmax_dropout.lua:");
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_LUA_DIR");
    test_rmtree(dir);
    free(dir);
}

/* Scripts for ATTNBWD_LUA_DIR where lua/<file> (a problem's script, which
 * ends with `return M`) wraps its M.plan: `set` is Lua run on the plan k
 * before it is returned. (No single quotes: broken_scripts passes the text
 * through a shell.) */
static char *plan_wrapped_scripts(const char *file, const char *set) {
    char code[512], rel[64];
    snprintf(code, sizeof code,
             "\nlocal plan0 = M.plan\nfunction M.plan(...) local k = plan0(...); %s; return k end\nreturn M\n", set);
    snprintf(rel, sizeof rel, "lua/%s", file);
    char *dir = broken_scripts(rel, code);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    char *text = calloc((size_t)len + 1, 1);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    char *first = strstr(text, "\nreturn M\n"); /* the original's: turned into a comment, the wrapper's takes over */
    assert_non_null(first);
    memcpy(first + 1, "--", 2);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fwrite(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    free(text);
    return dir;
}

/* A plan may ask NVRTC for the arch-specific variant of the device's
 * architecture (sm_90 -> sm_90a, as the wgmma products do), and for nothing
 * else: the options and the kernel's arch say which it got. */
static void compile_arch_is_checked(void **state) {
    (void)state;
    for (int ok = 0; ok < 2; ++ok) {
        char *dir = plan_wrapped_scripts("softmax_dropout.lua",
                                         ok ? "k.compile_arch = \"sm_90a\"" : "k.compile_arch = \"sm_80a\"");
        setenv("ATTNBWD_LUA_DIR", dir, 1);
        log_counts lc = {0};
        attnbwd_ctx *ctx = test_open(NULL, &lc);
        attnbwd_shape s = test_shape(1, 1, 64, 0);
        attnbwd_kernel *k = NULL;
        if (!ok) {
            EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_LUA, "only \"sm_90a\" may stand for sm_90");
        } else {
            assert_int_equal(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_OK);
            attnbwd_kernel_info info;
            assert_int_equal(attnbwd_kernel_get_info(k, &info), ATTNBWD_OK);
            assert_string_equal(info.arch, "sm_90a");
        }
        attnbwd_close(ctx);
        unsetenv("ATTNBWD_LUA_DIR");
        test_rmtree(dir);
        free(dir);
    }
}

/* A plan's lane priorities are levels 0..2 (lane 0 also -1, the caller's
 * stream), one per lane at most: others are refused with the reason before
 * anything is compiled. */
static void lane_priority_is_checked(void **state) {
    (void)state;
    const char *bad[] = {"k.lane_priority = { 2, 0, 3 }", "k.lane_priority = { 2, 0, 1, 0, 0 }",
                         "k.lane_priority = 1", "k.lane_priority = { 2, -1, 0 }", "k.lane_priority = { -2, 0, 0 }"};
    const char *why[] = {"lane_priority[3] must be 0 (least), 1 or 2 (greatest)", "at most 4 levels",
                         "at most 4 levels", "lane_priority[2] must be 0 (least), 1 or 2 (greatest)",
                         "lane_priority[1] must be -1 (the caller's stream), 0 (least), 1 or 2 (greatest)"};
    for (int i = 0; i < 5; ++i) {
        char *dir = plan_wrapped_scripts("edit_attention.lua", bad[i]);
        setenv("ATTNBWD_LUA_DIR", dir, 1);
        log_counts lc = {0};
        attnbwd_ctx *ctx = test_open(NULL, &lc);
        attnbwd_shape s = test_shape(1, 16, 64, 1);
        s.problem = ATTNBWD_EDIT_ATTENTION_BWD;
        attnbwd_kernel *k = NULL;
        EXPECT_STATUS(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_ERR_LUA, why[i]);
        attnbwd_close(ctx);
        unsetenv("ATTNBWD_LUA_DIR");
        test_rmtree(dir);
        free(dir);
    }
}

static void dump_dir_gets_every_artifact(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    setenv("ATTNBWD_DUMP_DIR", dir, 1);
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    attnbwd_shape s = test_shape(1, 3, 96, 1);
    attnbwd_kernel *k = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_OK);
    attnbwd_kernel_info info;
    attnbwd_kernel_get_info(k, &info);
    const char *ext[] = {"cu", "options", "log", "manifest", "cubin"};
    for (size_t i = 0; i < 5; ++i) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%s", dir, info.name, ext[i]);
        struct stat st;
        if (stat(path, &st) != 0) fail_msg("no %s", path);
        if (i == 4) assert_int_equal((size_t)st.st_size, info.cubin_bytes);
        if (i == 1 || i == 3 || i == 4) assert_true(st.st_size > 0);
    }
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_DUMP_DIR");
    test_rmtree(dir);
    free(dir);
}

static const char *tiles_of(attnbwd_ctx *ctx, int64_t B, int64_t H, int64_t T, int d) {
    attnbwd_shape s = test_shape(B, H, T, d);
    attnbwd_kernel *k = NULL;
    if (attnbwd_get_kernel(ctx, &s, &k) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    attnbwd_kernel_info info;
    attnbwd_kernel_get_info(k, &info);
    return info.tiles;
}

/* Fails unless the tiles problem 2's shape (B, T) gets in ctx at `precision` contain `want` (on `gpu`, for the
 * message). */
static void assert_edit_tiles_at(attnbwd_ctx *ctx, int64_t B, int64_t T, int precision, const char *want,
                                 const char *gpu) {
    attnbwd_shape e = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, precision};
    char *src = NULL, *tiles = NULL;
    if (attnbwd_generate(ctx, &e, &src, &tiles) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    if (!strstr(tiles, want))
        fail_msg("B=%d T=%d precision %d on the %s: want%s in '%s'", (int)B, (int)T, precision, gpu, want, tiles);
    attnbwd_free(src);
    attnbwd_free(tiles);
}

/* The same at TF32, the default precision. */
static void assert_edit_tiles_have(attnbwd_ctx *ctx, int64_t B, int64_t T, const char *want, const char *gpu) {
    assert_edit_tiles_at(ctx, B, T, ATTNBWD_PRECISION_TF32, want, gpu);
}

/* Problem 2's entries the H100 table has of its own (lua/tuning_h100.lua's h100_only), which the H200's lacks. */
static const struct {
    int64_t b, t;
    const char *h100, *h200;
} h100_own[] = {{4, 640, " gq_tma=1", " gq_tma=0"}, {4, 288, " lane_pri=2", " lane_pri=0"},
                {2, 768, " ga_tma=1", " ga_tma=0"}, {64, 256, " gq_stages=3", " gq_stages=4"},
                {16, 691, " pair=1", " pair=0"}, {16, 176, " gq_pair=1", " gq_pair=0"}};

/* The thirty-sixth session's H200 entries, as each table has them: split products' K slices added by float
 * atomics (splitk_red) at B=1,T=853, B=4,T=288 and B=16,T=176, the pair's slices across a cluster at B=2,T=449,
 * the side lanes after gA's transposed B at B=64,T=128. The H100 inherits three (level or faster there) and
 * keeps its own entry at B=4,T=288 (4% slower with the H200's change) and B=16,T=176 (level). */
static const struct {
    int64_t b, t;
    const char *h100, *h200;
} session36[] = {{1, 853, " splitk_red=2", " splitk_red=2"}, {4, 288, " splitk_red=0", " splitk_red=2"},
                 {16, 176, " splitk_red=0", " splitk_red=1"}, {2, 449, " pair_dsm=1", " pair_dsm=1"},
                 {64, 128, " side_start=2", " side_start=2"}};

/* Problem 2's H200 entries (thirty-third session) that the H100 takes from it: the same tiles won on both. */
static const struct {
    int64_t b, t;
    const char *both;
} gq_shared[] = {{64, 128, " gq_pair=1"}, {2, 449, " tr_vec=0"}, {32, 773, " gq_red=1"}, {16, 211, " gq_red=2"}};

/* Tuning tables: the shipped H200 table applies on that model only; the
 * cache folder's table wins over it; an entry that does not fit the shape
 * falls back to the heuristic. */
static void tuning_tables(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(NULL, &lc);
    assert_non_null(strstr(tiles_of(ctx, 2, 4, 256, 1), "streaming=0 threads_per_row=32")); /* heuristic */
    attnbwd_close(ctx);
    setenv("ATTNBWD_GPU_MODEL", "NVIDIA H200", 1);
    ctx = test_open(NULL, &lc);
    assert_non_null(strstr(tiles_of(ctx, 2, 4, 256, 1), "streaming=1 threads_per_row=64")); /* shipped entry */
    /* Problem 2's shipped entry here sets `side_start` and `att_kb`, not the heuristic's 64 keys or P ring. */
    assert_edit_tiles_have(ctx, 2, 449, " bj=64", "H200");
    assert_edit_tiles_have(ctx, 2, 449, " p_stages=2", "H200");
    assert_edit_tiles_have(ctx, 2, 449, " side_start=1", "H200"); /* the heuristic says 0 */
    assert_edit_tiles_have(ctx, 32, 293, " att_kb=3", "H200"); /* blocks of two key blocks and of one */
    for (size_t i = 0; i < sizeof h100_own / sizeof h100_own[0]; i++)
        assert_edit_tiles_have(ctx, h100_own[i].b, h100_own[i].t, h100_own[i].h200, "H200");
    for (size_t i = 0; i < sizeof gq_shared / sizeof gq_shared[0]; i++)
        assert_edit_tiles_have(ctx, gq_shared[i].b, gq_shared[i].t, gq_shared[i].both, "H200");
    assert_edit_tiles_have(ctx, 16, 691, " gq_stages=3", "H200"); /* two gQ blocks of two batch rows an SM */
    /* The thirty-fifth session's: both key-block organisations at B=1,T=1024 and B=2,T=768, the pair's product
     * in launches of their own at B=64,T=256, gS rounded at B=32,T=773 (where the later pair=2 wins). */
    assert_edit_tiles_have(ctx, 1, 1024, " att_kb=3", "H200");
    assert_edit_tiles_have(ctx, 2, 768, " att_kb=3", "H200");
    assert_edit_tiles_have(ctx, 64, 256, " pair=2", "H200");
    assert_edit_tiles_have(ctx, 32, 773, " gs_round=1", "H200");
    assert_edit_tiles_have(ctx, 32, 773, " pair=2", "H200");
    for (size_t i = 0; i < sizeof session36 / sizeof session36[0]; i++)
        assert_edit_tiles_have(ctx, session36[i].b, session36[i].t, session36[i].h200, "H200");
    /* fp16 takes the TF32 entry where it won in fp16 too (the heuristic says pair_dsm=0, gq_red=0), and keeps
     * its own tiles where the entry lost (the entry says ga_tma=1, splitk_red=2). */
    assert_edit_tiles_at(ctx, 1, 373, ATTNBWD_PRECISION_FP16, " pair_dsm=1", "H200");
    assert_edit_tiles_at(ctx, 32, 773, ATTNBWD_PRECISION_FP16, " gq_red=1", "H200");
    assert_edit_tiles_at(ctx, 1, 1024, ATTNBWD_PRECISION_FP16, " ga_tma=0", "H200");
    assert_edit_tiles_at(ctx, 4, 288, ATTNBWD_PRECISION_FP16, " splitk_red=0", "H200");
    attnbwd_close(ctx);

    char *dir = test_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/tuning.lua", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "return { gpu = 'NVIDIA H200', entries = {\n"
               "  ['softmax_dropout_bwd B=1 H=16 T=919 dropout=0'] = 'block=512 head_fastest=0 in_registers=1 "
               "threads_per_row=32 unroll=4 vec=1',\n"
               "  ['softmax_dropout_bwd B=1 H=16 T=777 dropout=0'] = 'block=256 head_fastest=0 in_registers=1 "
               "split=0 threads_per_row=32 unroll=4 vec=4',\n"
               "  ['edit_attention_bwd B=2 H=16 T=449 dropout=1 precision=0'] = 'bj=32 p_stages=0',\n"
               /* tuned for tf32 (the tiles say so) but keyed fp16: not laid over an fp16 request */
               "  ['edit_attention_bwd B=2 H=16 T=449 dropout=1 precision=2'] = 'bj=32 precision=0',\n"
               "} }\n");
    fclose(f);
    ctx = test_open(dir, &lc);
    assert_non_null(strstr(tiles_of(ctx, 1, 16, 919, 0), "threads_per_row=32")); /* the user's wins */
    /* Plain 16-byte loads cannot fit T=777: the heuristic's choice instead. */
    assert_non_null(strstr(tiles_of(ctx, 1, 16, 777, 0), "threads_per_row=128"));
    attnbwd_shape edit = {ATTNBWD_EDIT_ATTENTION_BWD, 2, 16, 449, 1, 0};
    char *src = NULL, *tiles = NULL;
    assert_int_equal(attnbwd_generate(ctx, &edit, &src, &tiles), ATTNBWD_OK); /* problem 2: the user's too */
    assert_non_null(strstr(tiles, "bj=32"));
    assert_non_null(strstr(tiles, "p_stages=0"));
    attnbwd_free(src);
    attnbwd_free(tiles);
    /* fp16: its own key; the entry's precision=0 does not fit, so the heuristic's tiles at precision 2 */
    attnbwd_shape edit16 = edit;
    edit16.precision = ATTNBWD_PRECISION_FP16;
    assert_int_equal(attnbwd_generate(ctx, &edit16, &src, &tiles), ATTNBWD_OK);
    assert_non_null(strstr(tiles, "precision=2"));
    assert_non_null(strstr(tiles, "bj=64"));
    attnbwd_free(src);
    attnbwd_free(tiles);
    attnbwd_close(ctx);
    setenv("ATTNBWD_GPU_MODEL", "NVIDIA H100 80GB HBM3", 1);
    ctx = test_open(dir, &lc);
    /* The shipped H100 table: problem 1's entries of its own (the H200's B=8,H=8,T=131 is not one: the
     * heuristic's 16 threads a row there), the H200's problem-2 entries but the one that lost on the H100
     * (B=8,T=448), and six of its own (h100_own). */
    assert_non_null(strstr(tiles_of(ctx, 8, 8, 131, 0), "threads_per_row=16 "));
    assert_non_null(strstr(tiles_of(ctx, 2, 8, 293, 1), "split=0 streaming=0 threads_per_row=64 unroll=4 vec=1"));
    assert_non_null(strstr(tiles_of(ctx, 2, 4, 256, 1), "streaming=1 threads_per_row=64"));
    /* the heuristic's: 128 threads a row; the H200's: 128 threads a row and vec=1 */
    assert_non_null(strstr(tiles_of(ctx, 8, 4, 613, 1), "split=1 streaming=0 threads_per_row=256 unroll=4 vec=4"));
    const int side_start_at[][3] = {{2, 449, 1}, {1, 373, 1}, {8, 448, 0}, {4, 640, 0}};
    for (size_t i = 0; i < sizeof side_start_at / sizeof side_start_at[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, " side_start=%d", side_start_at[i][2]);
        assert_edit_tiles_have(ctx, side_start_at[i][0], side_start_at[i][1], want, "H100");
    }
    assert_edit_tiles_have(ctx, 32, 293, " att_kb=3", "H100"); /* inherited from the H200's, measured here too */
    /* and its own entries */
    for (size_t i = 0; i < sizeof h100_own / sizeof h100_own[0]; i++)
        assert_edit_tiles_have(ctx, h100_own[i].b, h100_own[i].t, h100_own[i].h100, "H100");
    for (size_t i = 0; i < sizeof gq_shared / sizeof gq_shared[0]; i++)
        assert_edit_tiles_have(ctx, gq_shared[i].b, gq_shared[i].t, gq_shared[i].both, "H100");
    assert_edit_tiles_have(ctx, 1, 1024, " att_kb=3", "H100"); /* the H200's, level or better here too */
    assert_edit_tiles_have(ctx, 32, 773, " pair=2", "H100");
    for (size_t i = 0; i < sizeof session36 / sizeof session36[0]; i++)
        assert_edit_tiles_have(ctx, session36[i].b, session36[i].t, session36[i].h100, "H100");
    /* fp16: the H100's own choice of TF32 entries, not the H200's (B=1,T=853 and B=16,T=176 are the H200's
     * only; B=16,T=691 the H100's only) */
    assert_edit_tiles_at(ctx, 16, 691, ATTNBWD_PRECISION_FP16, " gq_red=2", "H100");
    assert_edit_tiles_at(ctx, 1, 853, ATTNBWD_PRECISION_FP16, " splitk_red=0", "H100");
    assert_edit_tiles_at(ctx, 16, 176, ATTNBWD_PRECISION_FP16, " pair_kv=0", "H100");
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_GPU_MODEL");
    test_rmtree(dir);
    free(dir);
}

/* options.deterministic and $ATTNBWD_DETERMINISTIC: checked, shown by ctx_get_info; problem 2's tuned tiles then
 * keep their choices but the float-atomic sums, and tiles naming one are refused (test_plan checks every public
 * workload's plan on both tables). */
static void deterministic_option(void **state) {
    (void)state;
    attnbwd_options o;
    attnbwd_options_init(&o);
    assert_int_equal(o.deterministic, 0);
    o.arch = "sm_90";
    o.disk_cache = 0;
    o.deterministic = 2;
    attnbwd_ctx *ctx = NULL;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "options.deterministic = 2: must be 0 or 1");
    o.deterministic = 0;
    setenv("ATTNBWD_DETERMINISTIC", "yes", 1);
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "ATTNBWD_DETERMINISTIC=yes: must be 0 or 1");
    setenv("ATTNBWD_GPU_MODEL", "NVIDIA H200", 1);
    for (int way = 0; way < 3; ++way) { /* the env, the option, neither */
        setenv("ATTNBWD_DETERMINISTIC", way == 0 ? "1" : "0", 1);
        o.deterministic = way == 1;
        assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
        attnbwd_ctx_info ci;
        assert_int_equal(attnbwd_ctx_get_info(ctx, &ci), ATTNBWD_OK);
        assert_int_equal(ci.deterministic, way < 2);
        assert_edit_tiles_have(ctx, 1, 853, way < 2 ? " splitk_red=0" : " splitk_red=2", "H200");
        assert_edit_tiles_have(ctx, 1, 853, " gs_round=1", "H200"); /* the entry's other choices stay */
        assert_edit_tiles_have(ctx, 32, 773, way < 2 ? " gq_red=0" : " gq_red=1", "H200");
        assert_edit_tiles_have(ctx, 32, 773, " pair=2", "H200");
        if (way < 2) {
            attnbwd_shape e = {ATTNBWD_EDIT_ATTENTION_BWD, 1, 16, 853, 1, 0};
            attnbwd_kernel *k = NULL;
            EXPECT_STATUS(attnbwd_get_kernel_tiles(ctx, &e, "splitk_red=1", &k), ATTNBWD_ERR_INVALID_ARGUMENT,
                          "context is deterministic");
        }
        attnbwd_close(ctx);
    }
    unsetenv("ATTNBWD_DETERMINISTIC");
    unsetenv("ATTNBWD_GPU_MODEL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_errors),
        cmocka_unit_test(deterministic_option),
        cmocka_unit_test(open_without_gpu),
        cmocka_unit_test(shape_errors),
        cmocka_unit_test(launch_errors),
        cmocka_unit_test(memory_and_disk_hits),
        cmocka_unit_test(cache_turned_off_by_env),
        cmocka_unit_test(threads_share_one_build),
        cmocka_unit_test(prewarm_counts),
        cmocka_unit_test(generate_source),
        cmocka_unit_test(compile_error_reports_log_and_source),
        cmocka_unit_test(lua_error_has_traceback),
        cmocka_unit_test(compile_arch_is_checked),
        cmocka_unit_test(lane_priority_is_checked),
        cmocka_unit_test(dump_dir_gets_every_artifact),
        cmocka_unit_test(tuning_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
