/* Launch entry of problem 1: argument checks, then one kernel launch on the
 * caller's stream. Hot path: no allocation, no lock once the module is loaded. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "error.h"
#include "internal.h"
#include "pointer_check.h"

static attnbwd_status check_ptr(const void *p, const char *name, uintptr_t align) {
    if (!p) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s is NULL", name);
    if ((uintptr_t)p % align)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "%s = %p is not %u-byte aligned, as this kernel's loads need",
                       name, p, (unsigned)align);
    return ATTNBWD_OK;
}

/* The memory of the call's pointers, asked about once for a set of them:
 * the set's hash is kept (lock-free, as the rest of a call). */
static attnbwd_status check_memory(attnbwd_kernel *k, const float *grad_output, const float *p_attn,
                                   const uint8_t *mask, const uint8_t *dropout_mask, float *grad_scores) {
    const void *set[5] = {grad_output, p_attn, mask, grad_scores, k->shape.dropout ? dropout_mask : NULL};
    const uint64_t h = XXH3_64bits(set, sizeof set) | 1; /* 0: none checked yet */
    if (atomic_load_explicit(&k->checked_hash, memory_order_relaxed) == h) return ATTNBWD_OK;
    const size_t B = (size_t)k->shape.batch, H = (size_t)k->shape.heads, T = (size_t)k->shape.seq_len,
                 n = B * H * T * T;
    const arg_range r[] = {{"grad_output", grad_output, 4 * n, 0}, {"p_attn", p_attn, 4 * n, 0},
                           {"mask", mask, B * T * T, 0}, {"grad_scores", grad_scores, 4 * n, 1},
                           {"dropout_mask", dropout_mask, n, 0}};
    char shape[80];
    snprintf(shape, sizeof shape, "B=%zu, H=%zu, T=%zu", B, H, T);
    attnbwd_status s = pointers_check(k->ctx, r, k->shape.dropout ? 5 : 4, "", shape);
    if (s == ATTNBWD_OK) atomic_store_explicit(&k->checked_hash, h, memory_order_relaxed);
    return s;
}

attnbwd_status attnbwd_softmax_dropout_bwd(attnbwd_kernel *k, const float *grad_output, const float *p_attn,
                                           const uint8_t *mask, const uint8_t *dropout_mask, float p_dropout,
                                           float *grad_scores, void *stream) {
    if (!k) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "kernel is NULL");
    if (k->shape.problem != ATTNBWD_SOFTMAX_DROPOUT_BWD)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "kernel %s is not a softmax-dropout backward kernel", k->plan.name);
    if (!(p_dropout >= 0.0f && p_dropout < 1.0f)) /* also catches NaN */
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "p_dropout = %g: must be in [0, 1)", (double)p_dropout);
    if ((p_dropout > 0.0f) != (k->shape.dropout == 1))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "p_dropout = %g but the kernel was built with shape.dropout = %d (1 exactly when p > 0)",
                       (double)p_dropout, k->shape.dropout);
    /* The plan says what its loads need: 16 bytes for float4 rows. */
    const uintptr_t fa = k->plan.align, ba = fa / 4;
    attnbwd_status s;
    if ((s = check_ptr(grad_output, "grad_output", fa)) || (s = check_ptr(p_attn, "p_attn", fa)) ||
        (s = check_ptr(mask, "mask", ba)) || (s = check_ptr(grad_scores, "grad_scores", fa)))
        return s;
    if (k->shape.dropout && (s = check_ptr(dropout_mask, "dropout_mask", ba))) return s;
    if ((s = kernel_ensure_loaded(k)) != ATTNBWD_OK) return s;
    if ((s = check_memory(k, grad_output, p_attn, mask, dropout_mask, grad_scores)) != ATTNBWD_OK) return s;

    /* g * dropout_mask / (1 - p), as one multiply by a correctly rounded 1/(1-p). */
    float keep_scale = k->shape.dropout ? (float)(1.0 / (1.0 - (double)p_dropout)) : 1.0f;
    const uint8_t *dm = dropout_mask ? dropout_mask : mask; /* never read when p == 0 */
    void *args[] = {(void *)&grad_output, (void *)&p_attn, (void *)&mask, (void *)&dm, &keep_scale, &grad_scores};
    s = drv_launch(&k->ctx->dev, atomic_load_explicit(&k->function, memory_order_acquire), k->plan.grid,
                   k->plan.block, k->plan.shared_bytes, stream, args, 0);
    if (s != ATTNBWD_OK) return err_wrap(s, "launching %s", k->plan.name);
    return ATTNBWD_OK;
}
