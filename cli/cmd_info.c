/* `attnbwd info`: library, NVRTC and driver versions, the device, the target
 * arch, the GPU model and the tuning table it gets, and the disk cache. Works without a GPU: the device facts then say
 * why there is none, and the cache facts come from a context opened for
 * sm_90 only to read them (the arch is reported as not detected). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gpu_args.h"

void cmd_info_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd info [--json] [OPTIONS]\n\n"
                 "Prints the library, NVRTC and driver versions, the device, the arch kernels\n"
                 "are compiled for, and the disk cache: its directory, whether it is read and\n"
                 "written or why not, its size, number of entries and budget. Needs no GPU.\n"
                 "The GPU model the tiles are planned for (the device's, $ATTNBWD_GPU_MODEL's or\n"
                 "--gpu's), the shipped tuning table it gets (with --gpu, one pair of rows per\n"
                 "model), and the user's table (the cache folder's tuning.lua, or built-in and why).\n\n"
                 "options:\n"
                 "  --json   the same facts as one JSON object (null where there is none; one --gpu at most)\n"
                 CLI_GPU_HELP "\n"
                 "example:\n"
                 "  attnbwd info --arch sm_90 --cache-dir /tmp/attnbwd-cache\n"
                 "  attnbwd info --gpu h100,h100-pcie,h200\n\n");
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
        printf(ROW "%s (%s)\n", "target arch", in->arch,
               c->arch ? "from --arch" : in->device_name[0] ? "from the device" : "from the GPU model");
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

static void print_model(const attnbwd_ctx_info *in)
{
    char sms[32] = "SMs unknown";
    if (in->gpu_sm_count > 0)
        snprintf(sms, sizeof sms, "%d SMs", in->gpu_sm_count);
    if (in->gpu_model[0])
        printf(ROW "%s (%s, %s)\n", "gpu model", in->gpu_model, in->gpu_model_from, sms);
    else
        printf(ROW "none (no device, --gpu or ATTNBWD_GPU_MODEL)\n", "gpu model");
    printf(ROW "%s\n", "tuning table", in->tuning_note);
}

/* The rows of each further --gpu model, from a context of its own. */
static int print_more_models(const cli_common *c, const cli_gpus *gpus)
{
    for (int i = 1; i < gpus->n; i++) {
        cli_common mc = *c;
        mc.gpu_model = gpus->names[i];
        mc.no_cache = 1;
        attnbwd_ctx *ctx = NULL;
        attnbwd_ctx_info in;
        memset(&in, 0, sizeof in);
        attnbwd_status s = cli_open_arch(&mc, c->arch ? NULL : "sm_90", &ctx);
        if (s == ATTNBWD_OK)
            s = attnbwd_ctx_get_info(ctx, &in);
        if (s == ATTNBWD_OK)
            print_model(&in);
        attnbwd_close(ctx);
        if (s != ATTNBWD_OK)
            return cli_lib_error(s);
    }
    return CLI_OK;
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
    print_model(&in);
    print_cache(c, &in);
    attnbwd_cache_stats st;
    if (attnbwd_cache_get_stats(ctx, &st) == ATTNBWD_OK) {
        char human[32];
        cli_human_bytes(st.max_bytes, human, sizeof human);
        printf(ROW "%" PRIu64 " bytes (%s; ATTNBWD_CACHE_MAX_BYTES)\n", "cache budget", st.max_bytes, human);
    }
    const char *user = in.user_tuning_table && in.user_tuning_table[0] ? in.user_tuning_table : "built-in";
    printf(ROW "%s\n", "user table", user);
    printf(ROW "%s\n", "deterministic",
           in.deterministic ? "yes (no output summed by float atomics; ATTNBWD_DETERMINISTIC=1)"
                            : "no (tuned tiles may sum some outputs by float atomics; ATTNBWD_DETERMINISTIC=1 for "
                              "the same bits every run)");
    return CLI_OK;
}

static void add_string_or_null(cJSON *o, const char *name, const char *value)
{
    if (value && value[0])
        cJSON_AddStringToObject(o, name, value);
    else
        cJSON_AddNullToObject(o, name);
}

