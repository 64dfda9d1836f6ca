/* GPU models: the short names prewarm takes (--gpu h100), the arch each
 * model's device reports, and the shipped tuning table a model gets. A table
 * applies to the models of its family (H100, H200) with the SM count it was
 * measured with; the others get the heuristic's tiles. */
#ifndef ATTNBWD_GPU_MODEL_H
#define ATTNBWD_GPU_MODEL_H

typedef struct gpu_choice {
    char model[128];   /* the name the tables are matched by ("" for none) */
    int sm_count;      /* the device's, a known model's, or the family's flagship's (sm_guessed) */
    int sm_guessed;    /* 1: the name gave no SM count, so the flagship's is assumed */
    char arch[16];     /* what the model's device reports ("sm_90"), "" when unknown */
    const char *table; /* the shipped table's Lua module ("tuning_h100"), NULL: the heuristic's tiles */
    int unknown;       /* 1: a name of no family we know (warned about where the name was given) */
    char note[320];    /* which table and why, in words, for `attnbwd info` and the log */
} gpu_choice;

/* The model of a name: an alias ("h100", "h200-nvl"; any case), a device
 * name as the driver reports it ("NVIDIA H100 80GB HBM3"), or "" for none.
 * device_sm_count: the SMs the device reports when the name is the device's,
 * else 0 (then a known model's count is used). */
void gpu_model_choose(const char *name, int device_sm_count, gpu_choice *out);

#endif
