/* The public API's context and kernel life cycle, and the build of one
 * kernel: plan (Lua) -> manifest -> disk cache or NVRTC -> disk cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cache_tools.h"
#include "error.h"
#include "internal.h"
#include "manifest.h"
#include "nvrtc_compile.h"


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
        snprintf(ctx->user_tuning_note, sizeof ctx->user_tuning_note, "built-in (rejected: %.900s)", t->rejected);
    else if (!t->path[0])
        snprintf(ctx->user_tuning_note, sizeof ctx->user_tuning_note, "built-in");
    else if (strcmp(t->gpu, model) != 0)
        snprintf(ctx->user_tuning_note, sizeof ctx->user_tuning_note, "built-in (%.700s is for %.100s, not %.100s)", t->path,
                 t->gpu, model[0] ? model : "this target (no GPU model)");
    else
        snprintf(ctx->user_tuning_note, sizeof ctx->user_tuning_note, "%.800s (for %.127s)", t->path, t->gpu);
}

/* 1 when the user's tuning table is sound and for the model the tiles are planned for. */
static int user_table_in_effect(const attnbwd_ctx *ctx) {
    const tuning_file *t = &ctx->tuning;
    return t->path[0] && !t->rejected[0] && ctx->gpu.model[0] && strcmp(t->gpu, ctx->gpu.model) == 0;
}

/* A cubin read from the disk cache, checked before it is used (cache.h). */
static const char *check_cached_cubin(const void *payload, size_t len, void *user) {
    const attnbwd_ctx *ctx = user;
    return cubin_check(payload, len, ctx->arch);
}

/* The GPU model the tiles are planned for: options.gpu_model, else
 * $ATTNBWD_GPU_MODEL (both for compiling on another machine than the one the
 * kernels will run on), else the device's. Its SM count is the device's when
 * the model is the device's, else the known model's. */
static void choose_gpu_model(attnbwd_ctx *ctx, const char *given, const char *given_from) {
    int is_device = ctx->have_device && (!given || !strcasecmp(given, ctx->dev.name));
    if (!given && ctx->have_device) given = ctx->dev.name;
    gpu_model_choose(given, is_device ? ctx->dev.sm_count : 0, &ctx->gpu);
    if (is_device) ctx->gpu_from = "the device";
    else ctx->gpu_from = given ? given_from : "none";
    if (ctx->gpu.table)
        snprintf(ctx->tuning_table_path, sizeof ctx->tuning_table_path, "lua/%s.lua", ctx->gpu.table);
}

/* One line on the model and its table, once the user's table is read. A name
 * someone typed that matches no model is likely a typo: say so, unless the
 * user's own table is for that name. A device of another family is just a GPU
 * the tables were not measured on. */
static void say_gpu_model(const attnbwd_ctx *ctx) {
    int named = ctx->gpu.model[0] != '\0', own = user_table_in_effect(ctx);
    int is_device = !strcmp(ctx->gpu_from, "the device");
    int level = ctx->gpu.unknown && !is_device && !own ? ATTNBWD_LOG_WARN : ATTNBWD_LOG_INFO;
    char sms[32] = "SMs unknown";
    if (ctx->gpu.sm_count > 0) snprintf(sms, sizeof sms, "%d SMs", ctx->gpu.sm_count);
    log_line(&ctx->log, level, "GPU model %s%s%s (from %s, %s): tuning table %s%s", named ? "\"" : "",
             named ? ctx->gpu.model : "none", named ? "\"" : "", ctx->gpu_from, sms,
             own ? ctx->tuning.path : ctx->gpu.note, own ? " (the user's)" : "");
}

static attnbwd_status configure_tuning(attnbwd_ctx *ctx) {
    char *user = tuning_file_read(&ctx->cache, &ctx->log, &ctx->tuning);
    attnbwd_status s = gen_configure(ctx->gen, ctx->gpu.model, user, ctx->deterministic, ctx->gpu.table);
    free(user);
    note_tuning(ctx, ctx->gpu.model);
    say_gpu_model(ctx);
    return s;
}

