// gQ on fp16 wgmma (templates/grad_query_wg16.cu, tile gq_f16=1) on the CPU
// (tests/emu/cuda_on_cpu.h): gQ^T = alpha k^T gS^T per (b, h), stored as gQ
// into grad_qkv's first 1024 columns, from gS in fp16 as the attention pass
// stores it (rows of LDB halves, zeros past T) and the keys in fp32. Against
// two fp64 products: of the operands as the tensor cores take them (the keys
// rounded to fp16), within fp32 accumulation's error, where a wrong swizzle,
// k offset or fragment is off by the outputs' size; and of the keys as given,
// within fp16's rounding. T = 1, T not a multiple of 8 or of the tiles, and
// both block widths; every column past a head's 64 and every batch row past
// B must stay as poisoned (NaN). The configurations are tests/CMakeLists.txt's.
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

typedef void (*gq16_kernel)(const float *, const unsigned short *, float *, float);

bool gq16_case(const char *name, gq16_kernel kernel, int B, int T, int BN, int ldb) {
    const int H = 16, QKV = 3 * H * 64;
    std::vector<float> key((size_t)B * H * T * 64), out((size_t)(B + 1) * T * QKV, NAN);
    std::vector<unsigned short> gs((size_t)B * H * T * ldb);
    for (auto &x : key) x = (float)uniform_pm1();
    for (size_t r = 0; r < (size_t)B * H * T; ++r)
        for (int j = 0; j < ldb; ++j) gs[r * ldb + j] = tc::f16_bits(j < T ? (float)uniform_pm1() : 0.f);
    const float alpha = 0.125f;
    emu_launch(dim3e{(unsigned)((T + BN - 1) / BN), 1, (unsigned)(B * H)}, 128,
               [&] { kernel(key.data(), gs.data(), out.data(), alpha); });
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
    // fp32 sums of T products of values in [-1, 1]; fp16's 2^-11 of each key.
    const bool ok = worst <= 1e-5 * (refmax + 1) && worst_given <= 2e-3 * (refmax + 1) && outside == 0;
    printf("%s %s: B=%d T=%d BN=%d LDB=%d: max abs err %.3g (fp16 keys), %.3g (fp32 keys) of %.3g; %ld written "
           "outside gQ\n", ok ? "PASS" : "FAIL", name, B, T, BN, ldb, worst, worst_given, refmax, outside);
    return ok;
}

} // namespace

int main() {
    int failed = 0;
#define GQ16_CASE(kernel, B, T, BN, LDB) failed += !gq16_case(#kernel, kernel, B, T, BN, LDB);
#include "emu_gq16_cases.inc"
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
