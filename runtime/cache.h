/* The disk cache of compiled kernels.
 *
 * One file per entry, <dir>/<key>.atbc, key = 32 hex digits of XXH3-128 of
 * the manifest's head. The manifest is readable text (runtime/manifest.h):
 * its head names everything the kernel is a function of (format, library,
 * Lua and NVRTC versions, the scripts' hash, options, arch, shape, tile
 * inputs), the rest the plan and the full source; it is stored in the entry
 * and its head compared byte for byte on read, so even a hash collision
 * cannot return a wrong kernel.
 *
 * File layout (little-endian), format 2:
 *   "ATBWDC\r\n" magic (8) | u32 format | u32 manifest_len | u64 payload_len
 *   | u64 launch checksum | u32 launch_len | u32 0 | u64 source checksum
 *   | manifest | payload (the cubin)
 * launch_len is the manifest's length up to its source text (head, gpu line,
 * plan and the source's hash: manifest_launch_len); the launch checksum is
 * XXH3-64 of (those bytes || payload), the source checksum XXH3-64 of the
 * rest of the manifest. A disk hit reads and checks only what a launch uses
 * (the launch part and the cubin); the source is read and checked where it
 * is compared or shipped (cache_get, cache_get_head, the tools).
 * Written to a temporary file in the same directory, fsync'd, renamed into
 * place: no reader sees half a file. A bad entry (short, wrong magic or
 * checksum) is moved aside to <key>.bad-<pid>, reported, and rebuilt.
 *
 * Two processes that miss the same key compile once: cache_lock() takes
 * <key>.lock with flock, waiting a bounded time, after which the caller
 * compiles without it.
 *
 * Trust: whoever can write the folder chooses the kernels we launch, so a
 * folder is used for reading and writing only when it belongs to the user
 * (or root) and nobody else may write it; otherwise it is refused with a
 * warning and kernels stay in memory. A shared read-only store (options
 * disk_cache = 2 or ATTNBWD_CACHE=ro) may belong to anyone but must not be
 * writable by others; it is never written or locked, and every entry is
 * still checked. Every file is opened with O_NOFOLLOW and O_NONBLOCK and
 * used only when fstat says it is a regular file, so neither a symlink nor
 * a FIFO planted under an entry's name is followed or waited on.
 *
 * Names: only names exactly of our forms are ever removed or moved:
 * <key>.atbc, <key>.lock, <key>.bad-<pid>, .tmp-<key>-<pid>-<n> and
 * .tmp-probe-<pid>-<n> (key: 32 lowercase hex digits). */
#ifndef ATTNBWD_CACHE_H
#define ATTNBWD_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "log.h"

#define CACHE_KEY_HEX 32

/* cache_open's `enabled` (options.disk_cache). */
enum { CACHE_OFF = 0, CACHE_READ_WRITE = 1, CACHE_READ_ONLY = 2 };

/* Checks a payload that matched its manifest before it is returned (the
 * library's: a cubin for the context's arch). NULL when it is fine, else
 * why not; the entry is then treated as damaged. */
typedef const char *(*cache_payload_check)(const void *payload, size_t len, void *user);

#define CACHE_DEFAULT_LOCK_WAIT_MS 120000 /* a compile takes seconds; past this, compile anyway */

typedef struct disk_cache {
    char *dir;          /* NULL when the cache is off or unusable */
    int writable;       /* 0: read what is there, write nothing */
    const logger *log;
    int warned_write;   /* one warning per cause */
    /* The size budget and this process's counts not yet added to the
     * folder's stats file (cache_budget.c). */
    uint64_t max_bytes;
    _Atomic uint64_t hits, misses, evicted, evicted_bytes;
    int read_only_store; /* asked for as a shared read-only store: never written, locked or swept */
    int lock_wait_ms;   /* a waiter's bound for another process's lock ($ATTNBWD_CACHE_LOCK_WAIT) */
    cache_payload_check check_payload; /* NULL: payloads are not checked */
    void *check_user;
    char mode[1024];    /* how the cache is used, for `info`: "read-write", "read-only (...)", "off (...)" */
} disk_cache;

/* Resolve the directory (explicit > $ATTNBWD_CACHE_DIR > $XDG_CACHE_HOME/attnbwd
 * > $HOME/.cache/attnbwd), create it 0700 if missing. enabled: CACHE_OFF,
 * CACHE_READ_WRITE or CACHE_READ_ONLY; $ATTNBWD_CACHE=0 turns it off and
 * $ATTNBWD_CACHE=ro makes it read-only. A directory that cannot be created or
 * written degrades to read-only or off with one warning, one that is not
 * trusted (see above) to off with one warning; never fails. */
void cache_open(disk_cache *c, const char *explicit_dir, int enabled, const logger *log);
void cache_close(disk_cache *c);

