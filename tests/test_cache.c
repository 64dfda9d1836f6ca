/* Tests of the disk cache (runtime/cache.c): round trips, keys, damaged
 * entries of every kind, concurrent writers and readers (processes and
 * threads), the per-key lock, read-only and unusable directories, and the
 * switches that turn the cache off. Each test works in its own mkdtemp dir. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

#define H CACHE_FILE_HEADER_LEN

/* ---- helpers ------------------------------------------------------------- */

static atomic_int n_warn, n_info;

/* The last warning's text, for tests that check what it says (the tests
 * that read it log from one thread). */
static char last_warn[2048];

static void count_log(int level, const char *line, void *user) {
    (void)user;
    if (level == ATTNBWD_LOG_WARN) snprintf(last_warn, sizeof last_warn, "%s", line);
    if (level == ATTNBWD_LOG_WARN) atomic_fetch_add(&n_warn, 1);
    else atomic_fetch_add(&n_info, 1);
    if (getenv("TEST_CACHE_VERBOSE")) fprintf(stderr, "  [log %d] %s\n", level, line);
}

static const logger LG = {ATTNBWD_LOG_DEBUG, count_log, NULL};

static void reset_counts(void) {
    last_warn[0] = '\0';
    atomic_store(&n_warn, 0);
    atomic_store(&n_info, 0);
}

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/attnbwd-test-cache-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static void rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char *p = join(path, e->d_name);
                rm_rf(p);
                free(p);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Files in dir whose names start with prefix and end with suffix. */
static int count_files(const char *dir, const char *prefix, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        /* The folder's lock and counts (cache_budget.c), there once anything is written. */
        if (!strcmp(e->d_name, "cache.lock") || !strcmp(e->d_name, "cache.stats")) continue;
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (len < sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        n++;
    }
    closedir(d);
    return n;
}

/* Removes the plain files of dir (not subdirectories). */
static void clear_dir(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, ".."))) continue;
        char *p = join(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
}

static char *entry_file(const char *dir, const char *key) {
    char name[64];
    snprintf(name, sizeof name, "%s.atbc", key);
    return join(dir, name);
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A deterministic manifest and payload per index, of varying sizes. The
 * manifest ends in a source part, as the library's do (manifest.h): a
 * "source" line and the text after it. */
static char *make_manifest(int i, size_t *len) {
    char *m = malloc(256);
    *len = (size_t)snprintf(m, 256, "format=1\nversion=0.1.0\narch=sm_90\nentry=%d\nsource\n// kernel %d\nint x;\n", i,
                            i);
    return m;
}

/* The length of make_manifest's part before its source text. */
static size_t launch_len_of(const char *m) { return (size_t)(strstr(m, "\nsource\n") + 8 - m); }

static unsigned char *make_payload(int i, size_t len) {
    unsigned char *p = malloc(len + 1);
    for (size_t k = 0; k < len; k++) p[k] = (unsigned char)(k * 31u + (unsigned)i * 7u + (k >> 8));
    return p;
}

static size_t payload_len_of(int i) { return 1000 + (size_t)i * 997; }

/* 1 when get hits with exactly the expected payload. */
static int get_matches(disk_cache *c, const char *key, const char *m, size_t mlen,
                       const unsigned char *want, size_t want_len) {
    void *got = NULL;
    size_t got_len = 0;
    int hit = cache_get(c, key, m, mlen, &got, &got_len);
    int ok = hit && got_len == want_len && memcmp(got, want, want_len) == 0;
    free(got);
    return ok;
}

static int get_hits(disk_cache *c, const char *key, const char *m, size_t mlen) {
    void *got = NULL;
    size_t got_len = 0;
    int hit = cache_get(c, key, m, mlen, &got, &got_len);
    free(got);
    return hit;
}

/* In forked children: no cmocka asserts (they would unwind into the parent's
 * copy of the runner); report by exit code instead. */
#define CHILD_CHECK(cond, code)                                                          \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "child %ld: check failed at line %d: %s\n", (long)getpid(),   \
                    __LINE__, #cond);                                                     \
            _exit(code);                                                                  \
        }                                                                                 \
    } while (0)

