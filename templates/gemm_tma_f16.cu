// Projection products on wgmma fed by the TMA (sm_90a), fp16 operands and
// fp32 accumulation (precision fp16, template MODE 2): C = alpha * op(A) @ B^T,
// op(A) [M, K] fp32 (TA: A stored [K, M]), B [N, kp] fp16 (K-major, the
// plan's transpose writes it so, templates/transpose_f16.cu), C [M, N] fp32.
// The same roles, barriers and epilogue as templates/gemm_tma.cu (read it
// first), and the same template parameters, so one kernel template launches
// either (its TMA_FN hole); what differs:
//
// - A k tile is 64 k: a row of 64 halves is 128 bytes, so the fp16 tiles are
//   K-major in the 128-byte swizzle exactly as the TF32 tiles of 32 floats
//   are, the same descriptors, and each of the four wgmmas a tile
//   (m64nNk16 .f32.f16.f16) reads 32 bytes of every row, as m64nNk8 TF32
//   does.
// - B comes in fp16 as the transpose wrote it; its tensor map calls each pair
//   of halves one float (cols kp / 2), so its box of 32 "floats" is 64 k and
//   the TMA, which copies bytes, needs no fp16 map.
// - A stays fp32 in memory and is converted once, where it is read: the TMA
//   brings each k tile raw ([BM, 64] as two swizzled boxes of 32 floats, or
//   TA [64, BM] as two plain boxes of 32 rows) into one of RAW raw tiles, and
//   the producer's three prep warps write it into the stage's fp16 tile,
//   rounded to nearest (cvt.rn, as the mma.sync path rounds), then give the
//   raw tile back. COLSUM sums the raw fp32 values as gemm_tma does.
// - Not here: ROWDOT_T (gA's row dots: the plan launches rowdot), B_ROUND
//   (B raw fp32: the plan transposes every B), A_TRUNC (A is always
//   converted).
// KSPLIT is a multiple of 64, so no k tile crosses into the next slice.
namespace tc {

#ifndef TC_EMU
// d[BN/2] += A (64 x 16 halves, descriptor a) @ B (16 x BN, descriptor b),
// both K-major, no transpose (imm-trans-a, imm-trans-b 0), scales 1.
__device__ __forceinline__ void wgmma_n256_f16_ss(float (&d)[128], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" TC_WG_REGS128 "}, "
                 "%128, %129, p, 1, 1, 0, 0;\n}\n"
                 : TC_WG_ACC128(d)
                 : "l"(a), "l"(b));
}
__device__ __forceinline__ void wgmma_n128_f16_ss(float (&d)[64], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" TC_WG_REGS64 "}, "
                 "%64, %65, p, 1, 1, 0, 0;\n}\n"
                 : TC_WG_ACC64(d)
                 : "l"(a), "l"(b));
}
#endif

template <int BN> __device__ __forceinline__ void wgmma_f16_ss(float (&d)[BN / 2], unsigned long long a,
                                                              unsigned long long b) {
    static_assert(BN == 128 || BN == 256, "n128 or n256");
    if constexpr (BN == 256) wgmma_n256_f16_ss(d, a, b);
    else wgmma_n128_f16_ss(d, a, b);
}

