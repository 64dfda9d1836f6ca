// Column sums of x [rows, ncols] (bias gradients) in two deterministic steps:
// partial sums over {{COL_SPLIT}} slices of the rows, then one pass over those
// partials of each column. colsum_final also adds, in slice order, the sums a
// TMA-fed TA product makes of its A per K slice (gemm_bias, templates/gemm_tma.cu).
//
// colsum_partial: grid (ncols / 256, {{COL_SPLIT}}). A block takes 256 columns
// of one slice: 64 threads of four adjacent columns (ncols % 4 == 0; one
// 16-byte load where the plan's pointers are 16-byte aligned, VEC) times four groups of the slice's rows (group g:
// rows g, g + 4, ...), eight rows' loads in flight per thread, the groups
// added in order at the end. The kernel is a stream of x, bound by the loads in flight.
namespace colsum {
__device__ __forceinline__ float4 load4(const float *p) {
    if constexpr ({{VEC}}) return *reinterpret_cast<const float4 *>(p);
    else return make_float4(p[0], p[1], p[2], p[3]);
}
} // namespace colsum
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_colsum_partial(const float *__restrict__ x, float *__restrict__ partials, long long rows, int ncols) {
    tc::pdl_enter();
    __shared__ float4 group_sums[3][64];
    const int q = threadIdx.x % 64, g = threadIdx.x / 64, c = 4 * (blockIdx.x * 64 + q);
    const long long per = (rows + {{COL_SPLIT}} - 1) / {{COL_SPLIT}}, r0 = blockIdx.y * per;
    const long long r1 = r0 + per < rows ? r0 + per : rows;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < ncols) {
        for (long long r = r0 + g; r < r1; r += 4 * 8) {
            float4 v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u)
                v[u] = r + 4 * u < r1 ? colsum::load4(x + (r + 4 * u) * ncols + c) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int u = 0; u < 8; ++u) s.x += v[u].x, s.y += v[u].y, s.z += v[u].z, s.w += v[u].w;
        }
    }
    if (g > 0) group_sums[g - 1][q] = s;
    __syncthreads();
    if (g > 0 || c >= ncols) return;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        const float4 o = group_sums[k][q];
        s.x += o.x, s.y += o.y, s.z += o.z, s.w += o.w;
    }
    *reinterpret_cast<float4 *>(partials + (long long)blockIdx.y * ncols + c) = s;
}

extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_colsum_final(const float *__restrict__ partials, float *__restrict__ out, int ncols, int nparts) {
    tc::pdl_enter();
    const int c = blockIdx.x * 256 + threadIdx.x;
    if (c >= ncols) return;
    float s = 0.f;
    for (int p = 0; p < nparts; ++p) s += partials[(long long)p * ncols + c];
    out[c] = s;
}
