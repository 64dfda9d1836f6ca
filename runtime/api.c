/* The public API's context and kernel life cycle, and the build of one
 * kernel: plan (Lua) -> manifest -> disk cache or NVRTC -> disk cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "internal.h"
#include "nvrtc_compile.h"

#define CACHE_FORMAT 1

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void attnbwd_options_init(attnbwd_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->device = ATTNBWD_DEVICE_CURRENT;
    opt->disk_cache = 1;
    opt->log_level = ATTNBWD_LOG_WARN;
}

static int valid_arch(const char *a) {
    if (strncmp(a, "sm_", 3) != 0 && strncmp(a, "compute_", 8) != 0) return 0;
    const char *d = a + (a[0] == 's' ? 3 : 8);
    int digits = 0;
    while (*d >= '0' && *d <= '9') ++d, ++digits;
    return digits >= 2 && digits <= 3 && (*d == '\0' || ((*d == 'a' || *d == 'f') && d[1] == '\0'));
}

/* Which tuning table is in effect, for `attnbwd info`: the user's (its
 * path), or the built-in ones and why not the user's. */
static void note_tuning(attnbwd_ctx *ctx, const char *model) {
    const tuning_file *t = &ctx->tuning;
    if (t->rejected[0])
        snprintf(ctx->tuning_note, sizeof ctx->tuning_note, "built-in (rejected: %.900s)", t->rejected);
    else if (!t->path[0])
        snprintf(ctx->tuning_note, sizeof ctx->tuning_note, "built-in");
    else if (strcmp(t->gpu, model) != 0)
        snprintf(ctx->tuning_note, sizeof ctx->tuning_note, "built-in (%.700s is for %.100s, not %.100s)", t->path,
                 t->gpu, model[0] ? model : "this target (no GPU model)");
    else
        snprintf(ctx->tuning_note, sizeof ctx->tuning_note, "%.800s (for %.127s)", t->path, t->gpu);
}

/* A cubin read from the disk cache, checked before it is used (cache.h). */
static const char *check_cached_cubin(const void *payload, size_t len, void *user) {
    const attnbwd_ctx *ctx = user;
    return cubin_check(payload, len, ctx->arch);
}

/* The GPU model the tuning tables are matched against: the device's, or
 * $ATTNBWD_GPU_MODEL when compiling for another machine (prewarm for sm_90
 * on a build host gets the same kernels as the H200 will ask for). */
static attnbwd_status configure_tuning(attnbwd_ctx *ctx) {
    const char *model = getenv("ATTNBWD_GPU_MODEL");
    if (!model || !*model) model = ctx->have_device ? ctx->dev.name : "";
    char *user = tuning_file_read(&ctx->cache, &ctx->log, &ctx->tuning);
    attnbwd_status s = gen_configure(ctx->gen, model, user, ctx->deterministic);
    free(user);
    note_tuning(ctx, model);
    return s;
}

