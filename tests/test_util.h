/* Helpers shared by the CPU tests: temporary folders and a counting logger. */
#ifndef ATTNBWD_TEST_UTIL_H
#define ATTNBWD_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnbwd.h"

/* A fresh folder under /tmp; the caller frees the string. */
static inline char *test_tmpdir(void) {
    char *d = strdup("/tmp/attnbwd-test-XXXXXX");
    if (!d || !mkdtemp(d)) {
        fprintf(stderr, "mkdtemp failed\n");
        abort();
    }
    return d;
}

static inline void test_rmtree(const char *d) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", d);
}

/* The disk cache of kernels a test keeps between runs, $ATTNBWD_TEST_KERNELS
 * (NULL when unset: memory only). tests/CMakeLists.txt empties it before the
 * plain build's run (the test_kernels fixture), and the sanitizer build's run
 * reads the same folder: NVRTC, which no sanitizer instruments, then compiles
 * each identical source once, while the generation, the cache's reads and the
 * launches run again under the sanitizers. */
static inline const char *test_kernel_cache(void) {
    const char *d = getenv("ATTNBWD_TEST_KERNELS");
    return d && *d ? d : NULL;
}

/* A test program's arguments: "--only PATTERN" runs the tests whose names
 * match (cmocka's * and ? wildcards), "--skip PATTERN" the others, so that
 * tests/CMakeLists.txt can run one program's long tests side by side. */
static inline void test_filter(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--only")) cmocka_set_test_filter(argv[2]);
    else if (argc == 3 && !strcmp(argv[1], "--skip")) cmocka_set_skip_filter(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [--only PATTERN | --skip PATTERN]\n", argv[0]);
        exit(2);
    }
}

/* In a cmocka test: the call returns `status` and the message holds `needle`. */
#define EXPECT_STATUS(call, status, needle)                                               \
    do {                                                                                  \
        attnbwd_status s_ = (call);                                                       \
        if (s_ != (status) || !strstr(attnbwd_last_error(), (needle)))                    \
            fail_msg("%s: got %s \"%s\", expected %s with \"%s\"", #call,                 \
                     attnbwd_status_name(s_), attnbwd_last_error(), #status, (needle));   \
    } while (0)

typedef struct log_counts {
    int warn, compiled, disk_hit;
    char last[1024];
} log_counts;

static inline void test_log(int level, const char *line, void *user) {
    log_counts *c = user;
    if (level == ATTNBWD_LOG_WARN) c->warn++;
    if (strncmp(line, "compiled ", 9) == 0) c->compiled++;
    if (strncmp(line, "disk hit ", 9) == 0) c->disk_hit++;
    snprintf(c->last, sizeof c->last, "%s", line);
}

/* A context compiling for sm_90 (no GPU needed) with its cache in dir
 * (NULL: cache off), logging into counts. */
static inline attnbwd_ctx *test_open(const char *dir, log_counts *counts) {
    attnbwd_options o;
    attnbwd_options_init(&o);
    o.arch = "sm_90";
    o.cache_dir = dir;
    o.disk_cache = dir != NULL;
    o.log_level = ATTNBWD_LOG_INFO;
    o.log_fn = test_log;
    o.log_user = counts;
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(&o, &ctx) != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd_open: %s\n", attnbwd_last_error());
        abort();
    }
    return ctx;
}

static inline attnbwd_shape test_shape(int64_t B, int64_t H, int64_t T, int dropout) {
    attnbwd_shape s = {ATTNBWD_SOFTMAX_DROPOUT_BWD, B, H, T, dropout, 0};
    return s;
}

#endif
