/* The GPU check and timing of problem 1, the masked softmax with dropout
 * backward (spec: docs/spec/softmax_dropout_bwd.md), over the CUDA runtime
 * API. Reached through check_case / check_time_case (check.c).
 *
 * Inputs are drawn row by row from a seeded counter-style PRNG: each row of
 * each tensor has its own generator, seeded from (seed, tensor, row). So rows
 * can be drawn in any order, by any number of threads, and drawn again later:
 * the harness never holds whole input tensors on the host. It streams chunks
 * of rows to the device, and for the comparison draws each compared row again
 * next to its fp64 reference. Host memory stays at a few chunks (~1 GB) even
 * for cases of 2^31 elements (~30 GB of device memory).
 *
 * Prints nothing; everything comes back in check_result or the error message. */
#include "check_common.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "check_cuda.h"
#include "prng.h"

#include "error.h"
#include "reference.h"

#define CHUNK_ELEMS ((int64_t)1 << 26)     /* rows per transfer: ~256 MB of fp32 */
#define FULL_COMPARE_MAX ((int64_t)1 << 28) /* above this, compare a sample of rows */
#define SAMPLE_ROWS 4096                    /* spread rows, plus the first and the last */
#define MAX_THREADS 128

/* Streams of the PRNG, one per tensor, so drawing dropout_mask or not does
 * not change grad_output, p_attn or mask. */
enum { S_GRAD = 1, S_PATTN = 2, S_DROP = 3, S_MASK = 4 };

/* ---- PRNG: splitmix64 to seed, xoshiro256** to draw ---- */

typedef struct rng {
    uint64_t s[4];
} rng;

static void rng_seed(rng *g, uint64_t seed, uint64_t stream, uint64_t row) {
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
    x = prng_splitmix64(&x) ^ (row * 0xaf251af3b0f025b5ull);
    for (int k = 0; k < 4; k++)
        g->s[k] = prng_splitmix64(&x);
}

static inline uint64_t rng_next(rng *g) { return prng_xoshiro256ss(g->s); }

/* Standard normals by Box-Muller, two at a time; u1 in (0, 1] keeps log finite. */
static void fill_randn(rng *g, float *v, int64_t n) {
    for (int64_t j = 0; j < n; j += 2) {
        uint64_t a = rng_next(g), b = rng_next(g);
        float u1 = (float)((a >> 40) + 1) * 0x1p-24f, u2 = (float)(b >> 40) * 0x1p-24f;
        float r = sqrtf(-2.0f * logf(u1)), th = 6.28318530717958648f * u2;
        v[j] = r * cosf(th);
        if (j + 1 < n)
            v[j + 1] = r * sinf(th);
    }
}

/* Uniform booleans, about half true: one bit of the generator per byte. */
static void fill_bits(rng *g, uint8_t *v, int64_t n) {
    for (int64_t j = 0; j < n; j += 64) {
        uint64_t bits = rng_next(g);
        for (int64_t k = 0; k < 64 && j + k < n; k++)
            v[j + k] = (uint8_t)((bits >> k) & 1);
    }
}

/* The inputs of one row of [B,H,T,T]: grad_output ~ randn, p_attn =
 * softmax(randn) over the row, dropout_mask (only when dm != NULL). */
