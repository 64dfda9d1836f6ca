/* ATTNBWD_DUMP_DIR: for each kernel compiled, its source, NVRTC options, log,
 * cache manifest and cubin, named after the kernel. A debugging aid: failures
 * to write are logged and otherwise ignored. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

static void write_file(const attnbwd_ctx *ctx, const char *name, const char *ext, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", ctx->dump_dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        log_line(&ctx->log, ATTNBWD_LOG_WARN, "dump: cannot write %s: %s", path, strerror(errno));
    }
    if (f) fclose(f);
}

void dump_kernel(const attnbwd_ctx *ctx, const attnbwd_kernel *k, const char *options, const char *log,
                 const char *manifest) {
    if (!ctx->dump_dir) return;
    mkdir(ctx->dump_dir, 0700); /* EEXIST is fine; other failures show at the writes */
    const char *name = k->plan.name;
    write_file(ctx, name, "cu", k->plan.source, strlen(k->plan.source));
    write_file(ctx, name, "options", options, strlen(options));
    write_file(ctx, name, "log", log ? log : "", log ? strlen(log) : 0);
    write_file(ctx, name, "manifest", manifest, strlen(manifest));
    if (k->cubin) write_file(ctx, name, "cubin", k->cubin, k->cubin_len);
}
