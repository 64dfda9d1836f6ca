/* Every kernel of the public suite, and of the awkward shapes the GPU tests
 * check, generates and compiles with NVRTC for sm_90; a second context finds
 * them all in the disk cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nvrtc_compile.h"
#include "suite.h"
#include "test_util.h"

static void public_suite_compiles_then_hits(void **state) {
    (void)state;
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load("sol066_workload", &cases, &n) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    assert_int_equal(n, 16);
    attnbwd_shape shapes[32];
    for (size_t i = 0; i < n; ++i) shapes[i] = cases[i].shape;
    const int64_t awkward[][4] = {{1, 1, 1, 1}, {2, 3, 3, 0}, {1, 4, 17, 1}, {3, 2, 127, 1},
                                  {1, 2, 1000, 0}, {1, 1, 4097, 1}, {1, 1, 8192, 1}, {1, 2, 32800, 1}};
    size_t total = n;
    for (size_t i = 0; i < sizeof awkward / sizeof awkward[0]; ++i)
        shapes[total++] = test_shape(awkward[i][0], awkward[i][1], awkward[i][2], (int)awkward[i][3]);

    char *dir = test_tmpdir();
    log_counts lc = {0};
    attnbwd_ctx *ctx = test_open(dir, &lc);
    attnbwd_prewarm_summary sum;
    if (attnbwd_prewarm(ctx, shapes, total, 0, NULL, NULL, &sum) != ATTNBWD_OK)
        fail_msg("prewarm: %s", attnbwd_last_error());
    assert_int_equal(sum.compiled, total);
    if (lc.warn) fail_msg("%d warnings compiling the suite, the last: %s", lc.warn, lc.last);
    for (size_t i = 0; i < total; ++i) {
        attnbwd_kernel *k = NULL;
        assert_int_equal(attnbwd_get_kernel(ctx, &shapes[i], &k), ATTNBWD_OK);
        attnbwd_kernel_info info;
        attnbwd_kernel_get_info(k, &info);
        assert_string_equal(info.arch, "sm_90");
        assert_true(info.cubin_bytes > 1000);
    }
    attnbwd_close(ctx);
    ctx = test_open(dir, &lc);
    assert_int_equal(attnbwd_prewarm(ctx, shapes, total, 0, NULL, NULL, &sum), ATTNBWD_OK);
    assert_int_equal(sum.from_disk, total);
    assert_int_equal(sum.compiled, 0);
    attnbwd_close(ctx);
    test_rmtree(dir);
    free(dir);
    free(cases);
}

/* The edit-attention backward: every kernel of its public suite generates and
 * compiles in TF32, and four of them in fp32 and fp16 too. */
