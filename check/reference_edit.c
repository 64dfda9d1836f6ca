/* fp64 CPU reference of problem 2 (spec/edit_attention_bwd.md): the seeded
 * input drawer, the forward pass, and the backward pass written to follow the
 * spec's formulas one by one. The big products go through one cache-blocked
 * double GEMM (packed panels, a 6x4 register micro-kernel on GCC/Clang vector
 * extensions, so it vectorises at -O2 on any target) run on pthreads; the
 * [B,16,T,T] intermediates are handled one (b,h) slice at a time, never whole.
 * Threads: sysconf(_SC_NPROCESSORS_ONLN), or ATTNBWD_REF_THREADS if set. */
#include "prng.h"
#include "reference_edit.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define H REF_EDIT_HEADS
#define D REF_EDIT_HEAD_DIM
#define HID REF_EDIT_HIDDEN
#define QKV REF_EDIT_QKV

/* ---------------------------------------------------------------- threads */

static int ref_threads(void) {
    const char *e = getenv("ATTNBWD_REF_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 256)
        n = 256;
    return (int)n;
}

typedef void (*work_fn)(void *ctx, int64_t item, int tid);

typedef struct pool {
    work_fn fn;
    void *ctx;
    int64_t n;
    atomic_llong next; /* items are taken one by one: slices differ little in cost */
} pool;

typedef struct pool_thread {
    pool *p;
    int tid;
} pool_thread;

static void *pool_main(void *arg) {
    pool_thread *t = arg;
    for (;;) {
        int64_t i = (int64_t)atomic_fetch_add(&t->p->next, 1);
        if (i >= t->p->n)
            break;
        t->p->fn(t->p->ctx, i, t->tid);
    }
    return NULL;
}

/* Run fn on items [0, n) over at most nthreads threads (the caller is thread
 * 0). A thread that cannot be created leaves its share to the others. */
static void parallel_for(int64_t n, work_fn fn, void *ctx, int nthreads) {
    if (nthreads > n)
        nthreads = (int)(n > 0 ? n : 1);
    pool p = {.fn = fn, .ctx = ctx, .n = n};
    atomic_init(&p.next, 0);
    pthread_t th[256];
    pool_thread pt[256];
    int started[256] = {0};
    for (int t = 1; t < nthreads; t++) {
        pt[t] = (pool_thread){&p, t};
        started[t] = pthread_create(&th[t], NULL, pool_main, &pt[t]) == 0;
    }
    pt[0] = (pool_thread){&p, 0};
    pool_main(&pt[0]);
    for (int t = 1; t < nthreads; t++)
        if (started[t])
            pthread_join(th[t], NULL);
}

/* ------------------------------------------------------------------- GEMM */

/* A matrix view over float or double storage: element (r, c) is at
 * [r*rs + c*cs], so a transpose is a swap of strides. */
typedef struct mat {
    const float *f;
    const double *d;
    int64_t rs, cs;
} mat;

static mat matf(const float *p, int64_t rs, int64_t cs) { return (mat){p, NULL, rs, cs}; }
static mat matd(const double *p, int64_t rs, int64_t cs) { return (mat){NULL, p, rs, cs}; }

#define MR 6
#define NR 4
#define MC 120 /* multiple of MR */
#define NC 128 /* multiple of NR */
#define KC 256
#define GEMM_WS (MC * KC + KC * NC) /* doubles of packing space per thread */

typedef double v2d __attribute__((vector_size(16)));

/* Copy the rows x cols block of m at (r0, c0) into dst as panels of `w`
 * rows (A: w = MR) or, transposed, of `w` columns (B: w = NR), k-major:
 * dst[(panel*kdim + k)*w + lane]; lanes past the edge are zero. */
static void pack(const mat *m, int64_t r0, int64_t c0, int64_t nlane, int64_t nk, int lane_is_row,
                 int w, double *dst) {
    /* lane index l, depth k -> matrix element */
    const int64_t ls = lane_is_row ? m->rs : m->cs, ks = lane_is_row ? m->cs : m->rs;
    const int64_t base = r0 * m->rs + c0 * m->cs;
    const int64_t npanel = (nlane + w - 1) / w;
    for (int64_t p = 0; p < npanel; p++) {
        double *dp = dst + p * nk * w;
        for (int l = 0; l < w; l++) {
            const int64_t lane = p * w + l;
            if (lane >= nlane) {
                for (int64_t k = 0; k < nk; k++)
                    dp[k * w + l] = 0.0;
                continue;
            }
            const int64_t o = base + lane * ls;
            if (m->f)
                for (int64_t k = 0; k < nk; k++)
                    dp[k * w + l] = (double)m->f[o + k * ks];
            else
                for (int64_t k = 0; k < nk; k++)
                    dp[k * w + l] = m->d[o + k * ks];
        }
    }
}

/* C[0:mr, 0:nr] (=|+=) a-panel x b-panel over kc. Both panels are 16-byte
 * aligned (packing buffers from aligned_alloc, NR even), so the v2d loads are. */
static void micro(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int mr, int nr,
                  int first) {
    v2d acc[MR][NR / 2];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const v2d b0 = *(const v2d *)(b + k * NR), b1 = *(const v2d *)(b + k * NR + 2);
        const double *ak = a + k * MR;
        for (int r = 0; r < MR; r++) {
            const v2d ar = {ak[r], ak[r]};
            acc[r][0] += ar * b0;
            acc[r][1] += ar * b1;
        }
    }
    for (int r = 0; r < mr; r++)
        for (int q = 0; q < nr; q++) {
            const double v = acc[r][q / 2][q % 2];
            c[r * ldc + q] = first ? v : c[r * ldc + q] + v;
        }
}

