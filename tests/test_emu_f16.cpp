// The fp16 TMA-fed wgmma products of templates/gemm_tma.cu (OPERANDS f16,
// precision fp16) on the CPU (tests/emu/cuda_on_cpu.h): A fp32 as it lies
// ([M, K], or TA [K, M]) converted in shared memory, B fp16 [N, kp] as
// templates/transpose_f16.cu writes it (also run here), against two fp64
// products: of the operands rounded to fp16, within fp32 accumulation's
// error (a wrong swizzle, k offset or fragment is off by the outputs' size),
// and of the operands as given, within fp16's. Problem 2's products: N and K
// of 1024 and 3072 (their tiles, K split as the plan splits it), M from 1 to
// past 65536 (only the first and last row tiles run there), M not a multiple
// of 64; the column sums (COLSUM), the slices added across a cluster or by
// atomics; gA making the attention pass's row dots (ROWDOT_T); and a pair
// launch of two (templates/gemm_tma_pair_kernel.cu rendered by
// tests/CMakeLists.txt).
#include "cuda_on_cpu.h"

#include <cmath>

#include "tc_common.cu"
#include "gemm_tma.cu"
#include "row_dots.h"

#undef __shared__
#define __shared__ static // the transpose's tile: one block runs at a time
#include "emu_transpose_f16.inc"
#undef __shared__
#define __shared__
#include "emu_pair_f16.inc"

namespace {

uint64_t rng_state = 0x6a09e667f3bcc909ull;
double uniform_pm1() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53 * 2 - 1;
}
double as_f16(float x) { return tc::f16_value(tc::f16_bits(x)); }

// A product's operands in [-1, 1]: A [M, K] or (TA) [K, M] fp32, B [K, N] fp32
// as the plan's B lies, and Bt [N, kp] fp16 from the emulated transpose (kp:
// K padded to a multiple of 8), their tensor maps, the output and column sums.
struct product {
    long long M, N, K, kp, ksplit;
    bool ta;
    std::vector<float> A, B, C, sums;
    std::vector<unsigned short> Bt;
    tc::tma_map ma, mb;
    product(long long m, long long n, long long k, bool ta_, int bn, long long ks)
        : M(m), N(n), K(k), kp((k + 7) / 8 * 8), ksplit(ks), ta(ta_), A(m * k), B(k * n), C(m * n, NAN),
          sums(((k + ks - 1) / ks) * m, NAN), Bt(n * kp, 0xffff) {
        for (auto &x : A) x = (float)uniform_pm1();
        for (auto &x : B) x = (float)uniform_pm1();
        // The plan's transpose, 64 x 64 tiles (templates/transpose_f16.cu).
        emu_launch(dim3e{(unsigned)((kp + 63) / 64), (unsigned)((n + 63) / 64), 1}, 256,
                   [&] { emu_transpose_f16(B.data(), Bt.data(), K, (int)N, kp); });
        ma = ta ? tc::tma_map{A.data(), K, M, M, 32, 128, 0} : tc::tma_map{A.data(), M, K, K, 128, 32, 1};
        mb = tc::tma_map{reinterpret_cast<const float *>(Bt.data()), N, kp / 2, kp / 2, bn, 32, 1};
    }
    long long splits() const { return (K + ksplit - 1) / ksplit; }
    float a(long long m, long long k) const { return ta ? A[k * M + m] : A[m * K + k]; }
    // Bt holds B^T in fp16, zeros past K: the transpose checked by itself.
    long long transpose_errors() const {
        long long bad = 0;
        for (long long n = 0; n < N; ++n)
            for (long long k = 0; k < kp; ++k)
                bad += Bt[n * kp + k] != (k < K ? tc::f16_bits(B[k * N + n]) : 0);
        return bad;
    }
    // The largest errors of out(m, n) against the fp64 products of the fp16
    // operands (w16) and of the operands as given (w), over rows `rows`
    // (each a row tile of 128), and the largest |product|.
    template <class Out>
    void error(Out out, const std::vector<long long> &row_tiles, double &w16, double &w, double &refmax) const {
        w16 = w = refmax = 0;
        for (long long rt : row_tiles)
            for (long long m = rt * 128; m < M && m < rt * 128 + 128; ++m)
                for (long long n = 0; n < N; ++n) {
                    double r = 0, r16 = 0;
                    for (long long k = 0; k < K; ++k) {
                        r += (double)a(m, k) * B[k * N + n];
                        r16 += as_f16(a(m, k)) * as_f16(B[k * N + n]);
                    }
                    const double o = out(m, n);
                    w16 = std::fmax(w16, std::isnan(o) ? INFINITY : std::fabs(o - r16));
                    w = std::fmax(w, std::isnan(o) ? INFINITY : std::fabs(o - r));
                    refmax = std::fmax(refmax, std::fabs(r));
                }
    }
    double sums_error() const { // A's column sums over each K slice (TA), fp32 sums of at most ksplit values
        double err = 0;
        for (long long sp = 0; sp < splits(); ++sp)
            for (long long m = 0; m < M; ++m) {
                double r = 0;
                for (long long k = sp * ksplit; k < K && k < (sp + 1) * ksplit; ++k) r += a(m, k);
                const double o = sums[sp * M + m];
                err = std::fmax(err, std::isnan(o) ? INFINITY : std::fabs(o - r));
            }
        return err;
    }
};

