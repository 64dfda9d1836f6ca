// The attention pass on wgmma (see attention_wg.cu), tile att_kb=1: a block
// owns (b, h) and 64 keys j (grid (NJ, B*16), 256 threads). Its two
// warpgroups each walk their own 32 of every 64 query rows i, with their own
// loads, ring and barriers; they share only v_j, and add their gV and gK once
// at the end (a fixed order: deterministic). gS goes to gs [B, 16, GS_ROWS, GS_LD]
// (rows padded with zeros to GS_LD) for the gQ product and the bias sums.
// The block is rows_block, called by the kernel (attention_wg_kernel.cu)
// with its key block and (b, h).
namespace fw {
namespace rows_org {
constexpr int BI = 64, HALF = 32;
// Shared memory in floats, from a 1024-byte boundary.
//   V     v_j [64 j][64 d]: two tiles of 32 d, rounded once
//   V16   (F16) v_j [64 j][64 d] in fp16, one tile, converted from V once
//   per warpgroup two step buffers (attention_wg.cu's GA, GAT, QT), each WG_BUF floats
//   per warpgroup: a ring of P_STAGES (P, Pd) pairs of [32 i][LD_P]
//   per warpgroup: R, the gA and q rows of the next step as the TMA brings
//   them (four boxes of [32 i][32 d] in the 128-byte swizzle)
//   barriers of 8 bytes: per warpgroup and ring slot (P_TMA), then one per warpgroup for R
constexpr int OFF_V = 0, OFF_V16 = 2 * SUB, OFF_BUF = OFF_V16 + (F16 ? SUB : 0);
constexpr int OFF_P = OFF_BUF + 4 * WG_BUF, OFF_R = OFF_P + 2 * P_STAGES * 2 * P_TILE, OFF_BAR = OFF_R + 2 * 4 * BOX,
              N_PBAR = P_TMA ? 2 * P_STAGES : 0, SMEM_FLOATS = OFF_BAR + 2 * (N_PBAR + 2);
static_assert(OFF_R % 256 == 0 && OFF_BUF % 256 == 0, "swizzled tiles on 1024-byte boundaries (128-byte swizzle)");
static_assert(OFF_P % 32 == 0, "TMA boxes on 128-byte boundaries");
static_assert(SMEM_FLOATS * 4 + 1024 <= 227 * 1024, "shared memory");

#ifndef TC_EMU // tests/emu/cuda_on_cpu.h has a CPU form
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }
#endif
} // namespace rows_org

// Key block jb (64 keys) of (b, h) = bh.
__device__ __forceinline__ void rows_block(FW_BLOCK_PARAMS, int jb, int bh) {
    using namespace rows_org;
    unsigned sm_s;
    float *sm = aligned_smem(sm_s);

    const int b = bh / kHeads, h = bh % kHeads;
    const i64 j0 = (i64)jb * BJ, head_rows = (i64)bh * kT; // row (b, h, 0) of the [B, 16, T, *] tensors
    // w from a shuffle of lane 0: the compiler then knows it is the same in a
    // warp and keeps it, and the buffer addresses and descriptors made from it,
    // in uniform registers.
    const int tid = threadIdx.x, w = __shfl_sync(0xffffffffu, tid / 128, 0), wt = tid % 128, q = wt / 32,
              lane = tid % 32, g = lane / 4, t = lane % 4;
    float *V = sm + OFF_V, *ring = sm + OFF_P + w * P_STAGES * 2 * P_TILE;
    // Barriers: (P_TMA) one per warpgroup and ring slot, then one per warpgroup for its rows in R.
    unsigned long long *bars = reinterpret_cast<unsigned long long *>(sm + OFF_BAR), *full = bars + w * P_STAGES,
                       *rows_full = bars + N_PBAR + w;
    if (tid < N_PBAR + 2) {
        tc::mbar_init(bars + tid, 1);
        tc::mbar_init_fence();
    }
    auto wg_buf = [&](int buf) { return sm + OFF_BUF + (2 * w + buf) * WG_BUF; };
    auto wg_buf_s = [&](int buf) { return sm_s + 4u * (OFF_BUF + (2 * w + buf) * WG_BUF); };

    // This thread's keys (rows of gPd^T): j = 16 q + g + 8 hh.
    float keep[2], mj[2]; // mj: their edit masks (WC)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        const i64 j = j0 + 16 * q + g + 8 * hh;
        keep[hh] = j < kT && attention_mask[b * kT + j] != 0.f ? 1.f : 0.f;
        mj[hh] = WC && j < kT ? edit_region_mask[b * kT + j] : 0.f;
    }

    // The gA and q rows of this warpgroup for a step (32 rows x 64 d each)
    // into R by the TMA: four boxes of 32 rows x 32 floats in the 128-byte
    // swizzle (gA d 0-31, 32-63, then q's), asked for by the warpgroup's first
    // thread a step ahead, counted on rows_full. Rows past T: q's are other
    // rows' finite values (times a zero gS), gA's are zeroed in stage_store.
    const unsigned R_s = sm_s + 4u * (OFF_R + w * 4 * BOX);
    auto load_rows = [&](int i0) {
        if (i0 >= kT || wt != 0) return;
        tma_rows(sm + OFF_R + w * 4 * BOX, &map_ga, &map_q, rows_full, (int)(b * kT + i0 + HALF * w), (int)(head_rows + i0 + HALF * w), h);
    };
    // This thread's pass p reads tile row r = lane / 2 + 16 (p % 2) (query
    // row perm(r) of the step), floats c0 + 32 (p / 2) .. + 3, which makes the
    // transposed stores below conflict-free: byte offsets in R for p = 0, 1.
    const int c0 = 4 * (2 * q + lane % 2);
    unsigned rd_off[2];