// One raw fp32 k tile of A into the stage's fp16 K-major swizzled tile As, by
// prep thread p: 16-byte fp16 chunk c (k 8c .. 8c+7) of row m for i = p + 96 j,
// m = i % BM, c = i / BM (consecutive threads, consecutive rows: gemm_tma's
// map, so COLSUM's four sums a thread are its). TA: raw is [64, BM]; else two
// swizzled [BM, 32] boxes, k 0..31 then 32..63.
template <int BM, bool TA, bool COLSUM>
__device__ __forceinline__ void convert_a_f16(const float *raw, float *As, int p, float (&cs)[4]) {
    constexpr int ITERS = (BM * 8 + TMA_PREP_THREADS - 1) / TMA_PREP_THREADS;
#pragma unroll
    for (int j = 0; j < ITERS; ++j) {
        const int i = p + j * TMA_PREP_THREADS;
        if (i >= BM * 8) break;
        const int m = i % BM, c = i / BM;
        float v[8];
        if constexpr (TA) {
            const float *R = raw + 8 * c * BM + m;
#pragma unroll
            for (int q = 0; q < 8; ++q) v[q] = R[q * BM];
        } else {
            const float *box = raw + (c / 4) * BM * 32 + m * 32;
            const int c2 = 2 * (c % 4);
            const float4 lo = *reinterpret_cast<const float4 *>(&box[4 * (c2 ^ (m % 8))]);
            const float4 hi = *reinterpret_cast<const float4 *>(&box[4 * ((c2 + 1) ^ (m % 8))]);
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        }
        *reinterpret_cast<uint4 *>(&As[m * 32 + 4 * (c ^ (m % 8))]) =
            make_uint4(pack_f16x2(v[0], v[1]), pack_f16x2(v[2], v[3]), pack_f16x2(v[4], v[5]), pack_f16x2(v[6], v[7]));
        if constexpr (COLSUM) cs[j % 4] += ((((((v[0] + v[1]) + v[2]) + v[3]) + v[4]) + v[5]) + v[6]) + v[7];
    }
}

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int STAGES, int RAW, i64 KSPLIT, bool COLSUM = false,
          bool A_TRUNC = false, bool B_ROUND = false, bool C_T = false, int CLUSTER = 1,
          bool IN_CLUSTER = (CLUSTER > 1), bool RED = false, i64 ROWDOT_T = 0>
__device__ __forceinline__ void gemm_tma_f16(const tma_map *map_a, const tma_map *map_b, float *__restrict__ C,
                                             i64 ldc, float alpha, int split, float *__restrict__ colsum, int bx,
                                             int by, const tma_map * = nullptr, float *__restrict__ = nullptr) {
    // In floats: an fp16 tile of 64 k takes the bytes a TF32 tile of 32 does.
    constexpr int NC = BM / 64, A_TILE = BM * 32, B_TILE = BN * 32, STAGE = A_TILE + B_TILE, RAW_TILE = BM * 64;
    static_assert(BM == 128 && (BN == 128 || BN == 256) && STAGES >= 2 && RAW >= 1 && KSPLIT % 64 == 0,
                  "fp16 tma product tiles");
    static_assert(M < (1ll << 31) && N < (1ll << 31) && K < (1ll << 31), "TMA coordinates are 32-bit");
    static_assert(ROWDOT_T == 0 && !B_ROUND && !A_TRUNC, "fp16: no row dots, B in fp16, A always converted");
    static_assert(!COLSUM || TA, "column sums of A are made from the raw TA tiles");
    static_assert(CLUSTER == 1 || (BM * (BN + 8) <= STAGES * STAGE && !C_T),
                  "the parked tile fits in the stages; C as stored");
    static_assert(CLUSTER == 1 || IN_CLUSTER, "K slices added across a cluster are a cluster launch's");
    static_assert(!RED || (CLUSTER == 1 && !C_T), "K slices added by atomics: not in a cluster, C as stored");
    float *smem;
    if constexpr (IN_CLUSTER) {
        smem = smem_1k();
    } else {
        extern __shared__ float4 smem4[];
        const unsigned raw_addr = smem_u32(smem4);
        smem = reinterpret_cast<float *>(smem4) + ((1024 - raw_addr % 1024) % 1024) / 4; // launch asks 1 KiB more
    }
    float *raw = smem + STAGES * STAGE;
    unsigned long long *full = reinterpret_cast<unsigned long long *>(raw + RAW * RAW_TILE);
    unsigned long long *ready = full + STAGES, *empty = ready + STAGES, *raw_free = empty + STAGES;

    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&ready[s], TMA_PREP_THREADS);
            mbar_init(&empty[s], NC * 4); // each consumer warp
        }
        for (int r = 0; r < RAW; ++r) mbar_init(&raw_free[r], TMA_PREP_THREADS);
        mbar_init_fence();
    }
    __syncthreads();

    const int m0 = (int)((i64)by * BM), n0 = (int)((i64)bx * BN);
    const i64 kbeg = (i64)split * KSPLIT, kend = kbeg + KSPLIT < K ? kbeg + KSPLIT : K;
    const int ktiles = (int)((kend - kbeg + 63) / 64);

    if (threadIdx.x < 32) { // the TMA warp
        if (threadIdx.x != 0) return;
        for (int j = 0; j < ktiles; ++j) {
            const int s = j % STAGES;
            if (j >= STAGES) mbar_wait(&empty[s], (j / STAGES - 1) & 1);
            if (j >= RAW) mbar_wait(&raw_free[j % RAW], (j / RAW - 1) & 1);
            float *Bs = smem + s * STAGE, *R = raw + (j % RAW) * RAW_TILE;
            const int k0 = (int)(kbeg + 64 * (i64)j);
            mbar_expect_tx(&full[s], (B_TILE + RAW_TILE) * 4);
            tma_load_2d(Bs, map_b, &full[s], k0 / 2, n0); // B's map counts pairs of halves
            if constexpr (TA) {
                tma_load_2d(R, map_a, &full[s], m0, k0);
                tma_load_2d(R + 32 * BM, map_a, &full[s], m0, k0 + 32);
            } else {
                tma_load_2d(R, map_a, &full[s], k0, m0);
                tma_load_2d(R + BM * 32, map_a, &full[s], k0 + 32, m0);
            }
        }
        return;
    }
    if (wg == 0) { // the rest of the producer: A converted to fp16 for the tensor cores
        const int p = tid - 32;
        static_assert(!COLSUM || BM == 128, "the column sums' thread map is BM = 128's");
        const bool sums = COLSUM && bx == 0;
        float cs[4] = {0.f, 0.f, 0.f, 0.f};
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % STAGES;
            mbar_wait(&full[s], (kt / STAGES) & 1);
            convert_a_f16<BM, TA, COLSUM>(raw + (kt % RAW) * RAW_TILE, smem + s * STAGE + B_TILE, p, cs);
            fence_async_shared(); // the fp16 tile, to the wgmmas (async proxy)
            mbar_arrive(&ready[s]);
            mbar_arrive(&raw_free[kt % RAW]);
        }
        if constexpr (COLSUM) {
            if (!sums) return;
            // As gemm_tma's: every raw tile has been read, so they hold the 96 x 4
            // partial sums; column m's three threads are m % 32 + 32 k, in the order of k.
            named_bar_sync<1, TMA_PREP_THREADS>();
            raw[4 * p + 0] = cs[0], raw[4 * p + 1] = cs[1], raw[4 * p + 2] = cs[2], raw[4 * p + 3] = cs[3];
            named_bar_sync<1, TMA_PREP_THREADS>();
            for (int m = p; m < BM; m += TMA_PREP_THREADS) {
                float total = 0.f;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int q = m % 32 + 32 * k;
                    total += raw[4 * q + (((q - m + BM) / 32) & 3)];
                }
                if (m0 + m < M) colsum[(i64)split * M + m0 + m] = total;
            }
        }
        return;
    }

    // A consumer: rows 64w .. 64w+63 of the block's tile, all BN columns.
    const int w = wg - 1, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(&ready[s], (kt / STAGES) & 1);
        const float *Bs = smem + s * STAGE, *As = Bs + B_TILE + w * 64 * 32;
        wg_fence();