static void edit_attention_suite_compiles(void **state) {
    (void)state;
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load("sol072_workload", &cases, &n) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    assert_int_equal(n, 16);
    /* All 16 in TF32 (the default); fp32 and fp16 on four that span the
     * suite (B=64,T=128; B=1,T=373; B=2,T=449; B=32,T=773), to keep CI short. */
    const size_t other[4] = {0, 1, 12, 14};
    attnbwd_shape shapes[16 + 8];
    for (size_t i = 0; i < n; ++i) shapes[i] = cases[i].shape;
    for (size_t i = 0; i < 4; ++i) {
        shapes[n + 2 * i] = shapes[n + 2 * i + 1] = cases[other[i]].shape;
        shapes[n + 2 * i].precision = ATTNBWD_PRECISION_FP32;
        shapes[n + 2 * i + 1].precision = ATTNBWD_PRECISION_FP16;
    }
    const size_t total = n + 8;
    log_counts lc = {0};
    /* Compiled into the tests' cache, or found there where this run reuses
     * the plain build's (test_kernel_cache). */
    attnbwd_ctx *ctx = test_open(test_kernel_cache(), &lc);
    attnbwd_kernel *k = NULL;
    attnbwd_prewarm_summary sum;
    if (attnbwd_prewarm(ctx, shapes, total, 0, NULL, NULL, &sum) != ATTNBWD_OK)
        fail_msg("prewarm: %s", attnbwd_last_error());
    assert_int_equal(sum.compiled + sum.from_disk, total);
    /* ptxas reported no performance loss (serialized wgmmas, registers it
     * could not give) in any of them; each would be a warning. */
    if (lc.warn) fail_msg("%d warnings compiling the suite, the last: %s", lc.warn, lc.last);
    for (size_t i = 0; i < total; ++i) {
        assert_int_equal(attnbwd_get_kernel(ctx, &shapes[i], &k), ATTNBWD_OK);
        /* The large TF32 and fp16 products run on wgmma, which NVRTC builds for
         * sm_90a only (B=64,T=128 has them all); fp32 keeps mma.sync and sm_90. */
        attnbwd_kernel_info info;
        assert_int_equal(attnbwd_kernel_get_info(k, &info), ATTNBWD_OK);
        const int fp32 = shapes[i].precision == ATTNBWD_PRECISION_FP32;
        assert_string_equal(info.arch, fp32 ? "sm_90" : "sm_90a");
        assert_int_equal(info.unordered_outputs, 0); /* the heuristic's tiles: every output bit for bit */
        /* gA, grad_qkv, the row sums and gS (rows padded to a multiple of 4)
         * live in the workspace, with small partials, the wgmma products' B
         * transposed (at most hidden_states and attention_output, [BT, 1024]
         * each, plus the two weights) and split-K partials; gS not where it is
         * grad_edit_region_bias itself (gs_direct=1 at B = 1, the pass on wgmma),
         * and in fp16 (rows padded to a multiple of 8) where gQ takes fp16 operands. */
        const int gs_direct = shapes[i].batch == 1 && strstr(info.tiles, "gs_direct=1") &&
                              strstr(info.tiles, "wg_att=1") && strstr(info.tiles, " wg=1");
        const int gs_f16 = !gs_direct && strstr(info.tiles, "gq_f16=1") && strstr(info.tiles, "att_f16=1") &&
                           strstr(info.tiles, "gq_tma=0");
        const size_t bt = (size_t)(shapes[i].batch * shapes[i].seq_len), T = (size_t)shapes[i].seq_len;
        const size_t gs_floats = gs_direct ? 0 : gs_f16 ? bt * 16 * ((T + 7) / 8 * 8) / 2 : bt * 16 * ((T + 3) / 4 * 4);
        const size_t floats = bt * 1024 + bt * 3072 + bt * 16 + gs_floats;
        assert_true(attnbwd_edit_attention_workspace(k) >= floats * 4);
        assert_true(attnbwd_edit_attention_workspace(k) <= floats * 4 + 2 * (bt + 4) * 1024 * 4 + ((size_t)256 << 20));
    }
    /* A split product's K slices added by atomics: the kernel says which outputs (of grad_hidden_states,
     * grad_qkv_weight, grad_out_weight: bits 0, 1, 3) vary in their last bits. */
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &shapes[1], "splitk_red=1", &k), ATTNBWD_OK);
    attnbwd_kernel_info red;
    assert_int_equal(attnbwd_kernel_get_info(k, &red), ATTNBWD_OK);
    assert_true(red.unordered_outputs != 0 && (red.unordered_outputs & ~0x0bu) == 0);
    /* The exploration candidate with gV and gK on separate warps compiles at both key-block sizes. */
    attnbwd_shape odd = {ATTNBWD_EDIT_ATTENTION_BWD, 2, 16, 77, 1, 0};
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "kv_split=1 bj=32", &k), ATTNBWD_OK);
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "kv_split=1 bj=64", &k), ATTNBWD_OK);
    /* P and Pd through the shared-memory ring: rows copied shifted at odd T, three buffers at bj=64. */
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "p_stages=2 bj=32", &k), ATTNBWD_OK);
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "p_stages=3 bj=64", &k), ATTNBWD_OK);
    /* The other exploration keys: gQ on mma.sync and early placement. */
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "wg_gq=0 pdl=2", &k), ATTNBWD_OK);
    /* The wgmma products without the TMA beside the attention pass on wgmma, which names the
     * mbarrier helpers of templates/tma.cu either way. */
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &shapes[0], "tma=0", &k), ATTNBWD_OK);
    /* The attention pass on mma.sync where it would run on wgmma (the public shapes above compile it on wgmma). */
    assert_int_equal(attnbwd_get_kernel_tiles(ctx, &odd, "wg_att=0", &k), ATTNBWD_OK);
    /* Argument checks come before any launch. */
    attnbwd_edit_attention_args a;
    memset(&a, 0, sizeof a);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "args->grad_output is NULL"));
    attnbwd_shape big = {ATTNBWD_EDIT_ATTENTION_BWD, 1, 16, 1025, 1, 0};
    assert_int_equal(attnbwd_get_kernel(ctx, &big, &k), ATTNBWD_ERR_UNSUPPORTED);
    assert_non_null(strstr(attnbwd_last_error(), "T <= 1024"));
    attnbwd_shape bad = {ATTNBWD_EDIT_ATTENTION_BWD, 1, 16, 64, 1, 3};
    assert_int_equal(attnbwd_get_kernel(ctx, &bad, &k), ATTNBWD_ERR_INVALID_ARGUMENT);
    attnbwd_close(ctx);
    free(cases);
}