#pragma unroll
    for (int pp = 0; pp < 2; ++pp) {
        const int m = perm(lane / 2 + 16 * pp);
        rd_off[pp] = 4 * sw(m, c0);
    }
    // Byte offsets of this thread's stores in a step buffer, for pass p = 0:
    // GA's 16 bytes, and GAT's four (e) of row r + 16 pp. Pass p adds
    // constants: p / 2 the next 32 d (GA's second tile, GAT rows + 32).
    const int sr = lane / 2, sc4 = c0 / 4;
    const unsigned st_ga = 4 * (GA + sw(sr, 4 * sc4));
    unsigned st_gat[2][4];
#pragma unroll
    for (int pp = 0; pp < 2; ++pp)
#pragma unroll
        for (int e = 0; e < 4; ++e) st_gat[pp][e] = 4 * (GAT + sw(4 * sc4 + e, ipos(sr + 16 * pp)));
    // From R (the rows of the step at i0) into step buffer B, rounded to TF32 (F16: in fp16).
    // `last`: the step runs past T, and gA's rows there must be zeros.
    auto stage_store = [&](unsigned B, int i0, bool last) {
        if constexpr (F16) { // two halves of 16 rows (attention_wg.cu's stage_f16)
#pragma unroll
            for (int hp = 0; hp < 2; ++hp) {
                const int c = f16_stage_row(hp, lane);
                const int r0 = i0 + HALF * w;
                stage_f16(R_s, B, hp, q, lane, last && r0 + perm(c) >= kT, last && r0 + perm(c + 1) >= kT);
            }
            return;
        }
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const unsigned at = R_s + rd_off[p % 2] + 4 * BOX * (p / 2);
            float4 x = lds128(at);
            const float4 y = lds128(at + 4 * 2 * BOX);
            if (last && i0 + HALF * w + perm(lane / 2 + 16 * (p % 2)) >= kT) x = make_float4(0.f, 0.f, 0.f, 0.f);
            const uint4 a = make_uint4(tc::to_tf32(x.x), tc::to_tf32(x.y), tc::to_tf32(x.z), tc::to_tf32(x.w));
            const uint4 k = make_uint4(tc::to_tf32(y.x), tc::to_tf32(y.y), tc::to_tf32(y.z), tc::to_tf32(y.w));
            sts128(B + st_ga + 4 * (16 * 32 * (p % 2) + HALF * 32 * (p / 2)), a);
            const unsigned av[4] = {a.x, a.y, a.z, a.w}, kv[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const unsigned at = B + st_gat[p % 2][e] + 4 * 32 * 32 * (p / 2);
                sts32(at, av[e]);
                sts32(at + 4 * (QT - GAT), kv[e]);
            }
        }
    };
#if {{P_TMA}}
    // P and Pd of this warpgroup's rows of the step at i0 into ring slot
    // `slot`: four boxes of 8 x 68 each (see the top), asked for by the
    // warpgroup's first thread, counted in bytes on the slot's barrier.
    auto load_p = [&](int i0, int slot) {
        if (i0 >= kT || wt != 0) return;
        tma_p(ring + slot * 2 * P_TILE, &map_p, &map_pd, full + slot, head_rows + i0 + HALF * w, j0);
    };
