// {{COMMENT}}
// TMA-fed wgmma tiles {{BM}}x{{BN}}x32, {{STAGES}} stages, K in {{SPLITS}} slice(s) of {{KSPLIT}}, A to the tensor
// cores as stored; and (tile gh_bias=1) the edit-bias sums of gS [{{B}}, 16, {{T}}, {{GS_LD}}] by the producer's
// other warps beside the tiles (tc::bias_side, templates/bias_rows.cu): grad_edit_region_bias's rows < T, each
// row's warps' within/cross sums into parts (bias_final adds them), the items' queue zeroed before the launch.
// B's tile multicast to clusters of {{MC}} block(s) along M (tile mc=2; rows of tiles padded to whole clusters).
extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads({{BM}}), 1) {{CLUSTER_DIMS}}
{{NAME}}(const __grid_constant__ tc::tma_map map_a, const __grid_constant__ tc::tma_map map_b,
         float *__restrict__ C, float alpha, const float *__restrict__ gs, const float *__restrict__ edit_region_mask,
         float *__restrict__ grad_edit_region_bias, float *__restrict__ parts, int *__restrict__ queue) {
    tc::pdl_enter();
    constexpr bool APART = {{SPLITS}} > 1; // each K slice's C apart, for the reduce
    constexpr int MC = {{MC}}, BLOCKS = ({{N}} + {{BN}} - 1) / {{BN}} * (({{M}} + {{BM}} * MC - 1) / ({{BM}} * MC) * MC) * {{SPLITS}};
    float *out = APART ? C + (long long)blockIdx.z * {{M}} * {{N}} : C;
    const tc::bias_side<{{B}}, {{T}}, {{GS_LD}}, BLOCKS> side{gs, edit_region_mask, grad_edit_region_bias, parts, queue};
    tc::gemm_tma<{{M}}, {{N}}, {{K}}, false, {{BM}}, {{BN}}, {{STAGES}}, {{RAW}}, {{KSPLIT}}, false, true, false, false,
                 1, (MC > 1), false, 0, MC>(&map_a, &map_b, out, APART ? {{N}} : {{LDC}}, APART ? 1.f : alpha,
                                            blockIdx.z, nullptr, blockIdx.x, blockIdx.y, nullptr, nullptr, side);
}
