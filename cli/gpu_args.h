/* The --gpu option of prewarm and info: GPU models, repeatable and
 * comma-separated ("--gpu h100,h200 --gpu 'NVIDIA H100 NVL'"), each a
 * short name or a name as the driver reports it (options.gpu_model). */
#ifndef ATTNBWD_CLI_GPU_ARGS_H
#define ATTNBWD_CLI_GPU_ARGS_H

#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CLI_MAX_GPUS 16

#define CLI_GPU_HELP                                                                          \
    "  --gpu MODEL[,MODEL...]  the GPU the kernels are for (repeatable): h100 (SXM),\n"        \
    "                h100-nvl, h100-pcie, h200, h200-nvl, or a name as its driver\n"          \
    "                reports it (\"NVIDIA H100 80GB HBM3\"). The model brings its arch\n"     \
    "                (sm_90) and its tuning table: lua/tuning_h100.lua for the H100\n"        \
    "                SXM and NVL (132 SMs), lua/tuning_h200.lua for the H200 and H200\n"      \
    "                NVL (132 SMs), none (the heuristic's tiles) for the H100 PCIe\n"         \
    "                (114 SMs) or a model of another family. Default: the device's,\n"        \
    "                or $ATTNBWD_GPU_MODEL\n"

typedef struct cli_gpus {
    int n;
    char *names[CLI_MAX_GPUS]; /* malloc'd */
} cli_gpus;

/* Adds the models of one --gpu value; CLI_USAGE (after saying why) for an
 * empty name or too many. */
static inline int cli_gpus_add(cli_gpus *g, const char *cmd, const char *value)
{
    for (const char *p = value;; ) {
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ')
            len--;
        if (len == 0)
            return cli_usage_error(cmd, "--gpu '%s': an empty model name", value);
        if (g->n == CLI_MAX_GPUS)
            return cli_usage_error(cmd, "--gpu: at most %d models", CLI_MAX_GPUS);
        char *name = malloc(len + 1);
        if (!name)
            return cli_usage_error(cmd, "out of memory");
        memcpy(name, p, len);
        name[len] = '\0';
        g->names[g->n++] = name;
        p += strcspn(p, ",");
        if (*p != ',')
            return CLI_OK;
        for (++p; *p == ' '; ++p)
            ;
    }
}

static inline void cli_gpus_free(cli_gpus *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->names[i]);
    g->n = 0;
}

#endif
