/* One line per event, to the context's sink or stderr, at or under its level. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void log_line(const logger *lg, int level, const char *fmt, ...) {
    if (!lg || level > lg->level) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (lg->fn)
        lg->fn(level, line, lg->user);
    else
        fprintf(stderr, "attnbwd: %s\n", line);
}
