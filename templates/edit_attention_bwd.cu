
// The edit-attention backward's kernels besides the matrix products, for one
// (B, T). Layouts (spec): attention tensors [B, 16, T, T], masks [B, T],
// grad_edit_region_bias [16, 1024, 1024]. Every sum runs in a fixed order, so
// the results do not change from run to run.
namespace ea {
constexpr long long kB = {{B}}, kT = {{T}}, kLd = {{GS_LD}}; // gS rows: kLd floats apart
constexpr int kHeads = 16, kPos = 1024;

// Sum over the 256 threads of a block; every thread gets it.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); // scratch may still be read from an earlier call
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) s += scratch[w];
    return s;
}
} // namespace ea

// One row (b, h, i) per block: g holds gPd = gA v^T and becomes gS in place.
// Since probs * dropout_mask / (1-p) = probs_dropped, probs * gP =
// probs_dropped * gPd: gS = Pd*gPd - P * rowsum(Pd*gPd), then 0 where the key
// is masked (attention_mask[b, j] == 0).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_grad_scores(float *__restrict__ g, const float *__restrict__ probs, const float *__restrict__ probs_dropped,
                       const float *__restrict__ attention_mask) {
    __shared__ float scratch[8];
    const long long row = blockIdx.x, b = row / (ea::kHeads * ea::kT), base = row * ea::kT;
    float s = 0.f;
    for (long long j = threadIdx.x; j < ea::kT; j += 256) s = fmaf(probs_dropped[base + j], g[base + j], s);
    s = ea::block_sum(s, scratch);
    for (long long j = threadIdx.x; j < ea::kT; j += 256) {
        const float v = probs_dropped[base + j] * g[base + j] - probs[base + j] * s;
        g[base + j] = attention_mask[b * ea::kT + j] != 0.f ? v : 0.f;
    }
}

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
    within = ea::block_sum(within, scratch);
    cross = ea::block_sum(cross, scratch);
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
    w = ea::block_sum(w, scratch);
    c = ea::block_sum(c, scratch);
    if (threadIdx.x == 0) {
        grad_within_edit_bias[h] = w;
        grad_cross_edit_bias[h] = c;
    }
}
