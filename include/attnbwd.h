/*
 * attnbwd: attention backward passes as CUDA kernels written, compiled and
 * cached at run time, one kernel specialised for each shape.
 *
 * The only public header. Every call returns an attnbwd_status; on failure,
 * attnbwd_last_error() says what was wrong (which argument, which limit,
 * NVRTC's log) for the calling thread. The library never prints unless a
 * log level asks it to, and never exits.
 *
 * Pipeline of attnbwd_get_kernel: memory cache -> disk cache of cubins ->
 * embedded Lua plans the tiles and renders CUDA source -> NVRTC -> disk
 * cache (atomic) -> module loaded in the device's primary context at the
 * first launch, so pointers from cudaMalloc or PyTorch work as they are.
 */
#ifndef ATTNBWD_H
#define ATTNBWD_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ATTNBWD_API __declspec(dllexport)
#else
#define ATTNBWD_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNBWD_VERSION_MAJOR 0
#define ATTNBWD_VERSION_MINOR 1
#define ATTNBWD_VERSION_PATCH 0
#define ATTNBWD_VERSION_STRING "0.1.0"

typedef enum attnbwd_status {
    ATTNBWD_OK = 0,
    ATTNBWD_ERR_INVALID_ARGUMENT, /* null pointer, value out of range, mismatch */
    ATTNBWD_ERR_UNSUPPORTED,      /* a shape past a limit of the generator */
    ATTNBWD_ERR_OUT_OF_MEMORY,
    ATTNBWD_ERR_LUA,              /* a tile script or template failed */
    ATTNBWD_ERR_COMPILE,          /* NVRTC rejected the source; the log is in the message */
    ATTNBWD_ERR_CACHE,            /* the disk cache could not be used as asked */
    ATTNBWD_ERR_NO_DRIVER,        /* libcuda.so.1 could not be loaded */
    ATTNBWD_ERR_NO_DEVICE,        /* no CUDA device, or the ordinal is out of range */
    ATTNBWD_ERR_CUDA,             /* a driver call failed; its name is in the message */
    ATTNBWD_ERR_IO                /* a file could not be read */
} attnbwd_status;

/* Short name of a status, e.g. "ATTNBWD_ERR_COMPILE". Never NULL. */
ATTNBWD_API const char *attnbwd_status_name(attnbwd_status s);

/* The message of the last failed call on this thread ("" when none). Valid
 * until the next call into the library on this thread. */
ATTNBWD_API const char *attnbwd_last_error(void);

typedef enum attnbwd_problem {
    ATTNBWD_SOFTMAX_DROPOUT_BWD = 1, /* spec: softmax_dropout_bwd.md */
    ATTNBWD_EDIT_ATTENTION_BWD = 2   /* spec: edit_attention_bwd.md */
} attnbwd_problem;

typedef enum attnbwd_log_level {
    ATTNBWD_LOG_QUIET = 0,
    ATTNBWD_LOG_WARN = 1,  /* default: cache trouble, once per cause */
    ATTNBWD_LOG_INFO = 2,  /* a line per compile, disk hit and miss */
    ATTNBWD_LOG_DEBUG = 3
} attnbwd_log_level;

typedef void (*attnbwd_log_fn)(int level, const char *line, void *user);

/* options.device: the device of the calling thread's current CUDA context
 * (the one cudaSetDevice or PyTorch made current) when attnbwd_open runs,
 * or device 0 where the thread has none. */
#define ATTNBWD_DEVICE_CURRENT (-1)

