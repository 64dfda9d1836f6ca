/* Shape -> kernel plan: one call of lua/plan.lua's plan() under the state's
 * mutex, and the checks on what it returns before C trusts it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "error.h"
#include "gen_internal.h"

struct gen_state {
    lua_State *L;
    pthread_mutex_t mu; /* a Lua state is not thread-safe */
    int deterministic;  /* gen_configure's: a plan that sums an output by atomics is an error */
};

static const char *problem_name(attnbwd_problem p) {
    switch (p) {
    case ATTNBWD_SOFTMAX_DROPOUT_BWD: return "softmax_dropout_bwd";
    case ATTNBWD_EDIT_ATTENTION_BWD: return "edit_attention_bwd";
    }
    return "unknown";
}

void gen_push_shape(lua_State *L, const attnbwd_shape *s) {
    lua_createtable(L, 0, 6);
    lua_pushstring(L, problem_name(s->problem));
    lua_setfield(L, -2, "problem");
    lua_pushinteger(L, s->batch);
    lua_setfield(L, -2, "batch");
    lua_pushinteger(L, s->heads);
    lua_setfield(L, -2, "heads");
    lua_pushinteger(L, s->seq_len);
    lua_setfield(L, -2, "seq_len");
    lua_pushinteger(L, s->dropout);
    lua_setfield(L, -2, "dropout");
    lua_pushinteger(L, s->precision);
    lua_setfield(L, -2, "precision");
}

attnbwd_status gen_open(gen_state **out) {
    gen_state *g = calloc(1, sizeof *g);
    if (!g) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory opening the Lua state");
    g->L = gen_new_lua(0);
    if (!g->L) {
        free(g);
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory opening the Lua state");
    }
    pthread_mutex_init(&g->mu, NULL);
    *out = g;
    return ATTNBWD_OK;
}

void gen_close(gen_state *g) {
    if (!g) return;
    lua_close(g->L);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static char *dup_field(lua_State *L, int t, const char *k) {
    lua_getfield(L, t, k);
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    char *copy = v ? strdup(v) : NULL;
    lua_pop(L, 1);
    return copy;
}

/* Reads a field of three positive integers below 2^31 (a grid or block). */
static int dims_field(lua_State *L, int t, const char *k, unsigned d[3]) {
    lua_getfield(L, t, k);
    int ok = lua_istable(L, -1);
    for (int i = 0; ok && i < 3; ++i) {
        lua_rawgeti(L, -1, i + 1);
        int isnum;
        lua_Integer v = lua_tointegerx(L, -1, &isnum);
        ok = isnum && v >= 1 && v <= 0x7fffffff;
        d[i] = ok ? (unsigned)v : 0;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return ok;
}

#define MAX_LAUNCHES 64

/* An optional integer field in [lo, hi]; absent: dflt. 0 when out of range. */
static int int_field(lua_State *L, int t, const char *k, lua_Integer lo, lua_Integer hi, lua_Integer dflt, int *v) {
    lua_getfield(L, t, k);
    int isnum = 1;
    lua_Integer x = lua_isnil(L, -1) ? dflt : lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    *v = (int)x;
    return isnum && x >= lo && x <= hi;
}

/* A launch's lane, the event it signals and the events it waits on. */
static attnbwd_status read_lanes(lua_State *L, int t, plan_launch *l) {
    if (!int_field(L, t, "lane", 0, PLAN_MAX_LANES - 1, 0, &l->lane) ||
        !int_field(L, t, "signal", -1, PLAN_MAX_EVENTS - 1, -1, &l->signal))
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s: lane must be in [0, %d], signal in [-1, %d]", l->name,
                       PLAN_MAX_LANES - 1, PLAN_MAX_EVENTS - 1);
    lua_getfield(L, t, "waits");
    int n = lua_isnil(L, -1) ? 0 : lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : -1;
    int ok = n >= 0 && n <= PLAN_MAX_WAITS;
    for (int i = 0; ok && i < n; ++i) {
        lua_rawgeti(L, -1, i + 1);
        int isnum;
        lua_Integer e = lua_tointegerx(L, -1, &isnum);
        lua_pop(L, 1);
        ok = isnum && e >= 0 && e < PLAN_MAX_EVENTS;
        l->waits[i] = (int)e;
    }
    lua_pop(L, 1);
    if (!ok) return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s: waits must be a list of at most %d events in [0, %d]",
                            l->name, PLAN_MAX_WAITS, PLAN_MAX_EVENTS - 1);
    l->n_waits = n;
    /* pdl: a boolean, absent meaning false; only a launch with no event to
     * wait for may be placed before the one ahead of it ends. */
    lua_getfield(L, t, "pdl");
    int pdl_type = lua_type(L, -1);
    l->pdl = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (pdl_type != LUA_TNIL && pdl_type != LUA_TBOOLEAN)
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s: pdl must be a boolean", l->name);
    if (l->pdl && n > 0)
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s: pdl with events to wait for", l->name);
    return ATTNBWD_OK;
}

