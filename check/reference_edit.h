/* fp64 CPU reference of problem 2 (region-aware self-attention with edit
 * bias, backward; spec: docs/spec/edit_attention_bwd.md): a seeded input
 * drawer, the forward pass that makes the forward tensors, and the backward
 * pass written to follow the spec's formulas literally. Every array is host
 * memory, contiguous, in the spec's layouts; products are done in double on
 * pthreads (sysconf(_SC_NPROCESSORS_ONLN) of them, or ATTNBWD_REF_THREADS),
 * cache-blocked. Cost, measured: ~10 GFLOP/s of double per core (SSE2), so
 * B=32, T=773 (forward + backward) takes some 6-8 s on 16 cores, ~6.5 GB. */
#ifndef ATTNBWD_REFERENCE_EDIT_H
#define ATTNBWD_REFERENCE_EDIT_H

#include <stddef.h>
#include <stdint.h>

#include "attnbwd.h"

#define REF_EDIT_HIDDEN 1024
#define REF_EDIT_HEADS 16
#define REF_EDIT_HEAD_DIM 64
#define REF_EDIT_QKV 3072
#define REF_EDIT_MAX_POS 1024 /* max_position_embeddings: edit_region_bias is [16,P,P], P = 1024 */

/* Inputs of the forward (and of the loss grad_output), fp32 as the benchmark
 * draws them. Sizes: grad_output, hidden_states [B,T,1024]; edit_region_mask,
 * attention_mask [B,T]; qkv_weight [3072,1024]; qkv_bias [3072]; out_weight
 * [1024,1024]; out_bias [1024]; edit_region_bias [16,P,P]; within/cross [16];
 * dropout_mask [B,16,T,T] (0/1, not read when dropout_p == 0, may be NULL then).
 * edit_region_bias may be NULL: read as all zeros. */
typedef struct ref_edit_inputs {
    float *grad_output, *hidden_states, *edit_region_mask, *qkv_weight, *qkv_bias, *out_weight,
        *out_bias, *edit_region_bias, *within_edit_bias, *cross_edit_bias, *attention_mask,
        *dropout_mask;
    float scale, dropout_p;
} ref_edit_inputs;

/* The forward tensors (layouts as in attnbwd_edit_attention_args): query, key,
 * value [B,16,T,64] (unscaled); attention_scores, attention_probs,
 * attention_probs_dropped [B,16,T,T]; attention_output [B,T,1024]. Any
 * pointer may be NULL: that tensor is not stored. */
typedef struct ref_edit_fwd32 {
    float *query, *key, *value, *attention_scores, *attention_probs, *attention_probs_dropped,
        *attention_output;
} ref_edit_fwd32;
typedef struct ref_edit_fwd64 {
    double *query, *key, *value, *attention_scores, *attention_probs, *attention_probs_dropped,
        *attention_output;
} ref_edit_fwd64;

/* The 8 outputs in double, in the spec's shapes: grad_hidden_states [B,T,1024],
 * grad_qkv_weight [3072,1024], grad_qkv_bias [3072], grad_out_weight
 * [1024,1024], grad_out_bias [1024], grad_edit_region_bias [16,P,P] (every
 * element written: zero outside [:T,:T]), grad_within/cross_edit_bias [16].
 * All required. grad_qkv [B,T,3072] is optional (NULL: kept internal): the
 * gradient of qkv before the projection, for checks. */
typedef struct ref_edit_grads {
    double *grad_hidden_states, *grad_qkv_weight, *grad_qkv_bias, *grad_out_weight, *grad_out_bias,
        *grad_edit_region_bias, *grad_within_edit_bias, *grad_cross_edit_bias;
    double *grad_qkv;
} ref_edit_grads;

/* Drawer flags. Default (0) is the public benchmark's recipe: hidden_states,
 * grad_output ~ randn; qkv/out weights ~ 0.02*randn; qkv/out biases 0;
 * edit_region_bias [:, :P, :P] (all of it), within, cross ~ 0.02*randn;
 * edit_region_mask 0/1 with probability 1/2; attention_mask all ones;
 * scale 1/8; dropout_p 0.1; dropout_mask = (rand > p) as 0/1 floats. */
enum {
    REF_EDIT_DRAW_MASK_ZEROS = 1u << 0, /* attention_mask 0 w.p. 1/4, key 0 always kept */
    REF_EDIT_DRAW_P0 = 1u << 1,         /* dropout_p 0, dropout_mask all ones */
    REF_EDIT_DRAW_BIASES = 1u << 2      /* qkv_bias, out_bias ~ 0.02*randn, not 0 */
};

/* Allocate (malloc) every array of *in for B, T (edit_region_bias as
 * [16,1024,1024]; dropout_mask always); fields zeroed first. Returns
 * ATTNBWD_OK, ATTNBWD_ERR_INVALID_ARGUMENT (B or T < 1, in NULL) or
 * ATTNBWD_ERR_OUT_OF_MEMORY (nothing left allocated). free: every array, NULL-safe. */
attnbwd_status ref_edit_inputs_alloc(int64_t B, int64_t T, ref_edit_inputs *in);
void ref_edit_inputs_free(ref_edit_inputs *in);
/* Allocate all 7 forward tensors of *f for B, T / free them. */
attnbwd_status ref_edit_fwd32_alloc(int64_t B, int64_t T, ref_edit_fwd32 *f);
void ref_edit_fwd32_free(ref_edit_fwd32 *f);

