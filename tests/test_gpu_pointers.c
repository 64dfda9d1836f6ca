/* GPU test of the pointer checks with the real driver (test_launch checks
 * them against tests/fake_cuda's model of it): buffers of exactly the
 * shape's size, a pointer inside a larger buffer with room, managed and
 * pinned host memory are taken and run; a buffer one byte short, a pointer
 * too near its buffer's end, host memory from malloc (where the device does
 * not read pageable memory) and an output sharing memory with an input are
 * refused by name; after all of them the CUDA context still works. Prints
 * what a check of a new set of pointers costs on the host. Exits 77
 * (skipped) where no CUDA device can be used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "check.h"
#include "gpu_test.h"

static int failures;

#define EXPECT(cond, ...)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            printf(__VA_ARGS__);                                                          \
            printf("\n");                                                                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static void *dev(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess || cudaMemset(p, 0, bytes) != cudaSuccess) {
        printf("FAIL: cudaMalloc of %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

/* A refused call: the status, the argument's name in the message. */
static void expect_refused(attnbwd_status s, const char *name, const char *what) {
    EXPECT(s == ATTNBWD_ERR_INVALID_ARGUMENT && strstr(attnbwd_last_error(), name), "%s: got %s \"%s\"", what,
           attnbwd_status_name(s), attnbwd_last_error());
}

static void softmax(attnbwd_ctx *ctx, int pageable) {
    const size_t B = 2, H = 4, T = 64, n = B * H * T * T;
    attnbwd_shape shape = {ATTNBWD_SOFTMAX_DROPOUT_BWD, (int64_t)B, (int64_t)H, (int64_t)T, 1, 0};
    attnbwd_kernel *k = NULL;
    if (attnbwd_get_kernel(ctx, &shape, &k) != ATTNBWD_OK) {
        printf("FAIL: softmax kernel: %s\n", attnbwd_last_error());
        exit(1);
    }
    float *go = dev(4 * n), *pa = dev(4 * n), *gs = dev(4 * n), *big = dev(8 * n);
    uint8_t *mask = dev(B * T * T), *dm = dev(n), *short_mask = dev(B * T * T - 1);
    EXPECT(attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, gs, NULL) == ATTNBWD_OK, "exact buffers: %s",
           attnbwd_last_error());
    expect_refused(attnbwd_softmax_dropout_bwd(k, go, pa, short_mask, dm, 0.1f, gs, NULL), "mask", "a mask 1 byte short");
    EXPECT(attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, big + n, NULL) == ATTNBWD_OK,
           "the second half of a buffer twice the size: %s", attnbwd_last_error());
    expect_refused(attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, big + n + 4, NULL), "grad_scores",
                   "16 bytes too near the end");
    expect_refused(attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, go, NULL), "overlaps grad_output",
                   "in place");
    float *host = aligned_alloc(16, 4 * n);
    memset(host, 0, 4 * n);
    attnbwd_status s = attnbwd_softmax_dropout_bwd(k, go, host, mask, dm, 0.1f, gs, NULL);
    if (pageable)
        EXPECT(s == ATTNBWD_OK, "malloc'd p_attn where the device reads pageable memory: %s", attnbwd_last_error());
    else
        expect_refused(s, "p_attn = ", "malloc'd p_attn");
    float *managed = NULL, *pinned = NULL;
    EXPECT(cudaMallocManaged((void **)&managed, 4 * n, cudaMemAttachGlobal) == cudaSuccess, "cudaMallocManaged");
    EXPECT(cudaMallocHost((void **)&pinned, 4 * n) == cudaSuccess, "cudaMallocHost");
    memset(managed, 0, 4 * n);
    memset(pinned, 0, 4 * n);
    EXPECT(attnbwd_softmax_dropout_bwd(k, pinned, managed, mask, dm, 0.1f, gs, NULL) == ATTNBWD_OK,
           "pinned grad_output, managed p_attn: %s", attnbwd_last_error());
    EXPECT(cudaDeviceSynchronize() == cudaSuccess, "the context after the refusals");

    /* The cost of checking a new set: two sets in turn, every call a new one. */
    const int calls = 2000;
    double t0 = gpu_test_now();
    for (int i = 0; i < calls; ++i) attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, i % 2 ? gs : big, NULL);
    const double alternating = (gpu_test_now() - t0) / calls;
    cudaDeviceSynchronize();
    t0 = gpu_test_now();
    for (int i = 0; i < calls; ++i) attnbwd_softmax_dropout_bwd(k, go, pa, mask, dm, 0.1f, gs, NULL);
    const double same = (gpu_test_now() - t0) / calls;
    cudaDeviceSynchronize();
    printf("softmax call on the host: %.2f us with the same pointers, %.2f us with a new set each call (5 checked)\n",
           1e6 * same, 1e6 * alternating);
    cudaFree(go), cudaFree(pa), cudaFree(gs), cudaFree(big), cudaFree(mask), cudaFree(dm), cudaFree(short_mask);
    cudaFree(managed), cudaFreeHost(pinned);
    free(host);
}

