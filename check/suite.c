/* Suites: reads a public-benchmark workload file (JSONL) or a Lua suite of our
 * own into suite_case entries (see suite.h). A bare name that is not a file is
 * looked up among the suites embedded in the library. Every content error
 * names the file, the line (JSONL) or case (Lua), and what is wrong. */
#include "suite.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "error.h"
#include "gen.h"

#define P1_DEFAULT_TOL 1e-5       /* spec: atol = rtol = 1e-5 on every workload */
#define P2_HEADS 16               /* problem 2: heads fixed */
#define P2_DEFAULT_P 0.1          /* problem 2: dropout_p of the public benchmark */
#define DEFAULT_MATCH_RATIO 0.99  /* "at least 99% of elements" */

/* A suite's text, from a file or from the library's embedded copies. */
typedef struct source {
    char *owned;        /* heap copy when read from a file, else NULL */
    const char *text;
    size_t len;
    char where[512];    /* for messages: the path, or "suites/x.jsonl (embedded)" */
    char stem[64];      /* file name without folder or extension, for case names */
    int is_lua;
} source;

/* A growing local list, appended to the caller's only when the whole suite
 * parsed (a bad line leaves *cases and *n as they were). */
typedef struct case_list {
    suite_case *v;
    size_t n, cap;
} case_list;

static attnbwd_status list_push(case_list *l, const suite_case *c) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        suite_case *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "suite: out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *c;
    return ATTNBWD_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void set_stem(source *src, const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* Long names are cut to fit: the stem only labels reports. */
    size_t n = strlen(base);
    if (n >= sizeof src->stem)
        n = sizeof src->stem - 1;
    memcpy(src->stem, base, n);
    src->stem[n] = '\0';
    char *dot = strrchr(src->stem, '.');
    if (dot && dot != src->stem)
        *dot = '\0';
}

/* Lua when the name says so; otherwise sniff: a JSONL suite starts with '{'. */
static void set_kind(source *src, const char *path) {
    if (ends_with(path, ".lua")) {
        src->is_lua = 1;
    } else if (ends_with(path, ".jsonl") || ends_with(path, ".json")) {
        src->is_lua = 0;
    } else {
        size_t i = 0;
        while (i < src->len && (src->text[i] == ' ' || src->text[i] == '\t' || src->text[i] == '\n' ||
                                src->text[i] == '\r'))
            i++;
        src->is_lua = !(i < src->len && src->text[i] == '{');
    }
}

static attnbwd_status read_file(const char *path, source *src) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(ATTNBWD_ERR_IO, "suite %s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "suite %s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return err_set(ATTNBWD_ERR_IO, "suite %s: read error", path);
    }
    buf[len] = '\0';
    src->owned = buf;
    src->text = buf;
    src->len = len;
    snprintf(src->where, sizeof src->where, "%s", path);
    set_stem(src, path);
    set_kind(src, path);
    return ATTNBWD_OK;
}

/* A path that exists is read as a file; a bare name that does not is looked
 * up among the embedded suites ("suites/<name>", then with .jsonl, .lua). */
static attnbwd_status open_source(const char *arg, source *src) {
    memset(src, 0, sizeof *src);
    struct stat st;
    if (stat(arg, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return err_set(ATTNBWD_ERR_IO, "suite %s: is a directory", arg);
        return read_file(arg, src);
    }
    if (!strchr(arg, '/')) {
        static const char *const forms[] = {"suites/%s", "suites/%s.jsonl", "suites/%s.lua"};
        for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
            char path[300];
            if (snprintf(path, sizeof path, forms[k], arg) >= (int)sizeof path)
                break;
            size_t len = 0;
            const char *text = gen_embedded(path, &len);
            if (text) {
                src->text = text;
                src->len = len;
                snprintf(src->where, sizeof src->where, "%s (embedded)", path);
                set_stem(src, path);
                set_kind(src, path);
                return ATTNBWD_OK;
            }
        }
        return err_set(ATTNBWD_ERR_IO,
                       "suite %s: no such file, and no shipped suite of that name "
                       "(try sol066_workload or sol072_workload)",
                       arg);
    }
    return err_set(ATTNBWD_ERR_IO, "suite %s: cannot open: %s", arg, strerror(errno));
}

/* Whole positive number that keeps B*H*T*T in range. */
static int valid_size(double v) { return isfinite(v) && v >= 1 && v <= 2147483647.0 && v == floor(v); }

