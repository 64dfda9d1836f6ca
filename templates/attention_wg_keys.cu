// The attention pass on wgmma (see attention_wg.cu), tile att_kb=2: a block
// owns (b, h) and two blocks of 64 keys j, one a warpgroup (an item; 256
// threads), or (tile att_items > 1) up to ITEMS such items one after another
// (items x0, x0 + stride, ...; grid ceil(NI / ITEMS)), the next item's v, P,
// rows and row sums asked for during the last step of the one before, so
// that its start runs beside that step (the pass 1.6-3.7% faster where the
// model takes several, on an H100). The
// warpgroups walk the query rows i together, 32 a step: each step's gA and q
// rows come once for both (by the TMA into R, then rounded and transposed
// into a step buffer, each warpgroup half of it), while each has its own v_j, P ring and barriers, and sums its
// own gV and gK (in row order: deterministic). Against att_kb=1 each warp
// stages half as much, and a block has twice the work for its prologue. A
// warpgroup past the last key block only stages. (Three warpgroups, three key
// blocks, fit in shared memory too but are slower: docs/experiments.md.) gS
// goes to gs [B, 16, GS_ROWS, GS_LD] (rows padded with zeros to GS_LD) for
// the gQ product and the bias sums. The block is keys_block, called by the
// kernel (attention_wg_kernel.cu) with its first item and the items' stride.
namespace fw {
namespace keys_org {
// Two warpgroups, 32 rows a step, three step buffers (see the step's end).
constexpr int NW = 2, NT = NW * 128, BI = 32, BUFS = 3;
// Items: (pair kx of key blocks, (b, h)), x = kx + KX (b * 16 + h); a block
// takes at most ITEMS of them (MULTI: more than one, v double-buffered).
constexpr int KX = (NJ + NW - 1) / NW, ITEMS = {{ITEMS}};
constexpr bool MULTI = ITEMS > 1;
constexpr i64 NI = KX * kB * kHeads;
static_assert(NI < (1ll << 31), "item indices are 32-bit");
static_assert(!MULTI || (!GS_HALF && P_STAGES == 2), "items one after another: gS with no scale, P one step ahead");
// Shared memory in floats, from a 1024-byte boundary.
//   V     v of the block's NW x 64 keys, rounded once: two tiles of [NW x 64 j][32 d]
//         (d 0-31, then 32-63); warpgroup w's v_j are rows 64 w .. 64 w + 63 of each;
//         MULTI: two such, item k's the (k % 2)-th; F16: one (the fp32 staging
//         of each item's v in turn, converted into V16 as the item starts)
//   V16   (F16) v of the block's NW x 64 keys in fp16: one tile [NW x 64 j][64 d]
//         (warpgroup w's rows 64 w on); MULTI: two, item k's the (k % 2)-th
//   BUFS step buffers (attention_wg.cu's GA, GAT, QT), each WG_BUF floats
//   per warpgroup: a ring of P_STAGES (P, Pd) pairs of [32 i][LD_P]
//   R, the gA and q rows of the next step as the TMA brings them (four boxes
//   of [32 i][32 d] in the 128-byte swizzle: gA d 0-31, 32-63, then q's)
//   barriers of 8 bytes: per warpgroup and ring slot (P_TMA), then one for R
constexpr int V_FLOATS = NW * 2 * SUB, V16_FLOATS = NW * SUB, OFF_V = 0;
constexpr int OFF_V16 = (MULTI && !F16 ? 2 : 1) * V_FLOATS,
              OFF_BUF = OFF_V16 + (F16 ? (MULTI ? 2 : 1) * V16_FLOATS : 0);
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
// An item as warpgroup w sees it: (b, h), its key block jb (keys j0 ..
// j0 + 63; live: inside T, else the warpgroup only stages), the block's first key.
struct item {
    int b, h, bh, jb;
    i64 head_rows, j0, jblock0; // head_rows: row (b, h, 0) of the [B, 16, T, *] tensors
    bool live;
};
__device__ __forceinline__ item item_of(int x, int w) {
    item it;
    const int kx = x % KX;
    it.bh = x / KX, it.b = it.bh / kHeads, it.h = it.bh % kHeads, it.jb = kx * NW + w;
    it.head_rows = (i64)it.bh * kT, it.j0 = (i64)it.jb * BJ, it.jblock0 = (i64)kx * NW * BJ;
    it.live = it.jb < NJ;
    return it;
}
} // namespace keys_org

// Items x0, x0 + stride, ... (below NI) of key blocks NW kx .. NW kx + NW - 1
// of (b, h), one after another.
__device__ __forceinline__ void keys_block(FW_BLOCK_PARAMS, int x0, int stride) {
    using namespace keys_org;
    unsigned sm_s;
    float *sm = aligned_smem(sm_s);

    // w from a shuffle of lane 0: the compiler then knows it is the same in a
    // warp and keeps it, and the buffer addresses and descriptors made from it,
    // in uniform registers.
    const int tid = threadIdx.x, w = __shfl_sync(0xffffffffu, tid / 128, 0), wt = tid % 128, q = wt / 32,
              lane = tid % 32, g = lane / 4, t = lane % 4;
    item cur = item_of(x0, w);
    float *ring = sm + OFF_P + w * P_STAGES * 2 * P_TILE;
    auto V_of = [&](int k) { return sm + OFF_V + (MULTI && !F16 ? (k % 2) * V_FLOATS : 0); };
    auto V16_of = [&](int k) { return sm + OFF_V16 + (MULTI ? (k % 2) * V16_FLOATS : 0); };
    unsigned long long *bars = reinterpret_cast<unsigned long long *>(sm + OFF_BAR), *full = bars + w * P_STAGES,
                       *rows_full = bars + N_PBAR;
    if (tid < N_PBAR + 1) {
        tc::mbar_init(bars + tid, 1);
        tc::mbar_init_fence();
    }
    auto buf_s = [&](int buf) { return sm_s + 4u * (OFF_BUF + buf * WG_BUF); };

    // This thread's keys (rows of gPd^T) of an item: j = 16 q + g + 8 hh.
    auto load_keys = [&](const item &it, float (&keep)[2], float (&mj)[2]) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const i64 j = it.j0 + 16 * q + g + 8 * hh;
            keep[hh] = j < kT && attention_mask[it.b * kT + j] != 0.f ? 1.f : 0.f;
            mj[hh] = WC && j < kT ? edit_region_mask[it.b * kT + j] : 0.f;
        }
    };
    float keep[2], mj[2]; // mj: their edit masks (WC)
    load_keys(cur, keep, mj);

    // The step's gA and q rows (32 rows x 64 d each) into R by the TMA, asked
    // for by thread 0 a step ahead, counted on rows_full. Rows past T: q's are
    // other rows' finite values (times a zero gS), gA's are zeroed in stage_store.
    const unsigned R_s = sm_s + 4u * OFF_R;
    auto load_rows = [&](const item &it, int i0) {
        if (i0 >= kT || tid != 0) return;
        tma_rows(sm + OFF_R, &map_ga, &map_q, rows_full, (int)(it.b * kT + i0), (int)(it.head_rows + i0), it.h);
    };
    // Staging is four passes of 16 rows x 32 d each; pass p is warpgroup
    // p % NW's. In pass p a thread reads tile row r = lane / 2 + 16 (p % 2)
    // (query row perm(r) of the step), floats c0 + 32 (p / 2) .. + 3, which
    // makes the transposed stores below conflict-free. The thread's offsets
    // are made again each step from an opaque copy of its lane, which keeps
    // them out of the registers the step's products need.
    // From R (the rows of the step at i0) into step buffer B, rounded to TF32 (F16: in fp16).
    // `last`: the step runs past T, and gA's rows there must be zeros.
    auto stage_store = [&](unsigned B, int i0, bool last) {
        int ln;
#ifdef TC_EMU
        ln = lane;
#else
        asm volatile("mov.u32 %0, %1;" : "=r"(ln) : "r"(lane));
#endif
        if constexpr (F16) { // this warpgroup's 16 rows (attention_wg.cu's stage_f16)
            const int c = f16_stage_row(w, ln);
            stage_f16(R_s, B, w, q, ln, last && i0 + perm(c) >= kT, last && i0 + perm(c + 1) >= kT);
            return;
        }
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
    // A warpgroup past the last key block only arrives, so that its slots'
    // phases follow the block's steps into the items after (where it may be live).
    auto load_p = [&](const item &it, int i0, int slot) {
        if (i0 >= kT || wt != 0) return;
        if (it.live) tma_p(ring + slot * 2 * P_TILE, &map_p, &map_pd, full + slot, it.head_rows + i0, it.j0);
        else tc::mbar_arrive(full + slot);
    };
#else
    // P and Pd of the step at i0 for this warpgroup's keys into ring slot
    // `slot`; rows at or past T read as zeros (see attention_fused.cu's load_p).
    auto load_p = [&](const item &it, int i0, int slot) {
        if (i0 >= kT || !it.live) return;
        cp_p(ring + slot * 2 * P_TILE, probs, probs_dropped, it.head_rows, i0, it.j0, wt);
    };
#endif
    // Row sums D_i: lane l loads row perm(l) of the step; the thread's columns
    // of gPd^T (i = 8 n + 2 t + e) take theirs by shuffle.
    // WC: the row's edit mask too, in ml.
    float dl, ml = 0.f;
    auto load_d = [&](const item &it, int i0) {
        const int i = i0 + perm(lane);
        dl = i < kT ? rowdot[it.head_rows + i] : 0.f;
        if constexpr (WC) ml = i < kT ? edit_region_mask[it.b * kT + i] : 0.f;
    };
    const bool out0_col_ok[2] = {true, true};

    // Prologue: v of the first item's NW x 64 keys, its first steps' loads (attention_wg.cu).
    __shared__ float maxima[3][8]; // GS_HALF: per warp the largest |gA_i|^2, |D_i|, |v_j|^2
    pass_prologue<NW * 64, NT, BI>(V_of(0), V16_of(0), value, cur.head_rows, cur.jblock0, gan, rowdot, maxima, rows_full,
                                   [&](int i0) { load_rows(cur, i0); },
                                   [&](int i0, int slot) { load_p(cur, i0, slot); }, [&](int i0) { load_d(cur, i0); });
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
        if (cur.live && wt == 0) gsinv[(i64)cur.bh * NJ + cur.jb] = tc::pow2(-e);
    }

    // The descriptor of buffer 0; buffer 1 is WG_BUF floats on.
    const unsigned long long dB0 = tc::wg_desc(sm + OFF_BUF);
    // Byte offset in a ring slot of this thread's P at accumulator (n, x) for
    // x = e (x = e + 2 is 8 keys on): the same every step, as the shifts are
    // (i0 is a multiple of 4, and i0 T % 4 == 0). Query row r = 8 n + 2 t + e
    // is perm(r) = 8 t + perm(8 n + e) (see perm): a per-thread base, a
    // constant, and (P_TMA) the shift of box perm(8 n + e) % 4 = 2 (n / 2) + e,
    // the same for the block (a uniform register): one register for all eight.
    const unsigned p_thr = 4 * ((P_TMA ? 2 * t * LD_P : 2 * t * LD_P) + 16 * q + g);
    float accV[32], accK[32];
