// Projection products on tensor cores: C = alpha * op(A) @ op(B), op(A) [M, K],
// op(B) [K, N], row-major with leading dimensions LDA, LDB, LDC. TA: A is
// stored [K, M]; TB: B is stored [N, K]. A block computes a BM x BN tile with
// WARPS_M x WARPS_N warps over one slice of K (`split`; KSPLIT columns each),
// fed by a STAGES-deep cp.async pipeline so loads of later k tiles overlap the
// MMAs of the current one. With more than one slice the block writes its
// partial product to C + z * M * N (the reduce kernel adds the slices in order).
// The contiguous dimension of each operand must be a multiple of 4 and the
// pointers 16-byte aligned (the plan checks both); rows past M, N or K read 0.
namespace tc {
template <i64 M, i64 N, i64 K, i64 LDA, i64 LDB, bool TA, bool TB, int MODE, int BM, int BN, int BK, int WARPS_M,
          int WARPS_N, int STAGES, i64 KSPLIT>
__device__ __forceinline__ void gemm(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                     i64 ldc, float alpha, int split) {
    constexpr int NT = WARPS_M * WARPS_N * 32;
    constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, FM = WTM / 16, FN = WTN / 8;
    // Tiles read along their rows' index as k are stored [BK][rows + 8], the
    // others [rows][BK + 4]: either pad puts a warp's fragment reads on 32 banks.
    constexpr int A_LD = TA ? BM + 8 : BK + 4, B_LD = TB ? BK + 4 : BN + 8;
    constexpr int A_SIZE = TA ? BK * A_LD : BM * A_LD, B_SIZE = TB ? BN * B_LD : BK * B_LD;
    static_assert(FM * 16 == WTM && FN * 8 == WTN, "warp tile must be whole fragments");
    static_assert(BK % kstep<MODE>::value == 0 && KSPLIT % BK == 0, "k tiles");
    extern __shared__ float4 smem4[];
    float *smem = reinterpret_cast<float *>(smem4);

    const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
    const i64 kbeg = (i64)split * KSPLIT, kend = kbeg + KSPLIT < K ? kbeg + KSPLIT : K;
    const int ktiles = (int)((kend - kbeg + BK - 1) / BK);
    const int tid = threadIdx.x, warp = tid / 32;
    const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;

    auto load = [&](int stage, int kt) {
        float *As = smem + stage * (A_SIZE + B_SIZE), *Bs = As + A_SIZE;
        const i64 k0 = kbeg + (i64)kt * BK;
        // Each operand as stored: rows along its leading dimension, 16-byte chunks along the contiguous one.
        if constexpr (TA) copy_tile<BK, BM, NT>(As, A_LD, A, LDA, k0, m0, kend, M);
        else copy_tile<BM, BK, NT>(As, A_LD, A, LDA, m0, k0, M, kend);
        if constexpr (TB) copy_tile<BN, BK, NT>(Bs, B_LD, B, LDB, n0, k0, N, kend);
        else copy_tile<BK, BN, NT>(Bs, B_LD, B, LDB, k0, n0, kend, N);
    };

    float acc[FM][FN][4];
    zero(acc);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) load(s, s);
        cp_async_commit(); // empty groups keep the wait counts uniform
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); // tile kt has landed for every thread; stage (kt-1) % STAGES is free
        if (kt + STAGES - 1 < ktiles) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        cp_async_commit();
        const float *As = smem + (kt % STAGES) * (A_SIZE + B_SIZE), *Bs = As + A_SIZE;
        auto a = [&](int m, int k) { return TA ? As[k * A_LD + wm + m] : As[(wm + m) * A_LD + k]; };
        auto b = [&](int k, int n) { return TB ? Bs[(wn + n) * B_LD + k] : Bs[k * B_LD + wn + n]; };
#pragma unroll
        for (int k = 0; k < BK; k += kstep<MODE>::value) warp_mma<MODE>(acc, k, a, b);
    }
    cp_async_wait<0>();

    const int lane = tid % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const i64 r = m0 + wm + 16 * i + g, c = n0 + wn + 8 * j + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const i64 rr = r + 8 * h;
                if (rr >= M) continue;
                if (c + 1 < N) {
                    *reinterpret_cast<float2 *>(&C[rr * ldc + c]) =
                        make_float2(alpha * acc[i][j][2 * h], alpha * acc[i][j][2 * h + 1]);
                } else if (c < N) {
                    C[rr * ldc + c] = alpha * acc[i][j][2 * h];
                }
            }
        }
}

// out = alpha * (sum over the SPLITS slices of part [SPLITS][n]), in slice
// order, so the result does not depend on which block finished first.
template <i64 NELEM, int SPLITS>
__device__ __forceinline__ void splitk_reduce(const float *__restrict__ part, float *__restrict__ out, float alpha) {
    const i64 i = 4 * ((i64)blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= NELEM) return;
    float4 s = *reinterpret_cast<const float4 *>(part + i);
#pragma unroll
    for (int z = 1; z < SPLITS; ++z) {
        const float4 v = *reinterpret_cast<const float4 *>(part + z * NELEM + i);
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    *reinterpret_cast<float4 *>(out + i) = make_float4(alpha * s.x, alpha * s.y, alpha * s.z, alpha * s.w);
}
} // namespace tc
