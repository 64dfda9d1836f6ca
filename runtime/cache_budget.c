/* The disk cache's size budget: least-recently-used eviction, safe with
 * several processes on one folder, and the stats file of hits, misses and
 * evictions.
 *
 * Last use is the entry's mtime: set by the rename that puts it in place and
 * by futimens on a disk hit (one system call on an fd already open, skipped
 * when the mtime is under a minute old; the memory cache keeps hits of one
 * process from reaching the disk twice).
 * atime is not used: relatime and noatime mounts do not keep it.
 *
 * Eviction runs after a write that takes the folder over its budget, or on
 * `cache prune`, under the folder lock (flock on cache.lock, polled with a
 * bounded wait: one evictor at a time; a process that cannot have it leaves
 * the work to the holder). It removes only whole entries whose name is
 * exactly ours; writers write to temporary names and rename, so an entry is
 * never half written, and a reader that has it open keeps reading after the
 * unlink. Each file is stat'ed again just before its unlink: one that was
 * replaced or used meanwhile stays.
 *
 * Counts: each process adds its hits and misses to atomics, and adds them to
 * cache.stats (text, rewritten in place under the folder lock) after each
 * write of an entry and at close: one small locked write per compile, none
 * per hit. One file for the folder rather than counters per entry: those
 * would cost a write on every disk hit, and the totals, the question asked
 * of a cache, would need a scan of every entry. A process that dies before
 * close loses the hits it counted since its last write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_tools.h"

/* Holders keep the folder lock for milliseconds (a scan, a few unlinks, a
 * 100-byte write); the wait allows for a loaded machine descheduling one. */
#define FOLDER_LOCK_WAIT_MS 2000

int cache_parse_bytes(const char *text, uint64_t *out) {
    if (!text || !(*text >= '0' && *text <= '9')) return -1;
    /* Digits and one point only: strtod alone would take "0x10" or "1e3". */
    const size_t number = strspn(text, "0123456789.");
    const char *point = memchr(text, '.', number);
    if (point && memchr(point + 1, '.', number - (size_t)(point + 1 - text))) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno == ERANGE || end != text + number) return -1;
    double scale = 1;
    switch (*end) {
    case 'K': scale = 1024.0; break;
    case 'M': scale = 1024.0 * 1024; break;
    case 'G': scale = 1024.0 * 1024 * 1024; break;
    case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
    }
    if (scale > 1) {
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
    } else if (strcmp(end, "B") == 0) {
        end++;
    }
    if (*end != '\0') return -1;
    v *= scale;
    if (!(v >= 1) || v >= 18446744073709551616.0) return -1;
    *out = (uint64_t)v;
    return 0;
}

void cache_budget_init(disk_cache *c) {
    /* attnbwd_open sets the context's budget (options or the environment,
     * read and checked there); the default covers the cache's own tests,
     * which open no context. */
    c->max_bytes = CACHE_DEFAULT_MAX_BYTES;
    c->hits = c->misses = c->evicted = c->evicted_bytes = 0;
}

/* A metadata write costs microseconds (a journal entry on ext4), a good part
 * of a disk hit: an entry used again within this many seconds keeps its
 * mtime, an order finer than that changes nothing a budget keeps. */
#define TOUCH_SECONDS 60

void cache_budget_touch(disk_cache *c, int fd, time_t last_use) {
    c->hits++;
    /* A read-only or shared store is not ours to change; its order does not matter. */
    if (c->writable && time(NULL) - last_use >= TOUCH_SECONDS) (void)futimens(fd, NULL);
}

int cache_budget_admits(disk_cache *c, uint64_t entry_bytes) {
    if (entry_bytes <= c->max_bytes) return 1;
    log_line(c->log, ATTNBWD_LOG_INFO,
             "disk cache: an entry of %" PRIu64 " bytes is larger than the budget (%" PRIu64
             " bytes, ATTNBWD_CACHE_MAX_BYTES): kept in memory only",
             entry_bytes, c->max_bytes);
    return 0;
}

/* ---- the folder lock ------------------------------------------------------ */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cache_folder_lock(const disk_cache *c, int timeout_ms) {
    if (!c || !c->dir || !c->writable) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" CACHE_FOLDER_LOCK, c->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    /* Polled: flock has no timeout, and an alarm would disturb the host. */
    const double deadline = now_ms() + timeout_ms;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if ((errno != EWOULDBLOCK && errno != EINTR) || now_ms() >= deadline) break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return -1;
}

