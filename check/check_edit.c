/* The GPU check and timing harness of problem 2, the edit-attention backward
 * (spec: docs/spec/edit_attention_bwd.md), over the CUDA runtime API. Reached
 * through check_case / check_time_case (check.c) or directly (check_edit.h).
 * It reads a kernel's plan (its launches and lanes, its graph's replays)
 * through runtime/internal.h: it reruns the plan on one stream and times each
 * kernel alone, which the public API does not offer.
 *
 * check: inputs drawn on the host by the reference's seeded drawer
 * (ref_edit_draw_inputs), the forward tensors made from them in fp32 by the
 * fp64 forward (ref_edit_forward), every input of attnbwd_edit_attention_args
 * uploaded, the 8 outputs and the workspace poisoned with 0xFF bytes (NaN in
 * fp32), one launch on a created stream, and while the GPU runs, the fp64
 * reference backward (ref_edit_backward) on the CPU. Each output is then
 * compared with its reference on its own under the public acceptance rule:
 * |out - ref| <= atol + rtol*|ref| for >= match_ratio of its elements, no
 * NaN/Inf; grad_edit_region_bias must also be exactly 0 outside [:, :T, :T].
 * The case passes only when all 8 outputs do. Host memory: the inputs, the
 * forward tensors and the reference (for B=32, T=773 some 6.5 GB).
 *
 * time: the same inputs (no reference), cold L2 before each launch (a 2x-L2
 * buffer zeroed), 10 warm-ups, the median of `iters` launches, device time
 * from CUDA events around the one attnbwd_edit_attention_bwd call.
 *
 * Prints nothing; everything comes back in check_result (and the per-output
 * figures of check_edit_case_ex) or the error message. Everything allocated is
 * freed on every path. */
#include "check_edit.h"
#include "internal.h"
#include "prng.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "check_cuda.h"

#include "error.h"
#include "reference_edit.h"

#define NOUT CHECK_EDIT_OUTPUTS
#define BENCH_P 0.1 /* the public benchmark's dropout_p: what ref_edit_draw_inputs draws */

typedef attnbwd_edit_attention_args edit_args;

/* ---- the tensors of attnbwd_edit_attention_args, by size class ---- */

enum { SZ_BTH, SZ_BT, SZ_QKVW, SZ_QKV, SZ_HH, SZ_HID, SZ_POS, SZ_HEADS, SZ_BHTT };

static size_t sz_elems(int k, int64_t B, int64_t T) {
    const size_t BT = (size_t)B * (size_t)T, P = REF_EDIT_MAX_POS;
    switch (k) {
    case SZ_BTH: return BT * REF_EDIT_HIDDEN;
    case SZ_BT: return BT;
    case SZ_QKVW: return (size_t)REF_EDIT_QKV * REF_EDIT_HIDDEN;
    case SZ_QKV: return REF_EDIT_QKV;
    case SZ_HH: return (size_t)REF_EDIT_HIDDEN * REF_EDIT_HIDDEN;
    case SZ_HID: return REF_EDIT_HIDDEN;
    case SZ_POS: return (size_t)REF_EDIT_HEADS * P * P;
    case SZ_HEADS: return REF_EDIT_HEADS;
    default: return BT * REF_EDIT_HEADS * (size_t)T; /* SZ_BHTT */
    }
}

typedef struct tensor_desc {
    size_t off; /* offset of its pointer in edit_args */
    const char *name;
    int size;
} tensor_desc;

#define T_(field, size) {offsetof(edit_args, field), #field, size}
static const tensor_desc in_desc[] = {
    T_(grad_output, SZ_BTH),       T_(hidden_states, SZ_BTH),          T_(edit_region_mask, SZ_BT),
    T_(qkv_weight, SZ_QKVW),       T_(qkv_bias, SZ_QKV),               T_(out_weight, SZ_HH),
    T_(out_bias, SZ_HID),          T_(edit_region_bias, SZ_POS),       T_(within_edit_bias, SZ_HEADS),
    T_(cross_edit_bias, SZ_HEADS), T_(attention_mask, SZ_BT),          T_(query, SZ_BTH),
    T_(key, SZ_BTH),               T_(value, SZ_BTH),                  T_(attention_scores, SZ_BHTT),
    T_(attention_probs, SZ_BHTT),  T_(attention_probs_dropped, SZ_BHTT), T_(attention_output, SZ_BTH),
    T_(dropout_mask, SZ_BHTT),
};
#define NIN (sizeof in_desc / sizeof in_desc[0])

/* In the spec's output order, which is also ref_edit_grads' field order. */
static const tensor_desc out_desc[NOUT] = {
    T_(grad_hidden_states, SZ_BTH),      T_(grad_qkv_weight, SZ_QKVW),  T_(grad_qkv_bias, SZ_QKV),
    T_(grad_out_weight, SZ_HH),          T_(grad_out_bias, SZ_HID),     T_(grad_edit_region_bias, SZ_POS),
    T_(grad_within_edit_bias, SZ_HEADS), T_(grad_cross_edit_bias, SZ_HEADS),
};
#undef T_
enum { OUT_EDIT_REGION_BIAS = 5 };

