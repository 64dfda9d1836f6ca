/* The Lua API over the library for exploration scripts (`attnbwd lua`,
 * `attnbwd explore`): a Lua state with io and os, the embedded scripts on
 * `require`, and the module `attnbwd` bound to one context. docs/lua-api.md
 * describes every function. */
#ifndef ATTNBWD_LUA_API_H
#define ATTNBWD_LUA_API_H

#include <lua.h>

#include "attnbwd.h"

/* A new state whose `attnbwd` module works on ctx (not owned). NULL: no memory. */
lua_State *lua_api_open(attnbwd_ctx *ctx);

/* Runs a chunk (a file's text) with arg = argv, as `lua` would; returns 0, or
 * 1 after printing the error and traceback to stderr. */
int lua_api_run(lua_State *L, const char *chunkname, const char *text, size_t len, int argc, char **argv);

/* Calls require(module).main({...}) with argv as its arguments under a
 * traceback handler; *rc gets the integer it returns. A Lua error comes back
 * as ATTNBWD_ERR_LUA with the traceback in attnbwd_last_error(). */
attnbwd_status lua_api_main(lua_State *L, const char *module, int argc, char **argv, int *rc);

#endif
