// gQ's batched wgmma product (templates/gemm_wg_batched_kernel.cu over
// gemm_wg.cu, every thread copying by cp.async, the keys as A through
// registers) on the CPU (tests/emu/cuda_on_cpu.h), against double-precision
// products: gQ^T = alpha k^T gS^T per (b, h), stored as gQ. gS raw (B_RAW:
// rounded by the kernel) or stored as TF32 values (tile gs_round=1), in
// 64- and 128-row blocks, T not a multiple of the tiles or of 4. With RED_LD
// (tile gq_red=1) the kernel also adds gS over the batch into a zeroed output
// of RED_LD x RED_LD a head by float reductions, its blocks head by head:
// every element inside [T, T] must hold the batch's sum and every other one
// stay zero, although gS's padding columns past T hold another value. With
// RED_FROM = 1 (tile gq_red=2) the output holds batch row 0's gS first, as
// the attention pass stores it there, and the kernel adds rows 1.. only.
// With PAIR = 2 (tile gq_pair=1) a block takes two batch rows, one warpgroup
// each, and adds their sum (B odd: the last block one row, its second
// warpgroup storing nothing).
// The configurations are tests/CMakeLists.txt's.
#include "cuda_on_cpu.h"

#include <cmath>

#include "tc_common.cu"
#include "gemm_wg.cu"

#include "emu_wg_kernels.inc"

namespace {

uint64_t rng_state = 0x2545f4914f6cdd1dull;
double uniform_pm1() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53 * 2 - 1;
}

// x as the TF32 value the pass stores with gs_round=1 (rounded, low bits zero).
float tf32_value(float x) { return __uint_as_float(tc::to_tf32(x) & 0xFFFFE000u); }

typedef void (*wg_kernel)(const float *, const float *, float *, float, const float *, float *);

bool wg_case(const char *name, wg_kernel kernel, int B, int H, int T, int BN, int b_raw, int red_ld, int ldb,
             int red_from, int pair) {
    const int NKB = (T + 63) / 64, W = H * 64;
    // out has a batch row past B: nothing may store there.
    std::vector<float> key((size_t)B * H * T * 64), gs((size_t)B * H * T * ldb), out((size_t)(B + 1) * T * W, NAN);
    std::vector<float> red((size_t)H * red_ld * red_ld, 0.f), bscale((size_t)B * H * NKB, 1.f);
    for (auto &x : key) x = (float)uniform_pm1();
    for (size_t r = 0; r < (size_t)B * H * T; ++r)
        for (int j = 0; j < ldb; ++j) {
            const float x = (float)uniform_pm1();
            gs[r * ldb + j] = j >= T ? 7.f : b_raw ? x : tf32_value(x); // padding: not the sum's, times zero rows of k
        }
    for (int h = 0; h < H && red_from == 1; ++h) // batch row 0 (h < H: b = 0), as the pass stores it
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < T; ++j) red[((size_t)h * red_ld + i) * red_ld + j] = gs[((size_t)h * T + i) * ldb + j];
    const float alpha = 0.125f;
    emu_launch(dim3e{(unsigned)((T + BN - 1) / BN), 1, (unsigned)((B + pair - 1) / pair * H)}, 128 * pair, [&] {
        kernel(key.data(), gs.data(), out.data(), alpha, bscale.data(), red_ld ? red.data() : nullptr);
    });
    double worst = 0, refmax = 0;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < T; ++i)
                for (int d = 0; d < 64; ++d) {
                    const size_t z = (size_t)b * H + h;
                    double r = 0;
                    for (int j = 0; j < T; ++j) r += (double)gs[(z * T + i) * ldb + j] * key[(z * T + j) * 64 + d];
                    r *= alpha;
                    const double o = out[((size_t)b * T + i) * W + h * 64 + d];
                    worst = std::fmax(worst, std::isnan(o) ? INFINITY : std::fabs(o - r));
                    refmax = std::fmax(refmax, std::fabs(r));
                }
    // TF32 products of values in [-1, 1]: about 1e-3 of the largest output.
    bool ok = worst <= 2e-3 * refmax;
    double red_worst = 0, red_max = 0;
    long outside = 0;
    for (int h = 0; h < H && red_ld; ++h)
        for (int i = 0; i < red_ld; ++i)
            for (int j = 0; j < red_ld; ++j) {
                const float got = red[((size_t)h * red_ld + i) * red_ld + j];
                if (i >= T || j >= T) {
                    outside += got != 0.f;
                    continue;
                }
                double want = 0;
                for (int b = 0; b < B; ++b) want += gs[(((size_t)b * H + h) * T + i) * ldb + j];
                red_worst = std::fmax(red_worst, std::isnan(got) ? INFINITY : std::fabs(got - want));
                red_max = std::fmax(red_max, std::fabs(want));
            }
    // float sums of B values in any order: a few units of the last place.
    for (size_t x = (size_t)B * T * W; x < out.size(); ++x) outside += !std::isnan(out[x]);
    ok = ok && red_worst <= 1e-6 * B * (red_max + 1) && outside == 0;
    printf("%s %s: B=%d H=%d T=%d BN=%d B_RAW=%d RED_LD=%d LDB=%d RED_FROM=%d PAIR=%d: gQ max abs err %.3g of %.3g; "
           "sums max abs err %.3g of %.3g, %ld written outside [T, T] or past gQ's B rows\n", ok ? "PASS" : "FAIL",
           name, B, H, T, BN, b_raw, red_ld, ldb, red_from, pair, worst, refmax, red_worst, red_max, outside);
    return ok;
}

} // namespace

int main() {
    int failed = 0;
#define WG_CASE(kernel, B, H, T, BN, RAW, RED_LD, LDB, RED_FROM, PAIR)                                               \
    failed += !wg_case(#kernel, kernel, B, H, T, BN, RAW, RED_LD, LDB, RED_FROM, PAIR);
#include "emu_wg_cases.inc"
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
