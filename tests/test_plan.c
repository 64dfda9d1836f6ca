/* The Lua tile choices: for many shapes (T from 1 to 8192, several B and H)
 * the plan must describe a kernel that covers every row exactly, with a
 * vector width that divides T and register use within bounds; overrides are
 * applied or refused with a reason; every exploration candidate is valid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gen.h"
#include "test_util.h"

static long tile(const char *tiles, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    for (const char *p = strstr(tiles, pat); p; p = strstr(p + 1, pat))
        if (p == tiles || p[-1] == ' ') return strtol(p + strlen(pat), NULL, 10);
    fail_msg("tiles \"%s\" have no %s", tiles, key);
    return -1;
}

/* The n-th (from 0) template argument of the instantiation at call
 * ("name<a, b, ...>("), as a number; -1 where it has no such argument. */
static long template_arg(const char *call, int n) {
    const char *at = strchr(call, '<'), *close = strstr(call, ">(");
    if (!at || !close) return -1;
    for (int i = 0; i < n; ++i) {
        at = strchr(at + 1, ',');
        if (!at || at > close) return -1;
    }
    return strtol(at + 1, NULL, 10);
}

static void check_plan(const attnbwd_shape *s, const kernel_plan *p) {
    const long vec = tile(p->tiles, "vec"), tpr = tile(p->tiles, "threads_per_row");
    const long block = tile(p->tiles, "block"), inreg = tile(p->tiles, "in_registers");
    const long split = tile(p->tiles, "split");
    const int64_t T = s->seq_len, rows = s->batch * s->heads * T;
    if (split) {
        /* Unaligned rows: 16-byte loads around the first aligned element. */
        if (vec != 4 || T % 4 == 0 || !inreg || tpr < 4)
            fail_msg("T=%lld: split with vec=%ld threads_per_row=%ld", (long long)T, vec, tpr);
        assert_int_equal(p->align, 16);
    } else {
        if (T % vec) fail_msg("T=%lld: vec=%ld does not divide it", (long long)T, vec);
        assert_int_equal(p->align, 4 * vec);
    }
    if (T % 4 == 0 && vec != 4) fail_msg("T=%lld: vec=%ld is narrower than T allows", (long long)T, vec);
    assert_true(tpr >= 1 && tpr <= 1024 && (tpr & (tpr - 1)) == 0);
    assert_true(block >= tpr && block % tpr == 0 && block <= 1024);
    assert_int_equal(p->block[0], (unsigned)block);
    assert_int_equal(p->block[1] * p->block[2], 1);
    const int64_t rows_per_block = block / tpr;
    /* Every row is covered, and no block is wholly idle. */
    assert_true((int64_t)p->grid[0] * rows_per_block >= rows);
    assert_true((int64_t)(p->grid[0] - 1) * rows_per_block < rows);
    const int64_t per_thread = (T / vec + tpr - 1) / tpr * vec;
    if (inreg) assert_true(per_thread <= 128);
    /* The heuristic keeps at most 32 floats of a row in a thread's registers. */
    assert_non_null(strstr(p->source, p->name));
    assert_null(strstr(p->source, "{{"));
}

static gen_state *open_gen(void) {
    gen_state *g = NULL;
    if (gen_open(&g) != ATTNBWD_OK) fail_msg("gen_open: %s", attnbwd_last_error());
    return g;
}

static void heuristic_is_valid_for_many_shapes(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t BH[][2] = {{1, 1}, {1, 32}, {2, 16}, {8, 3}, {64, 8}};
    int planned = 0;
    for (int64_t T = 1; T <= 8192; T += (T < 300 ? 1 : T < 2100 ? 37 : 509)) {
        for (size_t i = 0; i < sizeof BH / sizeof BH[0]; ++i) {
            for (int d = 0; d < 2; ++d) {
                attnbwd_shape s = test_shape(BH[i][0], BH[i][1], T, d);
                kernel_plan p;
                if (gen_plan(g, &s, "sm_90", NULL, &p) != ATTNBWD_OK)
                    fail_msg("T=%lld: %s", (long long)T, attnbwd_last_error());
                check_plan(&s, &p);
                if (p.source && strstr(p.tiles, "in_registers=1")) {
                    const long vec = tile(p.tiles, "vec"), tpr = tile(p.tiles, "threads_per_row");
                    assert_true((T / vec + tpr - 1) / tpr * vec <= 32);
                }
                kernel_plan_free(&p);
                planned++;
            }
        }
    }
    assert_true(planned > 3000);
    /* Long rows switch to two passes. */
    attnbwd_shape s = test_shape(1, 2, 32800, 1);
    kernel_plan p;
    assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
    check_plan(&s, &p);
    assert_int_equal(tile(p.tiles, "in_registers"), 0);
    kernel_plan_free(&p);
    gen_close(g);
}

static void overrides(void **state) {
    (void)state;
    gen_state *g = open_gen();
    attnbwd_shape s = test_shape(4, 8, 512, 1);
    kernel_plan p;
    assert_int_equal(gen_plan(g, &s, "sm_90", "threads_per_row=64 block=512", &p), ATTNBWD_OK);
    assert_int_equal(tile(p.tiles, "threads_per_row"), 64);
    assert_int_equal(p.block[0], 512);
    check_plan(&s, &p);
    kernel_plan_free(&p);
    assert_int_equal(gen_plan(g, &s, "sm_90", "vec=3", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "vec must be 1, 2 or 4"));
    assert_int_equal(gen_plan(g, &s, "sm_90", "colour=7", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "unknown tile 'colour'"));
    s.seq_len = 511;
    assert_int_equal(gen_plan(g, &s, "sm_90", "split=0 vec=4", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "does not divide T=511"));
    assert_int_equal(gen_plan(g, &s, "sm_90", "split=1 in_registers=0", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "split=1 needs vec=4 and in_registers=1"));
    gen_close(g);
}

static void candidates_are_valid(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t Ts[] = {1, 3, 128, 131, 541, 2048, 4096, 32800};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; ++i) {
        attnbwd_shape s = test_shape(2, 8, Ts[i], 1);
        char **c = NULL;
        size_t n = 0;
        assert_int_equal(gen_candidates(g, &s, &c, &n), ATTNBWD_OK);
        assert_true(n >= 1);
        for (size_t j = 0; j < n; ++j) {
            kernel_plan p;
            if (gen_plan(g, &s, "sm_90", c[j], &p) != ATTNBWD_OK)
                fail_msg("T=%lld candidate %s: %s", (long long)Ts[i], c[j], attnbwd_last_error());
            check_plan(&s, &p);
            kernel_plan_free(&p);
            free(c[j]);
        }
        free(c);
    }
    gen_close(g);
}

/* Problem 2: every candidate's launches carry the dynamic shared memory their
 * kernels index (the tensor-core tiles need more than the default 48 KiB),
 * the fused attention covers every key block of every (b, h), and a product
 * whose K is split is followed by the reduce of its slices. */
/* Launch a finishes before launch b starts, by the plan's lanes: b follows
 * a on one lane, or waits (through a chain) on an event signalled at or
 * after a on a's lane. before[b] holds every such a, as a bit set. */
static void happens_before(const kernel_plan *p, uint64_t before[]) {
    int signaller[PLAN_MAX_EVENTS], last[PLAN_MAX_LANES];
    for (int i = 0; i < PLAN_MAX_EVENTS; ++i) signaller[i] = -1;
    for (int i = 0; i < PLAN_MAX_LANES; ++i) last[i] = -1;
    for (int b = 0; b < p->n_launches; ++b) {
        const plan_launch *l = &p->launches[b];
        before[b] = 0;
        if (last[l->lane] >= 0) before[b] |= before[last[l->lane]] | (1ull << last[l->lane]);
        for (int w = 0; w < l->n_waits; ++w) {
            const int a = signaller[l->waits[w]];
            assert_true(a >= 0 && a < b);
            before[b] |= before[a] | (1ull << a);
        }
        if (l->signal >= 0) signaller[l->signal] = b;
        last[l->lane] = b;
    }
}

/* Launches that share a workspace region or an output run one after the
 * other, except readers of a finished region: the three of grad_qkv
 * (grad_hidden, grad_qkv_weight, its column sums) and the two of gS (the
 * bias sums, gQ; with gs_direct=1 the sums also write the columns of
 * grad_edit_region_bias past the pass's last key block, which gQ does not
 * read), and, with gs_direct=1 or gq_red=2, bias_zero_rows and
 * bias_zero_cols beside the pass and gQ: they write grad_edit_region_bias's
 * rows past T and the columns past the pass's last key block, the pass the
 * rest, and gQ reads (gq_red=2: adds into) rows and columns before T only
 * (its tiles stop at K = N = T).
 * The side lanes must carry real work on a plan this size. */
static void check_lanes(const kernel_plan *p) {
    assert_true(p->n_launches <= 64);
    uint64_t before[64];
    happens_before(p, before);
    /* Each group's kernels only read their shared arguments, or (gs_direct's) write disjoint parts of them. */
    static const char *readers[][4] = {{"_grad_hidden", "_grad_qkv_weight", "_colsum_partial", NULL},
                                       {"_bias_grads", "_grad_query", NULL, NULL},
                                       {"_bias_zero_rows", "_attention_wg", "_grad_query", "_bias_zero_cols"}};
    const int groups = strstr(p->tiles, "gs_direct=1") || strstr(p->tiles, "gq_red=2") ? 3 : 2;
    for (int b = 0; b < p->n_launches; ++b)
        for (int a = 0; a < b; ++a) {
            const plan_launch *x = &p->launches[a], *y = &p->launches[b];
            int shared = 0;
            for (int i = 0; i < x->n_args; ++i)
                for (int j = 0; j < y->n_args; ++j)
                    shared |= (!strncmp(x->args[i], "ws:", 3) || !strncmp(x->args[i], "out:", 4)) &&
                              !strcmp(x->args[i], y->args[j]);
            if (!shared || (before[b] >> a & 1)) continue;
            int both_read = 0;
            for (int r = 0; r < groups; ++r) {
                int ia = 0, ib = 0;
                for (int k = 0; k < 4 && readers[r][k]; ++k) {
                    ia |= strstr(x->name, readers[r][k]) && !strstr(x->name, "_reduce");
                    ib |= strstr(y->name, readers[r][k]) && !strstr(y->name, "_reduce");
                }
                both_read |= ia && ib;
            }
            if (!both_read) fail_msg("%s (launch %d) and %s (launch %d) share an argument but may overlap", x->name,
                                     a, y->name, b);
        }
    int side = 0;
    for (int i = 0; i < p->n_launches; ++i) side += p->launches[i].lane != 0;
    /* side_start=1: each side lane's first launch comes after gA's product (and its reduce) */
    if (strstr(p->tiles, "side_start=1")) {
        int ga = -1;
        for (int i = 0; i < p->n_launches; ++i)
            if (strstr(p->launches[i].name, "_grad_attn_out")) ga = i;
        assert_true(ga >= 0);
        for (int lane = 1; lane < p->n_lanes; ++lane)
            for (int i = 0; i < p->n_launches; ++i)
                if (p->launches[i].lane == lane) {
                    assert_true(before[i] >> ga & 1);
                    break;
                }
    }
    /* side_start=2: where lane 0 starts with gA's B transposed, each side lane's first launch comes after it */
    if (strstr(p->tiles, "side_start=2") && strstr(p->launches[0].name, "_transpose") && p->launches[0].lane == 0) {
        for (int lane = 1; lane < p->n_lanes; ++lane)
            for (int i = 0; i < p->n_launches; ++i)
                if (p->launches[i].lane == lane) {
                    assert_true(before[i] & 1);
                    break;
                }
    }
    if (strstr(p->tiles, "fused=1")) {
        assert_int_equal(p->n_lanes, 3);
        assert_true(side >= 4 && p->n_launches - side >= 4);
    } else {
        assert_int_equal(p->n_lanes, 1);
    }
}

/* Programmatic dependent launch: every kernel of the source waits for the
 * one ahead of it before anything else (a pdl launch may be placed while
 * that one runs); with pdl=1 or 2 the launches that follow another on their
 * lane without an event are pdl, the chain's among them; with pdl=0 none is. */
static void check_pdl(const kernel_plan *p) {
    int kernels = 0;
    for (const char *k = strstr(p->source, "__global__"); k; k = strstr(k + 1, "__global__")) {
        const char *body = strstr(k, ") {\n");
        assert_non_null(body);
        body += 4;
        while (*body == ' ') body++;
        if (strncmp(body, "tc::pdl_enter();", 16)) fail_msg("a kernel does not start with tc::pdl_enter(): %.80s", k);
        kernels++;
    }
    assert_true(kernels >= 5);
    const int on = tile(p->tiles, "pdl") > 0;
    int started[PLAN_MAX_LANES] = {0}, pdl = 0, chain = 0;
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        assert_int_equal(l->pdl, on && started[l->lane] && l->n_waits == 0);
        pdl += l->pdl;
        chain += l->pdl && l->lane == 0;
        started[l->lane] = 1;
    }
    /* gq_red=1: gQ waits for the output's zeroing (an event), so it is not a programmatic launch */
    if (on) assert_true(chain >= (strstr(p->tiles, "gq_red=1") ? 2 : 3) && pdl >= 5);
}

/* A tensor map argument "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:pointer". */
typedef struct tmap_arg {
    unsigned long long rows, cols, ld;
    unsigned box_rows, box_cols;
    int swizzle;
    const char *ptr;
} tmap_arg;

static tmap_arg parse_tmap(const char *spec) {
    tmap_arg t;
    int used = 0;
    assert_int_equal(sscanf(spec, "tmap:%llu:%llu:%llu:%u:%u:%d:%n", &t.rows, &t.cols, &t.ld, &t.box_rows, &t.box_cols,
                            &t.swizzle, &used), 6);
    assert_true(used > 0);
    t.ptr = spec + used;
    /* The TMA's limits: rows 16-byte aligned, boxes of at most 256, a swizzled box row of 128 bytes. */
    assert_true(t.ld % 4 == 0 && t.cols <= t.ld && t.box_rows <= 256 && t.box_cols <= 256);
    if (t.swizzle) assert_int_equal(t.box_cols, 32);
    return t;
}

