/* The disk cache of compiled kernels: one self-checking file per entry,
 * written atomically, read defensively, plus a per-key flock so that two
 * processes missing the same key compile it once. The layout and the rules
 * are in cache.h. Nothing here fails the caller: every problem turns into a
 * miss or a skipped write, with a warning. */
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "checksum.h"
#include "manifest.h"

#define HEADER_LEN CACHE_FILE_HEADER_LEN
/* A disk hit's first read: the header and, in the same call, the launch
 * part of the manifest (a few KB for either problem); a longer one takes a
 * second read. */
#define FIRST_READ (HEADER_LEN + 16384)
/* Bounds checked before anything is allocated, so a damaged length field
 * cannot ask for terabytes. A manifest holds one kernel's source; a cubin of
 * one kernel is far below a gigabyte. */
#define MAX_MANIFEST (64u << 20)
#define MAX_PAYLOAD (1ull << 30)

/* Bits of warned_write: a write failure is reported once per cause. */
enum { WARN_NOSPACE = 1, WARN_DENIED = 2, WARN_OTHER = 4 };

/* Makes temporary names unique between threads of one process; the pid
 * separates processes. */
static atomic_ulong tmp_counter;

static const char *errstr(int e, char *buf, size_t n) {
    /* The XSI strerror_r (we build without _GNU_SOURCE): strerror itself is
     * not guaranteed thread-safe and cache calls run on several threads. */
    if (strerror_r(e, buf, n) != 0) snprintf(buf, n, "errno %d", e);
    return buf;
}

/* ---- little-endian fields ---------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- paths --------------------------------------------------------------- */

/* A key becomes part of a file name: accept nothing but the 32 lowercase hex
 * digits cache_key produces, so no caller can reach outside the directory. */
static int is_hex_key(const char *p) {
    for (int i = 0; i < CACHE_KEY_HEX; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return 0;
    return 1;
}

static int valid_key(const char *key) { return key && is_hex_key(key) && key[CACHE_KEY_HEX] == '\0'; }

/* malloc'd "<dir>/<key><suffix>", NULL when out of memory. */
static char *entry_path(const disk_cache *c, const char *key, const char *suffix) {
    size_t n = strlen(c->dir) + 1 + CACHE_KEY_HEX + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", c->dir, key, suffix);
    return p;
}

/* Every open of a file in the folder: never through a symlink, never blocking
 * on a FIFO (O_NONBLOCK does not change reads or writes of regular files),
 * never inherited by a child. */
#define OPEN_FLAGS (O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)

/* ---- our names ------------------------------------------------------------ */

typedef enum name_kind { NAME_OTHER, NAME_ENTRY, NAME_LOCK, NAME_BAD, NAME_TMP } name_kind;

/* Skips one or more decimal digits; NULL when there are none. */
static const char *skip_digits(const char *p) {
    const char *q = p;
    while (*q >= '0' && *q <= '9') q++;
    return q > p ? q : NULL;
}

/* "<digits>-<digits>" and nothing after. */
static int is_pid_count(const char *p) {
    p = skip_digits(p);
    if (!p || *p != '-') return 0;
    p = skip_digits(p + 1);
    return p && *p == '\0';
}

/* Which of our names n is; NAME_OTHER for anything else (an editor's
 * ".tmp-foo", "thesis.bad-draft.txt"), which is never touched. */
static name_kind classify(const char *n) {
    if (strncmp(n, ".tmp-probe-", 11) == 0) return is_pid_count(n + 11) ? NAME_TMP : NAME_OTHER;
    if (strncmp(n, ".tmp-", 5) == 0)
        return strlen(n) > 5 + CACHE_KEY_HEX && is_hex_key(n + 5) && n[5 + CACHE_KEY_HEX] == '-' &&
                       is_pid_count(n + 6 + CACHE_KEY_HEX)
                   ? NAME_TMP
                   : NAME_OTHER;
    if (strlen(n) < CACHE_KEY_HEX || !is_hex_key(n)) return NAME_OTHER;
    const char *suffix = n + CACHE_KEY_HEX;
    if (strcmp(suffix, ".atbc") == 0) return NAME_ENTRY;
    if (strcmp(suffix, ".lock") == 0) return NAME_LOCK;
    if (strncmp(suffix, ".bad-", 5) == 0) {
        const char *end = skip_digits(suffix + 5);
        if (end && *end == '\0') return NAME_BAD;
    }
    return NAME_OTHER;
}

/* ---- opening ------------------------------------------------------------- */

static const char *nonempty_env(const char *name) {
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

/* malloc'd directory by the order of cache.h, NULL when there is none. */
static char *resolve_dir(const char *explicit_dir) {
    const char *base;
    if (explicit_dir && *explicit_dir) return strdup(explicit_dir);
    if ((base = nonempty_env("ATTNBWD_CACHE_DIR"))) return strdup(base);
    const char *tail = "/attnbwd";
    if (!(base = nonempty_env("XDG_CACHE_HOME"))) {
        if (!(base = nonempty_env("HOME"))) return NULL;
        tail = "/.cache/attnbwd";
    }
    size_t n = strlen(base) + strlen(tail) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", base, tail);
    return p;
}

/* mkdir -p: the directories we create get 0700, since cubins and sources
 * are the user's business; existing ones are left as they are. Returns 0 or
 * an errno. */
static int mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            err = errno;
            break;
        }
        *s = saved;
        if (saved == '\0') break;
    }
    if (!err) {
        struct stat st;
        if (stat(path, &st) != 0) err = errno;
        else if (!S_ISDIR(st.st_mode)) err = ENOTDIR;
    }
    free(p);
    return err;
}

