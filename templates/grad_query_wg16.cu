// gQ on wgmma with fp16 operands (tile gq_f16=1, precision fp16), per (b, h):
// gQ^T [64, T] = alpha * k^T gS^T, stored as gQ [T, 64] into grad_qkv
// ({{LDC}} floats a row, the head's 64 columns). gS [T, {{LDB}}] is fp16 as the
// attention pass stores it for this product (no scale, zeros past T), so
// its rows are B, K-major, copied as they lie: 64 keys a k tile, one
// 128-byte row a query in the 128-byte swizzle, {{BN}} queries a block. The
// keys [T, 64] are fp32 (an input): A stored [K, M], copied into a padded
// tile, each thread's fragment converted to fp16 as it is read, so they are
// converted once, where they are first read. One warpgroup a block, its warp
// q the output rows (head dims) 16q..16q+15; {{STAGES}} stages of cp.async,
// one wgmma group in flight while the next tile loads, its A fragments the
// other of two register sets (as templates/gemm_wg.cu's gemm_wg).
// blockIdx.z = b * 16 + h; blockIdx.x the block of queries.
namespace gq16 {
using tc::i64;
constexpr i64 T = {{T}}, LDB = {{LDB}}, LDC = {{LDC}}, GS_ROWS = {{GS_ROWS}};
constexpr int BN = {{BN}}, STAGES = {{STAGES}}, NT = 128, NH = BN / 64; // NH m64n64k16 wgmmas a k step
static_assert((BN == 64 || BN == 128) && STAGES >= 3 && LDB % 8 == 0, "wgmma tiles, 16-byte rows of gS");
// A's row stride: rows 2t apart (the fragment's k pairs) fall 8 banks apart,
// so a warp's fragment reads meet no bank conflict.
constexpr int A_LD = 68;
// Each stage: gS's tile (BN rows of 128 bytes) first, at a 1024-byte
// boundary as the swizzle needs, then the keys' 64 x A_LD floats (17 KiB).
constexpr int B_FLOATS = BN * 32, STAGE = B_FLOATS + 64 * A_LD;
static_assert(STAGE % 256 == 0, "stages of whole 1024-byte blocks");
// Whole pairs of k tiles (the register sets alternate), the last past T zeros.
constexpr int KTILES = (int)((T + 127) / 128) * 2;

// gS rows n0.. and keys k0..k0+63 into a swizzled tile: row r's 16-byte
// chunk c (8 keys) at chunk c ^ (r % 8). A thread keeps one chunk column, so
// its swizzled column is fixed; rows past T and chunks past T read zeros.
__device__ __forceinline__ void copy_gs_tile(float *dst, const unsigned short *gs, i64 n0, i64 k0) {
    constexpr int RS = NT / 8;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const bool k_ok = k0 + 8 * c < T;
    const unsigned short *s = gs + (n0 + rt) * LDB + k0 + 8 * c;
    char *d = reinterpret_cast<char *>(dst) + 16 * (c ^ (rt % 8));
#pragma unroll
    for (int p = 0; p < BN / RS; ++p) {
        const bool ok = k_ok && n0 + rt + p * RS < T;
        tc::cp_async16(d + (rt + p * RS) * 128, ok ? s + (i64)p * RS * LDB : gs, ok);
    }
}
} // namespace gq16

extern "C" __global__ void __launch_bounds__(128, 1)
{{NAME}}(const float *__restrict__ key, const unsigned short *__restrict__ gs, float *__restrict__ C, float alpha) {
    using namespace gq16;
    tc::pdl_enter();
    extern __shared__ float4 smem4[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem4);
    float *smem = reinterpret_cast<float *>(smem4) + ((1024 - raw % 1024) % 1024) / 4; // launch asks 1 KiB more
    const i64 z = blockIdx.z, n0 = (i64)blockIdx.x * BN;
    const float *A = key + z * T * 64;
    const unsigned short *B = gs + z * GS_ROWS * LDB;
    C += z / 16 * T * LDC + z % 16 * 64;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, wrow = threadIdx.x / 32 * 16;

    auto load = [&](int kt) {
        float *Bs = smem + (kt % STAGES) * STAGE;
        copy_gs_tile(Bs, B, n0, (i64)kt * 64);
        tc::copy_tile<64, 64, NT>(Bs + B_FLOATS, A_LD, A, 64, (i64)kt * 64, 0, T, 64);
    };

    float acc[NH][32];
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[h][i] = 0.f;
    unsigned af[2][4][4]; // A fragments of 4 k steps of 16; the set of tile kt-1 may still be read

    auto step = [&](int kt, unsigned (&a)[4][4]) {
        tc::cp_async_wait<STAGES - 3>();
        tc::fence_async_shared();
        __syncthreads(); // tile kt is in place for all; tile kt-2's wgmmas are done
        if (kt + STAGES - 2 < KTILES) load(kt + STAGES - 2);
        tc::cp_async_commit();
        const float *Bs = smem + (kt % STAGES) * STAGE, *As = Bs + B_FLOATS;
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
            for (int h = 0; h < NH; ++h) tc::wgmma_n64_f16(acc[h], a[s], tc::wg_desc(Bs + h * 64 * 32 + 8 * s));
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

    // acc[h][4j + 2e + x]: head dim wrow + g + 8e, query n0 + 64h + 8j + 2t + x.
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const i64 c = n0 + 64 * h + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int d = wrow + g + 8 * e;
                if (c < T) C[c * LDC + d] = alpha * acc[h][4 * j + 2 * e];
                if (c + 1 < T) C[(c + 1) * LDC + d] = alpha * acc[h][4 * j + 2 * e + 1];
            }
        }
}