/* The pointer an argument names: itself, or a tensor map's. */
static const char *pointer_of(const char *arg) { return strncmp(arg, "tmap:", 5) ? arg : parse_tmap(arg).ptr; }

/* Whether a launch other than a transpose reads the region `ws` (an argument or a tensor map's pointer). */
static int names_arg(const plan_launch *x, const char *ws) {
    if (strstr(x->name, "_transpose")) return 0;
    for (int i = 0; i < x->n_args; ++i)
        if (!strcmp(pointer_of(x->args[i]), ws)) return 1;
    return 0;
}

/* One TMA-fed product of a launch: its own (arguments A's map, B's map, out,
 * alpha, column sums; grid (N tiles, M tiles, K slices)) or one of the two
 * of a pair=1 launch (arguments A, B, out, column sums for each, then alpha;
 * one row of blocks, the first product's first; the slices from the kernel's
 * comment). `which` 0 or 1 picks the pair's product. */
typedef struct product_view {
    const char *a, *b, *out, *colsum;
    unsigned gx, gy, splits, stages; /* stages: a pair's, from its kernel's comment (0 otherwise) */
    unsigned cluster;                /* a pair's launch: its clusters' size; 1: none */
    int pair, which, clustered;      /* clustered: its K slices added across their cluster (pair_dsm=1) */
    int red;                         /* its K slices added into its output by float atomics (splitk_red>=1) */
    int rowdot;                      /* gA making the attention pass's row dots */
} product_view;

static int ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

static int is_pair(const plan_launch *x) { return strstr(x->name, "_and_") != NULL; }

/* The 0 or 1 (a rendered boolean) after `key` in launch x's kernel's source (the first after the kernel's name). */
static int kernel_flag(const kernel_plan *p, const plan_launch *x, const char *key) {
    const char *k = strstr(p->source, x->name), *at = k ? strstr(k, key) : NULL;
    assert_non_null(at);
    at += strlen(key);
    assert_true((at[0] == '0' || at[0] == '1') && (at[1] == ',' || at[1] == ';'));
    return at[0] == '1';
}

/* The line before launch x's kernel's name in the source (its qualifiers), as a string of its own. */
static const char *kernel_head(const kernel_plan *p, const plan_launch *x) {
    static char head[256];
    char name[256];
    snprintf(name, sizeof name, "\n%s(", x->name);
    const char *at = strstr(p->source, name), *start = at;
    assert_non_null(at);
    while (start > p->source && start[-1] != '\n') start--;
    assert_true(at - start < (long)sizeof head);
    snprintf(head, sizeof head, "%.*s", (int)(at - start), start);
    return head;
}

/* The view of the product named `name` (e.g. "_grad_qkv_weight") that launch x runs. */
static product_view view_product(const kernel_plan *p, const plan_launch *x, const char *name) {
    product_view v = {0};
    if (!is_pair(x)) { /* map_a, map_b, C, alpha, column sums; or (gA making the row dots) map_o, D */
        v.rowdot = x->n_args == 6 && ends_with(x->name, "_grad_attn_out");
        assert_true(x->n_args == 5 || v.rowdot);
        v.a = x->args[0], v.b = x->args[1], v.out = x->args[2], v.colsum = v.rowdot ? "null" : x->args[4];
        v.gx = x->grid[0], v.gy = x->grid[1], v.splits = x->grid[2];
        v.cluster = 1;
        assert_null(strstr(kernel_head(p, x), "__cluster_dims__"));
        v.red = v.rowdot ? 0 : kernel_flag(p, x, "constexpr bool RED = "); /* the row dots' kernel: never */
        return v;
    }
    assert_int_equal(x->n_args, 9);
    assert_true(x->grid[1] == 1 && x->grid[2] == 1);
    const char *mid = strstr(x->name, "_and_");
    v.pair = 1;
    v.which = strstr(mid, name) != NULL; /* named after "_and_": the second */
    assert_true(v.which || (strstr(x->name, name) && strstr(x->name, name) < mid));
    v.a = x->args[4 * v.which], v.b = x->args[4 * v.which + 1], v.out = x->args[4 * v.which + 2];
    v.colsum = x->args[4 * v.which + 3];
    const char *k = strstr(p->source, x->name);
    assert_non_null(k);
    char head[32];
    snprintf(head, sizeof head, "Product %d: ", v.which + 1);
    const char *line = strstr(k, head);
    unsigned bm, bn, kslice;
    assert_non_null(line);
    assert_int_equal(sscanf(line + strlen(head), "%ux%u tiles, %u stages, K in %u slice(s) of %u", &bm, &bn, &v.stages,
                            &v.splits, &kslice), 5);
    const tmap_arg b = parse_tmap(v.b), a = parse_tmap(v.a);
    const unsigned long long m = a.swizzle ? a.rows : a.cols;
    v.gx = (unsigned)((b.rows + bn - 1) / bn), v.gy = (unsigned)((m + bm - 1) / bm);
    /* the kernel's clusters: "constexpr int CLUSTER = c, CLUSTER1 = c1, CLUSTER2 = c2;" */
    const char *cl = strstr(k, "constexpr int CLUSTER = ");
    unsigned c[3];
    assert_non_null(cl);
    assert_int_equal(sscanf(cl, "constexpr int CLUSTER = %u, CLUSTER1 = %u, CLUSTER2 = %u;", &c[0], &c[1], &c[2]), 3);
    v.cluster = c[0];
    v.clustered = c[1 + v.which] > 1;
    v.red = kernel_flag(p, x, v.which ? "RED2 = " : "constexpr bool RED1 = ");
    return v;
}

/* The shared memory of a TMA-fed product's tiles: STAGES k tiles of A and B,
 * two raw tiles for TA, the barriers (3 a stage, 1 a raw tile), 1 KiB of alignment. */
static unsigned tma_smem(unsigned stages, unsigned bm, unsigned bn, int ta) {
    return (stages * (bm + bn) + (ta ? 2 * bm : 0)) * 32 * 4 + (3 * stages + 2) * 8 + 1024;
}

/* A TMA-fed product (templates/gemm_tma.cu): A's map (swizzled [M, K] rows,
 * or TA's plain [K, M]) and B's (the transposed copy [N, kp] in the
 * workspace), the producer and consumer warpgroups, the stages it was given.
 * Returns its blocks. */
static unsigned check_tma_product(const kernel_plan *p, const plan_launch *x, const product_view *v,
                                  const attnbwd_shape *s) {
    assert_true(strstr(p->tiles, "tma=1") && strstr(p->tiles, "wg=1"));
    const tmap_arg a = parse_tmap(v->a), b = parse_tmap(v->b);
    const int ta = !a.swizzle;
    const unsigned bm = ta ? a.box_cols : a.box_rows, bn = b.box_rows;
    assert_true(bm == 128 && (bn == 128 || bn == 256) && b.swizzle && b.box_cols == 32);
    if (ta) assert_int_equal(a.box_rows, 32);
    else assert_int_equal(a.box_cols, 32);
    assert_true(!strncmp(a.ptr, "in:", 3) || !strncmp(a.ptr, "ws:", 3));
    const unsigned long long bt = (unsigned long long)(s->batch * s->seq_len);
    if (!strncmp(b.ptr, "in:", 3)) { /* ga_tma=2: gA^T's B, grad_output as it lies */
        assert_string_equal(b.ptr, "in:grad_output");
        assert_int_equal(tile(p->tiles, "ga_tma"), 2);
        assert_true(b.rows == bt && b.cols == 1024 && b.ld == 1024);
    } else { /* B transposed by the plan */
        assert_int_equal(strncmp(b.ptr, "ws:", 3), 0);
        assert_true(b.cols % 4 == 0 && b.ld == b.cols &&
                    strtoull(b.ptr + 3, NULL, 10) + 4 * b.rows * b.ld <= p->workspace_bytes);
    }
    const unsigned long long k = ta ? a.rows : a.cols, m = ta ? a.cols : a.rows;
    assert_true(k == bt || k == 1024 || k == 3072);
    assert_true(m == bt || m == 1024 || m == 3072);
    assert_int_equal(b.cols, (k + 3) / 4 * 4);
    assert_int_equal(v->gx, (unsigned)((b.rows + bn - 1) / bn));
    assert_int_equal(v->gy, (unsigned)((m + bm - 1) / bm));
    assert_int_equal(x->block[0], bm / 64 * 128 + 128);
    /* K slices: their partial products into the workspace, else (added across their cluster, or by float
     * atomics: splitk_red>=1, never with a cluster) the product into its output */
    assert_true(v->splits >= 1 && (unsigned long long)v->splits <= (k + 127) / 128 + 1);
    const int into_out = v->clustered || v->red;
    if (v->splits > 1) assert_int_equal(strncmp(v->out, into_out ? "out:" : "ws:", into_out ? 4 : 3), 0);
    assert_false(v->red && v->clustered);
    /* (not gA, whose reduce makes the row dots too) */
    const int ga = strstr(x->name, "_grad_attn_out") != NULL;
    assert_int_equal(v->red, v->splits > 1 && !v->clustered && !ga && tile(p->tiles, "splitk_red") >= 1);
    if (v->red) { /* its output, M x N, zeroed by an earlier launch (check_lanes: one that ends before it) */
        const plan_launch *z = NULL;
        for (const plan_launch *y = p->launches; y < x; ++y)
            if (ends_with(y->name, "_zero") && !strcmp(y->args[0], v->out)) z = y;
        assert_non_null(z);
        assert_true(z->n_args == 4 && !strncmp(z->args[1], "i64:", 4) && !strncmp(z->args[2], "i32:", 4));
        assert_int_equal(strtoull(z->args[1] + 4, NULL, 10), m);
        assert_int_equal(strtoull(z->args[2] + 4, NULL, 10), b.rows);
        assert_int_equal((unsigned long long)z->grid[0] * 256 * 4, (m * b.rows + 1023) / 1024 * 1024);
    }
    if (v->clustered) assert_true(v->splits == v->cluster && v->cluster <= 8);
    if (v->pair) {
        /* each product's stages fit the launch's shared memory */
        assert_true(v->stages >= 4 && tma_smem(v->stages, bm, bn, ta) <= x->shared_bytes);
    } else { /* (the row dots: a head of attention_output, bm x 64 floats, and a barrier a head beyond) */
        const unsigned extra = v->rowdot ? bm * 64 * 4 + bn / 64 * 8 : 0;
        const unsigned stages = (x->shared_bytes - extra - 1024 - (ta ? 2 * bm * 32 * 4 : 0)) / ((bm + bn) * 32 * 4);
        assert_true(stages >= 4);
        assert_int_equal(x->shared_bytes, tma_smem(stages, bm, bn, ta) + extra);
    }
    assert_true(x->shared_bytes <= 227 * 1024);
    assert_non_null(strstr(p->source, "tc::gemm_tma<"));
    return v->gx * v->gy * v->splits;
}


/* A pair launch's part of each product (the source's "This launch:" lines):
 * K slices [s0, s0 + ns) x tile rows [y0, y0 + ny). */
typedef struct pair_part {
    unsigned s0[2], ns[2], y0[2], ny[2];
} pair_part;

static pair_part parse_pair_part(const kernel_plan *p, const plan_launch *x) {
    pair_part r;
    const char *k = strstr(p->source, x->name);
    assert_non_null(k);
    const char *line = strstr(k, "This launch: ");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "This launch: product 1's slices [%u, +%u) x tile rows [%u, +%u), product 2's "
                                  "// slices [%u, +%u) x rows [%u, +%u)",
                            &r.s0[0], &r.ns[0], &r.y0[0], &r.ny[0], &r.s0[1], &r.ns[1], &r.y0[1], &r.ny[1]),
                     8);
    return r;
}

/* A pair=1 launch: grad_hidden's and grad_qkv_weight's blocks in one row, as
 * many as the two products' tiles and slices (or, pair_kv=1, as many as its
 * part of them: "_kv" beside gQ, "_q" after it on lane 0, which together
 * cover every block once); its shared memory the larger product's; each
 * product's reduce after it (after the q part) on its lane where K is split. */
static void check_tma_pair(const kernel_plan *p, int l, const attnbwd_shape *s) {
    const plan_launch *x = &p->launches[l];
    assert_true(tile(p->tiles, "pair") >= 1);
    const char *names[2] = {"_grad_hidden", "_grad_qkv_weight"};
    const int kv = ends_with(x->name, "_kv"), q = ends_with(x->name, "_q");
    assert_int_equal(kv || q, tile(p->tiles, "pair_kv") == 1);
    const pair_part part = parse_pair_part(p, x);
    int other = -1; /* the kv part's q part */
    if (kv) {
        char want[256];
        snprintf(want, sizeof want, "%.*s_q", (int)(strlen(x->name) - 3), x->name);
        for (int i = l + 1; i < p->n_launches && other < 0; ++i)
            if (!strcmp(p->launches[i].name, want)) other = i;
        assert_true(other > l && p->launches[other].lane == 0 && x->lane != 0);
    }
    unsigned blocks = 0, cluster = 0;
    int split = 0, clustered = 0;
    for (int i = 0; i < 2; ++i) {
        const product_view v = view_product(p, x, names[i]);
        const unsigned all = check_tma_product(p, x, &v, s), w = v.which;
        assert_true(part.s0[w] + part.ns[w] <= v.splits && part.y0[w] + part.ny[w] <= v.gy);
        /* each product's blocks in whole clusters (those past its count return) */
        blocks += (v.gx * part.ny[w] * part.ns[w] + v.cluster - 1) / v.cluster * v.cluster;
        cluster = v.cluster, clustered += v.clustered;
        if (!kv && !q) assert_int_equal(v.gx * part.ny[w] * part.ns[w], all);
        if (kv) { /* the two parts: disjoint, all of the product's blocks */
            const pair_part qp = parse_pair_part(p, &p->launches[other]);
            assert_int_equal(v.gx * (part.ny[w] * part.ns[w] + qp.ny[w] * qp.ns[w]), all);
            assert_true(part.s0[w] >= qp.s0[w] + qp.ns[w] || part.y0[w] >= qp.y0[w] + qp.ny[w]);
        }
        if (v.splits < 2 || kv) continue;
        split++;
        int r = l + 1; /* its reduce reads the partial products; none where its cluster adds them */
        while (r < p->n_launches && strcmp(p->launches[r].args[0], v.out)) r++;
        if (v.clustered || v.red) {
            assert_int_equal(r, p->n_launches);
            continue;
        }
        assert_true(r < p->n_launches && strstr(p->launches[r].name, "_reduce") && p->launches[r].lane == x->lane);
    }
    assert_int_equal(x->grid[0], blocks);
    assert_true(split < 2 || strcmp(x->args[2], x->args[6]));
    /* pair_dsm=1 clusters the split products (where one is split) and nothing else does */
    const int dsm = tile(p->tiles, "pair_dsm") == 1 && !kv && !q;
    assert_int_equal(clustered, dsm ? split : 0);
    assert_int_equal(cluster > 1, clustered > 0);
    assert_int_equal(strstr(kernel_head(p, x), "__cluster_dims__") != NULL, cluster > 1);
    if (cluster > 1) {
        char dims[48];
        snprintf(dims, sizeof dims, "__cluster_dims__(%u, 1, 1)", cluster);
        assert_non_null(strstr(kernel_head(p, x), dims));
    }
}

