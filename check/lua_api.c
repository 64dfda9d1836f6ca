/* The `attnbwd` Lua module for exploration scripts. Every function that can
 * fail comes twice: `f` raises a Lua error, `try_f` returns nil and the
 * message, so a script can skip a bad candidate and go on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "check.h"
#include "gen_internal.h"
#include "lua_api.h"
#include "suite.h"

static attnbwd_ctx *ctx_of(lua_State *L) {
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* A failure: raise, or return nil, message in the try_ form (upvalue 2). */
static int fail(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    if (!lua_toboolean(L, lua_upvalueindex(2))) return lua_error(L);
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

static int int_field(lua_State *L, int t, const char *k, lua_Integer dflt, lua_Integer *out) {
    lua_getfield(L, t, k);
    int isnum = 1;
    *out = lua_isnil(L, -1) ? dflt : lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    return isnum;
}

static double num_field(lua_State *L, int t, const char *k, double dflt) {
    lua_getfield(L, t, k);
    double v = lua_isnil(L, -1) ? dflt : lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

/* A case table { problem=, batch=, heads=, seq_len=, p_dropout= (or dropout=),
 * atol=, rtol=, match_ratio=, name= } as a suite_case; NULL and a message
 * pushed when it is not one. */
static const char *to_case(lua_State *L, int t, suite_case *c) {
    memset(c, 0, sizeof *c);
    if (!lua_istable(L, t)) return "a shape must be a table";
    lua_getfield(L, t, "problem");
    c->shape.problem = lua_isnil(L, -1) ? ATTNBWD_SOFTMAX_DROPOUT_BWD : check_problem_from_name(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (!c->shape.problem) {
        static _Thread_local char why[320];
        char names[256];
        check_problem_names(names, sizeof names);
        snprintf(why, sizeof why, "shape.problem must be one of %s", names);
        return why;
    }
    lua_Integer b, h, T, d;
    if (!int_field(L, t, "batch", 0, &b) || !int_field(L, t, "heads", 0, &h) || !int_field(L, t, "seq_len", 0, &T))
        return "shape.batch, heads and seq_len must be integers";
    c->p_dropout = num_field(L, t, "p_dropout", 0.0);
    if (!int_field(L, t, "dropout", c->p_dropout > 0, &d)) return "shape.dropout must be 0 or 1";
    c->shape.batch = b;
    c->shape.heads = h;
    c->shape.seq_len = T;
    c->shape.dropout = (int)d;
    if (d && c->p_dropout == 0.0) c->p_dropout = 0.1; /* a dropout kernel needs p > 0 to run */
    /* precision (edit_attention_bwd): "tf32", "fp32", "fp16", or the attnbwd_precision number the
     * cases of attnbwd.suite carry; absent: tf32. */
    lua_getfield(L, t, "precision");
    const int pt = lua_type(L, -1);
    const char *prec = pt == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_Integer pn = pt == LUA_TNUMBER && lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    if (prec) pn = !strcmp(prec, "tf32") ? 0 : !strcmp(prec, "fp32") ? 1 : !strcmp(prec, "fp16") ? 2 : -1;
    if (pt != LUA_TNIL && (pn < ATTNBWD_PRECISION_TF32 || pn > ATTNBWD_PRECISION_FP16))
        return "shape.precision must be \"tf32\", \"fp32\", \"fp16\" or 0, 1, 2";
    if (pt != LUA_TNIL && c->shape.problem != ATTNBWD_EDIT_ATTENTION_BWD && pn != 0)
        return "shape.precision is for edit_attention_bwd";
    c->shape.precision = pt == LUA_TNIL ? 0 : (int)pn;
    c->atol = num_field(L, t, "atol", 1e-5);
    c->rtol = num_field(L, t, "rtol", 1e-5);
    c->match_ratio = num_field(L, t, "match_ratio", 0.99);
    lua_getfield(L, t, "name");
    snprintf(c->name, sizeof c->name, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "lua case");
    lua_pop(L, 1);
    return NULL;
}

/* The shape table the tile scripts take, plus what a check needs. */
static void push_case(lua_State *L, const suite_case *c) {
    gen_push_shape(L, &c->shape);
    lua_pushnumber(L, c->p_dropout);
    lua_setfield(L, -2, "p_dropout");
    lua_pushnumber(L, c->atol);
    lua_setfield(L, -2, "atol");
    lua_pushnumber(L, c->rtol);
    lua_setfield(L, -2, "rtol");
    lua_pushnumber(L, c->match_ratio);
    lua_setfield(L, -2, "match_ratio");
    lua_pushstring(L, c->name);
    lua_setfield(L, -2, "name");
}

/* attnbwd.suite(name_or_path) -> { case, ... } */
static int l_suite(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load(name, &cases, &n) != ATTNBWD_OK) return fail(L, "%s", attnbwd_last_error());
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; ++i) {
        push_case(L, &cases[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    free(cases);
    return 1;
}

/* attnbwd.candidates(shape) -> { "tiles", ... }, the heuristic's first */
static int l_candidates(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    char **tiles = NULL;
    size_t n = 0;
    if (attnbwd_candidates(ctx_of(L), &c.shape, &tiles, &n) != ATTNBWD_OK) return fail(L, "%s", attnbwd_last_error());
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; ++i) {
        lua_pushstring(L, tiles[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
        attnbwd_free(tiles[i]);
    }
    attnbwd_free(tiles);
    return 1;
}

/* attnbwd.compile(shape [, tiles]) -> kernel info table */
static int l_compile(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    const char *tiles = luaL_optstring(L, 2, NULL);
    attnbwd_kernel *k = NULL;
    attnbwd_status s = tiles ? attnbwd_get_kernel_tiles(ctx_of(L), &c.shape, tiles, &k)
                             : attnbwd_get_kernel(ctx_of(L), &c.shape, &k);
    if (s != ATTNBWD_OK) return fail(L, "%s", attnbwd_last_error());
    attnbwd_kernel_info info;
    attnbwd_kernel_get_info(k, &info);
    static const char *origins[] = {"compiled", "disk", "memory"};
    lua_createtable(L, 0, 8);
    lua_pushstring(L, info.name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, info.tiles);
    lua_setfield(L, -2, "tiles");
    lua_pushstring(L, info.cache_key);
    lua_setfield(L, -2, "key");
    lua_pushstring(L, info.arch);
    lua_setfield(L, -2, "arch");
    lua_pushstring(L, origins[info.origin]);
    lua_setfield(L, -2, "origin");
    lua_pushnumber(L, info.build_seconds);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, (lua_Integer)info.cubin_bytes);
    lua_setfield(L, -2, "cubin_bytes");
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, info.grid[0]);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, info.block[0]);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "launch"); /* { grid.x, block.x } */
    return 1;
}

/* attnbwd.check(case [, tiles [, seed]]) -> { pass=, max_abs_err=, match=, message= } */
static int l_check(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    c.tiles = luaL_optstring(L, 2, NULL);
    lua_Integer seed = luaL_optinteger(L, 3, 1);
    check_result r;
    if (check_case(ctx_of(L), &c, (uint64_t)seed, &r) != ATTNBWD_OK) return fail(L, "%s", attnbwd_last_error());
    lua_createtable(L, 0, 5);
    lua_pushboolean(L, r.pass);
    lua_setfield(L, -2, "pass");
    lua_pushnumber(L, r.max_abs_err);
    lua_setfield(L, -2, "max_abs_err");
    lua_pushnumber(L, r.match_fraction);
    lua_setfield(L, -2, "match");
    lua_pushinteger(L, (lua_Integer)r.nonfinite);
    lua_setfield(L, -2, "nonfinite");
    lua_pushstring(L, r.message);
    lua_setfield(L, -2, "message");
    return 1;
}

/* attnbwd.time(case [, tiles [, iters [, alone]]]) -> median us (cold L2) [,
 * per-kernel lines]: problem 2 also gives each kernel of the plan timed alone,
 * the same way ("name us share" lines, slowest first), as `check --time`
 * prints them, unless alone is false. */
static int l_time(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    c.tiles = luaL_optstring(L, 2, NULL);
    lua_Integer iters = luaL_optinteger(L, 3, 50);
    if (iters < 1 || iters > 100000) return fail(L, "iters = %d: must be in [1, 100000]", (int)iters);
    const int alone = lua_isnoneornil(L, 4) || lua_toboolean(L, 4);
    check_result r;
    if (check_time_case_ex(ctx_of(L), &c, (int)iters, alone, &r) != ATTNBWD_OK)
        return fail(L, "%s", attnbwd_last_error());
    lua_pushnumber(L, r.median_us);
    if (!r.breakdown[0]) return 1;
    lua_pushstring(L, r.breakdown);
    return 2;
}

/* attnbwd.time_tiles(case, {tiles...} [, iters [, reps [, seed]]]) -> {us...}:
 * problem 2, each tile choice ("-": the heuristic's) timed as attnbwd.time
 * times it, on inputs drawn once, in turn for `reps` rounds (default 2; an
 * odd count runs one more), in pairs of an order and its reverse; seed 0 (the
 * default) takes the choices in their order, another seed shuffles each
 * pair's (check_round_order). The median of each one's rounds' medians. */
static int l_time_tiles(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    luaL_checktype(L, 2, LUA_TTABLE);
    const lua_Integer n = luaL_len(L, 2), iters = luaL_optinteger(L, 3, 50), reps = luaL_optinteger(L, 4, 2);
    const lua_Integer seed = luaL_optinteger(L, 5, 0);
    if (n < 1 || n > CHECK_MAX_CHOICES) return fail(L, "%d tile choices: must be 1 to %d", (int)n, CHECK_MAX_CHOICES);
    if (iters < 1 || iters > 100000) return fail(L, "iters = %d: must be in [1, 100000]", (int)iters);
    if (reps < 1 || reps > 100) return fail(L, "reps = %d: must be in [1, 100]", (int)reps);
    const char *tiles[CHECK_MAX_CHOICES];
    double us[CHECK_MAX_CHOICES];
    for (lua_Integer i = 1; i <= n; i++) {
        const int type = lua_geti(L, 2, i);
        const char *t = type == LUA_TSTRING ? lua_tostring(L, -1) : NULL; /* the table keeps it alive */
        lua_pop(L, 1);
        if (!t) return fail(L, "tile choice %d is a %s, not a string", (int)i, lua_typename(L, type));
        tiles[i - 1] = strcmp(t, "-") ? t : NULL;
    }
    if (check_time_tiles(ctx_of(L), &c, (int)n, tiles, (int)iters, (int)reps, (uint64_t)seed, us) != ATTNBWD_OK)
        return fail(L, "%s", attnbwd_last_error());
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_pushnumber(L, us[i - 1]);
        lua_seti(L, -2, i);
    }
    return 1;
}

