/* Status and message plumbing shared by every stage: one thread-local message
 * buffer, filled by err_set(), read by attnbwd_last_error(). */
#ifndef ATTNBWD_ERROR_H
#define ATTNBWD_ERROR_H

#include "attnbwd.h"

#if defined(__GNUC__)
#define ATTNBWD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ATTNBWD_PRINTF(a, b)
#endif

/* Records a message for this thread and returns s, so a caller can write
 * `return err_set(ATTNBWD_ERR_..., "shape.seq_len = %lld ...", ...)`. */
attnbwd_status err_set(attnbwd_status s, const char *fmt, ...) ATTNBWD_PRINTF(2, 3);
/* Prepends "what: " to the message already recorded (context on the way out). */
attnbwd_status err_wrap(attnbwd_status s, const char *fmt, ...) ATTNBWD_PRINTF(2, 3);
void err_clear(void);

#endif