/* Short labels for the per-output relative errors in a 256-byte message. */
static const char *const out_short[NOUT] = {"hs", "qw", "qb", "ow", "ob", "rb", "wb", "cb"};

static const float **in_slot(edit_args *a, size_t off) { return (const float **)(void *)((char *)a + off); }
static float **out_slot(edit_args *a, size_t off) { return (float **)(void *)((char *)a + off); }

static double **grad_slot(ref_edit_grads *g, int i) {
    double **s[NOUT] = {&g->grad_hidden_states, &g->grad_qkv_weight, &g->grad_qkv_bias,
                        &g->grad_out_weight,    &g->grad_out_bias,   &g->grad_edit_region_bias,
                        &g->grad_within_edit_bias, &g->grad_cross_edit_bias};
    return s[i];
}

/* ---- the case ---- */

static attnbwd_status validate(attnbwd_ctx *ctx, const suite_case *c) {
    if (!ctx || !c)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check: null ctx or case");
    const attnbwd_shape *s = &c->shape;
    if (s->problem != ATTNBWD_EDIT_ATTENTION_BWD)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: not an edit_attention_bwd case (problem %d)", c->name,
                       (int)s->problem);
    if (s->batch <= 0 || s->seq_len <= 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: sizes must be positive", c->name);
    if (s->heads != 0 && s->heads != REF_EDIT_HEADS)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: heads = %lld, edit_attention_bwd has 16", c->name,
                       (long long)s->heads);
    if (s->precision < ATTNBWD_PRECISION_TF32 || s->precision > ATTNBWD_PRECISION_FP16)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: precision %d is not an attnbwd_precision", c->name,
                       s->precision);
    if (!(c->p_dropout >= 0.0 && c->p_dropout < 1.0) || s->dropout != (c->p_dropout > 0.0))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: dropout_p %g does not fit shape.dropout %d", c->name,
                       c->p_dropout, s->dropout);
    /* The reference's own bounds (B*T <= 2^26): refuse here rather than after the compile. */
    if (s->seq_len > (1 << 20) || s->batch > (1 << 20) || s->batch * s->seq_len > (1 << 26))
        return err_set(ATTNBWD_ERR_UNSUPPORTED, "%s: B*T = %lld is past what the CPU reference can hold", c->name,
                       (long long)(s->batch * s->seq_len));
    return ATTNBWD_OK;
}

static attnbwd_status get_kernel(attnbwd_ctx *ctx, const suite_case *c, attnbwd_kernel **k) {
    attnbwd_status st = validate(ctx, c);
    if (st != ATTNBWD_OK)
        return st;
    st = c->tiles ? attnbwd_get_kernel_tiles(ctx, &c->shape, c->tiles, k) : attnbwd_get_kernel(ctx, &c->shape, k);
    if (st != ATTNBWD_OK)
        return err_wrap(st, "%s", c->name);
    return ATTNBWD_OK;
}

/* ---- host inputs: drawn, then the forward in fp32 ---- */

/* dropout_mask = (rand > p) for a p the drawer does not know (it draws 0.1 or 0). */
static void redraw_dropout_mask(float *dm, size_t n, uint64_t seed, double p) {
    uint64_t x = seed ^ 0x6a09e667f3bcc909ull;
    for (size_t i = 0; i < n; i++)
        dm[i] = (double)(prng_splitmix64(&x) >> 11) * 0x1.0p-53 > p ? 1.0f : 0.0f;
}

static attnbwd_status draw_host(const suite_case *c, uint64_t seed, unsigned flags, ref_edit_inputs *in,
                                ref_edit_fwd32 *f) {
    const int64_t B = c->shape.batch, T = c->shape.seq_len;
    const double p = c->p_dropout;
    memset(in, 0, sizeof *in);
    memset(f, 0, sizeof *f);
    attnbwd_status st = ref_edit_inputs_alloc(B, T, in);
    if (st == ATTNBWD_OK)
        st = ref_edit_fwd32_alloc(B, T, f);
    if (st != ATTNBWD_OK) {
        st = err_set(st, "%s: cannot allocate the host inputs and forward tensors (%s, %.2f GB)", c->name,
                     attnbwd_status_name(st),
                     (double)(4 * sz_elems(SZ_BHTT, B, T) + 6 * sz_elems(SZ_BTH, B, T)) * 4.0 / 1e9);
        goto fail;
    }
    unsigned rf = 0;
    if (flags & CHECK_EDIT_MASK_ZEROS)
        rf |= REF_EDIT_DRAW_MASK_ZEROS;
    if (flags & CHECK_EDIT_BIASES)
        rf |= REF_EDIT_DRAW_BIASES;
    if (p == 0.0)
        rf |= REF_EDIT_DRAW_P0;
    st = ref_edit_draw_inputs(B, T, seed, rf, in);
    if (st != ATTNBWD_OK) {
        st = err_set(st, "%s: ref_edit_draw_inputs failed (%s)", c->name, attnbwd_status_name(st));
        goto fail;
    }
    if (flags & CHECK_EDIT_LARGE)
        for (size_t i = 0, n = sz_elems(SZ_BTH, B, T); i < n; i++)
            in->grad_output[i] *= 65536.0f;
    if (p > 0.0 && fabs(p - BENCH_P) > 1e-12) {
        redraw_dropout_mask(in->dropout_mask, sz_elems(SZ_BHTT, B, T), seed, p);
        in->dropout_p = (float)p;
    }
    st = ref_edit_forward(B, T, in, f, NULL);
    if (st != ATTNBWD_OK) {
        st = err_set(st, "%s: ref_edit_forward failed (%s)", c->name, attnbwd_status_name(st));
        goto fail;
    }
    return ATTNBWD_OK;
fail:
    ref_edit_fwd32_free(f);
    ref_edit_inputs_free(in);
    return st;
}