/* attnbwd.floor_bytes(case) -> bytes that must move */
static int l_floor_bytes(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    lua_pushnumber(L, check_floor_bytes(&c));
    return 1;
}

/* attnbwd.info() -> { version=, arch=, device=, cache_dir=, gpu=bool, why= } */
static int l_info(lua_State *L) {
    attnbwd_ctx_info info;
    attnbwd_ctx_get_info(ctx_of(L), &info);
    char why[256] = "";
    int gpu = check_gpu_available(why, sizeof why) == 0;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, info.library_version);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, info.arch);
    lua_setfield(L, -2, "arch");
    lua_pushstring(L, info.device_name);
    lua_setfield(L, -2, "device");
    lua_pushstring(L, info.cache_dir);
    lua_setfield(L, -2, "cache_dir");
    lua_pushboolean(L, gpu);
    lua_setfield(L, -2, "gpu");
    lua_pushstring(L, gpu ? "" : why);
    lua_setfield(L, -2, "why_no_gpu");
    return 1;
}

/* attnbwd.tuning_key(shape) -> the key of tuning tables, as lua/plan.lua makes
 * it for the tables it reads (one format, in one place). */
static int l_tuning_key(lua_State *L) {
    suite_case c;
    const char *why = to_case(L, 1, &c);
    if (why) return fail(L, "%s", why);
    lua_getglobal(L, "require");
    lua_pushstring(L, "plan");
    lua_call(L, 1, 1); /* embedded: cannot fail */
    lua_getfield(L, -1, "tuning_key");
    gen_push_shape(L, &c.shape);
    lua_call(L, 1, 1);
    return 1;
}

