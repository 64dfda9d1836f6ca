/* The disk cache's keys (runtime/manifest.h): a disk hit plans and renders
 * nothing and gives the kernel the compile gave; every public workload's
 * plan reads back from its manifest as written, and a damaged manifest is
 * refused, never trusted; an entry whose plan does not read back is
 * compiled again; ATTNBWD_CACHE_VERIFY renders again and replaces an entry
 * that disagrees; the keys follow the files of $ATTNBWD_LUA_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cache.h"
#include "internal.h"
#include "manifest.h"
#include "nvrtc_compile.h"
#include "suite.h"
#include "test_util.h"

static attnbwd_kernel *get(attnbwd_ctx *ctx, const attnbwd_shape *s) {
    attnbwd_kernel *k = NULL;
    if (attnbwd_get_kernel(ctx, s, &k) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    return k;
}

static void assert_same_plan(const kernel_plan *a, const kernel_plan *b) {
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->tiles, b->tiles);
    assert_memory_equal(a->grid, b->grid, sizeof a->grid);
    assert_memory_equal(a->block, b->block, sizeof a->block);
    assert_int_equal(a->shared_bytes, b->shared_bytes);
    assert_int_equal(a->align, b->align);
    assert_string_equal(a->compile_arch, b->compile_arch);
    assert_int_equal(a->workspace_bytes, b->workspace_bytes);
    assert_int_equal(a->unordered_outputs, b->unordered_outputs);
    assert_memory_equal(a->lane_priority, b->lane_priority, sizeof a->lane_priority);
    assert_int_equal(a->n_launches, b->n_launches);
    assert_int_equal(a->n_lanes, b->n_lanes);
    assert_int_equal(a->n_events, b->n_events);
    for (int i = 0; i < a->n_launches; ++i) {
        const plan_launch *x = &a->launches[i], *y = &b->launches[i];
        assert_string_equal(x->name, y->name);
        assert_memory_equal(x->grid, y->grid, sizeof x->grid);
        assert_memory_equal(x->block, y->block, sizeof x->block);
        assert_int_equal(x->shared_bytes, y->shared_bytes);
        assert_int_equal(x->lane, y->lane);
        assert_int_equal(x->signal, y->signal);
        assert_int_equal(x->pdl, y->pdl);
        assert_int_equal(x->n_waits, y->n_waits);
        assert_memory_equal(x->waits, y->waits, sizeof x->waits);
        assert_int_equal(x->n_args, y->n_args);
        for (int j = 0; j < x->n_args; ++j) assert_string_equal(x->args[j], y->args[j]);
    }
}

/* A second context finds the kernel on disk without planning or rendering
 * (its plan has no source) and with everything the compile gave it. */
static void disk_hit_plans_nothing(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_shape s = test_shape(2, 4, 256, 1);
    attnbwd_ctx *a = test_open(dir, &lc), *b = test_open(dir, &lc);
    attnbwd_kernel *ka = get(a, &s), *kb = get(b, &s);
    assert_int_equal(ka->origin, ATTNBWD_FROM_COMPILE);
    assert_non_null(ka->plan.source);
    assert_int_equal(kb->origin, ATTNBWD_FROM_DISK);
    assert_null(kb->plan.source);
    assert_same_plan(&ka->plan, &kb->plan);
    assert_string_equal(ka->key, kb->key);
    assert_string_equal(ka->arch, kb->arch);
    assert_int_equal(ka->cubin_len, kb->cubin_len);
    assert_memory_equal(ka->cubin, kb->cubin, ka->cubin_len);
    assert_int_equal(lc.warn, 0);
    attnbwd_close(a);
    attnbwd_close(b);
    test_rmtree(dir);
    free(dir);
}

/* Every public workload's plan, under both shipped tables, reads back from
 * its manifest as it was written. */