// fp32 accumulation of exact fp16 products; fp16 operands (2^-11 relative each).
bool close_enough(double w16, double w, double refmax) { return w16 <= 2e-5 * refmax && w <= 2e-3 * refmax; }

// C = op(A) @ B^T on 128 x BN tiles, K in slices of KSPLIT (each slice's C
// apart, added here; CLUSTER: across a cluster; RED: by atomics into zeros),
// the row tiles `row_tiles` only (empty: all).
template <bool TA, int BN, int STAGES, long long M, long long N, long long K, long long KSPLIT, bool COLSUM = false,
          bool CLUSTER = false, bool RED = false>
bool gemm_case(std::vector<long long> row_tiles = {}) {
    constexpr int BM = 128, RAW = 2;
    constexpr long long SPLITS = (K + KSPLIT - 1) / KSPLIT, PARTS = CLUSTER || RED ? 1 : SPLITS;
    product p(M, N, K, TA, BN, KSPLIT);
    const long long bad_transpose = p.transpose_errors();
    std::vector<float> C(PARTS * M * N, RED ? 0.f : NAN);
    const int gx = (int)((N + BN - 1) / BN), gy = (int)((M + BM - 1) / BM);
    if (row_tiles.empty())
        for (int y = 0; y < gy; ++y) row_tiles.push_back(y);
    const int ny = (int)row_tiles.size();
    emu_launch((unsigned)(gx * ny * SPLITS), tc::gemm_tma_threads(BM), [&] {
        const int id = (int)blockIdx.x;
        const int tile = CLUSTER ? id / (int)SPLITS : id % (gx * ny), split = CLUSTER ? id % SPLITS : id / (gx * ny);
        tc::gemm_tma<M, N, K, TA, BM, BN, STAGES, RAW, KSPLIT, COLSUM, false, false, false, CLUSTER ? (int)SPLITS : 1,
                     CLUSTER, RED, 0, tc::tma_operands::f16>(
            &p.ma, &p.mb, C.data() + (PARTS == 1 ? 0 : split * M * N), N, 1.f, split,
            COLSUM ? p.sums.data() : nullptr, tile % gx, (int)row_tiles[tile / gx]);
    }, CLUSTER ? (unsigned)SPLITS : 1);
    double w16, w, refmax;
    p.error([&](long long m, long long n) {
        double o = 0;
        for (long long s = 0; s < PARTS; ++s) o += C[s * M * N + m * N + n];
        return o;
    }, row_tiles, w16, w, refmax);
    const double sums_err = COLSUM ? p.sums_error() : 0;
    const bool ok = close_enough(w16, w, refmax) && sums_err <= 1e-5 * KSPLIT && bad_transpose == 0;
    printf("%s gemm_tma f16 TA=%d BN=%d STAGES=%d COLSUM=%d M=%lld N=%lld K=%lld in %lld slice(s)%s, %d of %d row "
           "tiles: max abs err %.3g against the fp16 operands' product, %.3g against the fp32 operands' (of %.3g); "
           "column sums' %.3g; %lld fp16 B elements unlike B^T\n",
           ok ? "PASS" : "FAIL", TA, BN, STAGES, COLSUM, M, N, K, SPLITS,
           CLUSTER ? " added in a cluster" : RED ? " added by atomics" : "", ny, gy, w16, w, refmax, sums_err,
           bad_transpose);
    return ok;
}

