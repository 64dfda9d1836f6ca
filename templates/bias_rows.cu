// The edit-bias sums' arithmetic, shared by the bias_grads kernel
// (templates/edit_attention_bwd.cu) and grad_hidden's producer warps (tile
// gh_bias=1: tc::bias_side, the SIDE work of templates/gemm_tma.cu): both add
// in the same order, so either gives the same bits.
//
// Layouts (spec): gS [B, 16, ROWS, LD] (ROWS = T, or 1024 where gS is
// grad_edit_region_bias itself), edit_region_mask [B, T],
// grad_edit_region_bias [16, 1024, 1024], partials [16, 1024, 2].
namespace tc {

// Asks L2 for the line of p (nothing on the CPU's emulation, tests/emu).
__device__ __forceinline__ void prefetch_l2(const void *p) {
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}

// A row of gS is bias_row_threads(T) threads of bias_grads, each four
// adjacent columns (whole warps).
__host__ __device__ constexpr int bias_row_threads(long long t) { return (int)(((t + 3) / 4 + 31) / 32 * 32); }

// Columns j..j+3 (< T) of gS row (h, i) summed over the batch in batch order
// into s, and that row's gS * m_i*m_j and gS * (m_i != m_j) added into within
// and cross, UNROLL batch rows' loads in flight at a time (the order of the
// adds is the batch's whatever UNROLL is). col: gS + (h * ROWS + i) * LD + j.
// HALF: gS fp16 times gsinv's scale per (b, h, 64 keys). STREAM: gS read
// evict-first (its last read).
template <i64 B, i64 T, i64 LD, i64 ROWS, bool HALF, bool STREAM, int UNROLL, class E>
__device__ __forceinline__ void bias_column_sums(const E *col, const float *__restrict__ mask,
                                                 const float *__restrict__ gsinv, i64 h, i64 i, int j, float (&s)[4],
                                                 float &within, float &cross) {
    constexpr int HEADS = 16, NJ = (int)((T + 63) / 64);
    constexpr bool VEC = LD % 4 == 0; // gS rows 16-byte aligned
    for (i64 b0 = 0; b0 < B; b0 += UNROLL) {
        float v[UNROLL][4], mi[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 b = b0 + u;
            if (b >= B) break;
            const E *row = col + b * HEADS * ROWS * LD;
            if constexpr (HALF) {
                const float inv = gsinv[(b * HEADS + h) * NJ + j / 64];
                if constexpr (VEC) {
                    const float4 x = tc::f16x4_to_float4(*reinterpret_cast<const uint2 *>(row), inv);
                    v[u][0] = x.x, v[u][1] = x.y, v[u][2] = x.z, v[u][3] = x.w;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) v[u][e] = j + e < T ? inv * tc::from_f16(row[e]) : 0.f;
                }
            } else if constexpr (VEC) {
                const float4 x = STREAM ? __ldcs(reinterpret_cast<const float4 *>(row))
                                        : *reinterpret_cast<const float4 *>(row);
                v[u][0] = x.x, v[u][1] = x.y, v[u][2] = x.z, v[u][3] = x.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) v[u][e] = j + e < T ? (STREAM ? __ldcs(row + e) : row[e]) : 0.f;
            }
            mi[u] = mask[b * T + i];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 b = b0 + u;
            if (b >= B) break;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (j + e >= T) break;
                const float mj = mask[b * T + j + e];
                s[e] += v[u][e];
                within = fmaf(v[u][e], mi[u] * mj, within);
                cross = fmaf(v[u][e], mi[u] * (1.f - mj) + (1.f - mi[u]) * mj, cross);
            }
        }
    }
}