/* access() alone is not enough: root passes it on any mode, and a full disk
 * or a network filesystem's server may still refuse to create files. So
 * writability is tested by creating (and removing) a file. Returns 0 when
 * writable, else an errno. */
static int dir_unwritable(const char *dir) {
    if (access(dir, W_OK) != 0) return errno;
    size_t n = strlen(dir) + 64;
    char *p = malloc(n);
    if (!p) return ENOMEM;
    snprintf(p, n, "%s/.tmp-probe-%ld-%lu", dir, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | OPEN_FLAGS, 0600);
    int err = fd >= 0 ? 0 : errno;
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    free(p);
    return err;
}

/* ---- removing leftovers ---------------------------------------------------- */

/* Leftovers that nothing will read: temporary files of writers that died
 * (a live write takes seconds; these are over an hour old), entries moved
 * aside as bad over a week ago (kept that long for a look), and lock files
 * unused for an hour whose lock nobody holds. */
#define STALE_TMP_SECONDS 3600
#define STALE_BAD_SECONDS (7 * 24 * 3600)
#define STALE_LOCK_SECONDS 3600
/* One open removes at most this many, so a folder full of leftovers costs a
 * bounded time; the next open goes on. A moved-aside directory is removed to
 * this depth at most. */
#define SWEEP_MAX_REMOVALS 256
#define BAD_TREE_MAX_DEPTH 8

/* Removes directory `name` of dfd and what it holds, never following a
 * symlink, spending at most *budget removals. 0 or an errno. */
static int remove_tree_at(int dfd, const char *name, int depth, unsigned *budget) {
    if (depth > BAD_TREE_MAX_DEPTH) return ELOOP;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | OPEN_FLAGS);
    if (fd < 0) return errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return e;
    }
    int err = 0;
    struct dirent *e;
    while (!err && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (*budget == 0) err = EAGAIN;
        else if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) err = errno;
        else if (S_ISDIR(st.st_mode)) err = remove_tree_at(fd, e->d_name, depth + 1, budget);
        else if (unlinkat(fd, e->d_name, 0) != 0) err = errno;
        else (*budget)--;
    }
    closedir(d);
    if (!err && *budget == 0) err = EAGAIN;
    if (!err && unlinkat(dfd, name, AT_REMOVEDIR) != 0) err = errno;
    if (!err) (*budget)--;
    return err;
}

/* Removes lock file `name` of dfd when no process holds its lock: taken
 * first, and removed only while it is still the file of that name, so a
 * process that opens the name meanwhile sees the name gone after it gets the
 * lock and opens it again (cache_lock checks). 0, or an errno (EWOULDBLOCK:
 * held). */
static int remove_lock_at(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDWR | OPEN_FLAGS);
    if (fd < 0) return errno;
    int err = 0;
    struct stat mine, now;
    if (fstat(fd, &mine) != 0 || !S_ISREG(mine.st_mode)) err = EINVAL;
    else if (flock(fd, LOCK_EX | LOCK_NB) != 0) err = errno;
    else if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != mine.st_ino ||
             now.st_dev != mine.st_dev)
        err = ENOENT; /* replaced meanwhile: not ours to remove */
    else if (unlinkat(dfd, name, 0) != 0)
        err = errno;
    close(fd);
    return err;
}

/* Removes one of our leftovers of any type (a moved-aside entry may be a
 * directory or a FIFO). 0 or an errno. */
