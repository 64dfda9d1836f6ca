// The first sequence's softmax backward (fused = 0): gS from gPd, one row per
// block; needs namespace ea of templates/edit_attention_bwd.cu.
// One row (b, h, i) per block: g holds gPd = gA v^T and becomes gS in place.
// Since probs * dropout_mask / (1-p) = probs_dropped, probs * gP =
// probs_dropped * gPd: gS = Pd*gPd - P * rowsum(Pd*gPd), then 0 where the key
// is masked (attention_mask[b, j] == 0).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_grad_scores(float *__restrict__ g, const float *__restrict__ probs, const float *__restrict__ probs_dropped,
                       const float *__restrict__ attention_mask) {
    tc::pdl_enter();
    __shared__ float scratch[8];
    const long long row = blockIdx.x, b = row / (ea::kHeads * ea::kT), base = row * ea::kT;
    float s = 0.f;
    for (long long j = threadIdx.x; j < ea::kT; j += 256) s = fmaf(probs_dropped[base + j], g[base + j], s);
    s = tc::block_sum(s, scratch);
    for (long long j = threadIdx.x; j < ea::kT; j += 256) {
        const float v = probs_dropped[base + j] * g[base + j] - probs[base + j] * s;
        g[base + j] = attention_mask[b * ea::kT + j] != 0.f ? v : 0.f;
    }
}