static void assert_child_ok(pid_t pid) {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- keys and round trips -------------------------------------------------- */

static void test_key(void **state) {
    (void)state;
    char k1[CACHE_KEY_HEX + 1], k2[CACHE_KEY_HEX + 1], k3[CACHE_KEY_HEX + 1], k4[CACHE_KEY_HEX + 1];
    cache_key("manifest a", 10, k1);
    cache_key("manifest a", 10, k2);
    cache_key("manifest b", 10, k3);
    cache_key("", 0, k4);
    assert_int_equal(strlen(k1), CACHE_KEY_HEX);
    for (int i = 0; i < CACHE_KEY_HEX; i++)
        assert_non_null(strchr("0123456789abcdef", k1[i]));
    assert_string_equal(k1, k2);
    assert_string_not_equal(k1, k3);
    assert_int_equal(strlen(k4), CACHE_KEY_HEX);
    /* It is XXH3-128, high half first, as cache.h promises. */
    XXH128_hash_t h = XXH3_128bits("manifest a", 10);
    char want[CACHE_KEY_HEX + 1];
    snprintf(want, sizeof want, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
    assert_string_equal(k1, want);
}

static void test_roundtrip(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    disk_cache c;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    assert_non_null(c.dir);
    assert_true(c.writable);
    assert_int_equal(atomic_load(&n_warn), 0);

    size_t mlen, plen = 12345;
    char *m = make_manifest(1, &mlen);
    unsigned char *p = make_payload(1, plen);
    char key[CACHE_KEY_HEX + 1];
    cache_key(m, mlen, key);

    assert_false(get_hits(&c, key, m, mlen)); /* miss */
    assert_int_equal(cache_put(&c, key, m, mlen, p, plen), 1);
    assert_true(get_matches(&c, key, m, mlen, p, plen));

    uint64_t bytes, entries;
    cache_usage(&c, &bytes, &entries);
    assert_int_equal(entries, 1);
    assert_int_equal(bytes, H + mlen + plen);

    /* Same key, another manifest (as after a hash collision): a miss that
     * is logged, and the sound entry stays. */
    char *path = entry_file(dir, key);
    assert_false(get_hits(&c, key, "another manifest", 16));
    assert_false(get_hits(&c, key, m, mlen - 1)); /* a prefix is not equal either */
    assert_int_equal(atomic_load(&n_warn), 2);
    assert_true(exists(path));
    assert_true(get_matches(&c, key, m, mlen, p, plen));

    /* An empty payload is an entry like any other. */
    char key2[CACHE_KEY_HEX + 1];
    cache_key("empty", 5, key2);
    assert_int_equal(cache_put(&c, key2, "empty", 5, "", 0), 1);
    void *got = NULL;
    size_t got_len = 99;
    assert_int_equal(cache_get(&c, key2, "empty", 5, &got, &got_len), 1);
    assert_int_equal(got_len, 0);
    free(got);

    /* Overwriting an entry replaces it whole. */
    unsigned char *p2 = make_payload(2, 300);
    assert_int_equal(cache_put(&c, key, m, mlen, p2, 300), 1);
    assert_true(get_matches(&c, key, m, mlen, p2, 300));

    assert_int_equal(count_files(dir, ".tmp-", ""), 0);
    cache_usage(&c, &bytes, &entries);
    assert_int_equal(entries, 2);
    assert_int_equal(bytes, (H + mlen + 300) + (H + 5));

    cache_close(&c);
    assert_null(c.dir);
    free(p2);
    free(path);
    free(m);
    free(p);
    rm_rf(dir);
    free(dir);
}

static void test_invalid_key(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    const char *bad[] = {"../../../../tmp/evil", "0123456789ABCDEF0123456789abcdef",
                         "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(get_hits(&c, bad[i], "m", 1));
        assert_int_equal(cache_put(&c, bad[i], "m", 1, "p", 1), 0);
        assert_int_equal(cache_lock(&c, bad[i], 0), -1);
    }
    assert_int_equal(count_files(dir, "", ""), 0);
    cache_close(&c);
    rm_rf(dir);
    free(dir);
}

/* ---- damaged entries --------------------------------------------------------- */

enum damage { TRUNC, FLIP, SET_U32, SET_U64, APPEND };

struct damage_case {
    const char *name;
    enum damage kind;
    long where; /* offset; negative counts from the end of the file */
    uint64_t value;
};

static void apply_damage(const char *path, const struct damage_case *d, size_t mlen, size_t plen) {
    long total = (long)(H + mlen + plen);
    long off = d->where < 0 ? total + d->where : d->where;
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b[8];
    switch (d->kind) {
    case TRUNC: assert_int_equal(ftruncate(fd, off), 0); break;
    case FLIP:
        assert_int_equal(pread(fd, b, 1, off), 1);
        b[0] ^= 0x40;
        assert_int_equal(pwrite(fd, b, 1, off), 1);
        break;
    case SET_U32:
    case SET_U64:
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)(d->value >> (8 * i));
        assert_int_equal(pwrite(fd, b, d->kind == SET_U32 ? 4 : 8, off), d->kind == SET_U32 ? 4 : 8);
        break;
    case APPEND: assert_int_equal(pwrite(fd, "x", 1, total), 1); break;
    }
    close(fd);
}

static void test_damaged_entries(void **state) {
    (void)state;
    size_t mlen, plen = 4096;
    char *m = make_manifest(3, &mlen);
    unsigned char *p = make_payload(3, plen);
    const struct damage_case cases[] = {
        {"empty file", TRUNC, 0, 0},
        {"inside header", TRUNC, 13, 0},
        {"header only", TRUNC, H, 0},
        {"inside manifest", TRUNC, H + 10, 0},
        {"inside payload", TRUNC, H + (long)mlen + 2000, 0},
        {"last byte missing", TRUNC, -1, 0},
        {"extra byte", APPEND, 0, 0},
        {"payload byte flipped", FLIP, H + (long)mlen + 1234, 0},
        {"last payload byte flipped", FLIP, -1, 0},
        {"manifest byte flipped", FLIP, H + 5, 0},
        {"source byte flipped", FLIP, H + (long)mlen - 3, 0},
        {"checksum flipped", FLIP, 24, 0},
        {"launch length flipped", FLIP, 32, 0},
        {"launch length past the manifest", SET_U32, 32, 0x10000},
        {"reserved field set", SET_U32, 36, 1},
        {"source checksum flipped", FLIP, 40, 0},
        {"wrong magic", FLIP, 0, 0},
        {"a later format", SET_U32, 8, CACHE_FILE_FORMAT + 1},
        {"huge manifest length", SET_U32, 12, 0xffffffffu},
        {"huge payload length", SET_U64, 16, UINT64_MAX},
        {"payload length off by one", SET_U64, 16, 4095},
    };
    char key[CACHE_KEY_HEX + 1];
    cache_key(m, mlen, key);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = make_tmpdir();
        disk_cache c;
        cache_open(&c, dir, 1, &LG);
        char *path = entry_file(dir, key);
        assert_int_equal(cache_put(&c, key, m, mlen, p, plen), 1);
        apply_damage(path, &cases[i], mlen, plen);
        reset_counts();
        if (get_hits(&c, key, m, mlen)) fail_msg("damaged entry '%s' was a hit", cases[i].name);
        if (atomic_load(&n_warn) != 1) fail_msg("'%s': %d warnings", cases[i].name, n_warn);
        if (exists(path)) fail_msg("'%s': damaged entry left in place", cases[i].name);
        assert_int_equal(count_files(dir, key, ""), 1); /* <key>.bad-<pid> */
        char bad[96];
        snprintf(bad, sizeof bad, "%s.bad-%ld", key, (long)getpid());
        assert_int_equal(count_files(dir, bad, ""), 1);
        /* Healed: the next put and get work. */
        assert_int_equal(cache_put(&c, key, m, mlen, p, plen), 1);
        assert_true(get_matches(&c, key, m, mlen, p, plen));
        uint64_t bytes, entries;
        cache_usage(&c, &bytes, &entries); /* the .bad file is not an entry */
        assert_int_equal(entries, 1);
        cache_close(&c);
        free(path);
        rm_rf(dir);
        free(dir);
    }
    free(m);
    free(p);
}

/* The disk hit's read (cache_get_launch) reads the manifest up to its source
 * and the payload, and checks those: damage there is a miss, moved aside;
 * damage in the source alone does not touch what is launched, so the launch
 * read still hits, while the reads that compare the source find it. */