// The sum of a warp's values by the shuffle tree (every lane gets it).
__device__ __forceinline__ float warp_tree_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Warp x of bias_grads' row (h, i < T), by one warp, lane l as its thread l
// (fp32 gS in the workspace, [B, 16, T, LD]): its columns of
// grad_edit_region_bias (with the zeros past T up to 1024 that fall to it)
// and its within/cross sums, parts[2 * ((h * T + i) * NW + x) + {0, 1}] (NW
// warps a row); bias_final adds a row's in warp order, as bias_grads does,
// so every sum has bias_grads' order: the same bits.
template <i64 B, i64 T, i64 LD>
__device__ __forceinline__ void bias_warp_of_row(const float *__restrict__ gs, const float *__restrict__ mask,
                                                 float *__restrict__ bias, float *__restrict__ parts, i64 h, i64 i,
                                                 int x, int lane) {
    constexpr int CT = bias_row_threads(T), NW = CT / 32, POS = 1024;
    const int j = 4 * (32 * x + lane);
    float s[4] = {0.f, 0.f, 0.f, 0.f}, within = 0.f, cross = 0.f;
    if (j < T)
        bias_column_sums<B, T, LD, T, false, true, 12>(gs + (h * T + i) * LD + j, mask, nullptr, h, i, j, s, within,
                                                     cross);
    float *out = bias + (h * POS + i) * POS;
    *reinterpret_cast<float4 *>(out + j) = make_float4(s[0], s[1], s[2], s[3]);
    for (int z = j + 4 * CT; z < POS; z += 4 * CT) *reinterpret_cast<float4 *>(out + z) = make_float4(0.f, 0.f, 0.f, 0.f);
    within = warp_tree_sum(within);
    cross = warp_tree_sum(cross);
    if (lane == 0) {
        parts[2 * ((h * T + i) * NW + x)] = within;
        parts[2 * ((h * T + i) * NW + x) + 1] = cross;
    }
}

// Asks L2 for what bias_warp_of_row(h, i, x) will read of gS: per batch row
// its warp's (at most) 128 columns, which meet at most five 128-byte lines:
// those of columns 0, 32, 64, 96 and the last; lane l the l-th, (l + 32)-th,
// ... (b, line) of them.
template <i64 B, i64 T, i64 LD>
__device__ __forceinline__ void bias_warp_prefetch(const float *__restrict__ gs, i64 h, i64 i, int x, int lane) {
    const int j0 = 128 * x, cols = T - j0 < 128 ? (int)(T - j0) : 128;
    const float *seg = gs + (h * T + i) * LD + j0;
    for (int q = lane; q < B * 5; q += 32) {
        const int b = q / 5, col = 32 * (q % 5) < cols ? 32 * (q % 5) : cols - 1;
        prefetch_l2(seg + (i64)b * 16 * T * LD + col);
    }
}

// The SIDE work of a TMA-fed product whose producer warps have none of their
// own (grad_hidden, A as stored, tile gh_bias=1): the edit-bias sums, 16 * T
// rows of NW warps' items, taken one at a time by the three warps of each of
// the product's BLOCKS blocks from a queue (queue[0]: the next item;
// queue[1]: the blocks started; both zeroed before the launch). A warp takes
// its next item before it works on the one it has, and asks L2 for its gS,
// so that its loads (twelve a lane in flight: more would take registers the
// consumers need) find it there. A block takes items while its tile is being
// made; once it is nearly made, only where all BLOCKS have started (none
// then waits for its SM); the last block to start takes them until none is
// left, so all are done when its launch ends, whatever order the blocks run
// in (a pair's other product's blocks do not count: one of them starting
// last would leave the items to no one).
template <i64 B, i64 T, i64 LD, int BLOCKS> struct bias_side {
    static constexpr bool active = true;
    static constexpr int NW = bias_row_threads(T) / 32, ITEMS = (int)(16 * T) * NW;
    const float *gs, *mask;
    float *bias, *parts;
    int *queue;
    // The next item for this warp (ITEMS: none), its gS asked of L2. last:
    // this warp's block started last (lane 0's).
    __device__ __forceinline__ int take(int lane, const int *gemm_done, bool last) const {
        int item = ITEMS;
        if (lane == 0) {
            const bool more = last || *reinterpret_cast<const volatile int *>(gemm_done) == 0 ||
                              *reinterpret_cast<const volatile int *>(&queue[1]) >= BLOCKS;
            if (more) item = atomicAdd(&queue[0], 1);
        }
        item = __shfl_sync(0xffffffffu, item, 0);
        if (item < ITEMS) bias_warp_prefetch<B, T, LD>(gs, item / NW / T, item / NW % T, item % NW, lane);
        return item;
    }
    // pw: the producer warp (0..2); gemm_done: set as the tile's last k tiles go.
    __device__ __forceinline__ void operator()(int pw, int lane, const int *gemm_done) const {
        const bool last = pw == 0 && lane == 0 && atomicAdd(&queue[1], 1) == BLOCKS - 1;
        for (int item = take(lane, gemm_done, last); item < ITEMS;) {
            const int next = take(lane, gemm_done, last), row = item / NW;
            bias_warp_of_row<B, T, LD>(gs, mask, bias, parts, row / T, row % T, item % NW, lane);
            item = next;
        }
    }
};
} // namespace tc
