/* What the GPU checks of every problem share (see check_common.h). */
#include "check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "check_cuda.h"
#include "prng.h"

#include "error.h"

#define WARMUPS 10

int check_gpu_available(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0)
        e = cudaErrorNoDevice;
    if (e == cudaSuccess)
        e = cudaFree(0); /* a context can really be made (not busy, not exclusive elsewhere) */
    if (e != cudaSuccess) {
        if (why && why_len)
            snprintf(why, why_len, "no usable CUDA device: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        return -1;
    }
    if (why && why_len)
        why[0] = '\0';
    return 0;
}

attnbwd_status check_use_ctx_device(attnbwd_ctx *ctx, check_result *r) {
    attnbwd_ctx_info info;
    if (!ctx || attnbwd_ctx_get_info(ctx, &info) != ATTNBWD_OK) return ATTNBWD_OK; /* reported by the caller */
    cudaError_t e = cudaSetDevice(info.device);
    if (e == cudaSuccess) return ATTNBWD_OK;
    attnbwd_status st = cuda_err(e, "cudaSetDevice (the context's device)");
    memset(r, 0, sizeof *r);
    snprintf(r->message, sizeof r->message, "%s", attnbwd_last_error());
    return st;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double check_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void check_round_order(int n, int round, uint64_t seed, int *order) {
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (seed) { /* Fisher-Yates, from a state of the seed and the pair */
        uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(round / 2 + 1)), st[4];
        for (int i = 0; i < 4; i++)
            st[i] = prng_splitmix64(&x);
        for (int i = n - 1; i > 0; i--) {
            const int j = (int)(prng_xoshiro256ss(st) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    if (round % 2)
        for (int i = 0, j = n - 1; i < j; i++, j--) {
            const int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
}

/* A 2x-L2 buffer zeroed before each launch (outside the events), WARMUPS
 * launches, then the median of `iters` device times between events around
 * the launch alone. */
attnbwd_status check_time_launches(check_launch_fn fn, void *user, int iters, double *median_us) {
    attnbwd_status st = ATTNBWD_OK;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    void *flush = NULL;
    double *ms = malloc((size_t)iters * sizeof *ms);
    int dev = 0, l2 = 0;
    size_t flush_bytes = 0;
    if (!ms) {
        st = err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "check_time_launches: out of memory");
        goto cleanup;
    }
    CUDA_TRY(cudaGetDevice(&dev), "cudaGetDevice");
    CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2 size)");
    flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
    CUDA_TRY(cudaMalloc(&flush, flush_bytes), "cudaMalloc of the L2 flush buffer");
    CUDA_TRY(cudaStreamCreate(&s), "cudaStreamCreate");
    CUDA_TRY(cudaEventCreate(&e0), "cudaEventCreate");
    CUDA_TRY(cudaEventCreate(&e1), "cudaEventCreate");
    for (int it = 0; it < WARMUPS + iters; it++) {
        CUDA_TRY(cudaMemsetAsync(flush, 0, flush_bytes, s), "cudaMemsetAsync (L2 flush)");
        CUDA_TRY(cudaEventRecord(e0, s), "cudaEventRecord");
        st = fn(user, s);
        if (st != ATTNBWD_OK)
            goto cleanup;
        CUDA_TRY(cudaEventRecord(e1, s), "cudaEventRecord");
        CUDA_TRY(cudaEventSynchronize(e1), "the kernel (cudaEventSynchronize)");
        if (it >= WARMUPS) {
            float elapsed = 0.f;
            CUDA_TRY(cudaEventElapsedTime(&elapsed, e0, e1), "cudaEventElapsedTime");
            ms[it - WARMUPS] = elapsed;
        }
    }
    CUDA_TRY(cudaGetLastError(), "the kernel (cudaGetLastError)");
    *median_us = 1000.0 * check_median(ms, iters);
cleanup:
    if (s)
        cudaStreamSynchronize(s); /* a failed iteration may leave work queued */
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(flush);
    free(ms);
    return st;
}