/* ---- device tensors ---- */

typedef struct edit_dev {
    float *in[NIN], *out[NOUT];
    void *ws;
    size_t ws_bytes;
} edit_dev;

static void dev_free(edit_dev *d) {
    for (size_t i = 0; i < NIN; i++)
        cudaFree(d->in[i]);
    for (int i = 0; i < NOUT; i++)
        cudaFree(d->out[i]);
    cudaFree(d->ws);
    memset(d, 0, sizeof *d);
}

/* Allocates every input (uploaded from the host args ha), the 8 outputs and
 * the workspace, both poisoned with 0xFF bytes, and fills the device args da.
 * Returns after the device is idle: the pageable copies are complete. */
static attnbwd_status upload(const suite_case *c, const edit_args *ha, size_t ws_bytes, edit_dev *d,
                             edit_args *da) {
    attnbwd_status st = ATTNBWD_OK;
    const int64_t B = c->shape.batch, T = c->shape.seq_len;
    edit_args h = *ha;
    size_t total = ws_bytes;
    char what[200];

    memset(d, 0, sizeof *d);
    memset(da, 0, sizeof *da);
    for (size_t i = 0; i < NIN; i++)
        total += sz_elems(in_desc[i].size, B, T) * 4;
    for (int i = 0; i < NOUT; i++)
        total += sz_elems(out_desc[i].size, B, T) * 4;
    for (size_t i = 0; i < NIN; i++) {
        const size_t bytes = sz_elems(in_desc[i].size, B, T) * 4;
        snprintf(what, sizeof what, "cudaMalloc of %s (%zu bytes; %.2f GB in all)", in_desc[i].name, bytes,
                 (double)total / 1e9);
        CUDA_TRY(cudaMalloc((void **)&d->in[i], bytes), what);
        snprintf(what, sizeof what, "cudaMemcpy %s", in_desc[i].name);
        CUDA_TRY(cudaMemcpy(d->in[i], *in_slot(&h, in_desc[i].off), bytes, cudaMemcpyHostToDevice), what);
        *in_slot(da, in_desc[i].off) = d->in[i];
    }
    for (int i = 0; i < NOUT; i++) {
        const size_t bytes = sz_elems(out_desc[i].size, B, T) * 4;
        snprintf(what, sizeof what, "cudaMalloc of %s (%zu bytes; %.2f GB in all)", out_desc[i].name, bytes,
                 (double)total / 1e9);
        CUDA_TRY(cudaMalloc((void **)&d->out[i], bytes), what);
        CUDA_TRY(cudaMemset(d->out[i], 0xFF, bytes), "cudaMemset (NaN poison)");
        *out_slot(da, out_desc[i].off) = d->out[i];
    }
    if (ws_bytes) {
        snprintf(what, sizeof what, "cudaMalloc of the workspace (%zu bytes)", ws_bytes);
        CUDA_TRY(cudaMalloc(&d->ws, ws_bytes), what);
        /* Poisoned too: the workspace is not promised to arrive zeroed. */
        CUDA_TRY(cudaMemset(d->ws, 0xFF, ws_bytes), "cudaMemset (workspace poison)");
        d->ws_bytes = ws_bytes;
    }
    da->scale = ha->scale;
    da->dropout_p = ha->dropout_p;
    da->workspace = d->ws;
    da->workspace_bytes = d->ws_bytes;
    /* Pageable copies may still be in flight when cudaMemcpy returns. */
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
cleanup:
    if (st != ATTNBWD_OK) {
        dev_free(d);
        memset(da, 0, sizeof *da);
    }
    return st;
}

static attnbwd_status launch(attnbwd_kernel *k, const suite_case *c, const edit_args *da, cudaStream_t s) {
    attnbwd_status st = attnbwd_edit_attention_bwd(k, da, (void *)s);
    return st == ATTNBWD_OK ? st : err_wrap(st, "%s: launch", c->name);
}

