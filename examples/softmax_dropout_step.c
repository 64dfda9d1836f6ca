/* Host code using attnbwd the way a training step does: one context for the
 * process, the kernel fetched per step (a memory hit after the first), the
 * backward launched on the caller's stream with cudaMalloc'd pointers.
 *
 *   build/examples/softmax_dropout_step [B H T p]     (default 2 16 541 0.1)
 *
 * Without a GPU it says so and exits 2. With one, it runs three steps and
 * prints a few outputs against a CPU computation of the same rows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "attnbwd.h"

#define CUDA_OK(call)                                                                      \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                    \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24);
}

int main(int argc, char **argv) {
    int64_t B = argc > 3 ? atoll(argv[1]) : 2, H = argc > 3 ? atoll(argv[2]) : 16, T = argc > 3 ? atoll(argv[3]) : 541;
    float p = argc > 4 ? (float)atof(argv[4]) : 0.1f;
    attnbwd_ctx *ctx = NULL;
    attnbwd_status s = attnbwd_open(NULL, &ctx); /* the current device (else 0), its arch, the default cache */
    if (s != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd_open: %s: %s\n", attnbwd_status_name(s), attnbwd_last_error());
        return s == ATTNBWD_ERR_NO_DRIVER || s == ATTNBWD_ERR_NO_DEVICE ? 2 : 1;
    }
    const size_t n = (size_t)(B * H * T * T), nm = (size_t)(B * T * T);
    float *h_go = malloc(n * sizeof *h_go), *h_pa = malloc(n * sizeof *h_pa), *h_out = malloc(n * sizeof *h_out);
    uint8_t *h_mk = malloc(nm), *h_dm = malloc(n);
    if (!h_go || !h_pa || !h_out || !h_mk || !h_dm) return 1;
    unsigned seed = 1;
    for (size_t i = 0; i < n; ++i) {
        h_go[i] = frand(&seed) - 0.5f;
        h_pa[i] = frand(&seed) / (float)T; /* not a softmax: enough for the example */
        h_dm[i] = frand(&seed) > p;
    }
    for (size_t i = 0; i < nm; ++i) h_mk[i] = frand(&seed) > 0.5f;

    float *go, *pa, *out;
    uint8_t *mk, *dm;
    CUDA_OK(cudaMalloc((void **)&go, n * 4));
    CUDA_OK(cudaMalloc((void **)&pa, n * 4));
    CUDA_OK(cudaMalloc((void **)&out, n * 4));
    CUDA_OK(cudaMalloc((void **)&mk, nm));
    CUDA_OK(cudaMalloc((void **)&dm, n));
    CUDA_OK(cudaMemcpy(go, h_go, n * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(pa, h_pa, n * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(mk, h_mk, nm, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dm, h_dm, n, cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));

    attnbwd_shape shape = {ATTNBWD_SOFTMAX_DROPOUT_BWD, B, H, T, p > 0, 0};
    for (int step = 0; step < 3; ++step) {
        attnbwd_kernel *k;
        if ((s = attnbwd_get_kernel(ctx, &shape, &k)) != ATTNBWD_OK ||
            (s = attnbwd_softmax_dropout_bwd(k, go, pa, mk, dm, p, out, stream)) != ATTNBWD_OK) {
            fprintf(stderr, "step %d: %s: %s\n", step, attnbwd_status_name(s), attnbwd_last_error());
            return 1;
        }
        attnbwd_kernel_info info;
        attnbwd_kernel_get_info(k, &info);
        printf("step %d: %s (%s)\n", step, info.name,
               info.origin == ATTNBWD_FROM_COMPILE ? "compiled" : "from the disk cache");
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(h_out, out, n * 4, cudaMemcpyDeviceToHost));

    /* The first row of each head of batch 0, on the CPU. */
    double worst = 0;
    for (int64_t h = 0; h < H; ++h) {
        const size_t r = (size_t)(h * T * T);
        double sum = 0;
        for (int64_t j = 0; j < T; ++j)
            sum += (double)h_pa[r + j] * (p > 0 ? h_go[r + j] * h_dm[r + j] / (1.0 - p) : h_go[r + j]);
        for (int64_t j = 0; j < T; ++j) {
            double g = p > 0 ? h_go[r + j] * h_dm[r + j] / (1.0 - p) : h_go[r + j];
            double ref = h_mk[j] ? h_pa[r + j] * (g - sum) : 0.0;
            worst = fmax(worst, fabs(ref - h_out[r + j]));
        }
    }
    printf("max |gpu - cpu| over %lld rows: %.3g\n", (long long)H, worst);
    cudaFree(go), cudaFree(pa), cudaFree(out), cudaFree(mk), cudaFree(dm);
    cudaStreamDestroy(stream);
    free(h_go), free(h_pa), free(h_out), free(h_mk), free(h_dm);
    attnbwd_close(ctx);
    return worst <= 1e-5 ? 0 : 1;
}