/* The attention pass on wgmma reads P and Pd (arguments 4 and 5) as they
 * are, or (att_tma=1) through tensor maps over [B*16*T/4, 4T]: four rows of P
 * per map row, which keeps its rows 16-byte aligned at odd T, in boxes of
 * 8 x 68, not swizzled (templates/attention_wg.cu). */
static void check_attention_maps(const kernel_plan *p, const plan_launch *x, const attnbwd_shape *s) {
    const char *names[2] = {"in:attention_probs", "in:attention_probs_dropped"};
    const int tma = tile(p->tiles, "att_tma") == 1;
    /* ... gs, scale, gan, gsinv, dropout_p (gs_half_plans), then att_wc's two, then gq_red=2's output (or none) */
    assert_true(x->n_args == 16);
    assert_string_equal(x->args[13], "in:edit_region_mask");
    assert_int_equal(strncmp(x->args[14], "ws:", 3), 0);
    assert_string_equal(x->args[15], tile(p->tiles, "gq_red") == 2 && strstr(p->source, "constexpr bool OUT0 = 1;")
                                         ? "out:grad_edit_region_bias" : "null");
    for (int i = 0; i < 2; ++i) {
        const char *arg = x->args[4 + i];
        assert_int_equal(!strncmp(arg, "tmap:", 5), tma);
        assert_string_equal(pointer_of(arg), names[i]);
        if (!tma) continue;
        const tmap_arg m = parse_tmap(arg);
        assert_true(m.rows * 4 == (unsigned long long)(s->batch * 16 * s->seq_len));
        assert_true(m.cols == (unsigned long long)(4 * s->seq_len) && m.ld == m.cols);
        assert_true(m.box_rows == 8 && m.box_cols == 68 && m.swizzle == 0);
    }
    assert_int_equal(strstr(p->source, "constexpr bool P_TMA = 1;") != NULL, tma);
    /* gA [B*T, 1024] (head h's 64 columns) and q [B*16*T, 64]: boxes of 32 rows x 32 floats, swizzled. */
    const char *rows[2] = {"ws:", "in:query"};
    const unsigned long long n[2] = {(unsigned long long)(s->batch * s->seq_len),
                                     (unsigned long long)(s->batch * 16 * s->seq_len)},
                             cols[2] = {1024, 64};
    for (int i = 0; i < 2; ++i) {
        const char *arg = x->args[2 * i];
        assert_int_equal(strncmp(arg, "tmap:", 5), 0);
        assert_int_equal(strncmp(pointer_of(arg), rows[i], strlen(rows[i])), 0);
        const tmap_arg m = parse_tmap(arg);
        assert_true(m.rows == n[i] && m.cols == cols[i] && m.ld == cols[i]);
        assert_true(m.box_rows == 32 && m.box_cols == 32 && m.swizzle == 1);
    }
}

/* The two column-sum bias gradients, each named by exactly one launch: with
 * gemm_bias=2 (or 1 where its K is split or it shares a pair=1 launch) a TMA-fed TA product makes the
 * sums of its A (grad_qkv for grad_qkv_bias, grad_output for grad_out_bias)
 * as it copies it, straight into the bias (K not split) or one row per K
 * slice that colsum_final adds later on its lane; otherwise (its colsum
 * argument null) a colsum_partial pass over that matrix and colsum_final do. */
static void check_bias_sums(const kernel_plan *p) {
    static const char *bias[2] = {"out:grad_qkv_bias", "out:grad_out_bias"},
                      *product[2] = {"_grad_qkv_weight", "_grad_out_weight"}, *matrix[2] = {"", "in:grad_output"};
    for (int b = 0; b < 2; ++b) {
        int writers = 0, maker = -1, partial_pass = 0;
        for (int l = 0; l < p->n_launches; ++l) {
            const plan_launch *x = &p->launches[l];
            /* pair_kv: the pair's two parts write their rows' sums; they count as one writer */
            for (int i = 0; i < x->n_args && !ends_with(x->name, "_kv"); ++i) writers += !strcmp(x->args[i], bias[b]);
            if (strstr(x->name, product[b]) && !strstr(x->name, "_reduce")) maker = l;
            if (strstr(x->name, "_colsum_partial") && (b == 0 ? !strncmp(x->args[0], "ws:", 3)
                                                              : !strcmp(x->args[0], matrix[b])))
                partial_pass = 1;
        }
        assert_int_equal(writers, 1);
        assert_true(maker >= 0);
        const plan_launch *g = &p->launches[maker];
        const int tma = !strncmp(g->args[0], "tmap:", 5);
        const product_view v = tma ? view_product(p, g, product[b])
                                   : (product_view){.a = g->args[0], .b = g->args[1], .out = g->args[2],
                                                    .colsum = "", .splits = g->grid[2]};
        const int tma_ta = tma && parse_tmap(v.a).swizzle == 0;
        const long where = tile(p->tiles, "gemm_bias"); /* 1: where K is split or paired, 2: always */
        const int sums = tma_ta && (where == 2 || (where == 1 && (v.splits > 1 || v.pair)));
        assert_int_equal(partial_pass, !sums);
        if (tma_ta) assert_int_equal(!strcmp(v.colsum, "null"), !sums);
        if (!sums) continue;
        /* the product's kernel instantiates the producer with COLSUM, its tenth template argument */
        const char *call = strstr(strstr(p->source, g->name), "tc::gemm_tma<");
        assert_non_null(call);
        if (v.which) call = strstr(call + 1, "tc::gemm_tma<");
        assert_non_null(call);
        assert_int_equal(template_arg(call, 9), 1);
        if (v.splits == 1) {
            assert_string_equal(v.colsum, bias[b]);
            continue;
        }
        int fin = maker + 1; /* the slices' sums, added after the product on its lane */
        while (fin < p->n_launches && !strstr(p->launches[fin].name, "_colsum_final")) fin++;
        assert_true(fin < p->n_launches);
        const plan_launch *f = &p->launches[fin];
        assert_int_equal(f->lane, g->lane);
        assert_string_equal(f->args[0], v.colsum);
        assert_string_equal(f->args[1], bias[b]);
        assert_int_equal(strtol(f->args[3] + 4, NULL, 10), (long)v.splits);
        assert_int_equal(strtol(f->args[2] + 4, NULL, 10), (long)parse_tmap(v.a).cols);
    }
}

/* The launch that zeroes all of grad_edit_region_bias (gq_red=1), or -1. */
static int whole_bias_zero(const kernel_plan *p) {
    for (int l = 0; l < p->n_launches; ++l)
        if (ends_with(p->launches[l].name, "_zero") && !strcmp(p->launches[l].args[0], "out:grad_edit_region_bias"))
            return l;
    return -1;
}

/* grad_edit_region_bias's 1024 rows of every head are written once: rows
 * past T by bias_zero_rows at the start on a side lane (zero_early=1 with
 * gs_store=1), the rest by bias_grads, or (att_wc=1, B = 1) by the pass up to its last key
 * block and bias_zero_cols past it (att_wc_plans); else all of them by
 * bias_grads. With gq_red=1 all of it is zeroed on a side lane and gQ adds
 * gS into it (gq_red_plans). */
static void check_bias_rows(const kernel_plan *p, const attnbwd_shape *s) {
    if (!strstr(p->tiles, "fused=1") || !strstr(p->tiles, "gs_store=1")) return;
    const int early = strstr(p->tiles, "zero_early=1") && s->seq_len < 1024;
    int zero = -1, grads = -1, wc = -1, cols = -1, red = 0;
    const int whole = whole_bias_zero(p);
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *x = &p->launches[i];
        red |= ends_with(x->name, "_grad_query") && !strcmp(x->args[x->n_args - 1], "out:grad_edit_region_bias");
        if (strstr(p->launches[i].name, "_bias_zero_rows")) zero = i;
        if (strstr(p->launches[i].name, "_bias_grads")) grads = i;
        if (strstr(p->launches[i].name, "_within_cross")) wc = i;
        if (strstr(p->launches[i].name, "_bias_zero_cols")) cols = i;
    }
    if (red && whole >= 0) { /* gq_red=1 (or 2 without the rows past T zeroed early): all zeroed, then gQ's sums */
        assert_true(tile(p->tiles, "gq_red") >= 1);
        assert_true(p->launches[whole].lane != 0 && wc >= 0);
        assert_true(grads < 0 && zero < 0 && cols < 0);
        assert_true((unsigned long long)p->launches[whole].grid[0] * 256 >= 16ull * 1024 * 1024 / 4);
        return;
    }
    if (red) { /* gq_red=2: the pass's batch row 0 up to its last key block, gQ's sums, the rest zeroed beside */
        assert_non_null(strstr(p->tiles, "gq_red=2"));
        assert_true(early || s->seq_len == 1024);
        assert_true(wc >= 0 && grads < 0);
        assert_int_equal(zero >= 0, early);
        assert_int_equal(cols >= 0, 64 * ((s->seq_len + 63) / 64) < 1024);
        return;
    }
    assert_int_equal(whole, -1);
    if (wc >= 0 && grads < 0) { /* att_wc */
        assert_true(strstr(p->tiles, "att_wc=1") && strstr(p->tiles, "gs_direct=1") && s->batch == 1);
        assert_true(early || s->seq_len == 1024);
        assert_int_equal(zero >= 0, early);
        assert_int_equal(cols >= 0, 64 * ((s->seq_len + 63) / 64) < 1024);
        return;
    }
    assert_int_equal(cols, -1);
    if (grads < 0) fail_msg("%s: no bias_grads launch", p->tiles);
    /* bias_grads: rows of ct threads (T's columns in fours, whole warps), 256 / ct rows a block. */
    const unsigned rows = early ? (unsigned)s->seq_len : 1024u, ct = ((unsigned)(s->seq_len + 3) / 4 + 31) / 32 * 32;
    assert_int_equal(p->launches[grads].n_args, 6); /* ..., rows, gsinv */
    assert_int_equal(strtol(p->launches[grads].args[4] + 4, NULL, 10), rows);
    assert_int_equal(p->launches[grads].grid[0], (rows + 256 / ct - 1) / (256 / ct));
    assert_int_equal(p->launches[grads].grid[1], 16);
    if (!early) {
        assert_int_equal(zero, -1);
        return;
    }
    const plan_launch *z = &p->launches[zero];
    assert_true(zero >= 0 && zero < grads && z->lane != 0 && z->n_args == 1);
    assert_string_equal(z->args[0], "out:grad_edit_region_bias");
    assert_int_equal(z->grid[1], 16);
    const unsigned long long float4s = (unsigned long long)(1024 - s->seq_len) * 1024 / 4;
    assert_true((unsigned long long)z->grid[0] * 256 >= float4s && (unsigned long long)(z->grid[0] - 1) * 256 < float4s);
}

