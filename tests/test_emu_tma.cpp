// The TMA-fed wgmma products of templates/gemm_tma.cu on the CPU
// (tests/emu/cuda_on_cpu.h), against double-precision products: A stored
// [M, K] (rounded in place, or as stored: A_TRUNC) and [K, M] (TA: the
// producer transposes it, and with COLSUM sums its columns), 128 x 256 and
// 128 x 128 tiles, M, N and K not multiples of the tiles, K in slices. These kernels pass on the H200, so
// this also holds the CPU model (the TMA's boxes and swizzle, the wgmma
// descriptors and fragments, the barrier phases) to the hardware's behaviour.
// Then templates/grad_query_tma.cu (tile gq_tma=1) in the configurations
// tests/CMakeLists.txt renders: one and two consumer warpgroups, gS rounded
// by the kernel or not, T = 1, 17, 129, 200, blocks that walk several tiles
// (reusing stages and k's slots across tiles); and gS in heads of more rows
// than T, as gs_direct's.
#include "cuda_on_cpu.h"

#include <cmath>

#include "tc_common.cu"
#include "gemm_tma.cu"
#include "row_dots.h"

#include "emu_pair_1.inc" // tests/CMakeLists.txt renders them from templates/gemm_tma_pair_kernel.cu
#include "emu_pair_2.inc"
#include "emu_pair_3.inc"

namespace {

uint64_t rng_state = 0x9e3779b97f4a7c15ull;
double uniform_pm1() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53 * 2 - 1;
}

// TF32 products of values in [-1, 1]: errors of about 1e-3 of the largest
// output; a wrong tile, offset or phase is off by the size of the outputs.
bool close_enough(double worst, double refmax) { return worst <= 2e-3 * refmax; }

// A product's operands (A [M, K] or, TA, [K, M]; B [N, K]) in [-1, 1], their
// tensor maps (A's box 128 rows, B's BN), an output C [M, N] and column sums
// (a row per K slice of ksplit), and their errors against double precision.
struct product {
    long long M, N, K, ksplit;
    bool ta;
    std::vector<float> A, B, C, sums;
    tc::tma_map ma, mb;
    product(long long m, long long n, long long k, bool ta_, int bn, long long ks)
        : M(m), N(n), K(k), ksplit(ks), ta(ta_), A(m * k), B(n * k), C(m * n, NAN), sums(((k + ks - 1) / ks) * m, NAN) {
        for (auto &x : A) x = (float)uniform_pm1();
        for (auto &x : B) x = (float)uniform_pm1();
        ma = ta ? tc::tma_map{A.data(), K, M, M, 32, 128, 0} : tc::tma_map{A.data(), M, K, K, 128, 32, 1};
        mb = tc::tma_map{B.data(), N, K, K, bn, 32, 1};
    }
    long long splits() const { return (K + ksplit - 1) / ksplit; }
    // The largest |output - product| (out(m, n) the output; NaN: infinite)
    // and the largest |product|.
    template <class Out> void error(Out out, double &worst, double &refmax) const {
        worst = 0, refmax = 0;
        for (long long m = 0; m < M; ++m)
            for (long long n = 0; n < N; ++n) {
                double r = 0;
                for (long long k = 0; k < K; ++k) r += (double)(ta ? A[k * M + m] : A[m * K + k]) * B[n * K + k];
                const double o = out(m, n);
                worst = std::fmax(worst, std::isnan(o) ? INFINITY : std::fabs(o - r));
                refmax = std::fmax(refmax, std::fabs(r));
            }
    }
    // The largest error of `sums` against A's column sums over each K slice (TA).
    double sums_error() const {
        double err = 0; // fp32 sums of at most ksplit values in [-1, 1]
        for (long long sp = 0; sp < splits(); ++sp)
            for (long long m = 0; m < M; ++m) {
                double r = 0;
                for (long long k = sp * ksplit; k < K && k < (sp + 1) * ksplit; ++k) r += A[k * M + m];
                const double o = sums[sp * M + m];
                err = std::fmax(err, std::isnan(o) ? INFINITY : std::fabs(o - r));
            }
        return err;
    }
};

// C = op(A) @ B^T on 128 x BN tiles, K in slices of KSPLIT (each slice's C
// apart, added here; or, CLUSTER, a tile's slices a cluster of blocks, which
// add them into C); A [M, K] or (TA) [K, M], B [N, K]. COLSUM (TA): also
// A's column sums over each slice, as the bias gradients are made. B_ROUND:
// B rounded in place by the producer; C_T: C stored transposed ([N, M]).
// RED: each block adds its slice's product into C, zeros before, by atomics.
template <bool TA, int BN, bool TRUNC, long long M, long long N, long long K, long long KSPLIT, bool COLSUM = false,
          bool B_ROUND = false, bool C_T = false, bool CLUSTER = false, bool RED = false>
