// The attention pass on Hopper's warpgroup tensor cores (wgmma, sm_90a, TF32,
// or fp16 operands with F16; tile wg_att=1): the sums of attention_fused.cu
// with STORE_GS, for one (B, T), each element of attention_probs and
// attention_probs_dropped read once.
//
// TF32 wgmma reads shared memory only K-major, and P, Pd are stored with the
// keys j contiguous. So the pass runs transposed, with the keys as rows:
//   gPd^T [j, i] = v_j [j, d] . gA_i [i, d]        A = v, B = gA: both K-major (d)
//   gS^T = keep_j (Pd^T * gPd^T - P^T * D_i)        in gPd^T's accumulators
//   gV_j [j, d] += Pd^T [j, i] gA_i [i, d]          A = Pd^T in registers, B = gA^T
//   gK_j [j, d] += gS^T [j, i] q_i [i, d]           A = gS^T in registers, B = q^T
// gPd^T's accumulators are the A fragments of the next two products as they
// stand, if the k order within each 8 rows i is (0 2 4 6 1 3 5 7): gA^T and
// q^T are stored with their columns in that order (ipos), so Pd and gS never
// go through shared memory. gA and q rows come global -> shared memory (R,
// by the TMA, a step ahead) and are written from there, rounded to TF32 and
// transposed, as the next step's B while this step's products run.
//
// Two organisations of the blocks (tile att_kb): attention_wg_rows.cu, a
// block a key block with its query rows split between two warpgroups, and
// attention_wg_keys.cu, a block two key blocks, one a warpgroup, walking the
// rows together; attention_wg_kernel.cu launches either, or both in one
// launch (att_kb=3). This file holds what both share.
//
// P and Pd come into a warpgroup's ring either with every thread's 16-byte
// cp.async (P_TMA 0), or (P_TMA 1) as 2-D TMA tensor copies that one thread of
// the warpgroup asks for, completing on the slot's mbarrier: the load/store unit
// then carries no copies of P. A row of P starts 4 T bytes after the last, not
// a multiple of 16 at odd T, which a tensor map needs; so the map views P as
// [B*16*T/4, 4T]: each map row holds four rows of P (16 T bytes apart). A
// box of 8 map rows x 68 floats brings 8 rows of P four apart, and four boxes
// (rows a, a+4, ..., a = 0..3) a tile. A box must start on a 16-byte boundary
// (the TMA refuses others: an illegal instruction), so box a starts s_a <= 3
// floats before key j0, as the cp.async path's shifted rows do (p_shift), and
// its 68 floats cover the 64 keys. Box rows lie 68 floats apart, which puts
// rows 2 apart 8 banks apart; so that a warp's reads hit 32 banks,
// accumulator column c (the query rows a thread holds, 8 n + 2 t + e) takes
// the step's row perm(c), where the four lanes t of a register land on box
// rows 2 t + const of one box: the gA and q rows and the row sums follow the
// same order. Rows and keys past T read other rows' finite values (or zeros
// past the tensor): every product with them is multiplied by a zero gA row,
// row sum or keep, or is not stored.
namespace fw {
typedef long long i64;
constexpr i64 kB = {{B}}, kT = {{T}}, GS_LD = {{GS_LD}};
// gs's rows per (b, h): T, or 1024 where gs is grad_edit_region_bias itself
// (tile gs_direct=1, B = 1: gS is that gradient there).
constexpr i64 GS_ROWS = {{GS_ROWS}};
constexpr int kHeads = 16, kD = 64, kHid = 1024, kQkv = 3072, kPos = 1024;
constexpr int BJ = 64, P_STAGES = {{P_STAGES}};
constexpr bool P_TMA = {{P_TMA}};
// gS's element in gs: fp32, or (GS_HALF, tile gs_half=1) fp16 bits times a
// power of two f per (b, h, key block) (gs_exponent), 1/f in gsinv.
constexpr bool GS_HALF = {{GS_HALF}};
// GS_F16 (tile gq_f16=1, with F16): gS in fp16 with no scale, the operand
// gQ's fp16 product reads as stored (templates/grad_query_wg16.cu).
constexpr bool GS_F16 = {{GS_F16}};
typedef tc::gs_elem<GS_HALF || GS_F16>::t gs_t;
// GS_ROUND (tile gs_round=1, fp32 gS): gS stored rounded to TF32 (the value
// gK's product takes anyway), so that gQ's product reads it as stored, with
// no rounding pass of its own; the bias sums then add the rounded values.
constexpr bool GS_ROUND = {{GS_ROUND}};
// WC (tile att_wc=1, B = 1 with gS in place): the pass also sums gS * m_i*m_j
// and gS * (m_i != m_j) (the within/cross gradients), one pair of partials a
// key block, which within_cross adds in order: no bias_grads launch reading
// gS back for them.
constexpr bool WC = {{WC}};
// OUT0 (tile gq_red=2, gS in the workspace in fp32 or, GS_F16, fp16): batch
// row 0's gS also stored into grad_edit_region_bias (out0, [16, 1024, 1024],
// fp32, as gs_direct stores it at B = 1), which gQ then adds rows 1.. into:
// no zeroing of it for gQ to wait on.
constexpr bool OUT0 = {{OUT0}};
static_assert(!OUT0 || !GS_HALF, "batch row 0's gS into the output with no scale");
// F16 (tile att_f16=1, precision fp16): the three products on fp16 operands
// (m64nNk16, fp32 accumulation), each taking half the instructions and half
// the shared-memory bytes of TF32's k8, with the same 11 significant bits.
// v, gA and q become fp16 where they come into shared memory (v from fp32
// staging into a tile of its own, the rows from R into the step buffer),
// and Pd^T and gS^T become the A of gV and gK from gPd^T's accumulators as
// they stand: fp16's A fragment is the accumulators' layout, two columns a
// word, so the columns keep their natural order (no ipos).
constexpr bool F16 = {{F16}};
static_assert(!F16 || !GS_HALF, "gS's fp16 scale reads v's fp32 tiles");
static_assert(!GS_F16 || (F16 && !GS_HALF && !GS_ROUND), "fp16 gS with no scale: fp16's products");
constexpr bool P_SHIFT = !P_TMA && kT % 4 != 0;
constexpr i64 P_ELEMS = kB * kHeads * kT * kT;
constexpr int NJ = (int)((kT + BJ - 1) / BJ);
// P and Pd rows (32 query rows a tile): read down their columns, and 4 i + j
// puts a warp's 32 reads in 32 banks. A shifted row (odd T, see
// attention_fused.cu's p_shift) spans 17 chunks of 16 bytes: LD_P floats.
constexpr int LD_P = BJ + 4, P_TILE = 32 * LD_P;
// A K-major tile of R rows x 32 floats in the 128-byte swizzle
// (tc::copy_tile_sw128) is R * 32 floats: SUB of 64 rows, BOX of 32.
constexpr int SUB = 64 * 32, BOX = 32 * 32;
// A step buffer of a warpgroup's 32 rows, WG_BUF floats:
//   GA  gA rows [32 i][64 d]: two tiles of 32 d (gPd^T's B)
//   GAT gA^T [64 d][32 i], QT q^T [64 d][32 i]: one tile each, columns in ipos order
constexpr int GA = 0, GAT = 2 * 32 * 32, QT = GAT + SUB, WG_BUF = QT + SUB;
static_assert(P_STAGES >= 2, "a ring of at least two slots");
static_assert(P_TILE % 32 == 0 && 8 * LD_P % 32 == 0, "TMA boxes on 128-byte boundaries");
static_assert(kB * kHeads * kT < (1ll << 31) && 4 * kT + BJ < (1ll << 31), "TMA coordinates are 32-bit");

// How far global row `row` of P starts past a 16-byte boundary, in floats:
// (row * T) mod 4, which the low 32 bits of the product give. Both ways of
// loading P copy a row from the boundary before it and read it shifted by this.
__device__ __forceinline__ int row_shift(i64 row) { return (int)(((unsigned)row * (unsigned)kT) & 3u); }
// Where element 0 of row `row` sits in its cp.async ring row.
__device__ __forceinline__ int p_shift(i64 row) { return P_SHIFT ? row_shift(row) : 0; }
// The tile's query row (0..31) of accumulator column c = 8 n + 2 t + e: c
// itself, or (P_TMA) 8 t + 4 (n % 2) + 2 (n / 2) + e, which is row 2 t + n % 2
// of box a = 2 (n / 2) + e (see the top). perm(c + 16) = perm(c) + perm(16)
// for c < 16, and perm(x + y) = perm(x) + perm(y) for x = 2 t, y = 8 n + e.
__device__ __forceinline__ constexpr int perm(int c) {
    return P_TMA ? 8 * ((c >> 1) & 3) + 4 * ((c >> 3) & 1) + 2 * (c >> 4) + (c & 1) : c;
}
// Float offset of (query row m, key j) in a TMA ring tile: box m % 4, its row
// m / 4, shifted by the box's s_a (row_shift of its first row: j0 is a multiple of 4).
__device__ __forceinline__ int p_tma_at(int m, int j, int shift) { return (m & 3) * 8 * LD_P + (m >> 2) * LD_P + j + shift; }
// Column of accumulator column c (0..31) in GAT and QT.
__device__ __forceinline__ int ipos(int i) { return (i & ~7) | ((i & 1) << 2) | ((i & 7) >> 1); }
// Float offset of (row, col) in a K-major 128-byte-swizzled tile.
__device__ __forceinline__ int sw(int row, int col) { return row * 32 + 4 * ((col / 4) ^ (row % 8)) + col % 4; }
// Byte offset of (row, col) in a K-major 128-byte-swizzled tile of fp16 (64 a row).
__device__ __forceinline__ int sw16(int row, int col) { return row * 128 + 16 * ((col / 8) ^ (row % 8)) + 2 * (col % 8); }

// Dynamic shared memory from its first 1024-byte boundary (the launch asks
// 1 KiB more), as a pointer and (sm_s) a shared-space address.
__device__ __forceinline__ float *aligned_smem(unsigned &sm_s) {
    extern __shared__ float4 smem4[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem4);
    const unsigned pad = (1024 - raw % 1024) % 1024;
    sm_s = raw + pad;
    return reinterpret_cast<float *>(smem4) + pad / 4;
}

// Shared memory by 32-bit address. In the step loop an address is a uniform
// base (the step's buffer or ring slot) plus a per-thread offset fixed before
// the loop plus a constant, which the load or store adds itself ([R+UR+imm]):
// no index math per step.
#ifndef TC_EMU // tests/emu/cuda_on_cpu.h has CPU forms of these five
__device__ __forceinline__ void sts32(unsigned a, unsigned v) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v)); }
__device__ __forceinline__ void sts64(unsigned a, uint2 v) {
    asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(v.x), "r"(v.y));
}
__device__ __forceinline__ void sts128(unsigned a, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}
__device__ __forceinline__ float4 lds128(unsigned a) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
    return v;
}
__device__ __forceinline__ float lds32(unsigned a) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a));
    return v;
}
#endif

