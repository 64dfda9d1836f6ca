/* The launch path without a GPU, through tests/fake_cuda's driver library
 * ($ATTNBWD_LIBCUDA, set by tests/CMakeLists.txt): every kernel of a plan launched
 * with the plan's grid, block and shared memory, on its lanes, joined back
 * to the caller's stream; the second identical call captured into a graph
 * and the third replayed from it; tensor maps the TMA would take; so for
 * every public workload's shipped plan and for the tile choices that change
 * a plan's launches, lanes or waits; and the
 * pointer checks: a buffer too small for the shape, another device's memory,
 * host memory, an output sharing memory with another argument, each refused
 * by name before anything is launched, and asked about once for a set of
 * pointers. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fake_cuda/fake_cuda.h"
#include "internal.h"
#include "suite.h"
#include "test_util.h"

static fake_cuda_hooks fake;

static int find_fake(void **state) {
    (void)state;
    return fake_cuda_hooks_open(&fake);
}

/* A context on the fake's device 0 (an "H200", sm_90), its kernels in the
 * tests' cache (test_kernel_cache: each compiled once for all the tests
 * here), its warnings counted where `counts` is given. */
static attnbwd_ctx *open_ctx_logging(log_counts *counts) {
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.cache_dir = test_kernel_cache();
    o.disk_cache = o.cache_dir != NULL;
    o.log_level = counts ? ATTNBWD_LOG_WARN : ATTNBWD_LOG_QUIET;
    o.log_fn = counts ? test_log : NULL;
    o.log_user = counts;
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(&o, &ctx) != ATTNBWD_OK) fail_msg("attnbwd_open: %s", attnbwd_last_error());
    return ctx;
}

static attnbwd_ctx *open_ctx(void) { return open_ctx_logging(NULL); }

static attnbwd_kernel *edit_kernel(attnbwd_ctx *ctx, int64_t B, int64_t T, const char *tiles) {
    attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, B, 16, T, 1, ATTNBWD_PRECISION_TF32};
    attnbwd_kernel *k = NULL;
    attnbwd_status st = tiles ? attnbwd_get_kernel_tiles(ctx, &s, tiles, &k) : attnbwd_get_kernel(ctx, &s, &k);
    if (st != ATTNBWD_OK) fail_msg("edit kernel B=%lld T=%lld: %s", (long long)B, (long long)T, attnbwd_last_error());
    return k;
}

static float *dev_floats(size_t n) { return fake.alloc(4 * n, FAKE_MEM_DEVICE, 0, 0); }

/* Every buffer of the spec on device 0, exactly its size. */
static attnbwd_edit_attention_args edit_args(const attnbwd_kernel *k) {
    const size_t B = (size_t)k->shape.batch, T = (size_t)k->shape.seq_len;
    attnbwd_edit_attention_args a = {0};
    a.grad_output = dev_floats(B * T * 1024);
    a.hidden_states = dev_floats(B * T * 1024);
    a.edit_region_mask = dev_floats(B * T);
    a.qkv_weight = dev_floats(3072 * 1024);
    a.out_weight = dev_floats(1024 * 1024);
    a.attention_mask = dev_floats(B * T);
    a.query = dev_floats(B * 16 * T * 64);
    a.key = dev_floats(B * 16 * T * 64);
    a.value = dev_floats(B * 16 * T * 64);
    a.attention_probs = dev_floats(B * 16 * T * T);
    a.attention_probs_dropped = dev_floats(B * 16 * T * T);
    a.attention_output = dev_floats(B * T * 1024);
    a.scale = 0.125f;
    a.dropout_p = 0.1f;
    a.grad_hidden_states = dev_floats(B * T * 1024);
    a.grad_qkv_weight = dev_floats(3072 * 1024);
    a.grad_qkv_bias = dev_floats(3072);
    a.grad_out_weight = dev_floats(1024 * 1024);
    a.grad_out_bias = dev_floats(1024);
    a.grad_edit_region_bias = dev_floats(16 * 1024 * 1024);
    a.grad_within_edit_bias = dev_floats(16);
    a.grad_cross_edit_bias = dev_floats(16);
    a.workspace_bytes = attnbwd_edit_attention_workspace(k);
    a.workspace = fake.alloc(a.workspace_bytes, FAKE_MEM_DEVICE, 0, 0);
    return a;
}

/* The recorded launches are the plan's, each once (grid, block, shared
 * memory by name), none captured unless `captured`. */