static int remove_leftover_at(int dfd, const char *name, const struct stat *st, unsigned *budget) {
    if (S_ISDIR(st->st_mode)) return remove_tree_at(dfd, name, 0, budget);
    if (unlinkat(dfd, name, 0) != 0) return errno;
    (*budget)--;
    return 0;
}

static void sweep(const disk_cache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    const time_t now = time(NULL);
    unsigned budget = SWEEP_MAX_REMOVALS;
    unsigned removed = 0;
    struct dirent *e;
    while (budget > 0 && (e = readdir(d))) {
        const char *n = e->d_name;
        name_kind kind = classify(n);
        if (kind != NAME_TMP && kind != NAME_BAD && kind != NAME_LOCK) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        /* A rename keeps mtime but sets ctime: a bad file's age counts from the move. */
        if (kind == NAME_BAD && now - st.st_ctime > STALE_BAD_SECONDS) {
            removed += remove_leftover_at(dirfd(d), n, &st, &budget) == 0;
        } else if (kind == NAME_TMP && S_ISREG(st.st_mode) && now - st.st_mtime > STALE_TMP_SECONDS) {
            removed += remove_leftover_at(dirfd(d), n, &st, &budget) == 0;
        } else if (kind == NAME_LOCK && S_ISREG(st.st_mode) && now - st.st_mtime > STALE_LOCK_SECONDS) {
            if (remove_lock_at(dirfd(d), n) == 0) {
                removed++;
                budget--;
            }
        }
    }
    closedir(d);
    if (removed)
        log_line(c->log, ATTNBWD_LOG_INFO, "disk cache: removed %u stale temporary, bad or lock file(s)", removed);
}

/* ---- trust ---------------------------------------------------------------- */

/* NULL when the folder may be used as asked, else why not (into buf). For
 * reading and writing: owned by the user or root, writable by neither group
 * nor others. As a shared read-only store: any owner, not writable by
 * others. The folder itself is checked, through a symlink to it if it is
 * one: the user chose that path. */
static const char *untrusted(const char *dir, int read_only_store, char *buf, size_t n) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(buf, n, "cannot be examined: errno %d", errno);
        return buf;
    }
    const uid_t me = geteuid();
    const unsigned mode = (unsigned)st.st_mode & 07777;
    if (read_only_store) {
        if (st.st_mode & S_IWOTH) {
            snprintf(buf, n, "is writable by every user (mode %04o), so anyone could plant kernels in it", mode);
            return buf;
        }
        return NULL;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        snprintf(buf, n, "belongs to uid %ld, not to this user (uid %ld), who would run the kernels it holds",
                 (long)st.st_uid, (long)me);
        return buf;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(buf, n, "is writable by %s (mode %04o), who could plant kernels in it",
                 st.st_mode & S_IWOTH ? "every user" : "its group", mode);
        return buf;
    }
    return NULL;
}

/* The lock wait from $ATTNBWD_CACHE_LOCK_WAIT (seconds, fractions allowed),
 * else the default. A value that is not a number >= 0 is warned about. */
static int lock_wait_ms(const logger *log) {
    const char *v = nonempty_env("ATTNBWD_CACHE_LOCK_WAIT");
    if (!v) return CACHE_DEFAULT_LOCK_WAIT_MS;
    char *end;
    double s = strtod(v, &end);
    if (end == v || *end != '\0' || !(s >= 0) || s > 86400) {
        log_line(log, ATTNBWD_LOG_WARN, "ATTNBWD_CACHE_LOCK_WAIT=%s: want seconds from 0 to 86400; waiting %d s",
                 v, CACHE_DEFAULT_LOCK_WAIT_MS / 1000);
        return CACHE_DEFAULT_LOCK_WAIT_MS;
    }
    return (int)(s * 1000.0 + 0.5);
}

/* The mode asked for: options' `enabled`, then $ATTNBWD_CACHE ("0" off, "ro"
 * read-only store, "1" or "rw" as the options say). Off by either wins. */
static int asked_mode(int enabled, const char **why_off) {
    const char *env = getenv("ATTNBWD_CACHE");
    *why_off = NULL;
    if (enabled == CACHE_OFF) {
        *why_off = "disabled by options";
        return CACHE_OFF;
    }
    if (env && strcmp(env, "0") == 0) {
        *why_off = "ATTNBWD_CACHE=0";
        return CACHE_OFF;
    }
    if (env && strcmp(env, "ro") == 0) return CACHE_READ_ONLY;
    return enabled == CACHE_READ_ONLY ? CACHE_READ_ONLY : CACHE_READ_WRITE;
}