static void test_launch_read(void **state) {
    (void)state;
    size_t mlen, plen = 5000;
    char *m = make_manifest(5, &mlen);
    unsigned char *p = make_payload(5, plen);
    const size_t want_len = launch_len_of(m);
    char key[CACHE_KEY_HEX + 1];
    cache_key(m, 20, key);
    const long offsets[] = {H + 3, H + (long)want_len - 2, H + (long)mlen + 17, H + (long)mlen - 2};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        char *dir = make_tmpdir();
        disk_cache c;
        cache_open(&c, dir, 1, &LG);
        char *path = entry_file(dir, key);
        assert_int_equal(cache_put(&c, key, m, mlen, p, plen), 1);
        char *launch = NULL, *whole = NULL;
        void *got = NULL;
        size_t launch_len = 0, whole_len = 0, got_len = 0;
        assert_int_equal(cache_get_launch(&c, key, m, 20, &launch, &launch_len, &got, &got_len), 1);
        assert_int_equal(launch_len, want_len);
        assert_memory_equal(launch, m, want_len);
        assert_int_equal(launch[launch_len], '\0');
        assert_int_equal(got_len, plen);
        assert_memory_equal(got, p, plen);
        free(launch);
        free(got);
        const struct damage_case flip = {"flip", FLIP, offsets[i], 0};
        apply_damage(path, &flip, mlen, plen);
        const int in_source = offsets[i] >= H + (long)want_len && offsets[i] < H + (long)mlen;
        reset_counts();
        launch = NULL;
        got = NULL;
        const int hit = cache_get_launch(&c, key, m, 20, &launch, &launch_len, &got, &got_len);
        assert_int_equal(hit, in_source);
        if (hit) assert_memory_equal(got, p, plen);
        assert_int_equal(atomic_load(&n_warn), !in_source);
        free(launch);
        free(got);
        got = NULL;
        if (in_source) { /* the source's own checksum catches it where the source is read */
            assert_int_equal(cache_get_head(&c, key, m, 20, &whole, &whole_len, &got, &got_len), 0);
            assert_int_equal(atomic_load(&n_warn), 1);
            assert_non_null(strstr(last_warn, "checksum mismatch in its source"));
        }
        assert_false(exists(path));
        cache_close(&c);
        free(path);
        rm_rf(dir);
        free(dir);
    }
    free(m);
    free(p);
}

/* ---- one entry in a fresh folder --------------------------------------------- */

/* The state of the tests of what a read makes of one entry's file: a
 * writable cache in a fresh folder holding one sound entry, of manifest and
 * payload 4 under the key of the whole manifest. */
typedef struct one_entry {
    char *dir;
    disk_cache c;
    char *m;
    size_t mlen;
    unsigned char *p;
    size_t plen;
    char key[CACHE_KEY_HEX + 1];
    char *path; /* the entry's file */
} one_entry;

static int one_entry_setup(void **state) {
    one_entry *e = calloc(1, sizeof *e);
    assert_non_null(e);
    e->dir = make_tmpdir();
    cache_open(&e->c, e->dir, 1, &LG);
    assert_true(e->c.writable);
    e->m = make_manifest(4, &e->mlen);
    e->plen = 700;
    e->p = make_payload(4, e->plen);
    cache_key(e->m, e->mlen, e->key);
    e->path = entry_file(e->dir, e->key);
    assert_int_equal(cache_put(&e->c, e->key, e->m, e->mlen, e->p, e->plen), 1);
    reset_counts();
    *state = e;
    return 0;
}

static int one_entry_teardown(void **state) {
    one_entry *e = *state;
    cache_close(&e->c);
    free(e->path);
    free(e->m);
    free(e->p);
    rm_rf(e->dir);
    free(e->dir);
    free(e);
    return 0;
}

/* An entry of the older format 1 (what an earlier build wrote under the same
 * key) is not damage: a miss without a warning, left in place, and replaced
 * by the next put. */
static void test_older_format_is_a_quiet_miss(void **state) {
    one_entry *e = *state;
    const struct damage_case older = {"format 1", SET_U32, 8, 1};
    apply_damage(e->path, &older, e->mlen, e->plen);
    assert_false(get_hits(&e->c, e->key, e->m, e->mlen));
    assert_int_equal(atomic_load(&n_warn), 0);
    assert_true(exists(e->path));
    assert_int_equal(count_files(e->dir, e->key, ""), 1); /* nothing moved aside */
    assert_int_equal(cache_put(&e->c, e->key, e->m, e->mlen, e->p, e->plen), 1);
    assert_true(get_matches(&e->c, e->key, e->m, e->mlen, e->p, e->plen));
}

/* Writes the fuzz's file for this turn in place of the entry: garbage
 * (sometimes behind a valid magic), or the sound entry with a few bytes
 * changed, half the time in the header, where the lengths live. */
static void fuzz_entry_file(one_entry *e, unsigned *seed) {
    unsigned char buf[2048];
    clear_dir(e->dir);
    int mode = rand_r(seed) % 3;
    if (mode == 0) {
        size_t n = (size_t)(rand_r(seed) % 200);
        for (size_t k = 0; k < n; k++) buf[k] = (unsigned char)rand_r(seed);
        if (n >= 8 && rand_r(seed) % 2) memcpy(buf, "ATBWDC\r\n", 8);
        if (n >= 16 && rand_r(seed) % 2) buf[8] = 1, buf[9] = buf[10] = buf[11] = 0;
        FILE *f = fopen(e->path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, n, f), n);
        fclose(f);
        return;
    }
    assert_int_equal(cache_put(&e->c, e->key, e->m, e->mlen, e->p, e->plen), 1);
    int fd = open(e->path, O_RDWR);
    assert_true(fd >= 0);
    int flips = 1 + rand_r(seed) % 3;
    for (int k = 0; k < flips; k++) {
        off_t off = mode == 1 ? rand_r(seed) % H : rand_r(seed) % (off_t)(H + e->mlen + e->plen);
        unsigned char b;
        assert_int_equal(pread(fd, &b, 1, off), 1);
        b ^= (unsigned char)(1 + rand_r(seed) % 255);
        assert_int_equal(pwrite(fd, &b, 1, off), 1);
    }
    close(fd);
}

/* Random files and randomly mutated entries: never a crash, never a hit. */
static void test_fuzz(void **state) {
    one_entry *e = *state;
    unsigned seed = 12345;
    for (int it = 0; it < 600; it++) {
        fuzz_entry_file(e, &seed);
        /* A disk hit's read checks only what a launch uses: it may hit where
         * the damage is in the source alone, but then with exactly what was
         * put. */
        void *got = NULL;
        char *launch = NULL;
        size_t got_len = 0, launch_len = 0;
        if (cache_get_launch(&e->c, e->key, e->m, 20, &launch, &launch_len, &got, &got_len) &&
            (launch_len != launch_len_of(e->m) || memcmp(launch, e->m, launch_len) != 0 || got_len != e->plen ||
             memcmp(got, e->p, e->plen) != 0))
            fail_msg("iteration %d: a damaged file gave a launch what was not put", it);
        free(launch);
        free(got);
        got = NULL;
        int hit = cache_get(&e->c, e->key, e->m, e->mlen, &got, &got_len);
        if (hit) fail_msg("iteration %d: a damaged file was a hit", it);
        assert_null(got);
    }
}

/* ---- concurrency --------------------------------------------------------------- */

#define N_ENTRIES 50

struct entry_set {
    char *m[N_ENTRIES];
    size_t mlen[N_ENTRIES];
    unsigned char *p[N_ENTRIES];
    size_t plen[N_ENTRIES];
    char key[N_ENTRIES][CACHE_KEY_HEX + 1];
};

