/* What the runtime's files share: the context and kernel structures and the
 * stage functions that pass between them. Not installed. */
#ifndef ATTNBWD_INTERNAL_H
#define ATTNBWD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "attnbwd.h"
#include "cache.h"
#include "driver.h"
#include "gen.h"
#include "gpu_model.h"
#include "log.h"

struct attnbwd_kernel {
    attnbwd_ctx *ctx;
    attnbwd_shape shape;
    char *override;          /* tile override it was built with, or NULL */
    kernel_plan plan;        /* name, source, tiles, grid, block, shared bytes */
    char arch[16];
    char key[CACHE_KEY_HEX + 1];
    void *cubin;
    size_t cubin_len;
    attnbwd_origin origin;
    double build_seconds;
    /* Loaded into the primary context at the first launch. */
    pthread_mutex_t load_mu;
    void *module;
    void **functions;        /* one per plan.launches entry (problem 2) */
    struct launch_arg *launch_args; /* problem 2: plan.launches[i]'s arguments at [i * PLAN_MAX_ARGS],
                                       parsed from their specs when the module loads */
    _Atomic(void *) function; /* the plan's own kernel; set last: "loaded" */
    /* A plan of several lanes: the library's streams (lane_streams[0] at the
     * greatest priority, for the chain every output waits on), the plan's
     * events, and fork/join events. Created with the module; one launch
     * sequence at a time uses them. */
    pthread_mutex_t launch_mu;
    void *lane_streams[PLAN_MAX_LANES];
    void *events[PLAN_MAX_EVENTS];
    void *fork_event;
    void *join_events[PLAN_MAX_LANES];
    /* A call made twice in a row with the same arguments is captured into a
     * CUDA graph, replayed while they stay the same (call_graph.c): one
     * launch for the plan's kernels, and no gaps for the lanes' events.
     * Guarded by launch_mu. */
    void *capture_stream;
    void *graph_exec;
    attnbwd_edit_attention_args graph_args, last_args;
    int have_last, graph_failed;
    /* The last arguments whose memory passed pointers_check (problem 2;
     * under launch_mu), and problem 1's, as a hash of its pointers (its calls
     * take no lock). */
    attnbwd_edit_attention_args checked_args;
    int have_checked;
    _Atomic uint64_t checked_hash;
    unsigned long graph_replays; /* for the tests */
};

/* The memory cache: shape (+ tile override) -> kernel, with a "being built"
 * state so that threads asking for the same shape wait for one build. */
typedef struct kernel_table {
    pthread_mutex_t mu;
    pthread_cond_t built;
    struct table_slot *slots;
    size_t cap, len;
} kernel_table;

/* tuning_file.c: the user's tuning table, <cache folder>/tuning.lua. */
typedef struct tuning_file {
    char path[4096]; /* "" when there is no folder or no file */
    char gpu[128];   /* the GPU model the table says it was measured on */
    char rejected[640]; /* why the file is not used ("" when it is, or there is none) */
} tuning_file;

struct attnbwd_ctx {
    logger log;
    int device_ordinal;
    char arch[16];
    int have_device;
    drv_device dev;
    char driver_error[512];
    int driver_version;
    disk_cache cache;
    gen_state *gen;
    kernel_table table;
    char *dump_dir;          /* $ATTNBWD_DUMP_DIR: sources, logs, cubins */
    int one_stream;          /* $ATTNBWD_ONE_STREAM: plans run on the caller's stream alone */
    int lane_priority;       /* $ATTNBWD_LANE_PRIORITY != 0: lane 0 on our high-priority stream */
    int graphs;              /* $ATTNBWD_GRAPHS != 0 (the default): repeated calls replay a CUDA graph */
    int pointer_checks;      /* $ATTNBWD_POINTER_CHECKS != 0 (the default): pointers_check asks the driver */
    int deterministic;       /* options.deterministic or $ATTNBWD_DETERMINISTIC: no output summed by atomics */
    gpu_choice gpu;          /* the GPU model the tiles are for, and its shipped tuning table */
    const char *gpu_from;    /* where the model came from: "the device", "options.gpu_model", ... */
    char tuning_table_path[64]; /* "lua/<table>.lua" for attnbwd_ctx_info */
    char scripts_hash[GEN_SCRIPTS_HASH_LEN]; /* the disk cache keys' name for the scripts (gen_scripts_hash) */
    int verify_hits;         /* $ATTNBWD_CACHE_VERIFY=1: a disk hit renders again and compares */
    tuning_file tuning;      /* the user's tuning table as found at open */
    char user_tuning_note[1024]; /* for ctx_info.user_tuning_table: which table is in effect */
};

