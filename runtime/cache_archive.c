/* Cache archives: entries carried between machines (`attnbwd cache export`
 * and `import`), e.g. made by a prewarm on a build host and shipped with a
 * job.
 *
 * An archive is the entries' own files one after another, with a readable
 * head and a count at the end:
 *   attnbwd-cache-archive 2\n library <version>\n nvrtc <major>.<minor>\n \n
 *   then per entry: "entry <key> <entry bytes> <info bytes>\n" <the .atbc file> <the .info file>
 *   then "end <number of entries>\n"
 * The entries keep their own checksums, so the archive needs none; a cut
 * archive is caught by the count. No new library is needed for this, and
 * nothing in it is trusted: import checks the head (format, library and
 * NVRTC version: an entry of another one would never be found), then every
 * entry as `cache verify` does (a record filed under another key than the
 * hash of its manifest's head is damage), and only when all are sound writes
 * each through cache_put (a temporary file renamed into place: atomic per
 * entry). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_tools.h"
#include "error.h"
#include "manifest.h"
#include "nvrtc_compile.h"

/* 2: its entries are of entry format 2 (cache.h); an archive of format 1 holds entries this library never reads. */
#define ARCHIVE_FORMAT 2
#define ARCHIVE_MAGIC "attnbwd-cache-archive "
#define MAX_ENTRY (CACHE_FILE_HEADER_LEN + (64ull << 20) + (1ull << 30))
#define MAX_INFO 1024

static void our_versions(char *nvrtc, size_t n) {
    int maj = 0, min = 0;
    nvrtc_version(&maj, &min);
    snprintf(nvrtc, n, "%d.%d", maj, min);
}

/* Is the manifest's format, library and NVRTC ours? NULL when so, else which
 * differs. A manifest of another format is never used by this library, and
 * its key cannot be checked against its head. */
static const char *foreign_entry(const char *manifest, size_t len) {
    char lib[64], nv[64], ours[32];
    our_versions(ours, sizeof ours);
    cache_manifest_field(manifest, len, "library", lib, sizeof lib);
    cache_manifest_field(manifest, len, "nvrtc", nv, sizeof nv);
    if (strcmp(lib, ATTNBWD_VERSION_STRING) != 0) return "built by another library version";
    if (strcmp(nv, ours) != 0) return "built by another NVRTC version";
    if (manifest_head_len(manifest, len) == 0) return "of another manifest format";
    return NULL;
}

/* ---- export ---------------------------------------------------------------- */

static int key_selected(const char *key, const char *const *prefixes, size_t n, size_t *matched) {
    if (n == 0) return 1;
    int any = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0) {
            matched[i]++;
            any = 1;
        }
    return any;
}

static int valid_prefix(const char *p) {
    size_t n = p ? strspn(p, "0123456789abcdef") : 0;
    return n >= 1 && n <= CACHE_KEY_HEX && p[n] == '\0';
}

static int by_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The keys of the folder's entries that the prefixes select, sorted. */
static attnbwd_status select_keys(disk_cache *c, const char *const *prefixes, size_t n, char ***keys,
                                  size_t *n_keys) {
    *keys = NULL;
    *n_keys = 0;
    for (size_t i = 0; i < n; i++)
        if (!valid_prefix(prefixes[i]))
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "export: key prefix '%s' is not 1 to 32 lowercase hex digits",
                           prefixes[i] ? prefixes[i] : "(null)");
    size_t *matched = calloc(n + 1, sizeof *matched);
    DIR *d = opendir(c->dir);
    if (!matched || !d) {
        free(matched);
        if (d) closedir(d);
        return err_set(ATTNBWD_ERR_CACHE, "export: cannot read the cache folder %s: %s", c->dir, strerror(errno));
    }
    size_t cap = 0;
    struct dirent *e;
    char key[CACHE_KEY_HEX + 1];
    attnbwd_status s = ATTNBWD_OK;
    while (s == ATTNBWD_OK && (e = readdir(d))) {
        if (!cache_name_is(e->d_name, ".atbc", key) || !key_selected(key, prefixes, n, matched)) continue;
        if (*n_keys == cap) {
            char **w = realloc(*keys, (cap = cap ? 2 * cap : 64) * sizeof *w);
            if (!w) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
            else *keys = w;
        }
        if (s == ATTNBWD_OK && !((*keys)[*n_keys] = strdup(key))) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
        if (s == ATTNBWD_OK) (*n_keys)++;
    }
    closedir(d);
    for (size_t i = 0; s == ATTNBWD_OK && i < n; i++)
        if (!matched[i]) s = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "export: no entry's key starts with '%s' in %s", prefixes[i], c->dir);
    if (s == ATTNBWD_OK && *n_keys == 0) s = err_set(ATTNBWD_ERR_CACHE, "export: the cache folder %s has no entries", c->dir);
    free(matched);
    if (s == ATTNBWD_OK) qsort(*keys, *n_keys, sizeof **keys, by_key);
    return s;
}