static void draw_row(uint64_t seed, int64_t row, int64_t T, float *go, float *pa, uint8_t *dm) {
    rng g;
    rng_seed(&g, seed, S_GRAD, (uint64_t)row);
    fill_randn(&g, go, T);
    rng_seed(&g, seed, S_PATTN, (uint64_t)row);
    fill_randn(&g, pa, T);
    float mx = pa[0];
    for (int64_t j = 1; j < T; j++)
        mx = pa[j] > mx ? pa[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < T; j++) {
        pa[j] = expf(pa[j] - mx);
        sum += pa[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < T; j++)
        pa[j] *= inv;
    if (dm) {
        rng_seed(&g, seed, S_DROP, (uint64_t)row);
        fill_bits(&g, dm, T);
    }
}

/* One row of mask [B,1,T,T]: mrow = b*T + i. */
static void draw_mask_row(uint64_t seed, int64_t mrow, int64_t T, uint8_t *mk) {
    rng g;
    rng_seed(&g, seed, S_MASK, (uint64_t)mrow);
    fill_bits(&g, mk, T);
}

/* ---- a small fork-join over row ranges ---- */

typedef void (*range_fn)(void *arg, int64_t begin, int64_t end, int tid);

typedef struct worker {
    pthread_t th;
    range_fn fn;
    void *arg;
    int64_t begin, end;
    int tid;
} worker;

static void *worker_main(void *p) {
    worker *w = p;
    w->fn(w->arg, w->begin, w->end, w->tid);
    return NULL;
}

static int thread_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* Runs fn over [0, n) split in contiguous ranges; tid < thread_count().
 * A thread that cannot be started has its range run here instead. */
static void parallel_for(int64_t n, int64_t cost_per_item, range_fn fn, void *arg) {
    int nt = thread_count();
    int64_t want = n * cost_per_item / (1 << 16) + 1; /* ~64K units of work a thread at least */
    if (want < nt)
        nt = (int)want;
    if (nt > n)
        nt = (int)n;
    if (nt <= 1) {
        fn(arg, 0, n, 0);
        return;
    }
    worker w[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 0; t < nt; t++) {
        w[t] = (worker){.fn = fn, .arg = arg, .begin = n * t / nt, .end = n * (t + 1) / nt, .tid = t};
        started[t] = pthread_create(&w[t].th, NULL, worker_main, &w[t]) == 0;
        if (!started[t])
            fn(arg, w[t].begin, w[t].end, t);
    }
    for (int t = 0; t < nt; t++)
        if (started[t])
            pthread_join(w[t].th, NULL);
}

static double floor_bytes(const suite_case *c) {
    const double B = (double)c->shape.batch, T = (double)c->shape.seq_len;
    const double H = (double)c->shape.heads;
    return B * H * T * T * (12.0 + (c->p_dropout > 0.0 ? 1.0 : 0.0)) + B * T * T;
}

/* ---- device inputs ---- */

typedef struct dev_inputs {
    float *go, *pa, *out;
    uint8_t *mk, *dm; /* dm NULL when p == 0: the kernel must not read it */
} dev_inputs;

static void dev_free(dev_inputs *d) {
    cudaFree(d->go);
    cudaFree(d->pa);
    cudaFree(d->out);
    cudaFree(d->mk);
    cudaFree(d->dm);
    memset(d, 0, sizeof *d);
}

typedef struct draw_job {
    uint64_t seed;
    int64_t T, row0;
    float *go, *pa;
    uint8_t *dm, *mk;
} draw_job;

static void draw_rows(void *arg, int64_t b, int64_t e, int tid) {
    const draw_job *j = arg;
    (void)tid;
    for (int64_t r = b; r < e; r++)
        draw_row(j->seed, j->row0 + r, j->T, j->go + r * j->T, j->pa + r * j->T, j->dm ? j->dm + r * j->T : NULL);
}

static void draw_mask_rows(void *arg, int64_t b, int64_t e, int tid) {
    const draw_job *j = arg;
    (void)tid;
    for (int64_t r = b; r < e; r++)
        draw_mask_row(j->seed, j->row0 + r, j->T, j->mk + r * j->T);
}

/* Allocates the device tensors and fills them chunk by chunk; the output is
 * poisoned with 0xFF bytes (a NaN in fp32) so an unwritten element shows. */
static attnbwd_status upload_inputs(const suite_case *c, uint64_t seed, dev_inputs *d) {
    attnbwd_status st = ATTNBWD_OK;
    const int64_t B = c->shape.batch, H = c->shape.heads, T = c->shape.seq_len;
    const int64_t rows = B * H * T, mrows = B * T;
    const size_t E = (size_t)(rows * T), M = (size_t)(mrows * T);
    const int dropout = c->p_dropout > 0.0;
    int64_t chunk_rows = CHUNK_ELEMS / T > 0 ? CHUNK_ELEMS / T : 1;
    if (chunk_rows > rows)
        chunk_rows = rows;
    const size_t chunk = (size_t)(chunk_rows * T);
    float *hgo = NULL, *hpa = NULL;
    uint8_t *hb = NULL;
    char what[160];

    memset(d, 0, sizeof *d);
    snprintf(what, sizeof what, "cudaMalloc of %.2f GB for the inputs and output",
             (double)(E * 12 + M + (dropout ? E : 0)) / 1e9);
    CUDA_TRY(cudaMalloc((void **)&d->go, E * 4), what);
    CUDA_TRY(cudaMalloc((void **)&d->pa, E * 4), what);
    CUDA_TRY(cudaMalloc((void **)&d->out, E * 4), what);
    CUDA_TRY(cudaMalloc((void **)&d->mk, M), what);
    if (dropout)
        CUDA_TRY(cudaMalloc((void **)&d->dm, E), what);
    CUDA_TRY(cudaMemset(d->out, 0xFF, E * 4), "cudaMemset (NaN poison)");

    hgo = malloc(chunk * 4);
    hpa = malloc(chunk * 4);
    hb = malloc(chunk);
    if (!hgo || !hpa || !hb) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "check: out of host memory for %zu-element chunks", chunk);
        goto cleanup;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
        int64_t n = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
        draw_job j = {.seed = seed, .T = T, .row0 = r0, .go = hgo, .pa = hpa, .dm = dropout ? hb : NULL};
        parallel_for(n, T * 3, draw_rows, &j);
        size_t off = (size_t)(r0 * T), cnt = (size_t)(n * T);
        CUDA_TRY(cudaMemcpy(d->go + off, hgo, cnt * 4, cudaMemcpyHostToDevice), "cudaMemcpy grad_output");
        CUDA_TRY(cudaMemcpy(d->pa + off, hpa, cnt * 4, cudaMemcpyHostToDevice), "cudaMemcpy p_attn");
        if (dropout)
            CUDA_TRY(cudaMemcpy(d->dm + off, hb, cnt, cudaMemcpyHostToDevice), "cudaMemcpy dropout_mask");
    }
    for (int64_t r0 = 0; r0 < mrows; r0 += chunk_rows) {
        int64_t n = mrows - r0 < chunk_rows ? mrows - r0 : chunk_rows;
        draw_job j = {.seed = seed, .T = T, .row0 = r0, .mk = hb};
        parallel_for(n, T, draw_mask_rows, &j);
        CUDA_TRY(cudaMemcpy(d->mk + (size_t)(r0 * T), hb, (size_t)(n * T), cudaMemcpyHostToDevice),
                 "cudaMemcpy mask");
    }
    /* Pageable copies may still be in flight when cudaMemcpy returns. */
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
cleanup:
    free(hgo);
    free(hpa);
    free(hb);
    if (st != ATTNBWD_OK)
        dev_free(d);
    return st;
}