attnbwd_status attnbwd_open(const attnbwd_options *opt_in, attnbwd_ctx **out) {
    err_clear();
    if (!out) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "attnbwd_open: out is NULL");
    *out = NULL;
    attnbwd_options opt;
    if (opt_in) opt = *opt_in;
    else attnbwd_options_init(&opt);
    if (opt.arch && (!valid_arch(opt.arch) || strlen(opt.arch) >= 16))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.arch = \"%s\": expected an architecture such as \"sm_90\"", opt.arch);
    if (opt.device < ATTNBWD_DEVICE_CURRENT)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.device = %d: must be an ordinal (>= 0) or ATTNBWD_DEVICE_CURRENT (-1)", opt.device);
    if (opt.device == ATTNBWD_DEVICE_CURRENT) opt.device = drv_current_device();
    if (opt.log_level < ATTNBWD_LOG_QUIET || opt.log_level > ATTNBWD_LOG_DEBUG)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "options.log_level = %d: must be 0..3", opt.log_level);
    if (opt.disk_cache < 0 || opt.disk_cache > ATTNBWD_DISK_CACHE_READ_ONLY)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.disk_cache = %d: must be 0 (off), 1 (read-write) or 2 (a shared read-only store)",
                       opt.disk_cache);
    if (opt.deterministic != 0 && opt.deterministic != 1)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "options.deterministic = %d: must be 0 or 1", opt.deterministic);
    const char *env_det = getenv("ATTNBWD_DETERMINISTIC");
    if (env_det && *env_det && strcmp(env_det, "0") && strcmp(env_det, "1"))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ATTNBWD_DETERMINISTIC=%s: must be 0 or 1", env_det);

    attnbwd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory opening a context");
    ctx->log.level = opt.log_level;
    const char *env_level = getenv("ATTNBWD_LOG");
    if (env_level && *env_level >= '0' && *env_level <= '3' && env_level[1] == '\0')
        ctx->log.level = *env_level - '0';
    ctx->log.fn = opt.log_fn;
    ctx->log.user = opt.log_user;
    ctx->device_ordinal = opt.device;
    ctx->deterministic = opt.deterministic || (env_det && !strcmp(env_det, "1"));
    table_init(&ctx->table);

    attnbwd_status s = drv_device_open(opt.device, &ctx->dev);
    if (s == ATTNBWD_OK) {
        ctx->have_device = 1;
        ctx->driver_version = drv_version();
        snprintf(ctx->arch, sizeof ctx->arch, "sm_%d%d", ctx->dev.cc_major, ctx->dev.cc_minor);
    } else {
        snprintf(ctx->driver_error, sizeof ctx->driver_error, "%s", attnbwd_last_error());
        ctx->driver_version = drv_version();
        if (!opt.arch) {
            char why[sizeof ctx->driver_error];
            memcpy(why, ctx->driver_error, sizeof why);
            attnbwd_close(ctx);
            return err_set(s, "%s (to generate and compile without a GPU, set options.arch, e.g. \"sm_90\")", why);
        }
    }
    if (opt.arch) snprintf(ctx->arch, sizeof ctx->arch, "%s", opt.arch);

    if ((s = gen_open(&ctx->gen)) != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return s;
    }
    cache_open(&ctx->cache, opt.cache_dir, opt.disk_cache, &ctx->log);
    ctx->cache.check_payload = check_cached_cubin;
    ctx->cache.check_user = ctx;
    if ((s = configure_tuning(ctx)) != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return s;
    }
    const char *dump = getenv("ATTNBWD_DUMP_DIR");
    if (dump && *dump) ctx->dump_dir = strdup(dump);
    /* Every plan's launches in order on the caller's stream, for comparing
     * against the plan's lanes and for debugging a race. */
    const char *one = getenv("ATTNBWD_ONE_STREAM");
    ctx->one_stream = one && *one && strcmp(one, "0");
    /* Lane 0 of a plan on a stream of our own at the greatest priority
     * (1, the default), or on the caller's stream (0). */
    const char *pri = getenv("ATTNBWD_LANE_PRIORITY");
    ctx->lane_priority = !(pri && !strcmp(pri, "0"));
    /* Repeated calls of problem 2 replayed from a CUDA graph (1, the default), or always launched directly (0). */
    const char *graphs = getenv("ATTNBWD_GRAPHS");
    ctx->graphs = !(graphs && !strcmp(graphs, "0"));
    /* Each new set of a launch's pointers checked with the driver (1, the default), or not (0). */
    const char *checks = getenv("ATTNBWD_POINTER_CHECKS");
    ctx->pointer_checks = !(checks && !strcmp(checks, "0"));
    log_line(&ctx->log, ATTNBWD_LOG_INFO, "context: arch %s, device %s, cache %s", ctx->arch,
             ctx->have_device ? ctx->dev.name : "none", ctx->cache.dir ? ctx->cache.dir : "off");
    err_clear();
    *out = ctx;
    return ATTNBWD_OK;
}

