/* GPU models and the shipped tuning table each gets (see gpu_model.h). The
 * tables' tiles are sized for their GPU's waves of blocks, so a table goes to
 * the models of its family with the SM count it was measured with, whatever
 * else the name says (memory size, form factor); NVL parts of the same SM
 * count share it, PCIe parts with fewer SMs get the heuristic. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gpu_model.h"

typedef struct known_model {
    const char *alias;   /* prewarm's --gpu name */
    const char *name;    /* as the driver reports it */
    const char *family;  /* a word of the name */
    const char *variant; /* a word that tells this model from its family's others, NULL: the flagship (SXM) */
    int sm_count;
} known_model;

static const known_model known[] = {
    {"h100", "NVIDIA H100 80GB HBM3", "H100", NULL, 132},
    {"h100-pcie", "NVIDIA H100 PCIe", "H100", "PCIe", 114},
    {"h100-nvl", "NVIDIA H100 NVL", "H100", "NVL", 132},
    {"h200", "NVIDIA H200", "H200", NULL, 132},
    {"h200-nvl", "NVIDIA H200 NVL", "H200", "NVL", 132},
};
#define N_KNOWN (sizeof known / sizeof known[0])

typedef struct shipped_table {
    const char *family;
    int sm_count;
    const char *module;      /* lua/<module>.lua */
    const char *measured_on; /* the device name it was measured on */
    const char *in_words;
} shipped_table;

static const shipped_table tables[] = {
    {"H100", 132, "tuning_h100", "NVIDIA H100 80GB HBM3", "the H100 SXM"},
    {"H200", 132, "tuning_h200", "NVIDIA H200", "the H200 SXM"},
};
#define N_TABLES (sizeof tables / sizeof tables[0])

static int same_ignoring_case(const char *a, const char *b) {
    for (; *a && *b; ++a, ++b)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

/* 1 when `word` is one of the name's words (split at spaces and dashes), in any case. */
static int has_word(const char *name, const char *word) {
    size_t n = strlen(word);
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, " -_");
        if (len == n) {
            size_t i = 0;
            while (i < n && tolower((unsigned char)p[i]) == tolower((unsigned char)word[i])) ++i;
            if (i == n) return 1;
        }
        p += len;
        while (*p == ' ' || *p == '-' || *p == '_') ++p;
    }
    return 0;
}

/* The known model of a name: its alias or driver name exactly, else the one
 * of its family whose variant word it carries, else the family's flagship
 * (*guessed = 1). NULL for a name of no family we know. */
static const known_model *model_of(const char *name, int *guessed) {
    *guessed = 0;
    for (size_t i = 0; i < N_KNOWN; ++i)
        if (same_ignoring_case(name, known[i].alias) || same_ignoring_case(name, known[i].name)) return &known[i];
    const known_model *flagship = NULL;
    for (size_t i = 0; i < N_KNOWN; ++i) {
        if (!has_word(name, known[i].family)) continue;
        if (known[i].variant && has_word(name, known[i].variant)) return &known[i];
        if (!known[i].variant && !flagship) flagship = &known[i];
    }
    *guessed = flagship != NULL;
    return flagship;
}

void gpu_model_choose(const char *name, int device_sm_count, gpu_choice *out) {
    memset(out, 0, sizeof *out);
    if (!name || !*name) {
        snprintf(out->note, sizeof out->note,
                 "none: the heuristic's tiles (no GPU model: no device, --gpu or ATTNBWD_GPU_MODEL)");
        return;
    }
    int guessed = 0;
    const known_model *m = model_of(name, &guessed);
    /* An alias stands for its model's driver name, which is what the device reports. */
    snprintf(out->model, sizeof out->model, "%s", m && same_ignoring_case(name, m->alias) ? m->name : name);
    if (!m) {
        out->unknown = 1;
        out->sm_count = device_sm_count;
        snprintf(out->note, sizeof out->note,
                 "none: the heuristic's tiles (\"%s\" is no model of a shipped table: H100 or H200 with 132 SMs)",
                 name);
        return;
    }
    snprintf(out->arch, sizeof out->arch, "sm_90"); /* every known model is a Hopper */
    out->sm_count = device_sm_count > 0 ? device_sm_count : m->sm_count;
    out->sm_guessed = device_sm_count <= 0 && guessed;
    const char *assumed = out->sm_guessed ? "; the name does not say its SMs, so the flagship's are assumed" : "";
    for (size_t i = 0; i < N_TABLES; ++i) {
        const shipped_table *t = &tables[i];
        if (strcmp(t->family, m->family) != 0) continue;
        if (t->sm_count != out->sm_count) {
            snprintf(out->note, sizeof out->note,
                     "none: the heuristic's tiles (lua/%s.lua is measured on %s with %d SMs; this %s has %d)",
                     t->module, t->in_words, t->sm_count, m->family, out->sm_count);
            return;
        }
        out->table = t->module;
        if (same_ignoring_case(out->model, t->measured_on))
            snprintf(out->note, sizeof out->note, "lua/%s.lua, measured on this model (%s, %d SMs)", t->module,
                     t->in_words, t->sm_count);
        else
            snprintf(out->note, sizeof out->note,
                     "lua/%s.lua, measured on %s: the same family and SM count (%d)%s", t->module, t->in_words,
                     t->sm_count, assumed);
        return;
    }
}