static void edit_attention_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 1}, {1, 17}, {3, 17}, {64, 128}, {1, 373}, {32, 773}, {1, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
        char **c = NULL;
        size_t n = 0;
        assert_int_equal(gen_candidates(g, &s, &c, &n), ATTNBWD_OK);
        assert_true(n >= 2);
        kernel_plan h; /* explore reports every candidate against the first: the heuristic's */
        assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &h), ATTNBWD_OK);
        assert_string_equal(h.tiles, c[0]);
        kernel_plan_free(&h);
        for (size_t j = 0; j < n; ++j) {
            kernel_plan p;
            if (gen_plan(g, &s, "sm_90", c[j], &p) != ATTNBWD_OK)
                fail_msg("B=%lld T=%lld candidate %s: %s", (long long)s.batch, (long long)s.seq_len, c[j],
                         attnbwd_last_error());
            const int fused = strstr(p.tiles, "fused=1") != NULL;
            int attention = 0, gemms = 0, tma_products = 0, pairs = 0;
            for (int l = 0; l < p.n_launches; ++l) {
                const plan_launch *x = &p.launches[l];
                const char *kind = strstr(x->name, "_p0_") + 4;
                assert_non_null(strstr(p.source, x->name));
                if (!strcmp(kind, "attention")) {
                    attention++;
                    const long bj = tile(p.tiles, "bj");
                    assert_int_equal(x->grid[0], (unsigned)((s.seq_len + bj - 1) / bj));
                    assert_int_equal(x->grid[1], (unsigned)(s.batch * 16));
                    const int store = strstr(p.tiles, "gs_store=1") != NULL;
                    const long stages = tile(p.tiles, "p_stages"); /* gS, then Pd or rings of P and Pd */
                    const long tiles = stages ? 1 + 2 * stages : 2;
                    const unsigned floats =
                        (unsigned)((store ? 0 : bj * 72) + bj * 68 + 2 * 64 * 72 + 2 * 64 * 68 + tiles * 64 * (bj + 8));
                    assert_true(4 * floats + 8 * bj + 32 <= 227 * 1024);
                    assert_int_equal(x->shared_bytes, 4 * floats);
                } else if (!strcmp(kind, "attention_wg")) {
                    /* The pass on wgmma: att_kb blocks of 64 keys a block, the mma.sync pass compiled out. */
                    attention++;
                    const long kb = tile(p.tiles, "att_kb"), nj = (s.seq_len + 63) / 64;
                    assert_true(kb == 1 || kb == 2 || kb == 3);
                    /* att_kb=2: up to `items` (pair, head) items a block one after another (att_items), in a grid
                     * of one dimension; one item a block where gS is fp16. */
                    const char *it = strstr(p.source, "(NJ + NW - 1) / NW, ITEMS = ");
                    const long items = kb == 1 ? 1 : it ? strtol(it + 28, NULL, 10) : -1, pairs = (nj + 1) / 2;
                    assert_true(items >= 1 && items <= 8 && (items == 1 || (kb == 2 && !tile(p.tiles, "gs_half"))));
                    if (kb == 2 && tile(p.tiles, "att_items")) assert_int_equal(items, tile(p.tiles, "att_items"));
                    if (kb == 3) /* blocks of two key blocks and of one: between a block a pair and one a key block */
                        assert_in_range(x->grid[0], (unsigned)(s.batch * 16 * pairs), (unsigned)(s.batch * 16 * nj));
                    else if (kb == 2)
                        assert_int_equal(x->grid[0], (unsigned)((pairs * s.batch * 16 + items - 1) / items));
                    else
                        assert_int_equal(x->grid[0], (unsigned)nj);
                    assert_int_equal(x->grid[1], kb == 1 ? (unsigned)(s.batch * 16) : 1u);
                    assert_int_equal(x->block[0], 256);
                    const long stages = tile(p.tiles, "p_stages");
                    assert_true(tile(p.tiles, "wg_att") && tile(p.tiles, "wg") && tile(p.tiles, "gs_store") &&
                                tile(p.tiles, "bj") == 64 && stages == 2);
                    /* Two warpgroups, each with a ring (rows of 68 floats; with att_tma a barrier per slot).
                     * att_kb=1: v, two step buffers per warpgroup (gA, gA^T, q^T), the rows in flight and their
                     * barrier per warpgroup; att_kb=2: v of two key blocks (of two items where a block takes
                     * more), three step buffers, the rows in flight and their barrier once. 1 KiB of alignment. */
                    const int tma = tile(p.tiles, "att_tma") == 1;
                    const unsigned rings = (unsigned)(2 * stages * 2 * 32 * 68 + (tma ? 2 * stages * 2 : 0));
                    const unsigned rows = 2 * 64 * 32 + 4 * 6 * 32 * 32 + rings + 2 * 8 * 128 * 4 + 2 * 2,
                                   keys = (items > 1 ? 2 : 1) * 2 * 2 * 64 * 32 + 3 * 6 * 32 * 32 + rings +
                                          4 * 32 * 32 + 2;
                    const unsigned floats = kb == 1 ? rows : kb == 2 ? keys : rows > keys ? rows : keys;
                    assert_int_equal(x->shared_bytes, 4 * floats + 1024);
                    /* The organisations' blocks in the source: att_kb=3 has both. */
                    assert_true(!strstr(p.source, "tile att_kb=1: a block") == (kb == 2));
                    assert_true(!strstr(p.source, "tile att_kb=2: a block") == (kb == 1));
                    assert_true(x->shared_bytes <= 227 * 1024);
                    assert_non_null(strstr(p.source, "#if 0 // else templates/attention_wg.cu's pass runs"));
                    check_attention_maps(&p, x, &s);
                } else if (fused && !strncmp(kind, "grad_", 5) && !strstr(kind, "_reduce")) {
                    int red = 0; /* its K slices added by float atomics: no reduce after it */
                    gemms += ends_with(x->name, "_kv") ? 0 : is_pair(x) ? 2 : 1; /* a pair's two parts: two */
                    assert_true(x->shared_bytes > 48 * 1024); /* cp.async or TMA stages */
                    if (is_pair(x)) {
                        check_tma_pair(&p, l, &s);
                        pairs++;
                    } else if (!strncmp(x->args[0], "tmap:", 5) && strcmp(kind, "grad_query")) {
                        const product_view v = view_product(&p, x, ""); /* gq_tma=1's gQ: gq_tma_plans */
                        check_tma_product(&p, x, &v, &s);
                        red = v.red;
                    }
                    if (!strcmp(kind, "grad_query") && strstr(p.source, "gQ^T = scale")) {
                        /* gQ on wgmma: blocks of gq_bn rows of gS, one warpgroup, per (b, h); gq_pair's
                         * (gq_pair_plan): per two batch rows of a head, one warpgroup each */
                        const long bn = tile(p.tiles, "gq_bn");
                        const unsigned pair = strstr(p.source, "constexpr int PAIR = 2;") ? 2 : 1;
                        assert_true(bn == 64 || bn == 128);
                        assert_true(pair == 1 || (tile(p.tiles, "gq_pair") == 1 && tile(p.tiles, "gq_red") >= 1));
                        assert_int_equal(x->grid[0], (unsigned)((s.seq_len + bn - 1) / bn));
                        assert_int_equal(x->grid[2], (unsigned)((s.batch + pair - 1) / pair * 16));
                        assert_int_equal(x->block[0], 128 * pair);
                        char tiles[48];
                        snprintf(tiles, sizeof tiles, "wgmma tiles 64x%ldx32", bn);
                        assert_non_null(strstr(p.source, tiles));
                    }
                    tma_products += !strncmp(x->args[0], "tmap:", 5) && strcmp(kind, "grad_query");
                    if (x->grid[2] > 1 && strcmp(kind, "grad_query") && !red) { /* grad_query: z is (b, h) */
                        assert_true(l + 1 < p.n_launches);
                        assert_non_null(strstr(p.launches[l + 1].name, "_reduce"));
                    }
                } else if (!fused) {
                    assert_int_equal(x->shared_bytes, 0);
                }
            }
            assert_int_equal(attention, fused);
            if (!tile(p.tiles, "tma") || !tile(p.tiles, "wg")) assert_int_equal(tma_products, 0);
            if (tile(p.tiles, "tma") && tile(p.tiles, "wg") && s.batch * s.seq_len >= 8192) assert_true(tma_products >= 3);
            /* wgmma products read B transposed: each transpose feeds its product
             * (the next launch with that region), its [cols, ldd] region lies
             * inside the workspace, and only such a plan asks NVRTC for sm_90a. */
            int transposes = 0;
            for (int l = 0; l < p.n_launches; ++l) {
                const plan_launch *x = &p.launches[l];
                if (!strstr(x->name, "_transpose")) continue;
                transposes++;
                assert_true(x->n_args == 5);
                int user = l + 1;
                while (user < p.n_launches && !names_arg(&p.launches[user], x->args[1])) user++;
                assert_true(user < p.n_launches);
                assert_non_null(strstr(p.launches[user].name, "_grad_"));
                const unsigned long long off = strtoull(x->args[1] + 3, NULL, 10);
                const unsigned long long cols = strtoull(x->args[3] + 4, NULL, 10);
                const unsigned long long ldd = strtoull(x->args[4] + 4, NULL, 10);
                assert_true(ldd % 4 == 0 && off + 4 * cols * ldd <= p.workspace_bytes);
            }
            check_bias_rows(&p, &s);
            if (fused) check_bias_sums(&p);
            check_lanes(&p);
            check_pdl(&p);
            /* gQ on wgmma (wg_gq=1 with wg=1 and gs_store=1) needs sm_90a too, and no transpose. */
            const int gq_wg = strstr(p.source, "gQ^T = scale") || strstr(p.source, "namespace gq {");
            assert_int_equal(gq_wg, fused && tile(p.tiles, "wg_gq") && tile(p.tiles, "wg") && tile(p.tiles, "gs_store"));
            /* ... and so does the attention pass on wgmma (wg_att=1 where it applies). */
            const int att_wg = strstr(p.source, "_attention_wg(") != NULL;
            assert_int_equal(att_wg, fused && tile(p.tiles, "wg_att") && tile(p.tiles, "wg") &&
                                         tile(p.tiles, "gs_store") && tile(p.tiles, "bj") == 64 &&
                                         tile(p.tiles, "p_stages") == 2);
            assert_string_equal(p.compile_arch, transposes || gq_wg || att_wg ? "sm_90a" : "");
            if (transposes) assert_non_null(strstr(p.tiles, "wg=1"));
            /* pair=1 puts grad_hidden and grad_qkv_weight in one launch where both are TMA-fed. */
            if (pairs) assert_true(tile(p.tiles, "pair") >= 1 && tile(p.tiles, "tma") == 1);
            /* pair_kv=1 (where it pairs, gS stored and grad_hidden's K in three slices of 1024): in two parts. */
            if (tile(p.tiles, "pair") >= 1 && fused && tile(p.tiles, "wg") == 1 && tile(p.tiles, "tma") == 1)
                assert_true(pairs == 1 || (pairs == 2 && tile(p.tiles, "pair_kv") == 1));
            /* The attention pass's row dots come from one launch before it: gA's reduce where gA's K is
             * split, else gA itself (TMA-fed: its last argument) or a rowdot launch reading gA. */
            if (fused) {
                int makers = 0, pass_at = -1;
                for (int l = 0; l < p.n_launches; ++l) {
                    const plan_launch *x = &p.launches[l];
                    if (ends_with(x->name, "_attention") || ends_with(x->name, "_attention_wg"))
                        pass_at = pass_at < 0 ? l : pass_at;
                    if (ends_with(x->name, "_rowdot") || ends_with(x->name, "_grad_attn_out_reduce") ||
                        (ends_with(x->name, "_grad_attn_out") && x->n_args == 6)) {
                        assert_true(pass_at < 0); /* before the pass */
                        makers++;
                    }
                }
                assert_int_equal(makers, 1);
            }
            /* ga_tma=1 (with tma=1 and wg=1): gA is TMA-fed, its B transposed first */
            if (fused && tile(p.tiles, "ga_tma") == 1 && tile(p.tiles, "wg") == 1 && tile(p.tiles, "tma") == 1)
                for (int l = 0; l < p.n_launches; ++l)
                    if (strstr(p.launches[l].name, "_grad_attn_out") && !strstr(p.launches[l].name, "_reduce"))
                        assert_int_equal(strncmp(p.launches[l].args[0], "tmap:", 5), 0);
            /* The four projection products, and gQ from the stored gS. */
            assert_int_equal(gemms, fused ? (strstr(p.tiles, "gs_store=1") ? 5 : 4) : 0);
            assert_int_equal(p.align, fused ? 16 : 4);
            kernel_plan_free(&p);
            free(c[j]);
        }
        free(c);
    }
    gen_close(g);
}

/* grad_hidden's producer (A = grad_qkv, K = 3072) skips its rounding pass,
 * the tensor cores truncating A (A_TRUNC); no other product does. */
static void grad_hidden_truncation_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {32, 773}}; /* grad_hidden paired, and alone */
    for (size_t i = 0; i < 2; ++i) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
        kernel_plan p;
        assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
        int products = 0, truncated = 0;
        for (const char *at = strstr(p.source, "tc::gemm_tma<"); at; at = strstr(at + 1, "tc::gemm_tma<")) {
            const int a_trunc = (int)template_arg(at, 10), hidden = !template_arg(at, 3) && template_arg(at, 2) == 3072;
            assert_int_equal(a_trunc, hidden);
            products++;
            truncated += a_trunc;
        }
        assert_true(products >= 2);
        assert_int_equal(truncated, 1);
        kernel_plan_free(&p);
    }
    gen_close(g);
}

/* The launch of `p` whose name ends with `tail` (the first), or NULL. */
static const plan_launch *launch_named(const kernel_plan *p, const char *tail) {
    for (int l = 0; l < p->n_launches; ++l)
        if (ends_with(p->launches[l].name, tail)) return &p->launches[l];
    return NULL;
}
static const char *last_arg(const plan_launch *x) { return x->args[x->n_args - 1]; }

/* gq_f16=1 in fp16: the pass stores gS in fp16 with no scale (GS_F16), its
 * rows padded to 8 halves, the bias sums read it so, and gQ runs on fp16
 * wgmma (templates/grad_query_wg16.cu) with the keys, gS, grad_qkv and the
 * scale; gS's workspace region is half of fp32's. With gq_red=2 gq_pair=1
 * (B > 1) gQ adds the bias sums into grad_edit_region_bias two batch rows a
 * block, over batch row 0, which the pass stores there (OUT0). It has no
 * effect where gS is not in the workspace in fp16's pass (B = 1's gs_direct,
 * att_f16=0), where gQ is TMA-fed (gq_tma), or in TF32. */