// The pieces of a warpgroup's step, the same in both organisations. A thread
// holds gPd^T's accumulator x = 4 n + 2 hh + e at (key j = 16 q + g + 8 hh,
// row i = 8 n + 2 t + e of its 32).

// The step's gA and q rows by the TMA into R: gA's row ga_row of [B*T, 1024]
// (head h's 64 columns) and q's row q_row of [B*16*T, 64], 32 rows each, as
// four boxes of 32 rows x 32 floats in the 128-byte swizzle (gA d 0-31,
// 32-63, then q's), counted in bytes on `bar`.
__device__ __forceinline__ void tma_rows(float *R, const tc::tma_map *map_ga, const tc::tma_map *map_q,
                                         unsigned long long *bar, int ga_row, int q_row, int h) {
    tc::mbar_expect_tx(bar, 4 * BOX * 4);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        tc::tma_load_2d(R + half * BOX, map_ga, bar, h * kD + 32 * half, ga_row);
        tc::tma_load_2d(R + (2 + half) * BOX, map_q, bar, 32 * half, q_row);
    }
}
// P and Pd rows r .. r + 31 of [B*16*T, T] (r a multiple of 4), keys j0 ..
// j0 + 63, by the TMA into ring tile dp (Pd P_TILE floats on): four boxes each
// (see the top), counted in bytes on `bar`.
__device__ __forceinline__ void tma_p(float *dp, const tc::tma_map *map_p, const tc::tma_map *map_pd,
                                      unsigned long long *bar, i64 r, i64 j0) {
    tc::mbar_expect_tx(bar, 2 * P_TILE * 4);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
        const int row4 = (int)((r + a) >> 2), col = (int)((r + a) & 3) * (int)kT + (int)j0 - row_shift(r + a);
        tc::tma_load_2d(dp + a * 8 * LD_P, map_p, bar, col, row4);
        tc::tma_load_2d(dp + P_TILE + a * 8 * LD_P, map_pd, bar, col, row4);
    }
}
// The same by every thread of the warpgroup (wt: its index there) with
// 16-byte cp.async: rows row0 .. row0 + 31 of the head whose row 0 is
// head_rows; rows at or past T read as zeros (see attention_fused.cu's load_p).
__device__ __forceinline__ void cp_p(float *dp, const float *__restrict__ probs,
                                     const float *__restrict__ probs_dropped, i64 head_rows, int row0, i64 j0,
                                     int wt) {
    float *dpd = dp + P_TILE;
    if constexpr (!P_SHIFT) {
        const int pr = wt / 16, pcol = 4 * (wt % 16); // T % 4 == 0: row pr + 8 p, floats pcol .. + 3
        const bool pcol_ok = j0 + pcol < kT;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const i64 at = (head_rows + row0 + pr + 8 * p) * kT + j0 + pcol;
            const bool ok = pcol_ok && row0 + pr + 8 * p < kT;
            tc::cp_async16(dp + (pr + 8 * p) * LD_P + pcol, ok ? probs + at : probs, ok);
            tc::cp_async16(dpd + (pr + 8 * p) * LD_P + pcol, ok ? probs_dropped + at : probs_dropped, ok);
        }
    } else {
        constexpr int CPR = BJ / 4 + 1;
        for (int x = wt; x < 32 * CPR; x += 128) {
            const int r = x / CPR, c = x % CPR;
            const i64 row = head_rows + row0 + r;
            const i64 start = row * kT + j0 - p_shift(row) + 4 * c;
            const i64 left = P_ELEMS - start;
            const int bytes = row0 + r < kT ? (int)(left >= 4 ? 16 : left > 0 ? 4 * left : 0) : 0;
            tc::cp_async16_bytes(dp + r * LD_P + 4 * c, bytes ? probs + start : probs, bytes);
            tc::cp_async16_bytes(dpd + r * LD_P + 4 * c, bytes ? probs_dropped + start : probs_dropped, bytes);
        }
    }
}
// This thread's P and Pd from the ring tile at shared address Pt: off(n, e)
// is the byte offset of accumulator (n, x = e); x = e + 2 is 8 keys on.
template <class Off>
__device__ __forceinline__ void read_p(float (&p)[4][4], float (&pd)[4][4], unsigned Pt, Off off) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const unsigned at = Pt + off(n, x % 2) + 4 * 8 * (x / 2);
            p[n][x] = lds32(at);
            pd[n][x] = lds32(at + 4 * P_TILE);
        }
}
// The row sums D_i of this thread's rows, from the lanes that loaded them (dl of lane 8 n + 2 t + e).
__device__ __forceinline__ void shuffle_d(float (&d)[4][2], float dl, int t) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) d[n][e] = __shfl_sync(0xffffffffu, dl, 8 * n + 2 * t + e);
}
// WC: this thread's sums over its rows i of gS_ij * m_i (a) and of gS_ij (c),
// per key hh; ml is the edit mask of row perm(lane) of the step (as dl for D_i).
__device__ __forceinline__ void wc_add(float (&a)[2], float (&c)[2], const float (&s)[4][4], float ml, int t) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float mi = __shfl_sync(0xffffffffu, ml, 8 * n + 2 * t + e);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                a[hh] = fmaf(s[n][2 * hh + e], mi, a[hh]);
                c[hh] += s[n][2 * hh + e];
            }
        }
}
// WC, at the end: a group's (G warps: a key block's) within and cross sums, in
// warp order; its first thread's result is the one stored. m_j = mj[hh]:
// within = sum mj a, cross = sum (a - 2 mj a + mj c) (masks of 0 and 1).
// scratch: 2 x 8 floats of shared memory no thread still reads. (tc::warp_tree_sum:
// bias_rows.cu, which the plan renders wherever this pass is, gs_store=1.)
template <int G>
__device__ __forceinline__ float2 wc_group_sums(const float (&a)[2], const float (&c)[2], const float (&mj)[2],
                                                float (*scratch)[8]) {
    float within = 0.f, cross = 0.f;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        within = fmaf(mj[hh], a[hh], within);
        cross += a[hh] - 2.f * mj[hh] * a[hh] + mj[hh] * c[hh];
    }
    within = tc::warp_tree_sum(within);
    cross = tc::warp_tree_sum(cross);
    const int warp = threadIdx.x / 32;
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[0][warp] = within, scratch[1][warp] = cross;
    __syncthreads();
    float2 r = make_float2(0.f, 0.f);