#else
    // P and Pd of this warpgroup's rows of the step at i0 into ring slot `slot`;
    // rows at or past T read as zeros (see attention_fused.cu's load_p).
    auto load_p = [&](int i0, int slot) {
        if (i0 >= kT) return;
        cp_p(ring + slot * 2 * P_TILE, probs, probs_dropped, head_rows, i0 + HALF * w, j0, wt);
    };
#endif
    // Row sums D_i: lane l loads row 32 w + l of the step; the thread's columns
    // of gPd^T (i = 32 w + 8 n + 2 t + e) take theirs by shuffle.
    // WC: the row's edit mask too, in ml.
    float dl, ml = 0.f;
    auto load_d = [&](int i0) {
        const int i = i0 + HALF * w + perm(lane);
        dl = i < kT ? rowdot[head_rows + i] : 0.f;
        if constexpr (WC) ml = i < kT ? edit_region_mask[b * kT + i] : 0.f;
    };
    // gS goes to gs row i0 + 32 w + perm(8 n + 2 t + e), column j0 + 16 q + g + 8 hh.
    const i64 gs_base = ((i64)bh * GS_ROWS + HALF * w + perm(2 * t)) * GS_LD + j0 + 16 * q + g;
    const bool gs_col_ok[2] = {j0 + 16 * q + g < GS_LD, j0 + 16 * q + g + 8 < GS_LD};
    // OUT0: batch row 0's gS also to the output, at the same rows and keys (all inside its 1024 columns).
    const i64 out0_base = ((i64)h * kPos + HALF * w + perm(2 * t)) * kPos + j0 + 16 * q + g;
    const bool out0_col_ok[2] = {true, true};

    // Prologue: v of the block's 64 keys, the first steps' loads (attention_wg.cu).
    __shared__ float maxima[3][8]; // GS_HALF: per warp the largest |gA_i|^2, |D_i|, |v_j|^2
    pass_prologue<64, 256, BI>(V, sm + OFF_V16, value, head_rows, j0, gan, rowdot, maxima, rows_full, load_rows, load_p,
                               load_d);
    stage_store(wg_buf_s(0), 0, BI > kT);
    tc::fence_async_shared();
    __syncthreads(); // v is shared by both warpgroups

    // gS's scale (GS_HALF): the block's keys' largest |v_j|^2, four threads a key.
    float gsf = 1.f;
    if constexpr (GS_HALF) {
        float v2 = v_sq_part(sm_s + 4u * OFF_V, SUB, tid / 4, 16 * (tid % 4), 16);
        v2 += __shfl_xor_sync(0xffffffffu, v2, 1);
        const int e = gs_block_exponent(maxima, v2 + __shfl_xor_sync(0xffffffffu, v2, 2), 0, 8,
                                        dropout_p); // the block's keys
        gsf = tc::pow2(e);
        if (tid == 0) gsinv[(i64)bh * NJ + jb] = tc::pow2(-e);
    }

    // Descriptors of v_j (F16: its fp16 tile) and of this warpgroup's buffer 0; buffer 1 is WG_BUF floats on.
    const unsigned long long dV = tc::wg_desc(F16 ? sm + OFF_V16 : V), dB0 = tc::wg_desc(wg_buf(0));
    // Byte offsets in a ring slot of this thread's P at accumulator (n, x) for
    // x = e (x = e + 2 is 8 keys on): the same every step, as the shifts are
    // (i0 and 32 w are multiples of 4, and i0 T % 4 == 0).
    unsigned p_off[4][2];
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int r = 8 * n + 2 * t + e, j = 16 * q + g;
            p_off[n][e] = 4 * (P_TMA ? p_tma_at(perm(r), j, row_shift(head_rows + 2 * (n / 2) + e)) // box perm(r) % 4
                                     : r * LD_P + p_shift(head_rows + HALF * w + r) + j);
        }
    float accV[32], accK[32];
