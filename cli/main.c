/* attnbwd: the command-line tool. main() takes the common options out of the
 * arguments (wherever they are), finds the subcommand and dispatches to it;
 * each subcommand parses the rest in its own cmd_*.c file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnbwd.h"
#include "cli.h"

typedef struct command {
    const char *name;
    const char *summary;
    cli_cmd_fn run;
    cli_usage_fn usage;
} command;

static const command commands[] = {
    {"info", "versions, driver, device, target arch and the disk cache", cmd_info, cmd_info_usage},
    {"gen", "print the tile choices and the CUDA source for one shape", cmd_gen, cmd_gen_usage},
    {"prewarm", "compile, or find in the disk cache, the kernels of suites", cmd_prewarm,
     cmd_prewarm_usage},
    {"check", "run suites on the GPU against the fp64 reference (and time them)", cmd_check,
     cmd_check_usage},
    {"explore", "try every candidate tile choice of suites on the GPU; report the fastest", cmd_explore,
     cmd_explore_usage},
    {"lua", "run an exploration script with the attnbwd Lua API", cmd_lua, cmd_lua_usage},
    {"cache", "the disk cache folder: stats, list, verify, prune, export, import, clear", cmd_cache,
     cmd_cache_usage},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: attnbwd [OPTIONS] COMMAND [ARGS...]\n\n"
                 "Writes, compiles (NVRTC) and caches CUDA kernels for attention backward\n"
                 "passes, one kernel per shape.\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-9s %s\n\n", "help", "this text, or 'attnbwd help COMMAND'");
    fprintf(out, "%s", CLI_COMMON_HELP);
    fprintf(out, "  --version        print the version\n\n"
                 "examples:\n"
                 "  attnbwd info\n"
                 "  attnbwd gen 2,16,541,0.1 --arch sm_90\n"
                 "  attnbwd prewarm sol066_workload\n"
                 "  attnbwd check --time sol066_workload\n");
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "sm_90", "sm_100a", "sm_120f": sm_ then 2 or 3 digits and an optional letter. */
static int valid_arch(const char *a)
{
    if (strncmp(a, "sm_", 3) != 0)
        return 0;
    size_t d = strspn(a + 3, "0123456789");
    const char *rest = a + 3 + d;
    if (d < 2 || d > 3)
        return 0;
    return rest[0] == '\0' || (rest[0] >= 'a' && rest[0] <= 'z' && rest[1] == '\0');
}

/* -v, -vv, -vvv: the number of v's, or 0 when arg is not such a flag. */
static int count_v(const char *arg)
{
    if (arg[0] != '-' || arg[1] != 'v')
        return 0;
    size_t n = strspn(arg + 1, "v");
    return arg[1 + n] == '\0' ? (int)n : 0;
}

typedef struct parsed {
    cli_common common;
    const char *command; /* NULL when none was given */
    int help, version;
    int argc;            /* the subcommand's own arguments */
    char **argv;
} parsed;

/* Takes argv[*i] when it is a common option. Returns 1 when taken, 0 when
 * not a common option, -1 on a usage error (message printed). */
static int take_common(parsed *p, int argc, char **argv, int *i)
{
    const char *arg = argv[*i], *val = NULL;
    const char *who = p->command ? p->command : "";
    int r, v;
    if ((r = cli_opt_value(who, argc, argv, i, "--arch", &val)) != 0) {
        if (r > 0 && !valid_arch(val)) {
            cli_usage_error(who, "--arch: '%s' is not an arch like sm_90 or sm_100a", val);
            return -1;
        }
        p->common.arch = val;
        return r;
    }
    if ((r = cli_opt_value(who, argc, argv, i, "--cache-dir", &val)) != 0) {
        p->common.cache_dir = val;
        return r;
    }
    if (strcmp(arg, "--no-cache") == 0)
        p->common.no_cache = 1;
    else if (strcmp(arg, "--verbose") == 0)
        p->common.verbose++;
    else if ((v = count_v(arg)) > 0)
        p->common.verbose += v;
    else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0)
        p->common.quiet = 1;
    else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
        p->help = 1;
    else if (strcmp(arg, "--version") == 0)
        p->version = 1;
    else
        return 0;
    return 1;
}

/* Splits argv into the common options, the command and its arguments. */
static int parse_args(parsed *p, int argc, char **argv)
{
    int dashdash = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!dashdash && strcmp(arg, "--") == 0) {
            dashdash = 1;
            if (p->command)
                p->argv[p->argc++] = argv[i];
            continue;
        }
        if (!dashdash) {
            int r = take_common(p, argc, argv, &i);
            if (r < 0)
                return CLI_USAGE;
            if (r > 0)
                continue;
        }
        if (p->command) {
            p->argv[p->argc++] = argv[i];
        } else if (arg[0] == '-' && arg[1] != '\0' && !dashdash) {
            fprintf(stderr, "attnbwd: unknown option '%s' (see 'attnbwd --help')\n", arg);
            return CLI_USAGE;
        } else {
            p->command = arg;
        }
    }
    p->argv[p->argc] = NULL;
    return CLI_OK;
}

/* `attnbwd help [COMMAND]`. */
static int run_help(const parsed *p)
{
    if (p->argc == 0) {
        usage(stdout);
        return CLI_OK;
    }
    const command *c = find_command(p->argv[0]);
    if (!c) {
        fprintf(stderr, "attnbwd help: unknown command '%s' (commands: info, gen, prewarm, check, explore, lua, cache)\n",
                p->argv[0]);
        return CLI_USAGE;
    }
    c->usage(stdout);
    return CLI_OK;
}

static int dispatch(const parsed *p)
{
    if (p->version && !p->help) {
        printf("attnbwd %s\n", ATTNBWD_VERSION_STRING);
        return CLI_OK;
    }
    if (!p->command) {
        usage(p->help ? stdout : stderr);
        return p->help ? CLI_OK : CLI_USAGE;
    }
    if (strcmp(p->command, "help") == 0)
        return run_help(p);
    const command *c = find_command(p->command);
    if (!c) {
        fprintf(stderr, "attnbwd: unknown command '%s' (see 'attnbwd --help')\n", p->command);
        return CLI_USAGE;
    }
    if (p->help) {
        c->usage(stdout);
        return CLI_OK;
    }
    return c->run(&p->common, p->argc, p->argv);
}

int main(int argc, char **argv)
{
    parsed p;
    memset(&p, 0, sizeof p);
    p.argv = calloc((size_t)argc + 1, sizeof *p.argv);
    if (!p.argv) {
        fprintf(stderr, "attnbwd: out of memory\n");
        return CLI_FAIL;
    }
    int rc = parse_args(&p, argc, argv);
    if (rc == CLI_OK)
        rc = dispatch(&p);
    free(p.argv);
    return rc;
}