bool gemm_case() {
    constexpr int BM = 128, STAGES = 4, RAW = 2;
    constexpr long long SPLITS = (K + KSPLIT - 1) / KSPLIT, PARTS = CLUSTER || RED ? 1 : SPLITS;
    product p(M, N, K, TA, BN, KSPLIT);
    std::vector<float> C(PARTS * M * N, RED ? 0.f : NAN); // each slice's apart, unless CLUSTER or RED
    const int gx = (int)((N + BN - 1) / BN), gy = (int)((M + BM - 1) / BM);
    emu_launch((unsigned)(gx * gy * SPLITS), tc::gemm_tma_threads(BM), [&] {
        const int id = (int)blockIdx.x;
        const int tile = CLUSTER ? id / (int)SPLITS : id % (gx * gy), split = CLUSTER ? id % SPLITS : id / (gx * gy);
        tc::gemm_tma<M, N, K, TA, BM, BN, STAGES, RAW, KSPLIT, COLSUM, TRUNC, B_ROUND, C_T, CLUSTER ? (int)SPLITS : 1,
                     CLUSTER, RED>(&p.ma, &p.mb, C.data() + (PARTS == 1 ? 0 : split * M * N), C_T ? M : N, 1.f, split,
            COLSUM ? p.sums.data() : nullptr, tile % gx, tile / gx);
    }, CLUSTER ? (unsigned)SPLITS : 1);
    // CLUSTER: the same bits as the slices written apart and added in slice
    // order in fp32 (what a split product's reduce launch does).
    long long unequal = 0;
    if (CLUSTER) {
        std::vector<float> parts(SPLITS * M * N, NAN);
        emu_launch((unsigned)(gx * gy * SPLITS), tc::gemm_tma_threads(BM), [&] {
            const int id = (int)blockIdx.x, split = id / (gx * gy), tile = id % (gx * gy);
            tc::gemm_tma<M, N, K, TA, BM, BN, STAGES, RAW, KSPLIT, false, TRUNC, B_ROUND>(
                &p.ma, &p.mb, parts.data() + split * M * N, N, 1.f, split, nullptr, tile % gx, tile / gx);
        });
        for (long long i = 0; i < M * N; ++i) {
            float sum = parts[i];
            for (long long sp = 1; sp < SPLITS; ++sp) sum += parts[sp * M * N + i];
            unequal += __float_as_uint(sum) != __float_as_uint(C[i]);
        }
    }
    double worst, refmax;
    p.error([&](long long m, long long n) {
        double o = 0;
        for (long long s = 0; s < PARTS; ++s) o += C[s * M * N + (C_T ? n * M + m : m * N + n)];
        return o;
    }, worst, refmax);
    const double sums_err = COLSUM ? p.sums_error() : 0;
    const bool ok = close_enough(worst, refmax) && sums_err <= 1e-5 * KSPLIT && unequal == 0;
    char sums_note[128] = "";
    if (COLSUM) snprintf(sums_note, sizeof sums_note, ", column sums' %.3g", sums_err);
    if (CLUSTER) snprintf(sums_note + strlen(sums_note), sizeof sums_note - strlen(sums_note),
                          ", %lld outputs unlike the slices added in order", unequal);
    printf("%s gemm_tma TA=%d BN=%d A_TRUNC=%d COLSUM=%d B_ROUND=%d C_T=%d M=%lld N=%lld K=%lld in %lld slice(s)%s: "
           "max abs err %.3g of %.3g%s\n", ok ? "PASS" : "FAIL", TA, BN, TRUNC, COLSUM, B_ROUND, C_T, M, N, K, SPLITS,
           CLUSTER ? " added in a cluster" : RED ? " added by atomics" : "", worst, refmax, sums_note);
    return ok;
}

