/* Reading and checking cache entries for the tools (list, verify, export,
 * import), and the per-entry info file <key>.info.
 *
 * cache_get reads an entry to use it and compares the manifest a kernel
 * asks for; the tools read entries nobody asked for, so they check what an
 * entry can say about itself: magic, format, lengths against the file size,
 * both checksums (the launch part with the payload, and the source), that
 * the payload is an ELF file for CUDA (a cubin), and that its key is the
 * hash of its manifest's head (the key a lookup forms). Every open is O_NOFOLLOW | O_NONBLOCK with a
 * regular-file check, so a link or a FIFO planted under our name is reported,
 * never followed or waited on.
 *
 * The info file holds what the manifest does not: the shape and the GPU
 * model the tuning tables were matched for. It is not part of the key (two
 * models that choose the same tiles share the entry; the last writer's model
 * is the one shown). */
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_tools.h"
#include "checksum.h"
#include "internal.h"
#include "manifest.h"

#define MAX_INFO 1024

int cache_name_is(const char *name, const char *suffix, char key[CACHE_KEY_HEX + 1]) {
    for (int i = 0; i < CACHE_KEY_HEX; i++) {
        char ch = name[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
    }
    if (strcmp(name + CACHE_KEY_HEX, suffix) != 0) return 0;
    memcpy(key, name, CACHE_KEY_HEX);
    key[CACHE_KEY_HEX] = '\0';
    return 1;
}

/* Header fields against the file's size; NULL when they agree. */
static const char *check_header(const unsigned char *h, uint64_t size, cache_header *hd) {
    int older;
    const char *why = cache_header_read(h, size, hd, &older);
    return older ? "an older entry format, which this library never reads (a compile replaces it)" : why;
}

/* The manifest's first line and the payload: both checksums, then the check
 * a disk hit makes of a cubin (cubin_check.c), for the arch the manifest
 * names, so that what verify calls sound and import takes is what a kernel
 * uses. */
static const char *check_body(const cache_header *h, const char *manifest, const unsigned char *payload) {
    static const char first[] = "attnbwd-cache-manifest ";
    const size_t mlen = h->manifest_len, plen = (size_t)h->payload_len;
    if (cache_checksum(manifest, h->launch_len, payload, plen) != h->launch_sum) return "checksum mismatch";
    if (cache_checksum(manifest + h->launch_len, mlen - h->launch_len, NULL, 0) != h->source_sum)
        return "checksum mismatch in its source";
    if (mlen < sizeof first || memcmp(manifest, first, sizeof first - 1) != 0) return "no manifest";
    char arch[32];
    cache_manifest_field(manifest, mlen, "arch", arch, sizeof arch);
    return cubin_check(payload, plen, arch);
}

/* The key a lookup files the manifest under, cache_key of its head (as
 * build_kernel forms it), against the key the entry is filed under: an entry
 * under another key is never found by its own kernel, and the kernel of the
 * key it squats on finds a mismatch and compiles. NULL when they agree or
 * the manifest is of another format (its library's keys are not ours to
 * check; such an entry is never used), else why not, in buf. */
static const char *check_key(const char *key, const char *manifest, size_t mlen, char *buf, size_t n) {
    const long head_len = manifest_head_len(manifest, mlen);
    if (head_len == 0) return NULL;
    if (head_len < 0) return "its manifest's head does not read";
    char own[CACHE_KEY_HEX + 1];
    cache_key(manifest, (size_t)head_len, own);
    if (strcmp(own, key) == 0) return NULL;
    snprintf(buf, n, "not its key: its manifest's head hashes to %s", own);
    return buf;
}

const char *cache_entry_check(const char *key, const unsigned char *buf, uint64_t len, const char **manifest,
                              size_t *manifest_len, const unsigned char **payload, size_t *payload_len,
                              char why_buf[CACHE_PROBLEM_LEN]) {
    cache_header h;
    const char *why = check_header(buf, len, &h);
    if (why) return why;
    *manifest = (const char *)buf + CACHE_FILE_HEADER_LEN;
    *manifest_len = h.manifest_len;
    *payload = buf + CACHE_FILE_HEADER_LEN + h.manifest_len;
    *payload_len = (size_t)h.payload_len;
    why = check_body(&h, *manifest, *payload);
    return why ? why : check_key(key, *manifest, h.manifest_len, why_buf, CACHE_PROBLEM_LEN);
}

/* Opens <dir>/<name> for reading without following a link or blocking;
 * fd or -1 with errno (ELOOP for a link, EINVAL for a non-regular file). */
static int open_ours(const char *dir, const char *name, struct stat *st) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

static void set_problem(cache_entry_file *e, const char *why) {
    snprintf(e->problem_buf, sizeof e->problem_buf, "%s", why);
    e->problem = e->problem_buf;
}

int cache_entry_file_read(const disk_cache *c, const char *key, int whole, cache_entry_file *e) {
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    char name[CACHE_KEY_HEX + 6];
    snprintf(name, sizeof name, "%s.atbc", key);
    struct stat st;
    int fd = open_ours(c->dir, name, &st);
    if (fd < 0) {
        if (errno == ENOENT) return ENOENT;
        set_problem(e, errno == ELOOP ? "a symbolic link, not an entry" : errno == EINVAL ? "not a regular file"
                                                                                          : strerror(errno));
        return 0;
    }
    e->bytes = (uint64_t)st.st_size;
    e->last_use = st.st_mtim;
    unsigned char hb[CACHE_FILE_HEADER_LEN];
    cache_header h = {0};
    const char *why = e->bytes < sizeof hb || cache_pread_all(fd, hb, sizeof hb, 0) != 0
                          ? "shorter than its header"
                          : check_header(hb, e->bytes, &h);
    const size_t mlen = h.manifest_len;
    const uint64_t want = CACHE_FILE_HEADER_LEN + (uint64_t)mlen + (whole ? h.payload_len : 0);
    if (!why && !(e->data = malloc((size_t)want + 1))) why = "out of memory";
    if (!why && cache_pread_all(fd, e->data, (size_t)want, 0) != 0) why = "short read";
    close(fd);
    char key_problem[CACHE_PROBLEM_LEN];
    if (!why) {
        e->manifest = (const char *)e->data + CACHE_FILE_HEADER_LEN;
        e->manifest_len = mlen;
        if (whole) {
            e->payload = e->data + CACHE_FILE_HEADER_LEN + mlen;
            e->payload_len = (size_t)h.payload_len;
            why = check_body(&h, e->manifest, e->payload);
        }
        if (!why) why = check_key(e->key, e->manifest, mlen, key_problem, sizeof key_problem);
    }
    if (why) {
        set_problem(e, why);
        e->manifest = NULL;
        e->manifest_len = 0;
        e->payload = NULL;
    }
    return 0;
}

void cache_entry_file_free(cache_entry_file *e) {
    free(e->data);
    e->data = NULL;
}

void cache_manifest_field(const char *manifest, size_t len, const char *field, char *buf, size_t n) {
    buf[0] = '\0';
    const size_t flen = strlen(field);
    const char *p = manifest, *end = manifest ? manifest + len : NULL;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if ((size_t)(eol - p) == 6 && memcmp(p, "source", 6) == 0) return; /* the rest is the source */
        if ((size_t)(eol - p) > flen && memcmp(p, field, flen) == 0 && p[flen] == ' ') {
            snprintf(buf, n, "%.*s", (int)(eol - p - (ptrdiff_t)flen - 1), p + flen + 1);
            return;
        }
        p = nl ? nl + 1 : NULL;
    }
}

