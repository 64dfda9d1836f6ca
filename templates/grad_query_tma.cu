// {{NAME}}: gQ [b, h] = scale * gS [b, h] [T, T] @ k [b, h] [T, 64], into
// grad_qkv [B, T, 3072] at columns h*64 .. h*64+63 (tile gq_tma=1), T = {{T}}.
//
// TMA-fed and persistent: gQ reads all of gS (B*16*T*T floats), so it is the
// speed of that stream that counts. A block's tiles are {{BM}} rows of one
// (b, h)'s gS each, tile = blockIdx.x + n * gridDim.x; its steps are their k
// tiles of 32 in order, step it = n * KT + kt. One thread asks the TMA for gS's
// [BM, 32] box of each step (swizzled) as far ahead as {{STAGES}} stages
// allow, across the ends of tiles, so that the next tile's reads run under
// this one's last products and stores. The producer's other three warps take
// k's raw [32, 64] box of each step ({{RAW}} slots, asked for by their first
// thread as slots free), write it transposed and rounded into the stage's
// K-major B tile (keys past T as zeros) and, where gS is stored as computed
// (A_ROUND), round gS's tile in place; then BM/64 consumer warpgroups issue
// m64n64k8 wgmmas (both operands from shared memory) and store their rows.
//
// BIAS (tile gq_bias=G): a tile is G batch rows' gS of one (h, row block),
// their steps interleaved (k tile outer, batch row inner), with G gQ tiles'
// accumulators a consumer; the producer's prep warps, which touch every
// element of gS's box anyway, also add the G rows' boxes into the sum over
// the batch of grad_edit_region_bias (in batch order: the same bits run to
// run) and gS * m_i*m_j and gS * (m_i != m_j) into each warp's within/cross
// partial of the tile. The sums go to `bias`: grad_edit_region_bias itself
// when G is the whole batch (BIAS_ROWS = BIAS_LD = 1024; columns T .. 32 KT
// get the TMA's zeros), else layer B/G of a region [B/G, 16, T, BIAS_LD]
// that bias_grads adds up. So gS is read once, here, for both of its readers.
//
// Tensor maps (the plan's, encoded per launch): gS as [B*16*GS_ROWS, T] with
// rows gs_ld apart, box BM x 32 (128-byte swizzle); k as [B*16*T, 64], box
// 32 x 64 (plain). GS_ROWS is T, or 1024 where gS is grad_edit_region_bias
// itself (tile gs_direct=1, B = 1). A tile's rows past T are the next head's,
// or the output's rows past T (read, never stored: a wgmma row of gQ reads
// only its own row of gS);
// gS's columns past T are the TMA's zeros; k's rows past T are zeroed as they
// are transposed, so nothing of another head reaches a stored row.
namespace gq {
constexpr int T = {{T}}, Z = {{Z}}, BM = {{BM}}, STAGES = {{STAGES}}, RAW = {{RAW}}, GS_ROWS = {{GS_ROWS}};
constexpr bool A_ROUND = {{A_ROUND}}, BIAS = {{BIAS}};
constexpr int G = {{G}};                             // batch rows a tile (BIAS), else 1
constexpr long long BIAS_ROWS = {{BIAS_ROWS}}, BIAS_LD = {{BIAS_LD}}; // the sums' rows per head, floats a row
constexpr int NC = BM / 64;                          // consumer warpgroups
constexpr int TILES_PER_HEAD = (T + BM - 1) / BM, GROUPS = Z / 16 / G, TILES = GROUPS * 16 * TILES_PER_HEAD;
constexpr int KT = (T + 31) / 32, TILE_STEPS = KT * G;
constexpr int A_TILE = BM * 32, B_TILE = 64 * 32, STAGE = A_TILE + B_TILE, RAW_TILE = 32 * 64;
constexpr int PREP = tc::TMA_PREP_THREADS; // the producer's threads that make tiles ready (templates/gemm_tma.cu)
static_assert(BM == 64 || BM == 128, "one or two consumer warpgroups");
static_assert(Z % (16 * G) == 0 && (BIAS || G == 1) && G * BM <= 256, "whole groups of batch rows; G * 32 accumulators");
static_assert(!BIAS || (BIAS_LD % 4 == 0 && BIAS_LD >= 32 * KT && BIAS_ROWS >= T), "the sums' rows hold whole k tiles");
constexpr int PREP_CHUNKS = (BM * 8 + PREP - 1) / PREP; // a prep thread's 16-byte chunks of gS's box

// A tile's place: (group of batch rows, head, row block); a block's step it
// of its n-th tile is k tile (it % TILE_STEPS) / G of batch row (it % G).
struct tile_pos {
    int g, h, rb;
    __device__ __forceinline__ explicit tile_pos(int tile)
        : g(tile / TILES_PER_HEAD / 16), h(tile / TILES_PER_HEAD % 16), rb(tile % TILES_PER_HEAD) {}
    __device__ __forceinline__ int z(int gi) const { return (g * G + gi) * 16 + h; } // (b, h) of batch row gi
};

// BIAS, by prep thread p for a step's box (rows rb*BM.., keys 32 kt.. of
// batch row b): its chunks added into sums (gi == 0 starts them), gS * m_i*m_j
// and gS * (m_i != m_j) into within and cross over the rows before T (key
// bits past T are 0, and the TMA's zeros stand there), then (A_ROUND) the
// chunks rounded in place. A chunk's place is round_tile_prep's; its keys
// are 4 lc .. 4 lc + 3 of the box, lc = its 16-byte slot ^ (r % 8).
__device__ __forceinline__ void bias_prep(float *tile, int p, float4 (&sums)[PREP_CHUNKS], int gi, int row0,
                                          unsigned key_bits, const unsigned (&row_bits)[BM / 32], float &within,
                                          float &cross) {
#pragma unroll
    for (int j = 0; j < PREP_CHUNKS; ++j) {
        const int i = p + j * PREP;
        if (i >= BM * 8) break;
        const int r = i % BM, c = i / BM, slot = (c + r) % 8, lc = slot ^ (r % 8);
        uint4 *q = reinterpret_cast<uint4 *>(&tile[r * 32 + 4 * slot]);
        const float4 v = *reinterpret_cast<const float4 *>(q);
        if (gi == 0) sums[j] = v;
        else sums[j].x += v.x, sums[j].y += v.y, sums[j].z += v.z, sums[j].w += v.w;
        if (row0 + r < T) {
            const unsigned kb = key_bits >> (4 * lc);
            const float in = (kb & 1 ? v.x : 0.f) + (kb & 2 ? v.y : 0.f) + (kb & 4 ? v.z : 0.f) + (kb & 8 ? v.w : 0.f);
            const float all = v.x + v.y + v.z + v.w;
            unsigned word = row_bits[0]; // row_bits[r / 32], without indexing registers at run time
#pragma unroll
            for (int q = 1; q < BM / 32; ++q) word = r / 32 == q ? row_bits[q] : word;
            if (word >> (r % 32) & 1) within += in, cross += all - in;
            else cross += in;
        }
        if constexpr (A_ROUND) *q = make_uint4(tc::to_tf32(v.x), tc::to_tf32(v.y), tc::to_tf32(v.z), tc::to_tf32(v.w));
    }
}
static_assert((A_TILE * 4) % 1024 == 0 && (B_TILE * 4) % 1024 == 0, "tiles on the swizzle's 1024-byte period");
static_assert(GS_ROWS >= T && (long long)Z * GS_ROWS < (1ll << 31), "gS's rows a head; TMA coordinates are 32-bit");
} // namespace gq

extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads(gq::BM), 1)
{{NAME}}(const __grid_constant__ tc::tma_map map_gs, const __grid_constant__ tc::tma_map map_k,
         float *__restrict__ gqkv, float alpha, const float *__restrict__ mask, float *__restrict__ bias,
         float *__restrict__ wc) {
    tc::pdl_enter();
    using namespace gq;
    float *smem = tc::smem_1k(); // the launch asks 1 KiB more
    float *raw = smem + STAGES * STAGE;
    unsigned long long *full = reinterpret_cast<unsigned long long *>(raw + RAW * RAW_TILE);
    unsigned long long *ready = full + STAGES, *empty = ready + STAGES, *kfull = empty + STAGES;
    unsigned long long *raw_free = kfull + RAW;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tc::mbar_init(&full[s], 1);
            tc::mbar_init(&ready[s], PREP);
            tc::mbar_init(&empty[s], NC * 4); // each consumer warp
        }
        for (int r = 0; r < RAW; ++r) {
            tc::mbar_init(&kfull[r], 1);
            tc::mbar_init(&raw_free[r], PREP);
        }
        tc::mbar_init_fence();
    }
    __syncthreads();

    const int steps = (TILES - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x * TILE_STEPS;
    auto tile_of = [&](int it) { return (int)blockIdx.x + it / TILE_STEPS * (int)gridDim.x; };
    auto kt_of = [](int it) { return it % TILE_STEPS / G; };
    if (threadIdx.x < 32) { // the TMA thread: gS's boxes
        if (threadIdx.x != 0) return;
        for (int it = 0; it < steps; ++it) {
            const int s = it % STAGES;
            const tile_pos at(tile_of(it));
            if (it >= STAGES) tc::mbar_wait(&empty[s], (it / STAGES - 1) & 1);
            tc::mbar_expect_tx(&full[s], A_TILE * 4);
            tc::tma_load_2d(smem + s * STAGE, &map_gs, &full[s], 32 * kt_of(it), at.z(it % G) * GS_ROWS + at.rb * BM);
        }
        return;
    }
    if (threadIdx.x < 128) { // the rest of the producer warpgroup: k's boxes, B tiles, A rounded
        const int p = threadIdx.x - 32;
        auto ask_k = [&](int it) { // k's rows 32 kt .. of the step's head into slot it % RAW
            unsigned long long *bar = &kfull[it % RAW];
            tc::mbar_expect_tx(bar, RAW_TILE * 4);
            tc::tma_load_2d(raw + (it % RAW) * RAW_TILE, &map_k, bar, 0, tile_pos(tile_of(it)).z(it % G) * T + 32 * kt_of(it));
        };
        float4 sums[PREP_CHUNKS]; // BIAS: this thread's chunks of the box, summed over the group's batch rows
        float within = 0.f, cross = 0.f;
        if (p == 0)
            for (int it = 0; it < RAW && it < steps; ++it) ask_k(it);
        for (int it = 0; it < steps; ++it) {
            const int s = it % STAGES, r = it % RAW, kt = kt_of(it), keys = T - 32 * kt; // k rows of the box within the head
            tc::mbar_wait(&full[s], (it / STAGES) & 1); // gS's box is in, so the stage is free for B
            tc::mbar_wait(&kfull[r], (it / RAW) & 1);
            float *As = smem + s * STAGE, *Bs = As + A_TILE;
            const float *R = raw + r * RAW_TILE;
            // k's raw [32 keys, 64 d] -> B [64 d, 32 keys], K-major, swizzled,
            // rounded; chunk i is d = i % 64, keys 4c..4c+3 with c = i / 64.
#pragma unroll
            for (int j = 0; j < (64 * 8 + PREP - 1) / PREP; ++j) {
                const int i = p + j * PREP;
                if (i >= 64 * 8) break;
                const int d = i % 64, c = i / 64;
                float v[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) v[q] = 4 * c + q < keys ? R[(4 * c + q) * 64 + d] : 0.f;
                *reinterpret_cast<uint4 *>(&Bs[d * 32 + 4 * (c ^ (d % 8))]) =
                    make_uint4(tc::to_tf32(v[0]), tc::to_tf32(v[1]), tc::to_tf32(v[2]), tc::to_tf32(v[3]));
            }
            if constexpr (BIAS) {
                const int gi = it % G, lane = threadIdx.x % 32;
                const tile_pos at(tile_of(it));
                const float *m = mask + (long long)(at.z(gi) / 16) * T; // edit_region_mask of the batch row
                const int k0 = 32 * kt, row0 = at.rb * BM;
                const unsigned key_bits = __ballot_sync(0xffffffffu, k0 + lane < T && m[k0 + lane] != 0.f);
                unsigned row_bits[BM / 32];
#pragma unroll
                for (int q = 0; q < BM / 32; ++q)
                    row_bits[q] = __ballot_sync(0xffffffffu, row0 + 32 * q + lane < T && m[row0 + 32 * q + lane] != 0.f);
                bias_prep(As, p, sums, gi, row0, key_bits, row_bits, within, cross);
                if (gi == G - 1) { // the group's sums of this box
                    float *out = bias + ((long long)(at.g * 16 + at.h) * BIAS_ROWS + row0) * BIAS_LD + k0;
#pragma unroll
                    for (int j = 0; j < PREP_CHUNKS; ++j) {
                        const int i = p + j * PREP, rr = i % BM, lc = (i / BM + rr) % 8 ^ (rr % 8);
                        if (i < BM * 8 && row0 + rr < T)
                            *reinterpret_cast<float4 *>(&out[rr * BIAS_LD + 4 * lc]) = sums[j];
                    }
                    if (kt == KT - 1) { // the tile's last step: each prep warp's within/cross partial
#pragma unroll
                        for (int o = 16; o > 0; o >>= 1) {
                            within += __shfl_xor_sync(0xffffffffu, within, o);
                            cross += __shfl_xor_sync(0xffffffffu, cross, o);
                        }
                        if (lane == 0) {
                            float *part = wc + 2 * ((long long)tile_of(it) * 3 + p / 32);
                            part[0] = within, part[1] = cross;
                        }
                        within = cross = 0.f;
                    }
                }
            } else if constexpr (A_ROUND) {
                tc::round_tile_prep<BM>(As, p); // gS as computed
            }
            tc::fence_async_shared(); // the written tiles, to the wgmmas (async proxy)
            tc::mbar_arrive(&ready[s]);
            tc::mbar_arrive(&raw_free[r]);
            if (p == 0 && it + RAW < steps) { // the slot again, once all 96 have read it
                tc::mbar_wait(&raw_free[r], (it / RAW) & 1);
                ask_k(it + RAW);
            }
        }
        return;
    }

    // A consumer: rows 64w .. 64w+63 of each tile, all 64 columns, of each of its G batch rows.
    const int w = threadIdx.x / 128 - 1, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wrow = w * 64 + (threadIdx.x % 128) / 32 * 16 + g; // this thread's first row in the tile
    for (int it = 0; it < steps; it += TILE_STEPS) {
        float acc[G][32];
#pragma unroll
        for (int gi = 0; gi < G; ++gi)
#pragma unroll
            for (int i = 0; i < 32; ++i) acc[gi][i] = 0.f;
        // Not unrolled: unrolled whole (KT = 2), ptxas serializes the G
        // accumulators' wgmmas around the waits between them (at KT = 1 it
        // still does: a performance note at T <= 32 only).
#pragma unroll 1
        for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
            for (int gi = 0; gi < G; ++gi) {
                const int st = it + kt * G + gi, s = st % STAGES;
                tc::mbar_wait(&ready[s], (st / STAGES) & 1);
                const float *As = smem + s * STAGE + w * 64 * 32, *Bs = smem + s * STAGE + A_TILE;
                tc::wg_fence();
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    tc::wgmma_n64_tf32_ss(acc[gi], tc::wg_desc(As + 8 * k), tc::wg_desc(Bs + 8 * k));
                tc::wg_commit();
                tc::wg_wait<1>(); // the step before's wgmmas are complete: its stage goes back
                if (st > it && lane == 0) tc::mbar_arrive(&empty[(st - 1) % STAGES]);
            }
        }
        tc::wg_wait<0>();
        if (lane == 0) tc::mbar_arrive(&empty[(it + TILE_STEPS - 1) % STAGES]);

        const tile_pos at(tile_of(it));
        const int i0 = at.rb * BM + wrow;
#pragma unroll
        for (int gi = 0; gi < G; ++gi) {
            const int z = at.z(gi);
            float *out = gqkv + (long long)(z / 16) * T * 3072 + at.h * 64 + 2 * t;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int i = i0 + 8 * e;
                if (i >= T) continue;
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    *reinterpret_cast<float2 *>(&out[(long long)i * 3072 + 8 * j]) =
                        make_float2(alpha * acc[gi][4 * j + 2 * e], alpha * acc[gi][4 * j + 2 * e + 1]);
            }
        }
    }
}

#if {{BIAS}}
// BIAS: grad_within_edit_bias[h] and grad_cross_edit_bias[h], the sums of
// head h's tiles' partials (3 a tile, one per prep warp) in a fixed order.
// Grid (16), one warp a head.
extern "C" __global__ void __launch_bounds__(32)
{{NAME}}_sums(const float *__restrict__ wc, float *__restrict__ grad_within_edit_bias,
              float *__restrict__ grad_cross_edit_bias) {
    tc::pdl_enter();
    using namespace gq;
    const int h = blockIdx.x;
    float s[2] = {0.f, 0.f};
    for (int q = threadIdx.x; q < GROUPS * TILES_PER_HEAD * 3; q += 32) {
        const long long tile = (long long)(q / (TILES_PER_HEAD * 3) * 16 + h) * TILES_PER_HEAD + q % (TILES_PER_HEAD * 3) / 3;
        const float *part = wc + 2 * (tile * 3 + q % 3);
        s[0] += part[0], s[1] += part[1];
    }
#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s[x] += __shfl_xor_sync(0xffffffffu, s[x], o);
    if (threadIdx.x == 0) grad_within_edit_bias[h] = s[0], grad_cross_edit_bias[h] = s[1];
}
#endif
