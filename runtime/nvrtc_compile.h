/* NVRTC: CUDA source to cubin for one architecture. */
#ifndef ATTNBWD_NVRTC_COMPILE_H
#define ATTNBWD_NVRTC_COMPILE_H

#include <stddef.h>

#include "attnbwd.h"

typedef struct nvrtc_result {
    void *cubin;
    size_t cubin_len;
    char *log;          /* NVRTC's log, possibly "" */
} nvrtc_result;

/* The options used for arch, as one space-separated string (part of the cache
 * manifest). Static storage per call is not used: writes into buf. */
void nvrtc_options_string(const char *arch, char *buf, size_t len);
void nvrtc_version(int *major, int *minor);

/* Compile. On a compile error returns ATTNBWD_ERR_COMPILE with a message that
 * carries the log and the numbered source lines around the first error. */
attnbwd_status nvrtc_compile(const char *source, const char *name_for_log, const char *arch,
                             nvrtc_result *out);
/* The performance warnings of ptxas in an NVRTC log (its "Potential
 * Performance Loss" lines: wgmma serialized, setmaxnreg ignored...; and each
 * function that spills to local memory, as a line "Spills: NAME stores S
 * bytes ..."), each passed to `each` (may be NULL) as a line of len bytes;
 * returns how many. */
int nvrtc_performance_warnings(const char *log, void (*each)(const char *line, int len, void *user), void *user);
void nvrtc_result_free(nvrtc_result *r);

#endif
