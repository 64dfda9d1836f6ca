// {{COMMENT}}
// wgmma tiles {{BM}}x{{BN}}x32, {{STAGES}} stages; blockIdx.z = z1 * {{INNER}} + z0 picks the matrices:
// A + z1*{{SA1}} + z0*{{SA0}}, B + z1*{{SB1}} + z0*{{SB0}} (fp32, raw (B_RAW: rounded in shared memory) or
// already TF32 values (gS stored rounded, tile gs_round=1), or fp16 times the
// powers of two whose inverses are bscale + blockIdx.z * {{NKB}}, one per 64 k), C + z1*{{SC1}} + z0*{{SC0}}
// (stored transposed).
// RED_LD > 0 (gQ, tile gq_red): B's tiles are also added into red + z0 * RED_LD^2 (grad_edit_region_bias's
// head z0) by float reductions where z1 >= {{RED_FROM}} (gq_red=2: the pass stored batch row 0 there), and
// blockIdx.z = z0 * {{OUTER}} + z1 / {{PAIR}} instead: the blocks resident at once then add into the rows of one
// or two heads (a few MB), which stay in L2 between the batch rows' adds. PAIR = 2 (tile gq_pair=1): batch rows
// z1 and z1 + 1 (where z1 + 1 < {{NB}}) a block, one warpgroup each, their tiles summed before one reduction.
// {{MIN_BLOCKS}} blocks an SM asked of the register allocation (2: the pair's 64-row blocks of three stages, whose
// shared memory lets two share an SM once each thread keeps to 128 registers).
extern "C" __global__ void __launch_bounds__({{BM}} / 64 * 128 * {{PAIR}}, {{MIN_BLOCKS}})
{{NAME}}(const float *__restrict__ A, const {{B_T}} *__restrict__ B, float *__restrict__ C, float alpha,
         const float *__restrict__ bscale, float *__restrict__ red) {
    tc::pdl_enter();
    constexpr long long RED_LD = {{RED_LD}};
    constexpr int PAIR = {{PAIR}};
    const long long z1 = RED_LD > 0 ? blockIdx.z % {{OUTER}} * PAIR : blockIdx.z / {{INNER}},
                    z0 = RED_LD > 0 ? blockIdx.z / {{OUTER}} : blockIdx.z % {{INNER}};
    const bool two = PAIR == 2 && z1 + 1 < {{NB}};
    const unsigned mask = (z1 >= {{RED_FROM}}) | (two && z1 + 1 >= {{RED_FROM}}) << 1; // the rows added
    tc::gemm_wg<{{M}}, {{N}}, {{K}}, {{LDA}}, {{LDB}}, true, {{BM}}, {{BN}}, {{STAGES}}, {{KSPLIT}}, {{B_RAW}}, true, {{B_T}}, RED_LD, PAIR>(
        A + z1 * {{SA1}} + z0 * {{SA0}}, B + z1 * {{SB1}} + z0 * {{SB0}}, C + z1 * {{SC1}} + z0 * {{SC0}}, {{LDC}},
        alpha, 0, bscale + (long long)blockIdx.z * {{NKB}}, mask ? red + z0 * RED_LD * RED_LD : nullptr,
        two ? {{SA1}} : 0, two ? {{SB1}} : 0, {{SC1}}, two, mask);
}