void cache_open(disk_cache *c, const char *explicit_dir, int enabled, const logger *log) {
    memset(c, 0, sizeof *c);
    c->log = log;
    c->lock_wait_ms = CACHE_DEFAULT_LOCK_WAIT_MS;
    cache_budget_init(c);
    const char *why_off;
    const int mode = asked_mode(enabled, &why_off);
    if (mode == CACHE_OFF) {
        log_line(log, ATTNBWD_LOG_INFO, "disk cache off (%s)", why_off);
        snprintf(c->mode, sizeof c->mode, "off (%s)", enabled == CACHE_OFF ? "--no-cache or options" : why_off);
        return;
    }
    c->read_only_store = mode == CACHE_READ_ONLY;
    c->lock_wait_ms = lock_wait_ms(log);
    char *dir = resolve_dir(explicit_dir);
    if (!dir) {
        log_line(log, ATTNBWD_LOG_WARN,
                 "disk cache off: no directory (set ATTNBWD_CACHE_DIR, XDG_CACHE_HOME or HOME)");
        snprintf(c->mode, sizeof c->mode, "off (no directory)");
        return;
    }
    char eb[128], why[200];
    /* A read-only store is not ours to create. */
    int err = c->read_only_store ? 0 : mkdir_p(dir);
    struct stat st;
    if (!err && stat(dir, &st) != 0) err = errno;
    else if (!err && !S_ISDIR(st.st_mode)) err = ENOTDIR;
    if (!err && access(dir, X_OK) != 0) err = errno; /* cannot even look inside */
    if (err) {
        log_line(log, ATTNBWD_LOG_WARN, "disk cache off: cannot use directory %s: %s", dir,
                 errstr(err, eb, sizeof eb));
        snprintf(c->mode, sizeof c->mode, "off (cannot use the directory: %s)", errstr(err, eb, sizeof eb));
        free(dir);
        return;
    }
    if (untrusted(dir, c->read_only_store, why, sizeof why)) {
        log_line(log, ATTNBWD_LOG_WARN,
                 "disk cache off: refusing %s: it %s; kernels are kept in memory only (use a folder of your own "
                 "that only you can write, or ATTNBWD_CACHE=ro to read a shared store)",
                 dir, why);
        snprintf(c->mode, sizeof c->mode, "off (refused: %.700s %s)", dir, why);
        free(dir);
        return;
    }
    c->dir = dir;
    if (c->read_only_store) {
        log_line(log, ATTNBWD_LOG_INFO, "disk cache in %s: a shared read-only store", dir);
        snprintf(c->mode, sizeof c->mode, "read-only (a shared store: entries read and checked, never written)");
        return;
    }
    err = dir_unwritable(dir);
    c->writable = err == 0;
    if (err) {
        log_line(log, ATTNBWD_LOG_WARN,
                 "disk cache %s is not writable (%s): reading existing entries only", dir,
                 errstr(err, eb, sizeof eb));
        snprintf(c->mode, sizeof c->mode, "read-only (the folder is not writable: %s)", errstr(err, eb, sizeof eb));
    } else {
        log_line(log, ATTNBWD_LOG_INFO, "disk cache in %s", dir);
        snprintf(c->mode, sizeof c->mode, "read-write");
        sweep(c);
    }
}

void cache_close(disk_cache *c) {
    if (!c) return;
    cache_stats_flush(c);
    free(c->dir);
    c->dir = NULL;
    c->writable = 0;
    snprintf(c->mode, sizeof c->mode, "off (closed)");
}