static void manifest_round_trip(void **state) {
    (void)state;
    suite_case *cases = NULL;
    size_t n = 0;
    assert_int_equal(suite_load("sol066_workload", &cases, &n), ATTNBWD_OK);
    assert_int_equal(suite_load("sol072_workload", &cases, &n), ATTNBWD_OK);
    static const char *const models[][2] = {{"NVIDIA H200", "tuning_h200"}, {"NVIDIA H100 80GB HBM3", "tuning_h100"}};
    int launches = 0;
    for (int m = 0; m < 2; ++m) {
        gen_state *g = NULL;
        assert_int_equal(gen_open(&g), ATTNBWD_OK);
        assert_int_equal(gen_configure(g, models[m][0], NULL, 0, models[m][1]), ATTNBWD_OK);
        for (size_t i = 0; i < n; ++i) {
            kernel_plan p, back;
            if (gen_plan(g, &cases[i].shape, "sm_90", NULL, &p) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
            manifest_inputs in = {"embedded sha256:0", "sm_90", &cases[i].shape, 0, NULL, NULL};
            char *head = manifest_head(&in);
            char *m_text = manifest_full(head, models[m][0], models[m][1], &p, "--opts");
            assert_non_null(m_text);
            if (manifest_plan(m_text, strlen(head), "sm_90", &back) != ATTNBWD_OK)
                fail_msg("%s: %s", cases[i].name, attnbwd_last_error());
            assert_same_plan(&p, &back);
            assert_null(back.source);
            launches += p.n_launches;
            kernel_plan_free(&p);
            kernel_plan_free(&back);
            free(head);
            free(m_text);
        }
        gen_close(g);
    }
    assert_true(launches > 100); /* problem 2's plans of many kernels were among them */
    free(cases);
}

/* A manifest cut short anywhere, or with a field out of its range, is
 * refused with a reason: never a crash, never a plan past the limits. */
static void damaged_manifest_refused(void **state) {
    (void)state;
    gen_state *g = NULL;
    assert_int_equal(gen_open(&g), ATTNBWD_OK);
    assert_int_equal(gen_configure(g, "", NULL, 0, NULL), ATTNBWD_OK);
    attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, 2, 16, 449, 1, 0};
    kernel_plan p, back;
    assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
    manifest_inputs in = {"embedded sha256:0", "sm_90", &s, 0, NULL, NULL};
    char *head = manifest_head(&in);
    char *good = manifest_full(head, "", NULL, &p, "--opts");
    size_t hl = strlen(head), body_end = (size_t)(strstr(good, "source-xxh128 ") - good);
    for (size_t cut = hl; cut < body_end; cut += 7) {
        char *m = strndup(good, cut);
        attnbwd_status st = manifest_plan(m, hl, "sm_90", &back);
        if (st == ATTNBWD_OK) fail_msg("a manifest cut at byte %zu of %zu was read", cut, body_end);
        free(m);
    }
    static const struct {
        const char *from, *to;
    } edits[] = {
        {"\nalign 16\n", "\nalign 12\n"},
        {"\ngrid ", "\ngrid 0 "},
        {"\nshared ", "\nshared 9999999"},
        {"\ncompile_arch sm_90a\n", "\ncompile_arch sm_80a\n"},
        {" lane 0 ", " lane 9 "},
        {" signal ", " signal 99"},
        {" args ", " args 17 "},
        {"\nlaunches ", "\nlaunches 9"},
        {"\nkernel ", "\nkernel bad name"},
        {"\nunordered 0", "\nunordered 256"},
        {"\nlane_priority ", "\nlane_priority 7 "},
        {"\nworkspace ", "\nworkspace 99999999999999999999"}, /* past 64 bits */
        {"\nworkspace ", "\nworkspace +"},                    /* not as manifest_full writes numbers */
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; ++i) {
        const char *at = strstr(good + hl, edits[i].from);
        if (!at) fail_msg("no '%s' in the manifest", edits[i].from);
        size_t off = (size_t)(at - good), fl = strlen(edits[i].from), tl = strlen(edits[i].to);
        char *m = malloc(strlen(good) + tl + 1);
        memcpy(m, good, off);
        memcpy(m + off, edits[i].to, tl);
        strcpy(m + off + tl, at + fl);
        if (manifest_plan(m, hl, "sm_90", &back) == ATTNBWD_OK) fail_msg("'%s' -> '%s' was read", edits[i].from,
                                                                          edits[i].to);
        assert_true(attnbwd_last_error()[0] != '\0');
        free(m);
    }
    assert_int_equal(manifest_plan(good, hl, "sm_90", &back), ATTNBWD_OK); /* the edits were the faults */
    kernel_plan_free(&back);
    kernel_plan_free(&p);
    free(head);
    free(good);
    gen_close(g);
}

/* The head a context forms for shape (no override). */
static char *head_of(attnbwd_ctx *ctx, const attnbwd_shape *s) {
    char *tuned = NULL;
    assert_int_equal(gen_tuned(ctx->gen, s, &tuned), ATTNBWD_OK);
    manifest_inputs in = {ctx->scripts_hash, ctx->arch, s, ctx->deterministic, NULL, tuned};
    char *head = manifest_head(&in);
    free(tuned);
    return head;
}

