/* The manifest of a kernel in the disk cache: readable lines in three parts.
 *
 * The head names everything the kernel is a function of, and nothing else
 * (no paths, no device): the manifest format, the library, Lua and NVRTC
 * versions, the scripts and templates (their build-time hash, or the hash of
 * the $ATTNBWD_LUA_DIR files), the arch and NVRTC options, the shape,
 * whether the context is deterministic, and the caller's tile override or the
 * tuning tables' entry for the shape. The cache key is the head's hash, so a
 * kernel is found without planning or rendering: the plan (tiles, launches)
 * and the source are pure functions of the head, computed once when the
 * kernel was compiled.
 *
 *   attnbwd-cache-manifest 2
 *   library 0.1.0
 *   lua Lua 5.4.6
 *   nvrtc 13.0
 *   scripts embedded sha256:<64 hex> | folder xxh128:<32 hex>
 *   arch sm_90
 *   options <NVRTC options for the arch>
 *   shape problem=2 B=4 H=16 T=640 dropout=1 precision=0
 *   deterministic 0
 *   override <bytes> <text> | tuned <bytes> <text> | tuned -
 *
 * Then the GPU model the kernel was made for (for `attnbwd cache list`; it is
 * not part of the key, as the tiles already say all it changes):
 *
 *   gpu NVIDIA H100 80GB HBM3 (tuning_h100)
 *
 * Then the plan, as read back on a disk hit instead of asking Lua, the
 * source's hash and the source itself (kept for ATTNBWD_CACHE_VERIFY=1,
 * which renders again and compares, and for looking at):
 *
 *   tiles <key=value ...>
 *   kernel <name>
 *   grid X Y Z
 *   block X Y Z
 *   shared N
 *   align N
 *   compile_arch sm_90a | -
 *   options <NVRTC options it was compiled with>
 *   workspace N
 *   unordered N
 *   lane_priority P0 P1 P2 P3
 *   launches N
 *   launch <name> grid X Y Z block X Y Z shared N lane L signal S pdl 0|1 waits N W... args N A...
 *   source-xxh128 <32 hex>
 *   source
 *   <the CUDA source>
 */
#ifndef ATTNBWD_MANIFEST_H
#define ATTNBWD_MANIFEST_H

#include <stddef.h>

#include "gen.h"

typedef struct manifest_inputs {
    const char *scripts; /* gen_scripts_hash's */
    const char *arch;    /* the context's */
    const attnbwd_shape *shape;
    int deterministic;
    const char *override; /* the caller's tiles, or NULL */
    const char *tuned;    /* without an override: the tables' entry, or NULL */
} manifest_inputs;

/* The head (malloc'd), NULL when out of memory. */
char *manifest_head(const manifest_inputs *in);

/* The length of the head a stored manifest of len bytes begins with (the
 * text manifest_head wrote, whose cache_key is the entry's key): > 0; 0 for
 * a manifest of another format (another library's, keyed by its own rules);
 * -1 for one of this format whose head does not read. */
long manifest_head_len(const char *manifest, size_t len);

/* The length of a stored manifest's launch part: everything up to and with
 * its "source" line (head, gpu line, plan, the source's hash), which is all a
 * disk hit reads; the rest is the source text. len for a manifest without a
 * source line after its head (for one of another format: after its start). */
size_t manifest_launch_len(const char *manifest, size_t len);

/* The whole manifest (malloc'd): head, the gpu line (model "" for none,
 * table NULL for none), the plan compiled with options, and its source.
 * NULL when out of memory or when a name, argument or the tiles would not
 * stay on one line (gen_plan refuses such plans). */
char *manifest_full(const char *head, const char *model, const char *table, const kernel_plan *p,
                    const char *options);

/* The manifest's lines after its head and gpu line, the part two manifests
 * of one head must agree on; NULL for a manifest without them. */
const char *manifest_body(const char *manifest, size_t head_len);

/* The plan read back from a stored manifest whose first head_len bytes are
 * its head, for a context of arch; p->source stays NULL. ATTNBWD_ERR_CACHE
 * for a manifest that does not parse, ATTNBWD_ERR_LUA (gen_plan_check's) for
 * a plan past the limits; the message says what is wrong. */
attnbwd_status manifest_plan(const char *manifest, size_t head_len, const char *arch, kernel_plan *p);

#endif