typedef struct edit_launch {
    attnbwd_kernel *k;
    const suite_case *c;
    const edit_args *da;
} edit_launch;

static attnbwd_status launch_edit(void *user, void *s) {
    const edit_launch *l = user;
    return launch(l->k, l->c, l->da, (cudaStream_t)s);
}

/* One kernel of the plan alone, for the per-kernel breakdown. */
typedef struct edit_launch_one {
    attnbwd_kernel *k;
    const edit_args *da;
    int index;
} edit_launch_one;

static attnbwd_status launch_edit_one(void *user, void *s) {
    const edit_launch_one *l = user;
    return edit_attention_launch_range(l->k, l->da, s, l->index, 1);
}

/* Poisons the outputs and the workspace again. */
static attnbwd_status repoison(const suite_case *c, const edit_dev *d) {
    attnbwd_status st = ATTNBWD_OK;
    for (int i = 0; i < NOUT; i++)
        CUDA_TRY(cudaMemset(d->out[i], 0xFF, sz_elems(out_desc[i].size, c->shape.batch, c->shape.seq_len) * 4),
                 "cudaMemset (NaN poison)");
    if (d->ws_bytes) CUDA_TRY(cudaMemset(d->ws, 0xFF, d->ws_bytes), "cudaMemset (workspace poison)");
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the poison");
cleanup:
    return st;
}

/* Whether y is x up to the order of a float sum: finite, and within 1e-5
 * of the output's largest |x|, big (a few roundings of the partial sums; a
 * race leaves the poison's NaN or a missing part, far larger). */
static int same_sum(float x, float y, float big) {
    return isfinite(x) && isfinite(y) && fabsf(x - y) <= 1e-5f * big;
}

/* The outputs against saved[], bit for bit but those in `unordered`
 * (same_sum); the first difference in why. */