/* Plants an entry under head's key: head, then body, then the payload. */
static void plant(attnbwd_ctx *ctx, const char *head, const char *body, const void *payload, size_t payload_len) {
    size_t hl = strlen(head), bl = strlen(body);
    char *m = malloc(hl + bl + 1);
    memcpy(m, head, hl);
    memcpy(m + hl, body, bl + 1);
    char key[CACHE_KEY_HEX + 1];
    cache_key(head, hl, key);
    assert_int_equal(cache_put(&ctx->cache, key, m, hl + bl, payload, payload_len), 1);
    free(m);
}

/* An entry of the right head whose plan does not read back: reported,
 * compiled again, and replaced. */
static void unreadable_entry_rebuilt(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_shape s = test_shape(2, 4, 256, 1);
    attnbwd_ctx *ctx = test_open(dir, &lc);
    char *head = head_of(ctx, &s);
    plant(ctx, head, "gpu - (no table)\ntiles x=1\nkernel k\ngrid 1 1\n", "not a cubin", strlen("not a cubin"));
    attnbwd_kernel *k = get(ctx, &s);
    assert_int_equal(k->origin, ATTNBWD_FROM_COMPILE);
    assert_int_equal(lc.warn, 1); /* "not used: its manifest does not parse at ..." */
    assert_non_null(strstr(lc.last, "compiled ")); /* the compile came after the warning */
    attnbwd_close(ctx);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc);
    k = get(ctx, &s);
    assert_int_equal(k->origin, ATTNBWD_FROM_DISK);
    assert_int_equal(lc.warn, 0);
    free(head);
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
}

/* A hit trusts the head (the scripts' hash stands for the source it
 * renders); ATTNBWD_CACHE_VERIFY=1 renders again, and an entry whose plan or
 * source disagrees is reported and replaced by a compile. */
static void verify_renders_again(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_shape s = test_shape(2, 4, 256, 1), other = test_shape(2, 4, 128, 1);
    attnbwd_ctx *ctx = test_open(dir, &lc);
    /* Another shape's cubin: a sound one (cached cubins are checked), yet not this kernel's. */
    attnbwd_kernel *k = get(ctx, &other);
    size_t planted_len = k->cubin_len;
    void *planted = malloc(planted_len);
    memcpy(planted, k->cubin, planted_len);
    k = get(ctx, &s);
    /* the entry's own manifest with one byte of the source changed, and another payload */
    char *head = head_of(ctx, &s), options[512];
    nvrtc_options_string(k->arch, options, sizeof options);
    k->plan.source[strlen(k->plan.source) - 2] ^= 1;
    char *m = manifest_full(head, ctx->gpu.model, ctx->gpu.table, &k->plan, options);
    plant(ctx, head, m + strlen(head), planted, planted_len);
    attnbwd_close(ctx);

    ctx = test_open(dir, &lc);
    k = get(ctx, &s);
    assert_int_equal(k->origin, ATTNBWD_FROM_DISK);
    assert_int_equal(k->cubin_len, planted_len);
    assert_memory_equal(k->cubin, planted, planted_len);
    attnbwd_close(ctx);

    setenv("ATTNBWD_CACHE_VERIFY", "1", 1);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc);
    k = get(ctx, &s);
    assert_int_equal(k->origin, ATTNBWD_FROM_COMPILE);
    assert_int_equal(lc.warn, 1);
    attnbwd_close(ctx);
    lc = (log_counts){0};
    ctx = test_open(dir, &lc); /* verified again: now the entry agrees */
    k = get(ctx, &s);
    assert_int_equal(k->origin, ATTNBWD_FROM_DISK);
    assert_int_equal(lc.warn, 0);
    assert_true(k->cubin_len > 1000);
    assert_true(k->cubin_len != planted_len || memcmp(k->cubin, planted, planted_len) != 0); /* replaced */
    attnbwd_close(ctx);
    unsetenv("ATTNBWD_CACHE_VERIFY");
    free(planted);
    free(m);
    free(head);
    test_rmtree(dir);
    free(dir);
}

static void copy_tree(const char *from, const char *to) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/lua' '%s/templates' '%s/'", to, from, from, to);
    assert_int_equal(system(cmd), 0);
}

static void append(const char *dir, const char *file, const char *text) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The key of shape's kernel from a new context, and where it came from. */
static attnbwd_origin key_of(const char *cache, const attnbwd_shape *s, char key[CACHE_KEY_HEX + 1]) {
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(cache, &lc);
    attnbwd_kernel *k = get(ctx, s);
    snprintf(key, CACHE_KEY_HEX + 1, "%s", k->key);
    attnbwd_origin o = k->origin;
    attnbwd_close(ctx);
    return o;
}