/* Refuses options and environment values that are out of range, and folds
 * $ATTNBWD_DETERMINISTIC=1 into opt->deterministic and, where the options
 * give none, $ATTNBWD_CACHE_MAX_BYTES into opt->cache_max_bytes. A GPU model
 * named for another machine brings its arch (into *named, which opt->arch
 * may then point into). */
static attnbwd_status check_options(attnbwd_options *opt, const char **model, const char **model_from,
                                    gpu_choice *named) {
    if (opt->arch && (!valid_arch(opt->arch) || strlen(opt->arch) >= 16))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.arch = \"%s\": expected an architecture such as \"sm_90\"", opt->arch);
    if (opt->device < ATTNBWD_DEVICE_CURRENT)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.device = %d: must be an ordinal (>= 0) or ATTNBWD_DEVICE_CURRENT (-1)", opt->device);
    int given = opt->gpu_model && *opt->gpu_model;
    *model = given ? opt->gpu_model : getenv("ATTNBWD_GPU_MODEL");
    *model_from = given ? "options.gpu_model" : "ATTNBWD_GPU_MODEL";
    if (*model && !**model) *model = NULL;
    if (*model && (strlen(*model) >= sizeof named->model || strpbrk(*model, "\r\n")))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s = \"%.60s...\": a GPU model is one line of at most %zu bytes",
                       *model_from, *model, sizeof named->model - 1);
    gpu_model_choose(*model, 0, named);
    if (named->arch[0] && opt->arch && strcmp(opt->arch, named->arch) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.arch = \"%s\" but the GPU model \"%s\" (%s) reports %s, the arch its kernels are "
                       "found under (they ask for %sa themselves where they need it): leave the arch out or give %s",
                       opt->arch, named->model, *model_from, named->arch, named->arch, named->arch);
    if (named->arch[0]) opt->arch = named->arch;
    if (opt->log_level < ATTNBWD_LOG_QUIET || opt->log_level > ATTNBWD_LOG_DEBUG)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "options.log_level = %d: must be 0..3", opt->log_level);
    if (opt->disk_cache < 0 || opt->disk_cache > ATTNBWD_DISK_CACHE_READ_ONLY)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "options.disk_cache = %d: must be 0 (off), 1 (read-write) or 2 (a shared read-only store)",
                       opt->disk_cache);
    if (opt->deterministic != 0 && opt->deterministic != 1)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "options.deterministic = %d: must be 0 or 1",
                       opt->deterministic);
    const char *env_det = getenv("ATTNBWD_DETERMINISTIC");
    if (env_det && *env_det && strcmp(env_det, "0") && strcmp(env_det, "1"))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ATTNBWD_DETERMINISTIC=%s: must be 0 or 1", env_det);
    if (env_det && !strcmp(env_det, "1")) opt->deterministic = 1; /* either asks for it */
    const char *env_max = getenv("ATTNBWD_CACHE_MAX_BYTES");
    uint64_t max_bytes;
    if (env_max && *env_max && cache_parse_bytes(env_max, &max_bytes) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "ATTNBWD_CACHE_MAX_BYTES=%s: expected a size of at least one byte, such as 1073741824, 512M "
                       "or 2G", env_max);
    if (env_max && *env_max && !opt->cache_max_bytes) opt->cache_max_bytes = max_bytes; /* the options' wins */
    return ATTNBWD_OK;
}

/* The device and its arch, or (options.arch given) none: the context then
 * generates and compiles only. Without either, the driver's error, with a
 * hint, in why. */
