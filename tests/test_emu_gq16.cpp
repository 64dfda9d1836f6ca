// gQ on fp16 wgmma (templates/grad_query_wg16.cu, tile gq_f16=1) on the CPU
// (tests/emu/cuda_on_cpu.h): gQ^T = alpha k^T gS^T per (b, h), stored as gQ
// into grad_qkv's first 1024 columns, from gS in fp16 as the attention pass
// stores it (rows of LDB halves, zeros past T) and the keys in fp32. Against
// two fp64 products: of the operands as the tensor cores take them (the keys
// rounded to fp16), within fp32 accumulation's error, where a wrong swizzle,
// k offset or fragment is off by the outputs' size; and of the keys as given,
// within fp16's rounding. T = 1, T not a multiple of 8 or of the tiles, and
// both block widths; every column past a head's 64 and every batch row past
// B must stay as poisoned (NaN). With RED_LD (tile gq_red) the kernel also
// adds gS over the batch into a zeroed output of RED_LD x RED_LD a head
// (from batch row 1 with RED_FROM = 1, over row 0 stored there first), two
// batch rows a block with PAIR = 2: every element inside [T, T] must hold
// the batch's sum, every other one stay zero. The configurations are
// tests/CMakeLists.txt's.
#include "cuda_on_cpu.h"

#include <cmath>

#include "tc_common.cu"
#include "gemm_wg.cu"

#include "emu_gq16_kernels.inc"

namespace {

uint64_t rng_state = 0x3c6ef372fe94f82bull;
double uniform_pm1() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53 * 2 - 1;
}

typedef void (*gq16_kernel)(const float *, const unsigned short *, float *, float, float *);

bool gq16_case(const char *name, gq16_kernel kernel, int B, int T, int BN, int ldb, int red_ld, int red_from,
               int pair) {
    const int H = 16, QKV = 3 * H * 64;
    std::vector<float> key((size_t)B * H * T * 64), out((size_t)(B + 1) * T * QKV, NAN);
    std::vector<unsigned short> gs((size_t)B * H * T * ldb);
    for (auto &x : key) x = (float)uniform_pm1();
    for (size_t r = 0; r < (size_t)B * H * T; ++r)
        for (int j = 0; j < ldb; ++j) gs[r * ldb + j] = tc::f16_bits(j < T ? (float)uniform_pm1() : 0.f);
    std::vector<float> red((size_t)H * red_ld * red_ld, 0.f);
    auto gs_at = [&](int b, int h, int i, int j) { return (double)tc::f16_value(gs[(((size_t)b * H + h) * T + i) * ldb + j]); };
    for (int h = 0; h < H && red_from == 1; ++h) // batch row 0, as the pass stores it
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < T; ++j) red[((size_t)h * red_ld + i) * red_ld + j] = (float)gs_at(0, h, i, j);
    const float alpha = 0.125f;
    const unsigned blocks_z = red_ld ? (unsigned)((B + pair - 1) / pair * H) : (unsigned)(B * H);
    emu_launch(dim3e{(unsigned)((T + BN - 1) / BN), 1, blocks_z}, 128 * pair,
               [&] { kernel(key.data(), gs.data(), out.data(), alpha, red_ld ? red.data() : nullptr); });
    double worst = 0, worst_given = 0, refmax = 0;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < T; ++i)
                for (int d = 0; d < 64; ++d) {
                    const size_t z = (size_t)b * H + h;
                    double taken = 0, given = 0;
                    for (int j = 0; j < T; ++j) {
                        const double s = tc::f16_value(gs[(z * T + i) * ldb + j]), k = key[(z * T + j) * 64 + d];
                        taken += s * tc::f16_value(tc::f16_bits((float)k));
                        given += s * k;
                    }
                    const double o = out[((size_t)b * T + i) * QKV + h * 64 + d];
                    worst = std::fmax(worst, std::isnan(o) ? INFINITY : std::fabs(o - alpha * taken));
                    worst_given = std::fmax(worst_given, std::isnan(o) ? INFINITY : std::fabs(o - alpha * given));
                    refmax = std::fmax(refmax, std::fabs(alpha * given));
                }
    long outside = 0; // columns past gQ's 1024 and the batch row past B
    for (size_t r = 0; r < (size_t)(B + 1) * T; ++r)
        for (int c = 0; c < QKV; ++c) outside += (r >= (size_t)B * T || c >= H * 64) && !std::isnan(out[r * QKV + c]);
    double red_worst = 0;
    long red_outside = 0;
    for (int h = 0; h < H && red_ld; ++h)
        for (int i = 0; i < red_ld; ++i)
            for (int j = 0; j < red_ld; ++j) {
                const float got = red[((size_t)h * red_ld + i) * red_ld + j];
                if (i >= T || j >= T) {
                    red_outside += got != 0.f;
                    continue;
                }
                double want = 0;
                for (int b = 0; b < B; ++b) want += gs_at(b, h, i, j);
                red_worst = std::fmax(red_worst, std::isnan(got) ? INFINITY : std::fabs(got - want));
            }
    // fp32 sums of T products of values in [-1, 1]; fp16's 2^-11 of each key; float sums of B values in any order.
    const bool ok = worst <= 1e-5 * (refmax + 1) && worst_given <= 2e-3 * (refmax + 1) && outside == 0 &&
                    red_worst <= 1e-6 * B && red_outside == 0;
    printf("%s %s: B=%d T=%d BN=%d LDB=%d RED_LD=%d RED_FROM=%d PAIR=%d: max abs err %.3g (fp16 keys), %.3g (fp32 "
           "keys) of %.3g; %ld written outside gQ; sums max abs err %.3g, %ld outside [T, T]\n",
           ok ? "PASS" : "FAIL", name, B, T, BN, ldb, red_ld, red_from, pair, worst, worst_given, refmax, outside,
           red_worst, red_outside);
    return ok;
}

} // namespace

int main() {
    int failed = 0;
#define GQ16_CASE(kernel, B, T, BN, LDB, RED_LD, RED_FROM, PAIR)                                                  \
    failed += !gq16_case(#kernel, kernel, B, T, BN, LDB, RED_LD, RED_FROM, PAIR);
#include "emu_gq16_cases.inc"
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