static void entries_make(struct entry_set *s) {
    for (int i = 0; i < N_ENTRIES; i++) {
        s->m[i] = make_manifest(100 + i, &s->mlen[i]);
        s->plen[i] = payload_len_of(i);
        s->p[i] = make_payload(i, s->plen[i]);
        cache_key(s->m[i], s->mlen[i], s->key[i]);
    }
}

static void entries_free(struct entry_set *s) {
    for (int i = 0; i < N_ENTRIES; i++) {
        free(s->m[i]);
        free(s->p[i]);
    }
}

/* Every read is either a miss or the exact payload; never anything else. */
static int read_pass(disk_cache *c, const struct entry_set *s, int *hits) {
    for (int i = 0; i < N_ENTRIES; i++) {
        void *got = NULL;
        size_t got_len = 0;
        if (cache_get(c, s->key[i], s->m[i], s->mlen[i], &got, &got_len)) {
            if (got_len != s->plen[i] || memcmp(got, s->p[i], got_len) != 0) {
                free(got);
                return 0;
            }
            ++*hits;
        }
        free(got);
    }
    return 1;
}

static void test_processes(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    struct entry_set s;
    entries_make(&s);
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            disk_cache c;
            reset_counts();
            cache_open(&c, dir, 1, &LG);
            CHILD_CHECK(c.dir && c.writable, 2);
            int hits = 0;
            if (k < 2) { /* writers, in opposite orders, three times over */
                for (int pass = 0; pass < 3; pass++)
                    for (int j = 0; j < N_ENTRIES; j++) {
                        int i = k == 0 ? j : N_ENTRIES - 1 - j;
                        CHILD_CHECK(cache_put(&c, s.key[i], s.m[i], s.mlen[i], s.p[i], s.plen[i]) == 1, 3);
                        CHILD_CHECK(get_matches(&c, s.key[i], s.m[i], s.mlen[i], s.p[i], s.plen[i]), 4);
                    }
            } else { /* readers */
                for (int pass = 0; pass < 20; pass++) CHILD_CHECK(read_pass(&c, &s, &hits), 5);
            }
            CHILD_CHECK(atomic_load(&n_warn) == 0, 6); /* nobody saw a bad entry */
            cache_close(&c);
            entries_free(&s);
            _exit(0);
        }
        kids[k] = pid;
    }
    for (int k = 0; k < 4; k++) assert_child_ok(kids[k]);

    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    for (int i = 0; i < N_ENTRIES; i++)
        assert_true(get_matches(&c, s.key[i], s.m[i], s.mlen[i], s.p[i], s.plen[i]));
    assert_int_equal(count_files(dir, ".tmp-", ""), 0);
    assert_int_equal(count_files(dir, "", ".atbc"), N_ENTRIES);
    assert_int_equal(count_files(dir, "", ""), N_ENTRIES); /* nothing moved aside */
    uint64_t bytes, entries, want = 0;
    for (int i = 0; i < N_ENTRIES; i++) want += H + s.mlen[i] + s.plen[i];
    cache_usage(&c, &bytes, &entries);
    assert_int_equal(entries, N_ENTRIES);
    assert_int_equal(bytes, want);
    cache_close(&c);
    entries_free(&s);
    rm_rf(dir);
    free(dir);
}

struct thread_arg {
    disk_cache *c;
    const struct entry_set *s;
    int id, ok;
};

static void *thread_main(void *v) {
    struct thread_arg *a = v;
    const struct entry_set *s = a->s;
    a->ok = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < N_ENTRIES; j++) {
            int i = (j + a->id * 13) % N_ENTRIES;
            if (a->id % 2 == 0 && cache_put(a->c, s->key[i], s->m[i], s->mlen[i], s->p[i], s->plen[i]) != 1)
                a->ok = 0;
            int hits = 0;
            if (!read_pass(a->c, s, &hits)) a->ok = 0;
        }
    return NULL;
}

/* One disk_cache shared by several threads, as the context does. */
static void test_threads(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    struct entry_set s;
    entries_make(&s);
    disk_cache c;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    pthread_t th[6];
    struct thread_arg args[6];
    for (int t = 0; t < 6; t++) {
        args[t] = (struct thread_arg){&c, &s, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, thread_main, &args[t]), 0);
    }
    for (int t = 0; t < 6; t++) {
        pthread_join(th[t], NULL);
        assert_true(args[t].ok);
    }
    for (int i = 0; i < N_ENTRIES; i++)
        assert_true(get_matches(&c, s.key[i], s.m[i], s.mlen[i], s.p[i], s.plen[i]));
    assert_int_equal(atomic_load(&n_warn), 0);
    assert_int_equal(count_files(dir, "", ""), N_ENTRIES);
    cache_close(&c);
    entries_free(&s);
    rm_rf(dir);
    free(dir);
}

/* ---- the lock ---------------------------------------------------------------- */