// gA with the attention pass's row dots (ROWDOT_T): C = A @ B over M = B*T
// rows and N = 1024 columns in fp16, and D[b, h, i] = C[b*T+i, head h] .
// O[b*T+i, head h], O attention_output's stand-in: C against the products, D
// bit for bit against the rowdot kernel's order of summation
// (tc::store_head_dot) over the stored C, every D written. The first RAW
// heads of a tile go through the raw tiles, the others (BN = 256) through the
// stages of the last k tiles: K = 64 * STAGES is the fewest k tiles allowed.
template <int BN, int STAGES, long long B, long long T, long long K> bool rowdot_case() {
    constexpr int BM = 128, RAW = 2;
    constexpr long long M = B * T, N = 1024;
    product p(M, N, K, false, BN, K);
    std::vector<float> O(M * N), D(B * 16 * T, NAN);
    for (auto &x : O) x = (float)uniform_pm1();
    const tc::tma_map mo{O.data(), M, N, N, BM, 32, 1};
    const int gx = (int)(N / BN), gy = (int)((M + BM - 1) / BM);
    emu_launch((unsigned)(gx * gy), tc::gemm_tma_threads(BM), [&] {
        const int t = (int)blockIdx.x;
        tc::gemm_tma<M, N, K, false, BM, BN, STAGES, RAW, K, false, false, false, false, 1, false, false, T,
                     tc::tma_operands::f16>(&p.ma, &p.mb, p.C.data(), N, 1.f, 0, nullptr, t % gx, t / gx, &mo,
                                            D.data());
    });
    std::vector<long long> every_tile;
    for (int y = 0; y < gy; ++y) every_tile.push_back(y);
    double w16, w, refmax;
    p.error([&](long long m, long long n) { return (double)p.C[m * N + n]; }, every_tile, w16, w, refmax);
    const long long unequal = row_dots_unequal(p.C.data(), O.data(), D.data(), M, T);
    const bool ok = close_enough(w16, w, refmax) && unequal == 0;
    printf("%s gemm_tma f16 ROWDOT BN=%d STAGES=%d B=%lld T=%lld K=%lld: max abs err %.3g against the fp16 operands' "
           "product (of %.3g), %lld of %lld row dots unlike the rowdot kernel's\n", ok ? "PASS" : "FAIL", BN, STAGES,
           B, T, K, w16, refmax, unequal, B * 16 * T);
    return ok;
}

// The pair launch of tests/CMakeLists.txt's emu_pair_f16: grad_hidden's
// form (A [M, K]) in 2 slices of 128, then grad_qkv_weight's (TA, column
// sums) unsplit, 4 + 2 blocks.
bool pair_case() {
    product p1(130, 256, 200, false, 256, 128), p2(256, 128, 130, true, 128, 192);
    std::vector<float> parts(2 * p1.M * p1.N, NAN);
    emu_launch(6, tc::gemm_tma_threads(128), [&] {
        emu_pair_f16(p1.ma, p1.mb, parts.data(), nullptr, p2.ma, p2.mb, p2.C.data(), p2.sums.data(), 1.f);
    });
    double w16, w, refmax, w16b, wb, refmaxb;
    p1.error([&](long long m, long long n) { return (double)parts[m * p1.N + n] + parts[(p1.M + m) * p1.N + n]; },
             {0, 1}, w16, w, refmax);
    p2.error([&](long long m, long long n) { return (double)p2.C[m * p2.N + n]; }, {0, 1}, w16b, wb, refmaxb);
    const double sums_err = p2.sums_error();
    const bool ok = close_enough(w16, w, refmax) && close_enough(w16b, wb, refmaxb) && sums_err <= 1e-5 * 192;
    printf("%s pair launch emu_pair_f16: max abs err %.3g / %.3g of %.3g, then %.3g / %.3g of %.3g, column sums' "
           "%.3g\n", ok ? "PASS" : "FAIL", w16, w, refmax, w16b, wb, refmaxb, sums_err);
    return ok;
}

} // namespace

int main() {
    int failed = 0;
    // grad_hidden's form (A [M, K] as it lies, here grad_qkv's K = 3072) at M = 17: one partial row tile.
    failed += !gemm_case<false, 256, 3, 17, 256, 3072, 3072>();
    // gA's (N = 1024, K = 1024 in 4 slices), M = 200 = 128 + 72.
    failed += !gemm_case<false, 256, 3, 200, 1024, 1024, 256>({1});
    // grad_qkv_weight's form (TA: grad_qkv^T, K = B*T = 300, odd), with the column sums, 128-wide tiles.
    failed += !gemm_case<true, 128, 4, 130, 200, 300, 128, true>();
    // M = 1 (B = T = 1), and M past 65536 (B*T = 65600): its first and last row tiles.
    failed += !gemm_case<false, 128, 4, 1, 128, 1024, 1024>();
    failed += !gemm_case<false, 256, 3, 65600, 256, 64, 64>({0, 512});
    // K slices added across a cluster (3), and by atomics (2, TA with column sums).
    failed += !gemm_case<false, 256, 3, 200, 256, 320, 128, false, true>();
    failed += !gemm_case<true, 128, 4, 130, 200, 300, 192, true, false, true>();
    // gA's row dots: four heads a tile (two in the stages), two (both in the raw tiles), more k tiles there.
    failed += !rowdot_case<256, 3, 4, 75, 192>();
    failed += !rowdot_case<128, 4, 130, 1, 320>();
    failed += !pair_case();
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
