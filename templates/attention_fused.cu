// The attention part of the edit-attention backward in one pass over the
// [B, 16, T, T] inputs, for one (B, T): each element of attention_probs and
// attention_probs_dropped is read once.
//
// A block owns (b, h) and a block of BJ keys j; it walks the query rows i in
// steps of BI = 64 and per step, on tensor cores:
//   gPd = gA_i v_j^T                       (gA = grad_output @ out_weight, per head)
//   gS  = Pd*gPd - P*D_i, 0 where attention_mask[b, j] == 0
//         (D_i = rowsum(Pd*gPd) = gA_i . attention_output_i, by attention_output = Pd v)
//   gV_j += Pd^T gA_i,  gK_j += gS^T q_i   (in registers: the block owns these keys)
//   gQ_i += scale gS k_j                   (summed over key blocks: red.add into grad_qkv)
//   grad_edit_region_bias[h, i, j] += gS   (summed over the batch: red.add)
//   within / cross partial sums of gS      (per block; added in order by ea_within_cross)
// P_STAGES 0: P and Pd of the next step load into registers in the middle of
// a step. P_STAGES 2 or 3: they go global -> shared with cp.async into a ring
// of that many buffers, issued at the top of the step P_STAGES - 1 steps
// before their use, so DRAM latency has one or two whole steps to hide in;
// the Pd buffer is then also the operand of gV (no copy to Ps). Rows start at
// (b, h, i) * T, 16-byte aligned only when T % 4 == 0; otherwise each row's
// copy starts at the 16-byte boundary at or before it and the row sits in its
// buffer shifted right by that row's start mod 4 (p_shift), so the copies stay
// 16 bytes wide.
// gQ and grad_edit_region_bias are the two sums that cross blocks. STORE_GS 0:
// float reductions in arrival order (red.add), so their last bits can vary
// from run to run. STORE_GS 1 (the default): the block writes its gS tile to
// gs [B, 16, T, GS_LD] instead (rows padded with zeros to GS_LD, a multiple
// of 4, for the 16-byte loads of the gQ product), and gQ = scale gS k and the
// bias sums run as their own deterministic kernels; the gQ and bias parts
// below are then left out.
namespace fa {
typedef long long i64;
constexpr i64 kB = {{B}}, kT = {{T}};
constexpr int kHeads = 16, kD = 64, kHid = 1024, kQkv = 3072, kPos = 1024;
constexpr int BJ = {{BJ}}, BI = 64, NT = 256, MODE = {{MODE}};
constexpr bool STORE_GS = {{STORE_GS}}, KV_SPLIT = {{KV_SPLIT}};
constexpr int P_STAGES = {{P_STAGES}};
constexpr bool P_SHIFT = P_STAGES && kT % 4 != 0;
constexpr i64 P_ELEMS = kB * kHeads * kT * kT;
// Where element 0 of global row `row` of P sits in its buffer row (block
// columns start at multiples of 32, so only the row's start matters).
__device__ __forceinline__ int p_shift(i64 row) {
    return P_SHIFT ? (int)(((unsigned long long)row * (unsigned long long)kT) & 3u) : 0;
}
constexpr i64 GS_LD = {{GS_LD}};
constexpr int NJ = (int)((kT + BJ - 1) / BJ);
// Shared-memory rows, padded so one warp's fragment reads spread over the
// banks: +8 for tiles read along their rows' index as k, +4 for tiles whose
// rows are m or n (two tiles are read both ways: at most 2-way conflicts).
constexpr int LD_K = kD + 8, LD_V = kD + 4, LD_Q = kD + 8, LD_GA = kD + 4, LD_S = BJ + 8;
// q_i and gA_i are double-buffered: step s+1's tiles load while step s computes.
// OFF_P: Pd for gV (P_STAGES 0), else the ring of P tiles; OFF_PD the ring of Pd tiles.
constexpr int P_BUFS = P_STAGES ? P_STAGES : 1;
constexpr int OFF_V = 0, OFF_Q = OFF_V + BJ * LD_V, OFF_GA = OFF_Q + 2 * BI * LD_Q, OFF_S = OFF_GA + 2 * BI * LD_GA,
              OFF_P = OFF_S + BI * LD_S, OFF_PD = OFF_P + P_BUFS * BI * LD_S,
              OFF_K = OFF_PD + (P_STAGES ? P_STAGES * BI * LD_S : 0),
              SMEM_FLOATS = OFF_K + (STORE_GS ? 0 : BJ * LD_K); // k_j only for gQ in this kernel

} // namespace fa