#pragma unroll
    for (int x = 0; x < G; ++x) r.x += scratch[0][warp / G * G + x], r.y += scratch[1][warp / G * G + x];
    return r;
}
// WC: a key block's within/cross sums r (wc_group_sums) as pair `at` of wc_partials.
__device__ __forceinline__ void wc_store(float *__restrict__ wc_partials, i64 at, float2 r) {
    wc_partials[2 * at] = r.x, wc_partials[2 * at + 1] = r.y;
}
// gS^T = keep_j (Pd^T * gPd^T - P^T * D_i), in gPd^T's accumulator layout.
__device__ __forceinline__ void grad_scores(float (&s)[4][4], const float (&acc)[16], const float (&p)[4][4],
                                            const float (&pd)[4][4], const float (&d)[4][2], const float (&keep)[2]) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) s[n][x] = keep[x / 2] * (pd[n][x] * acc[4 * n + x] - p[n][x] * d[n][x % 2]);
}
// gS to gs: gsp is this thread's first element (row row0 + perm(2 t) of the
// tile's first row row0, its column). `whole`: every row and key of the tile
// lies inside, and the stores go unguarded; else rows past T and columns
// past GS_LD (col_ok, per hh) are left out. GS_HALF: times f (gs_exponent)
// in fp16, the two rows (e = 0, 1) of a key converted by one instruction;
// GS_F16: so, with f = 1.
// LD, E: gs's row length and element, or (OUT0) the output's (fp32).
template <i64 LD = GS_LD, class E = gs_t>
__device__ __forceinline__ void store_gs(E *gsp, const float (&s)[4][4], bool whole, int row0, int t,
                                         const bool (&col_ok)[2], float f) {
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            E v[2];
            if constexpr (sizeof(E) == 2) {
                const unsigned pk = tc::pack_f16x2(s[n][2 * hh] * f, s[n][2 * hh + 1] * f);
                v[0] = (unsigned short)(pk & 0xffffu), v[1] = (unsigned short)(pk >> 16);
            } else if constexpr (GS_ROUND) {
                v[0] = __uint_as_float(tc::to_tf32(s[n][2 * hh]) & 0xFFFFE000u); // to_tf32's rounding, exact
                v[1] = __uint_as_float(tc::to_tf32(s[n][2 * hh + 1]) & 0xFFFFE000u);
            } else {
                v[0] = s[n][2 * hh], v[1] = s[n][2 * hh + 1];
            }
#pragma unroll
            for (int e = 0; e < 2; ++e)
                if (whole || (row0 + perm(2 * t) + perm(8 * n + e) < kT && col_ok[hh]))
                    gsp[perm(8 * n + e) * LD + 8 * hh] = v[e];
        }
}

