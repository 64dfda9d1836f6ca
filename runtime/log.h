/* Logging for one context: a level and a sink (stderr by default). */
#ifndef ATTNBWD_LOG_H
#define ATTNBWD_LOG_H

#include "error.h"

typedef struct logger {
    int level;
    attnbwd_log_fn fn;
    void *user;
} logger;

void log_line(const logger *lg, int level, const char *fmt, ...) ATTNBWD_PRINTF(3, 4);

#endif