/* key_hex receives CACHE_KEY_HEX hex digits and a NUL. */
void cache_key(const char *manifest, size_t len, char key_hex[CACHE_KEY_HEX + 1]);

/* Reads exactly n bytes at off, retrying short reads; 0 on success, -1 on error or early EOF. */
int cache_pread_all(int fd, void *buf, size_t n, off_t off);

/* 1 and a malloc'd payload on a valid hit whose manifest matches; 0 on a miss
 * (a bad entry is moved aside, logged and counts as a miss; an entry of the
 * older format 1 is a plain miss, replaced by the next put). Never fails. */
int cache_get(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              void **payload, size_t *payload_len);

/* As cache_get, but a hit needs the stored manifest only to begin with head
 * (the part the key is the hash of); the whole comes back in *manifest
 * (malloc'd, NUL-terminated) for the caller to read the rest of. */
int cache_get_head(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                   size_t *manifest_len, void **payload, size_t *payload_len);

/* As cache_get_head, but what comes back in *manifest is only its launch
 * part (up to the source text), and only that part and the payload are read
 * and checked: the disk hit's read. */
int cache_get_launch(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                     size_t *manifest_len, void **payload, size_t *payload_len);

/* Store atomically; a failure (read-only, disk full) is logged once and
 * ignored: the kernel still works from memory. Returns 1 when written. */
int cache_put(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              const void *payload, size_t payload_len);

/* Per-key inter-process lock. Returns an fd >= 0 when held, -1 when the lock
 * could not be had within timeout_ms (< 0: c->lock_wait_ms), or the cache is
 * read-only or off: then the caller goes on without it. A wait that lasts
 * says once, at the warning level, which key and lock file it waits for and
 * the holder's pid (written into the lock file by its holder). */
int cache_lock(disk_cache *c, const char *key_hex, int timeout_ms);
void cache_unlock(int fd);

/* Removes every entry, temporary file, moved-aside entry and lock file no
 * process holds, by the names above (nothing else of the folder). Counts
 * what it removed but the lock files (bookkeeping). Returns 0, or an errno
 * when the directory cannot be read or an entry cannot be removed. */
int cache_clear(disk_cache *c, uint64_t *files, uint64_t *bytes);

/* Bytes and entry count of the *.atbc files in the directory. */
void cache_usage(const disk_cache *c, uint64_t *bytes, uint64_t *entries);

/* ---- the size budget and the counts (cache_budget.c) ---------------------
 * Hooks of the functions above: each is one call, cheap on the hot path.
 * Last use of an entry = its mtime, set when written and on a disk hit (once
 * a minute at most); eviction removes the least recently used whole entries
 * (<key>.atbc and its <key>.info) under the folder lock <dir>/cache.lock,
 * taken with a bounded wait, and never touches a temporary file (a write in
 * progress) or a name that is not ours. */

/* The entry file layout above, for cache.c and the tools that read entries. */
#define CACHE_FILE_MAGIC "ATBWDC\r\n"
#define CACHE_FILE_FORMAT 2u
#define CACHE_FILE_HEADER_LEN 48

/* An entry's header fields. */
typedef struct cache_header {
    uint32_t manifest_len; /* the whole manifest */
    uint32_t launch_len;   /* its bytes before the source text */
    uint64_t payload_len;
    uint64_t launch_sum;   /* XXH3-64 of (manifest[0, launch_len) || payload) */
    uint64_t source_sum;   /* XXH3-64 of manifest[launch_len, manifest_len) */
} cache_header;

/* Reads the header h of a file of file_size bytes: NULL when it is of this
 * format and agrees with the size, else why not. *older is set to 1 for an
 * entry of an older format (not damage: another build wrote it). */
const char *cache_header_read(const unsigned char h[CACHE_FILE_HEADER_LEN], uint64_t file_size, cache_header *out,
                              int *older);
/* The header of an entry of manifest and payload, its checksums computed. */
void cache_header_write(unsigned char h[CACHE_FILE_HEADER_LEN], const char *manifest, size_t manifest_len,
                        const void *payload, size_t payload_len);

/* From cache_open: the default budget (attnbwd_open sets the context's),
 * counts zero. */
void cache_budget_init(disk_cache *c);
/* From cache_get on a hit (fd: the entry, last_use: its mtime): marks it
 * used now. */
void cache_budget_touch(disk_cache *c, int fd, time_t last_use);
/* From cache_put before writing: 0 when an entry of entry_bytes can never
 * fit the budget (it is then not written, as the CUDA driver's cache does). */
int cache_budget_admits(disk_cache *c, uint64_t entry_bytes);
/* From cache_put after the entry is in place: counts the miss, and brings
 * the folder back under the budget when it is over (never evicting key_hex). */
void cache_budget_after_put(disk_cache *c, const char *key_hex);
/* From cache_close: adds this process's counts to the stats file. */
void cache_stats_flush(disk_cache *c);

#endif
