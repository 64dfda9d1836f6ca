/* Kernels made for another machine's GPU, and the disk cache's keys: the
 * GPU model -> tuning table choice; a prewarm without a GPU for --gpu h100
 * found entirely by an H100 (the fake driver reporting the H100's name and
 * SM count); a disk hit that plans and renders nothing; the manifest's plan
 * read back as it was written, and refused where damaged; keys that follow
 * the files of $ATTNBWD_LUA_DIR; ATTNBWD_CACHE_VERIFY. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu_model.h"
#include "internal.h"
#include "manifest.h"
#include "test_util.h"

/* ---- GPU models ---- */

static void gpu_models_pick_tables(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int device_sms;
        const char *model, *table;
        int sm_count, unknown, guessed;
    } cases[] = {
        {"h100", 0, "NVIDIA H100 80GB HBM3", "tuning_h100", 132, 0, 0},
        {"H100", 0, "NVIDIA H100 80GB HBM3", "tuning_h100", 132, 0, 0},
        {"NVIDIA H100 80GB HBM3", 132, "NVIDIA H100 80GB HBM3", "tuning_h100", 132, 0, 0},
        {"h100-nvl", 0, "NVIDIA H100 NVL", "tuning_h100", 132, 0, 0},
        {"NVIDIA H100 NVL", 132, "NVIDIA H100 NVL", "tuning_h100", 132, 0, 0},
        {"h100-pcie", 0, "NVIDIA H100 PCIe", NULL, 114, 0, 0},
        {"NVIDIA H100 PCIe", 114, "NVIDIA H100 PCIe", NULL, 114, 0, 0},
        /* the device's SMs decide over the name */
        {"NVIDIA H100 80GB HBM3", 114, "NVIDIA H100 80GB HBM3", NULL, 114, 0, 0},
        /* a name of the family the list does not hold: the flagship's SMs, said so */
        {"NVIDIA H100 SXM5 64GB", 0, "NVIDIA H100 SXM5 64GB", "tuning_h100", 132, 0, 1},
        {"NVIDIA H100 SXM5 64GB", 132, "NVIDIA H100 SXM5 64GB", "tuning_h100", 132, 0, 0},
        {"h200", 0, "NVIDIA H200", "tuning_h200", 132, 0, 0},
        {"NVIDIA H200 NVL", 0, "NVIDIA H200 NVL", "tuning_h200", 132, 0, 0},
        /* words, not substrings: the GH200 is no H200 */
        {"NVIDIA GH200 480GB", 132, "NVIDIA GH200 480GB", NULL, 132, 1, 0},
        {"NVIDIA A100-SXM4-80GB", 108, "NVIDIA A100-SXM4-80GB", NULL, 108, 1, 0},
        {"h1OO", 0, "h1OO", NULL, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        gpu_choice c;
        gpu_model_choose(cases[i].name, cases[i].device_sms, &c);
        if (strcmp(c.model, cases[i].model) || (c.table == NULL) != (cases[i].table == NULL) ||
            (c.table && strcmp(c.table, cases[i].table)) || c.sm_count != cases[i].sm_count ||
            c.unknown != cases[i].unknown || c.sm_guessed != cases[i].guessed)
            fail_msg("%s (%d SMs): model '%s' table %s, %d SMs, unknown %d, guessed %d; note: %s", cases[i].name,
                     cases[i].device_sms, c.model, c.table ? c.table : "none", c.sm_count, c.unknown, c.sm_guessed,
                     c.note);
        assert_true(c.note[0] != '\0');
        assert_string_equal(c.arch, cases[i].unknown ? "" : "sm_90");
    }
    gpu_choice none;
    gpu_model_choose("", 0, &none);
    assert_null(none.table);
    assert_string_equal(none.model, "");
    assert_non_null(strstr(none.note, "no GPU model"));
}

/* options.gpu_model brings the model's arch; an arch other than the one its
 * device reports is refused; the context says which table it has. */
