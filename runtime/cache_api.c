/* The public face of the disk cache's tools (attnbwd_cache_* in attnbwd.h):
 * stats, list and verify, prune, export and import over the context's cache
 * folder; and the context's side of the info file written beside each entry
 * it compiles. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_tools.h"
#include "error.h"
#include "internal.h"
#include "nvrtc_compile.h"

void cache_note_compiled(attnbwd_ctx *ctx, const attnbwd_kernel *k) {
    cache_entry_info info;
    memset(&info, 0, sizeof info);
    info.has_shape = 1;
    info.shape = k->shape;
    snprintf(info.gpu_model, sizeof info.gpu_model, "%s", ctx->gpu.model);
    /* Only beside an entry that was written (not one over the budget, or on a full disk). */
    char path[4200];
    struct stat st;
    if (!ctx->cache.dir || !ctx->cache.writable) return;
    snprintf(path, sizeof path, "%s/%s.atbc", ctx->cache.dir, k->key);
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) cache_info_put(&ctx->cache, k->key, &info);
}

/* The info files go with their entries, which attnbwd_cache_clear counts. */
void cache_clear_extras(disk_cache *c) {
    DIR *d = c && c->dir && c->writable ? opendir(c->dir) : NULL;
    if (!d) return;
    struct dirent *e;
    char key[CACHE_KEY_HEX + 1];
    while ((e = readdir(d))) {
        struct stat st;
        if (cache_name_is(e->d_name, ".info", key) && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    cache_stats_reset(c);
}

attnbwd_status attnbwd_cache_get_stats(attnbwd_ctx *ctx, attnbwd_cache_stats *stats) {
    if (!ctx || !stats) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_get_stats: %s is NULL", ctx ? "stats" : "ctx");
    memset(stats, 0, sizeof *stats);
    cache_counts n;
    cache_stats_read(&ctx->cache, &n);
    cache_usage(&ctx->cache, &stats->bytes, &stats->entries);
    stats->max_bytes = ctx->cache.max_bytes;
    stats->hits = n.hits;
    stats->misses = n.misses;
    stats->evicted = n.evicted;
    stats->evicted_bytes = n.evicted_bytes;
    stats->since = n.since;
    return ATTNBWD_OK;
}

/* ---- list and verify ------------------------------------------------------- */

typedef struct listed {
    char key[CACHE_KEY_HEX + 1];
    struct timespec mtime;
} listed;

static int recent_first(const void *a, const void *b) {
    const listed *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* The keys of the folder's entries (any file under an entry's name: a link
 * or a FIFO is listed to be reported), most recently used first. */
static attnbwd_status list_keys(const disk_cache *c, listed **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(c->dir);
    if (!d) return err_set(ATTNBWD_ERR_CACHE, "cannot read the cache folder %s: %s", c->dir, strerror(errno));
    size_t n = 0, cap = 0;
    listed *v = NULL;
    struct dirent *e;
    char key[CACHE_KEY_HEX + 1];
    while ((e = readdir(d))) {
        struct stat st;
        if (!cache_name_is(e->d_name, ".atbc", key) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (n == cap) {
            listed *w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *w);
            if (!w) {
                free(v);
                closedir(d);
                return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
            }
            v = w;
        }
        memcpy(v[n].key, key, sizeof key);
        v[n].mtime = st.st_mtim;
        n++;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, recent_first);
    *out = v;
    *n_out = n;
    return ATTNBWD_OK;
}

/* The public view of one entry read from the folder; strings in fields. */
typedef struct entry_view {
    attnbwd_cache_entry pub;
    char library[32], nvrtc[32], arch[32], kernel[256], tiles[1024];
    cache_entry_info info;
} entry_view;

static void fill_view(const disk_cache *c, const cache_entry_file *f, entry_view *v) {
    memset(v, 0, sizeof *v);
    int maj = 0, min = 0;
    char ours[32];
    nvrtc_version(&maj, &min);
    snprintf(ours, sizeof ours, "%d.%d", maj, min);
    cache_manifest_field(f->manifest, f->manifest_len, "library", v->library, sizeof v->library);
    cache_manifest_field(f->manifest, f->manifest_len, "nvrtc", v->nvrtc, sizeof v->nvrtc);
    cache_manifest_field(f->manifest, f->manifest_len, "arch", v->arch, sizeof v->arch);
    cache_manifest_field(f->manifest, f->manifest_len, "kernel", v->kernel, sizeof v->kernel);
    cache_manifest_field(f->manifest, f->manifest_len, "tiles", v->tiles, sizeof v->tiles);
    cache_info_get(c, f->key, &v->info);
    v->pub.key = f->key;
    v->pub.bytes = f->bytes;
    v->pub.last_use = (int64_t)f->last_use.tv_sec;
    v->pub.problem = f->problem;
    v->pub.current = !f->problem && strcmp(v->library, ATTNBWD_VERSION_STRING) == 0 && strcmp(v->nvrtc, ours) == 0;
    v->pub.library_version = v->library;
    v->pub.nvrtc_version = v->nvrtc;
    v->pub.arch = v->arch;
    v->pub.kernel = v->kernel;
    v->pub.tiles = v->tiles;
    v->pub.has_shape = v->info.has_shape;
    v->pub.shape = v->info.shape;
    v->pub.gpu_model = v->info.gpu_model;
}

attnbwd_status attnbwd_cache_list(attnbwd_ctx *ctx, unsigned flags, attnbwd_cache_entry_fn fn, void *user,
                                  uint64_t *damaged) {
    if (damaged) *damaged = 0;
    if (!ctx || !fn) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_list: %s is NULL", ctx ? "fn" : "ctx");
    if (flags & ~ATTNBWD_CACHE_VERIFY) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_list: unknown flags 0x%x", flags);
    if (!ctx->cache.dir) return ATTNBWD_OK; /* the cache is off: no entries */
    listed *keys = NULL;
    size_t n = 0;
    attnbwd_status s = list_keys(&ctx->cache, &keys, &n);
    entry_view *view = s == ATTNBWD_OK ? malloc(sizeof *view) : NULL;
    if (s == ATTNBWD_OK && !view) s = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; s == ATTNBWD_OK && i < n; i++) {
        cache_entry_file f;
        if (cache_entry_file_read(&ctx->cache, keys[i].key, (flags & ATTNBWD_CACHE_VERIFY) != 0, &f) != 0)
            continue; /* removed since the folder was read */
        fill_view(&ctx->cache, &f, view);
        if (f.problem && damaged) (*damaged)++;
        int stop = fn(&view->pub, user);
        cache_entry_file_free(&f);
        if (stop) break;
    }
    free(view);
    free(keys);
    return s;
}

/* ---- prune, export, import ------------------------------------------------- */

attnbwd_status attnbwd_cache_prune(attnbwd_ctx *ctx, uint64_t max_bytes, int64_t older_than_seconds, uint64_t *files,
                                   uint64_t *bytes) {
    uint64_t f = 0, b = 0;
    if (files) *files = 0;
    if (bytes) *bytes = 0;
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (older_than_seconds < 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_prune: older_than_seconds = %" PRId64 ": must be >= 0",
                       older_than_seconds);
    if (!ctx->cache.dir) return err_set(ATTNBWD_ERR_CACHE, "cache prune: the disk cache is off");
    int err = cache_evict(&ctx->cache, max_bytes ? max_bytes : ctx->cache.max_bytes, older_than_seconds, NULL, &f, &b);
    if (files) *files = f;
    if (bytes) *bytes = b;
    cache_stats_flush(&ctx->cache);
    if (err == EROFS) return err_set(ATTNBWD_ERR_CACHE, "cache prune: the cache folder %s is read-only", ctx->cache.dir);
    if (err == EWOULDBLOCK)
        return err_set(ATTNBWD_ERR_CACHE, "cache prune: %s/" CACHE_FOLDER_LOCK " is held by another process; try again",
                       ctx->cache.dir);
    if (err) return err_set(ATTNBWD_ERR_CACHE, "cache prune: %s: %s", ctx->cache.dir, strerror(err));
    log_line(&ctx->log, ATTNBWD_LOG_INFO, "disk cache %s pruned: %" PRIu64 " entries, %" PRIu64 " bytes", ctx->cache.dir,
             f, b);
    return ATTNBWD_OK;
}

attnbwd_status attnbwd_cache_export(attnbwd_ctx *ctx, const char *path, const char *const *key_prefixes, size_t n,
                                    uint64_t *entries, uint64_t *bytes) {
    uint64_t e = 0, b = 0;
    attnbwd_status s;
    if (!ctx || !path || !*path || (n && !key_prefixes))
        s = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_export: %s", !ctx ? "ctx is NULL" : n && !key_prefixes ? "key_prefixes is NULL" : "no path");
    else
        s = cache_export(&ctx->cache, path, key_prefixes, n, &e, &b);
    if (entries) *entries = e;
    if (bytes) *bytes = b;
    return s;
}

attnbwd_status attnbwd_cache_import(attnbwd_ctx *ctx, const char *path, uint64_t *entries, uint64_t *bytes) {
    uint64_t e = 0, b = 0;
    attnbwd_status s;
    if (!ctx || !path || !*path)
        s = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "cache_import: %s", ctx ? "no path" : "ctx is NULL");
    else
        s = cache_import(&ctx->cache, path, &e, &b);
    if (entries) *entries = e;
    if (bytes) *bytes = b;
    return s;
}
