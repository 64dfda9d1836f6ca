// The attention pass on Hopper's warpgroup tensor cores (wgmma, sm_90a, TF32;
// tile wg_att=1): the sums of attention_fused.cu with STORE_GS, for one (B, T),
// each element of attention_probs and attention_probs_dropped read once.
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
// rows together. This file holds what both share.
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
constexpr int kHeads = 16, kD = 64, kHid = 1024, kQkv = 3072;
constexpr int BJ = 64, P_STAGES = {{P_STAGES}};
constexpr bool P_TMA = {{P_TMA}};
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

// Shared memory by 32-bit address. In the step loop an address is a uniform
// base (the step's buffer or ring slot) plus a per-thread offset fixed before
// the loop plus a constant, which the load or store adds itself ([R+UR+imm]):
// no index math per step.
__device__ __forceinline__ void sts32(unsigned a, unsigned v) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v)); }
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
} // namespace fw
