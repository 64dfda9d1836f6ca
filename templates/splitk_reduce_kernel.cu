// The {{SPLITS}} K slices of {{GEMM}}, added in order into its output.
extern "C" __global__ void __launch_bounds__(256)
{{NAME}}(const float *__restrict__ part, float *__restrict__ out, float alpha) {
    tc::pdl_enter();
    tc::splitk_reduce<{{NELEM}}, {{SPLITS}}>(part, out, alpha);
}