typedef struct attnbwd_options {
    int device;             /* CUDA device ordinal (default ATTNBWD_DEVICE_CURRENT) */
    const char *cache_dir;  /* NULL: $ATTNBWD_CACHE_DIR, $XDG_CACHE_HOME/attnbwd, ~/.cache/attnbwd */
    int disk_cache;         /* 1 (default) use the disk cache; 0 memory only (ATTNBWD_CACHE=0 also);
                               ATTNBWD_DISK_CACHE_READ_ONLY (2): a shared read-only store, read and checked,
                               never written or locked (ATTNBWD_CACHE=ro also). A folder read and written must
                               belong to the user (or root) and be writable by nobody else; a read-only store
                               may belong to anyone but not be writable by every user. A folder that fails this
                               is refused with a warning: kernels are then kept in memory only */
    const char *arch;       /* "sm_90" etc.: compile for it, no GPU needed. NULL: the device's */
    int log_level;          /* attnbwd_log_level; $ATTNBWD_LOG overrides when set */
    attnbwd_log_fn log_fn;  /* NULL: lines go to stderr, prefixed "attnbwd: " */
    void *log_user;
    int deterministic;      /* 0 (default): tuned tiles may add some outputs by float atomics, whose last bits
                               then vary from run to run (attnbwd_kernel_info.unordered_outputs says which);
                               1: every output the same bits every run (tuning entries' atomic sums taken out,
                               explicit tiles with them refused). $ATTNBWD_DETERMINISTIC=1 also sets it */
    uint64_t cache_max_bytes; /* the disk cache's size budget: past it the least recently used entries go.
                                 0 (default): $ATTNBWD_CACHE_MAX_BYTES, else ATTNBWD_CACHE_DEFAULT_MAX_BYTES */
    const char *gpu_model;  /* NULL: $ATTNBWD_GPU_MODEL, else the device's. The GPU the kernels are for, by the
                               name its driver reports ("NVIDIA H100 80GB HBM3") or a short one (h100, h100-pcie,
                               h100-nvl, h200, h200-nvl): its tuning table picks the tiles and, without arch, its
                               arch (sm_90) the target, so kernels made on another machine are the ones that GPU
                               looks up. A table goes to its family's models of the SM count it was measured
                               with (README.md, "GPU models and
                               tuning tables"); attnbwd_ctx_info says which one a context has */
} attnbwd_options;

/* 1 GiB, as the CUDA driver's own JIT cache. */
#define ATTNBWD_CACHE_DEFAULT_MAX_BYTES (UINT64_C(1) << 30)
#define ATTNBWD_DISK_CACHE_READ_ONLY 2 /* options.disk_cache: a shared read-only store */

/* Fill with the defaults above. */
ATTNBWD_API void attnbwd_options_init(attnbwd_options *opt);

typedef struct attnbwd_ctx attnbwd_ctx;

/* opt may be NULL for the defaults. Opening never needs a GPU; it fails with
 * ATTNBWD_ERR_NO_DRIVER / _NO_DEVICE only when no arch is given and none can
 * be read off a device. */
ATTNBWD_API attnbwd_status attnbwd_open(const attnbwd_options *opt, attnbwd_ctx **out);
/* Unloads every module and frees every kernel of the context. NULL is fine. */
ATTNBWD_API void attnbwd_close(attnbwd_ctx *ctx);

/* Matrix products of problem 2: fp32 accumulation always. */
typedef enum attnbwd_precision {
    ATTNBWD_PRECISION_TF32 = 0, /* tensor cores on TF32 operands (default), rounded to nearest; on sm_90 the
                                   A of grad_hidden_states (grad_qkv) is truncated by the tensor cores instead */
    ATTNBWD_PRECISION_FP32 = 1, /* exact fp32 FMA, no tensor cores */
    ATTNBWD_PRECISION_FP16 = 2  /* tensor cores on fp16 operands (inputs, gA and gS must fit fp16's range);
                                   on sm_90 at B = 1, where gS is an fp32 output, gQ's product is TF32 */
} attnbwd_precision;

/* Everything that changes the generated code. Unused fields must be 0. */
typedef struct attnbwd_shape {
    attnbwd_problem problem;
    int64_t batch;
    int64_t heads;     /* problem 1: n_heads; problem 2: must be 0 or 16 */
    int64_t seq_len;
    int dropout;       /* problem 1: 1 when p_dropout > 0 will be passed, else 0 */
    int precision;     /* problem 2: an attnbwd_precision; problem 1: 0 */
} attnbwd_shape;

typedef struct attnbwd_kernel attnbwd_kernel;