/* Checks shared by both formats; fills c->name when it is still empty.
 * what: "path:line" or "path: case k". */
static attnbwd_status finish_case(suite_case *c, const source *src, size_t index, const char *what) {
    const attnbwd_shape *s = &c->shape;
    int64_t e;
    if (__builtin_mul_overflow(s->batch, s->heads, &e) || __builtin_mul_overflow(e, s->seq_len, &e) ||
        __builtin_mul_overflow(e, s->seq_len, &e) || e > INT64_MAX / 16)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: B*H*T*T is too large", what);
    if (!(c->p_dropout >= 0.0 && c->p_dropout < 1.0))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: p_dropout = %g is out of [0, 1)", what,
                       c->p_dropout);
    if (!(isfinite(c->atol) && c->atol >= 0.0) || !(isfinite(c->rtol) && c->rtol >= 0.0))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: atol = %g, rtol = %g: want finite values >= 0",
                       what, c->atol, c->rtol);
    if (!(c->match_ratio > 0.0 && c->match_ratio <= 1.0))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: match ratio = %g is out of (0, 1]", what,
                       c->match_ratio);
    c->shape.dropout = c->p_dropout > 0.0;
    if (!c->name[0])
        snprintf(c->name, sizeof c->name, "%s#%zu B=%lld H=%lld T=%lld p=%g", src->stem, index,
                 (long long)s->batch, (long long)s->heads, (long long)s->seq_len, c->p_dropout);
    return ATTNBWD_OK;
}

/* ---- JSONL: the public benchmark's workload files ---- */

static const cJSON *get_path(const cJSON *o, const char *a, const char *b, const char *c) {
    o = cJSON_GetObjectItemCaseSensitive(o, a);
    if (o && b)
        o = cJSON_GetObjectItemCaseSensitive(o, b);
    if (o && c)
        o = cJSON_GetObjectItemCaseSensitive(o, c);
    return o;
}

/* A number at a path: 1 found, 0 absent, -1 present but not a number. */
static int get_number(const cJSON *o, const char *a, const char *b, const char *c, double *out) {
    const cJSON *v = get_path(o, a, b, c);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v))
        return -1;
    *out = v->valuedouble;
    return 1;
}

static attnbwd_status parse_json_line(const cJSON *o, const source *src, size_t index, const char *what,
                                      suite_case *c) {
    memset(c, 0, sizeof *c);
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(o, "axes");
    if (!cJSON_IsObject(axes))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: no \"axes\" object", what);
    double B, H = P2_HEADS, T;
    if (get_number(axes, "batch_size", NULL, NULL, &B) != 1 || !valid_size(B))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: axes.batch_size missing or not a positive integer",
                       what);
    if (get_number(axes, "seq_len", NULL, NULL, &T) != 1 || !valid_size(T))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: axes.seq_len missing or not a positive integer",
                       what);
    int has_heads = cJSON_GetObjectItemCaseSensitive(axes, "n_heads") != NULL;
    if (has_heads && (get_number(axes, "n_heads", NULL, NULL, &H) != 1 || !valid_size(H)))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: axes.n_heads is not a positive integer", what);

    int got;
    if (has_heads) { /* problem 1: p from inputs.p_dropout.value */
        c->shape.problem = ATTNBWD_SOFTMAX_DROPOUT_BWD;
        got = get_number(o, "inputs", "p_dropout", "value", &c->p_dropout);
        if (got != 1)
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: inputs.p_dropout.value missing or not a number",
                           what);
    } else { /* problem 2: the public file says "custom"; its value is 0.1 */
        c->shape.problem = ATTNBWD_EDIT_ATTENTION_BWD;
        c->p_dropout = P2_DEFAULT_P;
        if (get_number(o, "inputs", "dropout_p", "value", &c->p_dropout) < 0)
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: inputs.dropout_p.value is not a number", what);
    }
    c->shape.batch = (int64_t)B;
    c->shape.heads = (int64_t)H;
    c->shape.seq_len = (int64_t)T;

    c->atol = c->rtol = P1_DEFAULT_TOL;
    c->match_ratio = DEFAULT_MATCH_RATIO;
    got = get_number(o, "tolerance", "max_atol", NULL, &c->atol);
    if (got < 0 || (got == 0 && !has_heads)) /* problem 2's atol differs per workload: no default */
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: tolerance.max_atol missing or not a number", what);
    if (get_number(o, "tolerance", "max_rtol", NULL, &c->rtol) < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: tolerance.max_rtol is not a number", what);
    if (get_number(o, "tolerance", "required_match_ratio", NULL, &c->match_ratio) < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: tolerance.required_match_ratio is not a number",
                       what);
    return finish_case(c, src, index, what);
}