#pragma unroll
    for (int x = 0; x < 32; ++x) accV[x] = accK[x] = 0.f;
    float wca[2] = {0.f, 0.f}, wcc[2] = {0.f, 0.f}; // WC: this thread's sums (wc_add)

    // bstep: the block's step over all its items (ring slots, step buffers and barrier phases follow it).
    int bstep = 0;
    for (int x = x0, k = 0; x < NI; x += stride, ++k) {
        const bool next_item = MULTI && x + stride < NI;
        const item nxt = item_of(next_item ? x + stride : x, w);
        float keep_n[2] = {0.f, 0.f}, mj_n[2] = {0.f, 0.f}; // the next item's, asked for during this item's last step
        // The item's descriptor of this warpgroup's v_j, P's shifts (P_TMA: the
        // same every step of the item), and where its gS goes: gs row i0 +
        // perm(8 n + 2 t + e), column j0 + 16 q + g + 8 hh; OUT0: batch row 0's
        // gS also to the output, at the same rows and keys (all inside its 1024 columns).
        const unsigned long long dV = tc::wg_desc((F16 ? V16_of(k) : V_of(k)) + w * SUB);
        unsigned p_sh[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) p_sh[a] = P_TMA ? 4 * row_shift(cur.head_rows + a) : 0;
        auto p_off = [&](int n, int e) -> unsigned {
            if constexpr (P_TMA)
                return p_thr + p_sh[2 * (n / 2) + e] + 4 * ((2 * (n / 2) + e) * 8 * LD_P + (n % 2) * LD_P);
            else if constexpr (!P_SHIFT) return p_thr + 4 * (8 * n + e) * LD_P;
            else return 4 * ((8 * n + 2 * t + e) * LD_P + p_shift(cur.head_rows + 8 * n + 2 * t + e) + 16 * q + g);
        };
        const i64 gs_base = ((i64)cur.bh * GS_ROWS + perm(2 * t)) * GS_LD + cur.j0 + 16 * q + g;
        const bool gs_col_ok[2] = {cur.j0 + 16 * q + g < GS_LD, cur.j0 + 16 * q + g + 8 < GS_LD};
        const i64 out0_base = ((i64)cur.h * kPos + perm(2 * t)) * kPos + cur.j0 + 16 * q + g;

        for (int i0 = 0; i0 < kT; i0 += BI, ++bstep) {
            const int buf = bstep % BUFS, slot = bstep % P_STAGES;
            const unsigned long long dB = tc::wg_desc_at(dB0, buf * WG_BUF);
            if (!P_TMA) tc::cp_async_wait<P_STAGES - 2>(); // this step's P and Pd (and older)
            if (MULTI && k > 0 && i0 == 0) { // this item's v, asked for in the last step: landed, then rounded
                if (P_TMA) tc::cp_async_wait<0>();
                ready_v<NW * 64, NT>(V_of(k), V16_of(k));
                tc::fence_async_shared();
            }
            block_bar(1); // this step's buffer (stored last step) is in place; slot step-1 and R are read
            const bool more = i0 + BI < kT;
            if (more) {
                load_rows(cur, i0 + BI);
                load_p(cur, i0 + (P_STAGES - 1) * BI, (bstep + P_STAGES - 1) % P_STAGES);
            } else if (next_item) { // the next item's first step, v and keys (P_STAGES == 2: one step ahead)
                load_rows(nxt, 0);
                load_p(nxt, 0, (bstep + 1) % P_STAGES);
                copy_v<NW * 64, NT>(V_of(k + 1), value, nxt.head_rows, nxt.jblock0);
                if (P_TMA) tc::cp_async_commit();
                load_keys(nxt, keep_n, mj_n);
            }
            if (!P_TMA) tc::cp_async_commit(); // possibly empty: keeps the count of groups per step fixed
            // The next step's row sums (this item's, or the next item's first).
            auto load_next_d = [&] {
                if (more) load_d(cur, i0 + BI);
                else if (next_item) load_d(nxt, 0);
            };

            if (cur.live) {
                // gPd^T = v_j gA_i^T over d.
                float acc[16];
                issue_gpd<NW * SUB>(acc, dV, dB);

                // While the tensor cores run: this step's P, Pd at this thread's (i, j),
                // and the next step's row sums.
                const unsigned Pt = sm_s + 4u * (OFF_P + (w * P_STAGES + slot) * 2 * P_TILE); // Pd: P_TILE floats on
                float p[4][4], pd[4][4], d[4][2];
                if (P_TMA) tc::mbar_wait(full + slot, (bstep / P_STAGES) & 1);
                read_p(p, pd, Pt, p_off);
                shuffle_d(d, dl, t);
                const float mrow = ml; // this step's, before load_d takes the next
                load_next_d();
                tc::wg_wait<0>(); // gPd^T, and the last step's gV and gK

                // gS^T, to gs first (then only Pd and gS's fragments are held while
                // the products are issued). Only the last row block and the last
                // key block test their ends: the others store unguarded.
                float s[4][4];
                grad_scores(s, acc, p, pd, d, keep);
                if constexpr (WC) wc_add(wca, wcc, s, mrow, t);
                store_gs(gs + gs_base + (i64)i0 * GS_LD, s, i0 + BI <= kT && cur.j0 + BJ <= GS_LD, i0, t, gs_col_ok,
                         gsf);
                if (OUT0 && cur.b == 0)
                    store_gs<kPos, float>(out0 + out0_base + (i64)i0 * kPos, s, i0 + BI <= kT, i0, t, out0_col_ok, gsf);
                issue_gv_gk(accV, accK, pd, s, dB);
            } else {
                load_next_d();
            }

            // The next step's buffer from R (asked of the TMA at the top of this
            // step). Three buffers: the one written here was last read by the
            // products of the step before last, which every warpgroup waited for
            // (its wait in the last step) before the barrier at this step's top;
            // so one barrier a step (a second one, with two buffers, measured no
            // faster).
            if (more || next_item) {
                const int i1 = more ? i0 + BI : 0; // the next step's first row (of its item)
                tc::mbar_wait(rows_full, (bstep + 1) & 1);
                if (i1 + BI > kT) stage_store(buf_s((bstep + 1) % BUFS), i1, true);
                else stage_store(buf_s((bstep + 1) % BUFS), i1, false);
            }
            tc::fence_async_shared();
        }
        tc::wg_wait<0>();

        // WC: this warpgroup's key block's within/cross sums (maxima is free now).
        if constexpr (WC) {
            const float2 r = wc_group_sums<4>(wca, wcc, mj, maxima);
            if (cur.live && wt == 0) wc_store(wc_partials, (i64)cur.bh * NJ + cur.jb, r);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) wca[hh] = wcc[hh] = 0.f;
        }

        // gV and gK of this warpgroup's keys, summed over all rows i in order, in
        // grad_qkv's [B, T, 3072]; the sums start again from zero for the next item.
        if (cur.live) {
#pragma unroll
            for (int n8 = 0; n8 < 8; ++n8)
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const i64 j = cur.j0 + 16 * q + g + 8 * hh;
                    const int xx = 4 * n8 + 2 * hh;
                    if (j < kT) {
                        float *row = grad_qkv + (cur.b * kT + j) * kQkv + cur.h * kD + 8 * n8 + 2 * t;
                        *reinterpret_cast<float2 *>(row + 2 * kHid) = make_float2(accV[xx], accV[xx + 1]);
                        *reinterpret_cast<float2 *>(row + kHid) = make_float2(scale * accK[xx], scale * accK[xx + 1]);
                    }
                }
        }
        if (!next_item) break;
#pragma unroll
        for (int xx = 0; xx < 32; ++xx) accV[xx] = accK[xx] = 0.f;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) keep[hh] = keep_n[hh], mj[hh] = mj_n[hh];
        cur = nxt;
    }
    tc::cp_async_wait<0>();
}
} // namespace fw
