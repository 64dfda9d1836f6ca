
// {{COMMENT}}
extern "C" __global__ void __launch_bounds__(128)
{{NAME}}(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, float alpha) {
    tc::pdl_enter();
    gemm::tile<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, {{LDC}}, {{TA}}, {{TB}}, {{MODE}}, {{INNER}}, {{SA1}}, {{SA0}},
               {{SB1}}, {{SB0}}, {{SC1}}, {{SC0}}>(A, B, C, alpha);
}
