// The attention pass on wgmma (see attention_wg.cu), tile att_kb=2: a block
// owns (b, h) and two blocks of 64 keys j, one a warpgroup (grid
// (ceil(NJ / 2), B*16), 256 threads). The warpgroups walk the query rows i
// together, 32 a step: each step's gA and q rows come once for both (by the
// TMA into R, then rounded and transposed into a step buffer, each warpgroup
// half of it), while each has its own v_j, P ring and barriers, and sums its
// own gV and gK (in row order: deterministic). Against att_kb=1 each warp
// stages half as much, and a block has twice the work for its prologue. A
// warpgroup past the last key block only stages. (Three warpgroups, three key
// blocks, fit in shared memory too, but were slower: docs/benchmarks.md.) gS
// goes to gs [B, 16, GS_ROWS, GS_LD] (rows padded with zeros to GS_LD) for
// the gQ product and the bias sums. The block is keys_block, called by the
// kernel (attention_wg_kernel.cu) with its pair of key blocks and (b, h).
namespace fw {
namespace keys_org {
// Two warpgroups, 32 rows a step, three step buffers (see the step's end).
constexpr int NW = 2, NT = NW * 128, BI = 32, BUFS = 3;
// The thread of a warpgroup that asks the TMA for its P and Pd: 0, or
// (p_issuer=1) the first of its second warp, so that the rows' copies (asked
// for by thread 0 of the block) and warpgroup 0's are issued side by side.
constexpr int P_ISSUER = {{P_ISSUER}} ? 32 : 0;
// Shared memory in floats, from a 1024-byte boundary.
//   V     v of the block's NW x 64 keys, rounded once: two tiles of [NW x 64 j][32 d]
//         (d 0-31, then 32-63); warpgroup w's v_j are rows 64 w .. 64 w + 63 of each
//   BUFS step buffers (attention_wg.cu's GA, GAT, QT), each WG_BUF floats
//   per warpgroup: a ring of P_STAGES (P, Pd) pairs of [32 i][LD_P]
//   R, the gA and q rows of the next step as the TMA brings them (four boxes
//   of [32 i][32 d] in the 128-byte swizzle: gA d 0-31, 32-63, then q's)
//   barriers of 8 bytes: per warpgroup and ring slot (P_TMA), then one for R
constexpr int OFF_V = 0, OFF_BUF = NW * 2 * SUB;
constexpr int OFF_P = OFF_BUF + BUFS * WG_BUF, OFF_R = OFF_P + NW * P_STAGES * 2 * P_TILE, OFF_BAR = OFF_R + 4 * BOX,
              N_PBAR = P_TMA ? NW * P_STAGES : 0, SMEM_FLOATS = OFF_BAR + 2 * (N_PBAR + 1);
static_assert(OFF_BUF % 256 == 0 && WG_BUF % 256 == 0 && OFF_R % 256 == 0,
              "swizzled tiles on 1024-byte boundaries (128-byte swizzle)");
static_assert(OFF_P % 32 == 0, "TMA boxes on 128-byte boundaries");
static_assert(SMEM_FLOATS * 4 + 1024 <= 227 * 1024, "shared memory");

// The block's named barrier at the top of a step (0 is __syncthreads').
#ifndef TC_EMU // tests/emu/cuda_on_cpu.h has a CPU form
__device__ __forceinline__ void block_bar(int id) { asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(NT) : "memory"); }
#endif
} // namespace keys_org