/* ptxas's performance warnings are picked out of an NVRTC log, line by line. */
static int seen_lines;
static char last_line[256];
static void count_line(const char *line, int len, void *user) {
    (void)user;
    assert_true(len > 0 && !memchr(line, '\n', (size_t)len));
    assert_true(strncmp(line, "Potential Performance Loss", 26) == 0 || strncmp(line, "Spills: ", 8) == 0);
    snprintf(last_line, sizeof last_line, "%.*s", len, line);
    ++seen_lines;
}
/* How many warnings the parser finds in log, each seen by count_line once. */
static int warnings_in(const char *log) {
    seen_lines = 0;
    const int n = nvrtc_performance_warnings(log, count_line, NULL);
    assert_int_equal(seen_lines, n);
    return n;
}
static void performance_warnings_are_found(void **state) {
    (void)state;
    const char *log = "ptxas info    : Used 168 registers\n"
                      "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are "
                      "serialized in the function 'f'\n"
                      "ptxas info    : 0 bytes gmem\n"
                      "ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored";
    assert_int_equal(warnings_in(log), 2);
    assert_int_equal(warnings_in("ptxas info    : Used 40 registers\n"), 0);
    assert_int_equal(nvrtc_performance_warnings(NULL, NULL, NULL), 0);
    /* A function that spills is named; one that does not is not a warning (the
     * numbers' line as NVRTC writes it, then as nvcc does). */
    const char *spills = "ptxas info    : Function properties for fast\n"
                         "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                         "ptxas info    : Used 231 registers, used 16 barriers\n"
                         "ptxas info    : Function properties for slow_attention\n"
                         "ptxas         .     72 bytes stack frame, 68 bytes spill stores, 76 bytes spill loads\n"
                         "ptxas info    : Used 255 registers, used 16 barriers, 72 bytes cumulative stack size\n"
                         "ptxas info    : Function properties for slow_too\n"
                         "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n";
    assert_int_equal(warnings_in(spills), 2);
    assert_string_equal(last_line, "Spills: slow_too stores 4 bytes to local memory and loads 4");
}

/* The same from NVRTC's own log: a kernel held to 32 registers that keeps 96
 * values live spills, and the warning names it. */
static void nvrtc_reports_spills(void **state) {
    (void)state;
    const char *src = "extern \"C\" __global__ void __launch_bounds__(1024, 2) spilling(float *x) {\n"
                      "    float v[96];\n"
                      "#pragma unroll\n"
                      "    for (int i = 0; i < 96; ++i) v[i] = x[threadIdx.x + 1024 * i];\n"
                      "    float s = 0.f;\n"
                      "#pragma unroll\n"
                      "    for (int i = 0; i < 96; ++i) s += v[i] * v[95 - i];\n"
                      "#pragma unroll\n"
                      "    for (int i = 0; i < 96; ++i) x[threadIdx.x + 1024 * i] = v[i] * s;\n"
                      "}\n";
    nvrtc_result r;
    assert_int_equal(nvrtc_compile(src, "spilling", "sm_90", &r), ATTNBWD_OK);
    if (warnings_in(r.log) < 1) fail_msg("no spill found in NVRTC's log: %s", r.log);
    assert_non_null(strstr(last_line, "Spills: spilling stores "));
    nvrtc_result_free(&r);
}

int main(int argc, char **argv) {
    test_filter(argc, argv);
    const struct CMUnitTest tests[] = {cmocka_unit_test(public_suite_compiles_then_hits),
                                       cmocka_unit_test(edit_attention_suite_compiles),
                                       cmocka_unit_test(performance_warnings_are_found),
                                       cmocka_unit_test(nvrtc_reports_spills)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