#if {{SYNC_PASS}} // else templates/attention_wg.cu's pass runs instead
// grid (NJ, B*16), 256 threads, fa::SMEM_FLOATS * 4 bytes of dynamic shared
// memory; its global loads run a step ahead of its products. {{MIN_BLOCKS}}
// block(s) per SM: two where the shared memory allows (bj = 32), for the
// latency of one block's barriers and loads to hide behind the other's work.
static_assert(fa::SMEM_FLOATS * 4 + 1024 + 512 <= 227 * 1024, "shared memory");
extern "C" __global__ void __launch_bounds__(256, {{MIN_BLOCKS}})
{{PREFIX}}_attention(const float *__restrict__ gA, const float *__restrict__ rowdot,
                     const float *__restrict__ query, const float *__restrict__ key, const float *__restrict__ value,
                     const float *__restrict__ probs, const float *__restrict__ probs_dropped,
                     const float *__restrict__ attention_mask, const float *__restrict__ edit_region_mask,
                     float *__restrict__ grad_qkv, float *__restrict__ grad_edit_region_bias,
                     float *__restrict__ partials, float *__restrict__ gs, float scale) {
    tc::pdl_enter();
    using namespace fa;
    extern __shared__ float4 smem4[];
    float *sm = reinterpret_cast<float *>(smem4);
    float *Ks = sm + OFF_K, *Vs = sm + OFF_V, *Ss = sm + OFF_S, *Ps = sm + OFF_P;
    __shared__ float scratch[NT / 32];
    __shared__ float keep_s[BJ], mj_s[BJ]; // per key: attention_mask != 0, edit_region_mask

    const int jb = blockIdx.x, bh = blockIdx.y, b = bh / kHeads, h = bh % kHeads;
    const i64 j0 = (i64)jb * BJ;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const i64 head_rows = (i64)bh * kT; // row (b, h, 0) of the [B, 16, T, *] tensors

    if (!STORE_GS) tc::copy_tile<BJ, kD, NT>(Ks, LD_K, key + (head_rows + j0) * kD, kD, 0, 0, kT - j0, kD);
    tc::copy_tile<BJ, kD, NT>(Vs, LD_V, value + (head_rows + j0) * kD, kD, 0, 0, kT - j0, kD);

    // Warp tiles. gPd [BI x BJ]: 4 x 2 warps of 16 x BJ/2. gQ [BI x 64]: 4 x 2
    // warps of 16 x 32. gV, gK [BJ x 64]: KV_SPLIT 0, every warp a 16-row
    // slice of both, (BJ/16) x (8/(BJ/16)) warps; KV_SPLIT 1, warps 0-3 gV and
    // warps 4-7 gK, 2 x 2 warps of (BJ/2) x 32 each, so a fragment read from
    // shared memory feeds more MMAs (2 shared wavefronts per MMA instead of 3
    // at BJ = 64, 3 instead of 4 at BJ = 32).
    constexpr int FN1 = BJ / 16;
    const int wm1 = (warp / 2) * 16, wn1 = (warp % 2) * (BJ / 2);
    constexpr int FM2 = KV_SPLIT ? BJ / 32 : 1, WN2 = KV_SPLIT ? 2 : 8 / (BJ / 16), FN2 = kD / 8 / WN2;
    const int wq = KV_SPLIT ? warp % 4 : warp;
    const int wm2 = (wq / WN2) * 16 * FM2, wn2 = (wq % WN2) * (kD / WN2);
    const bool owns_k = KV_SPLIT && warp >= 4; // KV_SPLIT: accV holds gK in these warps
    const int wm4 = (warp / 2) * 16, wn4 = (warp % 2) * 32;

    for (int c = tid; c < BJ; c += NT) {
        const i64 j = j0 + c;
        keep_s[c] = j < kT && attention_mask[b * kT + j] != 0.f ? 1.f : 0.f;
        mj_s[c] = j < kT ? edit_region_mask[b * kT + j] : 0.f;
    }

    float accV[FM2][FN2][4], accK[1][FN2][4]; // KV_SPLIT: accK unused
    tc::zero(accV);
    tc::zero(accK);
    float within = 0.f, cross = 0.f;

    // Probabilities at this thread's gPd accumulators, with the row sums and
    // masks of its rows: loaded one step ahead, so their DRAM latency hides
    // behind the current step's products.
    float p[FN1][4], pd[FN1][4], d_row[2], mi[2];
    auto load_probs = [&](i64 i0) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const i64 i = i0 + wm1 + g + 8 * hh;
            d_row[hh] = i < kT ? rowdot[head_rows + i] : 0.f;
            mi[hh] = i < kT ? edit_region_mask[b * kT + i] : 0.f;
            if constexpr (P_STAGES) continue; // P and Pd come through shared memory
#pragma unroll
            for (int f = 0; f < FN1; ++f)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const i64 j = j0 + wn1 + 8 * f + 2 * t + e;
                    const bool ok = i < kT && j < kT;
                    const i64 at = (head_rows + i) * kT + j;
                    p[f][2 * hh + e] = ok ? probs[at] : 0.f;
                    pd[f][2 * hh + e] = ok ? probs_dropped[at] : 0.f;
                }
        }
    };
    load_probs(0);

    auto load_step = [&](i64 i0, int buf) {
        // Rows at or past T read as zeros.
        tc::copy_tile<BI, kD, NT>(sm + OFF_GA + buf * BI * LD_GA, LD_GA, gA + (b * kT + i0) * kHid + h * kD, kHid, 0,
                                  0, kT - i0, kD);
        tc::copy_tile<BI, kD, NT>(sm + OFF_Q + buf * BI * LD_Q, LD_Q, query + (head_rows + i0) * kD, kD, 0, 0,
                                  kT - i0, kD);
    };
    // P and Pd of the step at row i0 into ring buffer `pb`; rows at or past T read as zeros.
    auto load_p = [&](i64 i0, int pb) {
        if (i0 >= kT) return;
        float *dp = sm + OFF_P + pb * BI * LD_S, *dpd = sm + OFF_PD + pb * BI * LD_S;
        if constexpr (!P_SHIFT) { // keys at or past T read as zeros too
            const i64 at = (head_rows + i0) * kT + j0;
            tc::copy_tile<BI, BJ, NT>(dp, LD_S, probs + at, kT, 0, 0, kT - i0, kT - j0);
            tc::copy_tile<BI, BJ, NT>(dpd, LD_S, probs_dropped + at, kT, 0, 0, kT - i0, kT - j0);
        } else {
            // BJ/4 + 1 chunks cover a shifted row. Keys at or past T read the next
            // row's (finite) values: gS there is multiplied by keep_s = 0 and
            // those gV rows are not stored. Past the tensor's end: zeros.
            constexpr int CPR = BJ / 4 + 1;
            for (int q = tid; q < BI * CPR; q += NT) {
                const int r = q / CPR, c = q % CPR;
                const i64 row = head_rows + i0 + r;
                const i64 start = row * kT + j0 - p_shift(row) + 4 * c;
                const i64 left = P_ELEMS - start;
                const int bytes = i0 + r < kT ? (int)(left >= 4 ? 16 : left > 0 ? 4 * left : 0) : 0;
                tc::cp_async16_bytes(dp + r * LD_S + 4 * c, bytes ? probs + start : probs, bytes);
                tc::cp_async16_bytes(dpd + r * LD_S + 4 * c, bytes ? probs_dropped + start : probs_dropped, bytes);
            }
        }
    };
    load_step(0, 0);
    tc::cp_async_commit(); // with k_j, v_j
    // Groups, oldest first: [k v gA q of step 0] [P of steps 0 .. P_STAGES-2], then per
    // step s [gA q of s+1] [P of s+P_STAGES-1]; step s needs the older of its
    // two groups done, which leaves P_STAGES newer ones in flight.
    if constexpr (P_STAGES) {
#pragma unroll
        for (int st = 0; st < P_STAGES - 1; ++st) {
            load_p((i64)st * BI, st);
            tc::cp_async_commit();
        }
    }

    for (i64 i0 = 0; i0 < kT; i0 += BI) {
        const i64 step = i0 / BI;
        const int buf = (int)(step % 2), pbuf = (int)(step % P_BUFS);
        const float *GAs = sm + OFF_GA + buf * BI * LD_GA, *Qs = sm + OFF_Q + buf * BI * LD_Q;
        const float *Pt = sm + OFF_P + pbuf * BI * LD_S, *Pdt = sm + OFF_PD + pbuf * BI * LD_S;
        // The other buffer (and ring buffer (step-1) % P_STAGES) was last read
        // before the previous step's final barrier.
        if (i0 + BI < kT) load_step(i0 + BI, buf ^ 1);
        tc::cp_async_commit(); // possibly empty: keeps the groups' count per step fixed
        if constexpr (P_STAGES) {
            load_p(i0 + (P_STAGES - 1) * BI, (int)((step + P_STAGES - 1) % P_STAGES));
            tc::cp_async_commit();
            tc::cp_async_wait<P_STAGES>();
        } else {
            tc::cp_async_wait<1>(); // this step's tiles; the next step's may still be in flight
        }
        __syncthreads();

        // gPd = gA_i v_j^T: A[m=i][k=d] = GAs[i][d], B[k=d][n=j] = Vs[j][d].
        float acc[1][FN1][4];
        tc::zero(acc);
#pragma unroll
        for (int k = 0; k < kD; k += tc::kstep<MODE>::value)
            tc::warp_mma<MODE>(acc, k, [&](int m, int kk) { return GAs[(wm1 + m) * LD_GA + kk]; },
                               [&](int kk, int n) { return Vs[(wn1 + n) * LD_V + kk]; });

        // gS, its bias sums, and Pd / gS into shared memory for the products below.
#pragma unroll
        for (int f = 0; f < FN1; ++f)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const int r = wm1 + g + 8 * hh, c = wn1 + 8 * f + 2 * t;
                float s[2];
                if constexpr (P_SHIFT) { // odd offsets: no 8-byte reads
                    const int at = r * LD_S + p_shift(head_rows + i0 + r) + c;
                    p[f][2 * hh] = Pt[at], p[f][2 * hh + 1] = Pt[at + 1];
                    pd[f][2 * hh] = Pdt[at], pd[f][2 * hh + 1] = Pdt[at + 1];
                } else if constexpr (P_STAGES) {
                    const float2 pp = *reinterpret_cast<const float2 *>(Pt + r * LD_S + c);
                    const float2 qq = *reinterpret_cast<const float2 *>(Pdt + r * LD_S + c);
                    p[f][2 * hh] = pp.x, p[f][2 * hh + 1] = pp.y, pd[f][2 * hh] = qq.x, pd[f][2 * hh + 1] = qq.y;
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int q = 2 * hh + e;
                    const float mj = mj_s[c + e];
                    s[e] = keep_s[c + e] * (pd[f][q] * acc[0][f][q] - p[f][q] * d_row[hh]);
                    within = fmaf(s[e], mi[hh] * mj, within);
                    cross = fmaf(s[e], mi[hh] + mj - 2.f * mi[hh] * mj, cross);
                }
                Ss[r * LD_S + c] = s[0];
                Ss[r * LD_S + c + 1] = s[1];
                if constexpr (!P_STAGES) {
                    Ps[r * LD_S + c] = pd[f][2 * hh];
                    Ps[r * LD_S + c + 1] = pd[f][2 * hh + 1];
                }
                const i64 i = i0 + r, j = j0 + c;
                if (STORE_GS) {
                    // j is even and GS_LD a multiple of 4: the pair never straddles a row's end.
                    if (i < kT && j < GS_LD)
                        *reinterpret_cast<float2 *>(gs + (head_rows + i) * GS_LD + j) = make_float2(s[0], s[1]);
                } else if (i < kT && j < kT) {
                    float *dst = grad_edit_region_bias + ((i64)h * kPos + i) * kPos + j;
                    if (j + 1 < kT) tc::red_add2(dst, s[0], s[1]);
                    else tc::red_add(dst, s[0]);
                }
            }
        if (i0 + BI < kT) load_probs(i0 + BI); // p, pd, d_row, mi are consumed: refill them
        __syncthreads();
        const float *PdA = P_STAGES ? Pdt : Ps; // Pd as gV's operand

        // gV_j += Pd^T gA_i and gK_j += gS^T q_i: A[m=j][k=i] = Ps/Ss[i][j].
        // (Two loops, not one: fewer fragments live next to the prefetched probabilities.)
        if constexpr (KV_SPLIT) {
            const float *Xa = owns_k ? Ss : PdA, *Xb = owns_k ? Qs : GAs;
            const int ldb = owns_k ? LD_Q : LD_GA;
            const bool shifted = P_SHIFT && !owns_k; // Pd's rows sit shifted, gS's do not
#pragma unroll
            for (int k = 0; k < BI; k += tc::kstep<MODE>::value)
                tc::warp_mma<MODE>(accV, k, [&](int m, int kk) {
                    return Xa[kk * LD_S + (shifted ? p_shift(head_rows + i0 + kk) : 0) + wm2 + m]; },
                                   [&](int kk, int n) { return Xb[kk * ldb + wn2 + n]; });
        } else {
#pragma unroll
            for (int k = 0; k < BI; k += tc::kstep<MODE>::value)
                tc::warp_mma<MODE>(accV, k, [&](int m, int kk) {
                    return PdA[kk * LD_S + p_shift(head_rows + i0 + kk) + wm2 + m]; },
                                   [&](int kk, int n) { return GAs[kk * LD_GA + wn2 + n]; });
#pragma unroll
            for (int k = 0; k < BI; k += tc::kstep<MODE>::value)
                tc::warp_mma<MODE>(accK, k, [&](int m, int kk) { return Ss[kk * LD_S + wm2 + m]; },
                                   [&](int kk, int n) { return Qs[kk * LD_Q + wn2 + n]; });
        }
        if (!STORE_GS) {
        // gQ_i += scale gS k_j: A[m=i][k=j] = Ss[i][j], B[k=j][n=d] = Ks[j][d].
        float accQ[1][4][4];
        tc::zero(accQ);
#pragma unroll
        for (int k = 0; k < BJ; k += tc::kstep<MODE>::value)
            tc::warp_mma<MODE>(accQ, k, [&](int m, int kk) { return Ss[(wm4 + m) * LD_S + kk]; },
                               [&](int kk, int n) { return Ks[kk * LD_K + wn4 + n]; });
#pragma unroll
        for (int f = 0; f < 4; ++f)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const i64 i = i0 + wm4 + g + 8 * hh;
                if (i < kT)
                    tc::red_add2(grad_qkv + (b * kT + i) * kQkv + h * kD + wn4 + 8 * f + 2 * t,
                                 scale * accQ[0][f][2 * hh], scale * accQ[0][f][2 * hh + 1]);
            }
        }
        __syncthreads(); // the next step overwrites Ss, Ps and its loads this buffer
    }

    // gK and gV of this block's keys, straight into the [B, T, 3072] layout.
