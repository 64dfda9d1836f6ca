/* The embedded Lua state of code generation: which libraries it opens, where
 * `require` finds scripts (the copies built into the library, or the folder
 * $ATTNBWD_LUA_DIR), and the `attnbwd` module of C functions the scripts call.
 * Every entry into Lua goes through gen_pcall, so a Lua error is a status and
 * a message with a traceback, never a crash. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "error.h"
#include "gen_internal.h"

struct embedded_file {
    const char *path;
    const char *data;
    size_t len;
};
extern const struct embedded_file attnbwd_embedded_files[];

const char *gen_embedded(const char *path, size_t *len) {
    for (const struct embedded_file *f = attnbwd_embedded_files; f->path; ++f) {
        if (strcmp(f->path, path) == 0) {
            if (len) *len = f->len;
            return f->data;
        }
    }
    return NULL;
}

extern const char attnbwd_scripts_hash[];

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Feeds sub/NAME of every regular file in dir/sub, in name order: its path,
 * its length and its bytes. */
static attnbwd_status hash_folder(XXH3_state_t *st, const char *dir, const char *sub) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    if (!d) return err_set(ATTNBWD_ERR_IO, "ATTNBWD_LUA_DIR=%s: cannot read the folder %s", dir, path);
    char **names = NULL;
    size_t n = 0, cap = 0;
    attnbwd_status s = ATTNBWD_OK;
    for (struct dirent *e; s == ATTNBWD_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **grown = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!grown) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory hashing %s", path);
            else names = grown;
        }
        if (s == ATTNBWD_OK && !(names[n++] = strdup(e->d_name)))
            s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory hashing %s", path);
    }
    closedir(d);
    if (s == ATTNBWD_OK) qsort(names, n, sizeof *names, compare_names);
    char chunk[8192];
    for (size_t i = 0; s == ATTNBWD_OK && i < n; ++i) {
        char file[4096 + 256];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        struct stat info;
        if (stat(file, &info) != 0 || !S_ISREG(info.st_mode)) continue;
        FILE *f = fopen(file, "rb");
        if (!f) {
            s = err_set(ATTNBWD_ERR_IO, "ATTNBWD_LUA_DIR=%s: cannot read %s", dir, file);
            break;
        }
        uint64_t len = (uint64_t)info.st_size;
        XXH3_128bits_update(st, sub, strlen(sub) + 1);
        XXH3_128bits_update(st, names[i], strlen(names[i]) + 1);
        XXH3_128bits_update(st, &len, sizeof len);
        for (size_t got; (got = fread(chunk, 1, sizeof chunk, f)) > 0;) XXH3_128bits_update(st, chunk, got);
        fclose(f);
    }
    for (size_t i = 0; i < n; ++i) free(names[i]);
    free(names);
    return s;
}

attnbwd_status gen_scripts_hash(char *out, size_t len) {
    const char *dir = getenv("ATTNBWD_LUA_DIR");
    if (!dir || !*dir) {
        snprintf(out, len, "%s", attnbwd_scripts_hash);
        return ATTNBWD_OK;
    }
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    attnbwd_status s = hash_folder(&st, dir, "lua");
    if (s == ATTNBWD_OK) s = hash_folder(&st, dir, "templates");
    if (s != ATTNBWD_OK) return s;
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    snprintf(out, len, "folder xxh128:%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    return ATTNBWD_OK;
}

/* Reads `path` (relative to the repository root) from $ATTNBWD_LUA_DIR when it
 * is set, else from the embedded copy. Pushes the text, or nil and why. */
static int push_source(lua_State *L, const char *path) {
    const char *dir = getenv("ATTNBWD_LUA_DIR");
    if (dir && *dir) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, path);
        FILE *f = fopen(full, "rb");
        if (!f) {
            lua_pushnil(L);
            lua_pushfstring(L, "cannot open %s (ATTNBWD_LUA_DIR)", full);
            return 2;
        }
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        char chunk[8192];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) luaL_addlstring(&b, chunk, n);
        fclose(f);
        luaL_pushresult(&b);
        return 1;
    }
    size_t len;
    const char *data = gen_embedded(path, &len);
    if (!data) {
        lua_pushnil(L);
        lua_pushfstring(L, "no embedded file %s", path);
        return 2;
    }
    lua_pushlstring(L, data, len);
    return 1;
}

/* attnbwd.template(name): the text of templates/<name>. */
static int l_template(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_pushfstring(L, "templates/%s", name);
    if (push_source(L, lua_tostring(L, -1)) == 2) return lua_error(L);
    return 1;
}

static const luaL_Reg attnbwd_lib[] = {
    {"template", l_template},
    {NULL, NULL},
};

