/* `attnbwd lua SCRIPT.lua [ARGS...]`: runs a user's exploration script with
 * the `attnbwd` module (docs/lua-api.md) and Lua's io and os libraries. */
#include <stdio.h>
#include <stdlib.h>

#include <lua.h>

#include "cli.h"
#include "lua_api.h"

void cmd_lua_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd lua [OPTIONS] SCRIPT.lua [ARGS...]\n\n"
                 "Runs SCRIPT.lua with `local attnbwd = require \"attnbwd\"` available: suites,\n"
                 "candidate tiles, compile, check and time on the GPU (docs/lua-api.md). ARGS\n"
                 "are in the global `arg` and in `...`. Exits 1 when the script raises an error.\n\n"
                 "example:\n"
                 "  attnbwd lua examples/explore_one.lua 2,16,541,0.1\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int cmd_lua(const cli_common *common, int argc, char **argv)
{
    if (argc < 1) return cli_usage_error("lua", "no script given");
    size_t len = 0;
    char *text = read_all(argv[0], &len);
    if (!text) {
        fprintf(stderr, "attnbwd lua: cannot read %s\n", argv[0]);
        return CLI_FAIL;
    }
    attnbwd_ctx *ctx = NULL;
    int rc = cli_open(common, &ctx);
    if (rc == CLI_OK) {
        lua_State *L = lua_api_open(ctx);
        char chunk[1024];
        snprintf(chunk, sizeof chunk, "@%s", argv[0]);
        rc = L ? lua_api_run(L, chunk, text, len, argc - 1, argv + 1) : CLI_FAIL;
        if (L) lua_close(L);
        attnbwd_close(ctx);
    }
    free(text);
    return rc;
}
