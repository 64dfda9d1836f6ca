/* NVRTC: CUDA source to a cubin for one architecture, with no fast-math
 * shortcuts (the fp32 tolerance of the checks needs IEEE division and square
 * roots), and with line info for profilers and compute-sanitizer when
 * ATTNBWD_LINEINFO=1 asks for it. A failed compile reports the log and the
 * numbered source lines around the first error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "error.h"
#include "nvrtc_compile.h"

#define NVRTC_CHECK(call)                                                                  \
    do {                                                                                   \
        nvrtcResult r_ = (call);                                                           \
        if (r_ != NVRTC_SUCCESS) {                                                         \
            status = err_set(ATTNBWD_ERR_COMPILE, "%s failed: %s", #call, nvrtcGetErrorString(r_)); \
            goto cleanup;                                                                  \
        }                                                                                  \
    } while (0)

/* The option list, also written into each cache manifest. */
static int build_options(const char *arch, char opts[][64], int max) {
    int n = 0;
    snprintf(opts[n++], 64, "--gpu-architecture=%s", arch);
    snprintf(opts[n++], 64, "--std=c++17");
    /* Off by default: -lineinfo embeds the PTX and line tables, about two
     * thirds of a cubin of problem 2 (830 KB against 250 KB, the same machine
     * code), which every disk hit reads and checksums. The option is part of
     * the cache key, so the two kinds of entries never mix. */
    const char *lineinfo = getenv("ATTNBWD_LINEINFO");
    if (lineinfo && *lineinfo && strcmp(lineinfo, "0") != 0) snprintf(opts[n++], 64, "-lineinfo");
    snprintf(opts[n++], 64, "--fmad=true");
    snprintf(opts[n++], 64, "--prec-div=true");
    snprintf(opts[n++], 64, "--prec-sqrt=true");
    /* ptxas's report into the log: its performance warnings (wgmma serialized,
     * spills) are passed on as warnings (nvrtc_performance_warnings). */
    snprintf(opts[n++], 64, "--ptxas-options=-v");
    (void)max;
    return n;
}

void nvrtc_options_string(const char *arch, char *buf, size_t len) {
    char opts[8][64];
    int n = build_options(arch, opts, 8);
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < n && used < len; ++i)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "", opts[i]);
}

void nvrtc_version(int *major, int *minor) {
    if (nvrtcVersion(major, minor) != NVRTC_SUCCESS) *major = *minor = 0;
}

/* Appends source lines [line-3, line+3] of src, numbered, to buf. */
static void append_context(const char *src, long line, char *buf, size_t len) {
    size_t used = strlen(buf);
    long n = 1;
    for (const char *p = src; *p && used + 1 < len; ++n) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n >= line - 3 && n <= line + 3)
            used += (size_t)snprintf(buf + used, len - used, "%s%5ld | %.*s\n", n == line ? ">" : " ", n,
                                     (int)(l > 200 ? 200 : l), p);
        if (!e || n > line + 3) break;
        p = e + 1;
    }
}

/* The line number of the first "(N): error" in an NVRTC log, or 0. */
static long first_error_line(const char *log) {
    for (const char *p = strstr(log, "): error"); p; p = strstr(p + 1, "): error")) {
        const char *q = p;
        while (q > log && q[-1] >= '0' && q[-1] <= '9') --q;
        if (q < p && q > log && q[-1] == '(') return strtol(q, NULL, 10);
    }
    return 0;
}

