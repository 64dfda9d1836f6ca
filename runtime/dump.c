/* ATTNBWD_DUMP_DIR: for each kernel compiled, its source, NVRTC options, log,
 * cache manifest and cubin, named after the kernel. A debugging aid: failures
 * to write are logged and otherwise ignored. Each file is made anew (the old
 * name removed, then created exclusively, never through a symlink), so a
 * link planted under a dump's name cannot send the write elsewhere. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* 0 or an errno. A file past the process's size limit is not started:
 * writing it would raise SIGXFSZ, which kills the host by default. */
static int write_new_file(int dir, const char *name, const void *data, size_t len) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)len > rl.rlim_cur) return EFBIG;
    if (unlinkat(dir, name, 0) != 0 && errno != ENOENT) return errno;
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) return errno;
    int err = 0;
    const char *p = data;
    while (len > 0 && !err) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) err = w < 0 ? errno : EIO;
        else p += w, len -= (size_t)w;
    }
    if (close(fd) != 0 && !err) err = errno;
    return err;
}

static void write_file(const attnbwd_ctx *ctx, int dir, const char *name, const char *ext, const void *data,
                       size_t len) {
    char file[512];
    snprintf(file, sizeof file, "%s.%s", name, ext);
    int err = write_new_file(dir, file, data, len);
    if (err) log_line(&ctx->log, ATTNBWD_LOG_WARN, "dump: cannot write %s/%s: %s", ctx->dump_dir, file, strerror(err));
}

void dump_kernel(const attnbwd_ctx *ctx, const attnbwd_kernel *k, const char *options, const char *log,
                 const char *manifest) {
    if (!ctx->dump_dir) return;
    mkdir(ctx->dump_dir, 0700); /* EEXIST is fine; other failures show at the writes */
    int dir = open(ctx->dump_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        log_line(&ctx->log, ATTNBWD_LOG_WARN, "dump: cannot use %s: %s", ctx->dump_dir, strerror(errno));
        return;
    }
    const char *name = k->plan.name;
    write_file(ctx, dir, name, "cu", k->plan.source, strlen(k->plan.source));
    write_file(ctx, dir, name, "options", options, strlen(options));
    write_file(ctx, dir, name, "log", log ? log : "", log ? strlen(log) : 0);
    write_file(ctx, dir, name, "manifest", manifest, strlen(manifest));
    if (k->cubin) write_file(ctx, dir, name, "cubin", k->cubin, k->cubin_len);
    close(dir);
}