static void expect_plan_launched(const attnbwd_kernel *k, int captured) {
    const kernel_plan *p = &k->plan;
    assert_int_equal(fake.count("launches"), p->n_launches);
    assert_int_equal(fake.count("captured"), captured ? p->n_launches : 0);
    char *used = calloc((size_t)p->n_launches, 1);
    for (int i = 0; i < p->n_launches; ++i) {
        const fake_launch *l = fake.launch(i);
        int found = -1;
        for (int j = 0; j < p->n_launches && found < 0; ++j)
            if (!used[j] && !strcmp(p->launches[j].name, l->name) && !memcmp(p->launches[j].grid, l->grid, 12) &&
                !memcmp(p->launches[j].block, l->block, 12) && p->launches[j].shared_bytes == l->shared_bytes)
                found = j;
        if (found < 0)
            fail_msg("%s: launch %d (%s, grid %u %u %u, %u bytes) is none of the plan's", p->name, i, l->name,
                     l->grid[0], l->grid[1], l->grid[2], l->shared_bytes);
        used[found] = 1;
        assert_int_equal(l->programmatic, p->launches[found].pdl != 0);
    }
    free(used);
}

/* The recorded launches in plan order, each lane's on a stream of its own:
 * one stream a lane, no stream shared by two lanes. */
static void expect_lanes_on_streams(const attnbwd_kernel *k) {
    const kernel_plan *p = &k->plan;
    void *lane_stream[PLAN_MAX_LANES] = {0};
    int seen[PLAN_MAX_LANES] = {0};
    for (int i = 0; i < p->n_launches; ++i) {
        const fake_launch *l = fake.launch(i);
        const int lane = p->launches[i].lane;
        assert_non_null(l);
        assert_string_equal(l->name, p->launches[i].name);
        if (!seen[lane]) {
            for (int other = 0; other < PLAN_MAX_LANES; ++other)
                if (seen[other] && lane_stream[other] == l->stream)
                    fail_msg("%s: lanes %d and %d on one stream", p->name, other, lane);
            seen[lane] = 1;
            lane_stream[lane] = l->stream;
        }
        if (l->stream != lane_stream[lane]) fail_msg("%s: lane %d on two streams (launch %d)", p->name, lane, i);
    }
}

/* Each plan launched whole on its lanes: at a small odd T, at a public
 * workload with its tuning entry, past 2^31 elements of P (B*16*T^2), and
 * with the pair's K slices added across clusters. */
static void edit_plans_launch_whole(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    const struct {
        int64_t B, T;
        const char *tiles;
    } cases[] = {{2, 17, NULL}, {4, 288, NULL}, {129, 1021, NULL}, {8, 448, "pair_dsm=1"}, {1, 1, NULL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        attnbwd_kernel *k = edit_kernel(ctx, cases[c].B, cases[c].T, cases[c].tiles);
        attnbwd_edit_attention_args a = edit_args(k);
        fake.reset();
        if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK)
            fail_msg("B=%lld T=%lld: %s", (long long)cases[c].B, (long long)cases[c].T, attnbwd_last_error());
        expect_plan_launched(k, 0);
        expect_lanes_on_streams(k);
        assert_true(fake.count("params") > 2 * k->plan.n_launches); /* the kernels' parameters found and read */
        assert_true(k->plan.n_lanes > 1);
        assert_true(fake.count("tensor_maps") > (cases[c].T > 1 ? 0 : -1));
    }
    attnbwd_close(ctx);
}

/* fp16 plans, their projection products on gemm_tma's fp16 operands (B in
 * fp16, its tensor maps over pairs of halves), launched whole: every tensor
 * map accepted by the fake's checks of cuTensorMapEncodeTiled. */
static void fp16_plans_launch_whole(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    const int64_t cases[][2] = {{2, 17}, {1, 373}};
    for (size_t c = 0; c < 2; ++c) {
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, cases[c][0], 16, cases[c][1], 1, ATTNBWD_PRECISION_FP16};
        attnbwd_kernel *k = NULL;
        if (attnbwd_get_kernel_tiles(ctx, &s, "wg=1 tma=1", &k) != ATTNBWD_OK) fail_msg("fp16 kernel: %s", attnbwd_last_error());
        assert_non_null(strstr(k->plan.tiles, " wg=1"));
        attnbwd_edit_attention_args a = edit_args(k);
        fake.reset();
        if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK)
            fail_msg("fp16 B=%lld T=%lld: %s", (long long)cases[c][0], (long long)cases[c][1], attnbwd_last_error());
        expect_plan_launched(k, 0);
        assert_true(fake.count("tensor_maps") > 0);
    }
    attnbwd_close(ctx);
}

