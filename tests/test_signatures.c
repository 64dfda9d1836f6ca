/* A kernel's parameter list is written once, in its template; every launch
 * of a plan is checked against it as the plan is made
 * (lua/kernel_signatures.lua): a wrong count or kind of argument is
 * ATTNBWD_ERR_LUA naming the launch, the argument and the parameter. Here
 * the planner's own p.kernel calls are altered through the builder, and the
 * reader is given small sources of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <lauxlib.h>

#include "gen_internal.h"
#include "test_util.h"

/* Runs a Lua chunk in L; its status (ATTNBWD_ERR_LUA and the message for an error). */
static attnbwd_status run(lua_State *L, const char *code) {
    if (luaL_loadbufferx(L, code, strlen(code), "=test", "t") != LUA_OK) fail_msg("%s", lua_tostring(L, -1));
    return gen_pcall(L, 0, 0);
}

/* The plan of problem 2 for (B, T) with the heuristic's tiles, made in L. */
static attnbwd_status plan(lua_State *L, int64_t B, int64_t T) {
    attnbwd_shape s = test_shape(B, 16, T, 0);
    s.problem = ATTNBWD_EDIT_ATTENTION_BWD;
    attnbwd_status st = gen_require(L, "plan", "plan");
    if (st != ATTNBWD_OK) return st;
    gen_push_shape(L, &s);
    lua_pushstring(L, "sm_90");
    lua_pushnil(L);
    st = gen_pcall(L, 3, 2);
    if (st == ATTNBWD_OK) {
        if (lua_isnil(L, -2)) fail_msg("no plan: %s", lua_tostring(L, -1));
        lua_pop(L, 2);
    }
    return st;
}

/* The builder's p.kernel, wrapped: the launch named `target` gets its
 * arguments through `edit` (Lua statements on the list `args`). */
static void alter_launch(lua_State *L, const char *target, const char *edit) {
    char code[2048];
    snprintf(code, sizeof code,
             "local builder = require 'edit_attention_builder'\n"
             "local new = builder.original_new or builder.new\n"
             "builder.original_new = new\n"
             "builder.new = function(shape, t)\n"
             "  local p = new(shape, t)\n"
             "  local kernel = p.kernel\n"
             "  p.kernel = function(name, grid, args, ...)\n"
             "    if name == '%s' then args = { table.unpack(args) }; %s end\n"
             "    return kernel(name, grid, args, ...)\n"
             "  end\n"
             "  return p\n"
             "end\n",
             target, edit);
    assert_int_equal(run(L, code), ATTNBWD_OK);
}

static void expect_error(const char *const *parts, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!strstr(attnbwd_last_error(), parts[i])) fail_msg("no \"%s\" in: %s", parts[i], attnbwd_last_error());
}