/* With ATTNBWD_LUA_DIR the key names that folder's files: a copy of the
 * built-in scripts gets keys of its own, any edit of a file new keys (no
 * stale hit), and the edit undone the old ones. */
static void lua_dir_keys_follow_files(void **state) {
    (void)state;
    const char *src = getenv("ATTNBWD_SOURCE_DIR");
    assert_non_null(src);
    char *dir = test_tmpdir();
    char scripts[4200], cache[4200], key0[33], key1[33], key2[33], key3[33], again[33];
    snprintf(scripts, sizeof scripts, "%s/scripts", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    copy_tree(src, scripts);
    attnbwd_shape s = test_shape(2, 4, 256, 1);
    assert_int_equal(key_of(cache, &s, key0), ATTNBWD_FROM_COMPILE);
    setenv("ATTNBWD_LUA_DIR", scripts, 1);
    assert_int_equal(key_of(cache, &s, key1), ATTNBWD_FROM_COMPILE);
    assert_string_not_equal(key0, key1);
    assert_int_equal(key_of(cache, &s, again), ATTNBWD_FROM_DISK);
    assert_string_equal(again, key1);
    /* a template's edit changes the key, and so the kernel */
    append(scripts, "templates/softmax_dropout_bwd.cu", "// edited\n");
    assert_int_equal(key_of(cache, &s, key2), ATTNBWD_FROM_COMPILE);
    assert_string_not_equal(key2, key1);
    /* an edit of a file this kernel's plan never reads too: the folder is one hash */
    append(scripts, "lua/tuning_h200.lua", "-- edited\n");
    assert_int_equal(key_of(cache, &s, key3), ATTNBWD_FROM_COMPILE);
    assert_string_not_equal(key3, key2);
    copy_tree(src, scripts); /* the edits undone */
    assert_int_equal(key_of(cache, &s, again), ATTNBWD_FROM_DISK);
    assert_string_equal(again, key1);
    /* a folder without the scripts: a clear error */
    setenv("ATTNBWD_LUA_DIR", cache, 1);
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.disk_cache = 0;
    attnbwd_ctx *ctx = NULL;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_IO, "cannot read the folder");
    unsetenv("ATTNBWD_LUA_DIR");
    test_rmtree(dir);
    free(dir);
}

/* 1 when shape's kernel, from a new context on cache, has line tables
 * (-lineinfo's .debug_line section); its key into key. */
static int has_line_info(const char *cache, const attnbwd_shape *s, char key[CACHE_KEY_HEX + 1],
                         attnbwd_origin *origin) {
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(cache, &lc);
    attnbwd_kernel *k = get(ctx, s);
    snprintf(key, CACHE_KEY_HEX + 1, "%s", k->key);
    *origin = k->origin;
    static const char name[] = ".debug_line";
    int found = 0;
    for (size_t i = 0; !found && i + sizeof name <= k->cubin_len; i++)
        found = memcmp((const char *)k->cubin + i, name, sizeof name) == 0; /* the section name, its NUL too */
    attnbwd_close(ctx);
    return found;
}

/* Line info only where ATTNBWD_LINEINFO=1 asks for it, and its kernels are
 * entries of their own: each kind is found again, neither for the other. */
static void lineinfo_on_request(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    char plain[33], lined[33], again[33];
    attnbwd_origin o;
    attnbwd_shape s = test_shape(2, 4, 256, 1);
    unsetenv("ATTNBWD_LINEINFO");
    assert_false(has_line_info(dir, &s, plain, &o));
    assert_int_equal(o, ATTNBWD_FROM_COMPILE);
    setenv("ATTNBWD_LINEINFO", "1", 1);
    assert_true(has_line_info(dir, &s, lined, &o));
    assert_int_equal(o, ATTNBWD_FROM_COMPILE);
    assert_string_not_equal(plain, lined);
    assert_true(has_line_info(dir, &s, again, &o));
    assert_int_equal(o, ATTNBWD_FROM_DISK);
    setenv("ATTNBWD_LINEINFO", "0", 1);
    assert_false(has_line_info(dir, &s, again, &o));
    assert_int_equal(o, ATTNBWD_FROM_DISK);
    assert_string_equal(again, plain);
    unsetenv("ATTNBWD_LINEINFO");
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(disk_hit_plans_nothing),
        cmocka_unit_test(manifest_round_trip),
        cmocka_unit_test(damaged_manifest_refused),
        cmocka_unit_test(unreadable_entry_rebuilt),
        cmocka_unit_test(verify_renders_again),
        cmocka_unit_test(lua_dir_keys_follow_files),
        cmocka_unit_test(lineinfo_on_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