static void test_lock(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    char key[CACHE_KEY_HEX + 1], other[CACHE_KEY_HEX + 1];
    cache_key("lock me", 7, key);
    cache_key("not me", 6, other);
    int to_child[2], to_parent[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(to_parent), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Close the other ends, so that a parent that dies in a failed assert
         * gives us EOF instead of leaving us blocked forever. */
        close(to_child[1]);
        close(to_parent[0]);
        disk_cache c;
        cache_open(&c, dir, 1, &LG);
        int fd = cache_lock(&c, key, 1000);
        CHILD_CHECK(fd >= 0, 2);
        CHILD_CHECK(write(to_parent[1], "L", 1) == 1, 3);
        char ch;
        CHILD_CHECK(read(to_child[0], &ch, 1) == 1, 4);
        struct timespec ts = {0, 100 * 1000 * 1000}; /* the parent waits in cache_lock meanwhile */
        nanosleep(&ts, NULL);
        cache_unlock(fd);
        cache_close(&c);
        _exit(0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    char ch;
    assert_int_equal(read(to_parent[0], &ch, 1), 1);

    double t0 = now_ms();
    assert_int_equal(cache_lock(&c, key, 200), -1);
    double waited = now_ms() - t0;
    assert_true(waited >= 195);
    assert_true(waited < 2000);

    /* Another key is not held up. */
    int fo = cache_lock(&c, other, 0);
    assert_true(fo >= 0);
    cache_unlock(fo);

    /* Released while we wait: we get it well within the timeout. */
    assert_int_equal(write(to_child[1], "g", 1), 1);
    t0 = now_ms();
    int fd = cache_lock(&c, key, 5000);
    waited = now_ms() - t0;
    assert_true(fd >= 0);
    assert_true(waited >= 50);
    assert_true(waited < 3000);
    assert_child_ok(pid);

    /* Two holders in one process (two threads) exclude each other too. */
    assert_int_equal(cache_lock(&c, key, 30), -1);
    cache_unlock(fd);
    fd = cache_lock(&c, key, 0);
    assert_true(fd >= 0);
    cache_unlock(fd);
    cache_unlock(-1); /* harmless */

    close(to_child[1]);
    close(to_parent[0]);
    cache_close(&c);
    rm_rf(dir);
    free(dir);
}

/* ---- directories that cannot be used fully ------------------------------------ */

static void test_read_only(void **state) {
    (void)state;
    mode_t old_umask = umask(022);
    char *root = make_tmpdir();
    assert_int_equal(chmod(root, 0755), 0); /* mkdtemp made it 0700 */
    char *dir = join(root, "cache");
    assert_int_equal(mkdir(dir, 0755), 0);

    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    assert_true(c.writable);
    size_t mlen, plen = 2000, mlen2;
    char *m = make_manifest(5, &mlen), *m2 = make_manifest(6, &mlen2);
    unsigned char *p = make_payload(5, plen);
    char key[CACHE_KEY_HEX + 1], key2[CACHE_KEY_HEX + 1], key3[CACHE_KEY_HEX + 1];
    cache_key(m, mlen, key);
    cache_key(m2, mlen2, key2);
    cache_key("damaged", 7, key3);
    assert_int_equal(cache_put(&c, key, m, mlen, p, plen), 1);
    /* A damaged entry that a read-only reader cannot move aside. */
    assert_int_equal(cache_put(&c, key3, "damaged", 7, p, 100), 1);
    char *path3 = entry_file(dir, key3);
    assert_int_equal(truncate(path3, 40), 0);
    cache_close(&c);
    int files_before = count_files(dir, "", "");

    int as_root = geteuid() == 0;
    pid_t pid = as_root ? fork() : 0;
    assert_true(pid >= 0);
    if (pid == 0) {
        if (as_root) { /* root ignores modes: become nobody, who may read but not write */
            CHILD_CHECK(setgroups(0, NULL) == 0, 10);
            CHILD_CHECK(setgid(65534) == 0, 11);
            CHILD_CHECK(setuid(65534) == 0, 12);
        } else {
            assert_int_equal(chmod(dir, 0555), 0);
        }
        disk_cache r;
        reset_counts();
        cache_open(&r, dir, 1, &LG);
        CHILD_CHECK(r.dir != NULL, 2);
        CHILD_CHECK(r.writable == 0, 3);
        CHILD_CHECK(atomic_load(&n_warn) == 1, 4);
        CHILD_CHECK(get_matches(&r, key, m, mlen, p, plen), 5);
        CHILD_CHECK(cache_put(&r, key2, m2, mlen2, p, plen) == 0, 6);
        CHILD_CHECK(!get_hits(&r, key2, m2, mlen2), 7);
        CHILD_CHECK(cache_lock(&r, key2, 50) == -1, 8);
        CHILD_CHECK(!get_hits(&r, key3, "damaged", 7), 9); /* reported, not fatal */
        CHILD_CHECK(atomic_load(&n_warn) == 2, 13);
        uint64_t bytes, entries;
        cache_usage(&r, &bytes, &entries);
        CHILD_CHECK(entries == 2, 14);
        cache_close(&r);
        if (as_root) _exit(0);
        assert_int_equal(chmod(dir, 0755), 0);
    } else {
        assert_child_ok(pid);
    }
    assert_int_equal(count_files(dir, "", ""), files_before); /* nothing written */
    assert_true(exists(path3));

    free(path3);
    free(m);
    free(m2);
    free(p);
    rm_rf(root);
    free(root);
    free(dir);
    umask(old_umask);
}

/* access(W_OK) says yes but no file can be created: a tmpfs out of inodes.
 * Only the probe file in cache_open can tell; needs root to mount. */
static void test_probe_full_fs(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "nr_inodes=8,size=1m,mode=0700") != 0) {
        rmdir(dir);
        free(dir);
        skip();
    }
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    int writable_before = c.writable;
    char key[CACHE_KEY_HEX + 1], key2[CACHE_KEY_HEX + 1];
    cache_key("full", 4, key);
    cache_key("full2", 5, key2);
    int put_ok = cache_put(&c, key, "full", 4, "cubin", 5);
    cache_close(&c);
    for (int i = 0; i < 64; i++) { /* use up the inodes */
        char name[32];
        snprintf(name, sizeof name, "filler-%d", i);
        char *f = join(dir, name);
        int fd = open(f, O_WRONLY | O_CREAT, 0644);
        free(f);
        if (fd < 0) break;
        close(fd);
    }
    int access_ok = access(dir, W_OK) == 0;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    int writable_after = c.writable, warns = atomic_load(&n_warn);
    int hit = get_hits(&c, key, "full", 4);
    int put2 = cache_put(&c, key2, "full2", 5, "cubin", 5);
    int warns_after_put = atomic_load(&n_warn); /* put must not warn again */
    cache_close(&c);
    /* Unmount before asserting so a failure leaves no mount behind. */
    assert_int_equal(umount(dir), 0);
    rmdir(dir);
    free(dir);
    assert_true(writable_before);
    assert_int_equal(put_ok, 1);
    assert_true(access_ok);
    assert_false(writable_after);
    assert_int_equal(warns, 1);
    assert_int_equal(warns_after_put, 1);
    assert_true(hit);
    assert_int_equal(put2, 0);
}

static void test_uncreatable(void **state) {
    (void)state;
    char *root = make_tmpdir();
    char *file = join(root, "file");
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    char *dir = join(file, "sub/cache"); /* under a regular file: cannot exist */
    disk_cache c;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    assert_null(c.dir);
    assert_int_equal(atomic_load(&n_warn), 1);
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    assert_false(get_hits(&c, key, "m", 1));
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 0);
    assert_int_equal(cache_lock(&c, key, 10), -1);
    uint64_t bytes = 1, entries = 1;
    cache_usage(&c, &bytes, &entries);
    assert_int_equal(bytes, 0);
    assert_int_equal(entries, 0);
    assert_int_equal(atomic_load(&n_warn), 1); /* still just the one */
    cache_close(&c);

    /* The path itself is a regular file. */
    reset_counts();
    cache_open(&c, file, 1, &LG);
    assert_null(c.dir);
    assert_int_equal(atomic_load(&n_warn), 1);
    cache_close(&c);

    free(dir);
    free(file);
    rm_rf(root);
    free(root);
}

/* The directory vanishes under a writable cache: puts fail with one warning
 * and leave nothing behind. */
