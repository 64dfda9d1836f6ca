/* The disk cache's manifest of a kernel (the format is in manifest.h): its
 * head, whose hash is the key, written before anything is planned; the
 * whole text written at a compile; and the plan read back from it on a hit. */
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <errno.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "manifest.h"
#include "nvrtc_compile.h"

#define MANIFEST_FORMAT 2

/* A growing string; on a failed allocation it stays failed (ok = 0). */
typedef struct text {
    char *s;
    size_t len, cap;
    int ok;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    if (!t->ok) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->ok = 0;
        return;
    }
    if ((size_t)n >= t->cap - t->len) {
        size_t cap = t->cap * 2 + (size_t)n + 1;
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->ok = 0;
            return;
        }
        t->s = grown;
        t->cap = cap;
        va_start(ap, fmt);
        vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
    }
    t->len += (size_t)n;
}

static text text_new(size_t cap) {
    text t = {malloc(cap), 0, cap, 1};
    if (t.s) t.s[0] = '\0';
    else t.ok = 0;
    return t;
}

static char *text_done(text *t) {
    if (t->ok) return t->s;
    free(t->s);
    return NULL;
}

char *manifest_head(const manifest_inputs *in) {
    int maj, min;
    nvrtc_version(&maj, &min);
    char options[512];
    nvrtc_options_string(in->arch, options, sizeof options);
    const attnbwd_shape *s = in->shape;
    text t = text_new(1024);
    add(&t, "attnbwd-cache-manifest %d\nlibrary %s\nlua %s\nnvrtc %d.%d\nscripts %s\narch %s\noptions %s\n",
        MANIFEST_FORMAT, ATTNBWD_VERSION_STRING, LUA_RELEASE, maj, min, in->scripts, in->arch, options);
    add(&t, "shape problem=%d B=%lld H=%lld T=%lld dropout=%d precision=%d\ndeterministic %d\n", (int)s->problem,
        (long long)s->batch, (long long)s->heads, (long long)s->seq_len, s->dropout, s->precision,
        in->deterministic);
    /* Lengths first: any text, new lines included, stays one field. */
    if (in->override) add(&t, "override %zu %s\n", strlen(in->override), in->override);
    else if (in->tuned) add(&t, "tuned %zu %s\n", strlen(in->tuned), in->tuned);
    else add(&t, "tuned -\n");
    return text_done(&t);
}

long manifest_head_len(const char *manifest, size_t len) {
    /* manifest_head's lines before the tiles' line, each one line long. */
    static const char *const fixed[] = {"library ", "lua ", "nvrtc ", "scripts ", "arch ", "options ", "shape ",
                                        "deterministic "};
    char first[40];
    const int n = snprintf(first, sizeof first, "attnbwd-cache-manifest %d\n", MANIFEST_FORMAT);
    const char *p = manifest, *end = manifest + len;
    if (len < (size_t)n || memcmp(p, first, (size_t)n) != 0) return 0;
    p += n;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const size_t w = strlen(fixed[i]);
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || (size_t)(nl - p) < w || memcmp(p, fixed[i], w) != 0) return -1;
        p = nl + 1;
    }
    /* "tuned -", or "override|tuned <bytes> <text>" whose text may hold new lines. */
    if ((size_t)(end - p) >= 8 && memcmp(p, "tuned -\n", 8) == 0) return (long)(p + 8 - manifest);
    const size_t w = (size_t)(end - p) >= 9 && memcmp(p, "override ", 9) == 0 ? 9
                     : (size_t)(end - p) >= 6 && memcmp(p, "tuned ", 6) == 0 ? 6
                                                                              : 0;
    if (!w) return -1;
    p += w;
    size_t bytes = 0, digits = 0;
    for (; p < end && *p >= '0' && *p <= '9' && digits < 10; p++, digits++) bytes = bytes * 10 + (size_t)(*p - '0');
    if (!digits || p >= end || *p != ' ' || bytes >= (size_t)(end - p - 1) || p[1 + bytes] != '\n') return -1;
    return (long)(p + 1 + bytes + 1 - manifest);
}

size_t manifest_launch_len(const char *manifest, size_t len) {
    /* The head's tiles text may hold any line; the lines after it are the plan's, one keyword each. */
    const long head = manifest_head_len(manifest, len);
    static const char line[] = "\nsource\n";
    const size_t n = sizeof line - 1;
    size_t from = head > 0 ? (size_t)head - 1 : 0;
    if (len >= 7 && from == 0 && memcmp(manifest, line + 1, 7) == 0) return 7;
    for (const char *p = manifest + from, *end = manifest + len; (size_t)(end - p) >= n; p++) {
        p = memchr(p, '\n', (size_t)(end - p) - (n - 1));
        if (!p) break;
        if (memcmp(p, line, n) == 0) return (size_t)(p + n - manifest);
    }
    return len;
}