static attnbwd_status same_bits(const suite_case *c, const edit_dev *d, float *const saved[], const char *what,
                                unsigned unordered, float *a, float *b, int *same, char *why, size_t cap) {
    attnbwd_status st = ATTNBWD_OK;
    for (int i = 0; i < NOUT && *same; i++) {
        const size_t n = sz_elems(out_desc[i].size, c->shape.batch, c->shape.seq_len);
        CUDA_TRY(cudaMemcpy(a, saved[i], n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy (the lanes' outputs back)");
        CUDA_TRY(cudaMemcpy(b, d->out[i], n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy (outputs back)");
        float big = 0.f;
        if (unordered >> i & 1)
            for (size_t j = 0; j < n; j++) big = fabsf(a[j]) > big ? fabsf(a[j]) : big;
        for (size_t j = 0; j < n; j++)
            if (memcmp(&a[j], &b[j], 4) && !(unordered >> i & 1 && same_sum(a[j], b[j], big))) {
                snprintf(why, cap, "%s[%zu] = %.9g on the plan's lanes, %.9g %s", out_desc[i].name, j,
                         (double)a[j], (double)b[j], what);
                *same = 0;
                break;
            }
    }
cleanup:
    return st;
}

/* The plan again against what its lanes wrote, outputs and workspace
 * poisoned before each: in plan order on one stream, captured into a CUDA
 * graph (global capture mode, as PyTorch's) and replayed, and twice from the
 * kernel's own graph of the call. Every sum but those of the plan's
 * unordered_outputs runs in a fixed order, so all must agree bit for bit
 * (those up to their order: same_sum); a difference means
 * the lanes let a kernel read what another had not finished writing, or the
 * capture lost a fork or join. *same is 0 then, with the first difference
 * in why. */
static attnbwd_status compare_reruns(attnbwd_kernel *k, const suite_case *c, const edit_dev *d,
                                         const edit_args *da, cudaStream_t s, int *same, char *why, size_t cap) {
    attnbwd_status st = ATTNBWD_OK;
    float *saved[NOUT] = {0}, *a = NULL, *b = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    size_t max_n = 0;
    const unsigned loose = k->plan.unordered_outputs; /* the plan's: sums by atomics */
    *same = 1;
    for (int i = 0; i < NOUT; i++) {
        const size_t n = sz_elems(out_desc[i].size, c->shape.batch, c->shape.seq_len);
        max_n = n > max_n ? n : max_n;
        CUDA_TRY(cudaMalloc((void **)&saved[i], n * 4), "cudaMalloc (the lanes' outputs)");
        CUDA_TRY(cudaMemcpy(saved[i], d->out[i], n * 4, cudaMemcpyDeviceToDevice), "cudaMemcpy (the lanes' outputs)");
    }
    if (!(a = malloc(max_n * 4)) || !(b = malloc(max_n * 4))) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "%s: out of host memory", c->name);
        goto cleanup;
    }
    if ((st = repoison(c, d)) != ATTNBWD_OK) goto cleanup;
    if ((st = edit_attention_launch_range(k, da, s, 0, k->plan.n_launches)) != ATTNBWD_OK) goto cleanup;
    CUDA_TRY(cudaStreamSynchronize(s), "the plan-order run (cudaStreamSynchronize)");
    if ((st = same_bits(c, d, saved, "in plan order on one stream", loose, a, b, same, why, cap)) != ATTNBWD_OK || !*same)
        goto cleanup;

    if ((st = repoison(c, d)) != ATTNBWD_OK) goto cleanup;
    CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    attnbwd_status launched = attnbwd_edit_attention_bwd(k, da, (void *)s);
    cudaError_t ended = cudaStreamEndCapture(s, &graph);
    if (launched != ATTNBWD_OK) {
        st = err_wrap(launched, "%s: launch under stream capture", c->name);
        goto cleanup;
    }
    CUDA_TRY(ended, "cudaStreamEndCapture");
    CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    CUDA_TRY(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    CUDA_TRY(cudaStreamSynchronize(s), "the graph replay (cudaStreamSynchronize)");
    if ((st = same_bits(c, d, saved, "from a captured CUDA graph", loose, a, b, same, why, cap)) != ATTNBWD_OK || !*same)
        goto cleanup;

    /* The kernel's own graph: these arguments came before, so the call now
     * replays it (captured first where it had none of them). */
    for (int round = 0; k->ctx->graphs && round < 2; round++) {
        const unsigned long replays = k->graph_replays;
        if ((st = repoison(c, d)) != ATTNBWD_OK || (st = launch(k, c, da, s)) != ATTNBWD_OK) goto cleanup;
        CUDA_TRY(cudaStreamSynchronize(s), "the kernel's graph (cudaStreamSynchronize)");
        if (k->graph_replays != replays + 1) {
            snprintf(why, cap, "a call with the same arguments again was not replayed from the kernel's CUDA graph");
            *same = 0;
            goto cleanup;
        }
        if ((st = same_bits(c, d, saved, "from the kernel's CUDA graph", loose, a, b, same, why, cap)) != ATTNBWD_OK || !*same)
            goto cleanup;
    }
cleanup:
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (int i = 0; i < NOUT; i++)
        cudaFree(saved[i]);
    free(a);
    free(b);
    return st;
}

typedef struct kernel_time {
    const char *name;
    double us;
} kernel_time;

static int by_time_desc(const void *a, const void *b) {
    const double x = ((const kernel_time *)a)->us, y = ((const kernel_time *)b)->us;
    return (x < y) - (x > y);
}

/* Each kernel timed alone, the same way as the whole (cold L2, median):
 * "name us share" lines, slowest first. Kernels that follow each other may
 * overlap a little in the whole, so the shares can add up past 100%. */
static attnbwd_status time_breakdown(attnbwd_kernel *k, const edit_args *da, int iters, double whole_us,
                                     char *out, size_t out_len) {
    const int n = k->plan.n_launches;
    kernel_time *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    attnbwd_status st = ATTNBWD_OK;
    for (int i = 0; i < n && st == ATTNBWD_OK; i++) {
        edit_launch_one l = {k, da, i};
        t[i].name = k->plan.launches[i].name;
        st = check_time_launches(launch_edit_one, &l, iters, &t[i].us);
    }
    if (st == ATTNBWD_OK) {
        qsort(t, (size_t)n, sizeof *t, by_time_desc);
        size_t used = 0;
        out[0] = 0;
        for (int i = 0; i < n && used + 1 < out_len; i++) {
            const char *short_name = strstr(t[i].name, "_p");
            short_name = short_name && strchr(short_name + 1, '_') ? strchr(short_name + 1, '_') + 1 : t[i].name;
            int w = snprintf(out + used, out_len - used, "%s%-24s %9.2f us %5.1f%%", i ? "\n" : "", short_name,
                             t[i].us, whole_us > 0 ? 100.0 * t[i].us / whole_us : 0.0);
            if (w < 0)
                break;
            used += (size_t)w;
        }
    }
    free(t);
    return st;
}

/* ---- comparison ---- */

static void compare_one(const float *o, const double *ref, size_t n, int64_t T, int is_region_bias, double atol,
                        double rtol, double match_ratio, check_edit_output *s) {
    double d2 = 0.0, r2 = 0.0;
    s->elements = s->compared = n;
    for (size_t x = 0; x < n; x++) {
        const double v = (double)o[x], diff = fabs(v - ref[x]);
        if (!(diff <= atol + rtol * fabs(ref[x]))) /* NaN fails too */
            s->failed++;
        r2 += ref[x] * ref[x];
        if (!isfinite(v)) {
            s->nonfinite++;
            continue;
        }
        d2 += diff * diff;
        if (diff > s->max_abs_err)
            s->max_abs_err = diff;
        if (ref[x] != 0.0 && diff / fabs(ref[x]) > s->max_rel_err)
            s->max_rel_err = diff / fabs(ref[x]);
    }
    if (is_region_bias) { /* [16, P, P]: exactly 0 outside [:, :T, :T] */
        const size_t P = REF_EDIT_MAX_POS;
        for (size_t x = 0; x < n; x++) {
            const size_t i = (x / P) % P, j = x % P;
            if ((i >= (size_t)T || j >= (size_t)T) && o[x] != 0.0f)
                s->nonzero_outside++;
        }
    }
    s->match_fraction = n ? (double)(n - s->failed) / (double)n : 0.0;
    if (s->nonfinite)
        s->rel_l2_err = INFINITY;
    else if (r2 > 0.0)
        s->rel_l2_err = sqrt(d2 / r2);
    else /* an all-zero reference: exact zeros score 0, anything else past every bound */
        s->rel_l2_err = d2 > 0.0 ? INFINITY : 0.0;
    s->pass = n > 0 && s->nonfinite == 0 && s->nonzero_outside == 0 && s->match_fraction >= match_ratio;
}

/* Ranks outputs: failing before passing, NaN/Inf before in-tolerance
 * failures, then the lower match fraction, then the larger relative error. */
static int worse(const check_edit_output *a, const check_edit_output *b) {
    if (a->pass != b->pass)
        return !a->pass;
    if ((a->nonfinite > 0) != (b->nonfinite > 0))
        return a->nonfinite > 0;
    if ((a->nonzero_outside > 0) != (b->nonzero_outside > 0))
        return a->nonzero_outside > 0;
    if (a->match_fraction != b->match_fraction)
        return a->match_fraction < b->match_fraction;
    return a->rel_l2_err > b->rel_l2_err;
}

/* Appends to a message buffer, keeping "..." at the end when it is cut. */
static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= cap - len && cap >= 4)
        memcpy(buf + cap - 4, "...", 4);
}

static void summarise(const suite_case *c, const check_edit_output *o, check_result *r) {
    int w = 0, nfail = 0;
    for (int i = 0; i < NOUT; i++) {
        if (worse(&o[i], &o[w]))
            w = i;
        nfail += !o[i].pass;
    }
    r->pass = nfail == 0;
    r->elements = o[w].elements;
    r->compared = o[w].compared;
    r->failed = o[w].failed;
    r->nonfinite = o[w].nonfinite;
    r->max_abs_err = o[w].max_abs_err;
    r->max_rel_err = o[w].max_rel_err;
    r->match_fraction = o[w].match_fraction;
    r->message[0] = '\0';
    if (r->pass) {
        append(r->message, sizeof r->message, "pass: all 8 outputs; worst %s %.4f%% within atol %g, max abs err %.3g",
               out_desc[w].name, 100.0 * o[w].match_fraction, c->atol, o[w].max_abs_err);
    } else {
        append(r->message, sizeof r->message, "FAIL:");
        const char *sep = " ";
        for (int i = 0; i < NOUT; i++) {
            if (o[i].pass)
                continue;
            if (o[i].nonfinite)
                append(r->message, sizeof r->message, "%s%s: %zu NaN/Inf", sep, out_desc[i].name, o[i].nonfinite);
            else if (o[i].nonzero_outside)
                append(r->message, sizeof r->message, "%s%s: %zu nonzero outside [:T,:T]", sep, out_desc[i].name,
                       o[i].nonzero_outside);
            else
                append(r->message, sizeof r->message, "%s%s: %.2f%% within atol %g", sep, out_desc[i].name,
                       100.0 * o[i].match_fraction, c->atol);
            sep = "; ";
        }
    }
    if (c->shape.precision == ATTNBWD_PRECISION_FP32) {
        append(r->message, sizeof r->message, "; rel err");
        for (int i = 0; i < NOUT; i++)
            append(r->message, sizeof r->message, " %s %.1e", out_short[i], o[i].rel_l2_err);
    }
}

/* ---- entry points ---- */

double check_edit_floor_bytes(const suite_case *c) {
    const double B = (double)c->shape.batch, T = (double)c->shape.seq_len;
    return 2.0 * B * 16.0 * T * T * 4.0 + 64.0 * 1024.0 * 1024.0;
}

double check_edit_floor_flops(const suite_case *c) {
    const double B = (double)c->shape.batch, T = (double)c->shape.seq_len;
    /* multiply-adds: the four projection products, then the four attention ones */
    return 2.0 * (B * T * 8.0 * 1048576.0 + 4.0 * B * 16.0 * T * T * 64.0);
}

attnbwd_status check_edit_case(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r) {
    return check_edit_case_ex(ctx, c, seed, 0, r, NULL);
}

attnbwd_status check_edit_case_ex(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, unsigned flags,
                                  check_result *r, check_edit_output *outputs) {
    if (!r)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_case: null result");
    memset(r, 0, sizeof *r);
    check_edit_output o[NOUT];
    memset(o, 0, sizeof o);
    for (int i = 0; i < NOUT; i++)
        o[i].name = out_desc[i].name;
    if (outputs)
        memcpy(outputs, o, sizeof o);

    ref_edit_inputs in;
    ref_edit_fwd32 f;
    edit_dev d;
    edit_args ha, da;
    ref_edit_grads g;
    cudaStream_t s = NULL;
    float *hout = NULL;
    int launched = 0, have_host = 0;
    memset(&d, 0, sizeof d);
    memset(&g, 0, sizeof g);

    attnbwd_kernel *k = NULL;
    attnbwd_status st = get_kernel(ctx, c, &k);
    if (st != ATTNBWD_OK)
        goto cleanup;
    const int64_t B = c->shape.batch, T = c->shape.seq_len;
    st = draw_host(c, seed, flags, &in, &f);
    if (st != ATTNBWD_OK)
        goto cleanup;
    have_host = 1;
    ref_edit_fill_args(&in, &f, &ha);
    st = upload(c, &ha, attnbwd_edit_attention_workspace(k), &d, &da);
    if (st != ATTNBWD_OK)
        goto cleanup;

    /* A blocking stream: ordered after the legacy stream's uploads as well. */
    CUDA_TRY(cudaStreamCreate(&s), "cudaStreamCreate");
    st = launch(k, c, &da, s);
    if (st != ATTNBWD_OK)
        goto cleanup;
    launched = 1;

    /* The reference on the CPU while the kernel runs (it only reads the host copies). */
    size_t max_n = 0;
    for (int i = 0; i < NOUT; i++) {
        const size_t n = sz_elems(out_desc[i].size, B, T);
        max_n = n > max_n ? n : max_n;
        if (!(*grad_slot(&g, i) = malloc(n * sizeof(double)))) {
            st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "%s: out of host memory for the reference", c->name);
            goto cleanup;
        }
    }
    if (!(hout = malloc(max_n * sizeof *hout))) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "%s: out of host memory for the outputs", c->name);
        goto cleanup;
    }
    st = ref_edit_backward(B, T, &ha, &g);
    if (st != ATTNBWD_OK) {
        st = err_set(st, "%s: ref_edit_backward failed (%s)", c->name, attnbwd_status_name(st));
        goto cleanup;
    }

    CUDA_TRY(cudaStreamSynchronize(s), "the kernel (cudaStreamSynchronize)");
    launched = 0;
    CUDA_TRY(cudaGetLastError(), "the kernel (cudaGetLastError)");
    for (int i = 0; i < NOUT; i++) {
        const size_t n = sz_elems(out_desc[i].size, B, T);
        char what[96];
        snprintf(what, sizeof what, "cudaMemcpy %s back", out_desc[i].name);
        CUDA_TRY(cudaMemcpy(hout, d.out[i], n * 4, cudaMemcpyDeviceToHost), what);
        compare_one(hout, *grad_slot(&g, i), n, T, i == OUT_EDIT_REGION_BIAS, c->atol, c->rtol, c->match_ratio,
                    &o[i]);
    }
    summarise(c, o, r);
    if (outputs)
        memcpy(outputs, o, sizeof o);
    if (k->plan.n_lanes > 1) {
        int same = 1;
        char why[200];
        if ((st = compare_reruns(k, c, &d, &da, s, &same, why, sizeof why)) != ATTNBWD_OK)
            goto cleanup;
        if (!same) {
            r->pass = 0;
            snprintf(r->message, sizeof r->message, "runs differ: %s", why);
        }
    }