/* The kernel for a shape. A second call for the same shape returns the same
 * kernel from memory (no Lua, disk or compile). Safe from several threads at
 * once; kernels live until attnbwd_close. */
ATTNBWD_API attnbwd_status attnbwd_get_kernel(attnbwd_ctx *ctx, const attnbwd_shape *shape,
                                              attnbwd_kernel **out);

/* Exploration: the kernel for a shape built with the given tile choices
 * ("key=value ...", over the heuristic's; see attnbwd_candidates) instead of
 * the heuristic's or a tuning table's. Cached like any other kernel. Tiles
 * that cannot build a correct kernel are refused with the reason. */
ATTNBWD_API attnbwd_status attnbwd_get_kernel_tiles(attnbwd_ctx *ctx, const attnbwd_shape *shape,
                                                    const char *tiles, attnbwd_kernel **out);

/* The candidate tile choices the problem's Lua script offers for a shape, the
 * heuristic's first. Free each string and the array with attnbwd_free. */
ATTNBWD_API attnbwd_status attnbwd_candidates(attnbwd_ctx *ctx, const attnbwd_shape *shape, char ***tiles,
                                              size_t *n);

/* Where a kernel came from when it was first made in this context. */
typedef enum attnbwd_origin {
    ATTNBWD_FROM_COMPILE = 0,
    ATTNBWD_FROM_DISK = 1,
    ATTNBWD_FROM_MEMORY = 2 /* only reported by prewarm, for kernels already held */
} attnbwd_origin;

typedef struct attnbwd_kernel_info {
    attnbwd_shape shape;
    const char *name;         /* kernel function name */
    const char *arch;         /* e.g. "sm_90" */
    unsigned grid[3], block[3];
    unsigned shared_bytes;    /* dynamic shared memory */
    const char *tiles;        /* the tile choices, "key=value ..." */
    const char *cache_key;    /* 32 hex digits */
    attnbwd_origin origin;
    double build_seconds;     /* time to find or compile it the first time */
    size_t cubin_bytes;
    unsigned unordered_outputs; /* problem 2: bit i set where output i (the args' order: grad_hidden_states,
                                   grad_qkv_weight, ... grad_cross_edit_bias) is summed by float atomics, its
                                   last bits free to differ between runs; 0: every output bit for bit */
} attnbwd_kernel_info;

/* Strings stay valid while the kernel does. */
ATTNBWD_API attnbwd_status attnbwd_kernel_get_info(const attnbwd_kernel *k, attnbwd_kernel_info *info);

/* Problem 1, masked softmax with attention dropout, backward.
 * grad_output, p_attn, grad_scores: fp32 [B,H,T,T]; mask: bool [B,1,T,T];
 * dropout_mask: bool [B,H,T,T], not read when p_dropout == 0 (may be NULL then).
 * p_dropout: 0 <= p < 1, and > 0 exactly when the kernel's shape.dropout is 1.
 * All pointers are device pointers: the fp32 ones 16-byte aligned and the
 * masks 4-byte aligned, as cudaMalloc and PyTorch give them (kernels for
 * T < 16 with T % 4 != 0 need less; a misaligned pointer is refused).
 * stream: a CUstream / cudaStream_t (NULL: the legacy stream).
 * Each new set of pointers is checked with the driver before the launch
 * (see attnbwd_edit_attention_bwd); grad_scores may not share memory with
 * the inputs. */
ATTNBWD_API attnbwd_status attnbwd_softmax_dropout_bwd(attnbwd_kernel *k, const float *grad_output,
                                                       const float *p_attn, const uint8_t *mask,
                                                       const uint8_t *dropout_mask, float p_dropout,
                                                       float *grad_scores, void *stream);