static const luaL_Reg api[] = {
    {"suite", l_suite},     {"candidates", l_candidates}, {"compile", l_compile},       {"check", l_check},
    {"time", l_time},       {"time_tiles", l_time_tiles}, {"floor_bytes", l_floor_bytes}, {"tuning_key", l_tuning_key}, {NULL, NULL},
};

lua_State *lua_api_open(attnbwd_ctx *ctx) {
    lua_State *L = gen_new_lua(1);
    if (!L) return NULL;
    lua_getglobal(L, "require");
    lua_pushstring(L, "attnbwd");
    lua_call(L, 1, 1); /* preloaded by gen_new_lua: cannot fail */
    for (int try_form = 0; try_form < 2; ++try_form) {
        for (const luaL_Reg *r = api; r->name; ++r) {
            lua_pushlightuserdata(L, ctx);
            lua_pushboolean(L, try_form);
            lua_pushcclosure(L, r->func, 2);
            if (try_form) lua_pushfstring(L, "try_%s", r->name);
            else lua_pushstring(L, r->name);
            lua_insert(L, -2);
            lua_settable(L, -3);
        }
    }
    lua_pushlightuserdata(L, ctx);
    lua_pushcclosure(L, l_info, 1);
    lua_setfield(L, -2, "info");
    lua_pop(L, 1);
    return L;
}

static int traceback(lua_State *L) {
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
    return 1;
}

int lua_api_run(lua_State *L, const char *chunkname, const char *text, size_t len, int argc, char **argv) {
    lua_createtable(L, argc, 1);
    for (int i = 0; i < argc; ++i) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushstring(L, chunkname + (chunkname[0] == '@'));
    lua_rawseti(L, -2, 0);
    lua_setglobal(L, "arg");
    lua_pushcfunction(L, traceback);
    int rc = luaL_loadbufferx(L, text, len, chunkname, "t");
    if (rc == LUA_OK) {
        for (int i = 0; i < argc; ++i) lua_pushstring(L, argv[i]);
        rc = lua_pcall(L, argc, 0, -argc - 2);
    }
    if (rc != LUA_OK) {
        fprintf(stderr, "attnbwd lua: %s\n", lua_tostring(L, -1));
        return 1;
    }
    return 0;
}

attnbwd_status lua_api_main(lua_State *L, const char *module, int argc, char **argv, int *rc) {
    attnbwd_status st = gen_require(L, module, "main");
    if (st != ATTNBWD_OK) return st;
    lua_createtable(L, argc, 0);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    st = gen_pcall(L, 1, 1);
    if (st == ATTNBWD_OK) {
        *rc = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    return st;
}