// The scale of gS's fp16 store (GS_HALF). Element by element, |gS_ij| <=
// Pd_ij |gPd_ij| + P_ij |D_i| <= |gA_i| |v_j| / (1 - p) + |D_i| (Pd <= P / (1 - p),
// P <= 1; gPd_ij = gA_i . v_j), so with the head's largest |gA_i|^2 (a2, the
// row dots' launch wrote them to gan) and |D_i| (dm), and the block's
// largest |v_j|^2 (v2), f = 2^E with f * bound < 2^14 keeps every element
// below fp16's 65504 (room for the operands' TF32 rounding), and the largest
// ones in fp16's normal range with its 11 significant bits, TF32's. Powers
// of two: gS * f * (1/f) is exact.
__device__ __forceinline__ int gs_exponent(float a2, float v2, float dm, float dropout_p) {
    const float bound = sqrtf(a2) * sqrtf(v2) / (1.f - dropout_p) + dm;
    const int e = 14 - tc::ceil_log2(bound);
    return e < -100 ? -100 : e > 100 ? 100 : e;
}
// The block's scale exponent (256 threads, 8 warps), once head_maxima has
// put each warp's largest |gA_i|^2 and |D_i| over the head's rows in
// maxima[0], [1]: v2 is this thread's share of its keys' |v_j|^2 (the
// threads of a key already summed), whose warp maxima go to maxima[2];
// the keys that share the scale are those of warps v0 .. v0 + nv - 1.
__device__ __forceinline__ int gs_block_exponent(float (&maxima)[3][8], float v2, int v0, int nv, float dropout_p);
// This thread's part of |v_j|^2 for key row `row` of the two swizzled v tiles
// (d 0-31 at V_s, 32-63 tile_floats on): floats c0 .. c0 + n - 1 of the 64.
__device__ __forceinline__ float v_sq_part(unsigned V_s, int tile_floats, int row, int c0, int n) {
    float s = 0.f;
    for (int c = c0; c < c0 + n; c += 4) {
        const float4 x = lds128(V_s + 4 * ((c / 32) * tile_floats + sw(row, c % 32)));
        s = fmaf(x.x, x.x, fmaf(x.y, x.y, fmaf(x.z, x.z, fmaf(x.w, x.w, s))));
    }
    return s;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
// Each warp's largest |gA_i|^2 and |D_i| over its share of the head's rows
// (head_rows .. + T - 1, 256 threads) into maxima[0] and [1].
__device__ __forceinline__ void head_maxima(const float *__restrict__ gan, const float *__restrict__ rowdot,
                                            i64 head_rows, float (&maxima)[3][8]) {
    float a2 = 0.f, dm = 0.f;
#pragma unroll 4
    for (int i = threadIdx.x; i < kT; i += 256) { // all loads in flight at once (T <= 1024)
        a2 = fmaxf(a2, gan[head_rows + i]);
        dm = fmaxf(dm, fabsf(rowdot[head_rows + i]));
    }
    a2 = warp_max(a2), dm = warp_max(dm);
    if (threadIdx.x % 32 == 0) maxima[0][threadIdx.x / 32] = a2, maxima[1][threadIdx.x / 32] = dm;
}
__device__ __forceinline__ int gs_block_exponent(float (&maxima)[3][8], float v2, int v0, int nv, float dropout_p) {
    v2 = warp_max(v2);
    if (threadIdx.x % 32 == 0) maxima[2][threadIdx.x / 32] = v2;
    __syncthreads();
    float a2 = 0.f, dm = 0.f;
    v2 = 0.f;
#pragma unroll
    for (int x = 0; x < 8; ++x) {
        a2 = fmaxf(a2, maxima[0][x]), dm = fmaxf(dm, maxima[1][x]);
        if (x >= v0 && x < v0 + nv) v2 = fmaxf(v2, maxima[2][x]);
    }
    return gs_exponent(a2, v2, dm, dropout_p);
}
// v of ROWS keys (key row v0 of the head on; rows past T read as zeros) into
// V's two swizzled tiles of 32 d by the block's NT threads (cp.async), and
// those tiles rounded in place by the same threads once they have landed.
template <int ROWS, int NT>
__device__ __forceinline__ void copy_v(float *V, const float *__restrict__ value, i64 head_rows, i64 v0) {
#pragma unroll
    for (int s2 = 0; s2 < 2; ++s2)
        tc::copy_tile_sw128<ROWS, NT>(V + s2 * ROWS * 32, value + (head_rows + v0) * kD, kD, 0, 32 * s2, kT - v0, kD);
}
template <int ROWS, int NT> __device__ __forceinline__ void round_v(float *V) {
#pragma unroll
    for (int s2 = 0; s2 < 2; ++s2) tc::round_tile_sw128<ROWS, NT>(V + s2 * ROWS * 32);
}

// v's fp16 tile (F16): the chunks this thread copied with copy_v into the
// two fp32 tiles of ROWS keys at V, converted into V16 (ROWS x 64 halves,
// K-major, swizzled). A thread reads only what it copied itself, so no
// barrier comes between its cp.async wait and this.
template <int ROWS, int NT> __device__ __forceinline__ void v_to_f16(const float *V, float *V16) {
    constexpr int RS = NT / 8, PASSES = ROWS / RS;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    unsigned char *dst = reinterpret_cast<unsigned char *>(V16);
#pragma unroll
    for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
        for (int p = 0; p < PASSES; ++p) {
            const int r = rt + p * RS;
            const float4 x = *reinterpret_cast<const float4 *>(V + s2 * ROWS * 32 + r * 32 + 4 * (c ^ (r % 8)));
            *reinterpret_cast<uint2 *>(dst + sw16(r, 32 * s2 + 4 * c)) =
                make_uint2(tc::pack_f16x2(x.x, x.y), tc::pack_f16x2(x.z, x.w));
        }
}
// v ready for the tensor cores once its copies have landed: rounded to TF32
// in place, or (F16) converted into V16.
template <int ROWS, int NT> __device__ __forceinline__ void ready_v(float *V, float *V16) {
    if constexpr (F16) v_to_f16<ROWS, NT>(V, V16);
    else round_v<ROWS, NT>(V);
}

// The prologue of both organisations, up to step 0's rows in R: v of the
// block's ROWS keys (key row v0 of the head on; rows past T read as zeros)
// into V's two swizzled tiles of 32 d by the block's NT threads, rounded
// (F16: converted into V16) once they land; (GS_HALF) the head's maxima;
// the barriers' initialisation made visible; step 0's rows asked of the
// TMA, the P and Pd of steps 0 ..
// P_STAGES-2 (steps of BI rows), and step 0's row sums. cp.async groups,
// oldest first: [v] [P of steps 0 .. P_STAGES-2], then per step (the
// caller's loop) [P of step s + P_STAGES - 1].
template <int ROWS, int NT, int BI, class LoadRows, class LoadP, class LoadD>
__device__ __forceinline__ void pass_prologue(float *V, float *V16, const float *__restrict__ value, i64 head_rows, i64 v0,
                                              const float *__restrict__ gan, const float *__restrict__ rowdot,
                                              float (&maxima)[3][8], unsigned long long *rows_full,
                                              LoadRows load_rows, LoadP load_p, LoadD load_d) {
    copy_v<ROWS, NT>(V, value, head_rows, v0);
    tc::cp_async_commit();
    if constexpr (GS_HALF) head_maxima(gan, rowdot, head_rows, maxima);
    __syncthreads(); // the barriers are initialised
    load_rows(0);
#pragma unroll
    for (int st = 0; st < P_STAGES - 1; ++st) {
        load_p(st * BI, st);
        if (!P_TMA) tc::cp_async_commit();
    }
    load_d(0);
    tc::cp_async_wait<P_TMA ? 0 : P_STAGES - 1>(); // v
    ready_v<ROWS, NT>(V, V16);
    tc::mbar_wait(rows_full, 0);
}

// F16: tile rows c and c + 1 of a step's 32 gA and q rows, c = 16 hp + 2
// (lane % 8), from R (fp32, as the TMA brought them) into step buffer B (a
// shared address) as fp16, for warp q's 16 of the 64 d (4 a thread): GA [32
// c][64 d], and GAT and QT [64 d][32 c] (K = c, the first 64 bytes of each
// 128-byte row), the two rows' halves of a d one word. Tile row c holds
// query row perm(c), as in TF32's staging. zero0, zero1: gA's row c, c + 1
// lies past T and is stored as zeros.
__device__ __forceinline__ int f16_stage_row(int hp, int lane) { return 16 * hp + 2 * (lane % 8); }
__device__ __forceinline__ void stage_f16(unsigned R_s, unsigned B, int hp, int q, int lane, bool zero0,
                                          bool zero1) {
    const int c = f16_stage_row(hp, lane), d0 = 4 * (4 * q + lane / 8);
    const unsigned at0 = R_s + 4 * (BOX * (d0 / 32) + sw(perm(c), d0 % 32)),
                   at1 = R_s + 4 * (BOX * (d0 / 32) + sw(perm(c + 1), d0 % 32));
    float4 a0 = lds128(at0), a1 = lds128(at1);
    const float4 k0 = lds128(at0 + 4 * 2 * BOX), k1 = lds128(at1 + 4 * 2 * BOX);
    if (zero0) a0 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (zero1) a1 = make_float4(0.f, 0.f, 0.f, 0.f);
    sts64(B + 4 * GA + sw16(c, d0), make_uint2(tc::pack_f16x2(a0.x, a0.y), tc::pack_f16x2(a0.z, a0.w)));
    sts64(B + 4 * GA + sw16(c + 1, d0), make_uint2(tc::pack_f16x2(a1.x, a1.y), tc::pack_f16x2(a1.z, a1.w)));
    const float av0[4] = {a0.x, a0.y, a0.z, a0.w}, av1[4] = {a1.x, a1.y, a1.z, a1.w};
    const float kv0[4] = {k0.x, k0.y, k0.z, k0.w}, kv1[4] = {k1.x, k1.y, k1.z, k1.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        sts32(B + 4 * GAT + sw16(d0 + e, c), tc::pack_f16x2(av0[e], av1[e]));
        sts32(B + 4 * QT + sw16(d0 + e, c), tc::pack_f16x2(kv0[e], kv1[e]));
    }
}

// gPd^T = v_j gA_i^T over d into acc (one commit group): dV is this
// warpgroup's v (TF32: its tile of d 0-31, that of d 32-63 V_NEXT floats
// on; F16: its fp16 tile), dB the step buffer. TF32: 8 k steps of 8 in two
// swizzled tiles of 32 d each (GA's second 32 x 32 floats on); F16: 4 of 16.
template <int V_NEXT>
__device__ __forceinline__ void issue_gpd(float (&acc)[16], unsigned long long dV, unsigned long long dB) {
#pragma unroll
    for (int x = 0; x < 16; ++x) acc[x] = 0.f;
    tc::wg_fence();
    if constexpr (F16) {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) tc::wgmma_n32_f16_ss(acc, tc::wg_desc_at(dV, 8 * ks), tc::wg_desc_at(dB, GA + 8 * ks));
    } else {
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)
            tc::wgmma_n32_tf32_ss(acc, tc::wg_desc_at(dV, (ks / 4) * V_NEXT + 8 * (ks % 4)),
                                  tc::wg_desc_at(dB, GA + (ks / 4) * 32 * 32 + 8 * (ks % 4)));
    }
    tc::wg_commit();
}