static attnbwd_status read_launch(lua_State *L, int t, plan_launch *l) {
    lua_getfield(L, t, "name");
    l->name = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
    lua_pop(L, 1);
    if (!l->name) return err_set(ATTNBWD_ERR_LUA, "Lua: a launch of plan() has no name");
    if (!dims_field(L, t, "grid", l->grid) || !dims_field(L, t, "block", l->block) || l->grid[1] > 65535 ||
        l->grid[2] > 65535 || (uint64_t)l->block[0] * l->block[1] * l->block[2] > 1024)
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s has a grid or block past CUDA's limits", l->name);
    lua_getfield(L, t, "shared_bytes"); /* dynamic shared memory; absent: none */
    int isnum = 1;
    lua_Integer sh = lua_isnil(L, -1) ? 0 : lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || sh < 0 || sh > GEN_MAX_SHARED_BYTES)
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s has shared_bytes outside [0, %d]", l->name, GEN_MAX_SHARED_BYTES);
    l->shared_bytes = (unsigned)sh;
    lua_getfield(L, t, "args");
    int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : -1;
    if (n < 0 || n > PLAN_MAX_ARGS) {
        lua_pop(L, 1);
        return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s needs an args list of at most %d", l->name, PLAN_MAX_ARGS);
    }
    l->args = calloc((size_t)n + 1, sizeof *l->args);
    for (int i = 0; l->args && i < n; ++i) {
        lua_rawgeti(L, -1, i + 1);
        l->args[i] = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
        lua_pop(L, 1);
        if (!l->args[i]) break;
        l->n_args = i + 1;
    }
    lua_pop(L, 1);
    if (!l->args || l->n_args != n) return err_set(ATTNBWD_ERR_LUA, "Lua: launch %s has an argument that is not a string", l->name);
    return read_lanes(L, t, l);
}

/* Every wait names an event an earlier launch signalled (so plan order is a
 * valid order on one stream), each event is signalled once, and a pdl launch
 * follows another on its lane. */
static attnbwd_status check_events(kernel_plan *p) {
    int signalled[PLAN_MAX_EVENTS] = {0}, started[PLAN_MAX_LANES] = {0};
    p->n_lanes = 1;
    p->n_events = 0;
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        if (l->pdl && !started[l->lane])
            return err_set(ATTNBWD_ERR_LUA, "Lua: launch %d (%s) has pdl but is the first on lane %d", i + 1, l->name,
                           l->lane);
        started[l->lane] = 1;
        for (int w = 0; w < l->n_waits; ++w)
            if (!signalled[l->waits[w]])
                return err_set(ATTNBWD_ERR_LUA, "Lua: launch %d (%s) waits on event %d, which no earlier launch signals",
                               i + 1, l->name, l->waits[w]);
        if (l->signal >= 0) {
            if (signalled[l->signal])
                return err_set(ATTNBWD_ERR_LUA, "Lua: event %d is signalled twice (launch %d, %s)", l->signal, i + 1,
                               l->name);
            signalled[l->signal] = 1;
            if (l->signal + 1 > p->n_events) p->n_events = l->signal + 1;
        }
        if (l->lane + 1 > p->n_lanes) p->n_lanes = l->lane + 1;
    }
    return ATTNBWD_OK;
}

/* Optional lane_priority = { lane 0's, lane 1's, ... }: 0 (the least), 1 or 2
 * (the greatest), one per lane at most; lanes it leaves out: lane 0 2, others 0.
 * Lane 0 may also be -1: it runs on the caller's stream, so its first kernel
 * waits for no fork event (the side lanes still fork from that stream). */
