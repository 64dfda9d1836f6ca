/* `attnbwd gen`: the tile choices (as comment lines) and the CUDA source the
 * library writes for one shape, without compiling it (attnbwd_generate). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cmd_gen_usage(FILE *out)
{
    fprintf(out,
            "usage: attnbwd gen [OPTIONS] B,H,T[,p]\n"
            "       attnbwd gen [OPTIONS] --batch B --heads H --seq-len T [--p-dropout P]\n\n"
            "Prints the tile choices as // comment lines, then the CUDA source of the kernel\n"
            "for one shape. Nothing is compiled; with --arch no GPU is needed.\n\n"
            "options:\n"
            "  --problem NAME     softmax_dropout_bwd (default) or edit_attention_bwd\n"
            "  --batch B          batch size (>= 1)\n"
            "  --heads H          number of heads (>= 1; edit_attention_bwd: 0 or 16)\n"
            "  --seq-len T        sequence length (>= 1)\n"
            "  --p-dropout P      0 <= P < 1; P > 0 selects the kernel that applies dropout\n"
            "  --tiles-only       print only the tile choices (\"key=value ...\")\n\n"
            "example:\n"
            "  attnbwd gen 2,16,541,0.1 --arch sm_90\n\n");
    fprintf(out, "%s", CLI_COMMON_HELP);
}

typedef struct gen_args {
    const char *problem;
    const char *compact;                   /* the B,H,T[,p] positional */
    const char *batch, *heads, *seq_len, *p; /* the separate options */
    int tiles_only;
} gen_args;

/* Stores the value of one of the value options; 0: not one of them. */
static int take_value_opt(gen_args *g, int argc, char **argv, int *i, int *rc)
{
    static const char *const names[] = {"--problem", "--batch", "--heads", "--seq-len", "--p-dropout"};
    const char **slots[] = {&g->problem, &g->batch, &g->heads, &g->seq_len, &g->p};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const char *val = NULL;
        int r = cli_opt_value("gen", argc, argv, i, names[k], &val);
        if (r < 0)
            *rc = CLI_USAGE;
        if (r > 0)
            *slots[k] = val;
        if (r != 0)
            return 1;
    }
    return 0;
}

static int parse_gen_args(gen_args *g, int argc, char **argv)
{
    int dashdash = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        int rc = CLI_OK;
        if (!dashdash && strcmp(arg, "--") == 0) {
            dashdash = 1;
        } else if (!dashdash && strcmp(arg, "--tiles-only") == 0) {
            g->tiles_only = 1;
        } else if (!dashdash && take_value_opt(g, argc, argv, &i, &rc)) {
            if (rc != CLI_OK)
                return rc;
        } else if (!dashdash && arg[0] == '-' && arg[1] != '\0' && !(arg[1] >= '0' && arg[1] <= '9')) {
            return cli_usage_error("gen", "unknown option '%s'", arg); /* "-1,2,3": a bad shape */
        } else if (g->compact) {
            return cli_usage_error("gen", "unexpected argument '%s' (one shape at a time)", arg);
        } else {
            g->compact = arg;
        }
    }
    return CLI_OK;
}

/* Fills the shape from the separate options. */
static int shape_from_options(const gen_args *g, int64_t heads_min, cli_shape *sh, char *err, size_t len)
{
    memset(sh, 0, sizeof *sh);
    if (!g->batch || !g->seq_len || (!g->heads && heads_min > 0)) {
        snprintf(err, len, "give the shape as B,H,T[,p] or with --batch, --heads and --seq-len");
        return -1;
    }
    if (cli_parse_i64("--batch", g->batch, 1, CLI_DIM_MAX, &sh->batch, err, len) != 0 ||
        (g->heads && cli_parse_i64("--heads", g->heads, heads_min, CLI_DIM_MAX, &sh->heads, err, len) != 0) ||
        cli_parse_i64("--seq-len", g->seq_len, 1, CLI_DIM_MAX, &sh->seq_len, err, len) != 0)
        return -1;
    if (g->p) {
        if (cli_parse_double("--p-dropout", g->p, 0.0, 1.0, 1, &sh->p_dropout, err, len) != 0)
            return -1;
        sh->has_p = 1;
    }
    return 0;
}