static void gpu_model_option(void **state) {
    (void)state;
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.disk_cache = 0;
    o.gpu_model = "h100";
    o.arch = "sm_90a";
    attnbwd_ctx *ctx = NULL;
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "reports sm_90");
    setenv("ATTNBWD_LIBCUDA", "/nonexistent/libcuda.so.1", 1); /* no GPU, whatever the machine has */
    o.arch = NULL;
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
    attnbwd_ctx_info in;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_string_equal(in.arch, "sm_90");
    assert_string_equal(in.gpu_model, "NVIDIA H100 80GB HBM3");
    assert_string_equal(in.gpu_model_from, "options.gpu_model");
    assert_int_equal(in.gpu_sm_count, 132);
    assert_string_equal(in.tuning_table, "lua/tuning_h100.lua");
    attnbwd_close(ctx);
    /* the option over the environment */
    setenv("ATTNBWD_GPU_MODEL", "h100-pcie", 1);
    o.gpu_model = NULL;
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_string_equal(in.gpu_model, "NVIDIA H100 PCIe");
    assert_string_equal(in.tuning_table, "");
    assert_non_null(strstr(in.tuning_note, "114"));
    attnbwd_close(ctx);
    o.gpu_model = "h200";
    assert_int_equal(attnbwd_open(&o, &ctx), ATTNBWD_OK);
    assert_int_equal(attnbwd_ctx_get_info(ctx, &in), ATTNBWD_OK);
    assert_string_equal(in.tuning_table, "lua/tuning_h200.lua");
    attnbwd_close(ctx);
    o.gpu_model = "NVIDIA H100\nlibrary 9";
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_INVALID_ARGUMENT, "options.gpu_model");
    /* a model of no known family: no arch of its own */
    o.gpu_model = "NVIDIA A100-SXM4-80GB";
    EXPECT_STATUS(attnbwd_open(&o, &ctx), ATTNBWD_ERR_NO_DRIVER, "none whose arch is known");
    unsetenv("ATTNBWD_GPU_MODEL");
    unsetenv("ATTNBWD_LIBCUDA");
}

/* ---- the attnbwd tool, run with a chosen environment ---- */

typedef struct tool_run {
    int rc;
    char out[1 << 16]; /* stdout and stderr */
} tool_run;

/* Runs the tool with env ("NAME=value", NULL-terminated) added to ours. */
static void run_tool(tool_run *r, const char *const *env, const char *const *args) {
    const char *bin = getenv("ATTNBWD_BINARY");
    assert_non_null(bin);
    const char *argv[32] = {bin};
    for (int i = 0; args[i] && i < 30; ++i) argv[i + 1] = args[i];
    char path[] = "/tmp/attnbwd-prewarm-out-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; env[i]; ++i) putenv((char *)env[i]);
        if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    ssize_t n = pread(fd, r->out, sizeof r->out - 1, 0);
    r->out[n > 0 ? n : 0] = '\0';
    close(fd);
}

/* N from "N compiled, M from the disk cache" of the summary line of the run. */
static long summary_count(const tool_run *r, const char *what) {
    const char *line = strstr(r->out, " kernels for ");
    const char *p = line ? strstr(line, what) : NULL;
    if (!p) fail_msg("no \"%s\" on a summary line of:\n%s", what, r->out);
    while (p > line && p[-1] == ' ') --p;
    while (p > line && p[-1] >= '0' && p[-1] <= '9') --p;
    return strtol(p, NULL, 10);
}