#pragma unroll
    for (int i = 0; i < FM2; ++i)
#pragma unroll
        for (int f = 0; f < FN2; ++f)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const i64 j = j0 + wm2 + 16 * i + g + 8 * hh;
                if (j >= kT) continue;
                float *row = grad_qkv + (b * kT + j) * kQkv + h * kD + wn2 + 8 * f + 2 * t;
                const float v0 = accV[i][f][2 * hh], v1 = accV[i][f][2 * hh + 1];
                if constexpr (KV_SPLIT) {
                    if (owns_k) *reinterpret_cast<float2 *>(row + kHid) = make_float2(scale * v0, scale * v1);
                    else *reinterpret_cast<float2 *>(row + 2 * kHid) = make_float2(v0, v1);
                } else {
                    *reinterpret_cast<float2 *>(row + kHid) =
                        make_float2(scale * accK[0][f][2 * hh], scale * accK[0][f][2 * hh + 1]);
                    *reinterpret_cast<float2 *>(row + 2 * kHid) = make_float2(v0, v1);
                }
            }
    if (STORE_GS) return; // the bias kernel sums within / cross from gs
    within = tc::block_sum(within, scratch);
    cross = tc::block_sum(cross, scratch);
    if (tid == 0) {
        partials[2 * ((i64)bh * NJ + jb)] = within;
        partials[2 * ((i64)bh * NJ + jb) + 1] = cross;
    }
}
#endif