void cache_key(const char *manifest, size_t len, char key_hex[CACHE_KEY_HEX + 1]) {
    XXH128_hash_t h = XXH3_128bits(manifest, len);
    snprintf(key_hex, CACHE_KEY_HEX + 1, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

/* ---- reading ------------------------------------------------------------- */

int cache_pread_all(int fd, void *buf, size_t n, off_t off) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* A damaged entry is moved aside (kept for a post-mortem) so the next put
 * rebuilds it. Only the file we read is moved: if another process renamed a
 * fresh entry onto the name meanwhile, that one is left alone. A shared
 * read-only store is never changed: the entry is only reported. */
static void quarantine(disk_cache *c, const char *key, int fd, const char *path,
                       const char *why) {
    if (c->read_only_store) {
        log_line(c->log, ATTNBWD_LOG_WARN, "disk cache entry %s is damaged (%s): not used (read-only store)",
                 path, why);
        return;
    }
    struct stat mine, now;
    if (fstat(fd, &mine) != 0 || lstat(path, &now) != 0 || mine.st_ino != now.st_ino ||
        mine.st_dev != now.st_dev)
        return; /* already gone or replaced */
    char suffix[48];
    snprintf(suffix, sizeof suffix, ".bad-%ld", (long)getpid());
    char *bad = entry_path(c, key, suffix);
    char eb[128];
    if (bad && rename(path, bad) == 0) {
        log_line(c->log, ATTNBWD_LOG_WARN, "disk cache entry %s is damaged (%s): moved to %s",
                 path, why, bad);
    } else if (bad && errno == ENOENT) {
        /* another reader moved it aside first and has reported it */
    } else if (unlink(path) == 0) {
        log_line(c->log, ATTNBWD_LOG_WARN, "disk cache entry %s is damaged (%s): removed", path,
                 why);
    } else {
        log_line(c->log, ATTNBWD_LOG_WARN,
                 "disk cache entry %s is damaged (%s) and could not be removed: %s", path, why,
                 errstr(errno, eb, sizeof eb));
    }
    free(bad);
}

/* ---- the header ------------------------------------------------------------ */

const char *cache_header_read(const unsigned char h[HEADER_LEN], uint64_t file_size, cache_header *out, int *older) {
    *older = 0;
    if (file_size < HEADER_LEN) return "shorter than its header";
    if (memcmp(h, CACHE_FILE_MAGIC, 8) != 0) return "bad magic";
    const uint32_t format = get_u32(h + 8);
    if (format != CACHE_FILE_FORMAT) {
        *older = format >= 1 && format < CACHE_FILE_FORMAT;
        return *older ? "an older entry format" : "unknown format version";
    }
    out->manifest_len = get_u32(h + 12);
    out->payload_len = get_u64(h + 16);
    out->launch_sum = get_u64(h + 24);
    out->launch_len = get_u32(h + 32);
    out->source_sum = get_u64(h + 40);
    if (out->manifest_len > MAX_MANIFEST) return "manifest length out of range";
    if (out->payload_len > MAX_PAYLOAD) return "payload length out of range";
    if (out->launch_len > out->manifest_len || get_u32(h + 36) != 0) return "launch length out of range";
    if (HEADER_LEN + (uint64_t)out->manifest_len + out->payload_len != file_size) return "size does not match lengths";
    return NULL;
}

void cache_header_write(unsigned char h[HEADER_LEN], const char *manifest, size_t manifest_len, const void *payload,
                        size_t payload_len) {
    const size_t launch_len = manifest_launch_len(manifest, manifest_len);
    memcpy(h, CACHE_FILE_MAGIC, 8);
    put_u32(h + 8, CACHE_FILE_FORMAT);
    put_u32(h + 12, (uint32_t)manifest_len);
    put_u64(h + 16, (uint64_t)payload_len);
    put_u64(h + 24, cache_checksum(manifest, launch_len, payload, payload_len));
    put_u32(h + 32, (uint32_t)launch_len);
    put_u32(h + 36, 0);
    put_u64(h + 40, cache_checksum(manifest + launch_len, manifest_len - launch_len, NULL, 0));
}

/* ---- reading an entry -------------------------------------------------------- */

/* What a read asks for: want (want_len bytes) is the whole stored manifest,
 * or (HEAD) its beginning; LAUNCH reads and checks only the launch part of
 * the manifest and the payload, and *stored gets that part alone. */
enum { WANT_WHOLE = 0, WANT_HEAD = 1, WANT_LAUNCH = 2 };

/* The stored manifest's first `len` bytes (malloc'd, NUL-terminated): what
 * the first read holds of it, the rest read. NULL with *why on failure
 * (*why NULL: out of memory). */
static char *read_manifest(int fd, const unsigned char *first, size_t first_len, size_t len, const char **why) {
    char *m = malloc(len + 1);
    if (!m) return NULL;
    const size_t have = first_len - HEADER_LEN < len ? first_len - HEADER_LEN : len;
    memcpy(m, first + HEADER_LEN, have);
    if (have < len && cache_pread_all(fd, m + have, len - have, (off_t)(HEADER_LEN + have)) != 0) {
        *why = "short read";
        free(m);
        return NULL;
    }
    m[len] = '\0';
    return m;
}

/* cache_get, cache_get_head and cache_get_launch (want_kind as above). */
static int read_entry(disk_cache *c, const char *key_hex, const char *want, size_t want_len, int want_kind,
                      char **stored_out, size_t *stored_len, void **payload, size_t *payload_len) {
    *payload = NULL;
    *payload_len = 0;
    if (!c || !c->dir || !valid_key(key_hex)) return 0;
    char *path = entry_path(c, key_hex, ".atbc");
    if (!path) return 0;
    int fd = open(path, O_RDONLY | OPEN_FLAGS);
    if (fd < 0) {
        /* ENOENT is the ordinary miss; anything else is one too. A symlink
         * is not followed: whatever it points to is not an entry we wrote. */
        if (errno == ELOOP)
            log_line(c->log, ATTNBWD_LOG_WARN,
                     "disk cache entry %s is a symbolic link: refused, not followed (compiling instead)", path);
        free(path);
        return 0;
    }
    int hit = 0, older = 0;
    const char *why = NULL;
    unsigned char first[FIRST_READ];
    char *stored = NULL;
    unsigned char *data = NULL;
    cache_header h;
    struct stat st;
    size_t first_len = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        why = S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file";
        goto done;
    }
    if ((uint64_t)st.st_size < HEADER_LEN) {
        why = "shorter than its header";
        goto done;
    }
    first_len = (uint64_t)st.st_size < FIRST_READ ? (size_t)st.st_size : FIRST_READ;
    if (cache_pread_all(fd, first, first_len, 0) != 0) {
        why = "header unreadable";
        goto done;
    }
    if ((why = cache_header_read(first, (uint64_t)st.st_size, &h, &older))) {
        if (older) { /* another build's: a miss, and the put replaces it */
            log_line(c->log, ATTNBWD_LOG_INFO, "disk cache entry %s is of an older format: compiling it again", path);
            why = NULL;
        }
        goto done;
    }
    const size_t mlen = want_kind == WANT_LAUNCH ? h.launch_len : h.manifest_len;
    if (!(stored = read_manifest(fd, first, first_len, mlen, &why))) goto done; /* why NULL: out of memory, a miss */
    if (!(data = malloc((size_t)h.payload_len + 1))) goto done; /* +1: malloc(0) may return NULL */
    if (cache_pread_all(fd, data, (size_t)h.payload_len, (off_t)(HEADER_LEN + (uint64_t)h.manifest_len)) != 0) {
        why = "short read";
        goto done;
    }
    if (cache_checksum(stored, h.launch_len, data, (size_t)h.payload_len) != h.launch_sum) {
        why = "checksum mismatch";
        goto done;
    }
    if (want_kind != WANT_LAUNCH &&
        cache_checksum(stored + h.launch_len, mlen - h.launch_len, NULL, 0) != h.source_sum) {
        why = "checksum mismatch in its source";
        goto done;
    }
    if (want_kind != WANT_WHOLE ? mlen < want_len || memcmp(stored, want, want_len) != 0
                                : mlen != want_len || memcmp(stored, want, mlen) != 0) {
        /* The entry is sound but belongs to another manifest with the same
         * 128-bit hash: keep it and go without the cache for this kernel. */
        log_line(c->log, ATTNBWD_LOG_WARN,
                 "disk cache entry %s holds a different manifest (hash collision): not used",
                 path);
        goto done;
    }
    /* The checksum is not keyed: anyone who can write the folder can make a
     * matching one. The folder's trust is the boundary; this cheap check of
     * the payload keeps a planted or garbled one from reaching the driver. */
    if (c->check_payload && (why = c->check_payload(data, (size_t)h.payload_len, c->check_user))) goto done;
    *payload = data;
    *payload_len = (size_t)h.payload_len;
    data = NULL;
    if (stored_out) {
        *stored_out = stored;
        *stored_len = mlen;
        stored = NULL;
    }
    hit = 1;
    cache_budget_touch(c, fd, st.st_mtime);
done:
    if (why) quarantine(c, key_hex, fd, path, why);
    close(fd);
    free(stored);
    free(data);
    free(path);
    return hit;
}

int cache_get(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              void **payload, size_t *payload_len) {
    return read_entry(c, key_hex, manifest, manifest_len, WANT_WHOLE, NULL, NULL, payload, payload_len);
}

int cache_get_head(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                   size_t *manifest_len, void **payload, size_t *payload_len) {
    *manifest = NULL;
    *manifest_len = 0;
    return read_entry(c, key_hex, head, head_len, WANT_HEAD, manifest, manifest_len, payload, payload_len);
}

int cache_get_launch(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                     size_t *manifest_len, void **payload, size_t *payload_len) {
    *manifest = NULL;
    *manifest_len = 0;
    return read_entry(c, key_hex, head, head_len, WANT_LAUNCH, manifest, manifest_len, payload, payload_len);
}

/* ---- writing ------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { /* should not happen for a regular file; do not spin */
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void warn_write(disk_cache *c, int err, const char *what, const char *path) {
    int bit = (err == ENOSPC || err == EDQUOT || err == EFBIG)     ? WARN_NOSPACE
              : (err == EACCES || err == EPERM || err == EROFS) ? WARN_DENIED
                                                                : WARN_OTHER;
    /* Several threads may fail at once: an atomic or keeps it to one line. */
    if (__atomic_fetch_or(&c->warned_write, bit, __ATOMIC_RELAXED) & bit) return;
    char eb[128];
    log_line(c->log, ATTNBWD_LOG_WARN,
             "disk cache: cannot %s %s: %s (kernels still work from memory; further such "
             "failures are not reported)",
             what, path, errstr(err, eb, sizeof eb));
}

/* 1 when a file of `bytes` bytes may be written under the process's file
 * size limit (ulimit -f). Past it, write() raises SIGXFSZ, which kills the
 * process by default; a library must not change the host's signal handling,
 * so the write is not started instead. */
static int size_limit_allows(uint64_t bytes) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1;
    return bytes <= (uint64_t)rl.rlim_cur;
}