static void kernel_free(attnbwd_kernel *k) {
    if (!k) return;
    graph_free(k);
    for (int i = 0; i < PLAN_MAX_LANES; ++i) {
        drv_stream_destroy(&k->ctx->dev, k->lane_streams[i]);
        drv_event_destroy(&k->ctx->dev, k->join_events[i]);
    }
    for (int i = 0; i < PLAN_MAX_EVENTS; ++i) drv_event_destroy(&k->ctx->dev, k->events[i]);
    drv_event_destroy(&k->ctx->dev, k->fork_event);
    if (k->module) drv_module_unload(&k->ctx->dev, k->module);
    pthread_mutex_destroy(&k->load_mu);
    pthread_mutex_destroy(&k->launch_mu);
    kernel_plan_free(&k->plan);
    free(k->functions);
    free(k->override);
    free(k->cubin);
    free(k);
}

void attnbwd_close(attnbwd_ctx *ctx) {
    if (!ctx) return;
    table_destroy(&ctx->table, kernel_free);
    if (ctx->have_device) drv_device_close(&ctx->dev);
    gen_close(ctx->gen);
    cache_close(&ctx->cache);
    free(ctx->dump_dir);
    free(ctx);
}

/* Limits that keep every index of the generated code in range. */
#define MAX_SEQ_LEN (1LL << 20)
#define MAX_ROWS ((1LL << 31) - 1)
#define EDIT_MAX_BATCH (65535 / 16) /* problem 2: grid.y or grid.z of B * 16 heads stays within CUDA's 65535 */

attnbwd_status shape_validate(const attnbwd_shape *s) {
    if (!s) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape is NULL");
    if (s->problem != ATTNBWD_SOFTMAX_DROPOUT_BWD && s->problem != ATTNBWD_EDIT_ATTENTION_BWD)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.problem = %d: not a problem of attnbwd_problem",
                       (int)s->problem);
    if (s->batch < 1) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.batch = %lld: must be >= 1", (long long)s->batch);
    if (s->seq_len < 1)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.seq_len = %lld: must be >= 1", (long long)s->seq_len);
    if (s->seq_len > MAX_SEQ_LEN)
        return err_set(ATTNBWD_ERR_UNSUPPORTED, "shape.seq_len = %lld: longer than the limit %lld",
                       (long long)s->seq_len, MAX_SEQ_LEN);
    if (s->dropout != 0 && s->dropout != 1)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.dropout = %d: must be 0 or 1", s->dropout);
    if (s->problem == ATTNBWD_EDIT_ATTENTION_BWD) {
        if (s->heads != 0 && s->heads != 16)
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.heads = %lld: the edit attention problem has 16 heads",
                           (long long)s->heads);
        if (s->precision < ATTNBWD_PRECISION_TF32 || s->precision > ATTNBWD_PRECISION_FP16)
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.precision = %d: not an attnbwd_precision", s->precision);
        if (s->seq_len > 1024)
            return err_set(ATTNBWD_ERR_UNSUPPORTED, "shape.seq_len = %lld: the edit attention backward supports "
                                                    "T <= 1024 (the positions of edit_region_bias)", (long long)s->seq_len);
        if (s->batch > EDIT_MAX_BATCH)
            return err_set(ATTNBWD_ERR_UNSUPPORTED,
                           "shape.batch = %lld: the edit attention backward supports B <= %d (its kernels' grids have "
                           "a block row per batch row and head, B*16 <= 65535, CUDA's limit)",
                           (long long)s->batch, EDIT_MAX_BATCH);
        int64_t bt;
        if (__builtin_mul_overflow(s->batch, s->seq_len, &bt) || bt > (INT64_C(1) << 26))
            return err_set(ATTNBWD_ERR_UNSUPPORTED, "shape B=%lld T=%lld: B*T over the limit 2^26",
                           (long long)s->batch, (long long)s->seq_len);
        return ATTNBWD_OK;
    }
    if (s->heads < 1) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.heads = %lld: must be >= 1", (long long)s->heads);
    if (s->precision != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shape.precision = %d: problem 1 has only fp32 (0)", s->precision);
    int64_t rows, elems, bytes;
    if (__builtin_mul_overflow(s->batch, s->heads, &rows) || __builtin_mul_overflow(rows, s->seq_len, &rows) ||
        __builtin_mul_overflow(rows, s->seq_len, &elems) || __builtin_mul_overflow(elems, (int64_t)4, &bytes))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "shape B=%lld H=%lld T=%lld: B*H*T*T*4 bytes overflows 64 bits", (long long)s->batch,
                       (long long)s->heads, (long long)s->seq_len);
    if (rows / s->seq_len * s->seq_len != rows || rows > MAX_ROWS)
        return err_set(ATTNBWD_ERR_UNSUPPORTED, "shape B=%lld H=%lld T=%lld: B*H*T = %lld rows, over the limit %lld",
                       (long long)s->batch, (long long)s->heads, (long long)s->seq_len, (long long)rows,
                       (long long)MAX_ROWS);
    return ATTNBWD_OK;
}