/* Runs a kernel twice: launched directly on its lanes, then captured (every
 * lane joined back, else the fake's capture fails) and replayed. */
static void launch_direct_then_graph(attnbwd_kernel *k) {
    attnbwd_edit_attention_args a = edit_args(k);
    fake.reset();
    if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK) fail_msg("%s: %s", k->plan.tiles, attnbwd_last_error());
    expect_plan_launched(k, 0);
    expect_lanes_on_streams(k);
    fake.reset();
    if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK) fail_msg("%s: %s", k->plan.tiles, attnbwd_last_error());
    expect_plan_launched(k, 1);
    assert_int_equal(fake.count("graph_launches"), 1);
}

/* Every public workload's plan as shipped (the H200's tuning entries). */
static void public_plans_launch_and_capture(void **state) {
    (void)state;
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load("sol072_workload", &cases, &n) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    assert_int_equal(n, 16);
    attnbwd_shape shapes[16];
    for (size_t i = 0; i < n; ++i) shapes[i] = cases[i].shape;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_prewarm_summary sum;
    if (attnbwd_prewarm(ctx, shapes, n, 0, NULL, NULL, &sum) != ATTNBWD_OK) fail_msg("prewarm: %s", attnbwd_last_error());
    for (size_t i = 0; i < n; ++i) {
        attnbwd_kernel *k = NULL;
        assert_int_equal(attnbwd_get_kernel(ctx, &shapes[i], &k), ATTNBWD_OK);
        launch_direct_then_graph(k);
    }
    attnbwd_close(ctx);
    free(cases);
}

/* The tile choices that change a plan's launches, lanes or waits, each
 * built (two threads) and run as above. */
static const struct {
    int64_t B, T;
    const char *tiles;
} variants[] = {
    {2, 352, "pair=0"},       {2, 352, "pair=2"},       {2, 352, "pair_kv=1"},    {2, 352, "pair_dsm=1"},
    {2, 352, "splitk_red=1"}, {2, 352, "gs_store=0"},   {2, 352, "gs_half=1"},    {2, 352, "gq_tma=1 gs_round=1"},
    {2, 352, "ga_tma=2"},     {2, 352, "side_start=1"}, {2, 352, "zero_early=0"}, {2, 352, "gemm_bias=0"},
    {2, 352, "wg=0"},         {2, 352, "pdl=2"},
    {2, 768, "side_start=2"}, {1, 373, "gs_direct=0"},
    {1, 373, "att_wc=1"},     {1, 1024, "att_wc=1"},
    {2, 352, "fused=0 wg=0 kv_split=0 p_stages=0 wg_att=0 wg_gq=0"},
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct variant_job {
    attnbwd_ctx *ctx;
    attnbwd_kernel *k[N_VARIANTS];
    char why[N_VARIANTS][256];
    size_t next;
    pthread_mutex_t mu;
} variant_job;

static void *build_variants(void *arg) {
    variant_job *job = arg;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        size_t i = job->next++;
        pthread_mutex_unlock(&job->mu);
        if (i >= N_VARIANTS) return NULL;
        attnbwd_shape s = {ATTNBWD_EDIT_ATTENTION_BWD, variants[i].B, 16, variants[i].T, 1, ATTNBWD_PRECISION_TF32};
        if (attnbwd_get_kernel_tiles(job->ctx, &s, variants[i].tiles, &job->k[i]) != ATTNBWD_OK)
            snprintf(job->why[i], sizeof job->why[i], "%s", attnbwd_last_error());
    }
}

static void variant_plans_launch_and_capture(void **state) {
    (void)state;
    variant_job *job = calloc(1, sizeof *job);
    job->ctx = open_ctx();
    pthread_mutex_init(&job->mu, NULL);
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&t[i], NULL, build_variants, job), 0);
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
    for (size_t i = 0; i < N_VARIANTS; ++i) {
        if (!job->k[i])
            fail_msg("B=%lld T=%lld %s: %s", (long long)variants[i].B, (long long)variants[i].T, variants[i].tiles,
                     job->why[i]);
        launch_direct_then_graph(job->k[i]);
    }
    attnbwd_close(job->ctx);
    pthread_mutex_destroy(&job->mu);
    free(job);
}