/* C[m0:m0+mc, n0:n0+nc] = A[m0:, :K] @ B[:K, n0:] (overwritten; mc <= MC, nc <= NC). */
static void gemm_tile(const mat *A, const mat *B, double *C, int64_t ldc, int64_t m0, int64_t mc,
                      int64_t n0, int64_t nc, int64_t K, double *ws) {
    double *pa = ws, *pb = ws + MC * KC;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        pack(A, m0, k0, mc, kc, 1, MR, pa);
        pack(B, k0, n0, nc, kc, 0, NR, pb);
        for (int64_t j = 0; j < nc; j += NR)
            for (int64_t i = 0; i < mc; i += MR)
                micro(kc, pa + (i / MR) * kc * MR, pb + (j / NR) * kc * NR, C + (m0 + i) * ldc + n0 + j, ldc,
                      (int)(mc - i < MR ? mc - i : MR), (int)(nc - j < NR ? nc - j : NR), k0 == 0);
    }
}

/* C[M,N] (row stride ldc) = A[M,K] @ B[K,N] on the calling thread. */
static void gemm_serial(mat A, mat B, double *C, int64_t ldc, int64_t M, int64_t N, int64_t K, double *ws) {
    for (int64_t m0 = 0; m0 < M; m0 += MC)
        for (int64_t n0 = 0; n0 < N; n0 += NC)
            gemm_tile(&A, &B, C, ldc, m0, M - m0 < MC ? M - m0 : MC, n0, N - n0 < NC ? N - n0 : NC, K, ws);
}

typedef struct gemm_job {
    mat A, B;
    double *C;
    int64_t ldc, M, N, K, ntn;
    double *ws; /* GEMM_WS per thread */
} gemm_job;

static void gemm_item(void *ctx, int64_t item, int tid) {
    gemm_job *g = ctx;
    const int64_t m0 = (item / g->ntn) * MC, n0 = (item % g->ntn) * NC;
    gemm_tile(&g->A, &g->B, g->C, g->ldc, m0, g->M - m0 < MC ? g->M - m0 : MC, n0,
              g->N - n0 < NC ? g->N - n0 : NC, g->K, g->ws + (int64_t)tid * GEMM_WS);
}

/* The same over MC x NC tiles of C on nthreads threads (each tile runs its
 * whole K: no two threads write one element, and the order of sums is fixed). */