static attnbwd_status read_lane_priority(lua_State *L, int t, kernel_plan *p) {
    p->lane_priority[0] = 2;
    lua_getfield(L, t, "lane_priority");
    attnbwd_status s = ATTNBWD_OK;
    if (!lua_isnil(L, -1)) {
        int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : -1;
        if (n < 0 || n > PLAN_MAX_LANES)
            s = err_set(ATTNBWD_ERR_LUA, "Lua: plan() lane_priority must be a list of at most %d levels", PLAN_MAX_LANES);
        for (int i = 0; s == ATTNBWD_OK && i < n; ++i) {
            lua_rawgeti(L, -1, i + 1);
            int isnum;
            lua_Integer v = lua_tointegerx(L, -1, &isnum);
            lua_pop(L, 1);
            if (!isnum || v < (i == 0 ? -1 : 0) || v > 2)
                s = err_set(ATTNBWD_ERR_LUA, "Lua: plan() lane_priority[%d] must be %s0 (least), 1 or 2 (greatest)", i + 1,
                            i == 0 ? "-1 (the caller's stream), " : "");
            else
                p->lane_priority[i] = (int)v;
        }
    }
    lua_pop(L, 1);
    return s;
}

static attnbwd_status read_launches(lua_State *L, int t, kernel_plan *p) {
    lua_getfield(L, t, "launches");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return ATTNBWD_OK;
    }
    int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 0;
    attnbwd_status s = ATTNBWD_OK;
    if (n < 1 || n > MAX_LAUNCHES)
        s = err_set(ATTNBWD_ERR_LUA, "Lua: plan() launches must be a list of 1 to %d", MAX_LAUNCHES);
    else if (!(p->launches = calloc((size_t)n, sizeof *p->launches)))
        s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; s == ATTNBWD_OK && i < n; ++i) {
        lua_rawgeti(L, -1, i + 1);
        p->n_launches = i + 1;
        s = lua_istable(L, -1) ? read_launch(L, lua_gettop(L), &p->launches[i])
                               : err_set(ATTNBWD_ERR_LUA, "Lua: launch %d of plan() is not a table", i + 1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (s == ATTNBWD_OK) s = check_events(p);
    if (s == ATTNBWD_OK) s = read_lane_priority(L, t, p);
    lua_getfield(L, t, "workspace_bytes");
    int isnum;
    lua_Integer ws = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (s == ATTNBWD_OK && (!isnum || ws < 0))
        s = err_set(ATTNBWD_ERR_LUA, "Lua: a plan with launches needs workspace_bytes >= 0");
    p->workspace_bytes = s == ATTNBWD_OK ? (size_t)ws : 0;
    lua_getfield(L, t, "unordered_outputs"); /* absent: every output bit for bit */
    lua_Integer uo = lua_isnil(L, -1) ? 0 : lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (s == ATTNBWD_OK && (!isnum || uo < 0 || uo > 255))
        s = err_set(ATTNBWD_ERR_LUA, "Lua: unordered_outputs must be a bit set of the 8 outputs");
    p->unordered_outputs = s == ATTNBWD_OK ? (unsigned)uo : 0;
    return s;
}

static attnbwd_status read_plan(lua_State *L, int t, const char *arch, kernel_plan *p) {
    memset(p, 0, sizeof *p);
    p->name = dup_field(L, t, "name");
    p->source = dup_field(L, t, "source");
    p->tiles = dup_field(L, t, "tiles");
    if (!p->name || !p->source || !p->tiles)
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned no name, source or tiles string");
    if (!dims_field(L, t, "grid", p->grid) || !dims_field(L, t, "block", p->block))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned a grid or block that is not 3 positive integers");
    if (p->grid[1] > 65535 || p->grid[2] > 65535 ||
        (uint64_t)p->block[0] * p->block[1] * p->block[2] > 1024)
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned a launch past CUDA's limits");
    lua_getfield(L, t, "shared_bytes");
    int isnum;
    lua_Integer sh = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || sh < 0 || sh > GEN_MAX_SHARED_BYTES)
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned shared_bytes outside [0, %d]", GEN_MAX_SHARED_BYTES);
    p->shared_bytes = (unsigned)sh;
    lua_getfield(L, t, "align");
    lua_Integer al = lua_isnil(L, -1) ? 4 : lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || (al != 4 && al != 8 && al != 16))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned align other than 4, 8 or 16");
    p->align = (unsigned)al;
    /* The architecture-specific variant of the context's arch ("sm_90" -> "sm_90a"), nothing else:
     * a script cannot make the library build for another GPU than the one it runs on. */
    lua_getfield(L, t, "compile_arch");
    const char *ca = lua_tostring(L, -1);
    attnbwd_status s = ATTNBWD_OK;
    if (ca && (strlen(ca) != strlen(arch) + 1 || strncmp(ca, arch, strlen(arch)) != 0 || ca[strlen(arch)] != 'a'))
        s = err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned compile_arch \"%s\"; only \"%sa\" may stand for %s", ca, arch,
                    arch);
    else if (ca)
        snprintf(p->compile_arch, sizeof p->compile_arch, "%s", ca);
    lua_pop(L, 1);
    return s == ATTNBWD_OK ? read_launches(L, t, p) : s;
}