static attnbwd_status parse_jsonl(const source *src, case_list *out) {
    const char *p = src->text, *end = src->text + src->len;
    size_t line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        line++;
        const char *a = p, *b = stop;
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\r'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
            b--;
        p = nl ? nl + 1 : end;
        if (a == b || *a == '#') /* blank lines and '#' comments are allowed */
            continue;

        char what[600];
        snprintf(what, sizeof what, "%s:%zu", src->where, line);
        const char *err_at = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(a, (size_t)(b - a), &err_at, 0);
        if (o && err_at) { /* one object and nothing after it on the line */
            while (err_at < b && (*err_at == ' ' || *err_at == '\t'))
                err_at++;
            if (err_at != b) {
                cJSON_Delete(o);
                o = NULL;
            }
        }
        if (!o || !cJSON_IsObject(o)) {
            size_t col = err_at && err_at >= a && err_at <= b ? (size_t)(err_at - a) + 1 : 1;
            cJSON_Delete(o);
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: bad JSON at column %zu (want one object a line)",
                           what, col);
        }
        suite_case c;
        attnbwd_status st = parse_json_line(o, src, out->n + 1, what, &c);
        cJSON_Delete(o);
        if (st == ATTNBWD_OK)
            st = list_push(out, &c);
        if (st != ATTNBWD_OK)
            return st;
    }
    if (out->n == 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: no workloads in the file", src->where);
    return ATTNBWD_OK;
}

/* ---- Lua: our own suites, a file returning a list of case tables ---- */

/* The number in field key of the table at the top of the stack: 1 found,
 * 0 absent (nil), -1 not a number. */
static int lua_field_number(lua_State *L, const char *key, double *out) {
    lua_pushstring(L, key);
    int t = lua_rawget(L, -2);
    int r = 0;
    if (t == LUA_TNUMBER) {
        *out = lua_tonumber(L, -1);
        r = 1;
    } else if (t != LUA_TNIL) {
        r = -1;
    }
    lua_pop(L, 1);
    return r;
}

static const char *const lua_keys[] = {"problem", "batch", "heads", "seq_len", "p_dropout", "atol",
                                       "rtol",    "match_ratio", "name", "precision", NULL};