static char *write_suite(const char *dir) {
    char *path = malloc(4200);
    snprintf(path, 4200, "%s/suite.lua", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    /* B=4,T=288: an entry of the H100's own (pair=0 ga_tma=1 lane_pri=2), the H200's another, the heuristic
     * neither; problem 1: the H100 table has none, so the heuristic's tiles. */
    fprintf(f, "return {\n"
               "  { problem = 'edit_attention_bwd', batch = 4, seq_len = 288, p_dropout = 0.1, atol = 1e-3, rtol = 1e-3 },\n"
               "  { problem = 'softmax_dropout_bwd', batch = 2, heads = 16, seq_len = 541, p_dropout = 0.1 },\n"
               "}\n");
    fclose(f);
    return path;
}

/* The acceptance: a prewarm made without a GPU for --gpu h100 is
 * found entirely (0 compiles) by an H100, here the fake driver reporting the
 * H100's name and SM count; so is one through ATTNBWD_GPU_MODEL, the same
 * choice the device makes. */
static void prewarm_for_h100_found_on_h100(void **state) {
    (void)state;
    const char *fake = getenv("ATTNBWD_FAKE_CUDA");
    assert_non_null(fake);
    char *dir = test_tmpdir();
    char *suite = write_suite(dir);
    char cache[4200], fake_env[4200];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(fake_env, sizeof fake_env, "ATTNBWD_LIBCUDA=%s", fake);
    const char *no_gpu[] = {"ATTNBWD_LIBCUDA=/nonexistent/libcuda.so.1", NULL};
    const char *h100[] = {fake_env, "FAKE_CUDA_DEVICE_NAME=NVIDIA H100 80GB HBM3", "FAKE_CUDA_SM_COUNT=132", NULL};
    const char *by_env[] = {"ATTNBWD_LIBCUDA=/nonexistent/libcuda.so.1", "ATTNBWD_GPU_MODEL=NVIDIA H100 80GB HBM3", NULL};
    tool_run *r = malloc(sizeof *r);

    const char *made[] = {"prewarm", "--gpu", "h100", "--cache-dir", cache, suite, NULL};
    run_tool(r, no_gpu, made);
    if (r->rc != 0 || summary_count(r, " compiled") != 2) fail_msg("the prewarm for --gpu h100:\n%s", r->out);
    assert_non_null(strstr(r->out, "kernels for sm_90, NVIDIA H100 80GB HBM3 (lua/tuning_h100.lua)"));

    const char *found[] = {"prewarm", "-v", "--cache-dir", cache, suite, NULL};
    run_tool(r, h100, found);
    if (r->rc != 0 || summary_count(r, " compiled") != 0 || summary_count(r, " from the disk cache") != 2)
        fail_msg("the fake H100 did not find both kernels:\n%s", r->out);
    assert_non_null(strstr(r->out, "NVIDIA H100 80GB HBM3 (from the device)"));
    assert_non_null(strstr(r->out, "attnbwd: disk hit edit_attention_bwd"));

    const char *env_found[] = {"prewarm", "--arch", "sm_90", "--cache-dir", cache, suite, NULL};
    run_tool(r, by_env, env_found);
    if (r->rc != 0 || summary_count(r, " compiled") != 0 || summary_count(r, " from the disk cache") != 2)
        fail_msg("ATTNBWD_GPU_MODEL's prewarm did not find both kernels:\n%s", r->out);

    /* `info` on the fake H100 says which table it gets */
    const char *info[] = {"info", "--cache-dir", cache, NULL};
    run_tool(r, h100, info);
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "NVIDIA H100 80GB HBM3 (the device, 132 SMs)"));
    assert_non_null(strstr(r->out, "lua/tuning_h100.lua, measured on this model"));
    const char *pcie[] = {fake_env, "FAKE_CUDA_DEVICE_NAME=NVIDIA H100 PCIe", "FAKE_CUDA_SM_COUNT=114", NULL};
    run_tool(r, pcie, info);
    assert_non_null(strstr(r->out, "tuning table   none: the heuristic's tiles"));
    free(r);
    free(suite);
    test_rmtree(dir);
    free(dir);
}

/* --gpu takes several models, each prewarmed with its own table; a name that
 * matches no model is a warning, not an error (with an arch given). */
static void prewarm_several_models(void **state) {
    (void)state;
    char *dir = test_tmpdir();
    char suite[4200];
    snprintf(suite, sizeof suite, "%s/p1.lua", dir);
    FILE *f = fopen(suite, "w");
    assert_non_null(f);
    fprintf(f, "return { { problem = 'softmax_dropout_bwd', batch = 2, heads = 4, seq_len = 256, p_dropout = 0.1 } }\n");
    fclose(f);
    const char *env[] = {"ATTNBWD_LIBCUDA=/nonexistent/libcuda.so.1", NULL};
    tool_run *r = malloc(sizeof *r);
    const char *args[] = {"prewarm", "--no-cache", "--gpu", "h100, h200", "--gpu", "h100-pcie", suite, NULL};
    run_tool(r, env, args);
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "NVIDIA H100 80GB HBM3 (lua/tuning_h100.lua): 1 compiled"));
    assert_non_null(strstr(r->out, "NVIDIA H200 (lua/tuning_h200.lua): 1 compiled"));
    assert_non_null(strstr(r->out, "NVIDIA H100 PCIe (no tuning table): 1 compiled"));
    const char *odd[] = {"prewarm", "--no-cache", "--arch", "sm_90", "--gpu", "H10O", suite, NULL};
    run_tool(r, env, odd);
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "attnbwd: GPU model \"H10O\""));
    assert_non_null(strstr(r->out, "is no model of a shipped table"));
    const char *empty[] = {"prewarm", "--gpu", "h100,,h200", suite, NULL};
    run_tool(r, env, empty);
    assert_int_equal(r->rc, 2);
    assert_non_null(strstr(r->out, "an empty model name"));
    free(r);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpu_models_pick_tables),
        cmocka_unit_test(gpu_model_option),
        cmocka_unit_test(prewarm_several_models),
        cmocka_unit_test(prewarm_for_h100_found_on_h100),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
