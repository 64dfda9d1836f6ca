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
constexpr bool A_ROUND = {{A_ROUND}};
constexpr int NC = BM / 64; // consumer warpgroups
constexpr int TILES_PER_HEAD = (T + BM - 1) / BM, TILES = Z * TILES_PER_HEAD, KT = (T + 31) / 32;
constexpr int A_TILE = BM * 32, B_TILE = 64 * 32, STAGE = A_TILE + B_TILE, RAW_TILE = 32 * 64;
constexpr int PREP = tc::TMA_PREP_THREADS; // the producer's threads that make tiles ready (templates/gemm_tma.cu)
static_assert(BM == 64 || BM == 128, "one or two consumer warpgroups");

// A tile's place: (b, h) as z = b * 16 + h, and its row block; a block's
// step it of its n-th tile is k tile it % KT.
struct tile_pos {
    int z, rb;
    __device__ __forceinline__ explicit tile_pos(int tile) : z(tile / TILES_PER_HEAD), rb(tile % TILES_PER_HEAD) {}
};

static_assert((A_TILE * 4) % 1024 == 0 && (B_TILE * 4) % 1024 == 0, "tiles on the swizzle's 1024-byte period");
static_assert(GS_ROWS >= T && (long long)Z * GS_ROWS < (1ll << 31), "gS's rows a head; TMA coordinates are 32-bit");
} // namespace gq

extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads(gq::BM), 1)
{{NAME}}(const __grid_constant__ tc::tma_map map_gs, const __grid_constant__ tc::tma_map map_k,
         float *__restrict__ gqkv, float alpha) {
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

    const int steps = (TILES - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x * KT;
    auto tile_of = [&](int it) { return (int)blockIdx.x + it / KT * (int)gridDim.x; };
    if (threadIdx.x < 32) { // the TMA thread: gS's boxes
        if (threadIdx.x != 0) return;
        for (int it = 0; it < steps; ++it) {
            const int s = it % STAGES;
            const tile_pos at(tile_of(it));
            if (it >= STAGES) tc::mbar_wait(&empty[s], (it / STAGES - 1) & 1);
            tc::mbar_expect_tx(&full[s], A_TILE * 4);
            tc::tma_load_2d(smem + s * STAGE, &map_gs, &full[s], 32 * (it % KT), at.z * GS_ROWS + at.rb * BM);
        }
        return;
    }
    if (threadIdx.x < 128) { // the rest of the producer warpgroup: k's boxes, B tiles, A rounded
        const int p = threadIdx.x - 32;
        auto ask_k = [&](int it) { // k's rows 32 kt .. of the step's head into slot it % RAW
            unsigned long long *bar = &kfull[it % RAW];
            tc::mbar_expect_tx(bar, RAW_TILE * 4);
            tc::tma_load_2d(raw + (it % RAW) * RAW_TILE, &map_k, bar, 0, tile_pos(tile_of(it)).z * T + 32 * (it % KT));
        };
        if (p == 0)
            for (int it = 0; it < RAW && it < steps; ++it) ask_k(it);
        for (int it = 0; it < steps; ++it) {
            const int s = it % STAGES, r = it % RAW, keys = T - 32 * (it % KT); // k rows of the box within the head
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
            if constexpr (A_ROUND) tc::round_tile_prep<BM>(As, p); // gS as computed
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

    // A consumer: rows 64w .. 64w+63 of each tile, all 64 columns.
    const int w = threadIdx.x / 128 - 1, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wrow = w * 64 + (threadIdx.x % 128) / 32 * 16 + g; // this thread's first row in the tile
    for (int it = 0; it < steps; it += KT) {
        float acc[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[i] = 0.f;
        for (int kt = 0; kt < KT; ++kt) {
            const int s = (it + kt) % STAGES;
            tc::mbar_wait(&ready[s], ((it + kt) / STAGES) & 1);
            const float *As = smem + s * STAGE + w * 64 * 32, *Bs = smem + s * STAGE + A_TILE;
            tc::wg_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k) tc::wgmma_n64_tf32_ss(acc, tc::wg_desc(As + 8 * k), tc::wg_desc(Bs + 8 * k));
            tc::wg_commit();
            tc::wg_wait<1>(); // the step before's wgmmas are complete: its stage goes back
            if (kt > 0 && lane == 0) tc::mbar_arrive(&empty[(it + kt - 1) % STAGES]);
        }
        tc::wg_wait<0>();
        if (lane == 0) tc::mbar_arrive(&empty[(it + KT - 1) % STAGES]);

        const tile_pos at(tile_of(it));
        const int i0 = at.rb * BM + wrow;
        float *out = gqkv + (long long)(at.z / 16) * T * 3072 + at.z % 16 * 64 + 2 * t;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int i = i0 + 8 * e;
            if (i >= T) continue;
#pragma unroll
            for (int j = 0; j < 8; ++j)
                *reinterpret_cast<float2 *>(&out[(long long)i * 3072 + 8 * j]) =
                    make_float2(alpha * acc[4 * j + 2 * e], alpha * acc[4 * j + 2 * e + 1]);
        }
    }
}