static void fp16_gq_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{2, 449}, {64, 128}, {3, 1}, {32, 773}};
    for (size_t i = 0; i < 4; ++i) {
        const int64_t T = shapes[i][1];
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, T, 1, ATTNBWD_PRECISION_FP16};
        kernel_plan p;
        assert_int_equal(gen_plan(g, &s, "sm_90", "gq_f16=1", &p), ATTNBWD_OK);
        assert_int_equal(tile(p.tiles, "gq_f16"), 1);
        assert_non_null(strstr(p.source, "namespace gq16"));
        assert_non_null(strstr(p.source, "constexpr bool GS_F16 = 1;"));
        assert_non_null(strstr(p.source, "kF16 = 1;"));
        char ld[64];
        snprintf(ld, sizeof ld, "GS_LD = %lld;", (long long)((T + 7) / 8 * 8));
        assert_non_null(strstr(p.source, ld));
        const plan_launch *gq = NULL;
        for (int l = 0; l < p.n_launches; ++l)
            if (ends_with(p.launches[l].name, "_grad_query")) gq = &p.launches[l];
        assert_non_null(gq);
        assert_int_equal(gq->n_args, 5);
        assert_string_equal(gq->args[0], "in:key");
        assert_string_equal(gq->args[4], "null");
        const size_t ws16 = p.workspace_bytes;
        kernel_plan_free(&p);
        /* gS's region (regions in whole 256 bytes): B * 16 * T rows of ceil(T / 4) * 4 floats in fp32, of
         * ceil(T / 8) * 8 halves in fp16. */
        assert_int_equal(gen_plan(g, &s, "sm_90", "gq_f16=0", &p), ATTNBWD_OK);
        const size_t rows = (size_t)(shapes[i][0] * 16 * T), f32 = rows * (size_t)((T + 3) / 4 * 4) * 4,
                     f16 = rows * (size_t)((T + 7) / 8 * 8) * 2;
        assert_int_equal(p.workspace_bytes - ws16, (f32 + 255) / 256 * 256 - (f16 + 255) / 256 * 256);
        assert_null(strstr(p.source, "namespace gq16"));
        assert_non_null(strstr(p.source, "constexpr bool GS_F16 = 0;"));
        kernel_plan_free(&p);
        if (shapes[i][0] > 1) {
            assert_int_equal(gen_plan(g, &s, "sm_90", "gq_f16=1 gq_red=2 gq_pair=1", &p), ATTNBWD_OK);
            assert_non_null(strstr(p.source, "namespace gq16"));
            assert_non_null(strstr(p.source, "constexpr int PAIR = 2, NT"));
            assert_non_null(strstr(p.source, "constexpr bool OUT0 = 1;"));
            assert_non_null(strstr(p.source, "constexpr bool GS_F16 = 1;"));
            for (int l = 0; l < p.n_launches; ++l)
                if (ends_with(p.launches[l].name, "_grad_query")) {
                    assert_string_equal(last_arg(&p.launches[l]), "out:grad_edit_region_bias");
                    assert_int_equal(p.launches[l].block[0], 256);
                }
            kernel_plan_free(&p);
        }
        const char *none[] = {"gq_f16=1 att_f16=0", "gq_f16=1 gq_tma=1 gs_round=1"};
        for (int v = 0; v < 2; ++v) {
            assert_int_equal(gen_plan(g, &s, "sm_90", none[v], &p), ATTNBWD_OK);
            assert_null(strstr(p.source, "namespace gq16"));
            assert_non_null(strstr(p.source, "constexpr bool GS_F16 = 0;"));
            kernel_plan_free(&p);
        }
        attnbwd_shape st = s;
        st.precision = ATTNBWD_PRECISION_TF32;
        assert_int_equal(gen_plan(g, &st, "sm_90", "gq_f16=1", &p), ATTNBWD_OK);
        assert_null(strstr(p.source, "namespace gq16"));
        kernel_plan_free(&p);
    }
    /* B = 1: gS straight into grad_edit_region_bias (gs_direct) stays fp32; without it, fp16 in the workspace. */
    attnbwd_shape s1 = {ATTNBWD_EDIT_ATTENTION_BWD, 1, 16, 373, 1, ATTNBWD_PRECISION_FP16};
    kernel_plan p;
    assert_int_equal(gen_plan(g, &s1, "sm_90", "gq_f16=1", &p), ATTNBWD_OK);
    assert_null(strstr(p.source, "namespace gq16"));
    kernel_plan_free(&p);
    assert_int_equal(gen_plan(g, &s1, "sm_90", "gq_f16=1 gs_direct=0", &p), ATTNBWD_OK);
    assert_non_null(strstr(p.source, "namespace gq16"));
    kernel_plan_free(&p);
    gen_close(g);
}

/* fp16 (precision 2) on sm_90: the heuristic puts the projection products on
 * the fp16 TMA-fed wgmma path (templates/gemm_tma.cu, sm_90a), every B
 * transposed into fp16 with its K padded to a multiple of 8 and its tensor
 * map counting pairs of halves, and no projection product on TF32's wgmma;
 * the attention pass runs on wgmma with fp16 operands (att_f16; TF32's
 * products with att_f16=0 or gs_half=1, which reads v in fp32) and gQ on
 * fp16 wgmma from the fp16 gS it stores (gq_f16), except at B = 1, where gS
 * goes straight to the output in fp32 and gQ runs on TF32's wgmma kernel
 * (wg_gq=0 wg_att=0 keep them on mma.sync); wg=0 keeps fp16 on mma.sync.
 * fp32 keeps mma.sync and refuses wg=1. */
static void fp16_wgmma_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{64, 128}, {1, 373}, {32, 773}, {1, 1}};
    for (size_t i = 0; i < 4; ++i) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, ATTNBWD_PRECISION_FP16};
        kernel_plan p;
        /* "wg=0" keeps every fp16 product on mma.sync; by default the TMA-fed wgmma products are chosen. */
        assert_int_equal(gen_plan(g, &s, "sm_90", "wg=0", &p), ATTNBWD_OK);
        assert_int_equal(tile(p.tiles, "wg"), 0);
        assert_null(strstr(p.source, "tc::tma_operands::f16>"));
        kernel_plan_free(&p);
        assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
        assert_int_equal(tile(p.tiles, "wg"), 1);
        assert_int_equal(tile(p.tiles, "tma"), 1);
        assert_int_equal(tile(p.tiles, "wg_att"), 1);
        assert_int_equal(tile(p.tiles, "wg_gq"), 1);
        assert_int_equal(tile(p.tiles, "att_tma"), shapes[i][1] % 4 != 0);
        assert_int_equal(tile(p.tiles, "gq_f16"), 1);
        if (shapes[i][0] > 1) /* gQ's product */
            assert_non_null(strstr(p.source, "namespace gq16"));
        else
            assert_non_null(strstr(p.source, "tc::gemm_wg<"));
        int pass_on_wg = 0;
        for (int l = 0; l < p.n_launches; ++l) pass_on_wg += ends_with(p.launches[l].name, "_attention_wg");
        assert_int_equal(pass_on_wg, 1);
        assert_int_equal(tile(p.tiles, "att_f16"), 1);
        assert_non_null(strstr(p.source, "constexpr bool F16 = 1;"));
        kernel_plan_free(&p);
        const char *tf32_pass[] = {"att_f16=0", "gs_half=1"};
        for (int v = 0; v < 2; ++v) {
            assert_int_equal(gen_plan(g, &s, "sm_90", tf32_pass[v], &p), ATTNBWD_OK);
            assert_non_null(strstr(p.source, "constexpr bool F16 = 0;"));
            kernel_plan_free(&p);
        }
        /* TF32 keeps TF32's products in its pass, and refuses none: att_f16=1 has no effect there. */
        attnbwd_shape st = s;
        st.precision = ATTNBWD_PRECISION_TF32;
        for (int v = 0; v < 2; ++v) {
            assert_int_equal(gen_plan(g, &st, "sm_90", v ? "att_f16=1" : NULL, &p), ATTNBWD_OK);
            assert_int_equal(tile(p.tiles, "att_f16"), v);
            assert_non_null(strstr(p.source, "constexpr bool F16 = 0;"));
            kernel_plan_free(&p);
        }
        /* With gQ and the pass on mma.sync and no pair: no TF32 wgmma in the plan, each product chosen alone. */
        assert_int_equal(gen_plan(g, &s, "sm_90", "wg_att=0 wg_gq=0 pair=0", &p), ATTNBWD_OK);
        /* At B * T = 1 the model rates mma.sync faster for all four: each TMA-fed product would first
         * transpose its B into fp16 (5 us and more a transpose), where the product itself is a few rows. */
        if (shapes[i][1] == 1) {
            assert_null(strstr(p.source, "tc::tma_operands::f16>"));
            kernel_plan_free(&p);
            continue;
        }
        assert_string_equal(p.compile_arch, "sm_90a");
        assert_non_null(strstr(p.source, "tc::tma_operands::f16>"));
        assert_null(strstr(p.source, "tc::tma_operands::tf32>"));
        assert_null(strstr(p.source, "tc::gemm_wg<"));
        int transposes = 0, f16_maps = 0;
        for (int l = 0; l < p.n_launches; ++l) {
            const plan_launch *x = &p.launches[l];
            assert_false(ends_with(x->name, "_transpose"));
            assert_false(ends_with(x->name, "_attention_wg"));
            if (!ends_with(x->name, "_transpose_f16")) continue;
            transposes++;
            const long long kp = strtoll(last_arg(x) + 4, NULL, 10); /* "i64:KP" */
            assert_true(kp % 8 == 0);
            /* The product's B map over this region: [N, kp / 2] "floats". */
            for (int m = 0; m < p.n_launches; ++m)
                for (int a = 0; a < p.launches[m].n_args; ++a) {
                    const char *arg = p.launches[m].args[a], *at = strstr(arg, x->args[1]);
                    if (strncmp(arg, "tmap:", 5) || !at || strcmp(at, x->args[1])) continue;
                    char want[64];
                    snprintf(want, sizeof want, "tmap:1024:%lld:%lld:", kp / 2, kp / 2);
                    assert_true(!strncmp(arg, want, strlen(want)));
                    f16_maps++;
                }
        }
        assert_true(transposes >= 1);
        assert_int_equal(f16_maps, transposes);
        kernel_plan_free(&p);
        s.precision = ATTNBWD_PRECISION_FP32;
        assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
        assert_int_equal(tile(p.tiles, "wg"), 0);
        kernel_plan_free(&p);
        assert_int_equal(gen_plan(g, &s, "sm_90", "wg=1", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    }
    gen_close(g);
}

/* gs_half=1 (where the pass and gQ run on wgmma): gS in the workspace as fp16,
 * its region half the fp32 one's; the row dots' launch also writes the rows'
 * |gA_i|^2 (gan), which the pass reads with dropout_p, and the pass's
 * inverse scales (gsinv) go to both readers of gS, gQ and the bias sums.
 * gs_half=0 (the heuristic's): none of that (null pointers), gS in fp32. */
static void gs_half_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {32, 773}, {2, 17}}; /* gA split (row dots in its reduce), or not */
    for (size_t i = 0; i < 3; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1], NJ = (T + 63) / 64, ld = (T + 3) / 4 * 4;
        size_t ws[3];
        for (int mode = 0; mode <= 2; ++mode) { /* gs_half=0, =1, the heuristic's */
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
            kernel_plan p;
            const int half = mode == 1;
            assert_int_equal(gen_plan(g, &s, "sm_90",
                                      mode == 0 ? "gs_half=0 gs_direct=0" : mode == 1 ? "gs_half=1" : "gs_direct=0", &p),
                             ATTNBWD_OK);
            assert_non_null(strstr(p.tiles, half ? "gs_half=1" : "gs_half=0"));
            const plan_launch *maker = launch_named(&p, "_rowdot");
            if (!maker) maker = launch_named(&p, "_grad_attn_out_reduce");
            if (!maker) { /* gA makes them (not with gs_half, whose maker also makes |gA|^2) */
                assert_false(half);
                maker = launch_named(&p, "_grad_attn_out");
                assert_true(maker->n_args == 6);
            }
            const plan_launch *pass = launch_named(&p, "_attention_wg"), *gq = launch_named(&p, "_grad_query"),
                              *bias = launch_named(&p, "_bias_grads");
            assert_non_null(maker);
            assert_non_null(pass);
            assert_non_null(gq);
            assert_non_null(bias);
            assert_int_equal(pass->n_args, 16);
            assert_string_equal(pass->args[12], "f32:dropout_p");
            const char *gan = pass->args[10], *gsinv = pass->args[11];
            if (maker->n_args != 6) assert_string_equal(last_arg(maker), gan);
            assert_string_equal(gq->args[4], gsinv); /* then gq_red's target: none here */
            assert_string_equal(last_arg(gq), "null");
            assert_string_equal(last_arg(bias), gsinv);
            if (half) {
                assert_int_equal(strncmp(gan, "ws:", 3), 0);
                assert_int_equal(strncmp(gsinv, "ws:", 3), 0);
                assert_string_not_equal(gan, gsinv);
                assert_non_null(strstr(p.source, "constexpr bool GS_HALF = 1;"));
                assert_non_null(strstr(p.source, ", true, unsigned short, RED_LD, PAIR>(")); /* ..., TC, fp16 B */
            } else {
                assert_string_equal(gan, "null");
                assert_string_equal(gsinv, "null");
                assert_non_null(strstr(p.source, "constexpr bool GS_HALF = 0;"));
                assert_null(strstr(p.source, "unsigned short, RED_LD, PAIR>("));
            }
            ws[mode] = p.workspace_bytes;
            kernel_plan_free(&p);
        }
        /* gS's region halves; gan and gsinv (B*16*T and B*16*NJ floats, each rounded up to 256 bytes) come in. */
        const size_t saved = (size_t)(B * 16 * T * ld * 2), added = (size_t)(B * 16 * (T + NJ) * 4) + 3 * 256;
        assert_true(ws[1] < ws[0] && ws[0] - ws[1] + added >= saved && ws[2] == ws[0]);
    }
    gen_close(g);
}

/* gs_round=1: the wgmma pass stores gS rounded to TF32 and gQ's wgmma
 * product reads it as stored (no rounding pass: B_RAW 0); gs_round=0 (the
 * heuristic's): gS as computed, rounded by gQ (B_RAW 1). */
static void gs_round_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {32, 773}};
    for (size_t i = 0; i < 2; ++i)
        for (int round = 0; round <= 1; ++round) {
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
            kernel_plan p;
            assert_int_equal(gen_plan(g, &s, "sm_90", round ? "gs_round=1" : NULL, &p), ATTNBWD_OK);
            assert_non_null(strstr(p.source, round ? "constexpr bool GS_ROUND = 1;" : "constexpr bool GS_ROUND = 0;"));
            const char *gq = strstr(p.source, "_grad_query(");
            assert_non_null(gq);
            const char *call = strstr(gq, "tc::gemm_wg<");
            assert_non_null(call);
            assert_int_equal(template_arg(call, 10), !round); /* B_RAW */
            kernel_plan_free(&p);
        }
    gen_close(g);
}

/* gq_tma=1: gQ TMA-fed and persistent, one block a tile of gq_bn rows of one
 * head's gS up to one an SM, its two tensor maps (gS over its padded rows,
 * k as [B*16*T, 64]) and shared memory within the H200's; gS rounded by it
 * (A_ROUND) unless the pass stored it rounded (gs_round=1). With gS in fp16
 * (gs_half=1) gQ stays the batched wgmma product. */