static attnbwd_status open_device(attnbwd_ctx *ctx, const attnbwd_options *opt, const char *model, char *why,
                                  size_t why_size) {
    attnbwd_status s = drv_device_open(opt->device, &ctx->dev);
    if (s != ATTNBWD_OK) snprintf(ctx->driver_error, sizeof ctx->driver_error, "%s", attnbwd_last_error());
    ctx->driver_version = drv_version();
    if (s == ATTNBWD_OK) {
        ctx->have_device = 1;
        snprintf(ctx->arch, sizeof ctx->arch, "sm_%d%d", ctx->dev.cc_major, ctx->dev.cc_minor);
    } else if (!opt->arch) {
        if (model)
            snprintf(why, why_size, "%s (the GPU model \"%s\" is none whose arch is known: set options.arch, e.g. "
                                    "\"sm_90\")", ctx->driver_error, model);
        else
            snprintf(why, why_size, "%s (to generate and compile without a GPU, set options.arch, e.g. \"sm_90\")",
                     ctx->driver_error);
        return s;
    }
    if (opt->arch) snprintf(ctx->arch, sizeof ctx->arch, "%s", opt->arch);
    return ATTNBWD_OK;
}

/* The switches read from the environment at open (README's environment table). */
static void read_switches(attnbwd_ctx *ctx) {
    /* Every disk hit planned and rendered again, and compared with the entry's manifest. */
    const char *verify = getenv("ATTNBWD_CACHE_VERIFY");
    ctx->verify_hits = verify && !strcmp(verify, "1");
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
}

attnbwd_status attnbwd_open(const attnbwd_options *opt_in, attnbwd_ctx **out) {
    err_clear();
    if (!out) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "attnbwd_open: out is NULL");
    *out = NULL;
    attnbwd_options opt;
    if (opt_in) opt = *opt_in;
    else attnbwd_options_init(&opt);
    const char *model = NULL, *model_from = NULL;
    gpu_choice named;
    attnbwd_status s = check_options(&opt, &model, &model_from, &named);
    if (s != ATTNBWD_OK) return s;
    if (opt.device == ATTNBWD_DEVICE_CURRENT) opt.device = drv_current_device();

    attnbwd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory opening a context");
    ctx->log.level = opt.log_level;
    const char *env_level = getenv("ATTNBWD_LOG");
    if (env_level && *env_level >= '0' && *env_level <= '3' && env_level[1] == '\0')
        ctx->log.level = *env_level - '0';
    ctx->log.fn = opt.log_fn;
    ctx->log.user = opt.log_user;
    ctx->device_ordinal = opt.device;
    ctx->deterministic = opt.deterministic;
    table_init(&ctx->table);

    char why[sizeof ctx->driver_error + 160];
    if ((s = open_device(ctx, &opt, model, why, sizeof why)) != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return err_set(s, "%s", why);
    }
    if ((s = gen_open(&ctx->gen)) != ATTNBWD_OK ||
        (s = gen_scripts_hash(ctx->scripts_hash, sizeof ctx->scripts_hash)) != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return s;
    }
    choose_gpu_model(ctx, model, model_from);
    cache_open(&ctx->cache, opt.cache_dir, opt.disk_cache, &ctx->log);
    if (opt.cache_max_bytes) ctx->cache.max_bytes = opt.cache_max_bytes;
    ctx->cache.check_payload = check_cached_cubin;
    ctx->cache.check_user = ctx;
    read_switches(ctx);
    if ((s = configure_tuning(ctx)) != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return s;
    }
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
    free(k->launch_args);
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

/* A ptxas performance warning of a module that compiled, as a warning of
 * ours (the line names the function). */
static void warn_performance(const char *line, int len, void *user) {
    const attnbwd_ctx *ctx = user;
    log_line(&ctx->log, ATTNBWD_LOG_WARN, "ptxas: %.*s", len, line);
}

/* A disk hit found by the manifest's head alone: the plan comes from the
 * entry, no Lua planning or rendering. 1 on a hit, 0 on a miss, -1 for an
 * entry whose plan does not read back (reported; the compile replaces it). */