/* Problem 2, region-aware self-attention with edit bias, backward
 * (spec: docs/spec/edit_attention_bwd.md). Shapes: B = shape.batch,
 * T = shape.seq_len (limits: T <= 1024, B <= 4095, B*T <= 2^26; past them
 * ATTNBWD_ERR_UNSUPPORTED); hidden 1024, 16 heads, head_dim 64 are fixed. All
 * pointers are fp32 device pointers, contiguous, in the spec's layouts,
 * 16-byte aligned (as cudaMalloc and PyTorch give them; the tiles load 16
 * bytes at a time). The workspace holds intermediates (see
 * attnbwd_edit_attention_workspace).
 * Reads only: grad_output, hidden_states, edit_region_mask, qkv_weight,
 * out_weight, attention_mask, query, key, value, attention_probs,
 * attention_probs_dropped, attention_output, scale and dropout_p. Relies on
 * the forward pass's relations: attention_probs_dropped = probs *
 * dropout_mask / (1-p) (so dropout_mask is not read; dropout_p only bounds
 * gS, with attention_probs_dropped <= 1/(1-p), where TF32 stores it in fp16
 * with a power-of-two scale) and attention_output = attention_probs_dropped
 * @ value per head (the softmax backward's row sums come from it). Every sum runs in a fixed order: the same inputs give the
 * same bits on every run (the default tiles; the exploration candidate
 * gs_store=0 sums gQ and grad_edit_region_bias with float atomics instead,
 * and splitk_red=1 or 2 the split products' K slices into grad_hidden_states,
 * grad_qkv_weight and grad_out_weight).
 * A call with the same arguments as the kernel's call before it (every
 * pointer, scale, dropout_p and the workspace) is captured into a CUDA graph
 * the kernel keeps, and replayed while they stay the same: one launch on
 * `stream`, the same results; $ATTNBWD_GRAPHS=0 turns that off. While
 * `stream` is being captured by the caller, the launches go into the
 * caller's graph instead.
 * Before the first launch of a new set of pointers each buffer the kernels
 * read or write (the workspace too) is checked with the driver: memory the
 * device can reach, of the context's device, long enough for the shape to
 * the end of its allocation; and no output shares memory with another
 * argument. A failed check is ATTNBWD_ERR_INVALID_ARGUMENT naming the
 * argument, nothing launched ($ATTNBWD_POINTER_CHECKS=0 skips the driver's
 * part). */
typedef struct attnbwd_edit_attention_args {
    /* inputs */
    const float *grad_output;             /* [B,T,1024] */
    const float *hidden_states;           /* [B,T,1024] */
    const float *edit_region_mask;        /* [B,T], 0/1 */
    const float *qkv_weight;              /* [3072,1024] */
    const float *qkv_bias;                /* [3072] (not needed by the backward pass) */
    const float *out_weight;              /* [1024,1024] */
    const float *out_bias;                /* [1024] (not needed by the backward pass) */
    const float *edit_region_bias;        /* [16,1024,1024] (not needed by the backward pass) */
    const float *within_edit_bias;        /* [16] */
    const float *cross_edit_bias;         /* [16] */
    const float *attention_mask;          /* [B,T], 1 valid, 0 masked */
    const float *query, *key, *value;     /* [B,16,T,64], unscaled */
    const float *attention_scores;        /* [B,16,T,T] (not needed by the backward pass) */
    const float *attention_probs;         /* [B,16,T,T] */
    const float *attention_probs_dropped; /* [B,16,T,T] = probs * dropout_mask / (1-p) */
    const float *attention_output;        /* [B,T,1024] */
    const float *dropout_mask;            /* [B,16,T,T], 0/1 */
    float scale, dropout_p;
    /* outputs */
    float *grad_hidden_states;            /* [B,T,1024] */
    float *grad_qkv_weight;               /* [3072,1024] */
    float *grad_qkv_bias;                 /* [3072] */
    float *grad_out_weight;               /* [1024,1024] */
    float *grad_out_bias;                 /* [1024] */
    float *grad_edit_region_bias;         /* [16,1024,1024], zero outside [:T,:T] */
    float *grad_within_edit_bias;         /* [16] */
    float *grad_cross_edit_bias;          /* [16] */
    /* scratch */
    void *workspace;
    size_t workspace_bytes;
} attnbwd_edit_attention_args;

/* Bytes of device workspace attnbwd_edit_attention_bwd needs for k's shape. */
ATTNBWD_API size_t attnbwd_edit_attention_workspace(const attnbwd_kernel *k);