static void gq_tma_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {32, 773}, {2, 17}};
    const char *tiles[] = {"gq_tma=1 gs_direct=0", "gq_tma=1 gs_round=1 gs_direct=0", "gq_tma=1 gs_half=1"};
    for (size_t i = 0; i < 3; ++i)
        for (size_t v = 0; v < 3; ++v) {
            const int64_t B = shapes[i][0], T = shapes[i][1], ld = (T + 3) / 4 * 4;
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
            kernel_plan p;
            assert_int_equal(gen_plan(g, &s, "sm_90", tiles[v], &p), ATTNBWD_OK);
            const plan_launch *gq = launch_named(&p, "_grad_query");
            assert_non_null(gq);
            if (v == 2) {
                assert_null(strstr(p.source, "namespace gq {"));
                assert_int_equal(gq->n_args, 6); /* the batched product's */
                kernel_plan_free(&p);
                continue;
            }
            const long bm = tile(p.tiles, "gq_bn"), tiles_n = B * 16 * ((T + bm - 1) / bm);
            assert_int_equal(gq->grid[0], tiles_n < 132 ? tiles_n : 132);
            assert_int_equal(gq->grid[1] * gq->grid[2], 1);
            assert_int_equal(gq->block[0], 128 + bm / 64 * 128);
            assert_true(gq->shared_bytes <= 227 * 1024 && gq->shared_bytes > 150 * 1024);
            assert_int_equal(gq->n_args, 4);
            char map[128];
            snprintf(map, sizeof map, "tmap:%lld:%lld:%lld:%ld:32:1:", (long long)(B * 16 * T), (long long)T,
                     (long long)ld, bm);
            assert_int_equal(strncmp(gq->args[0], map, strlen(map)), 0);
            snprintf(map, sizeof map, "tmap:%lld:64:64:32:64:0:in:key", (long long)(B * 16 * T));
            assert_string_equal(gq->args[1], map);
            assert_string_equal(gq->args[3], "f32:scale");
            assert_non_null(strstr(p.source, v == 1 ? "constexpr bool A_ROUND = 0;" : "constexpr bool A_ROUND = 1;"));
            kernel_plan_free(&p);
        }
    gen_close(g);
}

/* ga_tma=2: gA as gA^T = out_weight^T @ grad_output^T on TMA-fed tiles, out_weight
 * A stored [K, M] (TA) and grad_output B read where it lies, rounded in place
 * (B_ROUND), the result stored transposed as gA (C_T, a K slice's rows 1024
 * floats apart): no transpose launch before it; its reduce makes the row dots
 * where K is split, else a rowdot launch follows. */
static void ga_tma2_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {2, 352}, {64, 128}, {1, 1}};
    for (size_t i = 0; i < 4; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1];
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
        kernel_plan p;
        assert_int_equal(gen_plan(g, &s, "sm_90", "ga_tma=2", &p), ATTNBWD_OK);
        const plan_launch *ga = launch_named(&p, "_grad_attn_out");
        assert_non_null(ga);
        assert_int_equal(ga->n_args, 5);
        char map[96];
        snprintf(map, sizeof map, "tmap:1024:1024:1024:32:128:0:in:out_weight");
        assert_string_equal(ga->args[0], map);
        snprintf(map, sizeof map, "tmap:%lld:1024:1024:", (long long)(B * T));
        assert_int_equal(strncmp(ga->args[1], map, strlen(map)), 0);
        assert_non_null(strstr(ga->args[1], ":1:in:grad_output"));
        const char *src = strstr(p.source, "_grad_attn_out(");
        assert_non_null(src);
        const char *call = strstr(src, "tc::gemm_tma<");
        assert_non_null(call);
        assert_int_equal(template_arg(call, 0), 1024);      /* M: gA^T's rows */
        assert_int_equal(template_arg(call, 1), B * T);     /* N */
        assert_int_equal(template_arg(call, 3), 1);         /* TA */
        assert_int_equal(template_arg(call, 11), 1);        /* B_ROUND */
        assert_int_equal(template_arg(call, 12), 1);        /* C_T */
        for (int l = 0; ga != &p.launches[l]; ++l) assert_null(strstr(p.launches[l].name, "_transpose"));
        const int split = ga->grid[2] > 1;
        assert_true(split ? launch_named(&p, "_grad_attn_out_reduce") != NULL : launch_named(&p, "_rowdot") != NULL);
        if (split) assert_int_equal(strncmp(ga->args[2], "ws:", 3), 0);
        else assert_string_equal(ga->args[2], launch_named(&p, "_rowdot")->args[0]); /* gA itself */
        kernel_plan_free(&p);
    }
    gen_close(g);
}

/* gA's launch making the row dots: six arguments, attention_output's map
 * (128-row boxes of 32 columns, swizzled) fifth, the row dots sixth, and
 * ROWDOT_T = T in its gemm_tma call, which it returns. */
static const char *ga_row_dots_call(const kernel_plan *p, const plan_launch *ga, int64_t B, int64_t T) {
    assert_int_equal(ga->n_args, 6);
    char map[96];
    snprintf(map, sizeof map, "tmap:%lld:1024:1024:128:32:1:in:attention_output", (long long)(B * T));
    assert_string_equal(ga->args[4], map);
    const char *src = strstr(p->source, "_grad_attn_out(");
    assert_non_null(src);
    const char *call = strstr(src, "tc::gemm_tma<");
    assert_non_null(call);
    assert_int_equal(template_arg(call, 16), T); /* ROWDOT_T */
    return call;
}

/* Where gA is TMA-fed and unsplit (the heuristic's), its launch makes the
 * row dots (attention_output's map, 128-row boxes of 32 columns, swizzled;
 * the workspace's D, which the pass reads) and no rowdot launch follows;
 * with tma=0 (gA on wgmma, not TMA-fed) a rowdot launch writes the same D
 * from gA. Where gA is split (B=1,T=373) its reduce makes them either way. */
static void ga_row_dots_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{64, 128}, {4, 640}, {16, 211}, {1, 373}};
    for (size_t i = 0; i < 4; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1];
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
        char d[2][64];
        for (int fused = 0; fused <= 1; ++fused) {
            kernel_plan p;
            assert_int_equal(gen_plan(g, &s, "sm_90", fused ? "" : "tma=0", &p), ATTNBWD_OK);
            const plan_launch *ga = launch_named(&p, "_grad_attn_out"), *pass = launch_named(&p, "_attention_wg");
            const plan_launch *rowdot = launch_named(&p, "_rowdot"), *reduce = launch_named(&p, "_grad_attn_out_reduce");
            assert_non_null(ga);
            assert_non_null(pass);
            if (ga->grid[2] > 1) { /* split: the reduce makes them */
                assert_non_null(reduce);
                assert_null(rowdot);
                assert_true(ga->n_args < 6);
                snprintf(d[fused], sizeof d[fused], "%s", reduce->args[3]);
            } else if (fused) {
                assert_null(rowdot);
                ga_row_dots_call(&p, ga, B, T);
                snprintf(d[fused], sizeof d[fused], "%s", ga->args[5]);
            } else {
                assert_non_null(rowdot);
                assert_int_equal(ga->n_args, 4); /* wgmma, not TMA-fed: A, B transposed, C, alpha */
                assert_string_equal(rowdot->args[0], ga->args[2]); /* gA */
                snprintf(d[fused], sizeof d[fused], "%s", rowdot->args[2]);
            }
            assert_string_equal(pass->args[1], d[fused]); /* the pass reads that D */
            assert_int_equal(strncmp(d[fused], "ws:", 3), 0);
            kernel_plan_free(&p);
        }
        assert_string_equal(d[0], d[1]);
    }
    gen_close(g);
}

/* fp16 on sm_90 (gA TMA-fed and unsplit on fp16 operands): a rowdot launch
 * makes the row dots by default; with ga_dots=1 gA's launch makes them
 * (attention_output's map, raw A tiles: RAW = 2, ROWDOT_T = T, fp16
 * operands) and none follows, the pass reading the same D either way. */
static void fp16_ga_dots_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{64, 128}, {2, 449}, {32, 773}};
    for (size_t i = 0; i < 3; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1];
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, ATTNBWD_PRECISION_FP16};
        char d[2][64];
        for (int dots = 0; dots <= 1; ++dots) {
            kernel_plan p;
            assert_int_equal(gen_plan(g, &s, "sm_90", dots ? "ga_dots=1" : "", &p), ATTNBWD_OK);
            const plan_launch *ga = launch_named(&p, "_grad_attn_out"), *pass = launch_named(&p, "_attention_wg");
            const plan_launch *rowdot = launch_named(&p, "_rowdot");
            assert_non_null(ga);
            assert_non_null(pass);
            assert_int_equal(ga->grid[2], 1);
            assert_int_equal(strncmp(ga->args[0], "tmap:", 5), 0);
            if (dots) {
                assert_null(rowdot);
                const char *call = ga_row_dots_call(&p, ga, B, T);
                snprintf(d[dots], sizeof d[dots], "%s", ga->args[5]);
                assert_int_equal(template_arg(call, 7), 2); /* RAW */
                const char *end = strstr(call, ">(");
                const char *f16 = strstr(call, "tma_operands::f16");
                assert_true(f16 != NULL && f16 < end);
            } else {
                assert_non_null(rowdot);
                assert_int_equal(ga->n_args, 5);
                assert_string_equal(rowdot->args[0], ga->args[2]); /* gA */
                snprintf(d[dots], sizeof d[dots], "%s", rowdot->args[2]);
            }
            assert_string_equal(pass->args[1], d[dots]);
            kernel_plan_free(&p);
        }
        assert_string_equal(d[0], d[1]);
    }
    gen_close(g);
}

/* The outputs a plan says come out of sums in no fixed order (check's reruns
 * compare those up to the order): exactly the outputs of the TMA-fed
 * products that add their K slices by atomics (splitk_red; output 0
 * grad_hidden_states, 1 grad_qkv_weight, 3 grad_out_weight), and with
 * gs_store=0 also those gQ's atomics reach (0, 1, 2) and
 * grad_edit_region_bias (5); none by default. */
static void unordered_outputs_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 373}, {64, 128}, {8, 200}, {4, 640}};
    const char *tiles[] = {"", "splitk_red=1", "splitk_red=1 pair=0", "gs_store=0"};
    const char *names[] = {"_grad_hidden", "_grad_qkv_weight", "_grad_out_weight"};
    const unsigned bits[] = {0, 1, 3};
    int some = 0;
    for (size_t i = 0; i < 4; ++i)
        for (size_t v = 0; v < 4; ++v) {
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
            kernel_plan p;
            assert_int_equal(gen_plan(g, &s, "sm_90", tiles[v], &p), ATTNBWD_OK);
            unsigned want = strstr(p.tiles, "gs_store=0") ? 1u << 0 | 1u << 1 | 1u << 2 | 1u << 5 : 0u;
            for (int l = 0; l < p.n_launches; ++l) {
                const plan_launch *x = &p.launches[l];
                if (strncmp(x->args[0], "tmap:", 5) || ends_with(x->name, "_reduce")) continue;
                for (int k = 0; k < 3; ++k)
                    if (strstr(x->name, names[k]) && view_product(&p, x, names[k]).red) want |= 1u << bits[k];
            }
            assert_int_equal(p.unordered_outputs, want);
            if (!*tiles[v]) assert_int_equal(p.unordered_outputs, 0);
            some += p.unordered_outputs != 0 && p.unordered_outputs != 0x27u;
            kernel_plan_free(&p);
        }
    assert_true(some >= 2); /* splitk_red made some (not all three everywhere) */
    gen_close(g);
}

/* The public suite's (B, T) (../shared/workloads/sol072_workload.jsonl). */
static const int64_t sol072[][2] = {{64, 128}, {1, 373}, {32, 293}, {4, 640},  {4, 288},   {8, 448},
                                    {64, 256}, {16, 176}, {1, 1024}, {2, 768}, {16, 211}, {1, 853},
                                    {2, 449},  {2, 352},  {32, 773}, {16, 691}};

/* Whether tile strings a and b ("key=value ...", one order) differ only in keys listed in `keys`. */
static int differ_only_in(const char *a, const char *b, const char *const *keys, size_t n_keys) {
    char x[1024], y[1024];
    snprintf(x, sizeof x, "%s", a);
    snprintf(y, sizeof y, "%s", b);
    char *sx = NULL, *sy = NULL;
    char *tx = strtok_r(x, " ", &sx), *ty = strtok_r(y, " ", &sy);
    for (; tx && ty; tx = strtok_r(NULL, " ", &sx), ty = strtok_r(NULL, " ", &sy)) {
        if (!strcmp(tx, ty)) continue;
        size_t klen = strcspn(tx, "=");
        if (klen != strcspn(ty, "=") || strncmp(tx, ty, klen)) return 0; /* not the same key */
        int listed = 0;
        for (size_t k = 0; k < n_keys; ++k) listed |= strlen(keys[k]) == klen && !strncmp(tx, keys[k], klen);
        if (!listed) return 0;
    }
    return !tx && !ty;
}

/* A deterministic context (options.deterministic): every public workload's
 * plan under either shipped table sums no output by float atomics, its tiles
 * the entry's but for the choices that would; an override naming such a
 * choice is refused with the reason, one naming others is laid over as ever. */