static void add_dims(text *t, const char *what, const unsigned d[3]) { add(t, "%s %u %u %u", what, d[0], d[1], d[2]); }

char *manifest_full(const char *head, const char *model, const char *table, const kernel_plan *p,
                    const char *options) {
    if (strpbrk(model, "\r\n")) return NULL;
    text t = text_new(strlen(head) + strlen(p->source) + 4096);
    add(&t, "%sgpu %s (%s)\ntiles %s\nkernel %s\n", head, model[0] ? model : "-", table ? table : "no table",
        p->tiles, p->name);
    add_dims(&t, "grid", p->grid);
    add_dims(&t, "\nblock", p->block);
    add(&t, "\nshared %u\nalign %u\ncompile_arch %s\noptions %s\nworkspace %zu\nunordered %u\n", p->shared_bytes,
        p->align, p->compile_arch[0] ? p->compile_arch : "-", options, p->workspace_bytes, p->unordered_outputs);
    add(&t, "lane_priority %d %d %d %d\nlaunches %d\n", p->lane_priority[0], p->lane_priority[1],
        p->lane_priority[2], p->lane_priority[3], p->n_launches);
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        add(&t, "launch %s ", l->name);
        add_dims(&t, "grid", l->grid);
        add_dims(&t, " block", l->block);
        add(&t, " shared %u lane %d signal %d pdl %d waits %d", l->shared_bytes, l->lane, l->signal, l->pdl,
            l->n_waits);
        for (int w = 0; w < l->n_waits; ++w) add(&t, " %d", l->waits[w]);
        add(&t, " args %d", l->n_args);
        for (int a = 0; a < l->n_args; ++a) add(&t, " %s", l->args[a]);
        add(&t, "\n");
    }
    XXH128_hash_t h = XXH3_128bits(p->source, strlen(p->source));
    add(&t, "source-xxh128 %016llx%016llx\nsource\n%s", (unsigned long long)h.high64, (unsigned long long)h.low64,
        p->source);
    return text_done(&t);
}

const char *manifest_body(const char *manifest, size_t head_len) {
    if (strncmp(manifest + head_len, "gpu ", 4) != 0) return NULL;
    const char *eol = strchr(manifest + head_len, '\n');
    return eol ? eol + 1 : NULL;
}

/* ---- reading a plan back -------------------------------------------------- */

/* A cursor over the manifest's lines; the first failure sticks. */
typedef struct reader {
    const char *p;
    const char *failed; /* what could not be read, or NULL */
} reader;

/* Takes `word` (its trailing space included). */
static void expect(reader *r, const char *word) {
    if (r->failed) return;
    const char *p = r->p, *w = word;
    while (*w && *p == *w) p++, w++; /* stops at the manifest's NUL too */
    if (*w) r->failed = word;
    else r->p = p;
}

/* A decimal number as manifest_full writes it (an optional '-', digits) in
 * [lo, hi], followed by a space (taken) or the end of the line. By hand, not
 * strtoll: the plan of problem 2 holds a few hundred numbers, and strtoll's
 * locale and white-space handling was a fifth of a disk hit's parse. */
static long long number(reader *r, long long lo, long long hi, const char *what) {
    if (r->failed) return 0;
    const char *p = r->p;
    const int negative = *p == '-';
    p += negative;
    const char *digits = p;
    unsigned long long v = 0;
    while (*p >= '0' && *p <= '9' && p - digits < 19) v = v * 10 + (unsigned)(*p++ - '0'); /* < 10^19 fits */
    const unsigned long long limit = negative ? (unsigned long long)INT64_MAX + 1 : (unsigned long long)INT64_MAX;
    long long x = 0;
    if (p > digits && v <= limit) x = negative ? (long long)(0 - v) : (long long)v;
    if (p == digits || v > limit || x < lo || x > hi || (*p != ' ' && *p != '\n')) {
        r->failed = what;
        return 0;
    }
    r->p = *p == ' ' ? p + 1 : p;
    return x;
}

/* The text up to the end of the line (rest = 1) or the next space, malloc'd;
 * a space after it is taken too. */
static char *field(reader *r, int rest, const char *what) {
    if (r->failed) return NULL;
    const char *e = r->p;
    while (*e && *e != '\n' && (rest || *e != ' ')) e++;
    size_t n = (size_t)(e - r->p);
    char *v = n ? malloc(n + 1) : NULL;
    if (!v) {
        r->failed = what;
        return NULL;
    }
    memcpy(v, r->p, n);
    v[n] = '\0';
    r->p += n;
    if (*r->p == ' ' && !rest) ++r->p;
    return v;
}