/* A name or argument a manifest line can hold: printable, no white space. */
static int is_token(const char *t) {
    if (!t || !*t) return 0;
    for (; *t; ++t)
        if ((unsigned char)*t <= ' ' || (unsigned char)*t == 0x7f) return 0;
    return 1;
}

static int dims_ok(const unsigned grid[3], const unsigned block[3]) {
    for (int i = 0; i < 3; ++i)
        if (grid[i] < 1 || grid[i] > 0x7fffffff || block[i] < 1) return 0;
    return grid[1] <= 65535 && grid[2] <= 65535 && (uint64_t)block[0] * block[1] * block[2] <= 1024;
}

attnbwd_status gen_plan_check(kernel_plan *p, const char *arch) {
    if (!is_token(p->name) || !p->tiles || strpbrk(p->tiles, "\r\n"))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned a name with white space or tiles of several lines");
    if (!dims_ok(p->grid, p->block) || p->shared_bytes > GEN_MAX_SHARED_BYTES ||
        (p->align != 4 && p->align != 8 && p->align != 16))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() %s: grid, block, shared_bytes or align past the limits", p->name);
    size_t n = strlen(arch);
    if (p->compile_arch[0] && (strlen(p->compile_arch) != n + 1 || strncmp(p->compile_arch, arch, n) != 0 ||
                               p->compile_arch[n] != 'a'))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() returned compile_arch \"%s\"; only \"%sa\" may stand for %s",
                       p->compile_arch, arch, arch);
    if (p->unordered_outputs > 255) return err_set(ATTNBWD_ERR_LUA, "Lua: unordered_outputs past the 8 outputs");
    if (p->n_launches < 0 || p->n_launches > MAX_LAUNCHES || (p->n_launches > 0) != (p->launches != NULL))
        return err_set(ATTNBWD_ERR_LUA, "Lua: plan() launches must be a list of 1 to %d", MAX_LAUNCHES);
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        int ok = is_token(l->name) && dims_ok(l->grid, l->block) && l->shared_bytes <= GEN_MAX_SHARED_BYTES &&
                 l->n_args >= 0 && l->n_args <= PLAN_MAX_ARGS && l->lane >= 0 && l->lane < PLAN_MAX_LANES &&
                 l->signal >= -1 && l->signal < PLAN_MAX_EVENTS && l->n_waits >= 0 && l->n_waits <= PLAN_MAX_WAITS &&
                 (l->pdl == 0 || l->pdl == 1) && !(l->pdl && l->n_waits);
        for (int a = 0; ok && a < l->n_args; ++a) ok = is_token(l->args[a]);
        for (int w = 0; ok && w < l->n_waits; ++w) ok = l->waits[w] >= 0 && l->waits[w] < PLAN_MAX_EVENTS;
        if (!ok) return err_set(ATTNBWD_ERR_LUA, "Lua: launch %d of plan() %s is past the limits", i + 1, p->name);
    }
    for (int i = 0; i < PLAN_MAX_LANES; ++i)
        if (p->lane_priority[i] < (i == 0 ? -1 : 0) || p->lane_priority[i] > 2)
            return err_set(ATTNBWD_ERR_LUA, "Lua: plan() lane_priority[%d] out of range", i + 1);
    return p->n_launches ? check_events(p) : ATTNBWD_OK;
}

