/* A program outside the tree: compiles problem 1's kernel for one shape for
 * the H100 and H200 (sm_90), which needs no GPU, and says what it built. Every
 * consumer test builds it; the README's C snippet is the text between the
 * readme markers. */
/* readme-begin */
#include <stdio.h>
#include <attnbwd.h>

int main(void) {
    attnbwd_options opt;
    attnbwd_options_init(&opt);
    opt.arch = "sm_90";  /* compile for the H100/H200, no GPU needed; NULL: for the current GPU */
    opt.disk_cache = 0;  /* memory only; by default compiled kernels are kept on disk */
    attnbwd_ctx *ctx = NULL;
    attnbwd_kernel *k;
    attnbwd_shape shape = {.problem = ATTNBWD_SOFTMAX_DROPOUT_BWD, .batch = 2, .heads = 16,
                           .seq_len = 541, .dropout = 1};
    if (attnbwd_open(&opt, &ctx) != ATTNBWD_OK || attnbwd_get_kernel(ctx, &shape, &k) != ATTNBWD_OK) {
        fprintf(stderr, "attnbwd: %s\n", attnbwd_last_error());
        attnbwd_close(ctx);
        return 1;
    }
    /* on a GPU, with device pointers and a stream:
       attnbwd_softmax_dropout_bwd(k, grad_output, p_attn, mask, dropout_mask, 0.1f, grad_scores, stream); */
    attnbwd_kernel_info info;
    attnbwd_kernel_get_info(k, &info);
    printf("%s for %s: %zu bytes of cubin\n", info.name, info.arch, info.cubin_bytes);
    attnbwd_close(ctx);
    return 0;
}
/* readme-end */
