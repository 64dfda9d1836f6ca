// The edit-bias sums' arithmetic of the bias_grads kernel
// (templates/edit_attention_bwd.cu).
//
// Layouts (spec): gS [B, 16, ROWS, LD] (ROWS = T, or 1024 where gS is
// grad_edit_region_bias itself), edit_region_mask [B, T],
// grad_edit_region_bias [16, 1024, 1024], partials [16, 1024, 2].
namespace tc {

// A row of gS is bias_row_threads(T) threads of bias_grads, each four
// adjacent columns (whole warps).
__host__ __device__ constexpr int bias_row_threads(long long t) { return (int)(((t + 3) / 4 + 31) / 32 * 32); }

// Columns j..j+3 (< T) of gS row (h, i) summed over the batch in batch order
// into s, and that row's gS * m_i*m_j and gS * (m_i != m_j) added into within
// and cross, UNROLL batch rows' loads in flight at a time (the order of the
// adds is the batch's whatever UNROLL is). col: gS + (h * ROWS + i) * LD + j.
// E fp16: gS's fp16 bits, times gsinv's scale per (b, h, 64 keys) where SCALED.
template <i64 B, i64 T, i64 LD, i64 ROWS, bool SCALED, int UNROLL, class E>
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
            if constexpr (sizeof(E) == 2) {
                const float inv = SCALED ? gsinv[(b * HEADS + h) * NJ + j / 64] : 1.f;
                if constexpr (VEC) {
                    const float4 x = tc::f16x4_to_float4(*reinterpret_cast<const uint2 *>(row), inv);
                    v[u][0] = x.x, v[u][1] = x.y, v[u][2] = x.z, v[u][3] = x.w;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) v[u][e] = j + e < T ? inv * tc::from_f16(row[e]) : 0.f;
                }
            } else if constexpr (VEC) {
                const float4 x = *reinterpret_cast<const float4 *>(row);
                v[u][0] = x.x, v[u][1] = x.y, v[u][2] = x.z, v[u][3] = x.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) v[u][e] = j + e < T ? row[e] : 0.f;
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

} // namespace tc
