
// The edit-bias gradients from gS, for one (B, T). Layouts (spec): gS
// [B, 16, T, kLd], masks [B, T], grad_edit_region_bias [16, 1024, 1024]. Every
// sum runs in a fixed order, so the results do not change from run to run.
namespace ea {
constexpr long long kB = {{B}}, kT = {{T}}, kLd = {{GS_LD}}; // gS rows: kLd floats apart
constexpr int kHeads = 16, kPos = 1024;
} // namespace ea

// grad_edit_region_bias[h, i, j] = sum over b of gS (0 outside [:T, :T]), and
// per block the partial sums of gS * m_i*m_j and gS * (m_i != m_j).
// Grid (1024/256, 1024, 16).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_grads(const float *__restrict__ gs, const float *__restrict__ edit_region_mask,
                      float *__restrict__ grad_edit_region_bias, float *__restrict__ partials) {
    __shared__ float scratch[8];
    const long long h = blockIdx.z, i = blockIdx.y, j = (long long)blockIdx.x * 256 + threadIdx.x;
    float s = 0.f, within = 0.f, cross = 0.f;
    if (i < ea::kT && j < ea::kT) {
        for (long long b = 0; b < ea::kB; ++b) {
            const float v = gs[((b * ea::kHeads + h) * ea::kT + i) * ea::kLd + j];
            const float mi = edit_region_mask[b * ea::kT + i], mj = edit_region_mask[b * ea::kT + j];
            s += v;
            within = fmaf(v, mi * mj, within);
            cross = fmaf(v, mi * (1.f - mj) + (1.f - mi) * mj, cross);
        }
    }
    grad_edit_region_bias[(h * ea::kPos + i) * ea::kPos + j] = s;
    within = tc::block_sum(within, scratch);
    cross = tc::block_sum(cross, scratch);
    if (threadIdx.x == 0) {
        const long long p = (h * ea::kPos + i) * gridDim.x + blockIdx.x;
        partials[2 * p] = within;
        partials[2 * p + 1] = cross;
    }
}

// One block per head: the partials of bias_grads, summed in a fixed order.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_final(const float *__restrict__ partials, float *__restrict__ grad_within_edit_bias,
                      float *__restrict__ grad_cross_edit_bias) {
    __shared__ float scratch[8];
    const int h = blockIdx.x, per_head = ea::kPos * 4;
    float w = 0.f, c = 0.f;
    for (int p = threadIdx.x; p < per_head; p += 256) {
        w += partials[2 * ((long long)h * per_head + p)];
        c += partials[2 * ((long long)h * per_head + p) + 1];
    }
    w = tc::block_sum(w, scratch);
    c = tc::block_sum(c, scratch);
    if (threadIdx.x == 0) {
        grad_within_edit_bias[h] = w;
        grad_cross_edit_bias[h] = c;
    }
}
