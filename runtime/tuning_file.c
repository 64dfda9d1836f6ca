/* The user's tuning table, <cache folder>/tuning.lua (written by `attnbwd
 * explore --out`): read as carefully as a cache entry (never through a
 * symlink, never waiting on a FIFO, at most 1 MiB) and checked before the
 * plan takes it, so that a table that is broken is a warning naming the file
 * and line instead of the heuristic's tiles in silence. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "internal.h"

#define TUNING_MAX_BYTES (1 << 20)

/* t->rejected holds why the table is not used: say so at the default level. */
static char *rejected(const tuning_file *t, const logger *log) {
    log_line(log, ATTNBWD_LOG_WARN, "tuning table rejected: %s; using the built-in tuning tables", t->rejected);
    return NULL;
}

/* Reads the whole file into a malloc'd, NUL-terminated buffer; NULL and why
 * (a static string) when it cannot or should not be read. */
static char *read_regular(const char *path, size_t *len, const char **why) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        *why = errno == ENOENT ? NULL : errno == ELOOP ? "is a symbolic link (not followed)" : "cannot be opened";
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    *why = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) *why = "is not a regular file";
    else if (st.st_size > TUNING_MAX_BYTES) *why = "is over 1 MiB";
    else if (!(text = malloc((size_t)st.st_size + 1))) *why = "cannot be read (out of memory)";
    size_t n = 0;
    while (text && n < (size_t)st.st_size) {
        ssize_t r = read(fd, text + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* shrank meanwhile: what was read is checked as it is */
        n += (size_t)r;
    }
    close(fd);
    if (text) {
        text[n] = '\0';
        *len = n;
    }
    return text;
}

char *tuning_file_read(const disk_cache *c, const logger *log, tuning_file *t) {
    memset(t, 0, sizeof *t);
    if (!c->dir) return NULL;
    snprintf(t->path, sizeof t->path, "%s/tuning.lua", c->dir);
    size_t len = 0;
    const char *why;
    char *text = read_regular(t->path, &len, &why);
    if (!text) {
        if (!why) {
            t->path[0] = '\0'; /* no table: nothing to say */
            return NULL;
        }
        snprintf(t->rejected, sizeof t->rejected, "%.560s %s", t->path, why);
        return rejected(t, log);
    }
    char chunk[4100];
    snprintf(chunk, sizeof chunk, "@%s", t->path);
    if (gen_check_tuning(text, len, chunk, t->gpu, sizeof t->gpu) != ATTNBWD_OK) {
        free(text);
        snprintf(t->rejected, sizeof t->rejected, "%s", attnbwd_last_error());
        return rejected(t, log);
    }
    log_line(log, ATTNBWD_LOG_INFO, "tuning table %s (for %s)", t->path, t->gpu);
    return text;
}