ATTNBWD_API attnbwd_status attnbwd_edit_attention_bwd(attnbwd_kernel *k, const attnbwd_edit_attention_args *args,
                                                      void *stream);

/* Generation without compiling: the CUDA source and the tile choices for a
 * shape. Free both with attnbwd_free. */
ATTNBWD_API attnbwd_status attnbwd_generate(attnbwd_ctx *ctx, const attnbwd_shape *shape,
                                            char **source, char **tiles);
ATTNBWD_API void attnbwd_free(void *p);

/* Prewarm: find in the cache or compile every shape's kernel. The callback,
 * if any, runs once per shape, in order of completion, on the calling thread. */
typedef struct attnbwd_prewarm_event {
    size_t index, done, total;
    const attnbwd_shape *shape;
    attnbwd_status status;     /* ATTNBWD_OK or why this shape failed */
    const char *message;       /* "" on success */
    attnbwd_origin origin;
    double seconds;
} attnbwd_prewarm_event;

typedef void (*attnbwd_progress_fn)(const attnbwd_prewarm_event *ev, void *user);

typedef struct attnbwd_prewarm_summary {
    size_t compiled, from_disk, from_memory, failed;
    double seconds;
} attnbwd_prewarm_summary;

/* threads <= 0: one per online core. Returns ATTNBWD_OK only when every
 * shape succeeded; summary (may be NULL) counts each kind. */
ATTNBWD_API attnbwd_status attnbwd_prewarm(attnbwd_ctx *ctx, const attnbwd_shape *shapes, size_t n,
                                           int threads, attnbwd_progress_fn progress, void *user,
                                           attnbwd_prewarm_summary *summary);

/* Facts for `attnbwd info`. Strings stay valid while ctx does. */
typedef struct attnbwd_ctx_info {
    const char *library_version;
    int nvrtc_major, nvrtc_minor;
    int driver_version;         /* e.g. 13000; 0 when no driver */
    const char *driver_error;   /* why there is no driver/device, or "" */
    const char *device_name;    /* "" when none */
    const char *arch;           /* target of this context */
    const char *cache_dir;      /* "" when the disk cache is off */
    int disk_cache;             /* 1 when entries are read and written */
    uint64_t cache_bytes;       /* size of the entries now in the cache */
    uint64_t cache_entries;
    int device;                 /* the CUDA ordinal kernels launch on (options.device) */
    int deterministic;          /* options.deterministic, or $ATTNBWD_DETERMINISTIC */
    const char *gpu_model;      /* the model the tiles are planned for ("" when none) */
    const char *gpu_model_from; /* "the device", "options.gpu_model", "ATTNBWD_GPU_MODEL" or "none" */
    int gpu_sm_count;           /* its SMs (the device's, or the known model's) */
    const char *tuning_table;   /* the shipped table it gets, "lua/tuning_h100.lua", or "" for the heuristic */
    const char *tuning_note;    /* which table and why, in words */
    const char *cache_mode;     /* "read-write", "read-only (why)" or "off (why)", e.g. "off (refused: ...)" */
    int cache_read;             /* 1 when entries are read (read-write or read-only) */
    const char *user_tuning_table; /* the user's table (<cache folder>/tuning.lua), which wins over
                                      tuning_table: its path and model when in effect, else "built-in"
                                      (and why the user's is not used) */
} attnbwd_ctx_info;

ATTNBWD_API attnbwd_status attnbwd_ctx_get_info(attnbwd_ctx *ctx, attnbwd_ctx_info *info);

/* Empties the context's disk cache folder: every compiled kernel, and
 * leftovers of crashed writers. Kernels already in memory stay usable.
 * files/bytes (may be NULL) count what was removed (each entry's info file
 * goes with it). The counts of attnbwd_cache_get_stats start again. Fails with
 * ATTNBWD_ERR_CACHE when the folder is read-only or an entry cannot go;
 * with the cache off there is nothing to do. */
ATTNBWD_API attnbwd_status attnbwd_cache_clear(attnbwd_ctx *ctx, uint64_t *files, uint64_t *bytes);