/* The readable text whose hash is the cache key: everything that changes
 * the cubin, and nothing machine-specific such as paths. */
/* The launches of a multi-kernel plan as manifest lines ("" for none). */
static char *launches_text(const kernel_plan *p) {
    size_t cap = 1, used = 0;
    for (int i = 0; i < p->n_launches; ++i) {
        cap += strlen(p->launches[i].name) + 128;
        for (int a = 0; a < p->launches[i].n_args; ++a) cap += strlen(p->launches[i].args[a]) + 1;
    }
    char *t = malloc(cap);
    if (!t) return NULL;
    t[0] = '\0';
    for (int i = 0; i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        used += (size_t)snprintf(t + used, cap - used, "launch %s grid %u %u %u block %u %u %u shared %u args", l->name,
                                 l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                                 l->shared_bytes);
        for (int a = 0; a < l->n_args; ++a) used += (size_t)snprintf(t + used, cap - used, " %s", l->args[a]);
        used += (size_t)snprintf(t + used, cap - used, "\n");
    }
    return t;
}

static char *make_manifest(const attnbwd_ctx *ctx, const kernel_plan *p, const char *options) {
    int maj, min;
    nvrtc_version(&maj, &min);
    char *launches = launches_text(p);
    if (!launches) return NULL;
    const char *fmt = "attnbwd-cache-manifest %d\nlibrary %s\nnvrtc %d.%d\noptions %s\narch %s\n"
                      "kernel %s\ntiles %s\ngrid %u %u %u\nblock %u %u %u\nshared %u\nworkspace %zu\n%s"
                      "source\n%s";
    int n = snprintf(NULL, 0, fmt, CACHE_FORMAT, ATTNBWD_VERSION_STRING, maj, min, options, ctx->arch, p->name,
                     p->tiles, p->grid[0], p->grid[1], p->grid[2], p->block[0], p->block[1], p->block[2],
                     p->shared_bytes, p->workspace_bytes, launches, p->source);
    char *m = malloc((size_t)n + 1);
    if (m)
        snprintf(m, (size_t)n + 1, fmt, CACHE_FORMAT, ATTNBWD_VERSION_STRING, maj, min, options, ctx->arch, p->name,
                 p->tiles, p->grid[0], p->grid[1], p->grid[2], p->block[0], p->block[1], p->block[2],
                 p->shared_bytes, p->workspace_bytes, launches, p->source);
    free(launches);
    return m;
}

/* A ptxas performance warning of a module that compiled, as a warning of
 * ours (the line names the function). */