// D[b, h, i] = gA[b, i, h] . attention_output[b, i, h] over the 64 dims of the
// head, for the units w = (b * T + i) * 16 + h: a half-warp per unit, 16 bytes
// a lane, two adjacent units per half-warp with all four loads issued first
// (a stream of 2 B T 4 KiB, bound by the loads in flight). ROW_NORMS (gS
// stored in fp16): |gA[b, i, h]|^2 into gan too, for gS's scale.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_rowdot(const float *__restrict__ gA, const float *__restrict__ attention_output, float *__restrict__ rowdot,
                  float *__restrict__ gan) {
    tc::pdl_enter();
    using namespace fa;
    constexpr int kUnits = 2;
    const i64 w0 = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / 16 * kUnits;
    const int l = threadIdx.x % 16;
    float4 x[kUnits], y[kUnits];
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
        const bool ok = w0 + u < kB * kT * kHeads; // past the end: zeros, and the lanes still shuffle
        x[u] = ok ? *reinterpret_cast<const float4 *>(gA + (w0 + u) * kD + 4 * l) : make_float4(0.f, 0.f, 0.f, 0.f);
        y[u] = ok ? *reinterpret_cast<const float4 *>(attention_output + (w0 + u) * kD + 4 * l)
                  : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
        const float s = tc::head_dot4(x[u], y[u]);
        const i64 w = w0 + u, b = w / (kT * 16), i = (w / 16) % kT, h = w % 16;
        if (l == 0 && w < kB * kT * kHeads) rowdot[(b * 16 + h) * kT + i] = s;
        if ({{ROW_NORMS}}) {
            const float n2 = tc::head_dot4(x[u], x[u]);
            if (l == 0 && w < kB * kT * kHeads) gan[(b * 16 + h) * kT + i] = n2;
        }
    }
}