/* Appends one entry (checked whole) and its info; 1 when written, 0 when
 * skipped (damaged, gone or foreign: said in the log), -1 on a write error. */
static int write_record(disk_cache *c, FILE *f, const char *key) {
    cache_entry_file e;
    if (cache_entry_file_read(c, key, 1, &e) != 0) return 0; /* evicted meanwhile */
    const char *why = e.problem ? e.problem : foreign_entry(e.manifest, e.manifest_len);
    if (why) {
        log_line(c->log, ATTNBWD_LOG_WARN, "export: entry %s left out: %s", key, why);
        cache_entry_file_free(&e);
        return 0;
    }
    cache_entry_info info;
    char text[MAX_INFO] = "";
    if (cache_info_get(c, key, &info)) cache_info_format(&info, text, sizeof text);
    const size_t ilen = strlen(text);
    int ok = fprintf(f, "entry %s %" PRIu64 " %zu\n", key, e.bytes, ilen) > 0 &&
             fwrite(e.data, 1, (size_t)e.bytes, f) == e.bytes && fwrite(text, 1, ilen, f) == ilen;
    cache_entry_file_free(&e);
    return ok ? 1 : -1;
}

attnbwd_status cache_export(disk_cache *c, const char *path, const char *const *prefixes, size_t n,
                            uint64_t *entries, uint64_t *bytes) {
    *entries = *bytes = 0;
    if (!c->dir) return err_set(ATTNBWD_ERR_CACHE, "export: the disk cache is off");
    char **keys = NULL;
    size_t n_keys = 0;
    attnbwd_status s = select_keys(c, prefixes, n, &keys, &n_keys);
    char tmp[4200], nv[32];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    our_versions(nv, sizeof nv);
    FILE *f = s == ATTNBWD_OK ? fopen(tmp, "wbx") : NULL;
    if (s == ATTNBWD_OK && !f) s = err_set(ATTNBWD_ERR_IO, "export: cannot create %s: %s", tmp, strerror(errno));
    int write_error = f && fprintf(f, ARCHIVE_MAGIC "%d\nlibrary %s\nnvrtc %s\n\n", ARCHIVE_FORMAT,
                                   ATTNBWD_VERSION_STRING, nv) < 0;
    for (size_t i = 0; f && !write_error && i < n_keys; i++) {
        int r = write_record(c, f, keys[i]);
        if (r < 0) write_error = 1;
        if (r > 0) (*entries)++;
    }
    if (f && !write_error) write_error = fprintf(f, "end %" PRIu64 "\n", *entries) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (f && fclose(f) != 0) write_error = 1;
    if (f && (write_error || *entries == 0)) {
        unlink(tmp);
        s = write_error ? err_set(ATTNBWD_ERR_IO, "export: writing %s: %s", tmp, strerror(errno))
                        : err_set(ATTNBWD_ERR_CACHE, "export: every selected entry was damaged or of another version "
                                                     "(see the warnings); nothing written");
    } else if (f && rename(tmp, path) != 0) {
        s = err_set(ATTNBWD_ERR_IO, "export: cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
    }
    if (s == ATTNBWD_OK) {
        FILE *done = fopen(path, "rb");
        if (done && fseek(done, 0, SEEK_END) == 0) *bytes = (uint64_t)ftell(done);
        if (done) fclose(done);
    }
    for (size_t i = 0; i < n_keys; i++) free(keys[i]);
    free(keys);
    return s;
}

/* ---- import ---------------------------------------------------------------- */

/* One line (without its '\n') into buf; -1 at the end of the file or on a
 * line that does not fit. */
static int read_line(FILE *f, char *buf, size_t n) {
    if (!fgets(buf, (int)n, f)) return -1;
    size_t len = strlen(buf);
    if (len == 0 || buf[len - 1] != '\n') return -1;
    buf[len - 1] = '\0';
    return 0;
}

/* The archive's head: ours, and of this library and NVRTC. */
static attnbwd_status read_head(FILE *f, const char *path) {
    char line[256], ours[32];
    our_versions(ours, sizeof ours);
    if (read_line(f, line, sizeof line) != 0 || strncmp(line, ARCHIVE_MAGIC, strlen(ARCHIVE_MAGIC)) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s is not an attnbwd cache archive", path);
    const char *format = line + strlen(ARCHIVE_MAGIC);
    char ours_format[16];
    snprintf(ours_format, sizeof ours_format, "%d", ARCHIVE_FORMAT);
    if (strcmp(format, ours_format) != 0)
        return err_set(ATTNBWD_ERR_UNSUPPORTED, "import: %s is an archive of format %.20s; this library reads format %d",
                       path, format, ARCHIVE_FORMAT);
    if (read_line(f, line, sizeof line) != 0 || strncmp(line, "library ", 8) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: no library line in the archive's head", path);
    if (strcmp(line + 8, ATTNBWD_VERSION_STRING) != 0)
        return err_set(ATTNBWD_ERR_UNSUPPORTED,
                       "import: %s holds kernels of attnbwd %.40s; this is attnbwd %s, which would never use them "
                       "(export them again with this version)", path, line + 8, ATTNBWD_VERSION_STRING);
    if (read_line(f, line, sizeof line) != 0 || strncmp(line, "nvrtc ", 6) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: no nvrtc line in the archive's head", path);
    if (strcmp(line + 6, ours) != 0)
        return err_set(ATTNBWD_ERR_UNSUPPORTED,
                       "import: %s holds kernels compiled by NVRTC %.40s; this library uses NVRTC %s, so they would "
                       "never be found", path, line + 6, ours);
    if (read_line(f, line, sizeof line) != 0 || line[0] != '\0')
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: the archive's head does not end", path);
    return ATTNBWD_OK;
}

typedef struct record {
    char key[CACHE_KEY_HEX + 1];
    unsigned char *entry;
    uint64_t entry_len;
    const char *manifest;
    size_t manifest_len;
    const unsigned char *payload;
    size_t payload_len;
    cache_entry_info info;
    int has_info;
} record;

/* Reads and checks the next record, or the end (returns 1; *count then
 * holds the count the archive states). 0 with r filled, or an error. */
static attnbwd_status read_record(FILE *f, const char *path, uint64_t index, record *r, int *end, uint64_t *count) {
    char line[256], key[CACHE_KEY_HEX + 2], name[CACHE_KEY_HEX + 6];
    unsigned long long elen = 0, ilen = 0, n = 0;
    int used = 0;
    *end = 0;
    memset(r, 0, sizeof *r);
    if (read_line(f, line, sizeof line) != 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s is cut short after %" PRIu64 " entries", path, index);
    if (sscanf(line, "end %llu%n", &n, &used) == 1 && line[used] == '\0') {
        *end = 1;
        *count = n;
        return ATTNBWD_OK;
    }
    if (sscanf(line, "entry %33s %llu %llu%n", key, &elen, &ilen, &used) != 3 || line[used] != '\0')
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: entry %" PRIu64 ": not a record line", path, index + 1);
    name[0] = '\0';
    if (strlen(key) == CACHE_KEY_HEX) snprintf(name, sizeof name, "%.32s.atbc", key);
    if (!cache_name_is(name, ".atbc", r->key))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: entry %" PRIu64 ": '%s' is not a key", path, index + 1, key);
    if (elen > MAX_ENTRY || ilen > MAX_INFO)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: entry %s: a length out of range", path, r->key);
    char info[MAX_INFO + 1];
    r->entry_len = elen;
    if (!(r->entry = malloc((size_t)elen + 1))) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    if (fread(r->entry, 1, (size_t)elen, f) != elen || fread(info, 1, (size_t)ilen, f) != ilen)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s is cut short in entry %s", path, r->key);
    char problem[CACHE_PROBLEM_LEN];
    const char *why = cache_entry_check(r->key, r->entry, elen, &r->manifest, &r->manifest_len, &r->payload,
                                        &r->payload_len, problem);
    if (!why) why = foreign_entry(r->manifest, r->manifest_len);
    if (!why && ilen && cache_info_parse(info, (size_t)ilen, &r->info) != 0) why = "its info does not parse";
    if (why) return err_set(ATTNBWD_ERR_CACHE, "import: %s: entry %s is refused: %s", path, r->key, why);
    r->has_info = ilen > 0;
    return ATTNBWD_OK;
}

/* Goes through every record; with put, writes each. */
static attnbwd_status walk_records(disk_cache *c, FILE *f, const char *path, int put, uint64_t *entries,
                                   uint64_t *bytes) {
    *entries = *bytes = 0;
    for (;;) {
        record r;
        int end = 0;
        uint64_t count = 0;
        attnbwd_status s = read_record(f, path, *entries, &r, &end, &count);
        if (s == ATTNBWD_OK && end) {
            if (count != *entries || fgetc(f) != EOF)
                s = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "import: %s: the end says %" PRIu64 " entries, %" PRIu64
                            " were read", path, count, *entries);
            return s;
        }
        if (s == ATTNBWD_OK && put) {
            if (!cache_put(c, r.key, r.manifest, r.manifest_len, r.payload, r.payload_len))
                s = err_set(ATTNBWD_ERR_CACHE, "import: cannot write entry %s into %s (%" PRIu64 " written before it; "
                            "see the warning above, or the entry is larger than the budget)", r.key, c->dir, *entries);
            else if (r.has_info)
                cache_info_put(c, r.key, &r.info);
        }
        free(r.entry);
        if (s != ATTNBWD_OK) return s;
        (*entries)++;
        *bytes += r.entry_len;
    }
}

attnbwd_status cache_import(disk_cache *c, const char *path, uint64_t *entries, uint64_t *bytes) {
    *entries = *bytes = 0;
    if (!c->dir || !c->writable)
        return err_set(ATTNBWD_ERR_CACHE, "import: the disk cache is %s", c->dir ? "read-only" : "off");
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ATTNBWD_ERR_IO, "import: cannot open %s: %s", path, strerror(errno));
    attnbwd_status s = read_head(f, path);
    long body = s == ATTNBWD_OK ? ftell(f) : -1;
    uint64_t n = 0, b = 0;
    if (s == ATTNBWD_OK) s = walk_records(c, f, path, 0, &n, &b);
    if (s == ATTNBWD_OK && b > c->max_bytes)
        log_line(c->log, ATTNBWD_LOG_WARN,
                 "import: %s holds %" PRIu64 " bytes of entries, more than the cache's budget (%" PRIu64
                 " bytes): the least recently used are evicted as it goes",
                 path, b, c->max_bytes);
    if (s == ATTNBWD_OK && fseek(f, body, SEEK_SET) != 0)
        s = err_set(ATTNBWD_ERR_IO, "import: cannot read %s again: %s", path, strerror(errno));
    cache_budget_importing(1);
    if (s == ATTNBWD_OK) s = walk_records(c, f, path, 1, entries, bytes);
    cache_budget_importing(0);
    fclose(f);
    return s;
}
