// Projection products on wgmma fed by the TMA (sm_90a), TF32:
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
// barrier of the whole block is passed per k tile (templates/gemm_wg.cu, its
// predecessor, has every thread copy and round, and one __syncthreads per tile).
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
// k tiles are asked for: head 0 into a region of its own, heads 1.. into the
// stages of the last k tiles as the consumers give them back. Each thread
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
namespace tc {

// d[BN/2] += A (64 x 8, descriptor a) @ B (8 x BN, descriptor b), both K-major.
template <int BN> __device__ __forceinline__ void wgmma_tf32_ss(float (&d)[BN / 2], unsigned long long a,
                                                               unsigned long long b) {
    static_assert(BN == 128 || BN == 256, "n128 or n256");
    if constexpr (BN == 256) wgmma_n256_tf32_ss(d, a, b);
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

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int STAGES, int RAW, i64 KSPLIT, bool COLSUM = false,
          bool A_TRUNC = false, bool B_ROUND = false, bool C_T = false, int CLUSTER = 1,
          bool IN_CLUSTER = (CLUSTER > 1), bool RED = false, i64 ROWDOT_T = 0>
__device__ __forceinline__ void gemm_tma(const tma_map *map_a, const tma_map *map_b, float *__restrict__ C, i64 ldc,
                                         float alpha, int split, float *__restrict__ colsum, int bx, int by,
                                         const tma_map *map_o = nullptr, float *__restrict__ rowdot = nullptr) {
    constexpr int NC = BM / 64, A_TILE = BM * 32, B_TILE = BN * 32, STAGE = A_TILE + B_TILE;
    constexpr bool ROWDOT = ROWDOT_T > 0;
    constexpr int HEADS = ROWDOT ? BN / 64 : 0, HEAD_TILE = BM * 64; // attention_output a head: two boxes
    static_assert(!ROWDOT || (!TA && !C_T && !RED && CLUSTER == 1 && KSPLIT >= K && N == 1024 && BN % 64 == 0 &&
                              HEADS <= STAGES && HEAD_TILE <= STAGE && K >= 32 * STAGES),
                  "row dots: gA unsplit, C as stored, a head of attention_output fits a stage, and the last "
                  "HEADS - 1 k tiles' stages are given back before the end");
    // BM = 256 would need 640 threads, too many for the accumulators' registers.
    static_assert(BM == 128 && (BN == 128 || BN == 256) && STAGES >= 2 && KSPLIT % 32 == 0, "tma product tiles");
    static_assert(M < (1ll << 31) && N < (1ll << 31) && K < (1ll << 31), "TMA coordinates are 32-bit");
    static_assert(!TA || RAW >= 1, "TA needs raw tiles");
    static_assert(!COLSUM || TA, "column sums of A are made from the raw TA tiles");
    static_assert(!A_TRUNC || !TA, "a TA product rounds as it transposes");
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
    float *head0 = raw + (TA ? RAW : 0) * A_TILE; // ROWDOT: attention_output's first head of the tile
    unsigned long long *full = reinterpret_cast<unsigned long long *>(head0 + (ROWDOT ? HEAD_TILE : 0));
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
    const int ktiles = (int)((kend - kbeg + 31) / 32);
    // ROWDOT: head h > 0 of the tile's attention_output goes into the stage
    // of "k tile" ktiles + h - 1, whose last real tile (ktiles + h - 1 -
    // STAGES <= ktiles - 2) is given back; head 0 into its own region.
    const auto head_stage = [&](int h) { return (ktiles + h - 1) % STAGES; };

    if (threadIdx.x < 32) { // the TMA warp
        if (threadIdx.x != 0) return;
        for (int j = 0; j < ktiles; ++j) {
            const int s = j % STAGES;
            if (j >= STAGES) mbar_wait(&empty[s], (j / STAGES - 1) & 1);
            if constexpr (TA)
                if (j >= RAW) mbar_wait(&raw_free[j % RAW], (j / RAW - 1) & 1);
            float *Bs = smem + s * STAGE, *As = Bs + B_TILE;
            const int k0 = (int)(kbeg + 32 * (i64)j);
            mbar_expect_tx(&full[s], STAGE * 4);
            tma_load_2d(Bs, map_b, &full[s], k0, n0);
            if constexpr (TA) tma_load_2d(raw + (j % RAW) * A_TILE, map_a, &full[s], m0, k0);
            else tma_load_2d(As, map_a, &full[s], k0, m0);
        }
        if constexpr (ROWDOT) {
            for (int h = 0; h < HEADS; ++h) {
                float *dst = head0;
                if (h > 0) {
                    mbar_wait(&empty[head_stage(h)], ((ktiles + h - 1) / STAGES - 1) & 1);
                    dst = smem + head_stage(h) * STAGE;
                }
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
            if constexpr (TA) {
                // 16-byte chunk c of row m: consecutive threads take consecutive rows.
#pragma unroll
                for (int j = 0; j < ITERS; ++j) {
                    const int i = p + j * TMA_PREP_THREADS;
                    if (i >= BM * 8) break;
                    const int m = i % BM, c = i / BM;
                    // raw [32, BM] -> the swizzled K-major tile, rounded
                    const float *R = raw + (kt % RAW) * A_TILE + 4 * c * BM + m;
                    const float r0 = R[0], r1 = R[BM], r2 = R[2 * BM], r3 = R[3 * BM];
                    *reinterpret_cast<uint4 *>(&As[m * 32 + 4 * (c ^ (m % 8))]) =
                        make_uint4(to_tf32(r0), to_tf32(r1), to_tf32(r2), to_tf32(r3));
                    if (COLSUM && sums) cs[j % 4] += ((r0 + r1) + r2) + r3; // rows past K are the TMA's zeros
                }
            } else {
                round_tile_prep<BM>(As, p); // rounded in place
            }
            if constexpr (B_ROUND) round_tile_prep<BN>(smem + s * STAGE, p);
            fence_async_shared(); // the rounded tile, to the wgmmas (async proxy)
            mbar_arrive(&ready[s]);
            if constexpr (TA) mbar_arrive(&raw_free[kt % RAW]);
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
        for (int k = 0; k < 4; ++k) wgmma_tf32_ss<BN>(acc, wg_desc(As + 8 * k), wg_desc(Bs + 8 * k));
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
            const float *tile = h == 0 ? head0 : smem + head_stage(h) * STAGE;
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
