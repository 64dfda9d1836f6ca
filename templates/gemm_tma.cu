// Projection products on wgmma fed by the TMA (sm_90a), TF32 (below) or fp16
// operands (OPERANDS f16, at the end of this comment):
// C = alpha * op(A) @ B^T, op(A) [M, K] (TA: A stored [K, M]), B [N, K]
// (K-major, rounded to TF32 by the plan's transpose), C [M, N] row-major.
//
// A producer warpgroup and BM/64 consumer warpgroups. Per k tile of 32, the
// producer's first warp asks the TMA for B's and A's tiles (two bulk tensor
// copies, counted in bytes on the stage's `full` barrier) as soon as the stage
// is free; its other three warps then make A ready for the tensor cores,
// which read both operands from shared memory and would truncate raw fp32
// bits: they round A to TF32 in place (A stored [M, K]), or (TA) write the
// raw [32, BM] tile, transposed and rounded, into the K-major tile. `ready` then lets the
// consumers' wgmmas read the stage; `empty` gives it back once their wgmmas
// of it are complete. So the consumers issue only wgmmas and wait, and no
// barrier of the whole block is passed per k tile (templates/gemm_wg.cu, the
// products without the TMA, has every thread copy and round, and one
// __syncthreads per tile).
//
// Tiles in shared memory are K-major in the 128-byte swizzle (16-byte chunk c
// of row r at c ^ (r % 8)), written so by the TMA (B, A) or by the producer
// (TA); the raw TA tiles are plain [32, BM]. The TMA fills rows and k past the
// matrix with zeros. Tensor maps (the plan's `tmap:` arguments, encoded per
// launch by runtime/launch_edit_attention.c; helpers in templates/tma.cu): B
// over [N, LDB] with a box of 32 x BN, swizzled; A over [M, LDA] with 32 x BM
// (swizzled) or, TA, over [K, LDA] with BM x 32 (plain).
//
// The block's tile is (bx, by) (BN columns, BM rows), its K slice `split`:
// blockIdx's, or a position in a launch of two products (gemm_tma_pair_kernel.cu).
//
// A_TRUNC (A stored [M, K] only; grad_hidden): A goes to the tensor cores as
// stored, which truncate it to TF32: the producer only passes each stage on,
// and shared memory carries no read-modify-write of A (2-5% off the whole
// backward on its larger workloads, measured).
//
// B_ROUND: B is raw fp32 (gA^T's grad_output, read where it lies), rounded to
// TF32 in place by the producer's warps as A is. C_T: C stored transposed,
// C[n * ldc + m] (gA^T [1024, B*T] written as gA [B*T, 1024]).
//
// COLSUM (TA only): the column sums of A over the block's K slice, made by
// the producer from the raw tiles it transposes anyway (so a bias gradient,
// the column sums of the same matrix, needs no pass of its own over it). The
// blocks of the first BN columns make them, each of its 96 threads over the
// rows it copies, added in a fixed order: colsum[split * M + m].
//
// RED (splitk_red=1): the block adds alpha times its K slice's product into C
// with float atomics (red.global.add, at L2) instead of storing it, C zeroed
// by the plan before the launch: a split product needs neither its slices
// in memory nor a reduce launch after it, but the order of the slices' adds,
// and so the last bits of C, vary from run to run.
//
// ROWDOT_T > 0 (gA, TMA-fed and unsplit): the attention pass's row dots
// D[b, h, i] = gA[b, i, h] . attention_output[b, i, h] (T = ROWDOT_T, M = B*T
// rows, N = 1024 columns, 16 heads of 64) made from the block's accumulators,
// so no rowdot launch reads gA back. The TMA warp brings the tile's
// attention_output (map_o: 128-row boxes of 32 columns, swizzled) once its
// k tiles are asked for: TF32, head 0 into a region of its own; fp16, the
// first RAW heads into the raw tiles as the producer gives them back; the
// other heads into the stages of the last k tiles as the consumers give them
// back (rowdot_head). Each thread
// adds its 16 products of a row and head in the order of tc::store_head_dot's
// shuffle tree (its lanes' column pairs are a thread's 8 here, times the
// quad's 4): the same bits as the rowdot kernel's.
//
// CLUSTER > 1: the tile's CLUSTER K slices are the blocks of one cluster, the
// slice its rank. Each parks its accumulators in its shared memory (the stages
// are free once the block's last wgmma is complete); then rank r adds rows
// [r * BM / CLUSTER, ...) of the parked tiles, read across the cluster in rank
// order (a split product's reduce launch adds its slices in that order too:
// the same sums), and stores them. No partial products go through memory and
// no reduce launch follows on the chain; the cost is the blocks' wait for the
// slowest of their cluster.
//
// OPERANDS f16 (precision fp16, template MODE 2): fp16 operands, fp32
// accumulation, B [N, kp] fp16 (K-major, written so by the plan's transpose,
// templates/transpose_f16.cu). The same roles, barriers and epilogue; what
// differs:
// - A k tile is 64 k: a row of 64 halves is 128 bytes, so the fp16 tiles are
//   K-major in the 128-byte swizzle exactly as the TF32 tiles of 32 floats
//   are, the same descriptors, and each of the four wgmmas a tile
//   (m64nNk16 .f32.f16.f16) reads 32 bytes of every row, as m64nNk8 TF32
//   does. KSPLIT is a multiple of 64, so no k tile crosses into the next slice.
// - B comes in fp16 as the transpose wrote it; its tensor map calls each pair
//   of halves one float (cols kp / 2), so its box of 32 "floats" is 64 k and
//   the TMA, which copies bytes, needs no fp16 map.
// - A stays fp32 in memory and is converted once, where it is read: the TMA
//   brings each k tile raw ([BM, 64] as two swizzled boxes of 32 floats, or
//   TA [64, BM] as two plain boxes of 32 rows) into one of RAW raw tiles, and
//   the producer's three prep warps write it into the stage's fp16 tile,
//   rounded to nearest (cvt.rn, as the mma.sync path rounds), then give the
//   raw tile back. COLSUM sums the raw fp32 values as TF32's TA does.
// - Not here: B_ROUND (the plan transposes every B), A_TRUNC (A is always
//   converted).
namespace tc {

// The operands a TMA-fed product's wgmmas take from its stages.
enum class tma_operands { tf32, f16 };

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

// d[BN/2] += A (64 x 8 TF32 or 64 x 16 fp16, descriptor a) @ B (8 or 16 x BN,
// descriptor b), both K-major: 32 bytes of every row.
template <int BN, bool F16>
__device__ __forceinline__ void wgmma_tma_ss(float (&d)[BN / 2], unsigned long long a, unsigned long long b) {
    static_assert(BN == 128 || BN == 256, "n128 or n256");
    if constexpr (F16 && BN == 256) wgmma_n256_f16_ss(d, a, b);
    else if constexpr (F16) wgmma_n128_f16_ss(d, a, b);
    else if constexpr (BN == 256) wgmma_n256_tf32_ss(d, a, b);
    else wgmma_n128_tf32_ss(d, a, b);
}

// CLUSTER > 1's epilogue (see above), by the BM/64 consumer warpgroups: acc
// is this thread's fragment of rows wrow + g (+ 8) of the tile; ct its index
// among the consumers' threads.
template <i64 M, i64 N, int BM, int BN, int CLUSTER>
__device__ __forceinline__ void cluster_add_store(const float (&acc)[BN / 2], float *tile, float *__restrict__ C,
                                                  i64 ldc, float alpha, int rank, int m0, int n0, int wrow, int ct) {
    constexpr int THREADS = BM / 64 * 128, LDT = BN + 8, Q = BN / 4, RB = (BM + CLUSTER - 1) / CLUSTER;
    static_assert(CLUSTER <= 8, "a portable cluster");
    const int g = ct % 32 / 4, t = ct % 4;
    named_bar_sync<2, THREADS>(); // every consumer's wgmmas are complete: the stages may be overwritten
    // Rows padded by 8 floats: a half-warp's float2 stores (4 rows x 4) fall on distinct banks.
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
            *reinterpret_cast<float2 *>(&tile[(wrow + g + 8 * e) * LDT + 8 * j + 2 * t]) =
                make_float2(acc[4 * j + 2 * e], acc[4 * j + 2 * e + 1]);
    cluster_sync(); // every block's tile is parked
    const int r0 = rank * RB, rows = BM - r0 < RB ? BM - r0 : RB;
    for (int i = ct; i < rows * Q; i += THREADS) {
        const int row = r0 + i / Q, c4 = i % Q;
        const float *src = tile + row * LDT + 4 * c4;
        float4 s = ld_dsmem_f4(src, 0);
#pragma unroll
        for (int q = 1; q < CLUSTER; ++q) {
            const float4 v = ld_dsmem_f4(src, q);
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        const i64 rr = (i64)m0 + row, c = (i64)n0 + 4 * c4;
        if (rr >= M) continue;
        float *out = C + rr * ldc + c;
        if (c + 3 < N && ldc % 4 == 0)
            *reinterpret_cast<float4 *>(out) = make_float4(alpha * s.x, alpha * s.y, alpha * s.z, alpha * s.w);
        else {
            const float o[4] = {s.x, s.y, s.z, s.w};
            for (int x = 0; x < 4 && c + x < N; ++x) out[x] = alpha * o[x];
        }
    }
    cluster_sync(); // the others have read this block's tile: it may go
}

// Threads: the producer warpgroup (0..127), then BM/64 consumer warpgroups:
// gemm_tma_threads(BM). The producer's first warp asks the TMA for the tiles
// (its first lane), as far ahead as the stages (and TA's RAW raw tiles)
// allow; its other three warps make A ready.
__host__ __device__ constexpr int gemm_tma_threads(int bm) { return 128 + bm / 64 * 128; }
constexpr int TMA_PREP_THREADS = 96;

// Rounds to TF32, in place, a K-major [ROWS, 32] tile in the 128-byte
// swizzle (raw fp32 bits as the TMA wrote them); prep thread p takes chunks
// p, p + 96, ..., row by row, each row's chunks in a rotated order against
// bank conflicts.
template <int ROWS> __device__ __forceinline__ void round_tile_prep(float *tile, int p) {
#pragma unroll
    for (int j = 0; j < (ROWS * 8 + TMA_PREP_THREADS - 1) / TMA_PREP_THREADS; ++j) {
        const int i = p + j * TMA_PREP_THREADS;
        if (i >= ROWS * 8) break;
        const int r = i % ROWS, c = i / ROWS;
        uint4 *q = reinterpret_cast<uint4 *>(&tile[r * 32 + 4 * ((c + r) % 8)]);
        const float4 v = *reinterpret_cast<const float4 *>(q);
        *q = make_uint4(to_tf32(v.x), to_tf32(v.y), to_tf32(v.z), to_tf32(v.w));
    }
}

// One raw fp32 k tile of A into the stage's fp16 K-major swizzled tile As, by
// prep thread p: 16-byte fp16 chunk c (k 8c .. 8c+7) of row m for i = p + 96 j,
// m = i % BM, c = i / BM (consecutive threads, consecutive rows: TF32's TA
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

// ROWDOT: where head h of a tile's attention_output goes. Heads from
// FIRST_STAGED on go into the stage of "k tile" ktiles + h - FIRST_STAGED,
// whose last real tile (at most ktiles - 2) is given back; fp16's heads h <
// RAW into raw tile (ktiles + h) % RAW, as its "raw k tile" ktiles + h, once
// the producer has converted its last real one; TF32's head 0 into a region of
// its own (head0).
template <int FIRST_STAGED> __device__ __forceinline__ int rowdot_head_k_tile(int h, int ktiles) {
    return ktiles + h - (h < FIRST_STAGED ? 0 : FIRST_STAGED);
}
template <bool F16, int FIRST_STAGED, int STAGES, int STAGE, int RAW, int RAW_TILE>
__device__ __forceinline__ float *rowdot_head(int h, int ktiles, float *smem, float *raw, float *head0) {
    const int j = rowdot_head_k_tile<FIRST_STAGED>(h, ktiles);
    if (h >= FIRST_STAGED) return smem + j % STAGES * STAGE;
    if constexpr (F16) return raw + j % RAW * RAW_TILE;
    return head0;
}

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int STAGES, int RAW, i64 KSPLIT, bool COLSUM = false,
          bool A_TRUNC = false, bool B_ROUND = false, bool C_T = false, int CLUSTER = 1,
          bool IN_CLUSTER = (CLUSTER > 1), bool RED = false, i64 ROWDOT_T = 0,
          tma_operands OPERANDS = tma_operands::tf32>
__device__ __forceinline__ void gemm_tma(const tma_map *map_a, const tma_map *map_b, float *__restrict__ C, i64 ldc,
                                         float alpha, int split, float *__restrict__ colsum, int bx, int by,
                                         const tma_map *map_o = nullptr, float *__restrict__ rowdot = nullptr) {
    constexpr bool F16 = OPERANDS == tma_operands::f16;
    constexpr bool RAW_A = TA || F16; // A comes raw into RAW tiles of its own, made ready from there
    constexpr int BK = F16 ? 64 : 32; // k a tile: 128 bytes a row of either
    // In floats: an fp16 tile of 64 k takes the bytes a TF32 tile of 32 does.
    constexpr int NC = BM / 64, A_TILE = BM * 32, B_TILE = BN * 32, STAGE = A_TILE + B_TILE, RAW_TILE = BM * BK;
    constexpr int TX_BYTES = (B_TILE + (RAW_A ? RAW_TILE : A_TILE)) * 4; // what the TMA writes a k tile
    constexpr bool ROWDOT = ROWDOT_T > 0;
    constexpr int HEADS = ROWDOT ? BN / 64 : 0, HEAD_TILE = BM * 64; // attention_output a head: two boxes
    // ROWDOT: heads 0 .. FIRST_STAGED - 1 in a region of their own (TF32) or
    // the raw tiles (fp16), the rest in stages.
    constexpr int FIRST_STAGED = F16 ? RAW : 1;
    static_assert(!ROWDOT || (!TA && !C_T && !RED && CLUSTER == 1 && KSPLIT >= K && N == 1024 && BN % 64 == 0 &&
                              HEADS - FIRST_STAGED <= STAGES - 1 && HEAD_TILE <= STAGE && K >= BK * STAGES &&
                              (!F16 || (HEAD_TILE == RAW_TILE && RAW <= STAGES))),
                  "row dots: gA unsplit, C as stored, a head of attention_output fits a stage (fp16: a raw "
                  "tile), and the stages of the last k tiles it takes are given back before the end");
    // BM = 256 would need 640 threads, too many for the accumulators' registers.
    static_assert(BM == 128 && (BN == 128 || BN == 256) && STAGES >= 2 && KSPLIT % BK == 0, "tma product tiles");
    static_assert(M < (1ll << 31) && N < (1ll << 31) && K < (1ll << 31), "TMA coordinates are 32-bit");
    static_assert(!RAW_A || RAW >= 1, "TA and fp16 need raw tiles");
    static_assert(!COLSUM || TA, "column sums of A are made from the raw TA tiles");
    static_assert(!A_TRUNC || !TA, "a TA product rounds as it transposes");
    static_assert(!F16 || (!A_TRUNC && !B_ROUND), "fp16: A always converted, B in fp16");
    static_assert(CLUSTER == 1 || (BM * (BN + 8) <= STAGES * STAGE && !C_T),
                  "the parked tile fits in the stages; C as stored");
    static_assert(CLUSTER == 1 || IN_CLUSTER, "K slices added across a cluster are a cluster launch's");
    static_assert(!RED || (CLUSTER == 1 && !C_T), "K slices added by atomics: not in a cluster, C as stored");
    // The same address either way: the blocks of a launch in clusters
    // (IN_CLUSTER) through smem_1k (where tests/emu gives each block its own
    // memory); the others as computed here (ptxas schedules smem_1k's form
    // differently: unmeasured, so not taken).
    float *smem;
    if constexpr (IN_CLUSTER) {
        smem = smem_1k();
    } else {
        extern __shared__ float4 smem4[];
        const unsigned raw_addr = smem_u32(smem4);
        smem = reinterpret_cast<float *>(smem4) + ((1024 - raw_addr % 1024) % 1024) / 4; // launch asks 1 KiB more
    }
    float *raw = smem + STAGES * STAGE;
    float *head0 = raw + (RAW_A ? RAW : 0) * RAW_TILE; // ROWDOT, TF32: attention_output's first head of the tile
    unsigned long long *full = reinterpret_cast<unsigned long long *>(head0 + (ROWDOT && !F16 ? HEAD_TILE : 0));
    unsigned long long *ready = full + STAGES, *empty = ready + STAGES, *raw_free = empty + STAGES;
    unsigned long long *head_full = raw_free + RAW; // ROWDOT: one a head

    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&ready[s], TMA_PREP_THREADS);
            mbar_init(&empty[s], NC * 4); // each consumer warp
        }
        for (int r = 0; r < RAW; ++r) mbar_init(&raw_free[r], TMA_PREP_THREADS);
        for (int h = 0; h < HEADS; ++h) mbar_init(&head_full[h], 1);
        mbar_init_fence();
    }
    __syncthreads();

    const int m0 = (int)((i64)by * BM), n0 = (int)((i64)bx * BN);
    const i64 kbeg = (i64)split * KSPLIT, kend = kbeg + KSPLIT < K ? kbeg + KSPLIT : K;
    const int ktiles = (int)((kend - kbeg + BK - 1) / BK);

    if (threadIdx.x < 32) { // the TMA warp
        if (threadIdx.x != 0) return;
        for (int j = 0; j < ktiles; ++j) {
            const int s = j % STAGES;
            if (j >= STAGES) mbar_wait(&empty[s], (j / STAGES - 1) & 1);
            if constexpr (RAW_A)
                if (j >= RAW) mbar_wait(&raw_free[j % RAW], (j / RAW - 1) & 1);
            float *Bs = smem + s * STAGE, *As = Bs + B_TILE;
            const int k0 = (int)(kbeg + BK * (i64)j);
            mbar_expect_tx(&full[s], TX_BYTES);
            tma_load_2d(Bs, map_b, &full[s], F16 ? k0 / 2 : k0, n0); // fp16: B's map counts pairs of halves
            if constexpr (RAW_A) {
#pragma unroll
                for (int b = 0; b < BK / 32; ++b) { // A's boxes of 32 k, [32, BM] (TA) or [BM, 32]
                    float *R = raw + (j % RAW) * RAW_TILE + b * 32 * BM;
                    if constexpr (TA) tma_load_2d(R, map_a, &full[s], m0, k0 + 32 * b);
                    else tma_load_2d(R, map_a, &full[s], k0 + 32 * b, m0);
                }
            } else {
                tma_load_2d(As, map_a, &full[s], k0, m0);
            }
        }
        if constexpr (ROWDOT) {
            for (int h = 0; h < HEADS; ++h) {
                const int j = rowdot_head_k_tile<FIRST_STAGED>(h, ktiles);
                if (h >= FIRST_STAGED) mbar_wait(&empty[j % STAGES], (j / STAGES - 1) & 1);
                else if constexpr (F16) mbar_wait(&raw_free[j % RAW], (j / RAW - 1) & 1);
                float *dst = rowdot_head<F16, FIRST_STAGED, STAGES, STAGE, RAW, RAW_TILE>(h, ktiles, smem, raw, head0);
                mbar_expect_tx(&head_full[h], HEAD_TILE * 4);
                tma_load_2d(dst, map_o, &head_full[h], n0 + 64 * h, m0);
                tma_load_2d(dst + BM * 32, map_o, &head_full[h], n0 + 64 * h + 32, m0);
            }
        }
        return;
    }
    if (wg == 0) { // the rest of the producer: A made ready for the tensor cores
        const int p = tid - 32;
        // Chunk i = p + 96 j is column m = i % BM: for BM = 128 thread p meets
        // the four columns (p + 96 j) % 128, j % 4, so four sums (COLSUM).
        constexpr int ITERS = (BM * 8 + TMA_PREP_THREADS - 1) / TMA_PREP_THREADS;
        static_assert(!COLSUM || BM == 128, "the column sums' thread map is BM = 128's");
        const bool sums = COLSUM && bx == 0;
        float cs[4] = {0.f, 0.f, 0.f, 0.f};
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % STAGES;
            mbar_wait(&full[s], (kt / STAGES) & 1);
            if constexpr (A_TRUNC) { // A as stored: nothing to make ready (but B, B_ROUND)
                if constexpr (B_ROUND) { // B raw fp32 (not a rounded copy)
                    round_tile_prep<BN>(smem + s * STAGE, p);
                    fence_async_shared();
                }
                mbar_arrive(&ready[s]);
                continue;
            }
            float *As = smem + s * STAGE + B_TILE;
            if constexpr (F16) {
                convert_a_f16<BM, TA, COLSUM>(raw + (kt % RAW) * RAW_TILE, As, p, cs);
            } else if constexpr (TA) {
                // 16-byte chunk c of row m: consecutive threads take consecutive rows.
#pragma unroll
                for (int j = 0; j < ITERS; ++j) {
                    const int i = p + j * TMA_PREP_THREADS;
                    if (i >= BM * 8) break;
                    const int m = i % BM, c = i / BM;
                    // raw [32, BM] -> the swizzled K-major tile, rounded
                    const float *R = raw + (kt % RAW) * RAW_TILE + 4 * c * BM + m;
                    const float r0 = R[0], r1 = R[BM], r2 = R[2 * BM], r3 = R[3 * BM];
                    *reinterpret_cast<uint4 *>(&As[m * 32 + 4 * (c ^ (m % 8))]) =
                        make_uint4(to_tf32(r0), to_tf32(r1), to_tf32(r2), to_tf32(r3));
                    if (COLSUM && sums) cs[j % 4] += ((r0 + r1) + r2) + r3; // rows past K are the TMA's zeros
                }
            } else {
                round_tile_prep<BM>(As, p); // rounded in place
            }
            if constexpr (B_ROUND) round_tile_prep<BN>(smem + s * STAGE, p);
            fence_async_shared(); // the rounded (or fp16) tile, to the wgmmas (async proxy)
            mbar_arrive(&ready[s]);
            if constexpr (RAW_A) mbar_arrive(&raw_free[kt % RAW]);
        }
        if constexpr (COLSUM) {
            if (!sums) return;
            // Every raw tile has been read (each TMA copy into them was waited
            // for above), so they hold the 96 x 4 partial sums; column m's three
            // threads are m % 32 + 32 k, added in the order of k.
            named_bar_sync<1, TMA_PREP_THREADS>();
            raw[4 * p + 0] = cs[0], raw[4 * p + 1] = cs[1], raw[4 * p + 2] = cs[2], raw[4 * p + 3] = cs[3];
            named_bar_sync<1, TMA_PREP_THREADS>();
            for (int m = p; m < BM; m += TMA_PREP_THREADS) {
                float total = 0.f;
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    const int q = m % 32 + 32 * k; // thread q met column m at j % 4 == ((q - m) / 32) mod 4
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
        for (int k = 0; k < 4; ++k) wgmma_tma_ss<BN, F16>(acc, wg_desc(As + 8 * k), wg_desc(Bs + 8 * k));
        wg_commit();
        wg_wait<1>(); // tile kt-1's wgmmas are complete: its stage goes back
        if (kt > 0 && lane == 0) mbar_arrive(&empty[(kt - 1) % STAGES]); // tile kt-1's stage, to the TMA thread
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
            } else if constexpr (C_T) { // C stored transposed: C[c * ldc + r]
                if (c < N) C[c * ldc + rr] = x;
                if (c + 1 < N) C[(c + 1) * ldc + rr] = y;
            } else if (c + 1 < N) *reinterpret_cast<float2 *>(&C[rr * ldc + c]) = make_float2(x, y);
            else if (c < N) C[rr * ldc + c] = x;
        }
    }
    if constexpr (ROWDOT) {
        for (int h = 0; h < HEADS; ++h) {
            mbar_wait(&head_full[h], 0);
            const float *tile =
                rowdot_head<F16, FIRST_STAGED, STAGES, STAGE, RAW, RAW_TILE>(h, ktiles, smem, raw, head0);
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int row = wrow + g + 8 * e; // of the tile; row % 8 == g
                float s[8];
#pragma unroll
                for (int jj = 0; jj < 8; ++jj) { // columns 8 jj + 2 t, + 1 of the head: box jj / 4
                    const int j = 8 * h + jj, chunk = 2 * (jj % 4) + t / 2;
                    const float2 o = *reinterpret_cast<const float2 *>(
                        &tile[(jj / 4) * BM * 32 + row * 32 + 4 * (chunk ^ g) + 2 * (t % 2)]);
                    s[jj] = fmaf(alpha * acc[4 * j + 2 * e], o.x, (alpha * acc[4 * j + 2 * e + 1]) * o.y);
                }
                // store_head_dot's lane l = 4 jj + t: its shuffles by 16, 8, 4
                // are jj ^ 4, ^ 2, ^ 1 here, by 2 and 1 the quad's.
                float d = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
                d += __shfl_xor_sync(0xffffffffu, d, 2);
                d += __shfl_xor_sync(0xffffffffu, d, 1);
                const i64 rr = (i64)m0 + row;
                if (t == 0 && rr < M)
                    rowdot[((rr / ROWDOT_T) * 16 + n0 / 64 + h) * ROWDOT_T + rr % ROWDOT_T] = d;
            }
        }
    }
}
} // namespace tc
