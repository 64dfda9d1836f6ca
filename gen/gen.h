/* Code generation: the embedded Lua state that turns a shape into a tile plan
 * and CUDA source. One Lua state per context, used under its mutex. */
#ifndef ATTNBWD_GEN_H
#define ATTNBWD_GEN_H

#include "attnbwd.h"

/* Streams and events of a plan: each lane runs on a stream of the library's
 * own, at the priority the plan gives it (lane_priority; by default lane 0,
 * the chain every output waits on, at the greatest),
 * forked from the caller's stream at the start and joined back at the end,
 * so that independent kernels run side by side. */
#define PLAN_MAX_LANES 4
#define PLAN_MAX_EVENTS 16
#define PLAN_MAX_WAITS 4
#define PLAN_MAX_ARGS 16 /* a launch's kernel arguments (the attention pass on wgmma takes 16) */
/* The most dynamic shared memory a block may use after opting in on sm_90
 * (the H100's and H200's): the scripts read it as attnbwd.max_shared_bytes
 * (lua/edit_attention_limits.lua's smem_limit) and size their kernels to
 * it; C only refuses a plan or a cache entry that asks for more. */
#define GEN_MAX_SHARED_BYTES (227 * 1024)

/* One kernel launch of a plan with several (problem 2): its function, its
 * launch shape, and its arguments by name ("in:grad_output", "ws:4096",
 * "f32:scale", "i64:24736"...; the problem's launch entry parses them once,
 * as the module loads, and binds the caller's values at each launch). It
 * runs on `lane` after the events in `waits` (each signalled by an earlier
 * launch), and records event `signal` (-1: none) when done. In plan order on
 * one stream every wait is met, so the launches may also run that way. */
typedef struct plan_launch {
    char *name;
    unsigned grid[3], block[3];
    unsigned shared_bytes;
    char **args;
    int n_args;
    int lane;
    int signal;
    int n_waits;
    int waits[PLAN_MAX_WAITS];
    int pdl;              /* may start before the launch ahead of it on its lane ends
                             (programmatic dependent launch; its kernel waits for that one) */
} plan_launch;

typedef struct kernel_plan {
    char *name;           /* kernel function name */
    char *source;         /* complete CUDA source */
    char *tiles;          /* "key=value ..." sorted by key: the tile choices */
    unsigned grid[3], block[3];
    unsigned shared_bytes;
    unsigned align;       /* byte alignment the kernel's fp32 pointers need (masks: align / 4) */
    char compile_arch[16]; /* NVRTC's target when the source needs more than the device's arch
                              ("sm_90a" for wgmma); "" means the context's arch */
    plan_launch *launches; /* NULL for a single-kernel plan (the fields above) */
    int n_launches;
    int n_lanes;           /* 1 + the highest lane of a launch (0 without launches) */
    int n_events;          /* 1 + the highest event signalled */
    int lane_priority[PLAN_MAX_LANES]; /* each lane's stream: 0 the least priority, 1 between, 2 the greatest
                                          (the plan's lane_priority; by default lane 0 the greatest, the rest the least;
                                          lane 0 at -1: the caller's stream) */
    size_t workspace_bytes;
    unsigned unordered_outputs; /* bit i: output i (problem 2's order) is a float sum in no fixed order (atomics),
                                   its last bits free to differ between runs; 0 for every output bit for bit */
} kernel_plan;

typedef struct gen_state gen_state;

/* Scripts come from the copies built into the library, or from the folder
 * $ATTNBWD_LUA_DIR (holding lua/ and templates/) for people editing them. */
attnbwd_status gen_open(gen_state **out);
void gen_close(gen_state *g);

/* Plans the kernel for shape on arch ("sm_90"). tiles_override: NULL, or
 * "key=value ..." pairs that replace the heuristic's choices (exploration and
 * tuning tables). Lua errors come back as ATTNBWD_ERR_LUA with a traceback;
 * a shape the script refuses comes back as its own status. */
attnbwd_status gen_plan(gen_state *g, const attnbwd_shape *shape, const char *arch,
                        const char *tiles_override, kernel_plan *out);
/* The limits gen_plan holds a plan to, for one read back from elsewhere (a
 * disk cache manifest): launch dimensions, shared memory, alignment, the
 * compile arch (only arch + "a"), lanes and events (sets n_lanes and
 * n_events), and names and arguments without white space. */
attnbwd_status gen_plan_check(kernel_plan *p, const char *arch);
void kernel_plan_free(kernel_plan *p);

/* The GPU model ("" for none), the text of the user's table (NULL for none;
 * it applies where it names that model) and the Lua module of the shipped
 * table the model gets (NULL for none): a plan without an override takes the
 * user's entry, else the shipped one's, before the heuristic. deterministic:
 * every plan adds no output by float atomics (a table entry's such choices
 * are taken out, an override's refused). */
attnbwd_status gen_configure(gen_state *g, const char *gpu_name, const char *user_tuning, int deterministic,
                             const char *shipped_table);

/* The tuning tables' entry for shape (*entry malloc'd), or *entry = NULL:
 * with the shape, arch, override and scripts, all a plan depends on. */
attnbwd_status gen_tuned(gen_state *g, const attnbwd_shape *shape, char **entry);

/* The candidate tile choices the problem's script offers for a shape, each as
 * a "key=value ..." string (free each and the array with free()). */
attnbwd_status gen_candidates(gen_state *g, const attnbwd_shape *shape, char ***tiles, size_t *n);

/* What the disk cache's keys call the scripts and templates plans are made
 * from: the build's SHA-256 of the embedded copies, or, with
 * $ATTNBWD_LUA_DIR, an XXH3-128 of every file of that folder's lua/ and
 * templates/ (names and bytes), read at the call. ATTNBWD_ERR_IO when the
 * folder cannot be read. */
#define GEN_SCRIPTS_HASH_LEN 96
attnbwd_status gen_scripts_hash(char *out, size_t len);

/* An embedded file by its repository path ("lua/render.lua"), or NULL. */
const char *gen_embedded(const char *path, size_t *len);

/* Lua chunks that are data (suites, tuning tables) run in a state of their
 * own with gen_open_data_libs: base, string, table and math, no file access
 * (no dofile, loadfile, io, os or require) and text chunks only (load refuses
 * binary chunks, string.dump is gone; every state of the library loads text
 * only, since Lua does not verify bytecode). */
struct lua_State;
void gen_open_data_libs(struct lua_State *L);

/* Loads text as a text chunk named chunkname ("@path" so messages read
 * path:line) and runs it under a budget of about `budget` Lua instructions,
 * leaving its one result on the stack. Errors (syntax, run time, over the
 * budget) are ATTNBWD_ERR_LUA "<what>: <Lua's message>" (what NULL: Lua's
 * message alone) and leave nothing. */
#define GEN_DATA_BUDGET 10000000LL /* a few tenths of a second; a table takes a few instructions an entry */
attnbwd_status gen_run_data(struct lua_State *L, const char *text, size_t len, const char *chunkname,
                            long long budget, const char *what);

/* Checks the text of a user's tuning table as gen_configure will run it: a
 * text chunk with no globals at all, within GEN_DATA_BUDGET, returning
 * { gpu = "<model>", entries = { [key] = "tiles", ... } }. chunkname names
 * it in messages ("@/path/tuning.lua" reads /path/tuning.lua:LINE). On
 * success gpu receives the table's model. Errors are ATTNBWD_ERR_LUA with
 * Lua's message (the file and line) or what is missing. */
attnbwd_status gen_check_tuning(const char *text, size_t len, const char *chunkname, char *gpu, size_t gpu_len);

#endif
