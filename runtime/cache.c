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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

#define CACHE_MAGIC "ATBWDC\r\n"
#define CACHE_FORMAT 1u
#define HEADER_LEN 32
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
static int valid_key(const char *key) {
    if (!key) return 0;
    for (int i = 0; i < CACHE_KEY_HEX; i++) {
        char ch = key[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
    }
    return key[CACHE_KEY_HEX] == '\0';
}

/* malloc'd "<dir>/<key><suffix>", NULL when out of memory. */
static char *entry_path(const disk_cache *c, const char *key, const char *suffix) {
    size_t n = strlen(c->dir) + 1 + CACHE_KEY_HEX + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", c->dir, key, suffix);
    return p;
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
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int err = fd >= 0 ? 0 : errno;
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    free(p);
    return err;
}

/* Leftovers that nothing will read: temporary files of writers that died
 * (a live write takes seconds; these are over an hour old) and entries moved
 * aside as bad over a week ago (kept that long for a look). Lock files stay:
 * removing one could let two processes hold "the" lock at once. */
#define STALE_TMP_SECONDS 3600
#define STALE_BAD_SECONDS (7 * 24 * 3600)

static void sweep(const disk_cache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    const time_t now = time(NULL);
    unsigned removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        const int tmp = strncmp(n, ".tmp-", 5) == 0 && strncmp(n, ".tmp-probe-", 11) != 0;
        const int bad = strstr(n, ".atbc") == NULL && strstr(n, ".bad-") != NULL;
        if (!tmp && !bad) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        /* A rename keeps mtime but sets ctime: a bad file's age counts from the move. */
        const time_t since = tmp ? st.st_mtime : st.st_ctime;
        if (now - since > (tmp ? STALE_TMP_SECONDS : STALE_BAD_SECONDS) && unlinkat(dirfd(d), n, 0) == 0)
            removed++;
    }
    closedir(d);
    if (removed) log_line(c->log, ATTNBWD_LOG_INFO, "disk cache: removed %u stale temporary or bad file(s)", removed);
}

void cache_open(disk_cache *c, const char *explicit_dir, int enabled, const logger *log) {
    c->dir = NULL;
    c->writable = 0;
    c->log = log;
    c->warned_write = 0;
    cache_budget_init(c);
    const char *env = getenv("ATTNBWD_CACHE");
    if (!enabled || (env && strcmp(env, "0") == 0)) {
        log_line(log, ATTNBWD_LOG_INFO, "disk cache off (%s)",
                 enabled ? "ATTNBWD_CACHE=0" : "disabled by options");
        return;
    }
    char *dir = resolve_dir(explicit_dir);
    if (!dir) {
        log_line(log, ATTNBWD_LOG_WARN,
                 "disk cache off: no directory (set ATTNBWD_CACHE_DIR, XDG_CACHE_HOME or HOME)");
        return;
    }
    char eb[128];
    int err = mkdir_p(dir);
    if (!err && access(dir, X_OK) != 0) err = errno; /* cannot even look inside */
    if (err) {
        log_line(log, ATTNBWD_LOG_WARN, "disk cache off: cannot use directory %s: %s", dir,
                 errstr(err, eb, sizeof eb));
        free(dir);
        return;
    }
    c->dir = dir;
    err = dir_unwritable(dir);
    c->writable = err == 0;
    if (err)
        log_line(log, ATTNBWD_LOG_WARN,
                 "disk cache %s is not writable (%s): reading existing entries only", dir,
                 errstr(err, eb, sizeof eb));
    else {
        log_line(log, ATTNBWD_LOG_INFO, "disk cache in %s", dir);
        sweep(c);
    }
}

void cache_close(disk_cache *c) {
    if (!c) return;
    cache_stats_flush(c);
    free(c->dir);
    c->dir = NULL;
    c->writable = 0;
}