void cache_folder_unlock(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

/* ---- eviction ------------------------------------------------------------- */

typedef struct scanned {
    char key[CACHE_KEY_HEX + 1];
    uint64_t bytes;
    struct timespec mtime;
    ino_t ino;
} scanned;

static int older_first(const void *a, const void *b) {
    const scanned *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Every entry of the folder (malloc'd array, oldest use first) and their
 * bytes; removes <key>.info files whose entry is gone. -1 with errno set
 * when the folder cannot be read or memory runs out. */
static int scan_entries(DIR *d, scanned **out, size_t *n_out, uint64_t *total) {
    size_t n = 0, cap = 64;
    scanned *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    *total = 0;
    struct dirent *e;
    char key[CACHE_KEY_HEX + 1];
    while ((e = readdir(d))) {
        struct stat st;
        if (cache_name_is(e->d_name, ".info", key)) {
            char entry[CACHE_KEY_HEX + 6];
            snprintf(entry, sizeof entry, "%s.atbc", key);
            if (fstatat(dirfd(d), entry, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT)
                unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        if (!cache_name_is(e->d_name, ".atbc", key)) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            scanned *w = realloc(v, 2 * cap * sizeof *v);
            if (!w) {
                free(v);
                errno = ENOMEM;
                return -1;
            }
            v = w;
            cap *= 2;
        }
        memcpy(v[n].key, key, sizeof key);
        v[n].bytes = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        v[n].ino = st.st_ino;
        *total += v[n].bytes;
        n++;
    }
    qsort(v, n, sizeof *v, older_first);
    *out = v;
    *n_out = n;
    return 0;
}

/* Unlinks the entry s (and its info) if it is still the file scanned and
 * still unused since. */
static int remove_if_unchanged(DIR *d, const scanned *s) {
    char name[CACHE_KEY_HEX + 6];
    snprintf(name, sizeof name, "%s.atbc", s->key);
    struct stat st;
    if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != s->ino ||
        st.st_mtim.tv_sec != s->mtime.tv_sec || st.st_mtim.tv_nsec != s->mtime.tv_nsec)
        return 0;
    if (unlinkat(dirfd(d), name, 0) != 0) return 0;
    snprintf(name, sizeof name, "%s.info", s->key);
    unlinkat(dirfd(d), name, 0);
    return 1;
}

int cache_evict(disk_cache *c, uint64_t max_bytes, int64_t older_than, const char *keep_key, uint64_t *files,
                uint64_t *bytes) {
    *files = *bytes = 0;
    if (!c || !c->dir || !c->writable) return EROFS;
    int lock = cache_folder_lock(c, FOLDER_LOCK_WAIT_MS);
    if (lock < 0) return EWOULDBLOCK;
    DIR *d = opendir(c->dir);
    if (!d) {
        int err = errno;
        cache_folder_unlock(lock);
        return err;
    }
    scanned *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    int err = scan_entries(d, &v, &n, &total) != 0 ? errno : 0;
    const time_t cutoff = older_than > 0 ? time(NULL) - (time_t)older_than : 0;
    for (size_t i = 0; !err && i < n; i++) {
        const int stale = older_than > 0 && v[i].mtime.tv_sec < cutoff;
        if (!stale && total <= max_bytes) break; /* the rest are newer still */
        if (keep_key && strcmp(v[i].key, keep_key) == 0) continue;
        if (!remove_if_unchanged(d, &v[i])) continue;
        total -= v[i].bytes;
        *files += 1;
        *bytes += v[i].bytes;
    }
    free(v);
    closedir(d);
    cache_folder_unlock(lock);
    c->evicted += *files;
    c->evicted_bytes += *bytes;
    return err;
}

/* Set while this thread imports an archive: its writes are not misses. */
static _Thread_local int importing;

void cache_budget_importing(int on) { importing = on; }

void cache_budget_after_put(disk_cache *c, const char *key_hex) {
    if (!importing) c->misses++;
    /* A quick unlocked look first: most writes leave the folder within budget. */
    DIR *d = opendir(c->dir);
    if (!d) return;
    uint64_t total = 0;
    struct dirent *e;
    char key[CACHE_KEY_HEX + 1];
    while ((e = readdir(d))) {
        struct stat st;
        if (cache_name_is(e->d_name, ".atbc", key) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    if (total > c->max_bytes) {
        uint64_t files = 0, bytes = 0;
        int err = cache_evict(c, c->max_bytes, 0, key_hex, &files, &bytes);
        if (files)
            log_line(c->log, ATTNBWD_LOG_INFO,
                     "disk cache over its budget (%" PRIu64 " of %" PRIu64 " bytes): removed %" PRIu64
                     " least recently used entries (%" PRIu64 " bytes)",
                     total, c->max_bytes, files, bytes);
        else if (err == EWOULDBLOCK)
            log_line(c->log, ATTNBWD_LOG_DEBUG, "disk cache over its budget: another process holds %s/" CACHE_FOLDER_LOCK,
                     c->dir);
    }
    cache_stats_flush(c);
}

/* ---- the stats file -------------------------------------------------------- */

#define STATS_HEADER "attnbwd-cache-stats 1\n"

/* Parses the stats file's text; 0 when it is ours and whole. */
static int parse_stats(const char *text, cache_counts *s) {
    long long since;
    unsigned long long h, m, e, eb;
    if (strncmp(text, STATS_HEADER, strlen(STATS_HEADER)) != 0) return -1;
    if (sscanf(text + strlen(STATS_HEADER), "since %lld\nhits %llu\nmisses %llu\nevicted %llu\nevicted_bytes %llu\n",
               &since, &h, &m, &e, &eb) != 5)
        return -1;
    s->since = since;
    s->hits = h;
    s->misses = m;
    s->evicted = e;
    s->evicted_bytes = eb;
    return 0;
}

/* Opens cache.stats (created when create is 1) and reads its counts; a file
 * that does not parse counts from now. Returns the fd or -1. */
static int open_stats(const disk_cache *c, int create, cache_counts *s) {
    memset(s, 0, sizeof *s);
    char path[4200];
    snprintf(path, sizeof path, "%s/" CACHE_STATS_FILE, c->dir);
    int fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) return -1;
    struct stat st;
    char text[512];
    ssize_t n = -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (n = pread(fd, text, sizeof text - 1, 0)) < 0) {
        close(fd);
        return -1;
    }
    text[n] = '\0';
    if (parse_stats(text, s) != 0) {
        memset(s, 0, sizeof *s);
        s->since = time(NULL);
    }
    return fd;
}

static void write_stats(int fd, const cache_counts *s) {
    char text[512];
    int n = snprintf(text, sizeof text,
                     STATS_HEADER "since %lld\nhits %" PRIu64 "\nmisses %" PRIu64 "\nevicted %" PRIu64
                                  "\nevicted_bytes %" PRIu64 "\n",
                     (long long)s->since, s->hits, s->misses, s->evicted, s->evicted_bytes);
    /* Readers take the folder lock too, so they never see a half-written file. */
    if (pwrite(fd, text, (size_t)n, 0) == n) (void)ftruncate(fd, n);
}

void cache_stats_flush(disk_cache *c) {
    if (!c || !c->dir || !c->writable) return;
    if (!c->hits && !c->misses && !c->evicted) return;
    int lock = cache_folder_lock(c, FOLDER_LOCK_WAIT_MS);
    if (lock < 0) return; /* the counts stay for the next flush */
    cache_counts s;
    int fd = open_stats(c, 1, &s);
    if (fd >= 0) {
        /* Taken out before the write: a hit counted meanwhile goes to the next flush. */
        uint64_t h = atomic_exchange(&c->hits, 0), m = atomic_exchange(&c->misses, 0);
        uint64_t e = atomic_exchange(&c->evicted, 0), eb = atomic_exchange(&c->evicted_bytes, 0);
        s.hits += h;
        s.misses += m;
        s.evicted += e;
        s.evicted_bytes += eb;
        write_stats(fd, &s);
        close(fd);
    }
    cache_folder_unlock(lock);
}

void cache_stats_read(disk_cache *c, cache_counts *out) {
    memset(out, 0, sizeof *out);
    if (c && c->dir) {
        int lock = cache_folder_lock(c, FOLDER_LOCK_WAIT_MS);
        int fd = open_stats(c, 0, out);
        if (fd >= 0) close(fd);
        else memset(out, 0, sizeof *out);
        cache_folder_unlock(lock);
    }
    if (!c) return;
    out->hits += c->hits;
    out->misses += c->misses;
    out->evicted += c->evicted;
    out->evicted_bytes += c->evicted_bytes;
}

void cache_stats_reset(disk_cache *c) {
    if (!c || !c->dir || !c->writable) return;
    c->hits = c->misses = c->evicted = c->evicted_bytes = 0;
    int lock = cache_folder_lock(c, FOLDER_LOCK_WAIT_MS);
    if (lock < 0) return;
    cache_counts s;
    int fd = open_stats(c, 1, &s);
    if (fd >= 0) {
        memset(&s, 0, sizeof s);
        s.since = time(NULL);
        write_stats(fd, &s);
        close(fd);
    }
    cache_folder_unlock(lock);
}