#pragma unroll
        for (int k = 0; k < 4; ++k) wgmma_f16_ss<BN>(acc, wg_desc(As + 8 * k), wg_desc(Bs + 8 * k));
        wg_commit();
        wg_wait<1>(); // tile kt-1's wgmmas are complete: its stage goes back
        if (kt > 0 && lane == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
    }
    wg_wait<0>();

    const int wrow = w * 64 + (tid / 32) * 16;
    if constexpr (CLUSTER > 1) {
        cluster_add_store<M, N, BM, BN, CLUSTER>(acc, smem, C, ldc, alpha, split, m0, n0, wrow, w * 128 + tid);
        return;
    }
    const i64 r = (i64)m0 + wrow + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const i64 c = (i64)n0 + 8 * j + 2 * t;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const i64 rr = r + 8 * e;
            if (rr >= M) continue;
            const float x = alpha * acc[4 * j + 2 * e], y = alpha * acc[4 * j + 2 * e + 1];
            if constexpr (RED) {
                if (c + 1 < N) red_add2(&C[rr * ldc + c], x, y);
                else if (c < N) red_add(&C[rr * ldc + c], x);
            } else if constexpr (C_T) {
                if (c < N) C[c * ldc + rr] = x;
                if (c + 1 < N) C[(c + 1) * ldc + rr] = y;
            } else if (c + 1 < N) *reinterpret_cast<float2 *>(&C[rr * ldc + c]) = make_float2(x, y);
            else if (c < N) C[rr * ldc + c] = x;
        }
    }
}
} // namespace tc
