// {{COMMENT}}
// TMA-fed wgmma tiles {{BM}}x{{BN}}, {{OPERANDS}} operands, {{STAGES}} stages ({{RAW}} raw A tiles), K unsplit;
// the row dots of the attention pass (T = {{T}}) from the accumulators, with attention_output through map_o
// (templates/gemm_tma.cu, ROWDOT_T).
extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads({{BM}}), 1) {{CLUSTER_DIMS}}
{{NAME}}(const __grid_constant__ tc::tma_map map_a, const __grid_constant__ tc::tma_map map_b,
         float *__restrict__ C, float alpha, const __grid_constant__ tc::tma_map map_o, float *__restrict__ rowdot) {
    tc::pdl_enter();
    tc::gemm_tma<{{M}}, {{N}}, {{K}}, false, {{BM}}, {{BN}}, {{STAGES}}, {{RAW}}, {{K}}, false, {{A_TRUNC}},
                 {{B_ROUND}}, false, 1, false, false, {{T}}, tc::tma_operands::{{OPERANDS}}>(
        &map_a, &map_b, C, {{LDC}}, alpha, 0, nullptr, blockIdx.x, blockIdx.y, &map_o, rowdot);
}