/* The case table is at the top of the stack. */
static attnbwd_status parse_lua_case(lua_State *L, const source *src, size_t index, suite_case *c) {
    char what[600];
    snprintf(what, sizeof what, "%s: case %zu", src->where, index);
    memset(c, 0, sizeof *c);
    if (!lua_istable(L, -1))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: not a table", what);

    /* Unknown keys are refused, so a typo ("seqlen") is not silently a default. */
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        int known = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *k = lua_keys; *k; k++)
                known |= strcmp(*k, lua_tostring(L, -1)) == 0;
        if (!known) {
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1);
            attnbwd_status st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                                        "%s: unknown field '%s' (fields: problem batch heads seq_len "
                                        "p_dropout atol rtol match_ratio name)",
                                        what, k);
            lua_pop(L, 1);
            return st;
        }
    }

    /* Raw reads only: a metamethod raising an error outside a pcall would abort. */
    lua_pushstring(L, "problem");
    int t = lua_rawget(L, -2);
    if (t == LUA_TNIL || (t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "softmax_dropout_bwd") == 0)) {
        c->shape.problem = ATTNBWD_SOFTMAX_DROPOUT_BWD;
    } else if (t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "edit_attention_bwd") == 0) {
        c->shape.problem = ATTNBWD_EDIT_ATTENTION_BWD;
    } else {
        lua_pop(L, 1);
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "%s: problem must be \"softmax_dropout_bwd\" or \"edit_attention_bwd\"", what);
    }
    lua_pop(L, 1);
    int p1 = c->shape.problem == ATTNBWD_SOFTMAX_DROPOUT_BWD;

    double B = 0, H = p1 ? 0 : P2_HEADS, T = 0;
    if (lua_field_number(L, "batch", &B) != 1 || !valid_size(B))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: batch missing or not a positive integer", what);
    if (lua_field_number(L, "seq_len", &T) != 1 || !valid_size(T))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: seq_len missing or not a positive integer", what);
    int got = lua_field_number(L, "heads", &H);
    if ((p1 && (got != 1 || !valid_size(H))) || (!p1 && (got < 0 || H != P2_HEADS)))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: heads %s", what,
                       p1 ? "missing or not a positive integer" : "must be 16 (or left out) for edit_attention_bwd");
    c->shape.batch = (int64_t)B;
    c->shape.heads = (int64_t)H;
    c->shape.seq_len = (int64_t)T;

    c->p_dropout = p1 ? 0.0 : P2_DEFAULT_P;
    c->atol = c->rtol = P1_DEFAULT_TOL;
    c->match_ratio = DEFAULT_MATCH_RATIO;
    if (lua_field_number(L, "p_dropout", &c->p_dropout) < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: p_dropout is not a number", what);
    got = lua_field_number(L, "atol", &c->atol);
    if (got < 0 || (got == 0 && !p1))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: atol %s", what,
                       got < 0 ? "is not a number" : "is required for edit_attention_bwd");
    if (lua_field_number(L, "rtol", &c->rtol) < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: rtol is not a number", what);
    if (lua_field_number(L, "match_ratio", &c->match_ratio) < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: match_ratio is not a number", what);

    /* precision (edit_attention_bwd): "tf32" (default), "fp32" or "fp16". */
    lua_pushstring(L, "precision");
    t = lua_rawget(L, -2);
    const char *prec = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    c->shape.precision = !prec || !strcmp(prec, "tf32") ? ATTNBWD_PRECISION_TF32
                         : !strcmp(prec, "fp32")        ? ATTNBWD_PRECISION_FP32
                         : !strcmp(prec, "fp16")        ? ATTNBWD_PRECISION_FP16
                                                        : -1;
    lua_pop(L, 1);
    if ((t != LUA_TNIL && t != LUA_TSTRING) || c->shape.precision < 0 || (p1 && t != LUA_TNIL))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: precision must be \"tf32\", \"fp32\" or \"fp16\" "
                       "(edit_attention_bwd only)", what);

    lua_pushstring(L, "name");
    t = lua_rawget(L, -2);
    if (t == LUA_TSTRING)
        snprintf(c->name, sizeof c->name, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    if (t != LUA_TNIL && t != LUA_TSTRING)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: name is not a string", what);
    return finish_case(c, src, index, what);
}

static attnbwd_status parse_lua(const source *src, case_list *out) {
    lua_State *L = luaL_newstate();
    if (!L)
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "suite %s: cannot create a Lua state", src->where);
    /* A suite is data: string, table and math to build it; no file access,
     * text chunks only, and an instruction budget (gen.h). */
    gen_open_data_libs(L);

    attnbwd_status st = ATTNBWD_OK;
    char chunk[520];
    snprintf(chunk, sizeof chunk, "@%s", src->where); /* "@" so messages read path:line */
    if (gen_run_data(L, src->text, src->len, chunk, GEN_DATA_BUDGET, "suite") != ATTNBWD_OK) {
        st = ATTNBWD_ERR_INVALID_ARGUMENT; /* a bad suite, whatever Lua calls it; the message stays */
        goto done;
    }
    if (!lua_istable(L, -1)) {
        st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: must return a table of cases, got %s", src->where,
                     luaL_typename(L, -1));
        goto done;
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer k = 1; k <= n && st == ATTNBWD_OK; k++) {
        suite_case c;
        lua_rawgeti(L, -1, k);
        st = parse_lua_case(L, src, (size_t)k, &c);
        lua_pop(L, 1);
        if (st == ATTNBWD_OK)
            st = list_push(out, &c);
    }
    if (st == ATTNBWD_OK && n == 0)
        st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: the returned table has no cases", src->where);
done:
    lua_close(L);
    return st;
}

attnbwd_status suite_load(const char *path_or_name, suite_case **cases, size_t *n) {
    if (!path_or_name || !*path_or_name || !cases || !n)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "suite_load: null or empty argument");
    source src;
    attnbwd_status st = open_source(path_or_name, &src);
    if (st != ATTNBWD_OK)
        return st;

    case_list l = {0};
    st = src.is_lua ? parse_lua(&src, &l) : parse_jsonl(&src, &l);
    free(src.owned);
    if (st == ATTNBWD_OK) {
        suite_case *v = realloc(*cases, (*n + l.n) * sizeof *v);
        if (!v) {
            st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "suite %s: out of memory", path_or_name);
        } else {
            memcpy(v + *n, l.v, l.n * sizeof *v);
            *cases = v;
            *n += l.n;
        }
    }
    free(l.v);
    return st;
}