/* ---- the disk cache's tools (`attnbwd cache ...`) ---------------------------
 * They work on the context's cache folder and need no GPU. An entry's last use
 * is when it was written or last found by any process; the budget
 * (options.cache_max_bytes) evicts the least recently used first. */

typedef struct attnbwd_cache_stats {
    uint64_t entries, bytes;           /* in the folder now */
    uint64_t max_bytes;                /* the budget */
    uint64_t hits;                     /* kernels found in the folder (disk hits) */
    uint64_t misses;                   /* kernels compiled and written into it */
    uint64_t evicted, evicted_bytes;   /* entries removed to keep to the budget, and by prune */
    int64_t since;                     /* unix seconds the counts run from (the first count, or the last
                                          attnbwd_cache_clear); 0: nothing counted yet */
} attnbwd_cache_stats;

/* The folder's counts, all processes' (each adds its own after every write and
 * at attnbwd_close), this context's not yet added included. */
ATTNBWD_API attnbwd_status attnbwd_cache_get_stats(attnbwd_ctx *ctx, attnbwd_cache_stats *stats);

typedef struct attnbwd_cache_entry {
    const char *key;             /* 32 hex digits */
    uint64_t bytes;              /* the entry file's size */
    int64_t last_use;            /* unix seconds: written or last found */
    const char *problem;         /* NULL: sound; else why it cannot be used ("checksum mismatch", ...) */
    int current;                 /* 1: of this library and NVRTC version; 0: none of its kernels can find it */
    const char *library_version; /* these five from the entry's manifest; "" when it is damaged */
    const char *nvrtc_version;
    const char *arch;            /* e.g. "sm_90a" */
    const char *kernel;          /* the kernel function's name */
    const char *tiles;           /* "key=value ..." */
    int has_shape;               /* shape and gpu_model known (written with the entry) */
    attnbwd_shape shape;
    const char *gpu_model;       /* the GPU model the tuning tables were matched for ("" none or unknown) */
} attnbwd_cache_entry;

/* Return nonzero to stop the listing. The entry's strings live during the call. */
typedef int (*attnbwd_cache_entry_fn)(const attnbwd_cache_entry *entry, void *user);

/* attnbwd_cache_list's flags: read every entry whole and check its checksum and
 * cubin (without it: the header and the manifest only). */
#define ATTNBWD_CACHE_VERIFY 1u

/* Calls fn for each entry of the folder, most recently used first. damaged (may
 * be NULL) counts the entries with a problem. Never changes the folder. */
ATTNBWD_API attnbwd_status attnbwd_cache_list(attnbwd_ctx *ctx, unsigned flags, attnbwd_cache_entry_fn fn,
                                              void *user, uint64_t *damaged);

/* Removes the least recently used entries until the folder holds at most
 * max_bytes (0: the context's budget), and every entry unused for
 * older_than_seconds (0: no age limit). files/bytes (may be NULL) count what went.
 * ATTNBWD_ERR_CACHE when the folder is read-only or off, or its lock is held
 * past a few seconds. */
ATTNBWD_API attnbwd_status attnbwd_cache_prune(attnbwd_ctx *ctx, uint64_t max_bytes, int64_t older_than_seconds,
                                               uint64_t *files, uint64_t *bytes);

/* Writes one archive file of the entries whose key starts with one of
 * key_prefixes (n == 0: every entry) to path, atomically (written beside it and
 * renamed). A prefix that selects nothing is an error; damaged entries and
 * entries of another version are left out with a warning. */
ATTNBWD_API attnbwd_status attnbwd_cache_export(attnbwd_ctx *ctx, const char *path, const char *const *key_prefixes,
                                                size_t n, uint64_t *entries, uint64_t *bytes);

/* Adds an archive's entries to the folder. Every entry is checked first; an
 * archive of another format, library or NVRTC version, or with any entry
 * damaged, is refused whole, naming why. Each entry is then written atomically. */
ATTNBWD_API attnbwd_status attnbwd_cache_import(attnbwd_ctx *ctx, const char *path, uint64_t *entries,
                                                uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
