// {{COMMENT}}
// Tiles {{BM}}x{{BN}}x{{BK}}, {{WARPS_M}}x{{WARPS_N}} warps, {{STAGES}} stages, K in {{SPLITS}} slices of {{KSPLIT}}
// (tile ga_dsm=1): a tile's slices are the blocks of one cluster (rank = blockIdx.z). Each parks its
// slice's product in its shared memory; then the cluster adds them (tc::cluster_sum_store, rank order: the
// reduce launch's sums) into gA with the attention pass's row dots (the rowdot reduce's bits): no partial
// products in memory, no reduce launch on the chain.
namespace tc {
struct ga_cluster_epilogue {
    static constexpr bool active = true;
    float *C;
    const float *O;
    float *rowdot;
    float alpha;
    template <class Acc>
    __device__ __forceinline__ void operator()(const Acc &acc, float *tile, i64 m0, i64 n0, int wm, int wn) const {
        constexpr int LDT = {{BN}} + 8, FM = {{BM}} / {{WARPS_M}} / 16, FN = {{BN}} / {{WARPS_N}} / 8;
        static_assert({{BM}} * LDT <= {{SMEM_FLOATS}}, "the parked tile fits the stages");
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        // Rows padded by 8 floats: a half-warp's float2 stores (4 rows x 4) fall on distinct banks.
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    *reinterpret_cast<float2 *>(&tile[(wm + 16 * i + g + 8 * h) * LDT + wn + 8 * j + 2 * t]) =
                        make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        cluster_sync(); // every slice's tile is parked
        cluster_sum_store<{{M}}, {{N}}, {{BM}}, {{BN}}, LDT, {{SPLITS}}, {{WARPS_M}} * {{WARPS_N}} * 32, {{T}}>(
            tile, C, {{LDC}}, alpha, blockIdx.z, m0, n0, threadIdx.x, O, rowdot);
        cluster_sync(); // the others have read this block's tile: it may go
    }
};
} // namespace tc

extern "C" __global__ void __cluster_dims__(1, 1, {{SPLITS}}) __launch_bounds__({{WARPS_M}} * {{WARPS_N}} * 32)
{{NAME}}(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, float alpha,
         const float *__restrict__ attention_output, float *__restrict__ rowdot) {
    tc::pdl_enter();
    tc::gemm<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, {{TA}}, {{TB}}, {{MODE}}, {{BM}}, {{BN}}, {{BK}}, {{WARPS_M}},
             {{WARPS_N}}, {{STAGES}}, {{KSPLIT}}>(A, B, C, {{LDC}}, alpha, blockIdx.z,
                                                  tc::ga_cluster_epilogue{C, attention_output, rowdot, alpha});
}
