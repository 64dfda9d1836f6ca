/* Checks of the memory a launch's pointers name (see pointer_check.h). */
#include <stdint.h>

#include "error.h"
#include "pointer_check.h"

static int overlap(const arg_range *a, const arg_range *b) {
    const uintptr_t a0 = (uintptr_t)a->p, b0 = (uintptr_t)b->p;
    return a->bytes && b->bytes && a0 < b0 + b->bytes && b0 < a0 + a->bytes;
}

static attnbwd_status check_one(attnbwd_ctx *ctx, const arg_range *r, const char *pre, const char *shape) {
    drv_pointer info;
    attnbwd_status s = drv_pointer_info(&ctx->dev, r->p, &info);
    if (s != ATTNBWD_OK) return err_wrap(s, "asking the driver about %s%s = %p", pre, r->name, r->p);
    /* Managed memory reaches every device, whatever kind the driver calls it. */
    if (info.kind == DRV_MEM_UNKNOWN && !info.managed) {
        if (ctx->dev.pageable_access) return ATTNBWD_OK; /* any host memory will do; its size is not known */
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "%s%s = %p is not memory the GPU can reach (host memory from malloc or the stack?): pass "
                       "device memory (cudaMalloc, a CUDA tensor's data_ptr())", pre, r->name, r->p);
    }
    if (info.kind == DRV_MEM_DEVICE && !info.managed && info.device != ctx->dev.ordinal)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "%s%s = %p is memory of device %d; this context runs its kernels on device %d "
                       "(attnbwd_options.device)", pre, r->name, r->p, info.device, ctx->dev.ordinal);
    const uintptr_t p = (uintptr_t)r->p;
    if (info.bytes && (p < info.start || r->bytes > info.bytes - (p - info.start)))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "%s%s = %p: the kernels %s %zu bytes from there (%s), but the allocation it lies in "
                       "(%zu bytes from %p) ends %zu bytes after it: is the shape right?",
                       pre, r->name, r->p, r->written ? "write" : "read", r->bytes, shape, info.bytes,
                       (void *)info.start, p >= info.start ? info.bytes - (p - info.start) : 0);
    return ATTNBWD_OK;
}

attnbwd_status pointers_check(attnbwd_ctx *ctx, const arg_range *r, size_t n, const char *pre, const char *shape) {
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
            if (i != j && r[i].written && (j < i || !r[j].written) && overlap(&r[i], &r[j]))
                return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                               "%s%s [%p, +%zu bytes) overlaps %s%s [%p, +%zu bytes): an output may share no "
                               "memory with another argument", pre, r[i].name, r[i].p, r[i].bytes, pre, r[j].name,
                               r[j].p, r[j].bytes);
    if (!ctx->pointer_checks) return ATTNBWD_OK;
    /* The call may come while the caller captures a graph: in a strict
     * capture mode a query the driver deems unsafe would fail and end the
     * caller's capture, so the queries run in the relaxed mode. */
    const int mode = drv_capture_relaxed();
    attnbwd_status s = ATTNBWD_OK;
    for (size_t i = 0; i < n && s == ATTNBWD_OK; ++i) s = check_one(ctx, &r[i], pre, shape);
    drv_capture_restore(mode);
    return s;
}
