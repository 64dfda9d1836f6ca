
// {{COMMENT}}
// Tiles {{BM}}x{{BN}}x{{BK}}, {{WARPS_M}}x{{WARPS_N}} warps, {{STAGES}} stages, K in {{SPLITS}} slice(s) of {{KSPLIT}}.
extern "C" __global__ void __launch_bounds__({{WARPS_M}} * {{WARPS_N}} * 32)
{{NAME}}(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, float alpha) {
    tc::pdl_enter();
    float *out = {{SPLITS}} > 1 ? C + (long long)blockIdx.z * {{M}} * {{N}} : C;
    tc::gemm<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, {{TA}}, {{TB}}, {{MODE}}, {{BM}}, {{BN}}, {{BK}}, {{WARPS_M}},
             {{WARPS_N}}, {{STAGES}}, {{KSPLIT}}>(A, B, out, {{SPLITS}} > 1 ? {{N}} : {{LDC}}, {{SPLITS}} > 1 ? 1.f : alpha,
             blockIdx.z);
}