static void deterministic_plans(void **state) {
    (void)state;
    static const char *const gpus[] = {"NVIDIA H200", "NVIDIA H100 80GB HBM3"};
    static const char *const modules[] = {"tuning_h200", "tuning_h100"};
    static const char *const atomic_keys[] = {"gs_store", "gq_red", "splitk_red"};
    int took_out = 0;
    for (size_t gi = 0; gi < 2; ++gi) {
        gen_state *loose = open_gen(), *strict = open_gen();
        assert_int_equal(gen_configure(loose, gpus[gi], NULL, 0, modules[gi]), ATTNBWD_OK);
        assert_int_equal(gen_configure(strict, gpus[gi], NULL, 1, modules[gi]), ATTNBWD_OK);
        for (size_t i = 0; i < sizeof sol072 / sizeof sol072[0]; ++i) {
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, sol072[i][0], 16, sol072[i][1], 1, 0};
            kernel_plan a, b;
            assert_int_equal(gen_plan(loose, &s, "sm_90", NULL, &a), ATTNBWD_OK);
            if (gen_plan(strict, &s, "sm_90", NULL, &b) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
            assert_int_equal(b.unordered_outputs, 0);
            if (!differ_only_in(a.tiles, b.tiles, atomic_keys, 3))
                fail_msg("B=%lld T=%lld on the %s: '%s' against '%s'", (long long)s.batch, (long long)s.seq_len,
                         gpus[gi], a.tiles, b.tiles);
            took_out += a.unordered_outputs != 0;
            kernel_plan_free(&a);
            kernel_plan_free(&b);
        }
        gen_close(loose);
        gen_close(strict);
    }
    assert_true(took_out >= 8); /* the tables' gq_red and splitk_red entries, on both GPUs */

    gen_state *g = open_gen();
    assert_int_equal(gen_configure(g, "", NULL, 1, NULL), ATTNBWD_OK);
    attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, 1, 16, 853, 1, 0};
    kernel_plan p;
    const char *refused[] = {"splitk_red=1", "gq_red=2", "gs_store=0 bj=32"};
    for (size_t i = 0; i < 3; ++i) {
        assert_int_equal(gen_plan(g, &s, "sm_90", refused[i], &p), ATTNBWD_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(attnbwd_last_error(), "context is deterministic"));
    }
    assert_int_equal(gen_plan(g, &s, "sm_90", "bj=32 splitk_red=0", &p), ATTNBWD_OK);
    assert_non_null(strstr(p.tiles, "bj=32"));
    assert_int_equal(p.unordered_outputs, 0);
    kernel_plan_free(&p);
    gen_close(g);
}

/* side_start=2: where gA's B is transposed first on lane 0 (wgmma gA), the
 * side lanes wait for that transpose (check_lanes); where gA reads
 * out_weight as it is (mma.sync at small B*T), the plan is side_start=0's. */
static void side_start2_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{32, 293}, {4, 288}, {2, 768}, {1, 373}};
    for (size_t i = 0; i < 4; ++i) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
        kernel_plan p, q;
        assert_int_equal(gen_plan(g, &s, "sm_90", "side_start=2", &p), ATTNBWD_OK);
        assert_int_equal(gen_plan(g, &s, "sm_90", "side_start=0", &q), ATTNBWD_OK);
        check_lanes(&p);
        const int transposed = strstr(p.launches[0].name, "_transpose") != NULL && p.launches[0].lane == 0;
        assert_int_equal(transposed, i < 3);
        assert_int_equal(p.n_launches, q.n_launches);
        int waits_p = 0, waits_q = 0; /* launches that wait on another lane's signal */
        for (int l = 0; l < p.n_launches; ++l) waits_p += p.launches[l].n_waits, waits_q += q.launches[l].n_waits;
        assert_int_equal(waits_p, waits_q + (transposed ? 2 : 0));
        kernel_plan_free(&p);
        kernel_plan_free(&q);
    }
    gen_close(g);
}

/* pair_dsm=1 (given as tiles: not among the candidates until it has run on
 * a GPU): the pair launch's split products clustered (check_tma_pair), at
 * least one of them where the plan splits, and no reduce launch for them. */
static void pair_dsm_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 17}, {1, 373}, {1, 853}, {2, 768}, {16, 176}, {4, 640}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
        kernel_plan p;
        assert_int_equal(gen_plan(g, &s, "sm_90", "pair_dsm=1", &p), ATTNBWD_OK);
        int pairs = 0;
        for (int l = 0; l < p.n_launches; ++l)
            if (is_pair(&p.launches[l])) {
                check_tma_pair(&p, l, &s);
                assert_non_null(strstr(kernel_head(&p, &p.launches[l]), "__cluster_dims__("));
                pairs++;
            }
        assert_int_equal(pairs, 1);
        assert_null(launch_named(&p, "_grad_hidden_reduce"));
        kernel_plan_free(&p);
    }
    gen_close(g);
}

/* att_kb=3: the pass's blocks of two key blocks and of one in one launch. Where
 * every head's pairs fill whole waves (B=32,T=293: NJ = 5, 1024 pair blocks)
 * each head keeps its pairs and its odd last key block gets a block of one;
 * where the pairs would leave most of a last wave idle (B=4,T=640: 320 pair
 * blocks, 2.4 waves) some heads' key blocks go one a block; where one block a
 * key block still fits one wave (B=1,T=373: 96 blocks) every head does. The
 * kernel renders both organisations and takes the count of paired heads. */
static void att_kb3_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{32, 293}, {4, 640}, {1, 373}, {8, 448}, {1, 17}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1], nj = (T + 63) / 64, heads = 16 * B;
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
        kernel_plan p;
        assert_int_equal(gen_plan(g, &s, "sm_90", "att_kb=3", &p), ATTNBWD_OK);
        check_lanes(&p);
        const plan_launch *pass = launch_named(&p, "_attention_wg");
        assert_non_null(pass);
        const char *at = strstr(p.source, "PAIR_HEADS = ");
        assert_non_null(at);
        const long paired = strtol(at + strlen("PAIR_HEADS = "), NULL, 10);
        assert_in_range(paired, 0, heads);
        /* Paired heads: nj / 2 pairs and (odd nj) their last key block; the others one a key block. */
        assert_int_equal(pass->grid[0], (unsigned)(paired * (nj / 2 + nj % 2) + (heads - paired) * nj));
        assert_int_equal(pass->grid[1], 1);
        if (B == 32 || B == 8) assert_int_equal(paired, heads);
        if (B == 4) assert_in_range(paired, 1, heads - 1);
        if (B == 1 && T == 373) assert_int_equal(paired, 0);
        assert_non_null(strstr(p.source, "rows_block(FW_BLOCK_PARAMS"));
        assert_non_null(strstr(p.source, "keys_block(FW_BLOCK_PARAMS"));
        kernel_plan_free(&p);
    }
    gen_close(g);
}

/* att_wc=1 at B = 1 (gS in place): the pass makes the within/cross partials
 * (WC = 1, into the region within_cross reads, which waits for the pass), no
 * bias_grads or bias_final launch, and the columns of rows < T past the last
 * key block zeroed by bias_zero_cols (none where that block ends at 1024); at
 * B = 2, or without gS in place, no change but the tiles' text. */
static void att_wc_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 17}, {1, 373}, {1, 853}, {1, 1000}, {1, 1024}, {2, 129}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1];
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
        kernel_plan p, q;
        assert_int_equal(gen_plan(g, &s, "sm_90", "att_wc=1", &p), ATTNBWD_OK);
        assert_int_equal(gen_plan(g, &s, "sm_90", "att_wc=0", &q), ATTNBWD_OK);
        check_lanes(&p);
        const plan_launch *pass = launch_named(&p, "_attention_wg"), *wc = launch_named(&p, "_within_cross"),
                          *cols = launch_named(&p, "_bias_zero_cols");
        assert_non_null(pass);
        if (B == 1) {
            assert_non_null(strstr(p.source, "constexpr bool WC = 1;"));
            assert_null(launch_named(&p, "_bias_grads"));
            assert_null(launch_named(&p, "_bias_final"));
            assert_non_null(wc);
            assert_string_equal(wc->args[0], pass->args[14]);
            assert_int_equal(wc->grid[0], 16);
            const int nj = (int)((T + 63) / 64);
            if (64 * nj < 1024) {
                assert_non_null(cols);
                assert_true((uint64_t)cols->grid[0] * 256 * 4 >= (uint64_t)T * (1024 - 64 * nj));
                assert_int_equal(cols->grid[1], 16);
            } else {
                assert_null(cols);
            }
            assert_int_equal(p.n_launches, q.n_launches - 1 + (cols != NULL)); /* bias_grads, bias_final out */
        } else {
            assert_non_null(strstr(p.source, "constexpr bool WC = 0;"));
            assert_null(wc);
            assert_null(cols);
            assert_int_equal(p.n_launches, q.n_launches);
        }
        assert_non_null(strstr(q.source, "constexpr bool WC = 0;"));
        kernel_plan_free(&p);
        kernel_plan_free(&q);
    }
    gen_close(g);
}

/* gq_pair=1 over gq_red's plan p (B > 1): gQ's blocks take two batch rows,
 * one warpgroup each (PAIR = 2, 256 threads, ceil(B/2) blocks a head, the
 * second row's existence tested against B), in twice the shared memory less
 * the alignment's KiB where the stages still fit; the other launches as p's. */
static void gq_pair_plan(gen_state *g, const attnbwd_shape *s, const char *red_tiles, const kernel_plan *p) {
    char tiles[96], want[96];
    snprintf(tiles, sizeof tiles, "%s gq_pair=1", red_tiles);
    kernel_plan q;
    assert_int_equal(gen_plan(g, s, "sm_90", tiles, &q), ATTNBWD_OK);
    const plan_launch *gq = launch_named(&q, "_grad_query"), *gq1 = launch_named(p, "_grad_query");
    const long long B = s->batch, outer = (B + 1) / 2;
    assert_non_null(strstr(q.source, "constexpr int PAIR = 2;"));
    snprintf(want, sizeof want, "RED_LD > 0 ? blockIdx.z %% %lld * PAIR : blockIdx.z / 16", outer);
    assert_non_null(strstr(q.source, want));
    snprintf(want, sizeof want, "two = PAIR == 2 && z1 + 1 < %lld;", B);
    assert_non_null(strstr(q.source, want));
    assert_int_equal(gq->grid[0], gq1->grid[0]);
    assert_int_equal(gq->grid[2], 16 * outer);
    assert_int_equal(gq->block[0], 2 * gq1->block[0]);
    assert_true(gq->shared_bytes <= 2 * gq1->shared_bytes - 1024 && gq->shared_bytes <= 227 * 1024);
    if (2 * gq1->shared_bytes - 1024 <= 227 * 1024) assert_int_equal(gq->shared_bytes, 2 * gq1->shared_bytes - 1024);
    assert_int_equal(q.n_launches, p->n_launches);
    for (int i = 0; i < q.n_launches; ++i) {
        assert_string_equal(q.launches[i].name, p->launches[i].name);
        assert_int_equal(q.launches[i].n_waits, p->launches[i].n_waits);
        assert_int_equal(q.launches[i].pdl, p->launches[i].pdl);
    }
    assert_int_equal(q.unordered_outputs, p->unordered_outputs);
    /* gq_stages=3 in 64-row blocks: two blocks fit an SM's 228 KiB (each with
     * its reserved KiB), and ptxas is asked for two; with more stages, one. */
    assert_non_null(strstr(q.source, "* 128 * 2, 1)"));
    snprintf(tiles, sizeof tiles, "%s gq_pair=1 gq_bn=64 gq_stages=3", red_tiles);
    kernel_plan r;
    assert_int_equal(gen_plan(g, s, "sm_90", tiles, &r), ATTNBWD_OK);
    const plan_launch *gq3 = launch_named(&r, "_grad_query");
    assert_true(2 * (gq3->shared_bytes + 1024) <= 228 * 1024);
    assert_non_null(strstr(r.source, "__launch_bounds__(64 / 64 * 128 * 2, 2)"));
    assert_int_equal(gq3->block[0], 256);
    kernel_plan_free(&r);
    kernel_plan_free(&q);
}

/* gq_red=1 and 2: gQ's batched wgmma product adds gS tiles into
 * grad_edit_region_bias (its last argument; RED_LD 1024, its blocks head by
 * head: z1 = blockIdx.z % B); the pass makes the within/cross sums (WC 1,
 * within_cross) and no bias_grads launch reads gS back; that output is
 * listed as unordered. gq_red=1: a side lane zeroes the whole output, and gQ
 * waits for that launch (an event). gq_red=2: the pass stores batch row 0's
 * gS into the output (OUT0, its last argument) and gQ adds rows 1.. (z1 >=
 * 1), the rows past T and the columns past the last key block zeroed beside
 * (bias_zero_rows, bias_zero_cols), and gQ waits on no event: a programmatic
 * launch after the pass. Where gQ is not that product (gq_tma=1, gs_half=1)
 * or gS is the output itself (gs_direct at B = 1), the plan is the one
 * without it. Each mode again with gq_pair=1: gq_pair_plan. */
