/* `attnbwd info`: library, NVRTC and driver versions, the device, the target
 * arch and the disk cache. Works without a GPU: the device facts then say
 * why there is none, and the cache facts come from a context opened for
 * sm_90 only to read them (the arch is reported as not detected). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void cmd_info_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd info [OPTIONS]\n\n"
                 "Prints the library, NVRTC and driver versions, the device, the arch kernels\n"
                 "are compiled for, the disk cache (its directory, whether it is read and\n"
                 "written or why not, its size and number of entries) and the tuning table in\n"
                 "effect (the cache folder's tuning.lua, or built-in and why). Needs no GPU.\n\n"
                 "example:\n"
                 "  attnbwd info --arch sm_90 --cache-dir /tmp/attnbwd-cache\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

/* Why the device could not be used, when the first open failed. */
typedef struct no_device {
    int set;
    char status[48];
    char message[512];
} no_device;

#define ROW "%-14s "

static void print_driver(const attnbwd_ctx_info *in, const no_device *nd)
{
    if (in->driver_version > 0)
        printf(ROW "%d.%d (%d)\n", "driver", in->driver_version / 1000,
               (in->driver_version % 1000) / 10, in->driver_version);
    else
        printf(ROW "no driver: %s\n", "driver",
               in->driver_error[0] ? in->driver_error : nd->set ? nd->message : "unknown reason");
    if (in->device_name[0])
        printf(ROW "%s\n", "device", in->device_name);
    else if (in->driver_version <= 0)
        printf(ROW "none (no driver)\n", "device");
    else if (nd->set)
        printf(ROW "none (%s: %s)\n", "device", nd->status, nd->message);
    else
        printf(ROW "none%s%s\n", "device", in->driver_error[0] ? ": " : "", in->driver_error);
}

static void print_arch(const cli_common *c, const attnbwd_ctx_info *in, const no_device *nd)
{
    if (nd->set)
        printf(ROW "none (not detected: no usable GPU; pass --arch sm_XX)\n", "target arch");
    else
        printf(ROW "%s (%s)\n", "target arch", in->arch, c->arch ? "from --arch" : "from the device");
}

/* The library says how the cache is used ("read-write", "read-only (why)",
 * "off (why)"); --no-cache is ours to name. */
static const char *cache_mode(const cli_common *c, const attnbwd_ctx_info *in)
{
    if (c->no_cache && !in->cache_read)
        return "off (--no-cache)";
    return in->cache_mode && in->cache_mode[0] ? in->cache_mode : in->disk_cache ? "read-write" : "off";
}

static void print_cache(const cli_common *c, const attnbwd_ctx_info *in)
{
    char human[32];
    printf(ROW "%s\n", "cache dir", in->cache_dir[0] ? in->cache_dir : "(none)");
    printf(ROW "%s\n", "cache mode", cache_mode(c, in));
    cli_human_bytes(in->cache_bytes, human, sizeof human);
    printf(ROW "%" PRIu64 " bytes (%s)\n", "cache size", in->cache_bytes, human);
    printf(ROW "%" PRIu64 "%s\n", "cache entries", in->cache_entries,
           in->cache_read && !in->disk_cache ? " (read, not written)" : "");
}

static int print_info(const cli_common *c, attnbwd_ctx *ctx, const no_device *nd)
{
    attnbwd_ctx_info in;
    memset(&in, 0, sizeof in);
    attnbwd_status s = attnbwd_ctx_get_info(ctx, &in);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    printf(ROW "%s\n", "library", in.library_version ? in.library_version : ATTNBWD_VERSION_STRING);
    printf(ROW "%d.%d\n", "nvrtc", in.nvrtc_major, in.nvrtc_minor);
    print_driver(&in, nd);
    print_arch(c, &in, nd);
    print_cache(c, &in);
    printf(ROW "%s\n", "tuning table", in.tuning_table && in.tuning_table[0] ? in.tuning_table : "built-in");
    printf(ROW "%s\n", "deterministic",
           in.deterministic ? "yes (no output summed by float atomics; ATTNBWD_DETERMINISTIC=1)"
                            : "no (tuned tiles may sum some outputs by float atomics; ATTNBWD_DETERMINISTIC=1 for "
                              "the same bits every run)");
    return CLI_OK;
}

/* Opens the context to report on; without a GPU and without --arch, records
 * why in nd and opens one for sm_90 only to read the remaining facts. */
static int open_for_info(const cli_common *c, attnbwd_ctx **ctx, no_device *nd)
{
    attnbwd_status s = cli_open_arch(c, NULL, ctx);
    if (s == ATTNBWD_OK)
        return CLI_OK;
    if (c->arch || (s != ATTNBWD_ERR_NO_DRIVER && s != ATTNBWD_ERR_NO_DEVICE))
        return cli_lib_error(s);
    nd->set = 1;
    snprintf(nd->status, sizeof nd->status, "%s", attnbwd_status_name(s));
    snprintf(nd->message, sizeof nd->message, "%s", attnbwd_last_error());
    s = cli_open_arch(c, "sm_90", ctx);
    if (s != ATTNBWD_OK) {
        printf(ROW "%s\n", "library", ATTNBWD_VERSION_STRING);
        printf(ROW "none (%s: %s)\n", "device", nd->status, nd->message);
        return cli_lib_error(s);
    }
    return CLI_OK;
}

int cmd_info(const cli_common *common, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("info", "unknown option '%s'", argv[i]);
        return cli_usage_error("info", "unexpected argument '%s'", argv[i]);
    }
    attnbwd_ctx *ctx = NULL;
    no_device nd;
    memset(&nd, 0, sizeof nd);
    int rc = open_for_info(common, &ctx, &nd);
    if (rc == CLI_OK)
        rc = print_info(common, ctx, &nd);
    attnbwd_close(ctx);
    return rc;
}