static void end_line(reader *r, const char *what) {
    if (!r->failed && *r->p++ != '\n') r->failed = what;
}

static void read_dims(reader *r, const char *word, unsigned d[3]) {
    expect(r, word);
    for (int i = 0; i < 3; ++i) d[i] = (unsigned)number(r, 1, 0x7fffffff, word);
}

static void read_launch(reader *r, plan_launch *l) {
    expect(r, "launch ");
    l->name = field(r, 0, "launch name");
    read_dims(r, "grid ", l->grid);
    read_dims(r, "block ", l->block);
    expect(r, "shared ");
    l->shared_bytes = (unsigned)number(r, 0, GEN_MAX_SHARED_BYTES, "launch shared");
    expect(r, "lane ");
    l->lane = (int)number(r, 0, PLAN_MAX_LANES - 1, "lane");
    expect(r, "signal ");
    l->signal = (int)number(r, -1, PLAN_MAX_EVENTS - 1, "signal");
    expect(r, "pdl ");
    l->pdl = (int)number(r, 0, 1, "pdl");
    expect(r, "waits ");
    l->n_waits = (int)number(r, 0, PLAN_MAX_WAITS, "waits");
    for (int w = 0; w < l->n_waits; ++w) l->waits[w] = (int)number(r, 0, PLAN_MAX_EVENTS - 1, "wait");
    expect(r, "args ");
    int n = (int)number(r, 0, PLAN_MAX_ARGS, "args");
    if (!r->failed && !(l->args = calloc((size_t)n + 1, sizeof *l->args))) r->failed = "args";
    for (int a = 0; !r->failed && a < n; ++a) {
        l->args[a] = field(r, 0, "arg");
        l->n_args = a + 1;
    }
    end_line(r, "launch");
}

attnbwd_status manifest_plan(const char *manifest, size_t head_len, const char *arch, kernel_plan *p) {
    memset(p, 0, sizeof *p);
    const char *body = manifest_body(manifest, head_len);
    reader r = {body ? body : "", body ? NULL : "gpu"};
    expect(&r, "tiles ");
    p->tiles = field(&r, 1, "tiles");
    end_line(&r, "tiles");
    expect(&r, "kernel ");
    p->name = field(&r, 1, "kernel");
    end_line(&r, "kernel");
    read_dims(&r, "grid ", p->grid);
    end_line(&r, "grid");
    read_dims(&r, "block ", p->block);
    end_line(&r, "block");
    expect(&r, "shared ");
    p->shared_bytes = (unsigned)number(&r, 0, GEN_MAX_SHARED_BYTES, "shared");
    end_line(&r, "shared");
    expect(&r, "align ");
    p->align = (unsigned)number(&r, 4, 16, "align");
    end_line(&r, "align");
    expect(&r, "compile_arch ");
    char *ca = field(&r, 1, "compile_arch");
    end_line(&r, "compile_arch");
    if (ca && strcmp(ca, "-") != 0) snprintf(p->compile_arch, sizeof p->compile_arch, "%s", ca);
    free(ca);
    expect(&r, "options ");
    if (!r.failed) r.p += strcspn(r.p, "\n"); /* the compile's, for reading: the head names what they follow from */
    end_line(&r, "options");
    expect(&r, "workspace ");
    p->workspace_bytes = (size_t)number(&r, 0, INT64_MAX, "workspace");
    end_line(&r, "workspace");
    expect(&r, "unordered ");
    p->unordered_outputs = (unsigned)number(&r, 0, 255, "unordered");
    end_line(&r, "unordered");
    expect(&r, "lane_priority ");
    for (int i = 0; i < PLAN_MAX_LANES; ++i) p->lane_priority[i] = (int)number(&r, -1, 2, "lane_priority");
    end_line(&r, "lane_priority");
    expect(&r, "launches ");
    int n = (int)number(&r, 0, 64, "launches");
    end_line(&r, "launches");
    if (!r.failed && n && !(p->launches = calloc((size_t)n, sizeof *p->launches))) r.failed = "launches";
    for (int i = 0; !r.failed && i < n; ++i) {
        p->n_launches = i + 1;
        read_launch(&r, &p->launches[i]);
    }
    expect(&r, "source-xxh128 ");
    attnbwd_status s = r.failed ? err_set(ATTNBWD_ERR_CACHE, "its manifest does not parse at '%s'", r.failed)
                                : gen_plan_check(p, arch);
    if (s != ATTNBWD_OK) kernel_plan_free(p);
    return s;
}
