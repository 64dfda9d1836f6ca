/* Inside gen/: the Lua state and the protected calls into it. */
#ifndef ATTNBWD_GEN_INTERNAL_H
#define ATTNBWD_GEN_INTERNAL_H

#include <lua.h>

#include "gen.h"

/* A state with the scripts' libraries, the `attnbwd` module and the script
 * searcher. user_libs adds io and os (exploration scripts). NULL: no memory. */
lua_State *gen_new_lua(int user_libs);

/* lua_pcall with a traceback handler; an error becomes ATTNBWD_ERR_LUA and a
 * message, with the stack left as if the call returned nothing. */
attnbwd_status gen_pcall(lua_State *L, int nargs, int nresults);

/* Pushes require(module)[field], a function. */
attnbwd_status gen_require(lua_State *L, const char *module, const char *field);

/* Pushes the shape as the table the scripts take. */
void gen_push_shape(lua_State *L, const attnbwd_shape *shape);

#endif