static void test_put_failure(void **state) {
    (void)state;
    char *root = make_tmpdir();
    char *dir = join(root, "cache");
    disk_cache c;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    assert_true(c.writable);
    rm_rf(dir);
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 0);
    assert_int_equal(atomic_load(&n_warn), 1);
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 0);
    assert_int_equal(atomic_load(&n_warn), 1); /* once per cause */
    assert_false(exists(dir));
    cache_close(&c);

    /* A write that fails half-way (file size limit, like a full disk): no
     * temporary file and no entry remain. */
    cache_open(&c, dir, 1, &LG);
    assert_true(c.writable);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {100, 100};
        signal(SIGXFSZ, SIG_IGN);
        CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0, 2);
        reset_counts();
        unsigned char *p = make_payload(7, 5000);
        CHILD_CHECK(cache_put(&c, key, "m", 1, p, 5000) == 0, 3);
        CHILD_CHECK(cache_put(&c, key, "m", 1, p, 5000) == 0, 4);
        CHILD_CHECK(atomic_load(&n_warn) == 1, 5);
        free(p);
        _exit(0);
    }
    assert_child_ok(pid);
    assert_int_equal(count_files(dir, "", ""), 0);
    assert_false(get_hits(&c, key, "m", 1));
    cache_close(&c);
    free(dir);
    rm_rf(root);
    free(root);
}

/* ---- switches and directory resolution -------------------------------------------- */

/* Opening a writable cache removes what dead writers, old quarantines and
 * unused locks left: .tmp-<key>-<pid>-<n> over an hour old, <key>.bad-<pid>
 * moved aside over a week ago, <key>.lock unused for an hour and not held;
 * it keeps fresh ones, held locks, entries, and every name not of our forms. */
static void touch_aged(const char *dir, const char *name, long age_seconds) {
    char *p = join(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age_seconds;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
    free(p);
}

/* Names that look like leftovers but are not ours: never touched, by the
 * sweep or by cache_clear, however old. */
static const char *const foreign_names[] = {
    ".tmp-foo", "thesis.bad-draft.txt", ".tmp-probe-x", "notes.lock", "draft.atbc.bak",
    ".tmp-0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef.bad-x",
    "0123456789ABCDEF0123456789ABCDEF.atbc", "0123456789abcdef0123456789abcdef.lock~",
};
#define N_FOREIGN (sizeof foreign_names / sizeof foreign_names[0])

static void plant_foreign(const char *dir) {
    for (size_t i = 0; i < N_FOREIGN; i++) touch_aged(dir, foreign_names[i], 30L * 24 * 3600);
}

static void assert_foreign_kept(const char *dir) {
    for (size_t i = 0; i < N_FOREIGN; i++) {
        char *p = join(dir, foreign_names[i]);
        if (!exists(p)) fprintf(stderr, "removed: %s\n", foreign_names[i]);
        assert_true(exists(p));
        free(p);
    }
}

static void test_sweep(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    const char *manifest = "m";
    char key[CACHE_KEY_HEX + 1], held[CACHE_KEY_HEX + 1], name[128];
    cache_key(manifest, 1, key);
    cache_key("held", 4, held);
    assert_int_equal(cache_put(&c, key, manifest, 1, "payload", 7), 1);
    int hold = cache_lock(&c, held, 0); /* another open file: its lock excludes the sweep's */
    assert_true(hold >= 0);
    cache_close(&c);
    snprintf(name, sizeof name, ".tmp-%s-1-1", key);
    touch_aged(dir, name, 2 * 3600);
    snprintf(name, sizeof name, ".tmp-%s-1-2", key);
    touch_aged(dir, name, 60);
    touch_aged(dir, ".tmp-probe-7-3", 2 * 3600);
    snprintf(name, sizeof name, "%s.lock", key);
    touch_aged(dir, name, 30 * 24 * 3600);
    snprintf(name, sizeof name, "%s.lock", held);
    touch_aged(dir, name, 30 * 24 * 3600);
    /* A bad file's age counts from its move (ctime), which is now: kept. */
    snprintf(name, sizeof name, "%s.bad-42", key);
    touch_aged(dir, name, 30 * 24 * 3600);
    plant_foreign(dir);
    cache_open(&c, dir, 1, &LG);
    assert_int_equal(count_files(dir, ".tmp-", "-1-1"), 0);
    assert_int_equal(count_files(dir, ".tmp-", "-1-2"), 1);
    assert_int_equal(count_files(dir, ".tmp-probe-7", ""), 0);
    assert_int_equal(count_files(dir, key, ".lock"), 0);  /* unused and not held: removed */
    assert_int_equal(count_files(dir, held, ".lock"), 1); /* held: stays */
    assert_int_equal(count_files(dir, key, ".bad-42"), 1);
    assert_foreign_kept(dir);
    void *payload = NULL;
    size_t len = 0;
    assert_int_equal(cache_get(&c, key, manifest, 1, &payload, &len), 1); /* the entry is untouched */
    free(payload);

    /* cache_clear: every entry and leftover of ours, a moved-aside directory
     * with what it holds included; held locks and foreign names stay. */
    snprintf(name, sizeof name, "%s.bad-43", key);
    char *bad_dir = join(dir, name);
    assert_int_equal(mkdir(bad_dir, 0700), 0);
    touch_aged(bad_dir, "inside", 0);
    char *deeper = join(bad_dir, "deeper");
    assert_int_equal(mkdir(deeper, 0700), 0);
    touch_aged(deeper, "more", 0);
    uint64_t files = 0, bytes = 0;
    assert_int_equal(cache_clear(&c, &files, &bytes), 0);
    assert_false(exists(bad_dir));
    assert_int_equal(count_files(dir, key, ""), 0);
    assert_int_equal(count_files(dir, ".tmp-", "-1-2"), 0);
    assert_int_equal(count_files(dir, held, ".lock"), 1);
    assert_foreign_kept(dir);
    assert_true(files >= 4); /* the entry, the fresh temporary, the bad file, the bad directory */
    cache_unlock(hold);
    assert_int_equal(cache_clear(&c, &files, &bytes), 0); /* now the lock is free: it goes too */
    assert_int_equal(count_files(dir, held, ".lock"), 0);
    assert_foreign_kept(dir);
    cache_close(&c);
    free(deeper);
    free(bad_dir);
    rm_rf(dir);
    free(dir);
}

/* ---- trust: whose folder, which files ------------------------------------------------ */

/* A folder others may write is refused: one warning naming it and why, and
 * nothing is read from or written to it. */
static void assert_refused(const char *dir, int enabled, const char *why) {
    disk_cache c;
    reset_counts();
    int files_before = count_files(dir, "", "");
    cache_open(&c, dir, enabled, &LG);
    assert_null(c.dir);
    assert_false(c.writable);
    assert_int_equal(atomic_load(&n_warn), 1);
    assert_non_null(strstr(last_warn, dir));
    assert_non_null(strstr(last_warn, why));
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    assert_false(get_hits(&c, key, "m", 1));
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 0);
    assert_int_equal(count_files(dir, "", ""), files_before);
    cache_close(&c);
}

