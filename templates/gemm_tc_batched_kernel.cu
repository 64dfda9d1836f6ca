
// {{COMMENT}}
// Tiles {{BM}}x{{BN}}x{{BK}}, {{WARPS_M}}x{{WARPS_N}} warps, {{STAGES}} stages; blockIdx.z = z1 * {{INNER}} + z0
// picks the matrices (batch, head): A + z1*{{SA1}} + z0*{{SA0}}, B + z1*{{SB1}} + z0*{{SB0}}, C + z1*{{SC1}} + z0*{{SC0}}.
extern "C" __global__ void __launch_bounds__({{WARPS_M}} * {{WARPS_N}} * 32)
{{NAME}}(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, float alpha) {
    tc::pdl_enter();
    const long long z1 = blockIdx.z / {{INNER}}, z0 = blockIdx.z % {{INNER}};
    tc::gemm<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, {{TA}}, {{TB}}, {{MODE}}, {{BM}}, {{BN}}, {{BK}}, {{WARPS_M}},
             {{WARPS_N}}, {{STAGES}}, {{KSPLIT}}>(A + z1 * {{SA1}} + z0 * {{SA0}}, B + z1 * {{SB1}} + z0 * {{SB0}},
                                                C + z1 * {{SC1}} + z0 * {{SC0}}, {{LDC}}, alpha, 0);
}