// F16: Pd^T and gS^T as the A fragments of gV and gK, two k steps of 16
// rows i: step kk's words are accumulator columns 16 kk .. 16 kk + 15, (n =
// 2 kk, 2 kk + 1) x (keys g, g + 8), two columns each. Then the products
// with B from the step buffer of descriptor dB: one commit group.
__device__ __forceinline__ void issue_gv_gk_f16(float (&accV)[32], float (&accK)[32], const float (&pd)[4][4],
                                                const float (&s)[4][4], unsigned long long dB) {
    unsigned fpd[2][4], fs[2][4];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const int n = 2 * kk + x / 2, hh = x % 2; // word x: key g + 8 hh, columns 8 n + 2 t, + 1
            fpd[kk][x] = tc::pack_f16x2(pd[n][2 * hh], pd[n][2 * hh + 1]);
            fs[kk][x] = tc::pack_f16x2(s[n][2 * hh], s[n][2 * hh + 1]);
        }
    // Pin the fragments before the fence (see gemm_wg.cu: otherwise ptxas serializes the wgmmas).
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) asm volatile("" : "+r"(fpd[kk][x]), "+r"(fs[kk][x])::"memory");
    tc::wg_fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
        tc::wgmma_n64_f16(accV, fpd[kk], tc::wg_desc_at(dB, GAT + 8 * kk));
        tc::wgmma_n64_f16(accK, fs[kk], tc::wg_desc_at(dB, QT + 8 * kk));
    }
    tc::wg_commit();
}