// Key blocks NW kx .. NW kx + NW - 1 of (b, h) = bh.
__device__ __forceinline__ void keys_block(FW_BLOCK_PARAMS, int kx, int bh) {
    using namespace keys_org;
    unsigned sm_s;
    float *sm = aligned_smem(sm_s);

    const int b = bh / kHeads, h = bh % kHeads;
    const i64 head_rows = (i64)bh * kT; // row (b, h, 0) of the [B, 16, T, *] tensors
    // w from a shuffle of lane 0: the compiler then knows it is the same in a
    // warp and keeps it, and the buffer addresses and descriptors made from it,
    // in uniform registers.
    const int tid = threadIdx.x, w = __shfl_sync(0xffffffffu, tid / 128, 0), wt = tid % 128, q = wt / 32,
              lane = tid % 32, g = lane / 4, t = lane % 4;
    const int jb = kx * NW + w;
    const bool live = jb < NJ; // else this warpgroup only stages
    const i64 j0 = (i64)jb * BJ, jblock0 = (i64)kx * NW * BJ;
    float *V = sm + OFF_V, *ring = sm + OFF_P + w * P_STAGES * 2 * P_TILE;
    unsigned long long *bars = reinterpret_cast<unsigned long long *>(sm + OFF_BAR), *full = bars + w * P_STAGES,
                       *rows_full = bars + N_PBAR;
    if (tid < N_PBAR + 1) {
        tc::mbar_init(bars + tid, 1);
        tc::mbar_init_fence();
    }
    auto buf_s = [&](int buf) { return sm_s + 4u * (OFF_BUF + buf * WG_BUF); };

    // This thread's keys (rows of gPd^T): j = 16 q + g + 8 hh.
    float keep[2], mj[2]; // mj: their edit masks (WC)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        const i64 j = j0 + 16 * q + g + 8 * hh;
        keep[hh] = j < kT && attention_mask[b * kT + j] != 0.f ? 1.f : 0.f;
        mj[hh] = WC && j < kT ? edit_region_mask[b * kT + j] : 0.f;
    }

    // The step's gA and q rows (32 rows x 64 d each) into R by the TMA, asked
    // for by thread 0 a step ahead, counted on rows_full. Rows past T: q's are
    // other rows' finite values (times a zero gS), gA's are zeroed in stage_store.
    const unsigned R_s = sm_s + 4u * OFF_R;
    auto load_rows = [&](int i0) {
        if (i0 >= kT || tid != 0) return;
        tma_rows(sm + OFF_R, &map_ga, &map_q, rows_full, (int)(b * kT + i0), (int)(head_rows + i0), h);
    };
    // Staging is four passes of 16 rows x 32 d each; pass p is warpgroup
    // p % NW's. In pass p a thread reads tile row r = lane / 2 + 16 (p % 2)
    // (query row perm(r) of the step), floats c0 + 32 (p / 2) .. + 3, which
    // makes the transposed stores below conflict-free. The thread's offsets
    // are made again each step from an opaque copy of its lane, which keeps
    // them out of the registers the step's products need.
    // From R (the rows of the step at i0) into step buffer B, rounded to TF32.
    // `last`: the step runs past T, and gA's rows there must be zeros.
    auto stage_store = [&](unsigned B, int i0, bool last) {
        int ln;
#ifdef TC_EMU
        ln = lane;
#else
        asm volatile("mov.u32 %0, %1;" : "=r"(ln) : "r"(lane));
#endif
        const int c0 = 4 * (2 * q + ln % 2), sr = ln / 2;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            if (p % NW != w) continue;
            const int r = sr + 16 * (p % 2);
            const unsigned at = R_s + 4 * sw(perm(r), c0) + 4 * BOX * (p / 2);
            float4 x = lds128(at);
            const float4 y = lds128(at + 4 * 2 * BOX);
            if (last && i0 + perm(r) >= kT) x = make_float4(0.f, 0.f, 0.f, 0.f);
            const uint4 a = make_uint4(tc::to_tf32(x.x), tc::to_tf32(x.y), tc::to_tf32(x.z), tc::to_tf32(x.w));
            const uint4 k = make_uint4(tc::to_tf32(y.x), tc::to_tf32(y.y), tc::to_tf32(y.z), tc::to_tf32(y.w));
            // GA's 16 bytes (row r, p / 2 the second tile of 32 d), and GAT's
            // and QT's four (e) of column ipos(r) (p / 2: rows + 32).
            sts128(B + 4 * (GA + sw(r, c0) + BI * 32 * (p / 2)), a);
            const unsigned av[4] = {a.x, a.y, a.z, a.w}, kv[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const unsigned at = B + 4 * (GAT + sw(c0 + e, ipos(r)) + 32 * 32 * (p / 2));
                sts32(at, av[e]);
                sts32(at + 4 * (QT - GAT), kv[e]);
            }
        }
    };
#if {{P_TMA}}
    // P and Pd of the step at i0 for this warpgroup's keys into ring slot
    // `slot`: four boxes of 8 x 68 each (see the top), asked for by one thread
    // of the warpgroup, counted in bytes on the slot's barrier.
    auto load_p = [&](int i0, int slot) {
        if (i0 >= kT || !live || wt != P_ISSUER) return;
        tma_p(ring + slot * 2 * P_TILE, &map_p, &map_pd, full + slot, head_rows + i0, j0);
    };
#else
    // P and Pd of the step at i0 for this warpgroup's keys into ring slot
    // `slot`; rows at or past T read as zeros (see attention_fused.cu's load_p).
    auto load_p = [&](int i0, int slot) {
        if (i0 >= kT || !live) return;
        cp_p(ring + slot * 2 * P_TILE, probs, probs_dropped, head_rows, i0, j0, wt);
    };
