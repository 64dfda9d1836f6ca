/* fp64 CPU references of the problems, for checks and tests. */
#ifndef ATTNBWD_REFERENCE_H
#define ATTNBWD_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

/* Problem 1 for rows [row_begin, row_end) of the B*H*T rows (row = (b*H+h)*T+i),
 * writing grad_scores (double, same [B,H,T,T] indexing, only those rows).
 * dropout_mask is not read when p_dropout == 0 (may be NULL). */
void ref_softmax_dropout_bwd(int64_t B, int64_t H, int64_t T, const float *grad_output,
                             const float *p_attn, const uint8_t *mask, const uint8_t *dropout_mask,
                             double p_dropout, int64_t row_begin, int64_t row_end, double *grad_scores);

/* The same for one row, into out[T] (handy for sampled checks). */
void ref_softmax_dropout_bwd_row(int64_t B, int64_t H, int64_t T, const float *grad_output,
                                 const float *p_attn, const uint8_t *mask,
                                 const uint8_t *dropout_mask, double p_dropout, int64_t row,
                                 double *out);

#endif