/* The facts of print_info as one JSON object. */
static int print_info_json(const cli_common *c, attnbwd_ctx *ctx, const no_device *nd)
{
    attnbwd_ctx_info in;
    attnbwd_cache_stats st;
    memset(&in, 0, sizeof in);
    memset(&st, 0, sizeof st);
    attnbwd_status s = attnbwd_ctx_get_info(ctx, &in);
    if (s == ATTNBWD_OK)
        s = attnbwd_cache_get_stats(ctx, &st);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    cJSON *o = cJSON_CreateObject();
    char nvrtc[32];
    snprintf(nvrtc, sizeof nvrtc, "%d.%d", in.nvrtc_major, in.nvrtc_minor);
    cJSON_AddStringToObject(o, "library", in.library_version ? in.library_version : ATTNBWD_VERSION_STRING);
    cJSON_AddStringToObject(o, "nvrtc", nvrtc);
    if (in.driver_version > 0)
        cJSON_AddNumberToObject(o, "driver_version", in.driver_version);
    else
        cJSON_AddNullToObject(o, "driver_version");
    add_string_or_null(o, "device", in.device_name);
    add_string_or_null(o, "device_error", in.driver_error[0] ? in.driver_error : nd->set ? nd->message : "");
    add_string_or_null(o, "arch", nd->set ? "" : in.arch);
    add_string_or_null(o, "arch_from", nd->set ? "" : c->arch ? "--arch" : "device");
    cJSON_AddNumberToObject(o, "device_ordinal", in.device);
    cJSON_AddBoolToObject(o, "deterministic", in.deterministic);
    add_string_or_null(o, "gpu_model", in.gpu_model);
    add_string_or_null(o, "gpu_model_from", in.gpu_model_from);
    if (in.gpu_sm_count > 0)
        cJSON_AddNumberToObject(o, "gpu_sm_count", in.gpu_sm_count);
    else
        cJSON_AddNullToObject(o, "gpu_sm_count");
    add_string_or_null(o, "tuning_table", in.tuning_table);
    add_string_or_null(o, "tuning_note", in.tuning_note);
    add_string_or_null(o, "user_tuning_table", in.user_tuning_table);
    cJSON *cache = cJSON_AddObjectToObject(o, "cache");
    add_string_or_null(cache, "dir", in.cache_dir);
    cJSON_AddStringToObject(cache, "mode", cache_mode(c, &in));
    cJSON_AddNumberToObject(cache, "bytes", (double)in.cache_bytes);
    cJSON_AddNumberToObject(cache, "entries", (double)in.cache_entries);
    cJSON_AddNumberToObject(cache, "max_bytes", (double)st.max_bytes);
    cJSON_AddNumberToObject(cache, "hits", (double)st.hits);
    cJSON_AddNumberToObject(cache, "misses", (double)st.misses);
    if (st.since)
        cJSON_AddNumberToObject(cache, "since", (double)st.since);
    else
        cJSON_AddNullToObject(cache, "since");
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        return CLI_FAIL;
    printf("%s\n", text);
    cJSON_free(text);
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
    int json = 0;
    cli_gpus gpus = {0};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        const char *val = NULL;
        int r = cli_opt_value("info", argc, argv, &i, "--gpu", &val);
        if (r > 0 && cli_gpus_add(&gpus, "info", val) == CLI_OK)
            continue;
        cli_gpus_free(&gpus);
        if (r != 0)
            return CLI_USAGE;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("info", "unknown option '%s'", argv[i]);
        return cli_usage_error("info", "unexpected argument '%s'", argv[i]);
    }
    if (json && gpus.n > 1) {
        cli_gpus_free(&gpus);
        return cli_usage_error("info", "--json takes one --gpu model at most");
    }
    cli_common c = *common;
    if (gpus.n)
        c.gpu_model = gpus.names[0];
    attnbwd_ctx *ctx = NULL;
    no_device nd;
    memset(&nd, 0, sizeof nd);
    int rc = open_for_info(&c, &ctx, &nd);
    if (rc == CLI_OK)
        rc = json ? print_info_json(&c, ctx, &nd) : print_info(&c, ctx, &nd);
    attnbwd_close(ctx);
    if (rc == CLI_OK && !json)
        rc = print_more_models(&c, &gpus);
    cli_gpus_free(&gpus);
    return rc;
}