static int open_attnbwd(lua_State *L) {
    luaL_newlib(L, attnbwd_lib);
    lua_pushstring(L, ATTNBWD_VERSION_STRING);
    lua_setfield(L, -2, "version");
    lua_pushinteger(L, GEN_MAX_SHARED_BYTES);
    lua_setfield(L, -2, "max_shared_bytes");
    return 1;
}

/* package.searchers entry: lua/<name>.lua, loaded as text only, with a chunk
 * name that makes errors read "lua/plan.lua:12: ...". */
static int search_scripts(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    if (strchr(name, '/') || strstr(name, "..")) {
        lua_pushfstring(L, "\n\tmodule names have no '/' or '..' (%s)", name);
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "lua/%s.lua", name);
    if (push_source(L, path) == 2) {
        lua_pushfstring(L, "\n\t%s", lua_tostring(L, -1));
        return 1;
    }
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    char chunk[520];
    snprintf(chunk, sizeof chunk, "@%s", path);
    if (luaL_loadbufferx(L, text, len, chunk, "t") != LUA_OK) return lua_error(L);
    lua_pushstring(L, path);
    return 2;
}

/* ---- text chunks only ------------------------------------------------------
 * Lua 5.4 does not verify bytecode, and a crafted binary chunk is a known route
 * from a data file to native code. So every state loads text only: `load`,
 * `loadfile` and `dofile` are replaced by versions that pass mode "t", and
 * string.dump (the only way to make bytecode inside Lua) is gone. */

/* Calls the base library's loader saved under `saved` with the caller's
 * arguments, but mode "t": chunk_args is how many come before the mode (load:
 * chunk and name; loadfile: the file name). A mode other than "t" is refused
 * in the loader's own way (nil, message), so no script is misled. */
static int call_text_loader(lua_State *L, const char *saved, int chunk_args) {
    const char *mode = luaL_optstring(L, chunk_args + 1, "t");
    if (strcmp(mode, "t") != 0) {
        luaL_pushfail(L);
        lua_pushfstring(L, "mode '%s' refused: only text chunks are loaded", mode);
        return 2;
    }
    int has_env = !lua_isnone(L, chunk_args + 2);
    lua_settop(L, chunk_args + 2); /* absent arguments as nil, so the copies below are the caller's */
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, saved);
    for (int i = 1; i <= chunk_args; ++i) lua_pushvalue(L, i);
    lua_pushliteral(L, "t");
    if (has_env) lua_pushvalue(L, chunk_args + 2);
    lua_call(L, chunk_args + 1 + has_env, LUA_MULTRET);
    return lua_gettop(L) - top;
}

#define SAVED_LOAD "attnbwd.base_load"
#define SAVED_LOADFILE "attnbwd.base_loadfile"

static int l_load_text(lua_State *L) { return call_text_loader(L, SAVED_LOAD, 2); }
static int l_loadfile_text(lua_State *L) { return call_text_loader(L, SAVED_LOADFILE, 1); }

/* dofile(name): loadfile in text mode, then the chunk's results. */
static int l_dofile_text(lua_State *L) {
    lua_settop(L, 1);
    if (call_text_loader(L, SAVED_LOADFILE, 1) != 1) return lua_error(L);
    int below = lua_gettop(L) - 1; /* the chunk is on top */
    lua_call(L, 0, LUA_MULTRET);
    return lua_gettop(L) - below;
}

/* Moves global `name` into the registry under `saved` and puts fn in its place
 * (or nothing, fn NULL). */
static void replace_global(lua_State *L, const char *name, const char *saved, lua_CFunction fn) {
    lua_getglobal(L, name);
    if (saved) lua_setfield(L, LUA_REGISTRYINDEX, saved);
    else lua_pop(L, 1);
    if (fn) lua_pushcfunction(L, fn);
    else lua_pushnil(L);
    lua_setglobal(L, name);
}

/* Text chunks only, in a state whose base and string libraries are open;
 * files: keep loadfile and dofile (text only) or take them away. */
static void text_chunks_only(lua_State *L, int files) {
    replace_global(L, "load", SAVED_LOAD, l_load_text);
    replace_global(L, "loadfile", SAVED_LOADFILE, files ? l_loadfile_text : NULL);
    replace_global(L, "dofile", NULL, files ? l_dofile_text : NULL);
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
}

void gen_open_data_libs(lua_State *L) {
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    lua_pop(L, 4);
    text_chunks_only(L, 0);
}

/* ---- an instruction budget ---------------------------------------------------
 * A data chunk runs under a count hook: past the budget the hook raises an
 * error, so `while true do end` ends as a message, not a hang. The hook is
 * cleared again afterwards. */
#define BUDGET_STEP 1000