/* kernel_table.c */
void table_init(kernel_table *t);
void table_destroy(kernel_table *t, void (*free_kernel)(attnbwd_kernel *));
/* Finds or builds the kernel for (shape, override). build() runs without the
 * table lock, once per key even when several threads ask at once. *hit is 1
 * when the kernel was already in memory. */
attnbwd_status table_get(kernel_table *t, const attnbwd_shape *shape, const char *override,
                         attnbwd_status (*build)(attnbwd_ctx *, const attnbwd_shape *, const char *,
                                                 attnbwd_kernel **),
                         attnbwd_ctx *ctx, attnbwd_kernel **out, int *hit);

/* api.c */
attnbwd_status shape_validate(const attnbwd_shape *s);
attnbwd_status kernel_get(attnbwd_ctx *ctx, const attnbwd_shape *shape, const char *override,
                          attnbwd_kernel **out, int *memory_hit);
/* Loads the module at the first launch; fails clearly without a device. */
attnbwd_status kernel_ensure_loaded(attnbwd_kernel *k);

/* call_graph.c: k's graph captured from one run of launch on a stream of
 * k's own (replacing any graph before it), its replay on stream, and its
 * release with the kernel. */
typedef attnbwd_status (*plan_launch_fn)(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream);
attnbwd_status graph_capture(attnbwd_kernel *k, plan_launch_fn launch, const attnbwd_edit_attention_args *args);
attnbwd_status graph_replay(attnbwd_kernel *k, void *stream);
void graph_free(attnbwd_kernel *k);

/* Launches [first, first + count) of a problem-2 plan in plan order on
 * `stream`, arguments unchecked (attnbwd_edit_attention_bwd checks them and
 * runs the plan on its lanes); the check harness times kernels one by one
 * with it, and compares the lanes' outputs with plan order's. */
/* Parses every launch's argument specs of a problem-2 plan into
 * k->launch_args, once, as the module loads: a launch then only reads the
 * caller's values. ATTNBWD_ERR_LUA for a spec no launch can bind. */
attnbwd_status edit_attention_parse_args(attnbwd_kernel *k);

attnbwd_status edit_attention_launch_range(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream,
                                           int first, int count);

/* dump.c */
void dump_kernel(const attnbwd_ctx *ctx, const attnbwd_kernel *k, const char *options,
                 const char *log, const char *manifest);

/* cubin_check.c: NULL when data looks like a cubin NVRTC made for arch's SM
 * (ELF for CUDA, an executable, tables inside the file), else why not. */
const char *cubin_check(const void *data, size_t len, const char *arch);

/* tuning_file.c (the tuning_file struct is above attnbwd_ctx) */
/* Reads and checks the table (a regular file, not a symlink, at most 1 MiB,
 * a Lua chunk returning { gpu = "...", entries = {...} } within the
 * instruction budget). Returns its text (malloc'd) or NULL; a table that is
 * there but refused is a warning at the default level naming the file, the
 * line and why, and t->rejected says so. */
char *tuning_file_read(const disk_cache *c, const logger *log, tuning_file *t);

double now_seconds(void);

/* cache_api.c: after a kernel was compiled, what it is for beside its entry;
 * cache clear's removal of those and of the counts. */
void cache_note_compiled(attnbwd_ctx *ctx, const attnbwd_kernel *k);
void cache_clear_extras(disk_cache *c);

#endif