int cache_put(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              const void *payload, size_t payload_len) {
    if (!c || !c->dir || !c->writable || !valid_key(key_hex)) return 0;
    if (manifest_len > MAX_MANIFEST || (uint64_t)payload_len > MAX_PAYLOAD) return 0;
    if (!cache_budget_admits(c, HEADER_LEN + (uint64_t)manifest_len + payload_len)) return 0;
    if (!size_limit_allows(HEADER_LEN + (uint64_t)manifest_len + payload_len)) {
        char *final = entry_path(c, key_hex, ".atbc");
        warn_write(c, EFBIG, "write", final ? final : c->dir);
        free(final);
        return 0;
    }
    unsigned char hdr[HEADER_LEN];
    cache_header_write(hdr, manifest, manifest_len, payload, payload_len);

    char suffix[80];
    snprintf(suffix, sizeof suffix, "-%ld-%lu", (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    char *final = entry_path(c, key_hex, ".atbc");
    /* ".tmp-" prefix: hidden, and never matches *.atbc for cache_usage. */
    size_t n = strlen(c->dir) + 6 + CACHE_KEY_HEX + strlen(suffix) + 1;
    char *tmp = malloc(n);
    if (!final || !tmp) {
        free(final);
        free(tmp);
        return 0;
    }
    snprintf(tmp, n, "%s/.tmp-%s%s", c->dir, key_hex, suffix);

    int ok = 0;
    const char *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | OPEN_FLAGS, 0644);
    if (fd >= 0) {
        what = "write";
        /* fsync before rename: after a crash the name holds the whole entry
         * or nothing. The directory is not fsync'd: losing the rename only
         * costs a recompile. */
        int err = write_all(fd, hdr, HEADER_LEN) || write_all(fd, manifest, manifest_len) ||
                  write_all(fd, payload, payload_len) || fsync(fd);
        int saved = errno;
        if (close(fd) != 0 && !err) { /* NFS reports write errors at close */
            err = 1;
            saved = errno;
        }
        errno = saved;
        if (!err) {
            what = "rename into place";
            ok = rename(tmp, final) == 0;
        }
    }
    if (!ok) {
        int saved = errno;
        if (fd >= 0) unlink(tmp);
        warn_write(c, saved, what, fd >= 0 ? final : tmp);
    } else {
        cache_budget_after_put(c, key_hex);
    }
    free(final);
    free(tmp);
    return ok;
}

/* ---- locking ------------------------------------------------------------- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Opens <key>.lock, creating it: never through a symlink, only a regular
 * file. -1 on failure. */
static int open_lock_file(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | OPEN_FLAGS, 0644);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* 1 when fd is still the file named path (a sweep may have removed the name
 * between our open and our lock; then the lock guards nothing). */
static int still_named(int fd, const char *path) {
    struct stat mine, now;
    return fstat(fd, &mine) == 0 && lstat(path, &now) == 0 && mine.st_ino == now.st_ino &&
           mine.st_dev == now.st_dev;
}

/* The holder writes its pid into the lock file, for waiters' messages; it
 * also marks the file used now (mtime), which the sweep goes by. */
static void write_holder(int fd) {
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) < 0) {
        /* only a message loses its pid */
    }
}