/* The first call runs the plan, the second captures it (its launches into
 * the graph, every lane joined back, else the capture fails) and replays it,
 * later ones only replay. The pointers are asked about once. */
static void repeated_calls_replay_a_graph(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    attnbwd_edit_attention_args a = edit_args(k);
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 0);
    const long queries = fake.count("pointer_queries");
    assert_int_equal(queries, 21); /* the 20 buffers read or written and the workspace */
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 1);
    assert_int_equal(fake.count("graph_launches"), 1);
    fake.reset();
    for (int i = 0; i < 3; ++i) assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    assert_int_equal(fake.count("launches"), 0);
    assert_int_equal(fake.count("graph_launches"), 3);
    assert_int_equal(fake.count("pointer_queries"), 0);
    /* New pointers: checked again, launched directly. */
    attnbwd_edit_attention_args b = a;
    b.grad_hidden_states = dev_floats(2 * 17 * 1024);
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &b, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 0);
    assert_int_equal(fake.count("pointer_queries"), queries);
    attnbwd_close(ctx);
}

/* The caller's stream, made as the CUDA runtime would (in the primary
 * context, made current), its capture begun. */
static void *begin_caller_capture(void) {
    void *primary = NULL, *stream = NULL;
    assert_int_equal(fake.primary_retain(&primary, 0), 0);
    assert_int_equal(fake.push(primary), 0);
    assert_int_equal(fake.stream_create(&stream, 1, 0), 0);
    assert_int_equal(fake.begin_capture(stream, 0), 0);
    return stream;
}

/* Its capture ended: the driver's status, 0 where every stream that joined
 * it was joined back. */
static int end_caller_capture(void *stream) {
    void *graph = NULL, *primary = NULL;
    const int r = fake.end_capture(stream, &graph);
    assert_int_equal(fake.pop(&primary), 0);
    free(graph);
    free(stream);
    return r;
}

/* While the caller's stream is being captured, the plan goes into the
 * caller's graph: no graph of ours, and the capture survives the pointer
 * checks. */
static void callers_capture_takes_the_launches(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    attnbwd_edit_attention_args a = edit_args(k);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK); /* the module and lanes made */
    void *stream = begin_caller_capture();
    fake.reset();
    /* The second with a new output: its pointers are checked inside the
     * caller's capture, which must not lose it (the fake ends a capture
     * that a pointer query is made in, unless in the relaxed mode). */
    attnbwd_edit_attention_args b = a;
    b.grad_hidden_states = dev_floats(2 * 17 * 1024);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, stream), ATTNBWD_OK);
    if (attnbwd_edit_attention_bwd(k, &b, stream) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    assert_int_equal(end_caller_capture(stream), 0); /* every lane joined back to the caller's stream */
    assert_int_equal(fake.count("launches"), 2 * k->plan.n_launches);
    assert_int_equal(fake.count("captured"), 2 * k->plan.n_launches);
    assert_int_equal(fake.count("graph_launches"), 0);
    attnbwd_close(ctx);
}

/* A launch failing mid-plan: the call names the kernel and the driver's
 * error, every lane is still joined back to the caller's stream (the
 * caller's capture around it ends), and the next call runs whole. */
static void failed_launch_mid_plan(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    attnbwd_edit_attention_args a = edit_args(k);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    void *stream = begin_caller_capture();
    fake.reset();
    fake.fail_next("launch", 4);
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, stream), ATTNBWD_ERR_CUDA, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    char expected[300];
    snprintf(expected, sizeof expected, "launching %s", k->plan.launches[4].name);
    assert_non_null(strstr(attnbwd_last_error(), expected));
    assert_int_equal(fake.count("launches"), 4);
    assert_int_equal(end_caller_capture(stream), 0);
    fake.reset(); /* the arguments of the call before: captured into the kernel's graph and replayed */
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 1);
    assert_int_equal(fake.count("graph_launches"), 1);
    attnbwd_close(ctx);
}

/* A launch's argument specs are parsed once, as the module loads: a spec
 * with anything past its number, a negative workspace offset, an empty
 * number, a tensor map over a scalar or an unknown name is refused naming
 * the launch and the spec, before anything is launched; once loaded, the
 * launches read the parsed arguments, not the specs' text. */