static void edit(attnbwd_ctx *ctx) {
    const size_t B = 1, T = 17;
    attnbwd_shape shape = {ATTNBWD_EDIT_ATTENTION_BWD, (int64_t)B, 16, (int64_t)T, 1, ATTNBWD_PRECISION_TF32};
    attnbwd_kernel *k = NULL;
    if (attnbwd_get_kernel(ctx, &shape, &k) != ATTNBWD_OK) {
        printf("FAIL: edit kernel: %s\n", attnbwd_last_error());
        exit(1);
    }
    attnbwd_edit_attention_args a = {0};
    const size_t bth = B * T * 1024 * 4, heads = B * 16 * T * 64 * 4, probs = B * 16 * T * T * 4;
    a.grad_output = dev(bth), a.hidden_states = dev(bth), a.edit_region_mask = dev(B * T * 4);
    a.qkv_weight = dev(3072 * 1024 * 4), a.out_weight = dev(1024 * 1024 * 4), a.attention_mask = dev(B * T * 4);
    a.query = dev(heads), a.key = dev(heads), a.value = dev(heads);
    a.attention_probs = dev(probs), a.attention_probs_dropped = dev(probs), a.attention_output = dev(bth);
    a.scale = 0.125f, a.dropout_p = 0.1f;
    a.grad_hidden_states = dev(bth), a.grad_qkv_weight = dev(3072 * 1024 * 4), a.grad_qkv_bias = dev(3072 * 4);
    a.grad_out_weight = dev(1024 * 1024 * 4), a.grad_out_bias = dev(1024 * 4);
    a.grad_edit_region_bias = dev(16 * 1024 * 1024 * 4);
    a.grad_within_edit_bias = dev(16 * 4), a.grad_cross_edit_bias = dev(16 * 4);
    a.workspace_bytes = attnbwd_edit_attention_workspace(k);
    a.workspace = dev(a.workspace_bytes);
    EXPECT(attnbwd_edit_attention_bwd(k, &a, NULL) == ATTNBWD_OK, "exact buffers: %s", attnbwd_last_error());
    attnbwd_edit_attention_args b = a;
    b.attention_probs = dev(probs - 4);
    expect_refused(attnbwd_edit_attention_bwd(k, &b, NULL), "args->attention_probs", "P one float short");
    b = a;
    b.grad_hidden_states = (float *)a.hidden_states;
    expect_refused(attnbwd_edit_attention_bwd(k, &b, NULL), "overlaps args->hidden_states", "in place");
    EXPECT(attnbwd_edit_attention_bwd(k, &a, NULL) == ATTNBWD_OK, "again: %s", attnbwd_last_error());
    EXPECT(cudaDeviceSynchronize() == cudaSuccess, "the context after the refusals");
}

int main(void) {
    gpu_test_begin();
    attnbwd_ctx *ctx = NULL;
    if (attnbwd_open(NULL, &ctx) != ATTNBWD_OK) {
        printf("FAIL: attnbwd_open: %s\n", attnbwd_last_error());
        return 1;
    }
    int pageable = 0;
    cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0);
    printf("the device %s pageable memory\n", pageable ? "reads" : "does not read");
    softmax(ctx, pageable);
    edit(ctx);
    attnbwd_close(ctx);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
