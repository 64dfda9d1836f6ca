/* fp64 CPU reference of problem 1 (masked softmax with attention dropout,
 * backward), written to follow spec/softmax_dropout_bwd.md line by line:
 * dropout backward, then softmax backward with s summed over ALL columns,
 * then the mask applied last. Used by the check harness and the tests. */
#include "reference.h"

/* One row: row = (b*H + h)*T + i. Every index is 64-bit because B*H*T*T can
 * be past 2^31 on the largest cases. */
void ref_softmax_dropout_bwd_row(int64_t B, int64_t H, int64_t T, const float *grad_output,
                                 const float *p_attn, const uint8_t *mask,
                                 const uint8_t *dropout_mask, double p_dropout, int64_t row,
                                 double *out) {
    (void)B; /* the row number alone fixes b; B only bounds it */
    const int64_t b = row / (H * T);
    const int64_t i = row % T;
    const int64_t base = row * T;
    const float *go = grad_output + base;
    const float *pa = p_attn + base;
    const uint8_t *mk = mask + (b * T + i) * T; /* [B,1,T,T]: shared by every head */
    const uint8_t *dm = p_dropout > 0.0 ? dropout_mask + base : NULL;
    const double scale = p_dropout > 0.0 ? 1.0 / (1.0 - p_dropout) : 1.0;

    /* 1. dropout backward, kept in out[] for now; 2. s over every column,
     * masked ones included (the mask comes after the softmax backward). */
    double s = 0.0;
    for (int64_t j = 0; j < T; j++) {
        double g = (double)go[j];
        if (dm) /* p == 0: the dropout mask is not read at all */
            g = dm[j] ? g * scale : 0.0;
        out[j] = g;
        s += (double)pa[j] * g;
    }
    /* 2. d = p * (g' - s); 3. masked fill backward. */
    for (int64_t j = 0; j < T; j++)
        out[j] = mk[j] ? (double)pa[j] * (out[j] - s) : 0.0;
}

void ref_softmax_dropout_bwd(int64_t B, int64_t H, int64_t T, const float *grad_output,
                             const float *p_attn, const uint8_t *mask, const uint8_t *dropout_mask,
                             double p_dropout, int64_t row_begin, int64_t row_end, double *grad_scores) {
    for (int64_t row = row_begin; row < row_end; row++)
        ref_softmax_dropout_bwd_row(B, H, T, grad_output, p_attn, mask, dropout_mask, p_dropout, row,
                                    grad_scores + row * T);
}