static void malformed_arguments_refused_at_load(void **state) {
    (void)state;
    const char *bad[] = {"i32:12x", "i64:", "ws:-4", "i32:4294967296", "tmap:8:8:8:8:8:0:f32:scale",
                         "in:no_such_field", "f32:zero"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        attnbwd_ctx *ctx = open_ctx();
        attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
        attnbwd_edit_attention_args a = edit_args(k);
        plan_launch *l = &k->plan.launches[k->plan.n_launches - 1];
        assert_true(l->n_args > 0);
        free(l->args[0]);
        l->args[0] = strdup(bad[i]);
        fake.reset();
        EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_LUA, bad[i]);
        assert_non_null(strstr(attnbwd_last_error(), l->name));
        assert_int_equal(fake.count("launches"), 0);
        attnbwd_close(ctx);
    }
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    attnbwd_edit_attention_args a = edit_args(k);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    for (int i = 0; i < k->plan.n_launches; ++i)
        for (int j = 0; j < k->plan.launches[i].n_args; ++j) k->plan.launches[i].args[j][0] = '?';
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 1);
    attnbwd_close(ctx);
}

/* A graph the driver will not make: one warning, and the kernel's calls go
 * on launching directly. A module that fails to load: an error naming the
 * kernel, and the next call loads it. */
static void driver_failures_are_reported(void **state) {
    (void)state;
    log_counts lc = {0};
    attnbwd_ctx *ctx = open_ctx_logging(&lc);
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    attnbwd_edit_attention_args a = edit_args(k);
    fake.fail_next("module_load", 0);
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_CUDA, "cuModuleLoadData");
    assert_non_null(strstr(attnbwd_last_error(), k->plan.name));
    assert_non_null(strstr(attnbwd_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    expect_plan_launched(k, 0);
    fake.reset();
    fake.fail_next("instantiate", 0);
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK); /* captured, not instantiated: direct */
    assert_int_equal(fake.count("launches"), 2 * k->plan.n_launches);
    assert_int_equal(lc.warn, 1);
    assert_non_null(strstr(lc.last, "no CUDA graph"));
    fake.reset();
    for (int i = 0; i < 2; ++i) assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    assert_int_equal(fake.count("launches"), 2 * k->plan.n_launches);
    assert_int_equal(fake.count("captured"), 0);
    assert_int_equal(fake.count("graph_launches"), 0);
    assert_int_equal(lc.warn, 1);
    attnbwd_close(ctx);
}

/* Four threads calling one kernel of each problem at once, each with its
 * own buffers: every call succeeds, and every one is launched whole, or
 * replayed (problem 2's graph), exactly once. */
typedef struct caller {
    attnbwd_kernel *edit, *softmax;
    attnbwd_edit_attention_args a;
    float *go, *p, *gs[2];
    uint8_t *mask, *dm;
    int failed;
} caller;

enum { CALLERS = 4, CALLS = 25 };

static void *call_repeatedly(void *arg) {
    caller *c = arg;
    for (int i = 0; i < CALLS; ++i) {
        c->failed |= attnbwd_edit_attention_bwd(c->edit, &c->a, NULL) != ATTNBWD_OK;
        for (int j = 0; j < 4; ++j) /* two sets of pointers in turn: a check of a new set each call */
            c->failed |= attnbwd_softmax_dropout_bwd(c->softmax, c->go, c->p, c->mask, c->dm, 0.1f, c->gs[j % 2],
                                                     NULL) != ATTNBWD_OK;
    }
    return NULL;
}

static void threads_share_kernels(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *edit = edit_kernel(ctx, 2, 17, NULL), *softmax = NULL;
    attnbwd_shape s = {ATTNBWD_SOFTMAX_DROPOUT_BWD, 2, 4, 64, 1, 0};
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &softmax), ATTNBWD_OK);
    const size_t e = 2 * 4 * 64 * 64;
    caller c[CALLERS];
    for (int i = 0; i < CALLERS; ++i) {
        c[i] = (caller){.edit = edit, .softmax = softmax, .a = edit_args(edit), .go = dev_floats(e), .p = dev_floats(e),
                        .gs = {dev_floats(e), dev_floats(e)}, .mask = fake.alloc(2 * 64 * 64, FAKE_MEM_DEVICE, 0, 0),
                        .dm = fake.alloc(e, FAKE_MEM_DEVICE, 0, 0)};
    }
    fake.reset();
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; ++i) assert_int_equal(pthread_create(&t[i], NULL, call_repeatedly, &c[i]), 0);
    for (int i = 0; i < CALLERS; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < CALLERS; ++i) assert_false(c[i].failed);
    const long n = edit->plan.n_launches, launches = fake.count("launches"), captured = fake.count("captured");
    const long softmax_launches = CALLERS * CALLS * 4, edit_launches = launches - softmax_launches;
    assert_int_equal(captured % n, 0);
    assert_int_equal((edit_launches - captured) % n, 0);
    assert_int_equal((edit_launches - captured) / n + fake.count("graph_launches"), CALLERS * CALLS);
    attnbwd_close(ctx);
}

