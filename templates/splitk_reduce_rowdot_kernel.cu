// The {{SPLITS}} K slices of grad_attn_out added in order into gA, as the
// split-K reduce does, and with them the row dots the attention pass needs:
// D[b, h, i] = gA[b, i, h] . attention_output[b, i, h] (tc::store_head_dot,
// as the rowdot kernel), and with NORMS (gS stored in fp16) |gA[b, i, h]|^2
// into gan for its scale. One launch instead of two on the chain: a warp per
// (row, head), a lane two of its 64 columns.
extern "C" __global__ void __launch_bounds__(256)
{{NAME}}(const float *__restrict__ part, float *__restrict__ gA, const float *__restrict__ attention_output,
         float *__restrict__ rowdot, float *__restrict__ gan) {
    tc::pdl_enter();
    constexpr long long kD = 64, kWarps = {{BT}} * 16, kElems = kWarps * kD;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= kWarps) return;
    const long long e = w * kD + 2 * lane;
    float2 x = *reinterpret_cast<const float2 *>(part + e);
#pragma unroll
    for (int z = 1; z < {{SPLITS}}; ++z) {
        const float2 v = *reinterpret_cast<const float2 *>(part + z * kElems + e);
        x.x += v.x, x.y += v.y;
    }
    *reinterpret_cast<float2 *>(gA + e) = x;
    tc::store_head_dot(x, *reinterpret_cast<const float2 *>(attention_output + e), w, {{T}}, rowdot);
    if ({{NORMS}}) tc::store_head_dot(x, x, w, {{T}}, gan);
}
