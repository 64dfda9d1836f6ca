// gQ on wgmma with fp16 operands (tile gq_f16=1, precision fp16), per (b, h):
// gQ^T [64, T] = alpha * k^T gS^T, stored as gQ [T, 64] into grad_qkv
// ({{LDC}} floats a row, the head's 64 columns). gS [T, {{LDB}}] is fp16 as the
// attention pass stores it for this product (no scale, zeros past T), so
// its rows are B, K-major, copied as they lie: 64 keys a k tile, one
// 128-byte row a query in the 128-byte swizzle, {{BN}} queries a block. The
// keys [T, 64] are fp32 (an input): A stored [K, M], copied into a padded
// tile, each thread's fragment converted to fp16 as it is read, so they are
// converted once, where they are first read. A warpgroup a matrix, its warp
// q the output rows (head dims) 16q..16q+15; {{STAGES}} stages of cp.async,
// one wgmma group in flight while the next tile loads, its A fragments the
// other of two register sets (as templates/gemm_wg.cu's gemm_wg).
// RED_LD > 0 (tile gq_red): each gS tile is also added, as it lands, into
// red + h * RED_LD^2 (grad_edit_region_bias) by float reductions, for batch
// rows from RED_FROM (gq_red=2: the pass stored row 0 there), and the blocks
// go head by head (blockIdx.z = h * OUTER + b / PAIR), so that the rows they
// add into stay in L2 between the batch rows' adds. PAIR = 2 (tile
// gq_pair=1): batch rows b and b + 1 a block, a warpgroup each, every thread
// copying the same slots of both gS tiles, whose sum it adds by one
// reduction. Else blockIdx.z = b * 16 + h. blockIdx.x: the block of queries.
namespace gq16 {
using tc::i64;
constexpr i64 T = {{T}}, LDB = {{LDB}}, LDC = {{LDC}}, GS_ROWS = {{GS_ROWS}}, RED_LD = {{RED_LD}};
constexpr int BN = {{BN}}, STAGES = {{STAGES}}, NH = BN / 64; // NH m64n64k16 wgmmas a k step
constexpr int PAIR = {{PAIR}}, NT = 128 * PAIR, OUTER = {{OUTER}}, RED_FROM = {{RED_FROM}};
constexpr i64 NB = {{NB}}, KEYS_B = 16 * T * 64, GS_B = 16 * GS_ROWS * LDB, C_B = T * LDC; // one batch row's
static_assert((BN == 64 || BN == 128) && STAGES >= 3 && LDB % 8 == 0, "wgmma tiles, 16-byte rows of gS");
static_assert(PAIR == 1 || (PAIR == 2 && RED_LD > 0), "two batch rows a block: the bias sums' pairs");
static_assert(RED_LD % 4 == 0, "16-byte reductions");
// A's row stride: rows 2t apart (the fragment's k pairs) fall 8 banks apart,
// so a warp's fragment reads meet no bank conflict.
constexpr int A_LD = 68;
// Each stage: per matrix gS's tile (BN rows of 128 bytes) first, at a
// 1024-byte boundary as the swizzle needs, then the keys' 64 x A_LD floats.
constexpr int B_FLOATS = BN * 32, TILES = B_FLOATS + 64 * A_LD, STAGE = PAIR * TILES;
static_assert(TILES % 256 == 0, "tiles of whole 1024-byte blocks");
// Whole pairs of k tiles (the register sets alternate), the last past T zeros.
constexpr int KTILES = (int)((T + 127) / 128) * 2;

// The byte offset in a gS tile of this thread's chunk c (8 keys) of row rt +
// p * NT / 8: chunk c ^ (row % 8) of its 128-byte row. A thread keeps one
// chunk column, so its swizzled column is fixed.
__device__ __forceinline__ int gs_slot(int p) {
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    return (rt + p * (NT / 8)) * 128 + 16 * (c ^ (rt % 8));
}

// gS rows n0.. and keys k0..k0+63 into a swizzled tile; rows past T and
// chunks past T read zeros.
__device__ __forceinline__ void copy_gs_tile(float *dst, const unsigned short *gs, i64 n0, i64 k0) {
    constexpr int RS = NT / 8;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const bool k_ok = k0 + 8 * c < T;
    const unsigned short *s = gs + (n0 + rt) * LDB + k0 + 8 * c;
#pragma unroll
    for (int p = 0; p < BN / RS; ++p) {
        const bool ok = k_ok && n0 + rt + p * RS < T;
        tc::cp_async16(reinterpret_cast<char *>(dst) + gs_slot(p), ok ? s + (i64)p * RS * LDB : gs, ok);
    }
}

// RED_LD > 0: the chunks this thread copied into the tiles at `tile` (PAIR
// of them, TILES floats apart) as floats, the sum of those whose bit is set
// in mask added into red[(n0 + row) * RED_LD + k] where row and k < T.
__device__ __forceinline__ void add_gs_tile(const float *tile, float *__restrict__ red, i64 n0, i64 k0,
                                            unsigned mask) {
    constexpr int RS = NT / 8;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const i64 k = k0 + 8 * c;
    if (k >= T) return;
#pragma unroll
    for (int p = 0; p < BN / RS; ++p) {
        const i64 n = n0 + rt + p * RS;
        if (n >= T) break;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < PAIR; ++w) {
            if (!(mask >> w & 1)) continue;
            const uint4 h = *reinterpret_cast<const uint4 *>(reinterpret_cast<const char *>(tile + w * TILES) + gs_slot(p));
            const unsigned words[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] += tc::from_f16((unsigned short)(words[e / 2] >> 16 * (e % 2)));
        }
        float *dst = red + n * RED_LD + k; // columns past T hold gS's zeros
        tc::red_add4(dst, make_float4(v[0], v[1], v[2], v[3]));
        if (k + 4 < T) tc::red_add4(dst + 4, make_float4(v[4], v[5], v[6], v[7]));
    }
}
} // namespace gq16