#endif
    // Row sums D_i: lane l loads row perm(l) of the step; the thread's columns
    // of gPd^T (i = 8 n + 2 t + e) take theirs by shuffle.
    // WC: the row's edit mask too, in ml.
    float dl, ml = 0.f;
    auto load_d = [&](int i0) {
        const int i = i0 + perm(lane);
        dl = i < kT ? rowdot[head_rows + i] : 0.f;
        if constexpr (WC) ml = i < kT ? edit_region_mask[b * kT + i] : 0.f;
    };
    // gS goes to gs row i0 + perm(8 n + 2 t + e), column j0 + 16 q + g + 8 hh.
    const i64 gs_base = ((i64)bh * GS_ROWS + perm(2 * t)) * GS_LD + j0 + 16 * q + g;
    const bool gs_col_ok[2] = {j0 + 16 * q + g < GS_LD, j0 + 16 * q + g + 8 < GS_LD};
    // OUT0: batch row 0's gS also to the output, at the same rows and keys (all inside its 1024 columns).
    const i64 out0_base = ((i64)h * kPos + perm(2 * t)) * kPos + j0 + 16 * q + g;
    const bool out0_col_ok[2] = {true, true};

    // Prologue: v of the block's NW x 64 keys, the first steps' loads (attention_wg.cu).
    __shared__ float maxima[3][8]; // GS_HALF: per warp the largest |gA_i|^2, |D_i|, |v_j|^2
    pass_prologue<NW * 64, NT, BI>(V, value, head_rows, jblock0, gan, rowdot, maxima, rows_full, load_rows, load_p,
                                   load_d);
    stage_store(buf_s(0), 0, BI > kT);
    tc::fence_async_shared();
    __syncthreads(); // v and step 0's buffer are in place

    // gS's scale (GS_HALF): this warpgroup's keys' largest |v_j|^2, two threads a key.
    float gsf = 1.f;
    if constexpr (GS_HALF) {
        const float v2 = v_sq_part(sm_s + 4u * OFF_V, NW * SUB, 64 * w + wt / 2, 32 * (wt % 2), 32);
        const int e = gs_block_exponent(maxima, v2 + __shfl_xor_sync(0xffffffffu, v2, 1), 4 * w, 4,
                                        dropout_p); // the warpgroup's keys
        gsf = tc::pow2(e);
        if (live && wt == 0) gsinv[(i64)bh * NJ + jb] = tc::pow2(-e);
    }

    // Descriptors of this warpgroup's v_j and of buffer 0; buffer 1 is WG_BUF floats on.
    const unsigned long long dV = tc::wg_desc(V + w * SUB), dB0 = tc::wg_desc(sm + OFF_BUF);
    // Byte offset in a ring slot of this thread's P at accumulator (n, x) for
    // x = e (x = e + 2 is 8 keys on): the same every step, as the shifts are
    // (i0 is a multiple of 4, and i0 T % 4 == 0). Query row r = 8 n + 2 t + e
    // is perm(r) = 8 t + perm(8 n + e) (see perm): a per-thread base, a
    // constant, and (P_TMA) the shift of box perm(8 n + e) % 4 = 2 (n / 2) + e,
    // the same for the block (a uniform register): one register for all eight.
    const unsigned p_thr = 4 * ((P_TMA ? 2 * t * LD_P : 2 * t * LD_P) + 16 * q + g);
    unsigned p_sh[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) p_sh[a] = P_TMA ? 4 * row_shift(head_rows + a) : 0;
    auto p_off = [&](int n, int e) -> unsigned {
        if constexpr (P_TMA) return p_thr + p_sh[2 * (n / 2) + e] + 4 * ((2 * (n / 2) + e) * 8 * LD_P + (n % 2) * LD_P);
        else if constexpr (!P_SHIFT) return p_thr + 4 * (8 * n + e) * LD_P;
        else return 4 * ((8 * n + 2 * t + e) * LD_P + p_shift(head_rows + 8 * n + 2 * t + e) + 16 * q + g);
    };
    float accV[32], accK[32];