cleanup:
    if (launched)
        cudaStreamSynchronize(s); /* nothing is freed under a running kernel */
    if (s)
        cudaStreamDestroy(s);
    dev_free(&d);
    for (int i = 0; i < NOUT; i++)
        free(*grad_slot(&g, i));
    free(hout);
    if (have_host) {
        ref_edit_fwd32_free(&f);
        ref_edit_inputs_free(&in);
    }
    if (st != ATTNBWD_OK)
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
    return st;
}

/* The timing runs' inputs: drawn (the same seed for every timing), uploaded
 * with a workspace of ws_bytes, and freed on the host again (the device
 * holds them; at the largest shapes they are gigabytes). */
static attnbwd_status upload_timing_inputs(const suite_case *c, size_t ws_bytes, edit_dev *d, edit_args *da) {
    ref_edit_inputs in;
    ref_edit_fwd32 f;
    edit_args ha;
    attnbwd_status st = draw_host(c, 0x5eedf00dull, 0, &in, &f);
    if (st != ATTNBWD_OK)
        return st;
    ref_edit_fill_args(&in, &f, &ha);
    st = upload(c, &ha, ws_bytes, d, da);
    ref_edit_fwd32_free(&f);
    ref_edit_inputs_free(&in);
    return st;
}

attnbwd_status check_edit_time_tiles(attnbwd_ctx *ctx, const suite_case *c, int n, const char *const *tiles,
                                     int iters, int reps, uint64_t seed, double *time_us) {
    if (!c || n <= 0 || n > CHECK_MAX_CHOICES || !tiles || !time_us || iters <= 0 || reps <= 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_edit_time_tiles: n = %d, iters = %d, reps = %d", n,
                       iters, reps);
    edit_dev d;
    edit_args da;
    memset(&d, 0, sizeof d);
    attnbwd_status st = ATTNBWD_OK;
    const int rounds = reps + reps % 2; /* in pairs: see below */
    attnbwd_kernel **k = calloc((size_t)n, sizeof *k);
    double *per_round = calloc((size_t)n * (size_t)rounds, sizeof *per_round); /* [choice][round] */
    if (!k || !per_round) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "check_edit_time_tiles: %d kernels, %d rounds", n, rounds);
        goto cleanup;
    }
    size_t ws = 0;
    for (int i = 0; i < n && st == ATTNBWD_OK; i++) {
        suite_case ci = *c;
        ci.tiles = tiles[i];
        st = get_kernel(ctx, &ci, &k[i]);
        if (st == ATTNBWD_OK && attnbwd_edit_attention_workspace(k[i]) > ws)
            ws = attnbwd_edit_attention_workspace(k[i]);
    }
    if (st == ATTNBWD_OK)
        st = upload_timing_inputs(c, ws, &d, &da); /* the largest workspace serves every plan */
    if (st != ATTNBWD_OK)
        goto cleanup;
    /* Rounds in pairs, the second the first reversed (check_round_order):
     * the GPU slows over a long round of large calls (measured up to 15%
     * between the first and the last of 19 variants of one tile choice). With
     * an odd count of rounds the last choice ran late in two of three (on an
     * H100, the same tiles first and last 2-7% apart at the three largest). */
    int order[CHECK_MAX_CHOICES];
    for (int rep = 0; rep < rounds; rep++) {
        check_round_order(n, rep, seed, order);
        for (int j = 0; j < n; j++) {
            const int i = order[j];
            edit_launch l = {k[i], c, &da};
            st = check_time_launches(launch_edit, &l, iters, &per_round[(size_t)i * rounds + rep]);
            if (st != ATTNBWD_OK)
                goto cleanup;
        }
    }
    /* The median of a choice's rounds: at the largest calls the GPU's clocks
     * drop for a whole round now and then (on an H100, one of six copies of
     * a tile choice 5% slower, another in the next run), which a mean takes
     * in. Not the best round: a round about 3% fast came as often, and then
     * one lucky round of a choice would beat both of the entry's copies. */
    for (int i = 0; i < n; i++)
        time_us[i] = check_median(&per_round[(size_t)i * rounds], rounds);
