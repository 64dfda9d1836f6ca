/* `attnbwd cache clear`: empties the disk cache folder (the one `info` shows). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cmd_cache_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd cache clear [OPTIONS]\n\n"
                 "Removes every compiled kernel from the disk cache folder, and what crashed\n"
                 "writers left there. Needs no GPU. Other processes holding kernels in memory\n"
                 "are not affected; their next disk miss compiles again.\n\n"
                 "example:\n"
                 "  attnbwd cache clear --cache-dir /tmp/attnbwd-cache\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

int cmd_cache(const cli_common *common, int argc, char **argv)
{
    if (argc != 1 || strcmp(argv[0], "clear") != 0)
        return cli_usage_error("cache", "expected 'clear'%s%s", argc ? ", got " : "", argc ? argv[0] : "");
    attnbwd_ctx *ctx = NULL;
    /* The cache needs no device: open for an explicit arch when none is given. */
    attnbwd_status s = cli_open_arch(common, common->arch ? NULL : "sm_90", &ctx);
    if (s != ATTNBWD_OK) return cli_lib_error(s);
    attnbwd_ctx_info info;
    attnbwd_ctx_get_info(ctx, &info);
    uint64_t files = 0, bytes = 0;
    s = attnbwd_cache_clear(ctx, &files, &bytes);
    if (s != ATTNBWD_OK) {
        attnbwd_close(ctx);
        return cli_lib_error(s);
    }
    char human[32];
    cli_human_bytes(bytes, human, sizeof human);
    if (info.cache_dir[0])
        printf("removed %llu files (%s) from %s\n", (unsigned long long)files, human, info.cache_dir);
    else
        printf("the disk cache is off: nothing to remove\n");
    attnbwd_close(ctx);
    return CLI_OK;
}