// Pd^T and gS^T as the A fragments of gV and gK (fragment register 0..3
// takes (g, k t), (g+8, k t), (g, k t+4), (g+8, k t+4)), then gV += Pd^T gA_i
// and gK += gS^T q_i with B from the step buffer of descriptor dB: one commit group.
__device__ __forceinline__ void issue_gv_gk(float (&accV)[32], float (&accK)[32], const float (&pd)[4][4],
                                            const float (&s)[4][4], unsigned long long dB) {
    if constexpr (F16) {
        issue_gv_gk_f16(accV, accK, pd, s, dB);
        return;
    }
    unsigned fpd[4][4], fs[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
        constexpr int order[4] = {0, 2, 1, 3};
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            fpd[n][x] = tc::to_tf32(pd[n][order[x]]);
            fs[n][x] = tc::to_tf32(s[n][order[x]]);
        }
    }
    // Pin the fragments before the fence (see gemm_wg.cu: otherwise ptxas serializes the wgmmas).
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) asm volatile("" : "+r"(fpd[n][x]), "+r"(fs[n][x])::"memory");
    tc::wg_fence();
#pragma unroll
    for (int n = 0; n < 4; ++n) {
        tc::wgmma_n64_tf32(accV, fpd[n], tc::wg_desc_at(dB, GAT + 8 * n));
        tc::wgmma_n64_tf32(accK, fs[n], tc::wg_desc_at(dB, QT + 8 * n));
    }
    tc::wg_commit();
}
} // namespace fw