static void test_folder_trust(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 1);
    cache_close(&c);

    assert_int_equal(chmod(dir, 0777), 0);
    assert_refused(dir, 1, "writable by every user");
    assert_refused(dir, 2, "writable by every user"); /* not even as a read-only store */
    assert_int_equal(chmod(dir, 01777), 0);            /* sticky, as /tmp: still anyone's */
    assert_refused(dir, 1, "writable by every user");
    assert_int_equal(chmod(dir, 0770), 0);
    assert_refused(dir, 1, "writable by its group");

    /* A group-writable store asked for as read-only: read, never written. */
    reset_counts();
    cache_open(&c, dir, 2, &LG);
    assert_non_null(c.dir);
    assert_false(c.writable);
    assert_int_equal(atomic_load(&n_warn), 0);
    assert_true(get_hits(&c, key, "m", 1));
    cache_close(&c);

    if (geteuid() == 0) { /* another user's folder: only root can make one here */
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chown(dir, 65534, 65534), 0);
        assert_refused(dir, 1, "belongs to uid 65534");
        setenv("ATTNBWD_CACHE", "ro", 1); /* the user says: a shared read-only store */
        reset_counts();
        cache_open(&c, dir, 1, &LG);
        unsetenv("ATTNBWD_CACHE");
        assert_non_null(c.dir);
        assert_false(c.writable);
        assert_true(c.read_only_store);
        assert_true(get_hits(&c, key, "m", 1));
        char key2[CACHE_KEY_HEX + 1];
        cache_key("m2", 2, key2);
        assert_int_equal(cache_put(&c, key2, "m2", 2, "p", 1), 0);
        assert_int_equal(cache_lock(&c, key2, 0), -1);
        assert_int_equal(atomic_load(&n_warn), 0);
        assert_non_null(strstr(c.mode, "read-only"));
        /* A damaged entry is reported and not used, but left in place. */
        char *path = entry_file(dir, key);
        assert_int_equal(truncate(path, 20), 0);
        assert_false(get_hits(&c, key, "m", 1));
        assert_int_equal(atomic_load(&n_warn), 1);
        assert_true(exists(path));
        assert_int_equal(count_files(dir, "", ""), 1); /* no lock, no temporary, nothing moved */
        free(path);
        cache_close(&c);
        assert_int_equal(chown(dir, 0, 0), 0);
    }
    rm_rf(dir);
    free(dir);
}

/* No file of the folder is opened through a symlink, and none that is not a
 * regular file is waited on or read. */