/* Turns the parsed arguments into a library shape; CLI_USAGE on bad input. */
static int build_shape(const gen_args *g, attnbwd_shape *shape, cli_shape *sh)
{
    char err[256];
    attnbwd_problem prob = ATTNBWD_SOFTMAX_DROPOUT_BWD;
    if (g->problem && !(prob = cli_parse_problem(g->problem))) {
        char names[256];
        check_problem_names(names, sizeof names);
        return cli_usage_error("gen", "--problem: unknown problem '%s' (%s)", g->problem, names);
    }
    int64_t heads_min = prob == ATTNBWD_SOFTMAX_DROPOUT_BWD ? 1 : 0;
    int separate = g->batch || g->heads || g->seq_len || g->p;
    if (g->compact && separate)
        return cli_usage_error("gen", "give the shape either as B,H,T[,p] or with --batch/--heads/"
                                      "--seq-len/--p-dropout, not both");
    if (g->compact ? cli_parse_shape(g->compact, heads_min, sh, err, sizeof err) != 0
                   : shape_from_options(g, heads_min, sh, err, sizeof err) != 0)
        return cli_usage_error("gen", "bad shape: %s", err);
    memset(shape, 0, sizeof *shape);
    shape->problem = prob;
    shape->batch = sh->batch;
    shape->heads = sh->heads;
    shape->seq_len = sh->seq_len;
    shape->dropout = sh->p_dropout > 0.0;
    return CLI_OK;
}

/* Prints text with every line prefixed by prefix. */
static void print_prefixed(const char *prefix, const char *text)
{
    while (*text) {
        size_t n = strcspn(text, "\n");
        printf("%s%.*s\n", prefix, (int)n, text);
        text += n + (text[n] == '\n');
    }
}

static void print_header(attnbwd_ctx *ctx, const attnbwd_shape *shape, const cli_shape *sh)
{
    attnbwd_ctx_info in;
    memset(&in, 0, sizeof in);
    const char *arch = attnbwd_ctx_get_info(ctx, &in) == ATTNBWD_OK && in.arch ? in.arch : "?";
    printf("// attnbwd %s: %s B=%" PRId64 " H=%" PRId64 " T=%" PRId64 " p_dropout=%g, for %s\n",
           ATTNBWD_VERSION_STRING, cli_problem_name(shape->problem), shape->batch, shape->heads,
           shape->seq_len, sh->p_dropout, arch);
}

static int generate(attnbwd_ctx *ctx, const attnbwd_shape *shape, const cli_shape *sh, int tiles_only)
{
    char *source = NULL, *tiles = NULL;
    attnbwd_status s = attnbwd_generate(ctx, shape, &source, &tiles);
    if (s != ATTNBWD_OK)
        return cli_lib_error(s);
    if (tiles_only) {
        printf("%s\n", tiles ? tiles : "");
    } else {
        print_header(ctx, shape, sh);
        print_prefixed("// tiles: ", tiles ? tiles : "");
        printf("%s", source ? source : "");
        if (source && source[0] && source[strlen(source) - 1] != '\n')
            printf("\n");
    }
    attnbwd_free(source);
    attnbwd_free(tiles);
    return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
}

int cmd_gen(const cli_common *common, int argc, char **argv)
{
    gen_args g;
    memset(&g, 0, sizeof g);
    int rc = parse_gen_args(&g, argc, argv);
    if (rc != CLI_OK)
        return rc;
    attnbwd_shape shape;
    cli_shape sh;
    if ((rc = build_shape(&g, &shape, &sh)) != CLI_OK)
        return rc;
    attnbwd_ctx *ctx = NULL;
    if ((rc = cli_open(common, &ctx)) != CLI_OK)
        return rc;
    rc = generate(ctx, &shape, &sh, g.tiles_only);
    attnbwd_close(ctx);
    return rc;
}