static attnbwd_status prepare(attnbwd_ctx *ctx, const suite_case *c, attnbwd_kernel **k) {
    if (!ctx || !c)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check: null ctx or case");
    if (c->shape.problem != ATTNBWD_SOFTMAX_DROPOUT_BWD)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: unknown problem %d", c->name, (int)c->shape.problem);
    if (c->shape.batch <= 0 || c->shape.heads <= 0 || c->shape.seq_len <= 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: sizes must be positive", c->name);
    if (!(c->p_dropout >= 0.0 && c->p_dropout < 1.0) || c->shape.dropout != (c->p_dropout > 0.0))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s: p_dropout %g does not fit shape.dropout %d", c->name,
                       c->p_dropout, c->shape.dropout);
    attnbwd_status st = c->tiles ? attnbwd_get_kernel_tiles(ctx, &c->shape, c->tiles, k)
                                 : attnbwd_get_kernel(ctx, &c->shape, k);
    if (st != ATTNBWD_OK)
        return err_wrap(st, "%s", c->name);
    return ATTNBWD_OK;
}

static attnbwd_status launch(attnbwd_kernel *k, const suite_case *c, const dev_inputs *d, cudaStream_t s) {
    attnbwd_status st = attnbwd_softmax_dropout_bwd(k, d->go, d->pa, d->mk, d->dm, (float)c->p_dropout, d->out,
                                                    (void *)s);
    return st == ATTNBWD_OK ? st : err_wrap(st, "%s: launch", c->name);
}

/* ---- comparison ---- */

typedef struct cmp_stats {
    size_t compared, failed, nonfinite;
    double max_abs, max_rel;
} cmp_stats;

typedef struct cmp_job {
    const suite_case *c;
    uint64_t seed;
    int64_t H, T, row0; /* row0: first row of the chunk in out */
    const float *out;
    int full;
    const int64_t *samples; /* sorted, when !full */
    size_t nsamples;
    cmp_stats st[MAX_THREADS];
    int oom;
} cmp_job;

static int is_sampled(const cmp_job *j, int64_t row) {
    size_t lo = 0, hi = j->nsamples;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->samples[mid] < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < j->nsamples && j->samples[lo] == row;
}

