/* Status names and the per-thread message behind attnbwd_last_error(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define MSG_MAX 16384 /* room for an NVRTC log with source context */

static _Thread_local char msg[MSG_MAX];

attnbwd_status err_set(attnbwd_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return s;
}

attnbwd_status err_wrap(attnbwd_status s, const char *fmt, ...) {
    char prefix[512], old[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, msg, sizeof old);
    size_t n = strlen(prefix);
    if (n + 2 >= sizeof msg) n = sizeof msg - 3;
    memcpy(msg, prefix, n);
    memcpy(msg + n, ": ", 2);
    size_t rest = strnlen(old, sizeof old - 1);
    if (rest > sizeof msg - n - 3) rest = sizeof msg - n - 3;
    memcpy(msg + n + 2, old, rest);
    msg[n + 2 + rest] = '\0';
    return s;
}

void err_clear(void) { msg[0] = '\0'; }

const char *attnbwd_last_error(void) { return msg; }

const char *attnbwd_status_name(attnbwd_status s) {
    switch (s) {
    case ATTNBWD_OK: return "ATTNBWD_OK";
    case ATTNBWD_ERR_INVALID_ARGUMENT: return "ATTNBWD_ERR_INVALID_ARGUMENT";
    case ATTNBWD_ERR_UNSUPPORTED: return "ATTNBWD_ERR_UNSUPPORTED";
    case ATTNBWD_ERR_OUT_OF_MEMORY: return "ATTNBWD_ERR_OUT_OF_MEMORY";
    case ATTNBWD_ERR_LUA: return "ATTNBWD_ERR_LUA";
    case ATTNBWD_ERR_COMPILE: return "ATTNBWD_ERR_COMPILE";
    case ATTNBWD_ERR_CACHE: return "ATTNBWD_ERR_CACHE";
    case ATTNBWD_ERR_NO_DRIVER: return "ATTNBWD_ERR_NO_DRIVER";
    case ATTNBWD_ERR_NO_DEVICE: return "ATTNBWD_ERR_NO_DEVICE";
    case ATTNBWD_ERR_CUDA: return "ATTNBWD_ERR_CUDA";
    case ATTNBWD_ERR_IO: return "ATTNBWD_ERR_IO";
    }
    return "ATTNBWD_ERR_UNKNOWN";
}