static void gq_red_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{2, 352}, {32, 773}, {4, 17}, {3, 1000}, {1, 373}, {2, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
        for (int mode = 1; mode <= 2; ++mode) {
            const int64_t B = shapes[i][0], T = shapes[i][1], nj = (T + 63) / 64;
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
            kernel_plan p, q;
            char tiles[64];
            snprintf(tiles, sizeof tiles, "gq_red=%d", mode);
            assert_int_equal(gen_plan(g, &s, "sm_90", tiles, &p), ATTNBWD_OK);
            assert_int_equal(gen_plan(g, &s, "sm_90", "gq_red=0", &q), ATTNBWD_OK);
            check_lanes(&p);
            check_bias_rows(&p, &s);
            if (B == 1) { /* gs_direct: gS is the output already */
                assert_string_equal(strchr(p.source, '\n'), strchr(q.source, '\n'));
                assert_int_equal(p.unordered_outputs, 0);
            } else {
                const plan_launch *gq = launch_named(&p, "_grad_query"), *gq0 = launch_named(&q, "_grad_query"),
                                  *pass = launch_named(&p, "_attention_wg");
                assert_string_equal(last_arg(gq), "out:grad_edit_region_bias");
                assert_string_equal(last_arg(gq0), "null");
                assert_string_equal(last_arg(pass), mode == 2 ? "out:grad_edit_region_bias" : "null");
                assert_string_equal(last_arg(launch_named(&q, "_attention_wg")), "null");
                assert_non_null(strstr(p.source, "constexpr long long RED_LD = 1024;"));
                assert_non_null(strstr(q.source, "constexpr long long RED_LD = 0;"));
                char want[96];
                snprintf(want, sizeof want, "RED_LD > 0 ? blockIdx.z %% %lld * PAIR : blockIdx.z / 16", (long long)B);
                assert_non_null(strstr(p.source, want));
                assert_non_null(strstr(p.source, "constexpr int PAIR = 1;"));
                assert_non_null(strstr(p.source, mode == 2 ? "mask = (z1 >= 1)" : "mask = (z1 >= 0)"));
                gq_pair_plan(g, &s, tiles, &p);
                assert_non_null(strstr(p.source, mode == 2 ? "constexpr bool OUT0 = 1;" : "constexpr bool OUT0 = 0;"));
                assert_non_null(strstr(q.source, "constexpr bool OUT0 = 0;"));
                assert_non_null(strstr(p.source, "constexpr bool WC = 1;"));
                assert_non_null(strstr(q.source, "constexpr bool WC = 0;"));
                assert_non_null(launch_named(&p, "_within_cross"));
                assert_null(launch_named(&p, "_bias_grads"));
                assert_non_null(launch_named(&q, "_bias_grads"));
                assert_int_equal(p.unordered_outputs, 1u << 5);
                assert_int_equal(q.unordered_outputs, 0);
                uint64_t before[64];
                happens_before(&p, before);
                const int zero = whole_bias_zero(&p), at = (int)(gq - p.launches);
                if (mode == 1) { /* gQ starts after the output is zeroed, by an event */
                    assert_true(zero >= 0 && (before[at] >> zero & 1));
                    assert_true(gq->n_waits > 0 && !gq->pdl);
                } else { /* nothing to wait for: right after the pass, as without gq_red */
                    assert_int_equal(zero, -1);
                    assert_int_equal(gq->n_waits, 0);
                    assert_int_equal(gq->pdl, gq0->pdl);
                    assert_int_equal(launch_named(&p, "_bias_zero_rows") != NULL, T < 1024);
                    assert_int_equal(launch_named(&p, "_bias_zero_cols") != NULL, 64 * nj < 1024);
                }
            }
            kernel_plan_free(&p);
            kernel_plan_free(&q);
            if (mode == 1) { /* gq_pair=1 changes nothing without gq_red */
                assert_int_equal(gen_plan(g, &s, "sm_90", "gq_pair=1", &p), ATTNBWD_OK);
                assert_int_equal(gen_plan(g, &s, "sm_90", "gq_pair=0", &q), ATTNBWD_OK);
                assert_string_equal(strchr(p.source, '\n'), strchr(q.source, '\n'));
                kernel_plan_free(&p);
                kernel_plan_free(&q);
            }
            const char *off[] = {"gq_tma=1", "gs_half=1"};
            for (int v = 0; v < 2; ++v) {
                char both[160];
                snprintf(both, sizeof both, "%s %s", tiles, off[v]);
                assert_int_equal(gen_plan(g, &s, "sm_90", both, &p), ATTNBWD_OK);
                assert_int_equal(gen_plan(g, &s, "sm_90", off[v], &q), ATTNBWD_OK);
                assert_string_equal(strchr(p.source, '\n'), strchr(q.source, '\n'));
                assert_int_equal(p.unordered_outputs, 0);
                kernel_plan_free(&p);
                kernel_plan_free(&q);
            }
        }
    gen_close(g);
}

/* gs_direct=1 at B = 1: the pass writes gS into grad_edit_region_bias (rows
 * 1024 floats apart, heads 1024 rows apart), gQ reads it there with those
 * strides, the bias sums read it in place (no gs argument), and the
 * workspace has no gS; at B = 2 it changes nothing but the tiles' text.
 * With gq_tma=1, gQ's map is over [16 * 1024, T] rows 1024 apart (GS_ROWS
 * 1024). */
static void gs_direct_plans(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const int64_t shapes[][2] = {{1, 17}, {1, 373}, {1, 1024}, {2, 129}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        const int64_t B = shapes[i][0], T = shapes[i][1];
        size_t ws[2];
        char *src[2];
        for (int direct = 0; direct <= 1; ++direct) {
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, 0};
            kernel_plan p;
            /* att_wc=0: the bias sums read gS in place (att_wc=1 takes them away: att_wc_plans) */
            assert_int_equal(gen_plan(g, &s, "sm_90", direct ? "gs_direct=1 att_wc=0" : "gs_direct=0", &p),
                             ATTNBWD_OK);
            const int on = direct && B == 1;
            const plan_launch *pass = launch_named(&p, "_attention_wg"), *gq = launch_named(&p, "_grad_query"),
                              *bias = launch_named(&p, "_bias_grads");
            assert_non_null(pass);
            assert_non_null(gq);
            assert_non_null(bias);
            const char *gs = pass->args[8];
            assert_string_equal(gq->args[1], gs);
            if (on) {
                assert_string_equal(gs, "out:grad_edit_region_bias");
                assert_string_equal(bias->args[0], "null");
            } else {
                assert_int_equal(strncmp(gs, "ws:", 3), 0);
                assert_string_equal(bias->args[0], gs);
            }
            char want[96];
            snprintf(want, sizeof want, "GS_LD = %lld;", on ? 1024LL : (long long)((T + 3) / 4 * 4));
            assert_non_null(strstr(p.source, want));
            snprintf(want, sizeof want, "constexpr i64 GS_ROWS = %lld;", on ? 1024LL : (long long)T);
            assert_non_null(strstr(p.source, want));
            assert_non_null(strstr(p.source, on ? "constexpr bool kInPlace = 1;" : "constexpr bool kInPlace = 0;"));
            /* gQ's B (gS): its rows' stride, and its batch and head strides */
            kernel_plan q; /* ... and through gq_tma's map */
            assert_int_equal(gen_plan(g, &s, "sm_90", direct ? "gs_direct=1 gq_tma=1" : "gs_direct=0 gq_tma=1", &q),
                             ATTNBWD_OK);
            const plan_launch *qgq = launch_named(&q, "_grad_query");
            snprintf(want, sizeof want, "tmap:%lld:%lld:%lld:", (long long)(B * 16 * (on ? 1024 : T)), (long long)T,
                     on ? 1024LL : (long long)((T + 3) / 4 * 4));
            assert_int_equal(strncmp(qgq->args[0], want, strlen(want)), 0);
            assert_true(ends_with(qgq->args[0], launch_named(&q, "_attention_wg")->args[8])); /* the pass's gS */
            assert_true(!on || ends_with(qgq->args[0], ":out:grad_edit_region_bias"));
            snprintf(want, sizeof want, "GS_ROWS = %lld;", on ? 1024LL : (long long)T);
            assert_non_null(strstr(q.source, want));
            kernel_plan_free(&q);
            const char *call = strstr(strstr(p.source, "_grad_query("), "tc::gemm_wg<");
            assert_non_null(call);
            const long long rows = on ? 1024 : T, ld = on ? 1024 : (T + 3) / 4 * 4;
            assert_int_equal(template_arg(call, 4), ld); /* LDB */
            snprintf(want, sizeof want, "B + z1 * %lld + z0 * %lld,", 16 * rows * ld, rows * ld);
            assert_non_null(strstr(call, want));
            ws[direct] = p.workspace_bytes;
            src[direct] = strdup(p.source);
            kernel_plan_free(&p);
        }
        if (B == 1) assert_true(ws[0] - ws[1] >= (size_t)(16 * T * ((T + 3) / 4 * 4) * 4));
        else assert_true(ws[0] == ws[1] && !strcmp(strchr(src[0], '\n'), strchr(src[1], '\n')));
        free(src[0]);
        free(src[1]);
    }
    gen_close(g);
}

/* Problem 2 on devices with less shared memory than the H200: the heuristic's
 * kernels fit each architecture's per-block limit, and an architecture
 * without the tensor-core instructions is refused with the reason. */
static void edit_attention_fits_smaller_devices(void **state) {
    (void)state;
    gen_state *g = open_gen();
    const struct { const char *arch; unsigned limit; } archs[] = {
        {"sm_80", 163 * 1024}, {"sm_86", 99 * 1024}, {"sm_89", 99 * 1024}, {"sm_90", 227 * 1024}};
    const int64_t shapes[][2] = {{1, 1}, {64, 128}, {1, 373}, {32, 773}, {1, 1024}};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; ++a)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
            attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, shapes[i][0], 16, shapes[i][1], 1, 0};
            kernel_plan p;
            if (gen_plan(g, &s, archs[a].arch, NULL, &p) != ATTNBWD_OK)
                fail_msg("%s B=%lld T=%lld: %s", archs[a].arch, (long long)s.batch, (long long)s.seq_len,
                         attnbwd_last_error());
            const unsigned bj = (unsigned)tile(p.tiles, "bj");
            for (int l = 0; l < p.n_launches; ++l) {
                const char *n = p.launches[l].name;
                const unsigned fixed = strlen(n) > 10 && !strcmp(n + strlen(n) - 10, "_attention") ? 8 * bj + 32 : 64;
                if (p.launches[l].shared_bytes + fixed > archs[a].limit) /* dynamic + static */
                    fail_msg("%s: %s wants %u bytes of shared memory", archs[a].arch, p.launches[l].name,
                             p.launches[l].shared_bytes);
            }
            kernel_plan_free(&p);
        }
    attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, 2, 16, 77, 1, 0};
    kernel_plan p;
    assert_int_equal(gen_plan(g, &s, "sm_75", NULL, &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "sm_80 or newer"));
    /* wgmma is Hopper's: other architectures and other precisions keep mma.sync. */
    for (size_t a = 0; a < 3; ++a) {
        assert_int_equal(gen_plan(g, &s, archs[a].arch, NULL, &p), ATTNBWD_OK);
        assert_non_null(strstr(p.tiles, "wg=0"));
        assert_string_equal(p.compile_arch, "");
        kernel_plan_free(&p);
    }
    assert_int_equal(gen_plan(g, &s, "sm_80", "wg=1", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "wg=1 needs sm_90"));
    /* Programmatic dependent launch is sm_90's: off before it, refused when asked for. */
    assert_int_equal(gen_plan(g, &s, "sm_80", NULL, &p), ATTNBWD_OK);
    assert_int_equal(tile(p.tiles, "pdl"), 0);
    kernel_plan_free(&p);
    assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
    assert_int_equal(tile(p.tiles, "pdl"), 1);
    kernel_plan_free(&p);
    assert_int_equal(gen_plan(g, &s, "sm_86", "pdl=1", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "pdl=1 (programmatic dependent launch) needs sm_90"));
    assert_int_equal(gen_plan(g, &s, "sm_90", "pdl=2", &p), ATTNBWD_OK); /* the early trigger, said in the source */
    assert_non_null(strstr(p.source, "#define ATTNBWD_PDL_EARLY 1"));
    kernel_plan_free(&p);
    assert_int_equal(gen_plan(g, &s, "sm_90", "pdl=3", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    /* The lanes' stream priorities come from the plan: lane 0 the greatest, lane 1 the least, lane 2 at lane_pri. */
    for (int level = 0; level <= 2; ++level) {
        char tiles[32];
        snprintf(tiles, sizeof tiles, "lane_pri=%d", level);
        assert_int_equal(gen_plan(g, &s, "sm_90", tiles, &p), ATTNBWD_OK);
        assert_int_equal(p.n_lanes, 3);
        assert_int_equal(p.lane_priority[0], 2);
        assert_int_equal(p.lane_priority[1], 0);
        assert_int_equal(p.lane_priority[2], level);
        kernel_plan_free(&p);
    }
    assert_int_equal(gen_plan(g, &s, "sm_90", "lane_pri=3", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "lane_pri must be 0, 1 or 2"));
    assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
    assert_int_equal(p.lane_priority[0], 2);
    kernel_plan_free(&p);
    /* gS rows padded to a multiple of 4 floats: the stride every kernel that reads or writes gS is given. */
    char ld[48];
    snprintf(ld, sizeof ld, "GS_LD = %lld;", (long long)((s.seq_len + 3) / 4 * 4));
    assert_int_equal(gen_plan(g, &s, "sm_90", NULL, &p), ATTNBWD_OK);
    assert_non_null(strstr(p.source, ld));
    kernel_plan_free(&p);
    /* Every enumerated key is refused outside its values, with them in the message. */
    static const char *bad[][2] = {{"gq_bn=32", "gq_bn must be 64 or 128"},
                                   {"gemm_bias=3", "gemm_bias must be 0, 1 or 2"},
                                   {"pair=3", "pair must be 0, 1 or 2"},
                                   {"lane0=1", "unknown tile 'lane0'"},
                                   {"precision=3", "precision must be 0, 1 or 2"},
                                   {"bj=48", "bj must be 32 or 64"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        assert_int_equal(gen_plan(g, &s, "sm_90", bad[i][0], &p), ATTNBWD_ERR_INVALID_ARGUMENT);
        if (!strstr(attnbwd_last_error(), bad[i][1])) fail_msg("%s: %s", bad[i][0], attnbwd_last_error());
    }
    attnbwd_shape fp32 = s;
    fp32.precision = ATTNBWD_PRECISION_FP32;
    assert_int_equal(gen_plan(g, &fp32, "sm_90", "wg=1", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "for precision 0 (tf32)"));
    /* bj=64 does not fit sm_86's 99 KiB: refused with the numbers, not left to fail at load. */
    assert_int_equal(gen_plan(g, &s, "sm_86", "bj=64", &p), ATTNBWD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(attnbwd_last_error(), "bytes of shared memory"));
    gen_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(heuristic_is_valid_for_many_shapes),
        cmocka_unit_test(overrides),
        cmocka_unit_test(candidates_are_valid),
        cmocka_unit_test(att_kb3_plans),
        cmocka_unit_test(edit_attention_plans),
        cmocka_unit_test(grad_hidden_truncation_plans),
        cmocka_unit_test(fp16_wgmma_plans),
        cmocka_unit_test(fp16_gq_plans),
        cmocka_unit_test(gs_half_plans),
        cmocka_unit_test(gs_round_plans),
        cmocka_unit_test(gq_tma_plans),
        cmocka_unit_test(ga_tma2_plans),
        cmocka_unit_test(ga_row_dots_plans),
        cmocka_unit_test(side_start2_plans),
        cmocka_unit_test(fp16_ga_dots_plans),
        cmocka_unit_test(unordered_outputs_plans),
        cmocka_unit_test(deterministic_plans),
        cmocka_unit_test(pair_dsm_plans),
        cmocka_unit_test(gs_direct_plans),
        cmocka_unit_test(att_wc_plans),
        cmocka_unit_test(gq_red_plans),
        cmocka_unit_test(edit_attention_fits_smaller_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