static void planner_launches_checked(void **state) {
    (void)state;
    lua_State *L = gen_new_lua(0);
    assert_non_null(L);
    assert_int_equal(plan(L, 2, 129), ATTNBWD_OK); /* as shipped: every launch matches its kernel */
    static const struct {
        const char *launch, *edit, *expect[3];
    } cases[] = {
        {"bias_final", "table.remove(args)",
         {"launch bias_final has 2 argument(s)",
          "templates/edit_attention_bwd.cu's edit_attention_bwd_B2_T129_p0_bias_final",
          "takes 3 (partials, grad_within_edit_bias, grad_cross_edit_bias)"}},
        {"colsum_final", "args[#args + 1] = 'i32:1'",
         {"launch colsum_final has 5 argument(s)", "takes 4", "colsum.cu"}},
        {"bias_final", "args[2] = 'f32:one'",
         {"launch bias_final: argument 2 is \"f32:one\"", "`float *__restrict__ grad_within_edit_bias`",
          "takes out:NAME, ws:BYTES or null"}},
        /* an input where the kernel writes */
        {"bias_grads", "args[3] = 'in:attention_output'",
         {"argument 3 is \"in:attention_output\"", "`float *__restrict__ grad_edit_region_bias`", "writes through it"}},
        {"colsum_partial", "args[3] = 'i32:' .. args[3]:sub(5)",
         {"argument 3 is \"i32:", "`long long rows`", "takes i64:N"}},
        /* the pass on wgmma: its list is the macro FW_PASS_PARAMS of attention_wg.cu */
        {"attention_wg", "args[1] = 'in:query'",
         {"argument 1 is \"in:query\"", "templates/attention_wg_kernel.cu's",
          "tc::tma_map map_ga` there, which takes tmap:"}},
        {"attention_wg", "args[16] = 'i64:0'", {"argument 16 is \"i64:0\"", "out0", "null"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        alter_launch(L, cases[i].launch, cases[i].edit);
        assert_int_equal(plan(L, 2, 129), ATTNBWD_ERR_LUA);
        expect_error(cases[i].expect, 3);
        assert_non_null(strstr(attnbwd_last_error(), "lua/")); /* where the launch is made */
    }
    lua_close(L);
}

/* The reader follows the preprocessor where a parameter list needs it, and
 * refuses what it cannot tell rather than guess. */
static void reader_follows_the_preprocessor(void **state) {
    (void)state;
    lua_State *L = gen_new_lua(0);
    assert_non_null(L);
    assert_int_equal(run(L, "sig = require 'kernel_signatures'\n"
                            "function source(text)\n"
                            "  local r = sig.reader()\n"
                            "  sig.read(r, text, 'test.cu')\n"
                            "  return r\n"
                            "end\n"),
                     ATTNBWD_OK);
    const char *src =
        "local r = source([[\n"
        "#define LIST const float *__restrict__ x, \\\n"
        "    long long n /* rows */\n"
        "#if 0\n"
        "extern \"C\" __global__ void k(float a) {}\n"
        "#elif 2 == 2\n"
        "// extern \"C\" __global__ void k(int a) {}\n"
        "extern \"C\" __global__ void __launch_bounds__(f(1), 2) __cluster_dims__(2, 1, 1)\n"
        "k(LIST, const __grid_constant__ tc::tma_map map, float *out, int c) {}\n"
        "#else\n"
        "extern \"C\" __global__ void k(int a) {}\n"
        "#endif\n"
        "#if __CUDA_ARCH__ >= 900\n"
        "extern \"C\" __global__ void hidden(float *out) {}\n"
        "#define ARCH_LIST float *out\n"
        "#endif\n"
        "extern \"C\" __global__ void uses(ARCH_LIST) {}\n"
        "]])\n";
    char code[4096];
    snprintf(code, sizeof code,
             "%s sig.check(r, 'k', 'k', { 'in:x', 'i64:7', 'tmap:1:1:1:1:1:0:ws:0', 'ws:0', 'i32:-1' }, '')", src);
    assert_int_equal(run(L, code), ATTNBWD_OK);
    static const struct {
        const char *check, *expect;
    } bad[] = {
        {"sig.check(r, 'k', 'k', { 'in:x', 'i64:7', 'tmap:1:1:1:1:1:0:ws:0', 'ws:0' }, 'here: ')",
         "here: launch k has 4 argument(s), but templates/test.cu's k takes 5 (x, n, map, out, c)"},
        {"sig.check(r, 'k', 'k', { 'in:x', 'i64:7', 'ws:0', 'ws:0', 'i32:1' }, '')",
         "argument 3 is \"ws:0\", but templates/test.cu's k has `const __grid_constant__ tc::tma_map map`"},
        {"sig.check(r, 'k', 'k', { 'in:x', 'i64:7', 'tmap:1:1:1:1:1:0:ws:0', 'ws:0', 'f32:one' }, '')",
         "argument 5 is \"f32:one\""},
        {"sig.check(r, 'hidden', 'hidden', { 'ws:0' }, '')", "the source declares no kernel hidden"},
        {"sig.check(r, 'uses', 'uses', { 'ws:0' }, '')", "uses ARCH_LIST, a macro defined under a condition"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        snprintf(code, sizeof code, "%s %s", src, bad[i].check);
        assert_int_equal(run(L, code), ATTNBWD_ERR_LUA);
        if (!strstr(attnbwd_last_error(), bad[i].expect))
            fail_msg("no \"%s\" in: %s", bad[i].expect, attnbwd_last_error());
    }
    lua_close(L);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(planner_launches_checked),
        cmocka_unit_test(reader_follows_the_preprocessor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