// Zeros in `cols` (a multiple of 4) columns of `rows` rows with leading dimension ld.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_zero(float *__restrict__ x, long long rows, int cols, long long ld) {
    tc::pdl_enter();
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x, per_row = cols / 4;
    if (q >= rows * per_row) return;
    *reinterpret_cast<float4 *>(x + (q / per_row) * ld + 4 * (q % per_row)) = make_float4(0.f, 0.f, 0.f, 0.f);
}

// One block per head: the attention kernel's partials of that head, summed
// over (b, key block) in a fixed order.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_within_cross(const float *__restrict__ partials, float *__restrict__ grad_within_edit_bias,
                        float *__restrict__ grad_cross_edit_bias) {
    tc::pdl_enter();
    using namespace fa;
    __shared__ float scratch[NT / 32];
    const int h = blockIdx.x;
    float w = 0.f, c = 0.f;
    for (i64 q = threadIdx.x; q < kB * NJ; q += NT) {
        const i64 bh = (q / NJ) * kHeads + h, at = 2 * (bh * NJ + q % NJ);
        w += partials[at];
        c += partials[at + 1];
    }
    w = tc::block_sum(w, scratch);
    c = tc::block_sum(c, scratch);
    if (threadIdx.x == 0) {
        grad_within_edit_bias[h] = w;
        grad_cross_edit_bias[h] = c;
    }
}