/* ---- <key>.info ------------------------------------------------------------ */

#define INFO_HEADER "attnbwd-cache-info 1\n"

void cache_info_format(const cache_entry_info *info, char *buf, size_t n) {
    int used = snprintf(buf, n, INFO_HEADER);
    if (info->has_shape && used >= 0 && (size_t)used < n) {
        const attnbwd_shape *s = &info->shape;
        used += snprintf(buf + used, n - (size_t)used,
                         "shape problem=%d batch=%" PRId64 " heads=%" PRId64 " seq_len=%" PRId64
                         " dropout=%d precision=%d\n",
                         (int)s->problem, s->batch, s->heads, s->seq_len, s->dropout, s->precision);
    }
    if (used >= 0 && (size_t)used < n) snprintf(buf + used, n - (size_t)used, "gpu %s\n", info->gpu_model);
}

/* A model name as it may appear on one line: printable, no newline. */
static int printable_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f) return 0;
    return 1;
}

int cache_info_parse(const char *text, size_t len, cache_entry_info *info) {
    memset(info, 0, sizeof *info);
    char buf[MAX_INFO + 1];
    if (len > MAX_INFO || len < strlen(INFO_HEADER)) return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (strlen(buf) != len || strncmp(buf, INFO_HEADER, strlen(INFO_HEADER)) != 0) return -1;
    for (char *line = buf + strlen(INFO_HEADER), *nl; *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) return -1;
        *nl = '\0';
        int problem = 0, dropout = 0, precision = 0, used = 0;
        long long b = 0, h = 0, t = 0;
        if (strncmp(line, "gpu ", 4) == 0) {
            if (strlen(line + 4) >= sizeof info->gpu_model || !printable_line(line + 4, strlen(line + 4))) return -1;
            snprintf(info->gpu_model, sizeof info->gpu_model, "%s", line + 4);
        } else if (sscanf(line, "shape problem=%d batch=%lld heads=%lld seq_len=%lld dropout=%d precision=%d%n",
                          &problem, &b, &h, &t, &dropout, &precision, &used) == 6 &&
                   line[used] == '\0') {
            attnbwd_shape s = {(attnbwd_problem)problem, b, h, t, dropout, precision};
            info->shape = s;
            info->has_shape = 1;
        } else {
            return -1;
        }
    }
    return 0;
}

int cache_info_get(const disk_cache *c, const char *key, cache_entry_info *info) {
    memset(info, 0, sizeof *info);
    if (!c || !c->dir) return 0;
    char name[CACHE_KEY_HEX + 6], text[MAX_INFO + 1];
    snprintf(name, sizeof name, "%s.info", key);
    struct stat st;
    int fd = open_ours(c->dir, name, &st);
    if (fd < 0) return 0;
    ssize_t n = st.st_size <= MAX_INFO ? pread(fd, text, (size_t)st.st_size, 0) : -1;
    close(fd);
    return n == st.st_size && cache_info_parse(text, (size_t)n, info) == 0;
}

static atomic_ulong info_counter;

void cache_info_put(disk_cache *c, const char *key, const cache_entry_info *info) {
    if (!c || !c->dir || !c->writable) return;
    char text[MAX_INFO], tmp[4200], final[4200];
    cache_info_format(info, text, sizeof text);
    snprintf(final, sizeof final, "%s/%s.info", c->dir, key);
    /* The temporary name is cache_put's form (".tmp-<key>-<pid>-<n>"), so a
     * crashed writer's leftover is swept like any other; O_EXCL and another
     * n where cache_put's counter gave the same name. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 4; tries++) {
        snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%ld-%lu", c->dir, key, (long)getpid(),
                 atomic_fetch_add(&info_counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno != EEXIST) return;
    }
    if (fd < 0) return;
    const size_t len = strlen(text);
    const int ok = write(fd, text, len) == (ssize_t)len;
    if (close(fd) != 0 || !ok || rename(tmp, final) != 0) unlink(tmp);
}