/* A context opened with the default options where the calling thread has
 * device 1's context current (cudaSetDevice(1), a PyTorch rank 1) runs on
 * device 1, and takes that device's memory; with none current, device 0. */
static void default_device_is_the_current_one(void **state) {
    (void)state;
    void *primary = NULL;
    assert_int_equal(fake.primary_retain(&primary, 1), 0);
    assert_int_equal(fake.push(primary), 0);
    attnbwd_ctx *ctx = open_ctx();
    assert_int_equal(fake.pop(&primary), 0);
    attnbwd_ctx_info info;
    assert_int_equal(attnbwd_ctx_get_info(ctx, &info), ATTNBWD_OK);
    assert_int_equal(info.device, 1);
    attnbwd_shape s = {ATTNBWD_SOFTMAX_DROPOUT_BWD, 1, 2, 32, 0, 0};
    attnbwd_kernel *k = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_OK);
    const size_t n = 2 * 32 * 32;
    float *go = fake.alloc(4 * n, FAKE_MEM_DEVICE, 1, 0), *p = fake.alloc(4 * n, FAKE_MEM_DEVICE, 1, 0),
          *gs = fake.alloc(4 * n, FAKE_MEM_DEVICE, 1, 0);
    uint8_t *mask = fake.alloc(32 * 32, FAKE_MEM_DEVICE, 1, 0);
    assert_int_equal(attnbwd_softmax_dropout_bwd(k, go, p, mask, NULL, 0.0f, gs, NULL), ATTNBWD_OK);
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k, dev_floats(n), p, mask, NULL, 0.0f, gs, NULL),
                  ATTNBWD_ERR_INVALID_ARGUMENT, "is memory of device 0; this context runs its kernels on device 1");
    attnbwd_close(ctx);
    ctx = open_ctx();
    assert_int_equal(attnbwd_ctx_get_info(ctx, &info), ATTNBWD_OK);
    assert_int_equal(info.device, 0);
    attnbwd_close(ctx);
}

/* Each wrong buffer refused by name, before any launch. */
static void edit_pointers_checked(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    const attnbwd_edit_attention_args good = edit_args(k);
    attnbwd_edit_attention_args a = good;
    fake.reset();
    a.attention_probs = dev_floats(2 * 16 * 17 * 17 - 1);
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "args->attention_probs");
    assert_non_null(strstr(attnbwd_last_error(), "read 36992 bytes from there (B=2, T=17)"));
    assert_non_null(strstr(attnbwd_last_error(), "is the shape right?"));
    a = good;
    a.grad_hidden_states = (float *)((char *)good.grad_hidden_states + 16); /* 16 bytes past its start */
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "the kernels write 139264 bytes");
    a = good;
    a.query = fake.alloc(4 * 2 * 16 * 17 * 64, FAKE_MEM_DEVICE, 1, 0);
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "is memory of device 1; this context runs its kernels on device 0");
    a = good;
    float *host = aligned_alloc(16, 4 * 16);
    a.grad_within_edit_bias = host;
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "args->grad_within_edit_bias");
    assert_non_null(strstr(attnbwd_last_error(), "not memory the GPU can reach"));
    a = good;
    a.grad_hidden_states = (float *)good.hidden_states; /* in place */
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "args->grad_hidden_states");
    assert_non_null(strstr(attnbwd_last_error(), "overlaps args->hidden_states"));
    a = good;
    a.grad_cross_edit_bias = good.grad_within_edit_bias + 8; /* two outputs sharing 8 floats */
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "args->grad_cross_edit_bias");
    a = good;
    a.workspace = (char *)good.grad_edit_region_bias;
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT, "args->workspace");
    assert_int_equal(fake.count("launches"), 0);
    /* Reachable memory of other kinds: managed memory of another device,
     * pinned host memory; and inputs may share memory (P as Pd at p = 0). */
    a = good;
    a.query = fake.alloc(4 * 2 * 16 * 17 * 64, FAKE_MEM_DEVICE, 1, 1);
    a.value = fake.alloc(4 * 2 * 16 * 17 * 64, 0, 0, 1); /* managed, of no kind the driver names */
    a.out_weight = fake.alloc(4 * 1024 * 1024, 4, 0, 0); /* CU_MEMORYTYPE_UNIFIED */
    a.key = fake.alloc(4 * 2 * 16 * 17 * 64, FAKE_MEM_HOST, 0, 0);
    a.attention_probs_dropped = a.attention_probs;
    if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    expect_plan_launched(k, 0);
    attnbwd_close(ctx);

    /* Where the device reads pageable memory, host memory is fine. */
    fake.set("pageable_access", 1);
    ctx = open_ctx();
    k = edit_kernel(ctx, 2, 17, NULL);
    a = edit_args(k);
    a.grad_within_edit_bias = host;
    fake.reset();
    if (attnbwd_edit_attention_bwd(k, &a, NULL) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    expect_plan_launched(k, 0);
    attnbwd_close(ctx);
    fake.set("pageable_access", 0);

    /* ATTNBWD_POINTER_CHECKS=0: the driver is not asked; overlaps are still refused. */
    setenv("ATTNBWD_POINTER_CHECKS", "0", 1);
    ctx = open_ctx();
    unsetenv("ATTNBWD_POINTER_CHECKS");
    k = edit_kernel(ctx, 2, 17, NULL);
    a = edit_args(k);
    a.grad_within_edit_bias = host;
    fake.reset();
    assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    assert_int_equal(fake.count("pointer_queries"), 0);
    a.grad_hidden_states = (float *)a.grad_output;
    EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_INVALID_ARGUMENT, "overlaps");
    attnbwd_close(ctx);
    free(host);
}