static long read_holder(int fd) {
    char text[32] = {0};
    if (pread(fd, text, sizeof text - 1, 0) <= 0) return 0;
    char *end;
    long pid = strtol(text, &end, 10);
    return end != text && pid > 0 ? pid : 0;
}

/* A wait shorter than this stays silent: two processes compiling the same
 * kernel at once is ordinary, and the first one takes a second or so. */
#define LOCK_QUIET_MS 1000

static void say_waiting(const disk_cache *c, const char *key, const char *path, int fd, int timeout_ms) {
    long pid = read_holder(fd);
    char holder[48];
    if (pid) snprintf(holder, sizeof holder, "process %ld", pid);
    else snprintf(holder, sizeof holder, "another process");
    log_line(c->log, ATTNBWD_LOG_WARN,
             "disk cache: waiting up to %.1f s for kernel %s, which %s is compiling (it holds %s); past that, "
             "compiling it here without the lock (ATTNBWD_CACHE_LOCK_WAIT sets the wait)",
             timeout_ms / 1000.0, key, holder, path);
}

int cache_lock(disk_cache *c, const char *key_hex, int timeout_ms) {
    if (!c || !c->dir || !c->writable || c->read_only_store || !valid_key(key_hex)) return -1;
    if (timeout_ms < 0) timeout_ms = c->lock_wait_ms;
    char *path = entry_path(c, key_hex, ".lock");
    if (!path) return -1;
    /* Poll rather than block: flock has no timeout, and a signal-based
     * alarm would disturb the host process. */
    const double start = now_ms(), deadline = start + timeout_ms;
    const double quiet = timeout_ms / 4 < LOCK_QUIET_MS ? timeout_ms / 4 : LOCK_QUIET_MS;
    int said = 0, fd = -1;
    for (int reopen = 0; reopen < 8; reopen++) { /* a sweep removed the name: open it again */
        fd = open_lock_file(path);
        if (fd < 0) break;
        for (;;) {
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
            if ((errno != EWOULDBLOCK && errno != EINTR) || now_ms() >= deadline) { /* ENOLCK on some NFS */
                if (errno == EWOULDBLOCK)
                    log_line(c->log, ATTNBWD_LOG_INFO, "disk cache: stopped waiting for %s after %.1f s", path,
                             (now_ms() - start) / 1000.0);
                close(fd);
                free(path);
                return -1;
            }
            if (!said && now_ms() - start >= quiet) {
                say_waiting(c, key_hex, path, fd, timeout_ms);
                said = 1;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (still_named(fd, path)) {
            write_holder(fd);
            free(path);
            return fd;
        }
        close(fd);
        fd = -1;
    }
    free(path);
    return -1;
}

void cache_unlock(int fd) {
    if (fd < 0) return;
    /* The lock file stays: removing it here would race with a process that
     * has it open and is about to lock it. The sweep removes unused ones
     * safely (remove_lock_at). */
    flock(fd, LOCK_UN);
    close(fd);
}

/* ---- usage --------------------------------------------------------------- */

int cache_clear(disk_cache *c, uint64_t *files, uint64_t *bytes) {
    *files = *bytes = 0;
    if (!c || !c->dir) return 0;
    if (!c->writable) return EROFS;
    DIR *d = opendir(c->dir);
    if (!d) return errno;
    int err = 0;
    unsigned budget = UINT32_MAX; /* clear is asked for: no bound but the folder's size */
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        name_kind kind = classify(n);
        if (kind == NAME_OTHER) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        int r;
        if (kind == NAME_LOCK) { /* bookkeeping, not counted; a held one or a non-file stays */
            if (S_ISREG(st.st_mode)) remove_lock_at(dirfd(d), n);
            continue;
        } else if (kind == NAME_BAD) {
            r = remove_leftover_at(dirfd(d), n, &st, &budget);
        } else if (S_ISREG(st.st_mode)) {
            r = unlinkat(dirfd(d), n, 0) == 0 ? 0 : errno;
        } else {
            continue; /* an entry's or temporary's name on something else: not ours */
        }
        if (r != 0) {
            if (r != ENOENT) err = r; /* ENOENT: another process removed it first */
            continue;
        }
        *files += 1;
        *bytes += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    }
    closedir(d);
    return err;
}

void cache_usage(const disk_cache *c, uint64_t *bytes, uint64_t *entries) {
    *bytes = 0;
    *entries = 0;
    if (!c || !c->dir) return;
    DIR *d = opendir(c->dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (classify(e->d_name) != NAME_ENTRY) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        *bytes += (uint64_t)st.st_size;
        *entries += 1;
    }
    closedir(d);
}
