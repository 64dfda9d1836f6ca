// The attention pass on wgmma (templates/attention_wg*.cu) on the CPU
// (tests/emu/cuda_on_cpu.h), against double-precision sums: gS into the
// workspace (zeros past T in its padded rows), gV and gK into grad_qkv's
// [B, T, 3072], and, where rendered so, the within/cross partials of each
// key block (WC, tiles att_wc and gq_red) and batch row 0's gS into
// grad_edit_region_bias (OUT0, tile gq_red=2). Both organisations of the
// blocks (att_kb 1 and 2), P by cp.async or the TMA, gS stored as computed or
// rounded, the products on TF32 or (F16, tile att_f16) fp16 operands, gS in
// fp16 with no scale (GS_F16, tile gq_f16; its rows padded to 8 halves), T not
// a multiple of 4 or of 64, keys masked out. The configurations are
// tests/CMakeLists.txt's.
#include "cuda_on_cpu.h"

#include <cmath>

#include "tc_common.cu"
#include "gemm_wg.cu"
#include "bias_rows.cu"

#include "emu_pass_kernels.inc"

namespace {

uint64_t rng_state = 0x853c49e6748fea9bull;
double uniform01() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}
double uniform_pm1() { return 2 * uniform01() - 1; }
double tf32(float x) { return __uint_as_float(tc::to_tf32(x) & 0xFFFFE000u); } // as the pass rounds its operands
double f16(float x) { return tc::f16_value(tc::f16_bits(x)); }                     // or (F16) converts them

// Largest |got - want| over the compared elements (NaN: infinite), and the largest |want|.
struct err {
    double worst = 0, top = 0;
    void add(double got, double want) {
        worst = std::fmax(worst, std::isnan(got) ? INFINITY : std::fabs(got - want));
        top = std::fmax(top, std::fabs(want));
    }
    bool ok(double rel) const { return worst <= rel * top; }
};

// gS's element as stored: fp32, or (GS_F16) fp16 bits, poisoned with a NaN of its kind.
double gs_value(float x) { return x; }
double gs_value(unsigned short x) { return tc::f16_value(x); }
template <class E> E gs_poison() { return sizeof(E) == 4 ? (E)NAN : (E)0x7e00; }