#pragma unroll
    for (int x = 0; x < 32; ++x) accV[x] = accK[x] = 0.f;
    float wca[2] = {0.f, 0.f}, wcc[2] = {0.f, 0.f}; // WC: this thread's sums (wc_add)

    for (int i0 = 0; i0 < kT; i0 += BI) {
        const int step = (int)(i0 / BI), buf = step % 2, slot = step % P_STAGES;
        const unsigned long long dB = tc::wg_desc_at(dB0, buf * WG_BUF);
        if (!P_TMA) tc::cp_async_wait<P_STAGES - 2>(); // this step's P and Pd (and older)
        wg_bar(1 + w); // ... and this step's buffers (stored last step) are in place; slot step-1 and R are read
        load_rows(i0 + BI);
        load_p(i0 + (P_STAGES - 1) * BI, (step + P_STAGES - 1) % P_STAGES);
        if (!P_TMA) tc::cp_async_commit(); // possibly empty: keeps the count of groups per step fixed

        // gPd^T = v_j gA_i^T over d.
        float acc[16];
        issue_gpd<SUB>(acc, dV, dB);

        // While the tensor cores run: this step's P, Pd at this thread's (i, j),
        // and the next step's row sums.
        const unsigned Pt = sm_s + 4u * (OFF_P + (w * P_STAGES + slot) * 2 * P_TILE); // Pd: P_TILE floats on
        float p[4][4], pd[4][4], d[4][2];
        if (P_TMA) tc::mbar_wait(full + slot, (step / P_STAGES) & 1);
        read_p(p, pd, Pt, [&](int n, int e) { return p_off[n][e]; });
        shuffle_d(d, dl, t);
        const float mrow = ml; // this step's, before load_d takes the next
        const bool more = i0 + BI < kT;
        if (more) load_d(i0 + BI);
        tc::wg_wait<0>(); // gPd^T, and the last step's gV and gK

        // gS^T, then the gV and gK products issued, and gS to gs while the
        // tensor cores run. Only the last row block and the last key block
        // test their ends: the others store unguarded.
        float s[4][4];
        grad_scores(s, acc, p, pd, d, keep);
        if constexpr (WC) wc_add(wca, wcc, s, mrow, t);
        issue_gv_gk(accV, accK, pd, s, dB);
        store_gs(gs + gs_base + (i64)i0 * GS_LD, s, i0 + BI <= kT && j0 + BJ <= GS_LD, i0 + HALF * w, t, gs_col_ok, gsf);
        if (OUT0 && b == 0)
            store_gs<kPos, float>(out0 + out0_base + (i64)i0 * kPos, s, i0 + BI <= kT, i0 + HALF * w, t, out0_col_ok, gsf);

        // The next step's B tiles, asked of the TMA at the top of this step,
        // from R into the other buffer, last read by the previous step's
        // products (done: the wait above).
        if (more) {
            tc::mbar_wait(rows_full, (step + 1) & 1);
            if (i0 + 2 * BI > kT) stage_store(wg_buf_s(buf ^ 1), i0 + BI, true);
            else stage_store(wg_buf_s(buf ^ 1), i0 + BI, false);
        }
        tc::fence_async_shared();
    }
    tc::wg_wait<0>();
    tc::cp_async_wait<0>();

    // WC: the block's key block's within/cross sums, both warpgroups' rows (maxima is free now).
    if constexpr (WC) {
        const float2 r = wc_group_sums<8>(wca, wcc, mj, maxima);
        if (tid == 0) wc_store(wc_partials, (i64)bh * NJ + jb, r);
    }

    // gV and gK: each warpgroup holds the sums over its half of the rows i, in
    // the same accumulator layout. Warpgroup 1 hands its gV to 0, 0 its gK to 1.
    __syncthreads(); // every buffer is free
    float *X = sm + OFF_BUF;
    auto hand = [&](const float(&a)[32]) {
#pragma unroll
        for (int x = 0; x < 32; ++x) X[(w * 32 + x) * 128 + wt] = a[x];
    };
    auto finish = [&](const float(&a)[32], int col, float f) {
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const i64 j = j0 + 16 * q + g + 8 * hh;
                const int x = 4 * n + 2 * hh;
                const float *o = X + ((1 - w) * 32 + x) * 128 + wt; // the other warpgroup's sums
                // Rows i of warpgroup 0 first, then 1: one order for both.
                const float v0 = w == 0 ? a[x] + o[0] : o[0] + a[x];
                const float v1 = w == 0 ? a[x + 1] + o[128] : o[128] + a[x + 1];
                if (j < kT)
                    *reinterpret_cast<float2 *>(grad_qkv + (b * kT + j) * kQkv + col + h * kD + 8 * n + 2 * t) =
                        make_float2(f * v0, f * v1);
            }
    };
    if (w == 0) hand(accK);
    else hand(accV);
    __syncthreads();
    if (w == 0) finish(accV, 2 * kHid, 1.f); // gV, gK in grad_qkv's [B, T, 3072]
    else finish(accK, kHid, scale);
}
} // namespace fw