// gA with the attention pass's row dots (ROWDOT_T, gA TMA-fed and unsplit): C =
// A @ B^T over M = B*T rows and N = 1024 columns, and D[b, h, i] = C[b*T+i,
// head h] . O[b*T+i, head h], O attention_output's stand-in: C against the
// product, D bit for bit against tc::store_head_dot's order of summation (the
// rowdot kernel's) over the stored C, every D written. The heads after the
// first go through the stages of the last k tiles: K = 32 * STAGES puts them
// in the stages of k tiles 0.. (the fewest tiles allowed), more K past those.
template <int BN, int STAGES, long long B, long long T, long long K> bool rowdot_case() {
    constexpr int BM = 128;
    constexpr long long M = B * T, N = 1024;
    product p(M, N, K, false, BN, K);
    std::vector<float> O(M * N), D(B * 16 * T, NAN);
    for (auto &x : O) x = (float)uniform_pm1();
    const tc::tma_map mo{O.data(), M, N, N, BM, 32, 1};
    const int gx = (int)(N / BN), gy = (int)((M + BM - 1) / BM);
    emu_launch((unsigned)(gx * gy), tc::gemm_tma_threads(BM), [&] {
        const int t = (int)blockIdx.x;
        tc::gemm_tma<M, N, K, false, BM, BN, STAGES, 0, K, false, false, false, false, 1, false, false, T>(
            &p.ma, &p.mb, p.C.data(), N, 1.f, 0, nullptr, t % gx, t / gx, &mo, D.data());
    });
    double worst, refmax;
    p.error([&](long long m, long long n) { return (double)p.C[m * N + n]; }, worst, refmax);
    const long long unequal = row_dots_unequal(p.C.data(), O.data(), D.data(), M, T);
    const bool ok = close_enough(worst, refmax) && unequal == 0;
    printf("%s gemm_tma ROWDOT BN=%d STAGES=%d B=%lld T=%lld K=%lld: max abs err %.3g of %.3g, %lld of %lld row "
           "dots unlike the rowdot kernel's\n", ok ? "PASS" : "FAIL", BN, STAGES, B, T, K, worst, refmax, unequal,
           B * 16 * T);
    return ok;
}

using gq_kernel = void (*)(const tc::tma_map, const tc::tma_map, float *, float);

// gQ [b, h] = alpha * gS [b, h] @ k [b, h] into grad_qkv's first 1024 columns
// (templates/grad_query_tma.cu, tile gq_tma=1), one configuration rendered by
// tests/CMakeLists.txt: every output against the product, nothing written
// outside gQ's columns, gS's row padding never read (NaN there), nothing of
// one head in another's rows (an infinity in head 1's first key); where a
// head has more rows than T (gs_rows, gs_direct's 1024), those are NaN and
// must reach no stored row.
bool gq_case(const char *name, gq_kernel kernel, int B, int T, int BM, int a_round, int grid, int gs_rows) {
    const int LD = (T + 3) / 4 * 4, Z = B * 16, tiles = Z * ((T + BM - 1) / BM);
    std::vector<float> gs((size_t)Z * gs_rows * LD), key((size_t)Z * T * 64), out((size_t)B * T * 3072, NAN);
    for (size_t r = 0; r < (size_t)Z * gs_rows; ++r)
        for (int j = 0; j < LD; ++j) gs[r * LD + j] = j < T && (int)(r % gs_rows) < T ? (float)uniform_pm1() : NAN;
    for (auto &x : key) x = (float)uniform_pm1();
    if (Z > 1) key[(size_t)T * 64] = INFINITY;
    const tc::tma_map map_gs{gs.data(), (long long)Z * gs_rows, T, LD, BM, 32, 1}, map_k{key.data(), (long long)Z * T, 64, 64, 32, 64, 0};
    const float alpha = 0.125f;
    const unsigned blocks = (unsigned)(grid ? grid : tiles < 132 ? tiles : 132);
    emu_launch(blocks, tc::gemm_tma_threads(BM),
               [&] { kernel(map_gs, map_k, out.data(), alpha); });
    double worst = 0, refmax = 0;
    long outside = 0;
    for (int b = 0; b < B; ++b)
        for (int i = 0; i < T; ++i) {
            const float *row = &out[((size_t)b * T + i) * 3072];
            for (int c = 1024; c < 3072; ++c) outside += !std::isnan(row[c]);
            for (int h = 0; h < 16; ++h) {
                const int z = b * 16 + h;
                if (z == 1) continue; // its rows meet the infinity
                for (int d = 0; d < 64; ++d) {
                    double r = 0;
                    for (int j = 0; j < T; ++j) r += (double)gs[((size_t)z * gs_rows + i) * LD + j] * key[((size_t)z * T + j) * 64 + d];
                    r *= alpha;
                    const double o = row[h * 64 + d];
                    worst = std::fmax(worst, std::isnan(o) ? INFINITY : std::fabs(o - r));
                    refmax = std::fmax(refmax, std::fabs(r));
                }
            }
        }
    const bool ok = close_enough(worst, refmax) && outside == 0;
    printf("%s %s: B=%d T=%d (%d rows a head) BM=%d A_ROUND=%d, %u blocks for %d tiles: max abs err %.3g of %.3g, %ld "
           "written outside gQ\n", ok ? "PASS" : "FAIL", name, B, T, gs_rows, BM, a_round, blocks, tiles, worst, refmax,
           outside);
    return ok;
}