static void warn_performance(const char *line, int len, void *user) {
    const attnbwd_ctx *ctx = user;
    log_line(&ctx->log, ATTNBWD_LOG_WARN, "ptxas: %.*s", len, line);
}

/* Finds the cubin in the disk cache or compiles it, under the per-key lock
 * so that two processes missing the same key compile it once. */
static attnbwd_status find_or_compile(attnbwd_ctx *ctx, attnbwd_kernel *k, const char *manifest,
                                      const char *options) {
    size_t mlen = strlen(manifest);
    if (cache_get(&ctx->cache, k->key, manifest, mlen, &k->cubin, &k->cubin_len)) {
        k->origin = ATTNBWD_FROM_DISK;
        return ATTNBWD_OK;
    }
    int lock = cache_lock(&ctx->cache, k->key, -1); /* the cache's bound, $ATTNBWD_CACHE_LOCK_WAIT */
    if (lock >= 0 && cache_get(&ctx->cache, k->key, manifest, mlen, &k->cubin, &k->cubin_len)) {
        cache_unlock(lock); /* another process compiled it while we waited */
        k->origin = ATTNBWD_FROM_DISK;
        return ATTNBWD_OK;
    }
    nvrtc_result r;
    attnbwd_status s = nvrtc_compile(k->plan.source, k->plan.name, k->arch, &r);
    if (s == ATTNBWD_OK) {
        /* The kernel works, but slower than its source means: say so. */
        nvrtc_performance_warnings(r.log, warn_performance, ctx);
        k->cubin = r.cubin;
        k->cubin_len = r.cubin_len;
        r.cubin = NULL;
        k->origin = ATTNBWD_FROM_COMPILE;
        cache_put(&ctx->cache, k->key, manifest, mlen, k->cubin, k->cubin_len);
    }
    dump_kernel(ctx, k, options, r.log, manifest);
    if (lock >= 0) cache_unlock(lock);
    nvrtc_result_free(&r);
    return s;
}

static attnbwd_status build_kernel(attnbwd_ctx *ctx, const attnbwd_shape *shape, const char *override,
                                   attnbwd_kernel **out) {
    double t0 = now_seconds();
    attnbwd_kernel *k = calloc(1, sizeof *k);
    if (!k) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    k->ctx = ctx;
    k->shape = *shape;
    pthread_mutex_init(&k->load_mu, NULL);
    pthread_mutex_init(&k->launch_mu, NULL);
    char *manifest = NULL;
    char options[512];
    attnbwd_status s = ATTNBWD_OK;
    if (override && !(k->override = strdup(override))) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == ATTNBWD_OK) s = gen_plan(ctx->gen, shape, ctx->arch, override, &k->plan);
    /* The plan may ask for the arch-specific target (sm_90a for wgmma); the
     * options, and so the manifest and cache key, say which. */
    snprintf(k->arch, sizeof k->arch, "%s", k->plan.compile_arch[0] ? k->plan.compile_arch : ctx->arch);
    nvrtc_options_string(k->arch, options, sizeof options);
    if (s == ATTNBWD_OK && !(manifest = make_manifest(ctx, &k->plan, options)))
        s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == ATTNBWD_OK) {
        cache_key(manifest, strlen(manifest), k->key);
        s = find_or_compile(ctx, k, manifest, options);
    }
    free(manifest);
    if (s != ATTNBWD_OK) {
        kernel_free(k);
        return err_wrap(s, "shape B=%lld H=%lld T=%lld dropout=%d", (long long)shape->batch, (long long)shape->heads,
                        (long long)shape->seq_len, shape->dropout);
    }
    k->build_seconds = now_seconds() - t0;
    log_line(&ctx->log, ATTNBWD_LOG_INFO, "%s %s (%s) in %.3f s", k->origin == ATTNBWD_FROM_DISK ? "disk hit" : "compiled",
             k->plan.name, k->key, k->build_seconds);
    *out = k;
    return ATTNBWD_OK;
}

