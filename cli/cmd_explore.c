/* `attnbwd explore`: lua/explore.lua on the Lua API (check/lua_api.c). */
#include <stdio.h>

#include <lua.h>

#include "cli.h"
#include "lua_api.h"

void cmd_explore_usage(FILE *out)
{
    fprintf(out, "usage: attnbwd explore [OPTIONS] SUITE...\n\n"
                 "For every case of each SUITE, builds each candidate tile choice of the\n"
                 "problem's Lua script, rejects those that fail the fp64 check, times the rest\n"
                 "(cold L2, median of --iters), then combines the candidates more than 1%%\n"
                 "faster than the heuristic's, fastest first, each laid over the best so far\n"
                 "and kept where that is 1%% faster again, and reports the fastest against the\n"
                 "heuristic's.\n\n"
                 "options:\n"
                 "  --iters N   timed launches per candidate (default 20)\n"
                 "  --combine N at most N combinations per case (default 4; 0: none)\n"
                 "  --seed N    seed of the check's random inputs (default 1)\n"
                 "  --out FILE  write the winners as a Lua tuning table for this GPU\n\n"
                 "example:\n"
                 "  attnbwd explore --out tuning.lua sol066_workload\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

int cmd_explore(const cli_common *common, int argc, char **argv)
{
    attnbwd_ctx *ctx = NULL;
    int rc = cli_open(common, &ctx);
    if (rc != CLI_OK) return rc;
    lua_State *L = lua_api_open(ctx);
    if (!L) {
        attnbwd_close(ctx);
        fprintf(stderr, "attnbwd explore: out of memory\n");
        return CLI_FAIL;
    }
    if (lua_api_main(L, "explore", argc, argv, &rc) != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd explore: %s\n", attnbwd_last_error());
        rc = CLI_FAIL;
    }
    lua_close(L);
    attnbwd_close(ctx);
    return rc;
}
