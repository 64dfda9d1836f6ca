/* The disk cache's tools behind `attnbwd cache ...`: the size budget and
 * eviction, the stats file, reading and checking entries, the per-entry info
 * file, and archives. Internal; the public face is attnbwd_cache_* in
 * attnbwd.h (cache_api.c).
 *
 * Files of ours in the folder, and nothing else is ever touched:
 *   <key>.atbc  an entry (cache.c's layout), last use = its mtime
 *   <key>.info  what the entry is for (shape, GPU model), written beside it
 *   cache.lock  the folder lock: eviction and the stats file
 *   cache.stats disk hits, misses and evictions since a time (text)
 * where <key> is 32 lowercase hex digits. */
#ifndef ATTNBWD_CACHE_TOOLS_H
#define ATTNBWD_CACHE_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "attnbwd.h"
#include "cache.h"

#define CACHE_DEFAULT_MAX_BYTES ATTNBWD_CACHE_DEFAULT_MAX_BYTES
#define CACHE_FOLDER_LOCK "cache.lock"
#define CACHE_STATS_FILE "cache.stats"

/* ---- cache_budget.c ---- */

/* "1073741824", "512M", "1G", "1.5GiB": bytes (K, M, G, T are powers of
 * 1024). 0 with *out set, or -1 when the text is not such a size or is 0. */
int cache_parse_bytes(const char *text, uint64_t *out);

/* The folder lock, taken with a wait of at most timeout_ms: an fd, or -1
 * (not had in time, or the folder is read-only or off). */
int cache_folder_lock(const disk_cache *c, int timeout_ms);
void cache_folder_unlock(int fd);

/* Removes least recently used entries until the entries' bytes are at most
 * max_bytes, and every entry not used for older_than seconds (0: none),
 * never keep_key (NULL: none), under the folder lock. Counts what went.
 * Returns 0, EROFS (read-only or off), EWOULDBLOCK (lock not had in time)
 * or the errno of a folder that cannot be read. */
int cache_evict(disk_cache *c, uint64_t max_bytes, int64_t older_than, const char *keep_key, uint64_t *files,
                uint64_t *bytes);

/* Between 1 and 0, this thread's cache_put calls are an import's, not
 * misses. */
void cache_budget_importing(int on);

typedef struct cache_counts {
    uint64_t hits, misses, evicted, evicted_bytes;
    int64_t since; /* when counting began (unix seconds); 0: no stats file yet */
} cache_counts;

/* The stats file's counts plus this process's not yet written. */
void cache_stats_read(disk_cache *c, cache_counts *out);
/* Starts the counts again from now (cache clear). */
void cache_stats_reset(disk_cache *c);

/* ---- cache_entry.c ---- */

/* 1 when name is exactly <32 lowercase hex digits><suffix>; key gets the digits. */
int cache_name_is(const char *name, const char *suffix, char key[CACHE_KEY_HEX + 1]);

/* Room for a problem's text that names a key. */
#define CACHE_PROBLEM_LEN 96

/* One entry file read and checked. */
typedef struct cache_entry_file {
    char key[CACHE_KEY_HEX + 1];
    uint64_t bytes;             /* file size */
    struct timespec last_use;   /* mtime */
    unsigned char *data;        /* the file's bytes read (all of it, or header + manifest) */
    const char *manifest;       /* into data, manifest_len bytes */
    size_t manifest_len;
    const unsigned char *payload; /* into data (NULL unless read whole) */
    size_t payload_len;
    const char *problem;        /* NULL when sound, else why not */
    char problem_buf[CACHE_PROBLEM_LEN];
} cache_entry_file;

/* Reads <dir>/<key>.atbc: header and manifest checked (key the hash of the
 * manifest's head, as a lookup forms it); whole (payload read, checksum and
 * the cubin's ELF header checked) when whole is 1. Never
 * follows a symbolic link or blocks on a non-regular file. Returns 0 (check
 * e->problem), or an errno when the file cannot be opened at all (ENOENT:
 * gone meanwhile). Free with cache_entry_file_free. */
int cache_entry_file_read(const disk_cache *c, const char *key, int whole, cache_entry_file *e);
void cache_entry_file_free(cache_entry_file *e);

/* The value of manifest line "<field> value" (before the source) into buf;
 * "" when absent. */
void cache_manifest_field(const char *manifest, size_t len, const char *field, char *buf, size_t n);

/* Checks a whole entry held in memory (an archive's) to be filed under key,
 * as cache_entry_file_read checks a file. NULL when sound, else why not
 * (perhaps in why_buf); manifest and payload point into buf. */
const char *cache_entry_check(const char *key, const unsigned char *buf, uint64_t len, const char **manifest,
                              size_t *manifest_len, const unsigned char **payload, size_t *payload_len,
                              char why_buf[CACHE_PROBLEM_LEN]);

/* <key>.info: what the entry was built for. */
typedef struct cache_entry_info {
    int has_shape;
    attnbwd_shape shape;
    char gpu_model[256];        /* the model the tuning tables were matched for; "" none */
} cache_entry_info;

/* Writes <key>.info atomically beside an entry that is in place; silent on
 * failure (the entry works without it). */
void cache_info_put(disk_cache *c, const char *key, const cache_entry_info *info);
/* Reads it; 0 when there is none or it does not parse (info zeroed). */
int cache_info_get(const disk_cache *c, const char *key, cache_entry_info *info);
/* The info as its file's text, and back (0 on success). */
void cache_info_format(const cache_entry_info *info, char *buf, size_t n);
int cache_info_parse(const char *text, size_t len, cache_entry_info *info);

/* ---- cache_archive.c ---- */

/* Writes the entries whose key starts with one of prefixes (n == 0: all)
 * to path (written beside it, renamed into place). Sets the error message. */
attnbwd_status cache_export(disk_cache *c, const char *path, const char *const *prefixes, size_t n,
                            uint64_t *entries, uint64_t *bytes);
/* Checks every entry of the archive at path, then puts each (atomically,
 * one by one). Refuses an archive of another format, library or NVRTC. */
attnbwd_status cache_import(disk_cache *c, const char *path, uint64_t *entries, uint64_t *bytes);

#endif