static int disk_hit(attnbwd_ctx *ctx, attnbwd_kernel *k, const char *head, size_t head_len) {
    char *stored = NULL;
    size_t stored_len;
    if (!cache_get_launch(&ctx->cache, k->key, head, head_len, &stored, &stored_len, &k->cubin, &k->cubin_len))
        return 0;
    attnbwd_status s = manifest_plan(stored, head_len, ctx->arch, &k->plan);
    if (s == ATTNBWD_OK && ctx->deterministic && k->plan.unordered_outputs)
        s = err_set(ATTNBWD_ERR_CACHE, "its plan sums outputs 0x%02x by float atomics in a deterministic context",
                    k->plan.unordered_outputs);
    free(stored);
    if (s != ATTNBWD_OK) {
        log_line(&ctx->log, ATTNBWD_LOG_WARN, "disk cache entry %s not used: %s; compiling it again", k->key,
                 attnbwd_last_error());
        free(k->cubin);
        k->cubin = NULL;
        k->cubin_len = 0;
        return -1;
    }
    snprintf(k->arch, sizeof k->arch, "%s", k->plan.compile_arch[0] ? k->plan.compile_arch : ctx->arch);
    k->origin = ATTNBWD_FROM_DISK;
    return 1;
}

/* The cubin of a rendered plan from an entry of its head that agrees with
 * its whole manifest (another process compiled it meanwhile, or
 * ATTNBWD_CACHE_VERIFY asked to compare): 1, 0 for none, -1 for one that
 * disagrees (reported; the compile replaces it). */
static int matching_entry(attnbwd_ctx *ctx, attnbwd_kernel *k, const char *head, size_t head_len,
                          const char *manifest) {
    char *stored = NULL;
    size_t stored_len;
    if (!cache_get_head(&ctx->cache, k->key, head, head_len, &stored, &stored_len, &k->cubin, &k->cubin_len))
        return 0;
    const char *a = manifest_body(stored, head_len), *b = manifest_body(manifest, head_len);
    int same = a && b && strcmp(a, b) == 0;
    free(stored);
    if (!same) {
        log_line(&ctx->log, ATTNBWD_LOG_WARN,
                 "disk cache entry %s holds another plan or source than its scripts render now: compiling it again",
                 k->key);
        free(k->cubin);
        k->cubin = NULL;
        k->cubin_len = 0;
        return -1;
    }
    k->origin = ATTNBWD_FROM_DISK;
    return 1;
}

/* Finds the cubin of a rendered plan in the disk cache or compiles it, under
 * the per-key lock so that two processes missing the same key compile it
 * once. found: -1 when the entry there is known not to do, else 0. */
static attnbwd_status find_or_compile(attnbwd_ctx *ctx, attnbwd_kernel *k, const char *head, const char *manifest,
                                      const char *options, int found) {
    size_t head_len = strlen(head);
    if (found == 0) found = matching_entry(ctx, k, head, head_len, manifest);
    if (found > 0) return ATTNBWD_OK;
    int lock = cache_lock(&ctx->cache, k->key, -1); /* the cache's bound, $ATTNBWD_CACHE_LOCK_WAIT */
    if (lock >= 0 && found == 0 && matching_entry(ctx, k, head, head_len, manifest) > 0) {
        cache_unlock(lock); /* another process compiled it while we waited */
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
        cache_put(&ctx->cache, k->key, manifest, strlen(manifest), k->cubin, k->cubin_len);
    }
    dump_kernel(ctx, k, options, r.log, manifest);
    if (lock >= 0) cache_unlock(lock);
    nvrtc_result_free(&r);
    return s;
}

/* Plans and renders the kernel, then finds or compiles its cubin (found as
 * find_or_compile's). */