static int budget_key; /* its address keys the remaining budget in the registry */

static void budget_hook(lua_State *L, lua_Debug *ar) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &budget_key);
    lua_Integer left = lua_tointeger(L, -1) - BUDGET_STEP;
    lua_pop(L, 1);
    lua_pushinteger(L, left);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &budget_key);
    if (left > 0) return;
    lua_getinfo(L, "Sl", ar); /* the running function: where the loop is */
    luaL_error(L, "%s:%d: stopped: over its budget of instructions (a loop that does not end?)", ar->short_src,
               ar->currentline);
}

attnbwd_status gen_run_data(lua_State *L, const char *text, size_t len, const char *chunkname,
                            long long budget, const char *what) {
    const char *sep = what ? ": " : "";
    if (!what) what = "";
    if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK) {
        attnbwd_status s = err_set(ATTNBWD_ERR_LUA, "%s%s%s", what, sep, lua_tostring(L, -1));
        lua_pop(L, 1);
        return s;
    }
    lua_pushinteger(L, (lua_Integer)budget);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &budget_key);
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, BUDGET_STEP);
    int rc = lua_pcall(L, 0, 1, 0);
    lua_sethook(L, NULL, 0, 0);
    if (rc == LUA_OK) return ATTNBWD_OK;
    const char *m = lua_tostring(L, -1);
    attnbwd_status s = err_set(rc == LUA_ERRMEM ? ATTNBWD_ERR_OUT_OF_MEMORY : ATTNBWD_ERR_LUA, "%s%s%s", what, sep,
                               m ? m : "(an error without a message)");
    lua_pop(L, 1);
    return s;
}

attnbwd_status gen_check_tuning(const char *text, size_t len, const char *chunkname, char *gpu, size_t gpu_len) {
    lua_State *L = luaL_newstate(); /* no library opened: no globals, as plan.lua's load gives it */
    if (!L) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory checking a tuning table");
    attnbwd_status s = gen_run_data(L, text, len, chunkname, GEN_DATA_BUDGET, NULL);
    if (s == ATTNBWD_OK) {
        const char *where = chunkname + (chunkname[0] == '@' || chunkname[0] == '=');
        if (!lua_istable(L, -1)) {
            s = err_set(ATTNBWD_ERR_LUA, "%s returns a %s, not a table", where, luaL_typename(L, -1));
        } else if (lua_getfield(L, -1, "gpu") != LUA_TSTRING) {
            s = err_set(ATTNBWD_ERR_LUA, "%s has no gpu = \"<model>\" string", where);
        } else {
            snprintf(gpu, gpu_len, "%s", lua_tostring(L, -1));
            if (lua_getfield(L, -2, "entries") != LUA_TTABLE)
                s = err_set(ATTNBWD_ERR_LUA, "%s has no entries table", where);
        }
    }
    lua_close(L);
    return s;
}

static int msg_handler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

lua_State *gen_new_lua(int user_libs) {
    lua_State *L = luaL_newstate();
    if (!L) return NULL;
    /* The tile scripts need no io or os; a user's exploration script does. */
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_LOADLIBNAME, luaopen_package, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
    if (user_libs) {
        luaL_requiref(L, LUA_IOLIBNAME, luaopen_io, 1);
        luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1);
    }
    lua_settop(L, 0);
    text_chunks_only(L, user_libs);
    luaL_requiref(L, "attnbwd", open_attnbwd, 0);
    lua_pop(L, 1);

    /* Replace the file searchers: scripts come from the library or
     * ATTNBWD_LUA_DIR, never from the current directory by accident. */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_pushcfunction(L, search_scripts);
    lua_rawseti(L, -2, 2);
    for (int i = (int)luaL_len(L, -1); i > 2; --i) {
        lua_pushnil(L);
        lua_rawseti(L, -2, i);
    }
    lua_pop(L, 2);
    return L;
}

attnbwd_status gen_pcall(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, msg_handler);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (rc == LUA_OK) return ATTNBWD_OK;
    attnbwd_status s = rc == LUA_ERRMEM ? ATTNBWD_ERR_OUT_OF_MEMORY : ATTNBWD_ERR_LUA;
    err_set(s, "Lua: %s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(no message)");
    lua_pop(L, 1);
    return s;
}

attnbwd_status gen_require(lua_State *L, const char *module, const char *field) {
    lua_getglobal(L, "require");
    lua_pushstring(L, module);
    attnbwd_status s = gen_pcall(L, 1, 1);
    if (s != ATTNBWD_OK) return s;
    lua_getfield(L, -1, field);
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return err_set(ATTNBWD_ERR_LUA, "Lua: lua/%s.lua has no function %s", module, field);
    }
    return ATTNBWD_OK;
}