attnbwd_status nvrtc_compile(const char *source, const char *name_for_log, const char *arch,
                             nvrtc_result *out) {
    attnbwd_status status = ATTNBWD_OK;
    nvrtcProgram prog = NULL;
    char opts[8][64];
    const char *optv[8];
    int nopt = build_options(arch, opts, 8);
    for (int i = 0; i < nopt; ++i) optv[i] = opts[i];
    memset(out, 0, sizeof *out);
    char file[300];
    snprintf(file, sizeof file, "%s.cu", name_for_log);

    NVRTC_CHECK(nvrtcCreateProgram(&prog, source, file, 0, NULL, NULL));
    nvrtcResult cr = nvrtcCompileProgram(prog, nopt, optv);
    size_t log_len = 0;
    NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &log_len));
    out->log = calloc(log_len + 1, 1);
    if (!out->log) {
        status = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory reading the NVRTC log");
        goto cleanup;
    }
    if (log_len) NVRTC_CHECK(nvrtcGetProgramLog(prog, out->log));
    if (cr != NVRTC_SUCCESS) {
        char msg[12000];
        char optline[512];
        nvrtc_options_string(arch, optline, sizeof optline);
        snprintf(msg, sizeof msg, "NVRTC could not compile %s (%s), options: %s\n%.6000s", file,
                 nvrtcGetErrorString(cr), optline, out->log);
        long line = first_error_line(out->log);
        if (line > 0) {
            strncat(msg, "source around the first error:\n", sizeof msg - strlen(msg) - 1);
            append_context(source, line, msg, sizeof msg);
        }
        status = err_set(ATTNBWD_ERR_COMPILE, "%s", msg);
        goto cleanup;
    }
    NVRTC_CHECK(nvrtcGetCUBINSize(prog, &out->cubin_len));
    out->cubin = malloc(out->cubin_len ? out->cubin_len : 1);
    if (!out->cubin) {
        status = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory for a cubin of %zu bytes", out->cubin_len);
        goto cleanup;
    }
    NVRTC_CHECK(nvrtcGetCUBIN(prog, out->cubin));

cleanup:
    if (prog) nvrtcDestroyProgram(&prog);
    if (status != ATTNBWD_OK) {
        free(out->cubin);
        out->cubin = NULL;
        out->cubin_len = 0;
    }
    return status;
}

/* needle within the len bytes of line: strstr would scan on to the log's
 * end for every line. */
static const char *find_in_line(const char *line, int len, const char *needle) {
    const size_t n = strlen(needle);
    for (const char *p = line; p + n <= line + len; ++p)
        if (!memcmp(p, needle, n)) return p;
    return NULL;
}

/* The numbers of a line "... N bytes stack frame, S bytes spill stores, L
 * bytes spill loads" (NVRTC puts "ptxas         ." before it, nvcc spaces). */
static int spill_line(const char *line, int len, int *stores, int *loads) {
    const char *p = find_in_line(line, len, " bytes stack frame, ");
    if (!p) return 0;
    while (p > line && p[-1] >= '0' && p[-1] <= '9') --p; /* back to the frame's first digit */
    int frame;
    return sscanf(p, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &frame, stores, loads) == 3;
}

/* Line by line: ptxas's "Potential Performance Loss" lines as they are, and
 * a function that spills (its "Function properties for NAME" line, then
 * "N bytes stack frame, S bytes spill stores, L bytes spill loads" with S or
 * L above 0) as one line of ours that names it. */
int nvrtc_performance_warnings(const char *log, void (*each)(const char *line, int len, void *user), void *user) {
    static const char props[] = "Function properties for ";
    int n = 0;
    const char *name = NULL;
    int name_len = 0;
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        const int len = end ? (int)(end - line) : (int)strlen(line);
        const char *loss = find_in_line(line, len, "Potential Performance Loss"), *fn = find_in_line(line, len, props);
        int stores, loads;
        if (loss) {
            if (each) each(loss, len - (int)(loss - line), user);
            ++n;
        } else if (fn) {
            name = fn + sizeof props - 1;
            name_len = len - (int)(name - line);
        } else if (name && spill_line(line, len, &stores, &loads)) {
            if (stores > 0 || loads > 0) {
                char msg[512];
                const int m = snprintf(msg, sizeof msg, "Spills: %.*s stores %d bytes to local memory and loads %d",
                                       name_len, name, stores, loads);
                if (each) each(msg, m < (int)sizeof msg ? m : (int)sizeof msg - 1, user);
                ++n;
            }
            name = NULL;
        }
        line = end ? end + 1 : NULL;
    }
    return n;
}

void nvrtc_result_free(nvrtc_result *r) {
    free(r->cubin);
    free(r->log);
    memset(r, 0, sizeof *r);
}