void cache_key(const char *manifest, size_t len, char key_hex[CACHE_KEY_HEX + 1]) {
    XXH128_hash_t h = XXH3_128bits(manifest, len);
    snprintf(key_hex, CACHE_KEY_HEX + 1, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

/* ---- reading ------------------------------------------------------------- */

/* Reads exactly n bytes at off; 0 on success, -1 on error or early EOF. */
static int pread_all(int fd, void *buf, size_t n, off_t off) {
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

static uint64_t entry_checksum(const void *manifest, size_t mlen, const void *payload, size_t plen) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, manifest, mlen);
    XXH3_64bits_update(&st, payload, plen);
    return XXH3_64bits_digest(&st);
}

/* A damaged entry is moved aside (kept for a post-mortem) so the next put
 * rebuilds it. Only the file we read is moved: if another process renamed a
 * fresh entry onto the name meanwhile, that one is left alone. */
static void quarantine(disk_cache *c, const char *key, int fd, const char *path,
                       const char *why) {
    struct stat mine, now;
    if (fstat(fd, &mine) != 0 || stat(path, &now) != 0 || mine.st_ino != now.st_ino ||
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

/* Checks the header against the file size. NULL when sound, else why not. */
static const char *check_header(const unsigned char *h, uint64_t file_size, uint32_t *mlen,
                                uint64_t *plen) {
    if (memcmp(h, CACHE_MAGIC, 8) != 0) return "bad magic";
    if (get_u32(h + 8) != CACHE_FORMAT) return "unknown format version";
    *mlen = get_u32(h + 12);
    *plen = get_u64(h + 16);
    if (*mlen > MAX_MANIFEST) return "manifest length out of range";
    if (*plen > MAX_PAYLOAD) return "payload length out of range";
    if (HEADER_LEN + (uint64_t)*mlen + *plen != file_size) return "size does not match lengths";
    return NULL;
}

/* cache_get and cache_get_head: want must be the whole stored manifest, or
 * with head_only its beginning; *stored (when asked for) gets the whole. */
static int read_entry(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
                      int head_only, char **stored_out, size_t *stored_len, void **payload,
                      size_t *payload_len) {
    *payload = NULL;
    *payload_len = 0;
    if (!c || !c->dir || !valid_key(key_hex)) return 0;
    char *path = entry_path(c, key_hex, ".atbc");
    if (!path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(path); /* ENOENT is the ordinary miss; anything else is one too */
        return 0;
    }
    int hit = 0;
    const char *why = NULL;
    unsigned char hdr[HEADER_LEN];
    unsigned char *stored = NULL, *data = NULL;
    uint32_t mlen = 0;
    uint64_t plen = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        why = "not a readable regular file";
        goto done;
    }
    if ((uint64_t)st.st_size < HEADER_LEN) {
        why = "shorter than its header";
        goto done;
    }
    if (pread_all(fd, hdr, HEADER_LEN, 0) != 0) {
        why = "header unreadable";
        goto done;
    }
    if ((why = check_header(hdr, (uint64_t)st.st_size, &mlen, &plen))) goto done;
    /* +1: malloc(0) may return NULL, which would look like out of memory. */
    stored = malloc((size_t)mlen + 1);
    data = malloc((size_t)plen + 1);
    if (!stored || !data) goto done; /* out of memory: a plain miss */
    if (pread_all(fd, stored, mlen, HEADER_LEN) != 0 ||
        pread_all(fd, data, (size_t)plen, (off_t)(HEADER_LEN + (uint64_t)mlen)) != 0) {
        why = "short read";
        goto done;
    }
    if (entry_checksum(stored, mlen, data, (size_t)plen) != get_u64(hdr + 24)) {
        why = "checksum mismatch";
        goto done;
    }
    if (head_only ? mlen < manifest_len || memcmp(stored, manifest, manifest_len) != 0
                  : mlen != manifest_len || memcmp(stored, manifest, mlen) != 0) {
        /* The entry is sound but belongs to another manifest with the same
         * 128-bit hash: keep it and go without the cache for this kernel. */
        log_line(c->log, ATTNBWD_LOG_WARN,
                 "disk cache entry %s holds a different manifest (hash collision): not used",
                 path);
        goto done;
    }
    *payload = data;
    *payload_len = (size_t)plen;
    data = NULL;
    if (stored_out) {
        stored[mlen] = '\0';
        *stored_out = (char *)stored;
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
    return read_entry(c, key_hex, manifest, manifest_len, 0, NULL, NULL, payload, payload_len);
}

int cache_get_head(disk_cache *c, const char *key_hex, const char *head, size_t head_len, char **manifest,
                   size_t *manifest_len, void **payload, size_t *payload_len) {
    *manifest = NULL;
    *manifest_len = 0;
    return read_entry(c, key_hex, head, head_len, 1, manifest, manifest_len, payload, payload_len);
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
    int bit = (err == ENOSPC || err == EDQUOT)                    ? WARN_NOSPACE
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

int cache_put(disk_cache *c, const char *key_hex, const char *manifest, size_t manifest_len,
              const void *payload, size_t payload_len) {
    if (!c || !c->dir || !c->writable || !valid_key(key_hex)) return 0;
    if (manifest_len > MAX_MANIFEST || (uint64_t)payload_len > MAX_PAYLOAD) return 0;
    if (!cache_budget_admits(c, HEADER_LEN + (uint64_t)manifest_len + payload_len)) return 0;
    unsigned char hdr[HEADER_LEN];
    memcpy(hdr, CACHE_MAGIC, 8);
    put_u32(hdr + 8, CACHE_FORMAT);
    put_u32(hdr + 12, (uint32_t)manifest_len);
    put_u64(hdr + 16, (uint64_t)payload_len);
    put_u64(hdr + 24, entry_checksum(manifest, manifest_len, payload, payload_len));

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
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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

int cache_lock(disk_cache *c, const char *key_hex, int timeout_ms) {
    if (!c || !c->dir || !c->writable || !valid_key(key_hex)) return -1;
    char *path = entry_path(c, key_hex, ".lock");
    if (!path) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (fd < 0) return -1;
    /* Poll rather than block: flock has no timeout, and a signal-based
     * alarm would disturb the host process. */
    double deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) break; /* e.g. ENOLCK on some NFS */
        if (now_ms() >= deadline) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return -1;
}

void cache_unlock(int fd) {
    if (fd < 0) return;
    /* The lock file stays: removing it would race with a process that has it
     * open and is about to lock it, and two holders would result. */
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
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        const int entry = n[0] != '.' && len > 5 && strcmp(n + len - 5, ".atbc") == 0;
        const int leftover = (strncmp(n, ".tmp-", 5) == 0) || (strstr(n, ".bad-") && !strstr(n, ".atbc"));
        if (!entry && !leftover) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (unlinkat(dirfd(d), n, 0) != 0) {
            if (errno != ENOENT) err = errno; /* ENOENT: another process removed it first */
            continue;
        }
        *files += 1;
        *bytes += (uint64_t)st.st_size;
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
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 5, ".atbc") != 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
        *bytes += (uint64_t)st.st_size;
        *entries += 1;
    }
    closedir(d);
}