attnbwd_status kernel_get(attnbwd_ctx *ctx, const attnbwd_shape *shape, const char *override,
                          attnbwd_kernel **out, int *memory_hit) {
    int hit = 0;
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (!out) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    attnbwd_status s = shape_validate(shape);
    if (s == ATTNBWD_OK) s = table_get(&ctx->table, shape, override, build_kernel, ctx, out, &hit);
    if (memory_hit) *memory_hit = hit;
    return s;
}

attnbwd_status attnbwd_get_kernel(attnbwd_ctx *ctx, const attnbwd_shape *shape, attnbwd_kernel **out) {
    return kernel_get(ctx, shape, NULL, out, NULL);
}

attnbwd_status attnbwd_get_kernel_tiles(attnbwd_ctx *ctx, const attnbwd_shape *shape, const char *tiles,
                                        attnbwd_kernel **out) {
    if (!tiles) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "tiles is NULL");
    return kernel_get(ctx, shape, tiles, out, NULL);
}

attnbwd_status attnbwd_candidates(attnbwd_ctx *ctx, const attnbwd_shape *shape, char ***tiles, size_t *n) {
    if (!ctx || !tiles || !n) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "candidates: ctx, tiles or n is NULL");
    attnbwd_status s = shape_validate(shape);
    if (s != ATTNBWD_OK) return s;
    return gen_candidates(ctx->gen, shape, tiles, n);
}

/* The streams and events of a plan with more than one lane. */
static attnbwd_status create_lanes(attnbwd_kernel *k) {
    drv_device *dev = &k->ctx->dev;
    const kernel_plan *p = &k->plan;
    if (p->n_lanes <= 1) return ATTNBWD_OK;
    attnbwd_status s = k->fork_event ? ATTNBWD_OK : drv_event_create(dev, &k->fork_event);
    for (int i = 0; s == ATTNBWD_OK && i < p->n_lanes; ++i) {
        if (!k->lane_streams[i] && p->lane_priority[i] >= 0) /* lane 0 at -1: the caller's stream */
            s = drv_stream_create(dev, p->lane_priority[i], &k->lane_streams[i]);
        if (s == ATTNBWD_OK && !k->join_events[i]) s = drv_event_create(dev, &k->join_events[i]);
    }
    for (int i = 0; s == ATTNBWD_OK && i < p->n_events; ++i)
        if (!k->events[i]) s = drv_event_create(dev, &k->events[i]);
    return s;
}

attnbwd_status kernel_ensure_loaded(attnbwd_kernel *k) {
    if (atomic_load_explicit(&k->function, memory_order_acquire)) return ATTNBWD_OK;
    attnbwd_ctx *ctx = k->ctx;
    if (!ctx->have_device)
        return err_set(ATTNBWD_ERR_NO_DEVICE, "cannot launch %s: %s (this context compiles for %s only)",
                       k->plan.name, ctx->driver_error, ctx->arch);
    attnbwd_status s = ATTNBWD_OK;
    pthread_mutex_lock(&k->load_mu);
    if (!atomic_load_explicit(&k->function, memory_order_relaxed)) {
        void *fn = NULL;
        const kernel_plan *p = &k->plan;
        if (!k->module) s = drv_module_load(&ctx->dev, k->cubin, &k->module);
        if (s == ATTNBWD_OK && p->n_launches && !k->functions &&
            !(k->functions = calloc((size_t)p->n_launches, sizeof *k->functions)))
            s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
        for (int i = 0; s == ATTNBWD_OK && i < p->n_launches; ++i)
            s = drv_module_function(&ctx->dev, k->module, p->launches[i].name, p->launches[i].shared_bytes,
                                    &k->functions[i]);
        if (s == ATTNBWD_OK) s = drv_module_function(&ctx->dev, k->module, p->name, p->shared_bytes, &fn);
        if (s == ATTNBWD_OK) s = create_lanes(k);
        if (s == ATTNBWD_OK) atomic_store_explicit(&k->function, fn, memory_order_release);
        else err_wrap(s, "loading %s (built for %s) on %s", p->name, k->arch, ctx->dev.name);
    }
    pthread_mutex_unlock(&k->load_mu);
    return s;
}