attnbwd_status gen_plan(gen_state *g, const attnbwd_shape *shape, const char *arch,
                        const char *tiles_override, kernel_plan *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g->mu);
    lua_State *L = g->L;
    int top = lua_gettop(L);
    attnbwd_status s = gen_require(L, "plan", "plan");
    if (s == ATTNBWD_OK) {
        gen_push_shape(L, shape);
        lua_pushstring(L, arch);
        if (tiles_override) lua_pushstring(L, tiles_override);
        else lua_pushnil(L);
        s = gen_pcall(L, 3, 2);
    }
    if (s == ATTNBWD_OK) {
        if (lua_istable(L, -2))
            s = read_plan(L, lua_gettop(L) - 1, arch, out);
        else
            s = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s",
                        lua_tostring(L, -1) ? lua_tostring(L, -1) : "plan() refused the shape");
    }
    if (s == ATTNBWD_OK) s = gen_plan_check(out, arch); /* what a manifest line can hold, too */
    /* The scripts take atomic sums out of a deterministic context's plans; one left is their bug. */
    if (s == ATTNBWD_OK && g->deterministic && out->unordered_outputs)
        s = err_set(ATTNBWD_ERR_LUA, "Lua: plan() sums outputs 0x%02x by float atomics in a deterministic context "
                    "(tiles %s)", out->unordered_outputs, out->tiles ? out->tiles : "?");
    lua_settop(L, top);
    pthread_mutex_unlock(&g->mu);
    if (s != ATTNBWD_OK) kernel_plan_free(out);
    return s;
}

attnbwd_status gen_tuned(gen_state *g, const attnbwd_shape *shape, char **entry) {
    *entry = NULL;
    pthread_mutex_lock(&g->mu);
    lua_State *L = g->L;
    int top = lua_gettop(L);
    attnbwd_status s = gen_require(L, "plan", "tuned");
    if (s == ATTNBWD_OK) {
        gen_push_shape(L, shape);
        s = gen_pcall(L, 1, 1);
    }
    if (s == ATTNBWD_OK && lua_type(L, -1) == LUA_TSTRING && !(*entry = strdup(lua_tostring(L, -1))))
        s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    lua_settop(L, top);
    pthread_mutex_unlock(&g->mu);
    return s;
}

attnbwd_status gen_configure(gen_state *g, const char *gpu_name, const char *user_tuning, int deterministic,
                             const char *shipped_table) {
    pthread_mutex_lock(&g->mu);
    lua_State *L = g->L;
    int top = lua_gettop(L);
    attnbwd_status s = gen_require(L, "plan", "configure");
    if (s == ATTNBWD_OK) {
        lua_pushstring(L, gpu_name ? gpu_name : "");
        if (user_tuning) lua_pushstring(L, user_tuning);
        else lua_pushnil(L);
        lua_pushboolean(L, deterministic);
        if (shipped_table) lua_pushstring(L, shipped_table);
        else lua_pushnil(L);
        s = gen_pcall(L, 4, 0);
    }
    if (s == ATTNBWD_OK) g->deterministic = deterministic;
    lua_settop(L, top);
    pthread_mutex_unlock(&g->mu);
    return s;
}

attnbwd_status gen_candidates(gen_state *g, const attnbwd_shape *shape, char ***tiles, size_t *n) {
    *tiles = NULL;
    *n = 0;
    pthread_mutex_lock(&g->mu);
    lua_State *L = g->L;
    int top = lua_gettop(L);
    attnbwd_status s = gen_require(L, "plan", "candidates");
    if (s == ATTNBWD_OK) {
        gen_push_shape(L, shape);
        s = gen_pcall(L, 1, 1);
    }
    if (s == ATTNBWD_OK) {
        lua_getglobal(L, "require");
        lua_pushstring(L, "render");
        lua_call(L, 1, 1); /* loaded already by plan.lua: cannot fail */
        lua_getfield(L, -1, "tiles_string");
        int fn = lua_gettop(L), list = top + 1;
        size_t count = lua_rawlen(L, list);
        char **v = calloc(count ? count : 1, sizeof *v);
        for (size_t i = 0; v && i < count; ++i) {
            lua_pushvalue(L, fn);
            lua_rawgeti(L, list, (lua_Integer)i + 1);
            if ((s = gen_pcall(L, 1, 1)) != ATTNBWD_OK) break;
            v[i] = strdup(lua_tostring(L, -1));
            lua_pop(L, 1);
        }
        if (!v) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory listing candidates");
        *tiles = v;
        *n = v ? count : 0;
    }
    lua_settop(L, top);
    pthread_mutex_unlock(&g->mu);
    return s;
}

void kernel_plan_free(kernel_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_launches; ++i) {
        for (int a = 0; a < p->launches[i].n_args; ++a) free(p->launches[i].args[a]);
        free(p->launches[i].args);
        free(p->launches[i].name);
    }
    free(p->launches);
    free(p->name);
    free(p->source);
    free(p->tiles);
    memset(p, 0, sizeof *p);
}
