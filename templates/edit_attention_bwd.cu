
// The edit-bias gradients from gS, for one (B, T). Layouts (spec): gS
// [B, 16, T, kLd], masks [B, T], grad_edit_region_bias [16, 1024, 1024]. Every
// sum runs in a fixed order, so the results do not change from run to run.
namespace ea {
constexpr long long kB = {{B}}, kT = {{T}}, kLd = {{GS_LD}}; // gS rows: kLd floats apart
constexpr int kHeads = 16, kPos = 1024;
} // namespace ea

// grad_edit_region_bias[h, i, j] = sum over b of gS (0 outside [:T, :T]), and
// per block the partial sums of gS * m_i*m_j and gS * (m_i != m_j).
// Grid (rows, 16): a block owns one row of one head, a thread four adjacent
// columns, written as one 16-byte store. The output is 64 MiB whatever T is;
// rows and columns past T are only written: rows past T by this kernel with
// 1024 rows, or, with T rows (tile zero_early=1), by bias_zero_rows earlier.
namespace ea {
constexpr bool kVec = kLd % 4 == 0; // gS rows 16-byte aligned
} // namespace ea
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_grads(const float *__restrict__ gs, const float *__restrict__ edit_region_mask,
                      float *__restrict__ grad_edit_region_bias, float *__restrict__ partials) {
    tc::pdl_enter();
    using namespace ea;
    __shared__ float scratch[8];
    const long long h = blockIdx.y, i = blockIdx.x;
    const int j = 4 * threadIdx.x;
    float s[4] = {0.f, 0.f, 0.f, 0.f}, within = 0.f, cross = 0.f;
    if (i < kT && j < kT) {
#pragma unroll 4
        for (long long b = 0; b < kB; ++b) {
            const float *row = gs + ((b * kHeads + h) * kT + i) * kLd;
            float v[4];
            if constexpr (kVec) {
                const float4 x = *reinterpret_cast<const float4 *>(row + j);
                v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
            }
            const float mi = edit_region_mask[b * kT + i];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (j + e >= kT) break;
                if constexpr (!kVec) v[e] = row[j + e];
                const float mj = edit_region_mask[b * kT + j + e];
                s[e] += v[e];
                within = fmaf(v[e], mi * mj, within);
                cross = fmaf(v[e], mi * (1.f - mj) + (1.f - mi) * mj, cross);
            }
        }
    }
    *reinterpret_cast<float4 *>(&grad_edit_region_bias[(h * kPos + i) * kPos + j]) = make_float4(s[0], s[1], s[2], s[3]);
    if (i >= kT) return; // no partial for rows past T: bias_final reads rows < T only
    within = tc::block_sum(within, scratch);
    cross = tc::block_sum(cross, scratch);
    if (threadIdx.x == 0) {
        const long long p = h * kPos + i;
        partials[2 * p] = within;
        partials[2 * p + 1] = cross;
    }
}

// Rows T..1023 of every head of grad_edit_region_bias, zeros whatever gS is:
// written at the start of the plan on a side lane, where the products leave
// DRAM bandwidth unused, instead of after the attention pass. Grid (float4s
// of a head's rows past T / 256, 16).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_zero_rows(float *__restrict__ grad_edit_region_bias) {
    tc::pdl_enter();
    using namespace ea;
    const long long q = (long long)blockIdx.x * 256 + threadIdx.x;
    if (q >= (kPos - kT) * kPos / 4) return;
    float *head = grad_edit_region_bias + ((long long)blockIdx.y * kPos + kT) * kPos;
    reinterpret_cast<float4 *>(head)[q] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// One block per head: the partials of bias_grads, summed in a fixed order.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_final(const float *__restrict__ partials, float *__restrict__ grad_within_edit_bias,
                      float *__restrict__ grad_cross_edit_bias) {
    tc::pdl_enter();
    __shared__ float scratch[8];
    const int h = blockIdx.x;
    float w = 0.f, c = 0.f;
    for (int p = threadIdx.x; p < ea::kT; p += 256) { // one partial per row i < T
        w += partials[2 * ((long long)h * ea::kPos + p)];
        c += partials[2 * ((long long)h * ea::kPos + p) + 1];
    }
    w = tc::block_sum(w, scratch);
    c = tc::block_sum(c, scratch);
    if (threadIdx.x == 0) {
        grad_within_edit_bias[h] = w;
        grad_cross_edit_bias[h] = c;
    }
}