attnbwd_status attnbwd_kernel_get_info(const attnbwd_kernel *k, attnbwd_kernel_info *info) {
    if (!k || !info) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "kernel_get_info: %s is NULL", k ? "info" : "kernel");
    memset(info, 0, sizeof *info);
    info->shape = k->shape;
    info->name = k->plan.name;
    info->arch = k->arch;
    memcpy(info->grid, k->plan.grid, sizeof info->grid);
    memcpy(info->block, k->plan.block, sizeof info->block);
    info->shared_bytes = k->plan.shared_bytes;
    info->tiles = k->plan.tiles;
    info->cache_key = k->key;
    info->origin = k->origin;
    info->build_seconds = k->build_seconds;
    info->cubin_bytes = k->cubin_len;
    info->unordered_outputs = k->plan.unordered_outputs;
    return ATTNBWD_OK;
}

attnbwd_status attnbwd_generate(attnbwd_ctx *ctx, const attnbwd_shape *shape, char **source, char **tiles) {
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (!source) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "source is NULL");
    attnbwd_status s = shape_validate(shape);
    if (s != ATTNBWD_OK) return s;
    kernel_plan p;
    if ((s = gen_plan(ctx->gen, shape, ctx->arch, NULL, &p)) != ATTNBWD_OK) return s;
    *source = p.source;
    p.source = NULL;
    if (tiles) {
        *tiles = p.tiles;
        p.tiles = NULL;
    }
    kernel_plan_free(&p);
    return ATTNBWD_OK;
}

void attnbwd_free(void *p) { free(p); }

attnbwd_status attnbwd_ctx_get_info(attnbwd_ctx *ctx, attnbwd_ctx_info *info) {
    if (!ctx || !info) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx_get_info: %s is NULL", ctx ? "info" : "ctx");
    memset(info, 0, sizeof *info);
    info->library_version = ATTNBWD_VERSION_STRING;
    nvrtc_version(&info->nvrtc_major, &info->nvrtc_minor);
    info->driver_version = ctx->driver_version;
    info->driver_error = ctx->have_device ? "" : ctx->driver_error;
    info->device_name = ctx->have_device ? ctx->dev.name : "";
    info->arch = ctx->arch;
    info->cache_dir = ctx->cache.dir ? ctx->cache.dir : "";
    info->disk_cache = ctx->cache.dir && ctx->cache.writable;
    cache_usage(&ctx->cache, &info->cache_bytes, &info->cache_entries);
    info->device = ctx->device_ordinal;
    info->deterministic = ctx->deterministic;
    info->cache_mode = ctx->cache.mode;
    info->cache_read = ctx->cache.dir != NULL;
    info->tuning_table = ctx->tuning_note;
    return ATTNBWD_OK;
}

attnbwd_status attnbwd_cache_clear(attnbwd_ctx *ctx, uint64_t *files, uint64_t *bytes) {
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    uint64_t f = 0, b = 0;
    int err = cache_clear(&ctx->cache, &f, &b);
    if (files) *files = f;
    if (bytes) *bytes = b;
    if (err)
        return err_set(ATTNBWD_ERR_CACHE, "clearing the disk cache %s: %s (%llu files removed)",
                       ctx->cache.dir ? ctx->cache.dir : "", strerror(err), (unsigned long long)f);
    log_line(&ctx->log, ATTNBWD_LOG_INFO, "disk cache %s cleared: %llu files, %llu bytes", ctx->cache.dir ? ctx->cache.dir : "(off)",
             (unsigned long long)f, (unsigned long long)b);
    return ATTNBWD_OK;
}