static void compare_rows(void *arg, int64_t b, int64_t e, int tid) {
    cmp_job *j = arg;
    const int64_t T = j->T;
    cmp_stats *s = &j->st[tid];
    double *ref = NULL;
    float *go = NULL, *pa = NULL;
    uint8_t *dm = NULL, *mk = NULL;
    const double atol = j->c->atol, rtol = j->c->rtol, p = j->c->p_dropout;

    for (int64_t r = b; r < e; r++) {
        const int64_t row = j->row0 + r;
        const float *o = j->out + r * T;
        /* Every element is scanned: NaN poison marks one never written. */
        for (int64_t x = 0; x < T; x++)
            s->nonfinite += !isfinite(o[x]);
        if (!j->full && !is_sampled(j, row))
            continue;
        if (!ref) {
            ref = malloc((size_t)T * sizeof *ref);
            go = malloc((size_t)T * 4);
            pa = malloc((size_t)T * 4);
            dm = malloc((size_t)T);
            mk = malloc((size_t)T);
            if (!ref || !go || !pa || !dm || !mk) {
                j->oom = 1;
                break;
            }
        }
        /* Draw this row's inputs again, then its reference as a 1x1xTxT case. */
        const int64_t bb = row / (j->H * T), i = row % T;
        draw_row(j->seed, row, T, go, pa, p > 0.0 ? dm : NULL);
        draw_mask_row(j->seed, bb * T + i, T, mk);
        ref_softmax_dropout_bwd_row(1, 1, T, go, pa, mk, p > 0.0 ? dm : NULL, p, 0, ref);
        for (int64_t x = 0; x < T; x++) {
            const double v = (double)o[x], diff = fabs(v - ref[x]);
            s->compared++;
            if (!(diff <= atol + rtol * fabs(ref[x]))) /* NaN fails too */
                s->failed++;
            if (isfinite(v)) {
                if (diff > s->max_abs)
                    s->max_abs = diff;
                if (ref[x] != 0.0 && diff / fabs(ref[x]) > s->max_rel)
                    s->max_rel = diff / fabs(ref[x]);
            }
        }
    }
    free(ref);
    free(go);
    free(pa);
    free(dm);
    free(mk);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The first row, the last, and SAMPLE_ROWS spread between them; the stride is
 * not a multiple of T in general, so the rows cover many (b, h, i). */
static size_t make_samples(int64_t rows, int64_t *v) {
    size_t n = 0;
    v[n++] = 0;
    for (int64_t k = 1; k <= SAMPLE_ROWS; k++)
        v[n++] = (int64_t)((double)k * (double)(rows - 1) / (SAMPLE_ROWS + 1));
    v[n++] = rows - 1;
    qsort(v, n, sizeof *v, cmp_i64);
    size_t m = 0; /* drop duplicates (few rows) */
    for (size_t k = 0; k < n; k++)
        if (m == 0 || v[k] != v[m - 1])
            v[m++] = v[k];
    return m;
}

/* Copies the output back chunk by chunk, scanning and comparing each. */
static attnbwd_status compare_output(const suite_case *c, uint64_t seed, const dev_inputs *d, check_result *r) {
    attnbwd_status st = ATTNBWD_OK;
    const int64_t H = c->shape.heads, T = c->shape.seq_len, rows = c->shape.batch * H * T;
    const int64_t E = rows * T;
    int64_t chunk_rows = CHUNK_ELEMS / T > 0 ? CHUNK_ELEMS / T : 1;
    if (chunk_rows > rows)
        chunk_rows = rows;
    float *hout = malloc((size_t)(chunk_rows * T) * 4);
    cmp_job *j = calloc(1, sizeof *j);
    int64_t *samples = malloc((SAMPLE_ROWS + 2) * sizeof *samples);
    if (!hout || !j || !samples) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "%s: out of host memory for the comparison", c->name);
        goto cleanup;
    }
    j->c = c;
    j->seed = seed;
    j->H = H;
    j->T = T;
    j->full = E <= FULL_COMPARE_MAX;
    j->samples = samples;
    j->nsamples = j->full ? 0 : make_samples(rows, samples);
    for (int64_t r0 = 0; r0 < rows && !j->oom; r0 += chunk_rows) {
        int64_t n = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
        CUDA_TRY(cudaMemcpy(hout, d->out + (size_t)(r0 * T), (size_t)(n * T) * 4, cudaMemcpyDeviceToHost),
                 "cudaMemcpy grad_scores back");
        j->row0 = r0;
        j->out = hout;
        parallel_for(n, j->full ? T * 8 : T, compare_rows, j);
    }
    if (j->oom) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "%s: out of host memory for reference rows", c->name);
        goto cleanup;
    }
    for (int t = 0; t < MAX_THREADS; t++) {
        r->compared += j->st[t].compared;
        r->failed += j->st[t].failed;
        r->nonfinite += j->st[t].nonfinite;
        r->max_abs_err = fmax(r->max_abs_err, j->st[t].max_abs);
        r->max_rel_err = fmax(r->max_rel_err, j->st[t].max_rel);
    }
    r->match_fraction = r->compared ? (double)(r->compared - r->failed) / (double)r->compared : 0.0;
    r->pass = r->nonfinite == 0 && r->compared > 0 && r->match_fraction >= c->match_ratio;
    if (r->pass)
        snprintf(r->message, sizeof r->message,
                 "pass: %.6f of %zu compared elements match%s, max abs err %.3g, max rel err %.3g",
                 r->match_fraction, r->compared, j->full ? "" : " (sampled rows)", r->max_abs_err,
                 r->max_rel_err);
    else if (r->nonfinite)
        snprintf(r->message, sizeof r->message,
                 "FAIL: %zu of %zu output elements are NaN/Inf (unwritten or overflow); match %.6f",
                 r->nonfinite, r->elements, r->match_fraction);
    else
        snprintf(r->message, sizeof r->message,
                 "FAIL: %zu of %zu compared elements out of tolerance (match %.6f < %.4f), max abs err %.3g",
                 r->failed, r->compared, r->match_fraction, c->match_ratio, r->max_abs_err);