static attnbwd_status plan_and_build(attnbwd_ctx *ctx, attnbwd_kernel *k, const char *head, int found) {
    attnbwd_status s = gen_plan(ctx->gen, &k->shape, ctx->arch, k->override, &k->plan);
    if (s != ATTNBWD_OK) return s;
    /* The plan may ask for the arch-specific target (sm_90a for wgmma); the
     * options, and so the manifest, say which. */
    snprintf(k->arch, sizeof k->arch, "%s", k->plan.compile_arch[0] ? k->plan.compile_arch : ctx->arch);
    char options[512];
    nvrtc_options_string(k->arch, options, sizeof options);
    char *manifest = manifest_full(head, ctx->gpu.model, ctx->gpu.table, &k->plan, options);
    if (!manifest) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    s = find_or_compile(ctx, k, head, manifest, options, found);
    free(manifest);
    return s;
}

/* The kernel of (shape, override): found in the disk cache by the inputs of
 * its plan (manifest.h) without running the plan, else planned, rendered and
 * compiled. */
static attnbwd_status build_kernel(attnbwd_ctx *ctx, const attnbwd_shape *shape, const char *override,
                                   attnbwd_kernel **out) {
    double t0 = now_seconds();
    attnbwd_kernel *k = calloc(1, sizeof *k);
    if (!k) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    k->ctx = ctx;
    k->shape = *shape;
    pthread_mutex_init(&k->load_mu, NULL);
    pthread_mutex_init(&k->launch_mu, NULL);
    char *tuned = NULL, *head = NULL;
    attnbwd_status s = ATTNBWD_OK;
    if (override && !(k->override = strdup(override))) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    if (s == ATTNBWD_OK && !override) s = gen_tuned(ctx->gen, shape, &tuned);
    if (s == ATTNBWD_OK) {
        manifest_inputs in = {ctx->scripts_hash, ctx->arch, shape, ctx->deterministic, override, tuned};
        if (!(head = manifest_head(&in))) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (s == ATTNBWD_OK) {
        cache_key(head, strlen(head), k->key);
        int found = ctx->verify_hits ? 0 : disk_hit(ctx, k, head, strlen(head));
        if (found <= 0) s = plan_and_build(ctx, k, head, found);
    }
    free(tuned);
    free(head);
    if (s != ATTNBWD_OK) {
        kernel_free(k);
        return err_wrap(s, "shape B=%lld H=%lld T=%lld dropout=%d", (long long)shape->batch, (long long)shape->heads,
                        (long long)shape->seq_len, shape->dropout);
    }
    if (k->origin == ATTNBWD_FROM_COMPILE) cache_note_compiled(ctx, k);
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
        if (s == ATTNBWD_OK && p->n_launches && !k->launch_args) s = edit_attention_parse_args(k);
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
    info->gpu_model = ctx->gpu.model;
    info->gpu_model_from = ctx->gpu_from;
    info->gpu_sm_count = ctx->gpu.sm_count;
    info->tuning_table = ctx->tuning_table_path;
    info->tuning_note = ctx->gpu.note;
    info->cache_mode = ctx->cache.mode;
    info->cache_read = ctx->cache.dir != NULL;
    info->user_tuning_table = ctx->user_tuning_note;
    return ATTNBWD_OK;
}

attnbwd_status attnbwd_cache_clear(attnbwd_ctx *ctx, uint64_t *files, uint64_t *bytes) {
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    uint64_t f = 0, b = 0;
    int err = cache_clear(&ctx->cache, &f, &b);
    if (!err) cache_clear_extras(&ctx->cache);
    if (files) *files = f;
    if (bytes) *bytes = b;
    if (err)
        return err_set(ATTNBWD_ERR_CACHE, "clearing the disk cache %s: %s (%llu files removed)",
                       ctx->cache.dir ? ctx->cache.dir : "", strerror(err), (unsigned long long)f);
    log_line(&ctx->log, ATTNBWD_LOG_INFO, "disk cache %s cleared: %llu files, %llu bytes", ctx->cache.dir ? ctx->cache.dir : "(off)",
             (unsigned long long)f, (unsigned long long)b);
    return ATTNBWD_OK;
}
