// {{COMMENT}}
// wgmma tiles {{BM}}x{{BN}}x32, {{STAGES}} stages, K in {{SPLITS}} slice(s) of {{KSPLIT}}.
extern "C" __global__ void __launch_bounds__({{BM}} / 64 * 128, 1)
{{NAME}}(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, float alpha) {
    tc::pdl_enter();
    float *out = {{SPLITS}} > 1 ? C + (long long)blockIdx.z * {{M}} * {{N}} : C;
    tc::gemm_wg<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, {{TA}}, {{BM}}, {{BN}}, {{STAGES}}, {{KSPLIT}}>(
        A, B, out, {{SPLITS}} > 1 ? {{N}} : {{LDC}}, {{SPLITS}} > 1 ? 1.f : alpha, blockIdx.z);
}