// A pair launch (templates/gemm_tma_pair_kernel.cu, rendered by
// tests/CMakeLists.txt) in clusters of `cluster` blocks: `grid` blocks, each
// product's padded to whole clusters.
template <class K>
bool pair_case(const char *name, K kernel, product &p1, bool sums1, product &p2, bool sums2, unsigned grid,
               unsigned cluster) {
    printf("pair launch %s, %u blocks in clusters of %u:\n", name, grid, cluster);
    emu_launch(grid, tc::gemm_tma_threads(128), [&] {
        kernel(p1.ma, p1.mb, p1.C.data(), p1.sums.data(), p2.ma, p2.mb, p2.C.data(), p2.sums.data(), 1.f);
    }, cluster);
    bool ok = true;
    const product *ps[2] = {&p1, &p2};
    const bool sums[2] = {sums1, sums2};
    for (int i = 0; i < 2; ++i) { // every output, and (sums) each slice's column sums
        const product &p = *ps[i];
        double worst, refmax;
        p.error([&](long long m, long long n) { return (double)p.C[m * p.N + n]; }, worst, refmax);
        const double sums_err = sums[i] ? p.sums_error() : 0;
        const bool good = close_enough(worst, refmax) && sums_err <= 1e-5 * p.ksplit;
        printf("%s   product %d: M=%lld N=%lld K=%lld in %lld slice(s)%s: max abs err %.3g of %.3g, column sums' %.3g\n",
               good ? "PASS" : "FAIL", i + 1, p.M, p.N, p.K, p.splits(), sums[i] ? ", column sums" : "", worst, refmax,
               sums_err);
        ok = ok && good;
    }
    return ok;
}

} // namespace

#include "emu_gq_kernels.inc"

int main() {
    int failed = 0;
    failed += !gemm_case<false, 256, false, 200, 256, 100, 128>();
    failed += !gemm_case<true, 256, false, 200, 256, 100, 128>();
    failed += !gemm_case<false, 128, true, 130, 200, 300, 128>();
    failed += !gemm_case<true, 128, false, 130, 200, 300, 160>();
    failed += !gemm_case<true, 256, false, 300, 256, 200, 96, true>();
    // gA^T as ga_tma=2 makes it: A = out_weight [K, M] (TA), B = grad_output as it lies (B_ROUND), C stored as gA.
    failed += !gemm_case<true, 256, false, 256, 373, 192, 64, false, true, true>();
    failed += !gemm_case<false, 128, true, 130, 100, 96, 96, false, true, true>();
    // The slices added across a cluster: 2 (rows split evenly), 3 (43, 43, 42
    // rows) and 4; M past one tile, N not a multiple of 4 (the elementwise tail).
    failed += !gemm_case<false, 256, true, 200, 256, 300, 160, false, false, false, true>();
    failed += !gemm_case<true, 128, false, 130, 198, 300, 128, true, false, false, true>();
    failed += !gemm_case<false, 128, false, 100, 128, 500, 128, false, false, false, true>();
    // The slices added into C by atomics (splitk_red=1): 3 of A as stored (A_TRUNC, grad_hidden's), 2 of A
    // transposed with its column sums and N not a multiple of 4 (the scalar tail).
    failed += !gemm_case<false, 256, true, 200, 256, 300, 128, false, false, false, false, true>();
    failed += !gemm_case<true, 128, false, 130, 198, 300, 160, true, false, false, false, true>();
    // gA's row dots: 128 x 256 tiles (four heads, three in stages) at the fewest k tiles, a partial row
    // tile (M = 300); 128 x 128 tiles (two heads) with six stages and K past them, T = 1.
    failed += !rowdot_case<256, 4, 4, 75, 128>();
    failed += !rowdot_case<128, 6, 130, 1, 224>();
    { // product 1 clustered (3 slices: 6 blocks), product 2's 4 blocks padded to 6
        product p1(200, 256, 300, false, 256, 128), p2(200, 256, 200, true, 128, 224);
        failed += !pair_case("emu_pair_1", emu_pair_1, p1, false, p2, true, 12, 3);
    }
    { // product 1's 3 blocks padded to 4, product 2 clustered (2 slices, column sums per slice: 8 blocks)
        product p1(300, 128, 96, false, 128, 96), p2(130, 198, 300, true, 128, 160);
        failed += !pair_case("emu_pair_2", emu_pair_2, p1, false, p2, true, 12, 2);
    }
    { // both products' slices added by atomics into zeroed outputs: 6 blocks, then 8 (column sums per slice)
        product p1(200, 256, 300, false, 256, 128), p2(130, 198, 300, true, 128, 160);
        std::fill(p1.C.begin(), p1.C.end(), 0.f);
        std::fill(p2.C.begin(), p2.C.end(), 0.f);
        failed += !pair_case("emu_pair_3", emu_pair_3, p1, false, p2, true, 14, 1);
    }
#define GQ_CASE(kernel, B, T, BM, ROUND, GRID, GS_ROWS) failed += !gq_case(#kernel, kernel, B, T, BM, ROUND, GRID, GS_ROWS);
#include "emu_gq_cases.inc"
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