extern "C" __global__ void __launch_bounds__(gq16::NT, 1)
{{NAME}}(const float *__restrict__ key, const unsigned short *__restrict__ gs, float *__restrict__ C, float alpha,
         float *__restrict__ red) {
    using namespace gq16;
    tc::pdl_enter();
    extern __shared__ float4 smem4[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem4);
    float *smem = reinterpret_cast<float *>(smem4) + ((1024 - raw % 1024) % 1024) / 4; // launch asks 1 KiB more
    const i64 b = RED_LD > 0 ? blockIdx.z % OUTER * PAIR : blockIdx.z / 16,
              h = RED_LD > 0 ? blockIdx.z / OUTER : blockIdx.z % 16, n0 = (i64)blockIdx.x * BN;
    const bool two = PAIR == 2 && b + 1 < NB; // else a second warpgroup copies the first's matrices again
    const unsigned mask = (b >= RED_FROM) | (two && b + 1 >= RED_FROM) << 1; // the batch rows added into red
    const i64 z = b * 16 + h;
    const float *A = key + z * T * 64;
    const unsigned short *B = gs + z * GS_ROWS * LDB;
    if (RED_LD > 0 && red) red += h * RED_LD * RED_LD;
    const int mat = threadIdx.x / 128, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wrow = threadIdx.x % 128 / 32 * 16;

    auto load = [&](int kt) {
#pragma unroll
        for (int w = 0; w < PAIR; ++w) { // PAIR = 2: all threads copy both matrices' tiles
            float *Bs = smem + (kt % STAGES) * STAGE + w * TILES;
            copy_gs_tile(Bs, B + (two ? w * GS_B : 0), n0, (i64)kt * 64);
            tc::copy_tile<64, 64, NT>(Bs + B_FLOATS, A_LD, A + (two ? w * KEYS_B : 0), 64, (i64)kt * 64, 0, T, 64);
        }
    };

    float acc[NH][32];
#pragma unroll
    for (int n = 0; n < NH; ++n)
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[n][i] = 0.f;
    unsigned af[2][4][4]; // A fragments of 4 k steps of 16; the set of tile kt-1 may still be read

    auto step = [&](int kt, unsigned (&a)[4][4]) {
        tc::cp_async_wait<STAGES - 3>();
        if (RED_LD > 0 && red && mask) add_gs_tile(smem + (kt % STAGES) * STAGE, red, n0, (i64)kt * 64, mask);
        tc::fence_async_shared();
        __syncthreads(); // tile kt is in place for all; tile kt-2's wgmmas are done
        if (kt + STAGES - 2 < KTILES) load(kt + STAGES - 2);
        tc::cp_async_commit();
        const float *Bs = smem + (kt % STAGES) * STAGE + mat * TILES, *As = Bs + B_FLOATS;
        auto at = [&](int m, int k) { return As[k * A_LD + wrow + m]; };
#pragma unroll
        for (int s = 0; s < 4; ++s) tc::f16_a_fragment(a[s], g, 16 * s + 2 * t, at);
        // Pinned before the fence, so that no conversion sinks between the wgmmas.
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
            for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
        tc::wg_fence();
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
            for (int n = 0; n < NH; ++n) tc::wgmma_n64_f16(acc[n], a[s], tc::wg_desc(Bs + n * 64 * 32 + 8 * s));
        tc::wg_commit();
        tc::wg_wait<1>();
    };

#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < KTILES) load(s);
        tc::cp_async_commit();
    }
    for (int kt = 0; kt < KTILES; kt += 2) {
        step(kt, af[0]);
        step(kt + 1, af[1]);
    }
    tc::wg_wait<0>();
    tc::cp_async_wait<0>();
    if (mat == 1 && !two) return;
    C += (b + mat) * C_B + h * 64;

    // acc[n][4j + 2e + x]: head dim wrow + g + 8e, query n0 + 64n + 8j + 2t + x.
#pragma unroll
    for (int n = 0; n < NH; ++n)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const i64 c = n0 + 64 * n + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int d = wrow + g + 8 * e;
                if (c < T) C[c * LDC + d] = alpha * acc[n][4 * j + 2 * e];
                if (c + 1 < T) C[(c + 1) * LDC + d] = alpha * acc[n][4 * j + 2 * e + 1];
            }
        }
}