cleanup:
    dev_free(&d);
    free(per_round);
    free(k);
    return st;
}

attnbwd_status check_edit_time_case(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r) {
    if (!r)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_time_case: null result");
    memset(r, 0, sizeof *r);
    if (iters <= 0) {
        attnbwd_status st = err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_time_case: iters = %d, want > 0", iters);
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
        return st;
    }

    edit_dev d;
    edit_args da;
    edit_launch l;
    double tflops = 0.0;
    memset(&d, 0, sizeof d);

    attnbwd_kernel *k = NULL;
    attnbwd_status st = get_kernel(ctx, c, &k);
    if (st != ATTNBWD_OK)
        goto cleanup;
    for (int i = 0; i < NOUT; i++)
        r->elements += sz_elems(out_desc[i].size, c->shape.batch, c->shape.seq_len);
    st = upload_timing_inputs(c, attnbwd_edit_attention_workspace(k), &d, &da);
    if (st != ATTNBWD_OK)
        goto cleanup;

    l = (edit_launch){k, c, &da};
    st = check_time_launches(launch_edit, &l, iters, &r->median_us);
    if (st != ATTNBWD_OK)
        goto cleanup;
    if (alone) {
        st = time_breakdown(k, &da, iters, r->median_us, r->breakdown, sizeof r->breakdown);
        if (st != ATTNBWD_OK)
            goto cleanup;
    }
    r->gbytes_per_s = r->median_us > 0 ? check_edit_floor_bytes(c) / (r->median_us * 1e-6) / 1e9 : 0.0;
    tflops = r->median_us > 0 ? check_edit_floor_flops(c) / (r->median_us * 1e-6) / 1e12 : 0.0;
    r->pass = 1;
    snprintf(r->message, sizeof r->message,
             "median %.2f us over %d launches, %.1f GB/s of floor bytes, %.1f TFLOP/s of floor work", r->median_us,
             iters, r->gbytes_per_s, tflops);
cleanup:
    dev_free(&d);
    if (st != ATTNBWD_OK)
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
    return st;
}

const check_problem check_edit_problem = {ATTNBWD_EDIT_ATTENTION_BWD, "edit_attention_bwd", check_edit_case,
                                          check_edit_time_case, check_edit_floor_bytes, check_edit_floor_flops};