// P_TMA: the kernel takes P and Pd as tensor maps (else as pointers); E: gS's element.
template <int P_TMA, class E, class Kernel>
bool pass_case(const char *name, Kernel kernel, int B, int T, int kb, int wc, int out0, int round, int gs_ld,
               int items, int half) {
    double (*op)(float) = half ? f16 : tf32; // an operand as the tensor cores take it
    const int H = 16, NJ = (T + 63) / 64, BH = B * H;
    const float scale = 0.125f, dropout_p = 0.1f;
    std::vector<float> gA((size_t)B * T * 1024), rowdot((size_t)BH * T), q((size_t)BH * T * 64), v((size_t)BH * T * 64);
    std::vector<float> P((size_t)BH * T * T), Pd(P.size()), amask((size_t)B * T), emask((size_t)B * T);
    for (auto &x : gA) x = (float)uniform_pm1();
    for (auto &x : rowdot) x = (float)uniform_pm1();
    for (auto &x : q) x = (float)uniform_pm1();
    for (auto &x : v) x = (float)uniform_pm1();
    for (size_t e = 0; e < P.size(); ++e) {
        P[e] = (float)(uniform01() * 2.0 / T);
        Pd[e] = uniform01() < dropout_p ? 0.f : P[e] / (1.f - dropout_p);
    }
    for (int e = 0; e < B * T; ++e) {
        amask[e] = e % 7 == 3 ? 0.f : 1.f; // some keys masked out
        emask[e] = uniform01() < 0.5 ? 1.f : 0.f;
    }
    std::vector<float> qkv((size_t)B * T * 3072, NAN), parts((size_t)BH * NJ * 2, NAN);
    std::vector<E> gs((size_t)BH * T * gs_ld, gs_poison<E>());
    std::vector<float> out(out0 ? (size_t)H * 1024 * 1024 : 1, NAN);
    const tc::tma_map map_ga{gA.data(), (long long)B * T, 1024, 1024, 32, 32, 1},
        map_q{q.data(), (long long)BH * T, 64, 64, 32, 32, 1},
        map_p{P.data(), (long long)BH * T / 4, 4LL * T, 4LL * T, 8, 68, 0},
        map_pd{Pd.data(), (long long)BH * T / 4, 4LL * T, 4LL * T, 8, 68, 0};
    // att_kb=1: a block a (key block, head); 2: up to `items` (pair, head) items a block, x = pair + NJ/2 (b 16 + h).
    const dim3e grid = kb == 1 ? dim3e{(unsigned)NJ, (unsigned)BH, 1}
                               : dim3e{(unsigned)(((NJ + 1) / 2 * BH + items - 1) / items), 1, 1};
    emu_launch(grid, 256, [&] {
        float *o = out0 ? out.data() : nullptr;
        if constexpr (P_TMA)
            kernel(map_ga, rowdot.data(), map_q, v.data(), map_p, map_pd, amask.data(), qkv.data(), gs.data(), scale,
                   nullptr, nullptr, dropout_p, emask.data(), parts.data(), o);
        else
            kernel(map_ga, rowdot.data(), map_q, v.data(), P.data(), Pd.data(), amask.data(), qkv.data(), gs.data(),
                   scale, nullptr, nullptr, dropout_p, emask.data(), parts.data(), o);
    });

    err e_gs, e_v, e_k, e_wc, e_out;
    long outside = 0;
    std::vector<double> s((size_t)T * T);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const size_t bh = (size_t)b * H + h;
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j) {
                    double gpd = 0;
                    for (int d = 0; d < 64; ++d) gpd += op(gA[((size_t)b * T + i) * 1024 + h * 64 + d]) * op(v[(bh * T + j) * 64 + d]);
                    const size_t at = (bh * T + i) * T + j;
                    s[(size_t)i * T + j] = amask[(size_t)b * T + j] != 0.f ? Pd[at] * gpd - P[at] * rowdot[bh * T + i] : 0.0;
                }
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < gs_ld; ++j)
                    e_gs.add(gs_value(gs[(bh * T + i) * gs_ld + j]), j < T ? s[(size_t)i * T + j] : 0.0);
            for (int j = 0; j < T; ++j)
                for (int d = 0; d < 64; ++d) {
                    double gv = 0, gk = 0;
                    for (int i = 0; i < T; ++i) {
                        gv += op(Pd[(bh * T + i) * T + j]) * op(gA[((size_t)b * T + i) * 1024 + h * 64 + d]);
                        gk += s[(size_t)i * T + j] * op(q[(bh * T + i) * 64 + d]);
                    }
                    e_v.add(qkv[((size_t)b * T + j) * 3072 + 2048 + h * 64 + d], gv);
                    e_k.add(qkv[((size_t)b * T + j) * 3072 + 1024 + h * 64 + d], scale * gk);
                }
            for (int jb = 0; jb < NJ && wc; ++jb) {
                double within = 0, cross = 0;
                for (int i = 0; i < T; ++i)
                    for (int j = 64 * jb; j < 64 * jb + 64 && j < T; ++j) {
                        const double mi = emask[(size_t)b * T + i], mj = emask[(size_t)b * T + j], x = s[(size_t)i * T + j];
                        within += x * mi * mj;
                        cross += x * (mi != mj);
                    }
                e_wc.add(parts[2 * (bh * NJ + jb)], within);
                e_wc.add(parts[2 * (bh * NJ + jb) + 1], cross);
            }
            if (out0 && b == 0) // rows < T, columns < 64 NJ written (zeros past T); nothing else
                for (int i = 0; i < 1024; ++i)
                    for (int j = 0; j < 1024; ++j) {
                        const float o = out[((size_t)h * 1024 + i) * 1024 + j];
                        if (i < T && j < 64 * NJ) e_out.add(o, j < T ? s[(size_t)i * T + j] : 0.0);
                        else outside += !std::isnan(o);
                    }
        }
    // gS: fp32 from TF32 or fp16 products (rounded to TF32 or fp16 itself where stored so); the sums of T
    // products (gK's of gS itself in TF32 or fp16): their 11 bits' 1e-3.
    const double rel = round || sizeof(E) == 2 ? 3e-3 : 2e-3;
    const bool ok = e_gs.ok(rel) && e_v.ok(2e-3) && e_k.ok(3e-3) && (!wc || e_wc.ok(2e-3)) && (!out0 || e_out.ok(rel)) &&
                    outside == 0;
    printf("%s %s: B=%d T=%d att_kb=%d items=%d P_TMA=%d WC=%d OUT0=%d GS_ROUND=%d F16=%d GS_F16=%d: max abs err gS "
           "%.3g of %.3g, "
           "gV %.3g of %.3g, gK %.3g of %.3g, within/cross %.3g of %.3g, row 0 in the output %.3g of %.3g, %ld written "
           "outside it\n",
           ok ? "PASS" : "FAIL", name, B, T, kb, items, P_TMA, wc, out0, round, half, (int)(sizeof(E) == 2), e_gs.worst,
           e_gs.top, e_v.worst, e_v.top,
           e_k.worst, e_k.top, e_wc.worst, e_wc.top, e_out.worst, e_out.top, outside);
    return ok;
}

} // namespace

int main() {
    int failed = 0;
#define PASS_CASE(kernel, B, T, KB, P_TMA, WC, OUT0, ROUND, GS_LD, ITEMS, F16, GS_F16)                                 \
    failed += !pass_case<P_TMA, std::conditional_t<GS_F16, unsigned short, float>>(#kernel, kernel, B, T, KB, WC,      \
                                                                                  OUT0, ROUND, GS_LD, ITEMS, F16);
#include "emu_pass_cases.inc"
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