static void gemm_par(mat A, mat B, double *C, int64_t ldc, int64_t M, int64_t N, int64_t K, double *ws,
                     int nthreads) {
    gemm_job g = {A, B, C, ldc, M, N, K, (N + NC - 1) / NC, ws};
    parallel_for(((M + MC - 1) / MC) * g.ntn, gemm_item, &g, nthreads);
}

static double *alloc_d(int64_t n) {
    /* 64-byte aligned (the micro-kernel's v2d loads need 16); n rounded up. */
    size_t bytes = ((size_t)n * sizeof(double) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* Column sums of a row-major [rows, cols] matrix, rows summed in order. */
static void colsum_f(const float *x, int64_t rows, int64_t cols, double *out) {
    memset(out, 0, (size_t)cols * sizeof *out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[c] += (double)x[r * cols + c];
}
static void colsum_d(const double *x, int64_t rows, int64_t cols, double *out) {
    memset(out, 0, (size_t)cols * sizeof *out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[c] += x[r * cols + c];
}

/* B and T bounded so every size below fits size_t/int64 with room. */
static int shape_ok(int64_t B, int64_t T, int64_t P) {
    return B >= 1 && T >= 1 && P >= 1 && B <= (1 << 20) && T <= (1 << 20) && P <= (1 << 14) && B * T <= (1 << 26);
}

/* ---------------------------------------------------------------- drawing */

typedef struct rng {
    uint64_t s[4];
    int have; /* a second Box-Muller normal kept */
    double spare;
} rng;

static rng rng_seed(uint64_t seed, uint64_t tag, uint64_t row) {
    uint64_t sm = seed ^ (tag * 0xD1B54A32D192ED03ull) ^ (row * 0x8CB92BA72F3D8DD7ull);
    rng r = {{0}, 0, 0.0};
    for (int i = 0; i < 4; i++)
        r.s[i] = prng_splitmix64(&sm);
    return r;
}

static uint64_t xoshiro(rng *r) { return prng_xoshiro256ss(r->s); }

static double uniform(rng *r) { return (double)(xoshiro(r) >> 11) * 0x1.0p-53; } /* [0, 1) */

static double normal(rng *r) {
    if (r->have) {
        r->have = 0;
        return r->spare;
    }
    const double u1 = 1.0 - uniform(r), u2 = uniform(r); /* u1 in (0, 1]: log finite */
    const double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->have = 1;
    return rad * cos(th);
}

enum { DRAW_NORMAL, DRAW_GT, DRAW_HALF, DRAW_KEEP, DRAW_CONST };

typedef struct fill_job {
    float *x;
    int64_t cols;
    uint64_t seed, tag;
    int kind;
    double a; /* NORMAL: std; GT: p; KEEP: zero probability; CONST: value */
} fill_job;

static void fill_row(void *ctx, int64_t row, int tid) {
    (void)tid;
    const fill_job *f = ctx;
    rng r = rng_seed(f->seed, f->tag, (uint64_t)row);
    float *x = f->x + row * f->cols;
    for (int64_t c = 0; c < f->cols; c++) {
        double v = f->a;
        switch (f->kind) {
        case DRAW_NORMAL: v = f->a * normal(&r); break;
        case DRAW_GT: v = uniform(&r) > f->a ? 1.0 : 0.0; break;
        case DRAW_HALF: v = uniform(&r) < 0.5 ? 1.0 : 0.0; break;
        case DRAW_KEEP: v = (c == 0 || uniform(&r) >= f->a) ? 1.0 : 0.0; break; /* key 0 kept */
        default: break;
        }
        x[c] = (float)v;
    }
}

/* One stream per (tensor tag, row): the bits do not depend on the threads. */
static void fill(float *x, int64_t rows, int64_t cols, uint64_t seed, uint64_t tag, int kind, double a,
                 int nthreads) {
    fill_job f = {x, cols, seed, tag, kind, a};
    parallel_for(rows, fill_row, &f, rows * cols < (1 << 16) ? 1 : nthreads);
}

attnbwd_status ref_edit_draw_inputs(int64_t B, int64_t T, uint64_t seed, unsigned flags,
                                    ref_edit_inputs *in) {
    if (!shape_ok(B, T, REF_EDIT_MAX_POS) || !in || !in->grad_output || !in->hidden_states ||
        !in->edit_region_mask || !in->qkv_weight || !in->qkv_bias || !in->out_weight || !in->out_bias ||
        !in->edit_region_bias || !in->within_edit_bias || !in->cross_edit_bias || !in->attention_mask ||
        !in->dropout_mask)
        return ATTNBWD_ERR_INVALID_ARGUMENT;
    const int nt = ref_threads();
    const int64_t BT = B * T, P = REF_EDIT_MAX_POS;
    const double p = (flags & REF_EDIT_DRAW_P0) ? 0.0 : 0.1;
    fill(in->hidden_states, BT, HID, seed, 1, DRAW_NORMAL, 1.0, nt);
    fill(in->grad_output, BT, HID, seed, 2, DRAW_NORMAL, 1.0, nt);
    fill(in->qkv_weight, QKV, HID, seed, 3, DRAW_NORMAL, 0.02, nt);
    fill(in->out_weight, HID, HID, seed, 4, DRAW_NORMAL, 0.02, nt);
    const int bias_kind = (flags & REF_EDIT_DRAW_BIASES) ? DRAW_NORMAL : DRAW_CONST;
    const double bias_a = (flags & REF_EDIT_DRAW_BIASES) ? 0.02 : 0.0;
    fill(in->qkv_bias, 1, QKV, seed, 5, bias_kind, bias_a, nt);
    fill(in->out_bias, 1, HID, seed, 6, bias_kind, bias_a, nt);
    fill(in->edit_region_bias, H * P, P, seed, 7, DRAW_NORMAL, 0.02, nt);
    fill(in->within_edit_bias, 1, H, seed, 8, DRAW_NORMAL, 0.02, nt);
    fill(in->cross_edit_bias, 1, H, seed, 9, DRAW_NORMAL, 0.02, nt);
    fill(in->edit_region_mask, B, T, seed, 10, DRAW_HALF, 0.0, nt);
    if (flags & REF_EDIT_DRAW_MASK_ZEROS)
        fill(in->attention_mask, B, T, seed, 11, DRAW_KEEP, 0.25, nt);
    else
        fill(in->attention_mask, B, T, seed, 11, DRAW_CONST, 1.0, nt);
    if (p > 0.0)
        fill(in->dropout_mask, B * H * T, T, seed, 12, DRAW_GT, p, nt);
    else
        fill(in->dropout_mask, B * H * T, T, seed, 12, DRAW_CONST, 1.0, nt);
    in->scale = 0.125f; /* 1/sqrt(head_dim) */
    in->dropout_p = (float)p;
    return ATTNBWD_OK;
}

/* ------------------------------------------------------------- allocation */

attnbwd_status ref_edit_inputs_alloc(int64_t B, int64_t T, ref_edit_inputs *in) {
    if (!in || !shape_ok(B, T, REF_EDIT_MAX_POS))
        return ATTNBWD_ERR_INVALID_ARGUMENT;
    memset(in, 0, sizeof *in);
    const size_t BT = (size_t)(B * T), P = REF_EDIT_MAX_POS;
    float **f[] = {&in->grad_output, &in->hidden_states, &in->edit_region_mask, &in->qkv_weight,
                   &in->qkv_bias, &in->out_weight, &in->out_bias, &in->edit_region_bias,
                   &in->within_edit_bias, &in->cross_edit_bias, &in->attention_mask, &in->dropout_mask};
    const size_t n[] = {BT * HID, BT * HID, BT, (size_t)QKV * HID, QKV, (size_t)HID * HID, HID,
                        H * P * P, H, H, BT, BT * H * (size_t)T};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (!(*f[i] = malloc(n[i] * sizeof(float)))) {
            ref_edit_inputs_free(in);
            return ATTNBWD_ERR_OUT_OF_MEMORY;
        }
    return ATTNBWD_OK;
}

void ref_edit_inputs_free(ref_edit_inputs *in) {
    if (!in)
        return;
    float *f[] = {in->grad_output, in->hidden_states, in->edit_region_mask, in->qkv_weight,
                  in->qkv_bias, in->out_weight, in->out_bias, in->edit_region_bias,
                  in->within_edit_bias, in->cross_edit_bias, in->attention_mask, in->dropout_mask};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        free(f[i]);
    memset(in, 0, sizeof *in);
}

attnbwd_status ref_edit_fwd32_alloc(int64_t B, int64_t T, ref_edit_fwd32 *o) {
    if (!o || !shape_ok(B, T, REF_EDIT_MAX_POS))
        return ATTNBWD_ERR_INVALID_ARGUMENT;
    memset(o, 0, sizeof *o);
    const size_t BT = (size_t)(B * T), TT = BT * H * (size_t)T;
    float **f[] = {&o->query, &o->key, &o->value, &o->attention_scores, &o->attention_probs,
                   &o->attention_probs_dropped, &o->attention_output};
    const size_t n[] = {BT * HID, BT * HID, BT * HID, TT, TT, TT, BT * HID};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (!(*f[i] = malloc(n[i] * sizeof(float)))) {
            ref_edit_fwd32_free(o);
            return ATTNBWD_ERR_OUT_OF_MEMORY;
        }
    return ATTNBWD_OK;
}

void ref_edit_fwd32_free(ref_edit_fwd32 *o) {
    if (!o)
        return;
    free(o->query);
    free(o->key);
    free(o->value);
    free(o->attention_scores);
    free(o->attention_probs);
    free(o->attention_probs_dropped);
    free(o->attention_output);
    memset(o, 0, sizeof *o);
}

void ref_edit_fill_args(const ref_edit_inputs *in, const ref_edit_fwd32 *f, attnbwd_edit_attention_args *a) {
    memset(a, 0, sizeof *a);
    a->grad_output = in->grad_output;
    a->hidden_states = in->hidden_states;
    a->edit_region_mask = in->edit_region_mask;
    a->qkv_weight = in->qkv_weight;
    a->qkv_bias = in->qkv_bias;
    a->out_weight = in->out_weight;
    a->out_bias = in->out_bias;
    a->edit_region_bias = in->edit_region_bias;
    a->within_edit_bias = in->within_edit_bias;
    a->cross_edit_bias = in->cross_edit_bias;
    a->attention_mask = in->attention_mask;
    a->dropout_mask = in->dropout_mask;
    a->scale = in->scale;
    a->dropout_p = in->dropout_p;
    if (f) {
        a->query = f->query;
        a->key = f->key;
        a->value = f->value;
        a->attention_scores = f->attention_scores;
        a->attention_probs = f->attention_probs;
        a->attention_probs_dropped = f->attention_probs_dropped;
        a->attention_output = f->attention_output;
    }
}

/* ---------------------------------------------------------------- forward */

/* Store v at idx into whichever of the two outputs exists. */
static inline void put(float *f, double *d, int64_t idx, double v) {
    if (f)
        f[idx] = (float)v;
    if (d)
        d[idx] = v;
}

typedef struct fwd_job {
    int64_t B, T, P;
    const ref_edit_inputs *in;
    const ref_edit_fwd32 *o32; /* never NULL here: an all-NULL one stands in */
    const ref_edit_fwd64 *o64;
    const double *qkv; /* [B*T, 3072] */
    double *ws;        /* per thread: GEMM_WS + T*T + T*64 */
    int64_t ws_per;
} fwd_job;

/* One (b, h) slice: scores, softmax, dropout, probs_dropped @ v. */
static void fwd_slice(void *ctx, int64_t sl, int tid) {
    const fwd_job *j = ctx;
    const ref_edit_inputs *in = j->in;
    const int64_t T = j->T, P = j->P, b = sl / H, h = sl % H;
    double *ws = j->ws + tid * j->ws_per, *S = ws + GEMM_WS, *O = S + T * T;
    const double *q = j->qkv + b * T * QKV + h * D, *k = q + HID, *v = q + 2 * HID;
    const float *m = in->edit_region_mask + b * T, *am = in->attention_mask + b * T;
    /* the bias exists only while T fits the position table (spec: T > 1024) */
    const float *erb = (T <= P && in->edit_region_bias) ? in->edit_region_bias + h * P * P : NULL;
    const double p = in->dropout_p, keep = p > 0.0 ? 1.0 / (1.0 - p) : 1.0;
    const double wb = in->within_edit_bias[h], cb = in->cross_edit_bias[h], scale = in->scale;
    const int64_t qo = sl * T * D, so = sl * T * T;

    for (int64_t i = 0; i < T; i++) /* q, k, v to [B,16,T,64] */
        for (int64_t d = 0; d < D; d++) {
            put(j->o32->query, j->o64->query, qo + i * D + d, q[i * QKV + d]);
            put(j->o32->key, j->o64->key, qo + i * D + d, k[i * QKV + d]);
            put(j->o32->value, j->o64->value, qo + i * D + d, v[i * QKV + d]);
        }
    gemm_serial(matd(q, QKV, 1), matd(k, 1, QKV), S, T, T, T, D, ws); /* S = q k^T */
    for (int64_t i = 0; i < T; i++) {
        double *s = S + i * T, mx = -INFINITY;
        const double mi = m[i];
        for (int64_t c = 0; c < T; c++) {
            const double mj = m[c];
            double x = s[c] * scale + (erb ? (double)erb[i * P + c] : 0.0) + wb * mi * mj +
                       cb * (mi * (1.0 - mj) + (1.0 - mi) * mj);
            if (am[c] == 0.0f)
                x = -INFINITY;
            else if (x > mx)
                mx = x;
            s[c] = x;
            put(j->o32->attention_scores, j->o64->attention_scores, so + i * T + c, x);
        }
        double sum = 0.0;
        for (int64_t c = 0; c < T; c++) { /* exp(-inf) = 0 for masked keys */
            s[c] = mx == -INFINITY ? 0.0 : exp(s[c] - mx);
            sum += s[c];
        }
        /* every key masked: PyTorch gives NaN; the documented choice is 0 */
        const double inv = sum > 0.0 ? 1.0 / sum : 0.0;
        for (int64_t c = 0; c < T; c++) {
            const double pr = s[c] * inv;
            const double pd = p > 0.0 ? pr * (double)in->dropout_mask[so + i * T + c] * keep : pr;
            put(j->o32->attention_probs, j->o64->attention_probs, so + i * T + c, pr);
            put(j->o32->attention_probs_dropped, j->o64->attention_probs_dropped, so + i * T + c, pd);
            s[c] = pd;
        }
    }
    gemm_serial(matd(S, T, 1), matd(v, QKV, 1), O, D, T, D, T, ws); /* O = Pd v */
    for (int64_t i = 0; i < T; i++)
        for (int64_t d = 0; d < D; d++)
            put(j->o32->attention_output, j->o64->attention_output, (b * T + i) * HID + h * D + d, O[i * D + d]);
}

attnbwd_status ref_edit_forward_ex(int64_t B, int64_t T, int64_t P, const ref_edit_inputs *in,
                                   const ref_edit_fwd32 *o32, const ref_edit_fwd64 *o64) {
    if (!shape_ok(B, T, P) || !in || !in->hidden_states || !in->edit_region_mask || !in->qkv_weight ||
        !in->qkv_bias || !in->within_edit_bias || !in->cross_edit_bias || !in->attention_mask ||
        (in->dropout_p > 0.0f && !in->dropout_mask) || !(in->dropout_p >= 0.0f && in->dropout_p < 1.0f))
        return ATTNBWD_ERR_INVALID_ARGUMENT;
    const ref_edit_fwd32 none32 = {0};
    const ref_edit_fwd64 none64 = {0};
    const int nt = ref_threads();
    const int64_t BT = B * T, ws_per = (GEMM_WS + T * T + T * D + 7) & ~(int64_t)7; /* keeps 64-byte alignment */
    double *qkv = alloc_d(BT * QKV), *ws = alloc_d(nt * ws_per);
    if (!qkv || !ws) {
        free(qkv);
        free(ws);
        return ATTNBWD_ERR_OUT_OF_MEMORY;
    }
    /* qkv = hidden_states @ qkv_weight^T + qkv_bias: B(k=c, n=o) = W[o, c] */
    gemm_par(matf(in->hidden_states, HID, 1), matf(in->qkv_weight, 1, HID), qkv, QKV, BT, QKV, HID, ws, nt);
    for (int64_t r = 0; r < BT; r++)
        for (int64_t c = 0; c < QKV; c++)
            qkv[r * QKV + c] += (double)in->qkv_bias[c];
    fwd_job j = {B, T, P, in, o32 ? o32 : &none32, o64 ? o64 : &none64, qkv, ws, ws_per};
    parallel_for(B * H, fwd_slice, &j, nt);
    free(qkv);
    free(ws);
    return ATTNBWD_OK;
}

attnbwd_status ref_edit_forward(int64_t B, int64_t T, const ref_edit_inputs *in, const ref_edit_fwd32 *o32,
                                const ref_edit_fwd64 *o64) {
    return ref_edit_forward_ex(B, T, REF_EDIT_MAX_POS, in, o32, o64);
}

/* --------------------------------------------------------------- backward */

typedef struct bwd_job {
    int64_t B, T, P;
    const attnbwd_edit_attention_args *a;
    const ref_edit_grads *g;
    const double *gA; /* [B*T, 1024] */
    double *gqkv;     /* [B*T, 3072] */
    double *ws;       /* per thread: GEMM_WS + T*T */
    int64_t ws_per;
} bwd_job;

/* Head h over every batch row in order: this thread owns grad_edit_region_bias[h]
 * and the two scalar biases of h, so the sums over b need no lock and are the
 * same whatever the thread count. */
static void bwd_head(void *ctx, int64_t h, int tid) {
    const bwd_job *j = ctx;
    const attnbwd_edit_attention_args *a = j->a;
    const int64_t B = j->B, T = j->T, P = j->P;
    double *ws = j->ws + tid * j->ws_per, *G = ws + GEMM_WS;
    double *geb = j->g->grad_edit_region_bias + h * P * P;
    const int bias_on = T <= P; /* T > P: the bias never entered the scores */
    const double p = a->dropout_p, keep = p > 0.0 ? 1.0 / (1.0 - p) : 1.0, scale = a->scale;
    double within = 0.0, cross = 0.0;
    memset(geb, 0, (size_t)(P * P) * sizeof *geb); /* the zeros outside [:T,:T] too */

    for (int64_t b = 0; b < B; b++) {
        const int64_t sl = b * H + h, so = sl * T * T, qo = sl * T * D;
        const float *q = a->query + qo, *k = a->key + qo, *v = a->value + qo;
        const float *pr = a->attention_probs + so, *pdr = a->attention_probs_dropped + so;
        const float *m = a->edit_region_mask + b * T, *am = a->attention_mask + b * T;
        const double *gA = j->gA + b * T * HID + h * D;
        double *gq = j->gqkv + b * T * QKV + h * D, *gk = gq + HID, *gv = gq + 2 * HID;

        gemm_serial(matd(gA, HID, 1), matf(v, 1, D), G, T, T, T, D, ws);    /* gPd = gA v^T */
        gemm_serial(matf(pdr, 1, T), matd(gA, HID, 1), gv, QKV, T, D, T, ws); /* gV = Pd^T gA */
        for (int64_t i = 0; i < T; i++) {
            double *g = G + i * T, rs = 0.0;
            const float *pi = pr + i * T;
            if (p > 0.0) { /* gP = gPd * dropout_mask / (1-p) */
                const float *dm = a->dropout_mask + so + i * T;
                for (int64_t c = 0; c < T; c++)
                    g[c] = g[c] * (double)dm[c] * keep;
            }
            for (int64_t c = 0; c < T; c++)
                rs += g[c] * (double)pi[c];
            const double mi = m[i];
            for (int64_t c = 0; c < T; c++) {
                const double mj = m[c];
                const double gs = am[c] == 0.0f ? 0.0 : (double)pi[c] * (g[c] - rs);
                within += gs * mi * mj;
                cross += gs * (mi * (1.0 - mj) + (1.0 - mi) * mj);
                if (bias_on)
                    geb[i * P + c] += gs;
                g[c] = gs * scale; /* from here on G holds gS*scale */
            }
        }
        gemm_serial(matd(G, T, 1), matf(k, D, 1), gq, QKV, T, D, T, ws); /* gQ = (gS*scale) k */
        gemm_serial(matd(G, 1, T), matf(q, D, 1), gk, QKV, T, D, T, ws); /* gK = (gS*scale)^T q */
    }
    j->g->grad_within_edit_bias[h] = within;
    j->g->grad_cross_edit_bias[h] = cross;
}

attnbwd_status ref_edit_backward_ex(int64_t B, int64_t T, int64_t P, const attnbwd_edit_attention_args *a,
                                    const ref_edit_grads *g) {
    if (!shape_ok(B, T, P) || !a || !g || !a->grad_output || !a->hidden_states || !a->edit_region_mask ||
        !a->qkv_weight || !a->out_weight || !a->attention_mask || !a->query || !a->key || !a->value ||
        !a->attention_probs || !a->attention_probs_dropped || !a->attention_output ||
        (a->dropout_p > 0.0f && !a->dropout_mask) || !(a->dropout_p >= 0.0f && a->dropout_p < 1.0f) ||
        !g->grad_hidden_states || !g->grad_qkv_weight || !g->grad_qkv_bias || !g->grad_out_weight ||
        !g->grad_out_bias || !g->grad_edit_region_bias || !g->grad_within_edit_bias || !g->grad_cross_edit_bias)
        return ATTNBWD_ERR_INVALID_ARGUMENT;
    const int nt = ref_threads();
    const int64_t BT = B * T, ws_per = (GEMM_WS + T * T + 7) & ~(int64_t)7; /* keeps 64-byte alignment */
    double *gA = alloc_d(BT * HID), *own = g->grad_qkv ? NULL : alloc_d(BT * QKV);
    double *gqkv = g->grad_qkv ? g->grad_qkv : own, *ws = alloc_d(nt * ws_per);
    if (!gA || !gqkv || !ws) {
        free(gA);
        free(own);
        free(ws);
        return ATTNBWD_ERR_OUT_OF_MEMORY;
    }
    /* gA = grad_output @ out_weight; grad_out_weight = grad_output^T @ attention_output */
    gemm_par(matf(a->grad_output, HID, 1), matf(a->out_weight, HID, 1), gA, HID, BT, HID, HID, ws, nt);
    gemm_par(matf(a->grad_output, 1, HID), matf(a->attention_output, HID, 1), g->grad_out_weight, HID, HID,
             HID, BT, ws, nt);
    colsum_f(a->grad_output, BT, HID, g->grad_out_bias);

    bwd_job j = {B, T, P, a, g, gA, gqkv, ws, ws_per};
    parallel_for(H, bwd_head, &j, nt);

    /* grad_hidden_states = grad_qkv @ qkv_weight; grad_qkv_weight = grad_qkv^T @ hidden_states */
    gemm_par(matd(gqkv, QKV, 1), matf(a->qkv_weight, HID, 1), g->grad_hidden_states, HID, BT, HID, QKV, ws, nt);
    gemm_par(matd(gqkv, 1, QKV), matf(a->hidden_states, HID, 1), g->grad_qkv_weight, HID, QKV, HID, BT, ws, nt);
    colsum_d(gqkv, BT, QKV, g->grad_qkv_bias);
    free(gA);
    free(own);
    free(ws);
    return ATTNBWD_OK;
}

attnbwd_status ref_edit_backward(int64_t B, int64_t T, const attnbwd_edit_attention_args *a,
                                 const ref_edit_grads *g) {
    return ref_edit_backward_ex(B, T, REF_EDIT_MAX_POS, a, g);
}
