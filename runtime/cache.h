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
 * File layout (little-endian):
 *   "ATBWDC\r\n" magic (8) | u32 format | u32 manifest_len | u64 payload_len
 *   | u64 XXH3-64 of (manifest || payload) | manifest | payload (the cubin)
 * Written to a temporary file in the same directory, fsync'd, renamed into
 * place: no reader sees half a file. A bad entry (short, wrong magic or
 * checksum) is moved aside to <key>.bad-<pid>, reported, and rebuilt.
 *
 * Two processes that miss the same key compile once: cache_lock() takes
 * <key>.lock with flock, waiting up to a timeout, after which the caller
 * compiles without it. */
#ifndef ATTNBWD_CACHE_H
#define ATTNBWD_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define CACHE_KEY_HEX 32

typedef struct disk_cache {
    char *dir;          /* NULL when the cache is off or unusable */
    int writable;       /* 0: read what is there, write nothing */
    const logger *log;
    int warned_write;   /* one warning per cause */
} disk_cache;

/* Resolve the directory (explicit > $ATTNBWD_CACHE_DIR > $XDG_CACHE_HOME/attnbwd
 * > $HOME/.cache/attnbwd), create it 0700 if missing. enabled = 0 or
 * $ATTNBWD_CACHE=0 turns it off. A directory that cannot be created or written
 * degrades to read-only or off with one warning; never fails. */
void cache_open(disk_cache *c, const char *explicit_dir, int enabled, const logger *log);
void cache_close(disk_cache *c);

/* key_hex receives CACHE_KEY_HEX hex digits and a NUL. */
void cache_key(const char *manifest, size_t len, char key_hex[CACHE_KEY_HEX + 1]);

/* 1 and a malloc'd payload on a valid hit whose manifest matches; 0 on a miss
 * (a bad entry is moved aside, logged and counts as a miss). Never fails. */
int cache_get(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              void **payload, size_t *payload_len);

/* As cache_get, but a hit needs the stored manifest only to begin with head
 * (the part the key is the hash of); the whole comes back in *manifest
 * (malloc'd, NUL-terminated) for the caller to read the rest of. */
int cache_get_head(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                   size_t *manifest_len, void **payload, size_t *payload_len);

/* Store atomically; a failure (read-only, disk full) is logged once and
 * ignored: the kernel still works from memory. Returns 1 when written. */
int cache_put(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              const void *payload, size_t payload_len);

/* Per-key inter-process lock. Returns an fd >= 0 when held, -1 when the lock
 * could not be had within timeout_ms (or the cache is read-only/off): then
 * the caller goes on without it. */
int cache_lock(disk_cache *c, const char *key_hex, int timeout_ms);
void cache_unlock(int fd);

/* Removes every entry (*.atbc) and every leftover (.tmp-*, *.bad-*) of the
 * directory; lock files stay (another process may hold one). Counts what it
 * removed. Returns 0, or an errno when the directory cannot be read or an
 * entry cannot be removed. */
int cache_clear(disk_cache *c, uint64_t *files, uint64_t *bytes);

/* Bytes and entry count of the *.atbc files in the directory. */
void cache_usage(const disk_cache *c, uint64_t *bytes, uint64_t *entries);

#endif