/* Fill every array of *in (allocated by the caller, sizes above with
 * P = 1024) and scale/dropout_p from seed: the same seed, B, T and flags give
 * the same bits whatever the thread count (one splitmix64-seeded xoshiro256**
 * stream per tensor row; normals by Box-Muller). */
attnbwd_status ref_edit_draw_inputs(int64_t B, int64_t T, uint64_t seed, unsigned flags,
                                    ref_edit_inputs *in);

/* The forward pass of the spec, computed in double, stored to o32 and/or o64
 * (either may be NULL):
 *   qkv = hidden_states @ qkv_weight^T + qkv_bias; column c = which*1024 + h*64 + d,
 *     which 0/1/2 = q/k/v (qkv_size = 3 x heads x head_dim in that order);
 *   scores[b,h,i,j] = (q_i . k_j)*scale + edit_region_bias[h,i,j] (0 when T > P)
 *     + within[h]*m_i*m_j + cross[h]*(m_i*(1-m_j) + (1-m_i)*m_j)   (m = edit_region_mask[b]);
 *   scores = -inf where attention_mask[b,j] == 0;
 *   probs = softmax over j; a row with every key masked would be NaN in PyTorch:
 *     here its probs (and so probs_dropped, its output row) are all 0;
 *   probs_dropped = probs * dropout_mask / (1-p)  (= probs, mask unread, when p == 0);
 *   attention_output[b,i,h*64+d] = sum_j probs_dropped[b,h,i,j] * v[b,h,j,d].
 * The out projection (output = attention_output @ out_weight^T + out_bias) is
 * not computed: the backward pass never needs it. attention_mask is compared
 * with 0.0f exactly; edit_region_mask and dropout_mask enter as their values
 * (the formulas above, exact for 0/1). Returns ATTNBWD_OK, ATTNBWD_ERR_INVALID_ARGUMENT (B, T < 1; a needed
 * input NULL; dropout_p outside [0, 1)) or ATTNBWD_ERR_OUT_OF_MEMORY. */
attnbwd_status ref_edit_forward(int64_t B, int64_t T, const ref_edit_inputs *in,
                                const ref_edit_fwd32 *o32, const ref_edit_fwd64 *o64);

/* Set the input pointers of *a (host pointers here) from in and f, as the
 * backward reads them; outputs and workspace are left NULL/0. */
void ref_edit_fill_args(const ref_edit_inputs *in, const ref_edit_fwd32 *f,
                        attnbwd_edit_attention_args *a);

/* The backward pass, following the spec line by line (double throughout):
 *   gA = grad_output @ out_weight (as [B,16,T,64]); grad_out_weight =
 *   grad_output^T @ attention_output; grad_out_bias = column sums of grad_output;
 *   per (b,h): gPd = gA v^T; gV = probs_dropped^T gA;
 *     gP = gPd * dropout_mask / (1-p)  (gP = gPd, dropout_mask unread, when p == 0);
 *     gS = probs * (gP - rowsum(gP * probs)), then 0 where attention_mask[b,j] == 0;
 *     grad_within[h] += sum gS*m_i*m_j; grad_cross[h] += sum gS*(m_i*(1-m_j)+(1-m_i)*m_j);
 *     grad_edit_region_bias[h, :T, :T] += gS (summed over b; zero everywhere else,
 *     all of it zero when T > P);
 *     gQ = (gS*scale) k; gK = (gS*scale)^T q;
 *   grad_qkv = gQ, gK, gV back in the qkv layout; grad_hidden_states = grad_qkv @
 *   qkv_weight; grad_qkv_weight = grad_qkv^T @ hidden_states; grad_qkv_bias = column sums.
 * Reads from a (host pointers): grad_output, hidden_states, edit_region_mask,
 * qkv_weight, out_weight, attention_mask, query, key, value, attention_probs,
 * attention_probs_dropped, attention_output, dropout_mask (only when p > 0),
 * scale, dropout_p. Never reads qkv_bias, out_bias, edit_region_bias,
 * within/cross_edit_bias, attention_scores, nor a's output pointers.
 * Relations relied on: none beyond the spec's own formulas (probs_dropped is
 * read for gV, probs and dropout_mask for gP/gS, as the spec writes them; they
 * are consistent when they come from ref_edit_forward). The sums over b are
 * done in order by the thread owning head h: results do not depend on the
 * thread count. Returns as ref_edit_forward. */
attnbwd_status ref_edit_backward(int64_t B, int64_t T, const attnbwd_edit_attention_args *a,
                                 const ref_edit_grads *g);

/* The same two with the position-table size P as a parameter (edit_region_bias
 * and grad_edit_region_bias are [16,P,P]; T > P: no position bias, its
 * gradient all zero). The plain calls use P = REF_EDIT_MAX_POS; a small P lets
 * a test reach the T > P path on tiny shapes. */
attnbwd_status ref_edit_forward_ex(int64_t B, int64_t T, int64_t P, const ref_edit_inputs *in,
                                   const ref_edit_fwd32 *o32, const ref_edit_fwd64 *o64);
attnbwd_status ref_edit_backward_ex(int64_t B, int64_t T, int64_t P,
                                    const attnbwd_edit_attention_args *a, const ref_edit_grads *g);

#endif
