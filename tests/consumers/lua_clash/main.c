/* A program with a Lua of its own, LuaJIT (Lua 5.1's API under the same
 * names: lua_pcall, luaL_newstate, ...), and attnbwd, which runs Lua 5.4
 * inside, in one process. The program's Lua calls must reach LuaJIT and
 * attnbwd's must reach its own Lua 5.4: a shared name would send one to the
 * other's code (a wrong answer or a crash), or fail to link. Built with the
 * static and with the shared library (tests/consumers/CMakeLists.txt). */
#include <stdio.h>
#include <string.h>

#include <attnbwd.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

/* The result of chunk in the program's Lua as a string, or NULL. */
static const char *program_lua(lua_State *L, const char *chunk) {
    if (luaL_dostring(L, chunk) != 0) {
        fprintf(stderr, "program's Lua: %s\n", lua_tostring(L, -1));
        return NULL;
    }
    return lua_tostring(L, -1);
}

int main(void) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    /* `jit` exists only in LuaJIT; 7 // 2 is Lua 5.4's integer division and
       a syntax error in 5.1, which attnbwd's scripts use. */
    const char *before = program_lua(L, "return _VERSION .. ' ' .. jit.version .. ' ' .. "
                                        "tostring(loadstring('return 7 // 2') == nil)");
    if (!before || !strstr(before, "Lua 5.1 LuaJIT") || !strstr(before, " true")) {
        fprintf(stderr, "before attnbwd, the program's Lua is not LuaJIT: %s\n", before ? before : "(error)");
        return 1;
    }
    printf("program's Lua: %s\n", before);
    lua_pop(L, 1);

    attnbwd_options opt;
    attnbwd_options_init(&opt);
    opt.arch = "sm_90";
    opt.disk_cache = 0;
    attnbwd_ctx *ctx = NULL;
    char *source = NULL, *tiles = NULL;
    /* Problem 2's plan and source: the most of attnbwd's Lua, without NVRTC's time. */
    attnbwd_shape shape = {.problem = ATTNBWD_EDIT_ATTENTION_BWD, .batch = 2, .seq_len = 17, .dropout = 1};
    if (attnbwd_open(&opt, &ctx) != ATTNBWD_OK || attnbwd_generate(ctx, &shape, &source, &tiles) != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd: %s\n", attnbwd_last_error());
        return 1;
    }
    printf("attnbwd's Lua planned %zu characters of tiles and wrote %zu bytes of CUDA\n", strlen(tiles), strlen(source));
    attnbwd_free(source);
    attnbwd_free(tiles);

    const char *after = program_lua(L, "local t = {} for i = 1, 10 do t[i] = i * i end return table.concat(t, ',')");
    if (!after || strcmp(after, "1,4,9,16,25,36,49,64,81,100") != 0) {
        fprintf(stderr, "after attnbwd, the program's Lua gives %s\n", after ? after : "(error)");
        return 1;
    }
    printf("program's Lua after attnbwd: %s\n", after);
    attnbwd_close(ctx);
    lua_close(L);
    return 0;
}