#pragma unroll
    for (int x = 0; x < 32; ++x) accV[x] = accK[x] = 0.f;
    float wca[2] = {0.f, 0.f}, wcc[2] = {0.f, 0.f}; // WC: this thread's sums (wc_add)

    for (int i0 = 0; i0 < kT; i0 += BI) {
        const int step = (int)(i0 / BI), buf = step % BUFS, slot = step % P_STAGES;
        const unsigned long long dB = tc::wg_desc_at(dB0, buf * WG_BUF);
        if (!P_TMA) tc::cp_async_wait<P_STAGES - 2>(); // this step's P and Pd (and older)
        block_bar(1); // this step's buffer (stored last step) is in place; slot step-1 and R are read
        load_rows(i0 + BI);
        load_p(i0 + (P_STAGES - 1) * BI, (step + P_STAGES - 1) % P_STAGES);
        if (!P_TMA) tc::cp_async_commit(); // possibly empty: keeps the count of groups per step fixed
        const bool more = i0 + BI < kT;

        if (live) {
            // gPd^T = v_j gA_i^T over d: 8 k steps of 8, two swizzled tiles of 32.
            float acc[16];
#pragma unroll
            for (int x = 0; x < 16; ++x) acc[x] = 0.f;
            tc::wg_fence();
#pragma unroll
            for (int ks = 0; ks < 8; ++ks)
                tc::wgmma_n32_tf32_ss(acc, tc::wg_desc_at(dV, (ks / 4) * NW * SUB + 8 * (ks % 4)),
                                      tc::wg_desc_at(dB, GA + (ks / 4) * BI * 32 + 8 * (ks % 4)));
            tc::wg_commit();

            // While the tensor cores run: this step's P, Pd at this thread's (i, j),
            // and the next step's row sums.
            const unsigned Pt = sm_s + 4u * (OFF_P + (w * P_STAGES + slot) * 2 * P_TILE); // Pd: P_TILE floats on
            float p[4][4], pd[4][4], d[4][2];
            if (P_TMA) tc::mbar_wait(full + slot, (step / P_STAGES) & 1);
            read_p(p, pd, Pt, p_off);
            shuffle_d(d, dl, t);
            const float mrow = ml; // this step's, before load_d takes the next
            if (more) load_d(i0 + BI);
            tc::wg_wait<0>(); // gPd^T, and the last step's gV and gK

            // gS^T, to gs first (then only Pd and gS's fragments are held while
            // the products are issued). Only the last row block and the last
            // key block test their ends: the others store unguarded.
            float s[4][4];
            grad_scores(s, acc, p, pd, d, keep);
            if constexpr (WC) wc_add(wca, wcc, s, mrow, t);
            store_gs(gs + gs_base + (i64)i0 * GS_LD, s, i0 + BI <= kT && j0 + BJ <= GS_LD, i0, t, gs_col_ok, gsf);
            if (OUT0 && b == 0)
                store_gs<kPos>(out0 + out0_base + (i64)i0 * kPos, s, i0 + BI <= kT, i0, t, out0_col_ok, gsf);
            issue_gv_gk(accV, accK, pd, s, dB);
        }

        // The next step's buffer from R (asked of the TMA at the top of this
        // step). Three buffers: the one written here was last read by the
        // products of the step before last, which every warpgroup waited for
        // (its wait in the last step) before the barrier at this step's top;
        // so one barrier a step (a second one, with two buffers, measured no
        // faster).
        if (more) {
            tc::mbar_wait(rows_full, (step + 1) & 1);
            if (i0 + 2 * BI > kT) stage_store(buf_s((step + 1) % BUFS), i0 + BI, true);
            else stage_store(buf_s((step + 1) % BUFS), i0 + BI, false);
        }
        tc::fence_async_shared();
    }
    tc::wg_wait<0>();
    tc::cp_async_wait<0>();

    // WC: this warpgroup's key block's within/cross sums (maxima is free now).
    if constexpr (WC) {
        const float2 r = wc_group_sums<4>(wca, wcc, mj, maxima);
        if (live && wt == 0) wc_store(wc_partials, (i64)bh * NJ + jb, r);
    }

    // gV and gK of this warpgroup's keys, summed over all rows i in order, in
    // grad_qkv's [B, T, 3072].
    if (!live) return;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const i64 j = j0 + 16 * q + g + 8 * hh;
            const int x = 4 * n + 2 * hh;
            if (j < kT) {
                float *row = grad_qkv + (b * kT + j) * kQkv + h * kD + 8 * n + 2 * t;
                *reinterpret_cast<float2 *>(row + 2 * kHid) = make_float2(accV[x], accV[x + 1]);
                *reinterpret_cast<float2 *>(row + kHid) = make_float2(scale * accK[x], scale * accK[x + 1]);
            }
        }
}
} // namespace fw