static void test_symlinks_and_fifos(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    char a[CACHE_KEY_HEX + 1], b[CACHE_KEY_HEX + 1];
    cache_key("a", 1, a);
    cache_key("b", 1, b);
    assert_int_equal(cache_put(&c, a, "a", 1, "payload a", 9), 1);

    /* b's entry a symlink to a's (a sound entry of another manifest): refused
     * as a symlink, not reported as a hash collision; a put replaces the link. */
    char *pa = entry_file(dir, a), *pb = entry_file(dir, b);
    assert_int_equal(symlink(pa, pb), 0);
    reset_counts();
    assert_false(get_hits(&c, b, "b", 1));
    assert_int_equal(atomic_load(&n_warn), 1);
    assert_non_null(strstr(last_warn, "symbolic link"));
    assert_null(strstr(last_warn, "collision"));
    assert_int_equal(cache_put(&c, b, "b", 1, "payload b", 9), 1);
    struct stat st;
    assert_int_equal(lstat(pb, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_true(get_hits(&c, a, "a", 1)); /* the link's target is untouched */

    /* A lock file that is a symlink: never followed, so nothing is created
     * where it points. */
    char name[64];
    snprintf(name, sizeof name, "%s.lock", a);
    char *lock = join(dir, name), *victim = join(dir, "victim");
    assert_int_equal(symlink(victim, lock), 0);
    assert_int_equal(cache_lock(&c, a, 0), -1);
    assert_false(exists(victim));

    /* FIFOs under an entry's and a lock's name: the calls return at once. A
     * child does them, so a call that blocks is a failed test, not a hang. */
    cache_close(&c);
    char *pf = entry_file(dir, b);
    unlink(pf);
    assert_int_equal(mkfifo(pf, 0600), 0);
    unlink(lock);
    assert_int_equal(mkfifo(lock, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        disk_cache r;
        cache_open(&r, dir, 1, &LG);
        double t0 = now_ms();
        CHILD_CHECK(!get_hits(&r, b, "b", 1), 2);
        CHILD_CHECK(cache_lock(&r, a, 100) == -1, 3);
        CHILD_CHECK(now_ms() - t0 < 2000, 4);
        cache_close(&r);
        _exit(0);
    }
    assert_child_ok(pid);
    free(pf);
    free(lock);
    free(victim);
    free(pa);
    free(pb);
    rm_rf(dir);
    free(dir);
}

/* A lock another process holds: the waiter waits the configured time, says
 * once what it waits for (key, lock file, holder's pid), then goes on. */
static void test_lock_wait_message(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    char key[CACHE_KEY_HEX + 1];
    cache_key("waited for", 10, key);
    int to_child[2], to_parent[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(to_parent), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        disk_cache c;
        cache_open(&c, dir, 1, &LG);
        int fd = cache_lock(&c, key, 0);
        CHILD_CHECK(fd >= 0, 2);
        CHILD_CHECK(write(to_parent[1], "L", 1) == 1, 3);
        char ch;
        CHILD_CHECK(read(to_child[0], &ch, 1) >= 0, 4); /* held until the parent is done (or gone) */
        cache_unlock(fd);
        _exit(0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    char ch;
    assert_int_equal(read(to_parent[0], &ch, 1), 1);
    setenv("ATTNBWD_CACHE_LOCK_WAIT", "0.4", 1);
    disk_cache c;
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    unsetenv("ATTNBWD_CACHE_LOCK_WAIT");
    assert_int_equal(c.lock_wait_ms, 400);
    double t0 = now_ms();
    int fd = cache_lock(&c, key, -1); /* the configured wait */
    double waited = now_ms() - t0;
    assert_int_equal(fd, -1);
    assert_true(waited >= 395);
    assert_true(waited < 3000);
    assert_int_equal(atomic_load(&n_warn), 1);
    char want[64];
    snprintf(want, sizeof want, "process %ld", (long)pid);
    assert_non_null(strstr(last_warn, key));
    assert_non_null(strstr(last_warn, ".lock"));
    assert_non_null(strstr(last_warn, want));
    assert_int_equal(write(to_child[1], "g", 1), 1);
    assert_child_ok(pid);
    cache_close(&c);

    /* A bad value is warned about and the default kept. */
    setenv("ATTNBWD_CACHE_LOCK_WAIT", "soon", 1);
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    unsetenv("ATTNBWD_CACHE_LOCK_WAIT");
    assert_int_equal(c.lock_wait_ms, CACHE_DEFAULT_LOCK_WAIT_MS);
    assert_int_equal(atomic_load(&n_warn), 1);
    assert_non_null(strstr(last_warn, "ATTNBWD_CACHE_LOCK_WAIT"));
    cache_close(&c);
    close(to_child[1]);
    close(to_parent[0]);
    rm_rf(dir);
    free(dir);
}

/* Under `ulimit -f` a write past the limit would raise SIGXFSZ, which kills
 * the process: the put is not started, with one warning, and the process
 * lives (the child keeps SIGXFSZ's default action). */
static void test_file_size_limit(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    disk_cache c;
    cache_open(&c, dir, 1, &LG);
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = {1000, 1000};
        CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0, 2);
        reset_counts();
        unsigned char *p = make_payload(3, 5000);
        CHILD_CHECK(cache_put(&c, key, "m", 1, p, 5000) == 0, 3);
        CHILD_CHECK(atomic_load(&n_warn) == 1, 4);
        CHILD_CHECK(strstr(last_warn, "too large") != NULL, 5);
        CHILD_CHECK(cache_put(&c, key, "m", 1, p, 100) == 1, 6); /* under the limit: fine */
        free(p);
        _exit(0);
    }
    assert_child_ok(pid);
    assert_true(get_hits(&c, key, "m", 1));
    assert_int_equal(count_files(dir, ".tmp-", ""), 0);
    cache_close(&c);
    rm_rf(dir);
    free(dir);
}

static void test_off_switches(void **state) {
    (void)state;
    char *root = make_tmpdir();
    char *dir = join(root, "c");
    disk_cache c;

    setenv("ATTNBWD_CACHE", "0", 1);
    reset_counts();
    cache_open(&c, dir, 1, &LG);
    assert_null(c.dir);
    assert_int_equal(atomic_load(&n_warn), 0); /* silent: asked for */
    assert_true(atomic_load(&n_info) >= 1);
    assert_false(exists(dir));
    char key[CACHE_KEY_HEX + 1];
    cache_key("m", 1, key);
    assert_int_equal(cache_put(&c, key, "m", 1, "p", 1), 0);
    assert_false(get_hits(&c, key, "m", 1));
    cache_close(&c);
    unsetenv("ATTNBWD_CACHE");

    reset_counts();
    cache_open(&c, dir, 0, &LG); /* off by options */
    assert_null(c.dir);
    assert_int_equal(atomic_load(&n_warn), 0);
    assert_false(exists(dir));
    cache_close(&c);

    setenv("ATTNBWD_CACHE", "1", 1);
    cache_open(&c, dir, 1, &LG);
    assert_non_null(c.dir);
    assert_true(exists(dir));
    cache_close(&c);
    unsetenv("ATTNBWD_CACHE");

    cache_open(&c, dir, 1, NULL); /* no logger at all is fine */
    assert_non_null(c.dir);
    cache_close(&c);

    free(dir);
    rm_rf(root);
    free(root);
}

static void assert_mode_0700(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
}

static char *saved_env(const char *name) {
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *v) {
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    free(v);
}

static void test_dir_resolution(void **state) {
    (void)state;
    mode_t old_umask = umask(022);
    char *home = saved_env("HOME"), *xdg = saved_env("XDG_CACHE_HOME");
    char *env_dir = saved_env("ATTNBWD_CACHE_DIR");
    char *root = make_tmpdir();
    disk_cache c;

    char *via_env = join(root, "env/deep/cache");
    setenv("ATTNBWD_CACHE_DIR", via_env, 1);
    cache_open(&c, NULL, 1, &LG);
    assert_string_equal(c.dir, via_env);
    assert_mode_0700(via_env);
    char *mid = join(root, "env/deep");
    assert_mode_0700(mid); /* created on the way: 0700 too */
    cache_close(&c);

    char *expl = join(root, "explicit");
    cache_open(&c, expl, 1, &LG); /* explicit beats the environment */
    assert_string_equal(c.dir, expl);
    assert_mode_0700(expl);
    cache_close(&c);

    setenv("ATTNBWD_CACHE_DIR", "", 1); /* empty counts as unset */
    char *x = join(root, "xdg");
    setenv("XDG_CACHE_HOME", x, 1);
    char *want = join(x, "attnbwd");
    cache_open(&c, "", 1, &LG);
    assert_string_equal(c.dir, want);
    assert_mode_0700(want);
    cache_close(&c);
    free(want);

    unsetenv("ATTNBWD_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    char *h = join(root, "home");
    setenv("HOME", h, 1);
    want = join(h, ".cache/attnbwd");
    cache_open(&c, NULL, 1, &LG);
    assert_string_equal(c.dir, want);
    assert_mode_0700(want);
    assert_true(c.writable);
    cache_close(&c);
    free(want);

    unsetenv("HOME"); /* nowhere to go: off, one warning */
    reset_counts();
    cache_open(&c, NULL, 1, &LG);
    assert_null(c.dir);
    assert_int_equal(atomic_load(&n_warn), 1);
    cache_close(&c);

    /* An existing directory keeps its mode. */
    char *loose = join(root, "loose");
    assert_int_equal(mkdir(loose, 0755), 0);
    cache_open(&c, loose, 1, &LG);
    struct stat st;
    assert_int_equal(stat(loose, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    cache_close(&c);

    restore_env("HOME", home);
    restore_env("XDG_CACHE_HOME", xdg);
    restore_env("ATTNBWD_CACHE_DIR", env_dir);
    free(loose);
    free(h);
    free(x);
    free(expl);
    free(mid);
    free(via_env);
    rm_rf(root);
    free(root);
    umask(old_umask);
}

int main(void) {
    /* The tests choose their directories themselves. */
    unsetenv("ATTNBWD_CACHE");
    unsetenv("ATTNBWD_CACHE_DIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_invalid_key),
        cmocka_unit_test(test_damaged_entries),
        cmocka_unit_test(test_launch_read),
        cmocka_unit_test_setup_teardown(test_older_format_is_a_quiet_miss, one_entry_setup, one_entry_teardown),
        cmocka_unit_test_setup_teardown(test_fuzz, one_entry_setup, one_entry_teardown),
        cmocka_unit_test(test_processes),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_lock),
        cmocka_unit_test(test_read_only),
        cmocka_unit_test(test_probe_full_fs),
        cmocka_unit_test(test_uncreatable),
        cmocka_unit_test(test_put_failure),
        cmocka_unit_test(test_off_switches),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_dir_resolution),
        cmocka_unit_test(test_folder_trust),
        cmocka_unit_test(test_symlinks_and_fifos),
        cmocka_unit_test(test_lock_wait_message),
        cmocka_unit_test(test_file_size_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