// The pass's parameters, the same in both organisations (lua/edit_attention_pass.lua
// binds them in this order): P and Pd by tensor maps (P_TMA) or as pointers.
// An organisation's block is a device function of the same parameters
// (FW_BLOCK_PARAMS: the tensor maps by reference, so that their addresses
// stay the kernel's parameters, which the TMA reads), called by the kernel of
// templates/attention_wg_kernel.cu with FW_PASS_ARGS.
#if {{P_TMA}}
#define FW_P_PARAMS const __grid_constant__ tc::tma_map map_p, const __grid_constant__ tc::tma_map map_pd
#define FW_P_REFS const tc::tma_map &map_p, const tc::tma_map &map_pd
#define FW_P_ARGS map_p, map_pd
#else
#define FW_P_PARAMS const float *__restrict__ probs, const float *__restrict__ probs_dropped
#define FW_P_REFS FW_P_PARAMS
#define FW_P_ARGS probs, probs_dropped
#endif
#define FW_PASS_REST                                                                                         \
    const float *__restrict__ attention_mask, float *__restrict__ grad_qkv, fw::gs_t *__restrict__ gs,        \
        float scale, const float *__restrict__ gan, float *__restrict__ gsinv, float dropout_p,                 \
        const float *__restrict__ edit_region_mask, float *__restrict__ wc_partials, float *__restrict__ out0
#define FW_PASS_PARAMS                                                                                       \
    const __grid_constant__ tc::tma_map map_ga, const float *__restrict__ rowdot,                             \
        const __grid_constant__ tc::tma_map map_q, const float *__restrict__ value, FW_P_PARAMS, FW_PASS_REST
#define FW_BLOCK_PARAMS                                                                                      \
    const tc::tma_map &map_ga, const float *__restrict__ rowdot, const tc::tma_map &map_q,                    \
        const float *__restrict__ value, FW_P_REFS, FW_PASS_REST
#define FW_PASS_ARGS                                                                                         \
    map_ga, rowdot, map_q, value, FW_P_ARGS, attention_mask, grad_qkv, gs, scale, gan, gsinv, dropout_p,      \
        edit_region_mask, wc_partials, out0