cleanup:
    free(hout);
    free(j);
    free(samples);
    return st;
}

/* ---- entry points ---- */

static attnbwd_status check_softmax(attnbwd_ctx *ctx, const suite_case *c, uint64_t seed, check_result *r) {
    memset(r, 0, sizeof *r);
    attnbwd_kernel *k = NULL;
    attnbwd_status st = prepare(ctx, c, &k);
    if (st != ATTNBWD_OK) {
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
        return st;
    }
    r->elements = (size_t)(c->shape.batch * c->shape.heads * c->shape.seq_len * c->shape.seq_len);

    dev_inputs d = {0};
    cudaStream_t s = NULL;
    st = upload_inputs(c, seed, &d);
    if (st != ATTNBWD_OK)
        goto cleanup;
    /* A blocking stream: ordered after the legacy stream's uploads as well. */
    CUDA_TRY(cudaStreamCreate(&s), "cudaStreamCreate");
    st = launch(k, c, &d, s);
    if (st != ATTNBWD_OK)
        goto cleanup;
    CUDA_TRY(cudaStreamSynchronize(s), "the kernel (cudaStreamSynchronize)");
    CUDA_TRY(cudaGetLastError(), "the kernel (cudaGetLastError)");
    st = compare_output(c, seed, &d, r);
cleanup:
    if (s)
        cudaStreamDestroy(s);
    dev_free(&d);
    if (st != ATTNBWD_OK)
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
    return st;
}

typedef struct softmax_launch {
    attnbwd_kernel *k;
    const suite_case *c;
    const dev_inputs *d;
} softmax_launch;

static attnbwd_status launch_softmax(void *user, void *s) {
    const softmax_launch *l = user;
    return launch(l->k, l->c, l->d, (cudaStream_t)s);
}

static attnbwd_status time_softmax(attnbwd_ctx *ctx, const suite_case *c, int iters, int alone, check_result *r) {
    (void)alone; /* one kernel: no breakdown to leave out */
    memset(r, 0, sizeof *r);
    if (iters <= 0)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "check_time_case: iters = %d, want > 0", iters);
    attnbwd_kernel *k = NULL;
    attnbwd_status st = prepare(ctx, c, &k);
    if (st != ATTNBWD_OK) {
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
        return st;
    }
    r->elements = (size_t)(c->shape.batch * c->shape.heads * c->shape.seq_len * c->shape.seq_len);

    dev_inputs d = {0};
    st = upload_inputs(c, 0x5eedf00dull, &d);
    if (st == ATTNBWD_OK) {
        softmax_launch l = {k, c, &d};
        st = check_time_launches(launch_softmax, &l, iters, &r->median_us);
    }
    dev_free(&d);
    if (st != ATTNBWD_OK) {
        snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
        return st;
    }
    r->gbytes_per_s = r->median_us > 0 ? floor_bytes(c) / (r->median_us * 1e-6) / 1e9 : 0.0;
    r->pass = 1;
    snprintf(r->message, sizeof r->message, "median %.2f us over %d launches, %.1f GB/s of floor bytes",
             r->median_us, iters, r->gbytes_per_s);
    return ATTNBWD_OK;
}

const check_problem check_softmax_problem = {ATTNBWD_SOFTMAX_DROPOUT_BWD, "softmax_dropout_bwd", check_softmax,
                                             time_softmax, floor_bytes, NULL};
