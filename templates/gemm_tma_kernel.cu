// {{COMMENT}}
// TMA-fed wgmma tiles {{BM}}x{{BN}}, {{OPERANDS}} operands, {{STAGES}} stages ({{RAW}} raw A tiles),
// K in {{SPLITS}} slice(s) of {{KSPLIT}}.
// colsum: A's column sums per K slice ({{COLSUM}}; else unused, null). A to the tensor cores as stored: {{A_TRUNC}}.
// B rounded in place: {{B_ROUND}}. C stored transposed: {{C_T}} (a K slice's C then {{SPLIT_LD}} floats a row).
// K slices added into C by float atomics (C zeroed before): {{RED}}; else each slice's C apart, for a reduce.
extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads({{BM}}), 1) {{CLUSTER_DIMS}}
{{NAME}}(const __grid_constant__ tc::tma_map map_a, const __grid_constant__ tc::tma_map map_b,
         float *__restrict__ C, float alpha, float *__restrict__ colsum) {
    tc::pdl_enter();
    constexpr bool RED = {{RED}}, APART = {{SPLITS}} > 1 && !RED; // APART: each K slice's C apart
    float *out = APART ? C + (long long)blockIdx.z * {{M}} * {{N}} : C;
    tc::gemm_tma<{{M}}, {{N}}, {{K}}, {{TA}}, {{BM}}, {{BN}}, {{STAGES}}, {{RAW}}, {{KSPLIT}}, {{COLSUM}}, {{A_TRUNC}},
                 {{B_ROUND}}, {{C_T}}, 1, false, RED, 0, tc::tma_operands::{{OPERANDS}}>(
        &map_a, &map_b, out, APART ? {{SPLIT_LD}} : {{LDC}}, APART ? 1.f : alpha, blockIdx.z, colsum, blockIdx.x,
        blockIdx.y);
}