/* Problem 1: one launch; the same checks, asked about once for a set of pointers. */
static void softmax_pointers_checked(void **state) {
    (void)state;
    attnbwd_ctx *ctx = open_ctx();
    attnbwd_shape s = {ATTNBWD_SOFTMAX_DROPOUT_BWD, 2, 4, 64, 1, 0};
    attnbwd_kernel *k = NULL;
    assert_int_equal(attnbwd_get_kernel(ctx, &s, &k), ATTNBWD_OK);
    const size_t n = 2 * 4 * 64 * 64;
    float *go = dev_floats(n), *p = dev_floats(n), *gs = dev_floats(n);
    uint8_t *mask = fake.alloc(2 * 64 * 64, FAKE_MEM_DEVICE, 0, 0), *dm = fake.alloc(n, FAKE_MEM_DEVICE, 0, 0);
    fake.reset();
    for (int i = 0; i < 3; ++i) assert_int_equal(attnbwd_softmax_dropout_bwd(k, go, p, mask, dm, 0.1f, gs, NULL), ATTNBWD_OK);
    assert_int_equal(fake.count("launches"), 3);
    assert_int_equal(fake.count("pointer_queries"), 5);
    const fake_launch *l = fake.launch(0);
    assert_string_equal(l->name, k->plan.name);
    assert_memory_equal(l->grid, k->plan.grid, 12);
    fake.reset();
    uint8_t *small_mask = fake.alloc(64 * 64, FAKE_MEM_DEVICE, 0, 0); /* [1, 1, T, T]: one batch's */
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k, go, p, small_mask, dm, 0.1f, gs, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "mask");
    assert_non_null(strstr(attnbwd_last_error(), "read 8192 bytes from there (B=2, H=4, T=64)"));
    uint8_t *dm1 = fake.alloc(n, FAKE_MEM_DEVICE, 1, 0);
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k, go, p, mask, dm1, 0.1f, gs, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "dropout_mask");
    EXPECT_STATUS(attnbwd_softmax_dropout_bwd(k, go, p, mask, dm, 0.1f, go, NULL), ATTNBWD_ERR_INVALID_ARGUMENT,
                  "grad_scores");
    assert_non_null(strstr(attnbwd_last_error(), "overlaps grad_output"));
    assert_int_equal(fake.count("launches"), 0);
    attnbwd_close(ctx);
}

/* Problem 1's public workloads and its awkward shapes (T = 1, odd T, T past
 * every suite, past 2^31 elements) each launch once, as planned, within the
 * grid's limits. */
static void softmax_plans_launch(void **state) {
    (void)state;
    suite_case *cases = NULL;
    size_t n = 0;
    if (suite_load("sol066_workload", &cases, &n) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
    const int64_t awkward[][4] = {{1, 1, 1, 0}, {3, 5, 3, 1}, {1, 7, 127, 0}, {1, 2, 1025, 1},
                                  {1, 1, 16384, 1}, {1, 2, 32800, 1}, {7, 9, 61, 1}, {1024, 64, 3, 1}};
    const size_t total = n + sizeof awkward / sizeof awkward[0];
    attnbwd_shape *shapes = calloc(total, sizeof *shapes);
    for (size_t i = 0; i < n; ++i) shapes[i] = cases[i].shape;
    for (size_t i = n; i < total; ++i)
        shapes[i] = test_shape(awkward[i - n][0], awkward[i - n][1], awkward[i - n][2], (int)awkward[i - n][3]);
    attnbwd_ctx *ctx = open_ctx();
    for (size_t i = 0; i < total; ++i) {
        attnbwd_kernel *k = NULL;
        if (attnbwd_get_kernel(ctx, &shapes[i], &k) != ATTNBWD_OK) fail_msg("%s", attnbwd_last_error());
        const size_t B = (size_t)shapes[i].batch, H = (size_t)shapes[i].heads, T = (size_t)shapes[i].seq_len,
                     e = B * H * T * T;
        float *go = dev_floats(e), *p = dev_floats(e), *gs = dev_floats(e);
        uint8_t *mask = fake.alloc(B * T * T, FAKE_MEM_DEVICE, 0, 0), *dm = fake.alloc(e, FAKE_MEM_DEVICE, 0, 0);
        fake.reset();
        const float pd = shapes[i].dropout ? 0.1f : 0.0f;
        if (attnbwd_softmax_dropout_bwd(k, go, p, mask, dm, pd, gs, NULL) != ATTNBWD_OK)
            fail_msg("%s: %s", k->plan.name, attnbwd_last_error());
        assert_int_equal(fake.count("launches"), 1);
        const fake_launch *l = fake.launch(0);
        assert_string_equal(l->name, k->plan.name);
        assert_memory_equal(l->grid, k->plan.grid, sizeof l->grid);
        assert_memory_equal(l->block, k->plan.block, sizeof l->block);
        assert_int_equal(l->shared_bytes, k->plan.shared_bytes);
    }
    attnbwd_close(ctx);
    free(shapes);
    free(cases);
}

/* A function needing more shared memory than the device gives is refused
 * when the module is loaded, with both numbers. */
static void shared_memory_past_the_device(void **state) {
    (void)state;
    fake.set("smem_optin", 100 * 1024);
    attnbwd_ctx *ctx = open_ctx();
    fake.set("smem_optin", 232448);
    attnbwd_kernel *k = edit_kernel(ctx, 2, 17, NULL);
    unsigned most = 0;
    for (int i = 0; i < k->plan.n_launches; ++i)
        if (k->plan.launches[i].shared_bytes > most) most = k->plan.launches[i].shared_bytes;
    attnbwd_edit_attention_args a = edit_args(k);
    fake.reset();
    if (most > 100 * 1024) {
        EXPECT_STATUS(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_ERR_UNSUPPORTED, "the device allows 102400");
        assert_int_equal(fake.count("launches"), 0);
    } else {
        assert_int_equal(attnbwd_edit_attention_bwd(k, &a, NULL), ATTNBWD_OK);
    }
    attnbwd_close(ctx);
}

int main(int argc, char **argv) {
    test_filter(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_plans_launch_whole),
        cmocka_unit_test(fp16_plans_launch_whole),
        cmocka_unit_test(repeated_calls_replay_a_graph),
        cmocka_unit_test(public_plans_launch_and_capture),
        cmocka_unit_test(variant_plans_launch_and_capture),
        cmocka_unit_test(callers_capture_takes_the_launches),
        cmocka_unit_test(threads_share_kernels),
        cmocka_unit_test(failed_launch_mid_plan),
        cmocka_unit_test(malformed_arguments_refused_at_load),
        cmocka_unit_test(driver_failures_are_reported),
        cmocka_unit_test(default_device_is_the_current_one),
        cmocka_unit_test(edit_pointers_checked),
        cmocka_unit_test(softmax_pointers_checked),
        cmocka_unit_test(softmax_plans_launch),
        cmocka_unit_test(shared_memory_past_the_device),
    };
    return cmocka_run_group_tests(tests, find_fake, NULL);
}
